//! The 4-bit types on Rivet alone. int4 and uint4 against ORT's CPU EP: casts through them, QuantizeLinear /
//! DequantizeLinear per tensor, axis and block with a Transpose between, and the pattern
//! weight-only quantized models use: a constant int4 weight, packed two a byte, blocked
//! along the reduction axis, dequantized into a MatMul. (ORT holds the 4-bit types two a
//! byte; Rivet unpacks them where they enter a fused node and packs them where they
//! leave it: the ONNX suite's int4 cases, in the conformance run, bind them at the edges.)
//! float4e2m1 against ONNX's table: ORT 1.32 has no kernel for it.

mod common;

use common::{assert_matches_ort, env, strict, vals};
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT};

const UINT4: i32 = 21;
const INT4: i32 = 22;

fn x(v: Vec<f32>) -> HostTensor {
    HostTensor::f32("x", &[v.len() as i64], v)
}

fn cast_chain(to: i32) -> Vec<u8> {
    // float4e2m1 is a Cast type from opset 23.
    ModelBuilder::new(if to == 23 { 23 } else { 21 })
        .input("x", FLOAT, &[Dim::Sym("n".into())])
        .node_with("Cast", "to4", &["x"], &["q"], &[("to", Attr::Int(to as i64))])
        .node_with("Cast", "back", &["q"], &["y"], &[("to", Attr::Int(FLOAT as i64))])
        .output("y", FLOAT, None)
        .build()
}

/// x -> Cast(int4 or uint4) -> Cast(float32): whole numbers (wrapped to four bits, as ORT
/// and ONNX's reference both do) equal to ORT; fractions and non-finite values as the
/// reference gives them (truncated toward zero, then wrapped; NaN and the infinities 0),
/// where ORT 1.32 rounds instead.
#[test]
fn casts_through_4_bit_integers_wrap() {
    let whole: Vec<f32> = (-40..=40).map(|v| v as f32).chain([100.0, -100.0, 1e6, 65536.0 + 7.0]).collect();
    for (to, name) in [(INT4, "int4"), (UINT4, "uint4")] {
        assert_matches_ort(&cast_chain(to), &[x(whole.clone())], 0.0, 0.0, &format!("Cast {name}"));
    }
    let parts = vec![-1.7, 7.9, 8.5, -8.6, 15.5, f32::NAN, f32::INFINITY, 3e19];
    for (to, want) in
        [(INT4, [-1.0, 7.0, -8.0, -8.0, -1.0, 0.0, 0.0, 0.0]), (UINT4, [15.0, 7.0, 8.0, 8.0, 15.0, 0.0, 0.0, 0.0])]
    {
        let mut rivet = harness::session(env(), &cast_chain(to), Arm::Rivet, &strict()).expect("Rivet session");
        let got = harness::run(&mut rivet, &[x(parts.clone())]).expect("Rivet run");
        assert_eq!(got[0].data, want, "Cast to type {to} of {parts:?}");
    }
}

/// Scale dims, scales, the Q/DQ attributes, and what the case is.
type Case = (Vec<i64>, Vec<f32>, Vec<(&'static str, Attr)>, &'static str);

/// x -> QuantizeLinear(int4 / uint4, per tensor, axis or block) -> Transpose ->
/// DequantizeLinear, equal to ORT.
#[test]
fn quantize_and_dequantize_through_4_bit_integers_match_ort() {
    let xs: Vec<f32> = vals(3, 2 * 4 * 6).into_iter().map(|v| v * 12.0).collect();
    for (code, zero, name) in [(INT4, 0xf9u8, "int4"), (UINT4, 0x83, "uint4")] {
        let cases: [Case; 3] = [
            (vec![], vec![0.75], vec![], "per tensor"),
            (vec![4], vec![0.5, 1.0, 1.5, 0.25], vec![("axis", Attr::Int(1))], "per axis"),
            (
                vec![2, 2, 6],
                (0..24).map(|k| 0.25 + k as f32 * 0.125).collect(),
                vec![("axis", Attr::Int(1)), ("block_size", Attr::Int(2))],
                "blocked",
            ),
        ];
        for (dims, scale, attrs, what) in cases {
            let n: i64 = dims.iter().product();
            // Zero points of -7 / 3 (int4) or 3 / 8 (uint4) alternating, packed two a byte.
            let packed: Vec<u8> = (0..(n as usize).div_ceil(2)).map(|_| zero).collect();
            let z = Attr::Tensor(code, dims.clone(), packed);
            let dq_attrs: Vec<(&str, Attr)> = attrs.iter().map(|(k, v)| (*k, v.clone())).collect();
            let model = ModelBuilder::new(21)
                .input("x", FLOAT, &[2.into(), 4.into(), 6.into()])
                .initializer("s", &dims, scale.clone())
                .node_with("Constant", "zero", &[], &["z"], &[("value", z)])
                .node_with("QuantizeLinear", "q", &["x", "s", "z"], &["q"], &attrs)
                .node_with("Transpose", "t", &["q"], &["qt"], &[("perm", Attr::Ints(vec![1, 0, 2]))])
                .node_with("Transpose", "t2", &["qt"], &["qb"], &[("perm", Attr::Ints(vec![1, 0, 2]))])
                .node_with("DequantizeLinear", "dq", &["qb", "s", "z"], &["y"], &dq_attrs)
                .output("y", FLOAT, None)
                .build();
            let inputs = [HostTensor::f32("x", &[2, 4, 6], xs.clone())];
            assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("QuantizeLinear {name} {what}"));
        }
    }
}

/// The weight-only pattern: y = MatMul(x, DequantizeLinear(W)) with W a constant int4
/// [K, N] (an odd count of elements: the last byte half used), blocks of 16 along K, on
/// static and symbolic rows, against the product computed here in f64. (Not against ORT:
/// its optimizer fuses the pair into MatMulNBits, which is off by up to 3.6e-3 here; with
/// its optimizations off ORT is within 2e-7 of the same product.)
#[test]
fn a_blocked_int4_weight_dequantized_into_a_matmul_is_exact() {
    let (k, n, block, m) = (48i64, 5i64, 16i64, 3i64);
    let w: Vec<i8> = (0..k * n).map(|i| ((i * 7 + 3) % 16 - 8) as i8).collect();
    let mut packed = vec![0u8; w.len().div_ceil(2)];
    for (i, &v) in w.iter().enumerate() {
        packed[i / 2] |= ((v as u8) & 0xf) << (4 * (i % 2));
    }
    let scales: Vec<f32> = (0..(k / block) * n).map(|i| 0.01 + i as f32 * 0.003).collect();
    let xs = vals(9, (m * k) as usize);
    let (k, n, block) = (k as usize, n as usize, block as usize);
    let want: Vec<f64> = (0..m as usize * n)
        .map(|o| {
            let (r, j) = (o / n, o % n);
            (0..k).map(|i| xs[r * k + i] as f64 * w[i * n + j] as f64 * scales[(i / block) * n + j] as f64).sum()
        })
        .collect();
    for rows in [Dim::Fixed(m), Dim::Sym("m".into())] {
        let (ki, ni) = (k as i64, n as i64);
        let model = ModelBuilder::new(21)
            .input("x", FLOAT, &[rows.clone(), ki.into()])
            .initializer("s", &[ki / block as i64, ni], scales.clone())
            .node_with(
                "Constant",
                "weight",
                &[],
                &["wq"],
                &[("value", Attr::Tensor(INT4, vec![ki, ni], packed.clone()))],
            )
            .node_with(
                "DequantizeLinear",
                "dq",
                &["wq", "s"],
                &["w"],
                &[("axis", Attr::Int(0)), ("block_size", Attr::Int(block as i64))],
            )
            .node("MatMul", "mm", &["x", "w"], &["y"])
            .output("y", FLOAT, None)
            .build();
        let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("Rivet session");
        let got = harness::run(&mut rivet, &[HostTensor::f32("x", &[m, ki], xs.clone())]).expect("Rivet run");
        for (o, (&g, &w)) in got[0].data.iter().zip(&want).enumerate() {
            assert!((g - w).abs() <= 1e-5 * w.abs() + 1e-6, "rows {rows:?}, element {o}: {g} against {w}");
        }
    }
}

/// x -> Cast(float4e2m1) -> Cast(float32) and x -> QuantizeLinear(float4e2m1, scale 0.5)
/// -> DequantizeLinear, against ONNX's table (nearest even, always saturating to ±6, NaN
/// to -0): ORT 1.32 has no kernel for either, so with fallback off these run on Rivet alone.
#[test]
fn float4e2m1_rounds_to_even_and_saturates() {
    let xs = vec![
        0.25,
        0.26,
        0.75,
        1.25,
        1.75,
        2.5,
        3.5,
        5.0,
        5.1,
        1e6,
        f32::NEG_INFINITY,
        -0.25,
        -3.2,
        f32::NAN,
        -f32::NAN,
    ];
    // A NaN gives -0, one with its sign bit set +0 (the reference's, ml_dtypes', rule).
    let want_cast = [0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, -6.0, -0.0, -3.0, -0.0, 0.0];
    let mut rivet = harness::session(env(), &cast_chain(23), Arm::Rivet, &strict()).expect("Rivet session");
    let got = harness::run(&mut rivet, &[x(xs.clone())]).expect("Rivet run");
    assert_eq!(got[0].data, want_cast, "Cast float4e2m1 of {xs:?}");
    let signs: Vec<bool> = got[0].data.iter().map(|v| v.is_sign_negative()).collect();
    assert_eq!((signs[11], signs[13], signs[14]), (true, true, false), "-0.25 and NaN give -0, -NaN +0");

    let model = ModelBuilder::new(23)
        .input("x", FLOAT, &[Dim::Sym("n".into())])
        .initializer("s", &[], vec![0.5])
        .node_with("QuantizeLinear", "q", &["x", "s"], &["q"], &[("output_dtype", Attr::Int(23))])
        .node("DequantizeLinear", "dq", &["q", "s"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("Rivet session");
    let got = harness::run(&mut rivet, &[x(vec![0.3, 1.2, -2.6, 100.0, 0.125, -0.0])]).expect("Rivet run");
    // x / 0.5 = 0.6, 2.4, -5.2, 200, 0.25, -0 -> 0.5, 2, -6, 6, 0, +0 (the reference adds
    // the zero point) -> times 0.5.
    assert_eq!(got[0].data, [0.25, 1.0, -3.0, 3.0, 0.0, 0.0]);
    assert!(!got[0].data[5].is_sign_negative(), "-0 quantizes to +0");
    // With a zero point of -0 (the reference adds it), -0 stays -0.
    let model = ModelBuilder::new(23)
        .input("x", FLOAT, &[Dim::Sym("n".into())])
        .initializer("s", &[], vec![0.5])
        .node_with("Constant", "zero", &[], &["z"], &[("value", Attr::Tensor(23, vec![], vec![0x8]))])
        .node("QuantizeLinear", "q", &["x", "s", "z"], &["q"])
        .node("DequantizeLinear", "dq", &["q", "s", "z"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("Rivet session");
    let got = harness::run(&mut rivet, &[x(vec![-0.0, 1.0])]).expect("Rivet run");
    assert_eq!(got[0].data, [0.0, 1.0]);
    assert!(got[0].data[0].is_sign_negative(), "-0 + -0 is -0");
}

/// TensorScatter (opset 24) writes into a cache of any type Rivet holds: int4 and float8
/// caches (made and read back through Casts) take the update at the write index.
#[test]
fn tensor_scatter_writes_4_bit_and_8_bit_caches() {
    for (code, name) in [(INT4, "int4"), (UINT4, "uint4"), (17, "float8e4m3fn"), (23, "float4e2m1")] {
        let to = |t: i32| vec![("to", Attr::Int(t as i64))];
        let model = ModelBuilder::new(24)
            .input("past", FLOAT, &[1.into(), 4.into(), 2.into()])
            .input("upd", FLOAT, &[1.into(), 1.into(), 2.into()])
            .node_with("Cast", "p4", &["past"], &["p"], &to(code))
            .node_with("Cast", "u4", &["upd"], &["u"], &to(code))
            .node("TensorScatter", "scatter", &["p", "u"], &["s"])
            .node_with("Cast", "back", &["s"], &["y"], &to(FLOAT))
            .output("y", FLOAT, None)
            .build();
        let past: Vec<f32> = vec![1.0, 2.0, 3.0, 4.0, 0.0, 6.0, 1.0, 2.0];
        let inputs =
            [HostTensor::f32("past", &[1, 4, 2], past.clone()), HostTensor::f32("upd", &[1, 1, 2], vec![4.0, 0.5])];
        let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("Rivet session");
        let got = harness::run(&mut rivet, &inputs).expect("Rivet run");
        // The update lands at index 0 (no write_indices); 0.5 truncates to 0 in the integers.
        let half = if code == INT4 || code == UINT4 { 0.0 } else { 0.5 };
        let mut want = past;
        want[..2].copy_from_slice(&[4.0, half]);
        assert_eq!(got[0].data, want.iter().map(|&v| v as f64).collect::<Vec<_>>(), "{name}");
    }
}

/// float64 to int4: values outside int32's range give 0, as ORT and ONNX's reference
/// (which convert through int32) give; inside it, truncated and wrapped.
#[test]
fn float64_to_int4_goes_through_int32() {
    let model = ModelBuilder::new(21)
        .input("x", rivet::model::DOUBLE, &[Dim::Sym("n".into())])
        .node_with("Cast", "to4", &["x"], &["q"], &[("to", Attr::Int(INT4 as i64))])
        .node_with("Cast", "back", &["q"], &["y"], &[("to", Attr::Int(FLOAT as i64))])
        .output("y", FLOAT, None)
        .build();
    let xs = vec![2147483653.0, -2147483653.0, 4294967295.0, 1e10 + 1.0, 2147483647.0, -2147483648.0, -9.0];
    let inputs = [HostTensor::typed("x", ort::value::TensorElementType::Float64, &[xs.len() as i64], xs)];
    assert_matches_ort(&model, &inputs, 0.0, 0.0, "Cast float64 -> int4");
    // Just past int32's largest value: 0 by the reference (ORT rounds .5 and up to 2^31).
    let past = vec![2147483647.25, 2147483647.75];
    let inputs = [HostTensor::typed("x", ort::value::TensorElementType::Float64, &[2], past)];
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("Rivet session");
    assert_eq!(harness::run(&mut rivet, &inputs).expect("Rivet run")[0].data, [0.0, 0.0]);
}

/// int2 and uint2 (opset 25; ORT numbers them 25 and 24 where ONNX says 26 and 25, so a
/// Cast's `to` is mapped): whole numbers through a Cast wrap to two bits, and
/// QuantizeLinear -> DequantizeLinear per axis saturates to -2..1 / 0..3, equal to ORT.
#[test]
fn two_bit_integers_match_ort() {
    const UINT2_ONNX: i64 = 25;
    const INT2_ONNX: i64 = 26;
    let whole: Vec<f32> = (-9..=9).map(|v| v as f32).collect();
    for (to, zero, name) in [(INT2_ONNX, 0b11_00_01_11u8, "int2"), (UINT2_ONNX, 0b10_01_00_11, "uint2")] {
        let model = ModelBuilder::new(25)
            .input("x", FLOAT, &[Dim::Sym("n".into())])
            .node_with("Cast", "to2", &["x"], &["q"], &[("to", Attr::Int(to))])
            .node_with("Cast", "back", &["q"], &["y"], &[("to", Attr::Int(FLOAT as i64))])
            .output("y", FLOAT, None)
            .build();
        assert_matches_ort(&model, &[x(whole.clone())], 0.0, 0.0, &format!("Cast {name}"));
        // Zero points (-1, 1, 0, -1 for int2; 3, 0, 1, 2 for uint2), packed four a byte.
        let model = ModelBuilder::new(25)
            .input("x", FLOAT, &[2.into(), 4.into(), 3.into()])
            .initializer("s", &[4], vec![0.5, 1.0, 2.0, 0.25])
            .node_with("Constant", "zero", &[], &["z"], &[("value", Attr::Tensor(to as i32, vec![4], vec![zero]))])
            .node_with("QuantizeLinear", "q", &["x", "s", "z"], &["q"], &[("axis", Attr::Int(1))])
            .node_with("DequantizeLinear", "dq", &["q", "s", "z"], &["y"], &[("axis", Attr::Int(1))])
            .output("y", FLOAT, None)
            .build();
        let xs: Vec<f32> = vals(21, 24).into_iter().map(|v| v * 3.0).collect();
        assert_matches_ort(&model, &[HostTensor::f32("x", &[2, 4, 3], xs)], 0.0, 0.0, &format!("Q/DQ {name}"));
    }
}
