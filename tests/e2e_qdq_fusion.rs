//! com.microsoft QLinearAdd, and the quantized Add and MaxPool groups `fuse_qdq` runs on
//! the integers, on Rivet alone: each output is exactly the float32 arithmetic of the
//! DequantizeLinear, Add or MaxPool and QuantizeLinear it stands for (computed here), and
//! within one quantization step of ORT's (ORT's QLinearAdd scales each input by `s / sc`
//! first, which can land a half the other way).

mod common;

use common::{env, ort_session, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT, INT8, UINT8};

/// `(v - z) · s` in float32, as DequantizeLinear.
fn dq(v: f64, s: f32, z: i32) -> f32 {
    (v as i32 - z) as f32 * s
}

/// `clamp(round_half_even(x / s) + z)` in float32, as QuantizeLinear.
fn q(x: f32, s: f32, z: i32, code: i32) -> f64 {
    let (lo, hi) = if code == UINT8 { (0.0, 255.0) } else { (-128.0, 127.0) };
    ((x / s).round_ties_even() as f64 + z as f64).clamp(lo, hi)
}

/// A constant node `name` holding one value of type `code`.
fn constant(b: ModelBuilder, name: &str, code: i32, value: f64) -> ModelBuilder {
    let bytes = match code {
        FLOAT => (value as f32).to_le_bytes().to_vec(),
        UINT8 => vec![value as u8],
        INT8 => vec![value as i8 as u8],
        _ => unreachable!(),
    };
    b.node_with("Constant", &format!("const_{name}"), &[], &[name], &[("value", Attr::Tensor(code, vec![], bytes))])
}

fn ints(code: i32, seed: u64, n: usize) -> Vec<f64> {
    let (lo, hi) = if code == UINT8 { (0.0, 256.0) } else { (-128.0, 128.0) };
    harness::values(seed, n, lo, hi).into_iter().map(f64::floor).collect()
}

fn elem(code: i32) -> E {
    if code == UINT8 {
        E::Uint8
    } else {
        E::Int8
    }
}

fn tensor(name: &str, code: i32, shape: &[i64], data: Vec<f64>) -> HostTensor {
    HostTensor { name: name.into(), elem: elem(code), shape: shape.to_vec(), data }
}

fn dims(shape: &[i64]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::from(d)).collect()
}

/// Rivet's output (Rivet alone) and ORT's, which must differ by at most one step.
fn rivet_and_ort(model: &[u8], inputs: &[HostTensor], what: &str) -> Vec<f64> {
    let mut s = harness::session(env(), model, Arm::Rivet, &strict()).expect("Rivet session");
    let got = harness::run(&mut s, inputs).expect("Rivet run").remove(0).data;
    let want = harness::run(&mut ort_session(model), inputs).expect("ORT run").remove(0).data;
    let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
    assert!(worst <= 1.0 && got.len() == want.len(), "{what}: {worst} steps from ORT");
    got
}

#[test]
fn qlinear_add_is_the_float_arithmetic_of_its_three_ops_and_near_orts() {
    let (sa, sb, sc) = (0.021f32, 0.0137f32, 0.029f32);
    for code in [UINT8, INT8] {
        let (za, zb, zc) = if code == UINT8 { (121, 98, 130) } else { (-3, 5, 0) };
        for (ashape, bshape) in
            [(&[2i64, 3, 5, 7][..], &[2i64, 3, 5, 7][..]), (&[2, 3, 5, 7], &[3, 1, 1]), (&[1, 3, 4, 4], &[1])]
        {
            let mut b = ModelBuilder::new(17).domain_opset("com.microsoft", 1);
            b = b.input("a", code, &dims(ashape)).input("b", code, &dims(bshape));
            for (name, t, v) in [
                ("sa", FLOAT, sa as f64),
                ("za", code, za as f64),
                ("sb", FLOAT, sb as f64),
                ("zb", code, zb as f64),
                ("sc", FLOAT, sc as f64),
                ("zc", code, zc as f64),
            ] {
                b = constant(b, name, t, v);
            }
            let model = b
                .node_in_domain_with(
                    "com.microsoft",
                    "QLinearAdd",
                    "qadd",
                    &["a", "sa", "za", "b", "sb", "zb", "sc", "zc"],
                    &["c"],
                    &[],
                )
                .output("c", code, None)
                .build();
            let (na, nb) = (ashape.iter().product::<i64>() as usize, bshape.iter().product::<i64>() as usize);
            let (xa, xb) = (ints(code, 3, na), ints(code, 4, nb));
            let what = format!("QLinearAdd {code} {ashape:?} + {bshape:?}");
            let got = rivet_and_ort(
                &model,
                &[tensor("a", code, ashape, xa.clone()), tensor("b", code, bshape, xb.clone())],
                &what,
            );
            // B broadcast: the shapes here put B's elements along axis 1 (or one value).
            let b_at = |i: usize| {
                if nb == na {
                    i
                } else if nb == 1 {
                    0
                } else {
                    (i / 35) % 3
                }
            };
            let want: Vec<f64> =
                (0..na).map(|i| q(dq(xa[i], sa, za) + dq(xb[b_at(i)], sb, zb), sc, zc, code)).collect();
            assert_eq!(got, want, "{what}");
        }
    }
}

#[test]
fn quantized_add_and_max_pool_groups_give_the_float_arithmetic_of_their_ops() {
    let shape = [1i64, 4, 9, 9];
    let (sa, sb, sm) = (0.02f32, 0.03f32, 0.05f32);
    let (za, zm) = (100, 7);
    let mut b = ModelBuilder::new(17).input("a", UINT8, &dims(&shape)).input("b", UINT8, &dims(&shape));
    for (name, t, v) in [
        ("sa", FLOAT, sa as f64),
        ("za", UINT8, za as f64),
        ("sb", FLOAT, sb as f64),
        ("sm", FLOAT, sm as f64),
        ("zm", UINT8, zm as f64),
    ] {
        b = constant(b, name, t, v);
    }
    let pool = [
        ("kernel_shape", Attr::Ints(vec![3, 3])),
        ("strides", Attr::Ints(vec![2, 2])),
        ("pads", Attr::Ints(vec![1, 1, 1, 1])),
    ];
    let model = b
        .node("DequantizeLinear", "dq_a", &["a", "sa", "za"], &["af"])
        .node("DequantizeLinear", "dq_b", &["b", "sb"], &["bf"])
        .node("Add", "add", &["af", "bf"], &["sf"])
        .node("QuantizeLinear", "q_add", &["sf", "sm", "zm"], &["m"])
        .node("DequantizeLinear", "dq_m", &["m", "sm", "zm"], &["mf"])
        .node_with("MaxPool", "pool", &["mf"], &["pf"], &pool)
        .node("QuantizeLinear", "q_pool", &["pf", "sm", "zm"], &["y"])
        .output("y", UINT8, None)
        .build();
    let n = shape.iter().product::<i64>() as usize;
    let (xa, xb) = (ints(UINT8, 5, n), ints(UINT8, 6, n));
    let got = rivet_and_ort(
        &model,
        &[tensor("a", UINT8, &shape, xa.clone()), tensor("b", UINT8, &shape, xb.clone())],
        "Add, MaxPool",
    );
    // The sum quantized, then the 3x3 stride-2 maximum (padding excluded) of its values.
    let m: Vec<f64> = (0..n).map(|i| q(dq(xa[i], sa, za) + dq(xb[i], sb, 0), sm, zm, UINT8)).collect();
    let mut want = Vec::new();
    for c in 0..4 {
        for oy in 0..5usize {
            for ox in 0..5usize {
                let mut best = f32::NEG_INFINITY;
                for (y, x) in (0..3).flat_map(|ky| (0..3).map(move |kx| (2 * oy + ky, 2 * ox + kx))) {
                    if (1..10).contains(&y) && (1..10).contains(&x) {
                        best = best.max(dq(m[(c * 9 + y - 1) * 9 + x - 1], sm, zm));
                    }
                }
                want.push(q(best, sm, zm, UINT8));
            }
        }
    }
    assert_eq!(got, want);
}
