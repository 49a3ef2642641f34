//! The com.microsoft quantized ops of ORT's QOperator format that Rivet runs besides
//! QLinearAdd (`e2e_quant`): QGemm and QLinearGlobalAveragePool against ORT's CPU EP,
//! every output compared exactly, on static and symbolic shapes; bad inputs are errors
//! naming the node, the session still usable.

mod common;

use common::quant::{dims, ints, len, matches_ort_if_it_runs, tensor, One};
use common::{env, strict};
use rivet::harness::{self, Arm};
use rivet::model::{Attr, Dim, FLOAT, INT32, INT8, UINT8};

/// A QGemm case: A's and B's types, transA, transB, per-column B parameters, C's shape
/// (if any), an 8-bit output (else float32) and alpha.
struct Case {
    at: i32,
    bt: i32,
    trans_a: bool,
    trans_b: bool,
    per_column: bool,
    c: Option<Vec<i64>>,
    quantized: bool,
    alpha: f32,
}

#[test]
fn qgemm_matches_ort_with_transposes_per_column_weights_bias_and_either_output() {
    let (m, k, n) = (5i64, 37i64, 20i64);
    let case = |at, bt, trans_a, trans_b, per_column, c: Option<&[i64]>, quantized, alpha| Case {
        at,
        bt,
        trans_a,
        trans_b,
        per_column,
        c: c.map(<[i64]>::to_vec),
        quantized,
        alpha,
    };
    let cases = [
        case(UINT8, INT8, false, true, true, Some(&[n]), true, 1.0),
        case(UINT8, UINT8, false, false, false, None, true, 1.0),
        case(UINT8, INT8, true, false, false, Some(&[m, n]), false, 0.5),
        case(UINT8, UINT8, true, true, true, Some(&[1, n]), false, 1.0),
        case(INT8, INT8, false, true, true, Some(&[m, 1]), true, 2.0),
        case(INT8, INT8, false, false, false, Some(&[]), false, 1.0),
    ];
    let mut compared = 0;
    for c in &cases {
        let a_shape = if c.trans_a { vec![k, m] } else { vec![m, k] };
        let b_shape = if c.trans_b { vec![n, k] } else { vec![k, n] };
        let cols = if c.per_column { n as usize } else { 1 };
        let pshape: Vec<i64> = if c.per_column { vec![n] } else { vec![] };
        let sb: Vec<f64> = (0..cols).map(|j| 0.002 + 0.0003 * j as f64).collect();
        let zb: Vec<f64> = if c.bt == INT8 { vec![0.0; cols] } else { ints(c.bt, 40, cols) };
        // A symbolic leading dimension of A.
        let mut a_dims: Vec<Dim> = dims(&a_shape);
        a_dims[0] = "R".into();
        let mut one = One::new(17)
            .input("a", c.at, &a_dims)
            .constant("sa", FLOAT, &[], &[0.011])
            .constant("za", c.at, &[], &[if c.at == UINT8 { 121.0 } else { -3.0 }])
            .constant("b", c.bt, &b_shape, &ints(c.bt, 41, len(&b_shape)))
            .constant("sb", FLOAT, &pshape, &sb)
            .constant("zb", c.bt, &pshape, &zb);
        one = match &c.c {
            Some(shape) => one.constant(
                "c",
                INT32,
                shape,
                &ints(INT32, 42, len(shape)).iter().map(|v| (v / 20.0).floor()).collect::<Vec<_>>(),
            ),
            None => one.skip(),
        };
        let yt = if c.quantized { c.at } else { FLOAT };
        if c.quantized {
            one = one.constant("sy", FLOAT, &[], &[0.17]).constant(
                "zy",
                yt,
                &[],
                &[if yt == UINT8 { 99.0 } else { 4.0 }],
            );
        }
        let attrs = [
            ("alpha", Attr::Float(c.alpha)),
            ("transA", Attr::Int(c.trans_a as i64)),
            ("transB", Attr::Int(c.trans_b as i64)),
        ];
        let model = one.node_ms("QGemm", &attrs, &[("y", yt)]);
        let inputs = [tensor("a", c.at, &a_shape, ints(c.at, 43, len(&a_shape)))];
        let what = format!(
            "QGemm {}x{} transA {} transB {} per column {} C {:?} quantized {} alpha {}",
            c.at, c.bt, c.trans_a, c.trans_b, c.per_column, c.c, c.quantized, c.alpha
        );
        compared += usize::from(matches_ort_if_it_runs(&model, &inputs, &what));
    }
    assert!(compared >= 5, "only {compared} cases ran on ORT");
}

#[test]
fn qlinear_global_average_pool_matches_ort_channels_first_and_last() {
    let mut compared = 0;
    for t in [UINT8, INT8] {
        for channels_last in [0, 1] {
            for shape in [[2i64, 5, 7, 9].as_slice(), &[1, 3, 10], &[3, 70, 2, 2]] {
                // A symbolic batch.
                let mut x_dims = dims(shape);
                x_dims[0] = "N".into();
                let model = One::new(17)
                    .input("x", t, &x_dims)
                    .constant("sx", FLOAT, &[], &[0.05])
                    .constant("zx", t, &[], &[if t == UINT8 { 128.0 } else { -7.0 }])
                    .constant("sy", FLOAT, &[], &[0.013])
                    .constant("zy", t, &[], &[if t == UINT8 { 111.0 } else { 5.0 }])
                    .node_ms("QLinearGlobalAveragePool", &[("channels_last", Attr::Int(channels_last))], &[("y", t)]);
                let inputs = [tensor("x", t, shape, ints(t, 50, len(shape)))];
                let what = format!("QLinearGlobalAveragePool {t} channels_last {channels_last} {shape:?}");
                compared += usize::from(matches_ort_if_it_runs(&model, &inputs, &what));
            }
        }
    }
    assert!(compared >= 6, "only {compared} cases ran on ORT");
}

#[test]
fn bad_qgemm_and_pool_inputs_are_errors_naming_the_node_and_the_session_still_runs() {
    // A's inner size differs from B's at Run.
    let model = One::new(17)
        .input("a", UINT8, &[2.into(), "K".into()])
        .constant("sa", FLOAT, &[], &[1.0])
        .constant("za", UINT8, &[], &[0.0])
        .input("b", UINT8, &["L".into(), 2.into()])
        .constant("sb", FLOAT, &[], &[1.0])
        .constant("zb", UINT8, &[], &[0.0])
        .node_ms("QGemm", &[], &[("y", FLOAT)]);
    let mut s = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let bad = [tensor("a", UINT8, &[2, 3], vec![1.0; 6]), tensor("b", UINT8, &[2, 2], vec![1.0; 4])];
    let err = harness::run(&mut s, &bad).expect_err("K differs");
    assert!(err.contains("node 'q' (QGemm)") && err.contains("op(B)"), "{err}");
    let good = [tensor("a", UINT8, &[2, 3], vec![1.0; 6]), tensor("b", UINT8, &[3, 2], vec![2.0; 6])];
    assert_eq!(harness::run(&mut s, &good).expect("still runs")[0].data, [6.0; 4]);

    // B's scale per column but its zero point one value: ORT's kernel refuses it too
    // (found by review: it ran). And transA = 2 transposes, as in ORT.
    let model = One::new(17)
        .input("a", UINT8, &dims(&[3, 2]))
        .constant("sa", FLOAT, &[], &[1.0])
        .constant("za", UINT8, &[], &[0.0])
        .constant("b", UINT8, &[3, 2], &[2.0; 6])
        .input("sb", FLOAT, &["S".into()])
        .constant("zb", UINT8, &[1], &[0.0])
        .node_ms("QGemm", &[("transA", Attr::Int(2))], &[("y", FLOAT)]);
    let mut s = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session (transA = 2 is 1)");
    let a = tensor("a", UINT8, &[3, 2], vec![1.0; 6]);
    let err = harness::run(&mut s, &[a.clone(), harness::HostTensor::f32("sb", &[2], vec![1.0, 2.0])])
        .expect_err("scale per column, zero point one value");
    assert!(err.contains("node 'q' (QGemm)") && err.contains("one shape"), "{err}");
    let out = harness::run(&mut s, &[a, harness::HostTensor::f32("sb", &[1], vec![0.5])]).expect("still runs");
    assert_eq!(out[0].data, [3.0; 4]);

    // A scale out of the kernel's range (x's scale over y's and the plane's size >= 256).
    let model = One::new(17)
        .input("x", UINT8, &dims(&[1, 2, 2, 2]))
        .input("sx", FLOAT, &[])
        .constant("zx", UINT8, &[], &[0.0])
        .constant("sy", FLOAT, &[], &[1.0])
        .constant("zy", UINT8, &[], &[0.0])
        .node_ms("QLinearGlobalAveragePool", &[], &[("y", UINT8)]);
    let mut s = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let x = tensor("x", UINT8, &[1, 2, 2, 2], (1..=8).map(f64::from).collect());
    let err = harness::run(&mut s, &[x.clone(), harness::HostTensor::f32("sx", &[], vec![4096.0])]).expect_err("scale");
    assert!(err.contains("node 'q' (QLinearGlobalAveragePool)") && err.contains("range"), "{err}");
    let out = harness::run(&mut s, &[x, harness::HostTensor::f32("sx", &[], vec![1.0])]).expect("still runs");
    assert_eq!(out[0].data, [2.0, 6.0]); // (1+2+3+4)/4 = 2.5 and (5+..+8)/4 = 6.5, to even
}

/// A classifier head as ORT's quantizer writes it in QDQ form (`DequantizeLinear` of the
/// input, of per-column int8 weights and of the int32 bias, `Gemm` with transB,
/// `QuantizeLinear`): `fuse_qdq` makes it one QGemm, as ORT's own QDQ transformer does,
/// so the output is ORT's exactly.
#[test]
fn a_quantized_gemm_group_runs_as_orts_qgemm() {
    let (m, k, n) = (64i64, 600i64, 48i64);
    let sw: Vec<f64> = (0..n).map(|j| 0.003 + 0.0002 * j as f64).collect();
    let sx = 0.021f64;
    // The bias's scale is x_scale · w_scale in float32, as the quantizer writes it.
    let sb: Vec<f64> = sw.iter().map(|&w| (sx as f32 * w as f32) as f64).collect();
    let bias: Vec<f64> = ints(INT32, 70, n as usize).iter().map(|v| (v / 100.0).floor()).collect();
    let model = One::new(17)
        .input("xq", UINT8, &["M".into(), k.into()])
        .constant("sx", FLOAT, &[], &[sx])
        .constant("zx", UINT8, &[], &[118.0])
        .constant("wq", INT8, &[n, k], &ints(INT8, 71, (n * k) as usize))
        .constant("sw", FLOAT, &[n], &sw)
        .constant("zw", INT8, &[n], &vec![0.0; n as usize])
        .constant("bq", INT32, &[n], &bias)
        .constant("sb", FLOAT, &[n], &sb)
        .constant("sy", FLOAT, &[], &[0.5])
        .constant("zy", UINT8, &[], &[131.0]);
    let b = model.b;
    let b = b
        .node("DequantizeLinear", "dq_x", &["xq", "sx", "zx"], &["x"])
        .node_with("DequantizeLinear", "dq_w", &["wq", "sw", "zw"], &["w"], &[("axis", Attr::Int(0))])
        .node_with("DequantizeLinear", "dq_b", &["bq", "sb"], &["bf"], &[("axis", Attr::Int(0))])
        .node_with("Gemm", "head", &["x", "w", "bf"], &["yf"], &[("transB", Attr::Int(1))])
        .node("QuantizeLinear", "q", &["yf", "sy", "zy"], &["y"])
        .output("y", UINT8, None)
        .build();
    let inputs = [tensor("xq", UINT8, &[m, k], ints(UINT8, 72, (m * k) as usize))];
    assert!(matches_ort_if_it_runs(&b, &inputs, "DQ -> Gemm -> Q"), "ORT ran the model");
}
