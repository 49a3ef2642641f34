//! Einsum contractions that Rivet runs on the GEMM (two float32 or half operands whose
//! axes make a batched matrix product: in place in either transpose, copied into order,
//! the operands exchanged for the output's order), against ORT's CPU EP, on static and
//! symbolic shapes; and the ones it leaves to the loop, with them.

mod common;

use common::{assert_matches_ort, env, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT, FLOAT16};

const CASES: [(&str, &[&[i64]]); 10] = [
    ("ij,jk->ik", &[&[64, 64], &[64, 64]]),
    ("ij,kj->ik", &[&[33, 70], &[17, 70]]),
    ("ji,jk->ik", &[&[40, 20], &[40, 30]]),
    ("ik,kj->ji", &[&[20, 30], &[30, 17]]),
    ("bhqd,bhkd->bhqk", &[&[2, 3, 16, 8], &[2, 3, 24, 8]]),
    ("bhqk,bhkd->bhqd", &[&[2, 3, 16, 24], &[2, 3, 24, 8]]),
    ("bsd,df->bsf", &[&[2, 5, 16], &[16, 24]]),
    ("hbqd,bhkd->bhqk", &[&[3, 2, 9, 8], &[2, 3, 11, 8]]),
    ("...ij,...jk->...ik", &[&[2, 12, 9], &[2, 9, 10]]),
    // The loop's: a label summed in one operand, and the output out of a product's order.
    ("bij,bjk->ibk", &[&[2, 12, 9], &[2, 9, 10]]),
];

fn model(eq: &str, shapes: &[&[i64]], symbolic: bool, t: i32) -> Vec<u8> {
    let mut m = ModelBuilder::new(12);
    for (k, s) in shapes.iter().enumerate() {
        let dims: Vec<Dim> = s
            .iter()
            .enumerate()
            .map(|(i, &d)| if symbolic && i == 0 { format!("s{k}").as_str().into() } else { d.into() })
            .collect();
        m = m.input(&format!("x{k}"), t, &dims);
    }
    m.node_with("Einsum", "op", &["x0", "x1"], &["y"], &[("equation", Attr::Str(eq.into()))])
        .output("y", t, None)
        .build()
}

fn inputs(shapes: &[&[i64]], e: E) -> Vec<HostTensor> {
    let mut ins = vec![];
    for (k, s) in shapes.iter().enumerate() {
        let n = s.iter().product::<i64>() as usize;
        ins.push(HostTensor::typed(&format!("x{k}"), e, s, harness::values(k as u64 + 60, n, -1.0, 1.0)));
    }
    ins
}

#[test]
fn float32_contractions_on_the_gemm_match_ort() {
    for (eq, shapes) in CASES {
        for symbolic in [false, true] {
            let what = format!("Einsum {eq} (symbolic {symbolic})");
            assert_matches_ort(&model(eq, shapes, symbolic, FLOAT), &inputs(shapes, E::Float32), 1e-4, 1e-5, &what);
        }
    }
}

/// float16 operands (cast from float32 in the model) run in float32 between
/// conversions: against ORT's float32 result, to float16's precision.
#[test]
fn float16_contractions_match_ort() {
    for (eq, shapes) in CASES {
        let mut m = ModelBuilder::new(12);
        for (k, s) in shapes.iter().enumerate() {
            let dims: Vec<Dim> = s.iter().map(|&d| d.into()).collect();
            let (x, h) = (format!("x{k}"), format!("h{k}"));
            m = m.input(&x, FLOAT, &dims).node_with(
                "Cast",
                &format!("c{k}"),
                &[&x],
                &[&h],
                &[("to", Attr::Int(FLOAT16 as i64))],
            );
        }
        let with_casts = m
            .node_with("Einsum", "op", &["h0", "h1"], &["hy"], &[("equation", Attr::Str(eq.into()))])
            .node_with("Cast", "back", &["hy"], &["y"], &[("to", Attr::Int(FLOAT as i64))])
            .output("y", FLOAT, None)
            .build();
        let ins = inputs(shapes, E::Float32);
        let mut rivet = harness::session(env(), &with_casts, Arm::Rivet, &strict()).expect("Rivet session");
        let mut ort = common::ort_session(&model(eq, shapes, false, FLOAT));
        let got = harness::run(&mut rivet, &ins).expect("Rivet run");
        let want = harness::run(&mut ort, &ins).expect("ORT run");
        harness::compare(&got, &want, 4e-3, 4e-3).unwrap_or_else(|e| panic!("Einsum {eq} float16: {e}"));
    }
}
