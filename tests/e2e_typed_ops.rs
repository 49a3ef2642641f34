//! The transformer and index ops on Rivet alone against ORT's CPU EP: IsNaN/IsInf, bitwise
//! ops, GatherElements, Hardmax, EyeLike, Split, LayerNorm's statistics, the losses,
//! half-precision nodes (Attention: e2e_attention.rs), Tile, GatherND, Scatter*, OneHot, TopK, GroupNorm,
//! RotaryEmbedding, Range, NonZero, Einsum, and inputs fed at Run (split from e2e_typed.rs).

mod common;

use common::typed::{binary_model, elem, name, unary_model};
use common::{assert_matches_ort, env, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{
    Attr, Dim, ModelBuilder, BOOL, DOUBLE, FLOAT, FLOAT16, INT32, INT64, UINT16, UINT32, UINT64, UINT8,
};

#[test]
fn is_nan_is_inf_bitwise_gather_elements_hardmax_and_eye_like_match_ort() {
    let specials = vec![1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 3.5];
    for t in [FLOAT, DOUBLE] {
        let x = [HostTensor::typed("x", elem(t), &[6], specials.clone())];
        assert_matches_ort(&unary_model("IsNaN", t, BOOL, &[], 20), &x, 0.0, 0.0, "IsNaN");
        for (neg, pos) in [(1, 1), (0, 1), (1, 0)] {
            let attrs = [("detect_negative", Attr::Int(neg)), ("detect_positive", Attr::Int(pos))];
            assert_matches_ort(&unary_model("IsInf", t, BOOL, &attrs, 20), &x, 0.0, 0.0, "IsInf");
        }
    }
    for t in [UINT8, UINT16, UINT32, UINT64] {
        let inputs = [
            HostTensor::typed("a", elem(t), &[2, 3], vec![1.0, 2.0, 255.0, 16.0, 7.0, 128.0]),
            HostTensor::typed("b", elem(t), &[3], vec![1.0, 3.0, 7.0]),
        ];
        for dir in ["LEFT", "RIGHT"] {
            let model = binary_model("BitShift", t, t, &[("direction", Attr::Str(dir.into()))]);
            assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("BitShift {dir} {}", name(t)));
        }
    }
    for t in [INT32, UINT8, INT64] {
        let inputs = [
            HostTensor::typed("a", elem(t), &[2, 3], vec![1.0, 2.0, 12.0, 16.0, 7.0, 100.0]),
            HostTensor::typed("b", elem(t), &[3], vec![3.0, 6.0, 10.0]),
        ];
        for op in ["BitwiseAnd", "BitwiseOr", "BitwiseXor"] {
            assert_matches_ort(&binary_model(op, t, t, &[]), &inputs, 0.0, 0.0, &format!("{op} {}", name(t)));
        }
        let x = [HostTensor::typed("x", elem(t), &[3], vec![0.0, 5.0, 100.0])];
        assert_matches_ort(&unary_model("BitwiseNot", t, t, &[], 18), &x, 0.0, 0.0, "BitwiseNot");
    }
    for axis in [0i64, 1, -1] {
        let model = ModelBuilder::new(13)
            .input("x", FLOAT, &[3.into(), 3.into()])
            .input("i", INT64, &[2.into(), 3.into()])
            .node_with("GatherElements", "op", &["x", "i"], &["y"], &[("axis", Attr::Int(axis))])
            .output("y", FLOAT, None)
            .build();
        let inputs = [
            HostTensor::f32("x", &[3, 3], (1..=9).map(|v| v as f32).collect()),
            HostTensor::typed("i", E::Int64, &[2, 3], vec![0.0, 2.0, -1.0, 1.0, 0.0, 2.0]),
        ];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("GatherElements axis {axis}"));
    }
    for (opset, axis) in [(13, -1i64), (13, 0), (11, 1)] {
        let model = ModelBuilder::new(opset)
            .input("x", FLOAT, &[2.into(), 2.into(), 3.into()])
            .node_with("Hardmax", "op", &["x"], &["y"], &[("axis", Attr::Int(axis))])
            .output("y", FLOAT, None)
            .build();
        let x = vec![1.0, 3.0, 3.0, -1.0, -2.0, 0.0, 5.0, 5.0, 5.0, 0.0, 9.0, -9.0];
        let inputs = [HostTensor::typed("x", E::Float32, &[2, 2, 3], x)];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Hardmax opset {opset} axis {axis}"));
    }
    for (t, k) in [(FLOAT, 0i64), (INT32, 1), (DOUBLE, -1), (INT64, 5)] {
        let model = ModelBuilder::new(22)
            .input("x", t, &[3.into(), 4.into()])
            .node_with("EyeLike", "op", &["x"], &["y"], &[("k", Attr::Int(k))])
            .output("y", t, None)
            .build();
        let inputs = [HostTensor::typed("x", elem(t), &[3, 4], vec![7.0; 12])];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("EyeLike {} k {k}", name(t)));
    }
}

/// Multi-output nodes run as one step per output: Split's parts (sizes given, even, and
/// opset 18's smaller last part), LayerNormalization's mean and inverse standard
/// deviation, Dropout's mask.
#[test]
fn split_layer_norm_statistics_and_dropout_mask_match_ort() {
    for t in [FLOAT, INT64, BOOL] {
        for (opset, sizes, parts, axis) in
            [(13, Some(vec![1i64, 4, 2]), 3, 1i64), (13, None, 7, -1), (18, None, 3, 1), (11, None, 2, 0)]
        {
            let outs: Vec<String> = (0..parts).map(|k| format!("y{k}")).collect();
            let out_refs: Vec<&str> = outs.iter().map(String::as_str).collect();
            let mut b = ModelBuilder::new(opset).input("x", t, &[2.into(), 7.into()]);
            let mut attrs = vec![("axis", Attr::Int(axis))];
            if opset >= 18 {
                attrs.push(("num_outputs", Attr::Int(parts as i64)));
            }
            let inputs: Vec<&str> = match &sizes {
                Some(s) => {
                    b = b.initializer_i64("split", &[s.len() as i64], s.clone());
                    vec!["x", "split"]
                }
                None => vec!["x"],
            };
            b = b.node_with("Split", "split_node", &inputs, &out_refs, &attrs);
            for o in &outs {
                b = b.output(o, t, None);
            }
            let x: Vec<f64> = (0..14).map(|v| (v % 3) as f64).collect();
            let what = format!("Split {} opset {opset} {sizes:?} into {parts} on axis {axis}", name(t));
            assert_matches_ort(&b.build(), &[HostTensor::typed("x", elem(t), &[2, 7], x)], 0.0, 0.0, &what);
        }
    }
    let ln = ModelBuilder::new(17)
        .input("x", FLOAT, &[2.into(), 3.into(), 4.into()])
        .initializer("scale", &[4], vec![1.0, 0.5, 2.0, -1.0])
        .initializer("bias", &[4], vec![0.0, 0.1, 0.2, 0.3])
        .node_with(
            "LayerNormalization",
            "ln",
            &["x", "scale", "bias"],
            &["y", "mean", "inv_std"],
            &[("axis", Attr::Int(-1))],
        )
        .output("y", FLOAT, None)
        .output("mean", FLOAT, None)
        .output("inv_std", FLOAT, None)
        .build();
    let x = harness::values(3, 24, -2.0, 2.0);
    assert_matches_ort(&ln, &[HostTensor::typed("x", E::Float32, &[2, 3, 4], x)], 1e-5, 1e-6, "LayerNorm 3 outputs");
    let dropout = ModelBuilder::new(13)
        .input("x", FLOAT, &[2.into(), 3.into()])
        .node("Dropout", "drop", &["x"], &["y", "mask"])
        .output("y", FLOAT, None)
        .output("mask", BOOL, None)
        .build();
    let x = vec![1.0, -2.0, 3.0, 0.0, 5.0, -6.0];
    assert_matches_ort(&dropout, &[HostTensor::typed("x", E::Float32, &[2, 3], x)], 0.0, 0.0, "Dropout mask");
}

#[test]
fn a_split_that_does_not_add_up_is_an_error_at_run_naming_the_node() {
    let model = ModelBuilder::new(13)
        .input("x", FLOAT, &["N".into()])
        .initializer_i64("split", &[2], vec![2, 2])
        .node("Split", "halves", &["x", "split"], &["a", "b"])
        .output("a", FLOAT, None)
        .output("b", FLOAT, None)
        .build();
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let err = harness::run(&mut rivet, &[HostTensor::f32("x", &[5], vec![1.0; 5])]).expect_err("5 is not 2 + 2");
    assert!(err.contains("node 'halves' (Split)") && err.contains("add up to 4"), "{err}");
    let ok = harness::run(&mut rivet, &[HostTensor::f32("x", &[4], vec![1.0, 2.0, 3.0, 4.0])]).expect("runs");
    assert_eq!((ok[0].data.clone(), ok[1].data.clone()), (vec![1.0, 2.0], vec![3.0, 4.0]));
}

/// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (with its log_prob output) over
/// every reduction, with and without weights and ignore_index, on [N, C] and
/// [N, C, d1, d2]; a target out of range is an error naming the node.
#[test]
fn losses_match_ort() {
    for op in ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"] {
        for (t, dims) in [(FLOAT, vec![3i64, 5]), (FLOAT, vec![2, 4, 3, 2]), (DOUBLE, vec![3, 5])] {
            for reduction in ["none", "sum", "mean"] {
                for (weighted, ignore) in [(false, None), (true, None), (true, Some(1i64)), (false, Some(0))] {
                    let target_dims: Vec<i64> = std::iter::once(dims[0]).chain(dims[2..].iter().copied()).collect();
                    let dim_list: Vec<Dim> = dims.iter().map(|&d| d.into()).collect();
                    let tdim_list: Vec<Dim> = target_dims.iter().map(|&d| d.into()).collect();
                    let mut attrs = vec![("reduction", Attr::Str(reduction.into()))];
                    if let Some(i) = ignore {
                        attrs.push(("ignore_index", Attr::Int(i)));
                    }
                    let mut b = ModelBuilder::new(13).input("x", t, &dim_list).input("target", INT64, &tdim_list);
                    let mut ins = vec!["x", "target"];
                    if weighted {
                        b = b.input("w", t, &[dims[1].into()]);
                        ins.push("w");
                    }
                    // log_prob is claimed for float32 only (float64 runs the loss alone).
                    let outs: &[&str] =
                        if op == "SoftmaxCrossEntropyLoss" && t == FLOAT { &["loss", "log_prob"] } else { &["loss"] };
                    b = b.node_with(op, "loss_node", &ins, outs, &attrs);
                    for o in outs {
                        b = b.output(o, t, None);
                    }
                    let n: i64 = dims.iter().product();
                    let nt: i64 = target_dims.iter().product();
                    let mut inputs = vec![
                        HostTensor::typed("x", elem(t), &dims, harness::values(7, n as usize, -3.0, 1.0)),
                        HostTensor::typed(
                            "target",
                            E::Int64,
                            &target_dims,
                            (0..nt).map(|i| (i * 7 % dims[1]) as f64).collect(),
                        ),
                    ];
                    if weighted {
                        inputs.push(HostTensor::typed(
                            "w",
                            elem(t),
                            &[dims[1]],
                            harness::values(9, dims[1] as usize, 0.2, 2.0),
                        ));
                    }
                    let what = format!("{op} {} {dims:?} {reduction} weighted {weighted} ignore {ignore:?}", name(t));
                    assert_matches_ort(&b.build(), &inputs, 1e-5, 1e-6, &what);
                }
            }
        }
    }
    let model = ModelBuilder::new(13)
        .input("x", FLOAT, &[2.into(), 3.into()])
        .input("target", INT64, &[2.into()])
        .node("NegativeLogLikelihoodLoss", "nll", &["x", "target"], &["loss"])
        .output("loss", FLOAT, None)
        .build();
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let x = HostTensor::f32("x", &[2, 3], vec![-1.0; 6]);
    let err = harness::run(&mut rivet, &[x.clone(), HostTensor::typed("target", E::Int64, &[2], vec![0.0, 3.0])])
        .expect_err("class 3 of 3");
    assert!(err.contains("node 'nll' (NegativeLogLikelihoodLoss) input 1: target 3 is out of range"), "{err}");
    let ok = harness::run(&mut rivet, &[x, HostTensor::typed("target", E::Int64, &[2], vec![0.0, 2.0])]).expect("runs");
    assert_eq!(ok[0].data, vec![1.0]);
}

/// A transformer encoder layer (LayerNorm, MatMul projections, Attention, Gelu, residual
/// Adds) runs on Rivet alone, every node claimed into one fused node, and matches ORT.
#[test]
fn a_transformer_encoder_layer_runs_on_rivet_alone_and_matches_ort() {
    for (seq, d, heads, ff) in [(8, 32, 4, 64), (64, 256, 4, 1024)] {
        let (model, inputs) = rivet::bench::encoder_layer(seq, d, heads, ff);
        assert_matches_ort(&model, &inputs, 1e-3, 1e-4, &format!("encoder layer {seq}x{d}, {heads} heads"));
    }
}

/// float16 and bfloat16 nodes of float32 kernels run in float32 between casts: each op,
/// fed and read through Casts, against ORT's float32 result within the half type's
/// precision (ORT's CPU EP has no half kernels for most of them).
#[test]
fn half_precision_nodes_run_in_f32_between_casts() {
    type Case = (&'static str, Vec<Vec<i64>>, Vec<(&'static str, Attr)>);
    let cases: Vec<Case> = vec![
        ("Sigmoid", vec![vec![4, 8]], vec![]),
        ("Softmax", vec![vec![4, 8]], vec![("axis", Attr::Int(-1))]),
        ("MatMul", vec![vec![4, 8], vec![8, 3]], vec![]),
        ("Add", vec![vec![4, 8], vec![8]], vec![]),
        ("Gelu", vec![vec![4, 8]], vec![]),
        ("ReduceMean", vec![vec![4, 8]], vec![("keepdims", Attr::Int(0))]),
        ("Max", vec![vec![4, 8], vec![4, 8], vec![8]], vec![]),
    ];
    for half in [FLOAT16, 16 /* bfloat16 */] {
        for (op, shapes, attrs) in &cases {
            let names: Vec<String> = (0..shapes.len()).map(|k| format!("x{k}")).collect();
            let mut with_casts = ModelBuilder::new(20);
            let mut plain = ModelBuilder::new(20);
            let mut inputs = vec![];
            for (k, s) in shapes.iter().enumerate() {
                let dims: Vec<Dim> = s.iter().map(|&d| d.into()).collect();
                with_casts = with_casts.input(&names[k], FLOAT, &dims).node_with(
                    "Cast",
                    &format!("to_half{k}"),
                    &[&names[k]],
                    &[&format!("h{k}")],
                    &[("to", Attr::Int(half as i64))],
                );
                plain = plain.input(&names[k], FLOAT, &dims);
                let n = s.iter().product::<i64>() as usize;
                inputs.push(HostTensor::typed(&names[k], E::Float32, s, harness::values(k as u64 + 3, n, -2.0, 2.0)));
            }
            let h_in: Vec<String> = (0..shapes.len()).map(|k| format!("h{k}")).collect();
            let h_refs: Vec<&str> = h_in.iter().map(String::as_str).collect();
            let x_refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let with_casts = with_casts
                .node_with(op, "op", &h_refs, &["hy"], attrs)
                .node_with("Cast", "to_float", &["hy"], &["y"], &[("to", Attr::Int(FLOAT as i64))])
                .output("y", FLOAT, None)
                .build();
            let plain = plain.node_with(op, "op", &x_refs, &["y"], attrs).output("y", FLOAT, None).build();
            let mut rivet = harness::session(env(), &with_casts, Arm::Rivet, &strict()).expect("Rivet session");
            let mut ort = common::ort_session(&plain);
            let got = harness::run(&mut rivet, &inputs).expect("Rivet run");
            let want = harness::run(&mut ort, &inputs).expect("ORT run");
            let rtol = if half == FLOAT16 { 4e-3 } else { 3e-2 };
            harness::compare(&got, &want, rtol, rtol / 4.0).unwrap_or_else(|e| panic!("{op} as type {half}: {e}"));
        }
    }
}

/// Tile, GatherND, ScatterElements (every reduction), ScatterND and OneHot against ORT;
/// an out-of-range scatter index is an error naming the node.
#[test]
fn tile_gather_nd_scatter_and_one_hot_match_ort() {
    for (t, repeats) in [(FLOAT, vec![2i64, 3]), (INT64, vec![1, 2]), (BOOL, vec![3, 1])] {
        let model = ModelBuilder::new(13)
            .input("x", t, &[2.into(), 3.into()])
            .initializer_i64("r", &[2], repeats.clone())
            .node("Tile", "op", &["x", "r"], &["y"])
            .output("y", t, None)
            .build();
        let x = [HostTensor::typed("x", elem(t), &[2, 3], vec![1.0, 0.0, 1.0, 1.0, 0.0, 0.0])];
        assert_matches_ort(&model, &x, 0.0, 0.0, &format!("Tile {} {repeats:?}", name(t)));
    }
    for (b, ishape, idx) in [
        (0i64, vec![2i64, 2], vec![0.0, 1.0, -1.0, 0.0]),
        (0, vec![2, 1], vec![1.0, 0.0]),
        (1, vec![2, 1], vec![1.0, 0.0]),
    ] {
        let dims: Vec<Dim> = ishape.iter().map(|&d| d.into()).collect();
        let model = ModelBuilder::new(13)
            .input("x", FLOAT, &[2.into(), 2.into(), 3.into()])
            .input("i", INT64, &dims)
            .node_with("GatherND", "op", &["x", "i"], &["y"], &[("batch_dims", Attr::Int(b))])
            .output("y", FLOAT, None)
            .build();
        let inputs = [
            HostTensor::f32("x", &[2, 2, 3], (0..12).map(|v| v as f32).collect()),
            HostTensor::typed("i", E::Int64, &ishape, idx),
        ];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("GatherND batch_dims {b} {ishape:?}"));
    }
    for reduction in ["none", "add", "mul", "max", "min"] {
        for axis in [0i64, 1] {
            let model = ModelBuilder::new(18)
                .input("x", FLOAT, &[3.into(), 3.into()])
                .input("i", INT64, &[2.into(), 2.into()])
                .input("u", FLOAT, &[2.into(), 2.into()])
                .node_with(
                    "ScatterElements",
                    "op",
                    &["x", "i", "u"],
                    &["y"],
                    &[("axis", Attr::Int(axis)), ("reduction", Attr::Str(reduction.into()))],
                )
                .output("y", FLOAT, None)
                .build();
            let inputs = [
                HostTensor::f32("x", &[3, 3], (1..=9).map(|v| v as f32).collect()),
                HostTensor::typed("i", E::Int64, &[2, 2], vec![1.0, -1.0, 2.0, 0.0]),
                HostTensor::f32("u", &[2, 2], vec![10.0, -2.0, 0.5, 7.0]),
            ];
            assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("ScatterElements {reduction} axis {axis}"));
        }
        let model = ModelBuilder::new(18)
            .input("x", INT64, &[3.into(), 2.into()])
            .input("i", INT64, &[2.into(), 1.into()])
            .input("u", INT64, &[2.into(), 2.into()])
            .node_with("ScatterND", "op", &["x", "i", "u"], &["y"], &[("reduction", Attr::Str(reduction.into()))])
            .output("y", INT64, None)
            .build();
        let inputs = [
            HostTensor::typed("x", E::Int64, &[3, 2], (1..=6).map(f64::from).collect()),
            HostTensor::typed("i", E::Int64, &[2, 1], vec![2.0, 0.0]),
            HostTensor::typed("u", E::Int64, &[2, 2], vec![10.0, -2.0, 3.0, 7.0]),
        ];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("ScatterND {reduction}"));
    }
    // (indices, depth, values) type combinations ORT's CPU EP implements.
    for (it, depth_type, vt, axis) in [(INT64, INT64, INT64, -1i64), (FLOAT, FLOAT, FLOAT, 0), (INT32, FLOAT, FLOAT, 1)]
    {
        let mut m = ModelBuilder::new(11).input("i", it, &[2.into(), 2.into()]);
        m = if depth_type == INT64 {
            m.initializer_i64("depth", &[1], vec![4])
        } else {
            m.initializer("depth", &[1], vec![4.0])
        };
        let model = m
            .input("v", vt, &[2.into()])
            .node_with("OneHot", "op", &["i", "depth", "v"], &["y"], &[("axis", Attr::Int(axis))])
            .output("y", vt, None)
            .build();
        let inputs = [
            HostTensor::typed("i", elem(it), &[2, 2], vec![0.0, 3.0, -1.0, 7.0]),
            HostTensor::typed("v", elem(vt), &[2], vec![-1.0, 5.0]),
        ];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("OneHot {} axis {axis}", name(it)));
    }
    let model = ModelBuilder::new(18)
        .input("x", FLOAT, &[3.into()])
        .input("i", INT64, &[1.into()])
        .input("u", FLOAT, &[1.into()])
        .node("ScatterElements", "scatter", &["x", "i", "u"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let bad = [
        HostTensor::f32("x", &[3], vec![0.0; 3]),
        HostTensor::typed("i", E::Int64, &[1], vec![3.0]),
        HostTensor::f32("u", &[1], vec![1.0]),
    ];
    let err = harness::run(&mut rivet, &bad).expect_err("index 3 of 3");
    assert!(err.contains("node 'scatter' (ScatterElements) input 1: index 3 is out of range"), "{err}");
}

/// TopK (values and indices, largest and smallest, K fed at Run), GroupNormalization
/// (opset 18's per-group and 21's per-channel scale) and RotaryEmbedding (3-D and 4-D,
/// interleaved, partial rotation, with and without position ids) against ORT.
#[test]
fn top_k_group_norm_and_rotary_embedding_match_ort() {
    for (t, axis, largest) in [(FLOAT, -1i64, 1i64), (FLOAT, 0, 0), (INT64, 1, 1), (DOUBLE, -1, 0)] {
        let model = ModelBuilder::new(11)
            .input("x", t, &[3.into(), 4.into()])
            .input("k", INT64, &[1.into()])
            .node_with(
                "TopK",
                "op",
                &["x", "k"],
                &["v", "i"],
                &[("axis", Attr::Int(axis)), ("largest", Attr::Int(largest))],
            )
            .output("v", t, None)
            .output("i", INT64, None)
            .build();
        let x = vec![3.0, 1.0, 3.0, -2.0, 8.0, 8.0, 0.0, 4.0, 5.0, 5.0, 1.0, 1.0];
        for k in [1.0, 2.0, 3.0] {
            let inputs =
                [HostTensor::typed("x", elem(t), &[3, 4], x.clone()), HostTensor::typed("k", E::Int64, &[1], vec![k])];
            assert_matches_ort(
                &model,
                &inputs,
                0.0,
                0.0,
                &format!("TopK {} axis {axis} largest {largest} k {k}", name(t)),
            );
        }
    }
    for opset in [18i64, 21] {
        let per = if opset == 18 { 2 } else { 4 };
        let model = ModelBuilder::new(opset)
            .input("x", FLOAT, &[2.into(), 4.into(), 3.into()])
            .input("s", FLOAT, &[per.into()])
            .input("b", FLOAT, &[per.into()])
            .node_with(
                "GroupNormalization",
                "op",
                &["x", "s", "b"],
                &["y"],
                &[("num_groups", Attr::Int(2)), ("epsilon", Attr::Float(1e-3))],
            )
            .output("y", FLOAT, None)
            .build();
        let inputs = [
            HostTensor::typed("x", E::Float32, &[2, 4, 3], harness::values(11, 24, -2.0, 3.0)),
            HostTensor::typed("s", E::Float32, &[per], harness::values(12, per as usize, 0.5, 2.0)),
            HostTensor::typed("b", E::Float32, &[per], harness::values(13, per as usize, -1.0, 1.0)),
        ];
        assert_matches_ort(&model, &inputs, 1e-5, 1e-6, &format!("GroupNormalization opset {opset}"));
    }
    for (four_d, interleaved, rot, positions) in
        [(true, 0, 0, true), (false, 1, 0, true), (true, 0, 4, false), (false, 0, 4, true), (true, 1, 0, false)]
    {
        let (b, s, h, d) = (2i64, 3i64, 2i64, 8i64);
        let xs = if four_d { vec![b, h, s, d] } else { vec![b, s, h * d] };
        let half = if rot == 0 { d / 2 } else { rot / 2 };
        let cache = if positions { vec![10, half] } else { vec![b, s, half] };
        let dims = |v: &[i64]| v.iter().map(|&x| x.into()).collect::<Vec<Dim>>();
        let mut attrs = vec![("interleaved", Attr::Int(interleaved))];
        if !four_d {
            attrs.push(("num_heads", Attr::Int(h)));
        }
        if rot > 0 {
            attrs.push(("rotary_embedding_dim", Attr::Int(rot)));
        }
        let mut m = ModelBuilder::new(23).input("x", FLOAT, &dims(&xs)).input("cos", FLOAT, &dims(&cache)).input(
            "sin",
            FLOAT,
            &dims(&cache),
        );
        let mut names = vec!["x", "cos", "sin"];
        let n_cache = cache.iter().product::<i64>() as usize;
        let mut inputs = vec![
            HostTensor::typed("x", E::Float32, &xs, harness::values(21, (b * s * h * d) as usize, -1.0, 1.0)),
            HostTensor::typed("cos", E::Float32, &cache, harness::values(22, n_cache, -1.0, 1.0)),
            HostTensor::typed("sin", E::Float32, &cache, harness::values(23, n_cache, -1.0, 1.0)),
        ];
        if positions {
            m = m.input("pos", INT64, &dims(&[b, s]));
            names.push("pos");
            inputs.push(HostTensor::typed("pos", E::Int64, &[b, s], vec![0.0, 5.0, 9.0, 2.0, 2.0, 7.0]));
        }
        let model = m.node_with("RotaryEmbedding", "op", &names, &["y"], &attrs).output("y", FLOAT, None).build();
        let what = format!("RotaryEmbedding 4d {four_d} interleaved {interleaved} rot {rot} positions {positions}");
        assert_matches_ort(&model, &inputs, 1e-5, 1e-6, &what);
    }
}

/// Range and NonZero, whose output shapes come from their input data, against ORT; the
/// rest of the fused node runs on the shapes they produce. Range with delta 0 is an error
/// naming the node.
#[test]
fn range_and_nonzero_shape_their_outputs_from_data() {
    for (t, start, limit, delta) in
        [(FLOAT, 0.5, 3.0, 0.75), (INT64, 10.0, -3.0, -4.0), (INT32, 0.0, 5.0, 1.0), (DOUBLE, 1.0, 1.0, 1.0)]
    {
        let model = ModelBuilder::new(11)
            .input("s", t, &[])
            .input("l", t, &[])
            .input("d", t, &[])
            .node("Range", "range", &["s", "l", "d"], &["r"])
            .node("Add", "twice", &["r", "r"], &["y"])
            .output("y", t, None)
            .build();
        let scalar = |n: &str, v: f64| HostTensor::typed(n, elem(t), &[], vec![v]);
        let inputs = [scalar("s", start), scalar("l", limit), scalar("d", delta)];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Range {} ({start}, {limit}, {delta})", name(t)));
    }
    for (t, x) in [
        (FLOAT, vec![0.0, 1.5, -0.0, 2.0, 0.0, 3.0]),
        (BOOL, vec![1.0, 0.0, 0.0, 1.0, 1.0, 0.0]),
        (INT32, vec![0.0; 6]),
    ] {
        let model = ModelBuilder::new(13)
            .input("x", t, &[2.into(), 3.into()])
            .node("NonZero", "nz", &["x"], &["y"])
            .output("y", INT64, None)
            .build();
        assert_matches_ort(
            &model,
            &[HostTensor::typed("x", elem(t), &[2, 3], x)],
            0.0,
            0.0,
            &format!("NonZero {}", name(t)),
        );
    }
    let model = ModelBuilder::new(11)
        .input("s", FLOAT, &[])
        .input("l", FLOAT, &[])
        .input("d", FLOAT, &[])
        .node("Range", "range", &["s", "l", "d"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let inputs = [
        HostTensor::f32("s", &[], vec![0.0]),
        HostTensor::f32("l", &[], vec![1.0]),
        HostTensor::f32("d", &[], vec![0.0]),
    ];
    let err = harness::run(&mut rivet, &inputs).expect_err("delta 0");
    assert!(err.contains("node 'range' (Range)") && err.contains("no length"), "{err}");

    // One-element vectors are taken as scalars, as ORT takes them (AffineGrid's
    // function body feeds Range a [1]-shaped size); [1, 1] is an error, as on ORT.
    let model = ModelBuilder::new(11)
        .input("s", FLOAT, &[1.into()])
        .input("l", FLOAT, &[])
        .input("d", FLOAT, &[Dim::Sym("n".into())])
        .node("Range", "range", &["s", "l", "d"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let inputs = [
        HostTensor::f32("s", &[1], vec![1.0]),
        HostTensor::f32("l", &[], vec![6.0]),
        HostTensor::f32("d", &[1], vec![2.0]),
    ];
    assert_matches_ort(&model, &inputs, 0.0, 0.0, "Range on [1]-shaped start and delta");
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let inputs = [
        HostTensor::f32("s", &[1], vec![1.0]),
        HostTensor::f32("l", &[], vec![6.0]),
        HostTensor::f32("d", &[2], vec![2.0; 2]),
    ];
    let err = harness::run(&mut rivet, &inputs).expect_err("delta of two elements");
    assert!(err.contains("node 'range' (Range)") && err.contains("must be scalars"), "{err}");
}

/// Einsum forms against ORT: matrix and batched products (with `...`), transposes,
/// trace, diagonal, outer product, a three-operand contraction, implicit outputs, on
/// float32 and int64.
#[test]
fn einsum_matches_ort() {
    let cases: [(&str, &[&[i64]]); 9] = [
        ("ij,jk->ik", &[&[2, 3], &[3, 4]]),
        ("...ij,...jk->...ik", &[&[2, 2, 3], &[2, 3, 2]]),
        ("bij,bjk", &[&[2, 2, 3], &[2, 3, 2]]),
        ("ij->ji", &[&[2, 3]]),
        ("ii", &[&[3, 3]]),
        ("ii->i", &[&[3, 3]]),
        ("i,j->ij", &[&[3], &[4]]),
        ("ij,jk,kl->il", &[&[2, 3], &[3, 2], &[2, 2]]),
        ("bhqd,bhkd->bhqk", &[&[1, 2, 3, 4], &[1, 2, 5, 4]]),
    ];
    for t in [FLOAT, INT64] {
        for (eq, shapes) in cases {
            let names: Vec<String> = (0..shapes.len()).map(|k| format!("x{k}")).collect();
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let mut m = ModelBuilder::new(12);
            let mut inputs = vec![];
            for (k, s) in shapes.iter().enumerate() {
                let dims: Vec<Dim> = s.iter().map(|&d| d.into()).collect();
                m = m.input(&names[k], t, &dims);
                let n = s.iter().product::<i64>() as usize;
                let v: Vec<f64> = harness::values(k as u64 + 40, n, -3.0, 3.0).into_iter().map(f64::round).collect();
                inputs.push(HostTensor::typed(&names[k], elem(t), s, v));
            }
            let model = m
                .node_with("Einsum", "op", &refs, &["y"], &[("equation", Attr::Str(eq.into()))])
                .output("y", t, None)
                .build();
            assert_matches_ort(&model, &inputs, 1e-6, 1e-6, &format!("Einsum {eq} {}", name(t)));
        }
    }
}

/// Bounds, pads and split sizes fed at Run: Clip's min/max inputs (either or both),
/// Pad's pads (with constant axes) and Split's sizes, against ORT.
#[test]
fn clip_bounds_pad_amounts_and_split_sizes_fed_at_run_match_ort() {
    for (with_min, with_max) in [(true, true), (true, false), (false, true)] {
        let mut m = ModelBuilder::new(13).input("x", FLOAT, &[6.into()]);
        let mut names = vec!["x"];
        let mut inputs = vec![HostTensor::f32("x", &[6], vec![-3.0, -1.0, 0.0, 0.5, 2.0, f32::NAN])];
        if with_min {
            m = m.input("lo", FLOAT, &[]);
            names.push("lo");
            inputs.push(HostTensor::f32("lo", &[], vec![-1.5]));
        } else {
            names.push("");
        }
        if with_max {
            m = m.input("hi", FLOAT, &[]);
            names.push("hi");
            inputs.push(HostTensor::f32("hi", &[], vec![1.0]));
        }
        let model = m.node("Clip", "clip", &names, &["y"]).output("y", FLOAT, None).build();
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Clip min {with_min} max {with_max}"));
    }
    for (mode, axes) in [
        ("constant", None),
        ("reflect", None),
        ("edge", Some(vec![1i64])),
        ("constant", Some(vec![-1, 0])),
        ("reflect", Some(vec![1])),
    ] {
        let n_pads = 2 * axes.as_ref().map_or(2, Vec::len) as i64;
        let mut m =
            ModelBuilder::new(18).input("x", FLOAT, &[2.into(), 3.into()]).input("pads", INT64, &[n_pads.into()]);
        let mut names = vec!["x", "pads"];
        if let Some(a) = &axes {
            m = m.initializer("value", &[], vec![7.5]).initializer_i64("axes", &[a.len() as i64], a.clone());
            names.extend(["value", "axes"]);
        }
        let model = m
            .node_with("Pad", "pad", &names, &["y"], &[("mode", Attr::Str(mode.into()))])
            .output("y", FLOAT, None)
            .build();
        // Begins differ from ends, and stay below the axis sizes (reflect needs that).
        let pads: Vec<f64> = match n_pads {
            4 => vec![1.0, 2.0, 0.0, 1.0],
            _ => vec![2.0, 1.0],
        };
        let inputs = [
            HostTensor::f32("x", &[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            HostTensor::typed("pads", E::Int64, &[n_pads], pads),
        ];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Pad {mode} axes {axes:?} pads at Run"));
    }
    let model = ModelBuilder::new(13)
        .input("x", INT64, &[7.into()])
        .input("sizes", INT64, &[3.into()])
        .node("Split", "split", &["x", "sizes"], &["a", "b", "c"])
        .output("a", INT64, None)
        .output("b", INT64, None)
        .output("c", INT64, None)
        .build();
    for sizes in [vec![1.0, 4.0, 2.0], vec![0.0, 7.0, 0.0]] {
        let inputs = [
            HostTensor::typed("x", E::Int64, &[7], (0..7).map(f64::from).collect()),
            HostTensor::typed("sizes", E::Int64, &[3], sizes.clone()),
        ];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Split sizes {sizes:?} at Run"));
    }
}
