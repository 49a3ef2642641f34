//! The quantization ops against ORT's CPU EP, every output compared exactly (rtol = atol =
//! 0): QuantizeLinear and DequantizeLinear (per tensor, per axis, blocked; 8- and 16-bit
//! and int32), DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger and
//! QLinearConv, on static and symbolic shapes; bad inputs are errors naming the node; and,
//! with CPU fallback on, the Q/DQ nodes of groups ORT fuses stay ORT's.

mod common;

use common::quant::{dims, ints, len, matches_ort_if_it_runs, tensor, to_quantize, One};
use common::{assert_matches_ort, env, ort_session, strict};
use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT, FLOAT16, INT16, INT32, INT8, UINT16, UINT8};

#[test]
fn quantize_linear_per_tensor_matches_ort_for_each_type_and_opset() {
    let shape = [3, 10];
    for (opset, code) in [(10, UINT8), (13, INT8), (19, UINT8), (21, UINT16), (21, INT16), (23, INT8), (25, UINT8)] {
        for zp in [None, Some(if code == UINT8 || code == UINT16 { 7.0 } else { -3.0 })] {
            if zp.is_none() && code != UINT8 {
                continue; // without a zero point the output is uint8
            }
            let mut m = One::new(opset).input("x", FLOAT, &["N".into(), 10.into()]).input("s", FLOAT, &[]);
            if let Some(z) = zp {
                m = m.constant("z", code, &[], &[z]);
            }
            let model = m.node("QuantizeLinear", &[], &[("y", code)]);
            let scale = 0.25;
            let inputs = [tensor("x", FLOAT, &shape, to_quantize(30, scale, 1)), tensor("s", FLOAT, &[], vec![scale])];
            assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("QuantizeLinear-{opset} to {code} zp {zp:?}"));
        }
    }
}

#[test]
fn quantize_and_dequantize_per_axis_match_ort() {
    let shape = [2, 3, 4];
    for (axis, dim) in [(1, 3), (-1, 4), (0, 2)] {
        for code in [UINT8, INT8, INT16] {
            let opset = if code == INT16 { 21 } else { 13 };
            let scales: Vec<f64> = (0..dim).map(|i| 0.5 + 0.25 * i as f64).collect();
            let zps: Vec<f64> = ints(code, 3, dim as usize).into_iter().map(|z| (z / 4.0).floor()).collect();
            let attrs = [("axis", Attr::Int(axis))];
            let q = One::new(opset)
                .input("x", FLOAT, &dims(&shape))
                .constant("s", FLOAT, &[dim], &scales)
                .constant("z", code, &[dim], &zps)
                .node("QuantizeLinear", &attrs, &[("y", code)]);
            let x = to_quantize(len(&shape), 0.5, 4);
            assert_matches_ort(&q, &[tensor("x", FLOAT, &shape, x)], 0.0, 0.0, &format!("Q axis {axis} {code}"));
            let dq = One::new(opset)
                .input("x", code, &dims(&shape))
                .constant("s", FLOAT, &[dim], &scales)
                .constant("z", code, &[dim], &zps)
                .node("DequantizeLinear", &attrs, &[("y", FLOAT)]);
            let x = tensor("x", code, &shape, ints(code, 5, len(&shape)));
            assert_matches_ort(&dq, &[x], 0.0, 0.0, &format!("DQ axis {axis} {code}"));
        }
    }
}

#[test]
fn blocked_quantize_and_dequantize_match_ort() {
    // [3, 10] in blocks of 4 along axis 1 (the last block short), and of 2 along axis 0.
    for (axis, block, sshape) in [(1, 4, [3, 3]), (0, 2, [2, 10])] {
        let shape = [3, 10];
        let n = len(&sshape);
        let scales: Vec<f64> = (0..n).map(|i| 0.25 * (1 + i % 5) as f64).collect();
        let zps: Vec<f64> = (0..n).map(|i| (i % 7) as f64 - 3.0).collect();
        let attrs = [("axis", Attr::Int(axis)), ("block_size", Attr::Int(block))];
        let q = One::new(21)
            .input("x", FLOAT, &dims(&shape))
            .constant("s", FLOAT, &sshape, &scales)
            .constant("z", INT8, &sshape, &zps)
            .node("QuantizeLinear", &attrs, &[("y", INT8)]);
        let x = to_quantize(30, 0.25, 6);
        assert_matches_ort(&q, &[tensor("x", FLOAT, &shape, x)], 0.0, 0.0, &format!("blocked Q axis {axis}"));
        let dq = One::new(21)
            .input("x", INT8, &dims(&shape))
            .constant("s", FLOAT, &sshape, &scales)
            .constant("z", INT8, &sshape, &zps)
            .node("DequantizeLinear", &attrs, &[("y", FLOAT)]);
        let x = tensor("x", INT8, &shape, ints(INT8, 7, 30));
        assert_matches_ort(&dq, &[x], 0.0, 0.0, &format!("blocked DQ axis {axis}"));
    }
}

#[test]
fn dequantize_linear_per_tensor_matches_ort_for_each_type() {
    for (opset, code) in [(10, UINT8), (13, INT8), (10, INT32), (21, UINT16), (21, INT16), (25, INT8)] {
        for zp in [false, true] {
            let mut m = One::new(opset).input("x", code, &["N".into(), 5.into()]).input("s", FLOAT, &[]);
            if zp {
                m = m.constant("z", code, &[], &[if code == INT32 { 0.0 } else { ints(code, 8, 1)[0] }]);
            }
            let model = m.node("DequantizeLinear", &[], &[("y", FLOAT)]);
            let inputs = [tensor("x", code, &[4, 5], ints(code, 9, 20)), tensor("s", FLOAT, &[], vec![0.0371])];
            assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("DequantizeLinear-{opset} {code} zp {zp}"));
        }
    }
}

#[test]
fn dynamic_quantize_linear_matches_ort_on_mixed_positive_negative_and_zero_ranges() {
    let model = ModelBuilder::new(11)
        .input("x", FLOAT, &["N".into(), 8.into()])
        .node("DynamicQuantizeLinear", "q", &["x"], &["y", "s", "z"])
        .output("y", UINT8, None)
        .output("s", FLOAT, None)
        .output("z", UINT8, None)
        .build();
    let mixed: Vec<f64> = harness::values(10, 24, -3.0, 5.0);
    let cases = [
        mixed.clone(),
        mixed.iter().map(|v| v.abs()).collect(),
        mixed.iter().map(|v| -v.abs() * 7.0).collect(),
        vec![0.0; 24],
        (0..24).map(|i| i as f64 * 0.5 - 2.0).collect(),
    ];
    for (k, x) in cases.into_iter().enumerate() {
        let x: Vec<f32> = x.into_iter().map(|v| v as f32).collect();
        assert_matches_ort(&model, &[HostTensor::f32("x", &[3, 8], x)], 0.0, 0.0, &format!("case {k}"));
    }
}

#[test]
fn matmul_integer_matches_ort_with_batches_broadcasting_and_zero_points() {
    let shapes: [(&[i64], &[i64]); 4] =
        [(&[5, 7], &[7, 4]), (&[2, 3, 5, 7], &[7, 9]), (&[5, 7], &[2, 7, 4]), (&[7], &[7, 66])];
    let mut compared = 0;
    for (at, bt) in [(UINT8, UINT8), (UINT8, INT8), (INT8, INT8), (INT8, UINT8)] {
        for (ashape, bshape) in shapes {
            let n = bshape[bshape.len() - 1];
            // b's zero point: none, one, one per column ([n] for a 2-D b, else [batch, 1, n]).
            for zps in 0..3 {
                let adims: Vec<Dim> =
                    dims(ashape).into_iter().enumerate().map(|(i, d)| if i == 0 { "A".into() } else { d }).collect();
                let mut m = One::new(10).input("a", at, &adims).input("b", bt, &dims(bshape));
                if zps > 0 {
                    let zshape: Vec<i64> = match (zps, bshape.len()) {
                        (1, _) => vec![],
                        (_, 2) => vec![n],
                        _ => {
                            bshape.iter().enumerate().map(|(i, &d)| if i == bshape.len() - 2 { 1 } else { d }).collect()
                        }
                    };
                    let zb = ints(bt, 12, len(&zshape));
                    m = m.constant("za", at, &[], &[ints(at, 13, 1)[0]]).constant("zb", bt, &zshape, &zb);
                }
                let model = m.node("MatMulInteger", &[], &[("y", INT32)]);
                let inputs = [
                    tensor("a", at, ashape, ints(at, 14, len(ashape))),
                    tensor("b", bt, bshape, ints(bt, 15, len(bshape))),
                ];
                let what = format!("MatMulInteger {at}x{bt} {ashape:?}x{bshape:?} zero points {zps}");
                compared += usize::from(matches_ort_if_it_runs(&model, &inputs, &what));
            }
        }
    }
    assert!(compared >= 24, "only {compared} cases ran on ORT");
}

#[test]
fn matmul_integer_is_the_integer_product() {
    let (m, k, n) = (3, 70, 5);
    let model = One::new(10)
        .input("a", UINT8, &dims(&[m, k]))
        .input("b", INT8, &dims(&[k, n]))
        .constant("za", UINT8, &[], &[200.0])
        .constant("zb", INT8, &[n], &[-128.0, 0.0, 5.0, 127.0, -1.0])
        .node("MatMulInteger", &[], &[("y", INT32)]);
    let (a, b) = (ints(UINT8, 20, (m * k) as usize), ints(INT8, 21, (k * n) as usize));
    let zb = [-128.0, 0.0, 5.0, 127.0, -1.0];
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let got =
        harness::run(&mut rivet, &[tensor("a", UINT8, &[m, k], a.clone()), tensor("b", INT8, &[k, n], b.clone())])
            .expect("run");
    let (m, k, n) = (m as usize, k as usize, n as usize);
    let want: Vec<f64> =
        (0..m * n).map(|o| (0..k).map(|p| (a[o / n * k + p] - 200.0) * (b[p * n + o % n] - zb[o % n])).sum()).collect();
    assert_eq!(got[0].data, want);
}

#[test]
fn qlinear_matmul_matches_ort_per_tensor_and_per_column() {
    let mut compared = 0;
    let (ashape, bshape): (&[i64], &[i64]) = (&[2, 4, 33], &[33, 6]);
    for (opset, at, bt, yt) in
        [(10, UINT8, UINT8, UINT8), (10, UINT8, INT8, UINT8), (21, INT8, INT8, INT8), (21, UINT8, INT8, INT8)]
    {
        for per_column in [false, true] {
            let (sb, zb): (Vec<f64>, Vec<f64>) = if per_column {
                (
                    (0..6).map(|j| 0.002 + 0.0007 * j as f64).collect(),
                    if bt == INT8 { vec![0.0; 6] } else { ints(bt, 30, 6) },
                )
            } else {
                (vec![0.0031], vec![if bt == INT8 { 0.0 } else { 131.0 }])
            };
            let sshape: Vec<i64> = if per_column { vec![6] } else { vec![] };
            let model = One::new(opset)
                .input("a", at, &["B".into(), 4.into(), 33.into()])
                .constant("sa", FLOAT, &[], &[0.013])
                .constant("za", at, &[], &[if at == UINT8 { 120.0 } else { -5.0 }])
                .input("b", bt, &dims(bshape))
                .constant("sb", FLOAT, &sshape, &sb)
                .constant("zb", bt, &sshape, &zb)
                .constant("sy", FLOAT, &[], &[0.021])
                .constant("zy", yt, &[], &[if yt == UINT8 { 100.0 } else { 3.0 }])
                .node("QLinearMatMul", &[], &[("y", yt)]);
            let inputs = [
                tensor("a", at, ashape, ints(at, 31, len(ashape))),
                tensor("b", bt, bshape, ints(bt, 32, len(bshape))),
            ];
            let what = format!("QLinearMatMul-{opset} {at}x{bt}->{yt} per column {per_column}");
            compared += usize::from(matches_ort_if_it_runs(&model, &inputs, &what));
        }
    }
    assert!(compared >= 6, "only {compared} cases ran on ORT");
}

#[test]
fn qlinear_matmul_with_float16_scales_matches_ort() {
    let model = One::new(21)
        .input("a", UINT8, &dims(&[3, 20]))
        .constant("sa", FLOAT16, &[], &[0.0125])
        .constant("za", UINT8, &[], &[113.0])
        .input("b", UINT8, &dims(&[20, 4]))
        .constant("sb", FLOAT16, &[], &[0.0039])
        .constant("zb", UINT8, &[], &[126.0])
        .constant("sy", FLOAT16, &[], &[0.0217])
        .constant("zy", UINT8, &[], &[90.0])
        .node("QLinearMatMul", &[], &[("y", UINT8)]);
    let inputs = [tensor("a", UINT8, &[3, 20], ints(UINT8, 40, 60)), tensor("b", UINT8, &[20, 4], ints(UINT8, 41, 80))];
    assert_matches_ort(&model, &inputs, 0.0, 0.0, "QLinearMatMul float16 scales");
}

/// Conv attribute sets: pads, strides, dilations, groups, auto_pad.
type ConvCase = (Vec<i64>, Vec<i64>, Vec<(&'static str, Attr)>);

fn conv_cases() -> Vec<ConvCase> {
    vec![
        (vec![1, 3, 7, 7], vec![4, 3, 3, 3], vec![]),
        (vec![2, 4, 9, 8], vec![6, 2, 3, 2], vec![("group", Attr::Int(2)), ("pads", Attr::Ints(vec![1, 0, 2, 1]))]),
        (
            vec![1, 2, 10, 10],
            vec![3, 2, 3, 3],
            vec![
                ("strides", Attr::Ints(vec![2, 3])),
                ("dilations", Attr::Ints(vec![2, 1])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
            ],
        ),
        (
            vec![1, 3, 8, 8],
            vec![3, 1, 3, 3],
            vec![("group", Attr::Int(3)), ("auto_pad", Attr::Str("SAME_UPPER".into()))],
        ),
        // Depthwise with strides and a batch (the float depthwise kernel on differences).
        (
            vec![2, 5, 9, 9],
            vec![5, 1, 3, 3],
            vec![("group", Attr::Int(5)), ("strides", Attr::Ints(vec![2, 2])), ("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        ),
        (
            vec![1, 2, 7, 6],
            vec![2, 2, 2, 2],
            vec![("auto_pad", Attr::Str("SAME_LOWER".into())), ("strides", Attr::Ints(vec![2, 2]))],
        ),
        (vec![2, 3, 11], vec![5, 3, 4], vec![("strides", Attr::Ints(vec![2])), ("pads", Attr::Ints(vec![2, 1]))]),
        // Large enough to split over the pool: by grid columns (64 output channels), by
        // output channels (128), and a depthwise one by planes (24 channels a batch).
        (vec![1, 16, 32, 32], vec![64, 16, 3, 3], vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))]),
        (vec![1, 16, 32, 30], vec![128, 16, 3, 3], vec![("dilations", Attr::Ints(vec![1, 2]))]),
        (
            vec![2, 24, 40, 40],
            vec![24, 1, 3, 3],
            vec![("group", Attr::Int(24)), ("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        ),
        // Small planes of many channels: QLinearConv's channels-last product (a batch; a
        // stride of 2; channels off the quads, 36 positions: three strips, one partial).
        (vec![2, 64, 7, 7], vec![128, 64, 3, 3], vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))]),
        (
            vec![1, 96, 14, 13],
            vec![160, 96, 3, 3],
            vec![("strides", Attr::Ints(vec![2, 2])), ("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        ),
        (vec![1, 66, 6, 6], vec![130, 66, 3, 3], vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))]),
        // Read through the taps (65 to 256 positions; uint8 input, weights' zero points
        // 0): a batch, and dilations with uneven pads.
        (vec![2, 64, 12, 12], vec![128, 64, 3, 3], vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))]),
        (
            vec![1, 64, 15, 11],
            vec![128, 64, 3, 3],
            vec![("dilations", Attr::Ints(vec![2, 1])), ("pads", Attr::Ints(vec![2, 1, 1, 0]))],
        ),
    ]
}

#[test]
fn conv_integer_matches_ort() {
    let mut compared = 0;
    for (xs, ws, attrs) in conv_cases() {
        for (xt, wt) in [(UINT8, UINT8), (UINT8, INT8), (INT8, INT8)] {
            let model = One::new(10)
                .input("x", xt, &std::iter::once(Dim::from("N")).chain(dims(&xs[1..])).collect::<Vec<_>>())
                .input("w", wt, &dims(&ws))
                .constant("zx", xt, &[], &[if xt == UINT8 { 97.0 } else { -7.0 }])
                .constant("zw", wt, &[], &[if wt == UINT8 { 130.0 } else { 2.0 }])
                .node("ConvInteger", &attrs, &[("y", INT32)]);
            let inputs = [tensor("x", xt, &xs, ints(xt, 50, len(&xs))), tensor("w", wt, &ws, ints(wt, 51, len(&ws)))];
            let what = format!("ConvInteger {xt}x{wt} {xs:?} {ws:?} {attrs:?}");
            compared += usize::from(matches_ort_if_it_runs(&model, &inputs, &what));
        }
    }
    assert!(compared >= 27, "only {compared} cases ran on ORT");
}

#[test]
fn qlinear_conv_matches_ort_with_per_channel_weights_and_bias() {
    let mut compared = 0;
    for (xs, ws, attrs) in conv_cases() {
        let m = ws[0];
        for (xt, wt, per_channel, bias) in
            [(UINT8, INT8, true, true), (UINT8, UINT8, false, true), (INT8, INT8, true, false)]
        {
            let sw: Vec<f64> =
                if per_channel { (0..m).map(|i| 0.003 + 0.001 * i as f64).collect() } else { vec![0.004] };
            let zw = vec![if wt == UINT8 { 128.0 } else { 0.0 }; sw.len()];
            let sshape: Vec<i64> = if per_channel { vec![m] } else { vec![] };
            let mut b = One::new(10)
                .input("x", xt, &std::iter::once(Dim::from("N")).chain(dims(&xs[1..])).collect::<Vec<_>>())
                .constant("sx", FLOAT, &[], &[0.02])
                .constant("zx", xt, &[], &[if xt == UINT8 { 110.0 } else { -3.0 }])
                .input("w", wt, &dims(&ws))
                .constant("sw", FLOAT, &sshape, &sw)
                .constant("zw", wt, &sshape, &zw)
                .constant("sy", FLOAT, &[], &[0.05])
                .constant("zy", xt, &[], &[if xt == UINT8 { 120.0 } else { 4.0 }]);
            if bias {
                b = b.constant(
                    "bias",
                    INT32,
                    &[m],
                    &(0..m).map(|i| (i * 731 % 2001) as f64 - 1000.0).collect::<Vec<_>>(),
                );
            }
            let model = b.node("QLinearConv", &attrs, &[("y", xt)]);
            let inputs = [tensor("x", xt, &xs, ints(xt, 60, len(&xs))), tensor("w", wt, &ws, ints(wt, 61, len(&ws)))];
            let what = format!("QLinearConv {xt}x{wt} per channel {per_channel} {xs:?} {ws:?} {attrs:?}");
            compared += usize::from(matches_ort_if_it_runs(&model, &inputs, &what));
        }
    }
    assert!(compared >= 27, "only {compared} cases ran on ORT");
}

#[test]
fn bad_quantization_inputs_are_errors_naming_the_node_and_the_session_still_runs() {
    // A per-axis scale whose length is not the axis's (its length is symbolic).
    let model = One::new(13).input("x", FLOAT, &[2.into(), 3.into()]).input("s", FLOAT, &["S".into()]).node(
        "QuantizeLinear",
        &[("axis", Attr::Int(1))],
        &[("y", UINT8)],
    );
    let mut s = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let x = HostTensor::f32("x", &[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let err = harness::run(&mut s, &[x.clone(), HostTensor::f32("s", &[2], vec![1.0, 2.0])]).expect_err("bad scale");
    assert!(err.contains("node 'q' (QuantizeLinear)") && err.contains("per-axis scale"), "{err}");
    let out = harness::run(&mut s, &[x, HostTensor::f32("s", &[3], vec![1.0, 2.0, 4.0])]).expect("still runs");
    assert_eq!(out[0].data, [1.0, 1.0, 1.0, 4.0, 2.0, 2.0]);

    // Operands whose inner sizes differ at Run.
    let model = One::new(10)
        .input("a", UINT8, &[2.into(), "K".into()])
        .input("b", UINT8, &["L".into(), 2.into()])
        .node("MatMulInteger", &[], &[("y", INT32)]);
    let mut s = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let bad = [tensor("a", UINT8, &[2, 3], vec![1.0; 6]), tensor("b", UINT8, &[2, 2], vec![1.0; 4])];
    let err = harness::run(&mut s, &bad).expect_err("K differs");
    assert!(err.contains("node 'q' (MatMulInteger)") && err.contains("do not chain"), "{err}");
    let good = [tensor("a", UINT8, &[2, 3], vec![1.0; 6]), tensor("b", UINT8, &[3, 2], vec![2.0; 6])];
    assert_eq!(harness::run(&mut s, &good).expect("still runs")[0].data, [6.0; 4]);

    // A bias of the wrong length.
    let model = One::new(10)
        .input("x", UINT8, &dims(&[1, 1, 3, 3]))
        .constant("sx", FLOAT, &[], &[1.0])
        .constant("zx", UINT8, &[], &[0.0])
        .constant("w", UINT8, &[2, 1, 1, 1], &[1.0, 2.0])
        .constant("sw", FLOAT, &[], &[1.0])
        .constant("zw", UINT8, &[], &[0.0])
        .constant("sy", FLOAT, &[], &[1.0])
        .constant("zy", UINT8, &[], &[0.0])
        .input("bias", INT32, &["C".into()])
        .node("QLinearConv", &[], &[("y", UINT8)]);
    let mut s = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let x = tensor("x", UINT8, &[1, 1, 3, 3], (1..=9).map(f64::from).collect());
    let err = harness::run(&mut s, &[x.clone(), tensor("bias", INT32, &[3], vec![0.0; 3])]).expect_err("bias");
    assert!(err.contains("node 'q' (QLinearConv)") && err.contains("bias"), "{err}");
    let out = harness::run(&mut s, &[x, tensor("bias", INT32, &[2], vec![1.0, 0.0])]).expect("still runs");
    let want: Vec<f64> = (1..=9).map(|v| v as f64 + 1.0).chain((1..=9).map(|v| 2.0 * v as f64)).collect();
    assert_eq!(out[0].data, want);
}

/// bfloat16 data and scales are not quantized by Rivet (float16 is: see
/// `float16_quantize_and_dequantize_match_ort`): with fallback off, the session fails
/// naming the node and the type.
#[test]
fn types_rivet_does_not_quantize_are_not_claimed() {
    const BFLOAT16: i32 = 16;
    let q_bf16 = One::new(21).input("x", BFLOAT16, &dims(&[4])).input("s", BFLOAT16, &[]).node(
        "QuantizeLinear",
        &[],
        &[("y", UINT8)],
    );
    let err = harness::session(env(), &q_bf16, Arm::Rivet, &strict()).expect_err("bfloat16 input");
    assert!(err.contains("node 'q' (QuantizeLinear)") && err.contains("bfloat16"), "{err}");
    let dq_bf16 = One::new(21).input("x", UINT8, &dims(&[4])).input("s", BFLOAT16, &[]).node(
        "DequantizeLinear",
        &[],
        &[("y", BFLOAT16)],
    );
    let err = harness::session(env(), &dq_bf16, Arm::Rivet, &strict()).expect_err("bfloat16 scale");
    assert!(err.contains("node 'q' (DequantizeLinear)") && err.contains("bfloat16"), "{err}");
}

/// The ops Rivet takes in `model` with CPU fallback on, sorted, and whether its outputs are
/// ORT's alone bit for bit.
fn claims_with_fallback(model: &[u8], inputs: &[HostTensor]) -> Vec<String> {
    let want = harness::run(&mut ort_session(model), inputs).expect("ORT run");
    let opts = SessionOpts { record_assignment: true, ..Default::default() };
    let mut s = harness::session(env(), model, Arm::Rivet, &opts).expect("session with fallback");
    let assigned = rivet::ort_extra::graph_assignment(&s).expect("assignment");
    let mut ops: Vec<String> =
        assigned.into_iter().filter(|(ep, _, _)| ep == harness::RIVET_EP).map(|(_, _, op)| op).collect();
    ops.sort();
    let got = harness::run(&mut s, inputs).expect("run");
    harness::compare(&got, &want, 0.0, 0.0).expect("the outputs are ORT's");
    ops
}

const QUANT_OPS: [&str; 7] = [
    "QuantizeLinear",
    "DequantizeLinear",
    "DynamicQuantizeLinear",
    "MatMulInteger",
    "QLinearMatMul",
    "ConvInteger",
    "QLinearConv",
];

#[test]
fn quantized_models_keep_their_quantization_ops_on_ort_with_fallback_on() {
    // The models ORT's quantization tool made (tests/models/make_quantized.py).
    for (name, shape) in [("qdq_cnn.onnx", [1i64, 3, 64, 64].as_slice()), ("dynamic_mlp.onnx", &[1, 64, 128])] {
        let path = rivet::paths::workspace_root().join("tests/models").join(name);
        let bytes = std::fs::read(&path).expect("model");
        let x: Vec<f32> = harness::values(3, len(shape), -2.0, 2.0).into_iter().map(|v| v as f32).collect();
        let ops = claims_with_fallback(&bytes, &[HostTensor::f32("x", shape, x)]);
        assert!(ops.iter().all(|op| !QUANT_OPS.contains(&op.as_str())), "{name}: Rivet took {ops:?}");
    }
    // A QDQ MatMul group (Q -> DQ, DQ of a weight -> MatMul -> Q -> DQ) then float work:
    // every Q and DQ stays ORT's.
    let w: Vec<f64> = ints(INT8, 70, 16 * 8);
    let model = One::new(21)
        .input("x", FLOAT, &dims(&[4, 16]))
        .b
        .initializer("sx", &[], vec![0.02])
        .initializer("sy", &[], vec![0.05])
        .node_with("Constant", "zx", &[], &["zxv"], &[("value", Attr::Tensor(UINT8, vec![], vec![128]))])
        .node_with(
            "Constant",
            "wq",
            &[],
            &["wqv"],
            &[("value", Attr::Tensor(INT8, vec![16, 8], w.iter().map(|&v| v as i8 as u8).collect()))],
        )
        .initializer("sw", &[], vec![0.01])
        .node("QuantizeLinear", "qx", &["x", "sx", "zxv"], &["xq"])
        .node("DequantizeLinear", "dqx", &["xq", "sx", "zxv"], &["xd"])
        .node("DequantizeLinear", "dqw", &["wqv", "sw"], &["wd"])
        .node("MatMul", "mm", &["xd", "wd"], &["h"])
        .node("QuantizeLinear", "qh", &["h", "sy", "zxv"], &["hq"])
        .node("DequantizeLinear", "dqh", &["hq", "sy", "zxv"], &["hd"])
        .node("Softmax", "soft", &["hd"], &["p"])
        .node("Relu", "relu", &["p"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let x: Vec<f32> = harness::values(71, 64, -2.0, 2.0).into_iter().map(|v| v as f32).collect();
    assert_eq!(claims_with_fallback(&model, &[HostTensor::f32("x", &[4, 16], x)]), ["Relu"]);
}

#[test]
fn standalone_quantization_ops_are_claimed_with_fallback_on() {
    // x -> QuantizeLinear -> output, and a DequantizeLinear of a graph input to an output:
    // no group for ORT to fuse, so Rivet takes both.
    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &dims(&[3, 5]))
        .input("w", INT8, &dims(&[3, 5]))
        .initializer("s", &[], vec![0.1])
        .node("QuantizeLinear", "q", &["x", "s"], &["xq"])
        .node("DequantizeLinear", "dq", &["w", "s"], &["wd"])
        .output("xq", UINT8, None)
        .output("wd", FLOAT, None)
        .build();
    let x: Vec<f32> = harness::values(80, 15, -5.0, 30.0).into_iter().map(|v| v as f32).collect();
    let inputs = [HostTensor::f32("x", &[3, 5], x), tensor("w", INT8, &[3, 5], ints(INT8, 81, 15))];
    assert_eq!(claims_with_fallback(&model, &inputs), ["DequantizeLinear", "QuantizeLinear"]);
}

/// Runs `runs` in turn through one Rivet session and one ORT session of `model`, each
/// output equal.
fn runs_match_ort(model: &[u8], runs: &[Vec<HostTensor>], what: &str) {
    let mut rivet = harness::session(env(), model, Arm::Rivet, &strict()).expect("rivet session");
    let mut ort = harness::session(env(), model, Arm::OrtCpu, &SessionOpts::default()).expect("ort session");
    for (r, inputs) in runs.iter().enumerate() {
        let got = harness::run(&mut rivet, inputs).expect("rivet run");
        let want = harness::run(&mut ort, inputs).expect("ort run");
        let first = got[0].data.iter().zip(&want[0].data).position(|(x, y)| x != y);
        assert!(got[0].data.len() == want[0].data.len() && first.is_none(), "{what}, run {r}: differs at {first:?}");
    }
}

#[test]
fn constant_weights_are_packed_once_and_other_operands_each_run() {
    // Constant weights (packed on the first Run, kept): each Run's other input differs.
    let (m, k, n) = (19i64, 70i64, 37i64);
    let (ka, kb) = ((m * k) as usize, (k * n) as usize);
    let model = One::new(10)
        .input("a", UINT8, &dims(&[m, k]))
        .constant("b", INT8, &[k, n], &ints(INT8, 30, kb))
        .constant("za", UINT8, &[], &[131.0])
        .constant("zb", INT8, &[n], &ints(INT8, 31, n as usize))
        .node("MatMulInteger", &[], &[("y", INT32)]);
    let runs: Vec<_> = (0..3).map(|s| vec![tensor("a", UINT8, &[m, k], ints(UINT8, 32 + s, ka))]).collect();
    runs_match_ort(&model, &runs, "MatMulInteger, constant b");
    // B an input: packed again on each Run (a cache keyed on it would give run 1 run 0's).
    let model = One::new(10).input("a", UINT8, &dims(&[m, k])).input("b", INT8, &dims(&[k, n])).node(
        "MatMulInteger",
        &[],
        &[("y", INT32)],
    );
    let a = tensor("a", UINT8, &[m, k], ints(UINT8, 40, ka));
    let runs: Vec<_> = (0..3).map(|s| vec![a.clone(), tensor("b", INT8, &[k, n], ints(INT8, 41 + s, kb))]).collect();
    runs_match_ort(&model, &runs, "MatMulInteger, b an input");
    // QLinearConv with constant per-channel weights, two groups: each Run's image differs.
    let (xs, ws) = ([1i64, 4, 9, 8], [6i64, 2, 3, 3]);
    let model = One::new(10)
        .input("x", UINT8, &dims(&xs))
        .constant("sx", FLOAT, &[], &[0.02])
        .constant("zx", UINT8, &[], &[110.0])
        .constant("w", INT8, &ws, &ints(INT8, 50, len(&ws)))
        .constant("sw", FLOAT, &[6], &[0.003, 0.004, 0.005, 0.006, 0.007, 0.008])
        .constant("zw", INT8, &[6], &[0.0; 6])
        .constant("sy", FLOAT, &[], &[0.05])
        .constant("zy", UINT8, &[], &[120.0])
        .node("QLinearConv", &[("group", Attr::Int(2)), ("pads", Attr::Ints(vec![1; 4]))], &[("y", UINT8)]);
    let runs: Vec<_> = (0..3).map(|s| vec![tensor("x", UINT8, &xs, ints(UINT8, 51 + s, len(&xs)))]).collect();
    runs_match_ort(&model, &runs, "QLinearConv, constant weights");
    // Depthwise QLinearConv on the integer kernel (constant weights within int8 of their
    // zero points), a batch of two: 7x7 planes (rows two to a vector), 14 -> 7 at stride
    // 2, 14x14 (a row a vector), and int8 activations.
    for (xs, stride, xt) in [([2i64, 24, 7, 7], 1, UINT8), ([2, 16, 14, 14], 2, UINT8), ([2, 8, 14, 14], 1, INT8)] {
        let c = xs[1];
        let ws = [c, 1, 3, 3];
        let zero = if xt == UINT8 { 110.0 } else { -9.0 };
        let scales: Vec<f64> = (0..c).map(|i| 0.002 + 0.0003 * i as f64).collect();
        let model = One::new(10)
            .input("x", xt, &dims(&xs))
            .constant("sx", FLOAT, &[], &[0.02])
            .constant("zx", xt, &[], &[zero])
            .constant("w", INT8, &ws, &ints(INT8, 60, len(&ws)))
            .constant("sw", FLOAT, &[c], &scales)
            .constant("zw", INT8, &[c], &vec![0.0; c as usize])
            .constant("sy", FLOAT, &[], &[0.05])
            .constant("zy", xt, &[], &[zero + 10.0])
            .node(
                "QLinearConv",
                &[("group", Attr::Int(c)), ("pads", Attr::Ints(vec![1; 4])), ("strides", Attr::Ints(vec![stride; 2]))],
                &[("y", xt)],
            );
        let runs: Vec<_> = (0..2).map(|s| vec![tensor("x", xt, &xs, ints(xt, 61 + s, len(&xs)))]).collect();
        runs_match_ort(&model, &runs, &format!("depthwise QLinearConv {xs:?} stride {stride}"));
    }
}

/// Runs `model` on Rivet alone: its one output's shape and values.
fn rivet_output(model: &[u8], inputs: &[HostTensor]) -> (Vec<i64>, Vec<f64>) {
    let mut s = harness::session(env(), model, Arm::Rivet, &strict()).expect("session");
    let got = harness::run(&mut s, inputs).expect("run").remove(0);
    (got.shape, got.data)
}

#[test]
fn empty_depths_widths_and_planes_give_the_defined_results() {
    // Checked against the definitions, not ORT: its kernels leave the output of an empty
    // sum as allocated (zeros, or other bytes from run to run).
    // (a shape, b shape) of MatMulInteger and QLinearMatMul: no depth, then no columns.
    for (ashape, bshape) in [([3i64, 0], [0i64, 5]), ([2, 4], [4, 0])] {
        let out = vec![ashape[0], bshape[1]];
        let inputs = [
            tensor("a", UINT8, &ashape, ints(UINT8, 70, len(&ashape))),
            tensor("b", INT8, &bshape, ints(INT8, 71, len(&bshape))),
        ];
        let model = One::new(10)
            .input("a", UINT8, &dims(&ashape))
            .input("b", INT8, &dims(&bshape))
            .constant("za", UINT8, &[], &[3.0])
            .node("MatMulInteger", &[], &[("y", INT32)]);
        // A sum of nothing is 0.
        assert_eq!(rivet_output(&model, &inputs), (out.clone(), vec![0.0; len(&out)]), "MatMulInteger {ashape:?}");
        let model = One::new(10)
            .input("a", UINT8, &dims(&ashape))
            .constant("sa", FLOAT, &[], &[0.02])
            .constant("za", UINT8, &[], &[3.0])
            .input("b", INT8, &dims(&bshape))
            .constant("sb", FLOAT, &[], &[0.01])
            .constant("zb", INT8, &[], &[0.0])
            .constant("sy", FLOAT, &[], &[0.05])
            .constant("zy", UINT8, &[], &[9.0])
            .node("QLinearMatMul", &[], &[("y", UINT8)]);
        // And 0 quantizes to the zero point.
        assert_eq!(rivet_output(&model, &inputs), (out.clone(), vec![9.0; len(&out)]), "QLinearMatMul {ashape:?}");
    }
    // ConvInteger with no input channels, and on an empty plane that padding makes rows
    // of (every tap in the padding, which reads the zero point): all 0.
    let cases: Vec<ConvCase> = vec![
        (vec![1, 0, 4, 4], vec![2, 0, 1, 1], vec![]),
        (vec![1, 1, 0, 3], vec![2, 1, 1, 1], vec![("pads", Attr::Ints(vec![1, 0, 1, 0]))]),
    ];
    for ((xs, ws, attrs), out) in cases.iter().zip([[1i64, 2, 4, 4], [1, 2, 2, 3]]) {
        let model = One::new(10)
            .input("x", UINT8, &dims(xs))
            .input("w", UINT8, &dims(ws))
            .constant("zx", UINT8, &[], &[5.0])
            .node("ConvInteger", attrs, &[("y", INT32)]);
        let inputs =
            [tensor("x", UINT8, xs, ints(UINT8, 72, len(xs))), tensor("w", UINT8, ws, ints(UINT8, 73, len(ws)))];
        assert_eq!(rivet_output(&model, &inputs), (out.to_vec(), vec![0.0; len(&out)]), "ConvInteger {xs:?} {ws:?}");
    }
}

/// float16 QuantizeLinear and DequantizeLinear (opset 19+: a float16 scale, data in and
/// out), per tensor and per axis, equal to ORT. The division is float32's before opset 23
/// and with `precision` float32, float16's from opset 23 (the scale's type) and with
/// `precision` float16: `x / scale` rounded to float16 changes some quantized values.
#[test]
fn float16_quantize_and_dequantize_match_ort() {
    // 240 values: enough that a float16 quotient rounds across a step (16.72 / 0.1234 is
    // 135.47 in float32, 135.5 in float16).
    let mut xs: Vec<f64> = harness::values(12, 2 * 3 * 40, -40.0, 40.0);
    xs[..3].copy_from_slice(&[16.72, 8.33, 18.58]);
    let cases = [
        (vec![], vec![0.3], None, 21, None),
        (vec![3i64], vec![0.25, 0.7, 1.9], Some(1i64), 21, None),
        (vec![], vec![0.1234], None, 23, None),
        (vec![3i64], vec![0.25, 0.7, 0.1234], Some(1i64), 23, None),
        (vec![], vec![0.1234], None, 23, Some(FLOAT as i64)),
        (vec![], vec![0.1234], None, 25, Some(FLOAT16 as i64)),
    ];
    for (dims, scale, axis, opset, precision) in cases {
        let mut attrs: Vec<(&str, Attr)> = axis.map(|a| vec![("axis", Attr::Int(a))]).unwrap_or_default();
        let dq_attrs = attrs.clone();
        attrs.extend(precision.map(|p| ("precision", Attr::Int(p))));
        let mut b = ModelBuilder::new(opset)
            .input("x", FLOAT, &[2.into(), 3.into(), 40.into()])
            .input("s32", FLOAT, &dims.iter().map(|&d| d.into()).collect::<Vec<Dim>>())
            .node_with("Cast", "h", &["x"], &["xh"], &[("to", Attr::Int(FLOAT16 as i64))])
            .node_with("Cast", "sh", &["s32"], &["s"], &[("to", Attr::Int(FLOAT16 as i64))]);
        for (t, name) in [(UINT8, "u8"), (INT8, "i8"), (INT16, "i16")] {
            let z = format!("z_{name}");
            let zero = Attr::Tensor(
                t,
                dims.clone(),
                vec![0; dims.iter().product::<i64>() as usize * if t == INT16 { 2 } else { 1 }],
            );
            let (q, yh, y) = (format!("q_{name}"), format!("yh_{name}"), format!("y_{name}"));
            b = b
                .node_with("Constant", &format!("zero_{name}"), &[], &[&z], &[("value", zero)])
                .node_with("QuantizeLinear", &format!("quant_{name}"), &["xh", "s", &z], &[&q], &attrs)
                .node_with("DequantizeLinear", &format!("dequant_{name}"), &[&q, "s", &z], &[&yh], &dq_attrs)
                .node_with("Cast", &format!("wide_{name}"), &[&yh], &[&y], &[("to", Attr::Int(FLOAT as i64))])
                .output(&y, FLOAT, None);
        }
        let model = b.build();
        let scale_dims: Vec<i64> = dims.clone();
        let inputs = [
            HostTensor::f32("x", &[2, 3, 40], xs.iter().map(|&v| v as f32).collect()),
            HostTensor::f32("s32", &scale_dims, scale.clone()),
        ];
        let what = format!("float16 Q/DQ, axis {axis:?}, opset {opset}, precision {precision:?}");
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &what);
    }
}
