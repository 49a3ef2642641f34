//! Float64 and integer math on Rivet alone against ORT's CPU EP: math, CumSum and the
//! reductions, Pad, ConstantOfShape, softmax, norms and products in float64, Clip, Pow of
//! mixed types, half-precision comparisons, inputs fed at Run, and Dropout and
//! BatchNormalization in training mode (split from e2e_typed.rs).

mod common;

use common::typed::{elem, name, unary_model};
use common::{assert_matches_ort, env, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, BOOL, DOUBLE, FLOAT, FLOAT16, INT32, INT64, INT8, UINT8};

/// float64 computed in float64: elementwise math, CumSum and the reductions against ORT's
/// float64 kernels (rtol 1e-12; ORT has no float64 kernel for some of the ops Rivet runs,
/// which are then not compared).
#[test]
fn float64_math_cumsum_and_reductions_match_ort() {
    let x: Vec<f64> = vec![-2.5, -1.0, -0.25, 0.0, 0.3, 1.0, 2.0, 7.5, 0.125, -3.0, 4.0, 0.6];
    let pos: Vec<f64> = x.iter().map(|v| v.abs() + 0.1).collect();
    for op in
        ["Exp", "Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Floor", "Ceil", "Reciprocal", "Sin", "Cos", "Round", "Sign"]
    {
        let model = unary_model(op, DOUBLE, DOUBLE, &[], 13);
        let inputs = [HostTensor::typed("x", E::Float64, &[12], x.clone())];
        assert_matches_ort(&model, &inputs, 1e-12, 1e-300, &format!("{op} f64"));
    }
    for op in ["Log", "Sqrt"] {
        let inputs = [HostTensor::typed("x", E::Float64, &[12], pos.clone())];
        assert_matches_ort(&unary_model(op, DOUBLE, DOUBLE, &[], 13), &inputs, 1e-12, 1e-300, &format!("{op} f64"));
    }
    for (exclusive, reverse) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
        let model = ModelBuilder::new(14)
            .input("x", DOUBLE, &[3.into(), 4.into()])
            .initializer_i64("axis", &[], vec![1])
            .node_with(
                "CumSum",
                "op",
                &["x", "axis"],
                &["y"],
                &[("exclusive", Attr::Int(exclusive)), ("reverse", Attr::Int(reverse))],
            )
            .output("y", DOUBLE, None)
            .build();
        let inputs = [HostTensor::typed("x", E::Float64, &[3, 4], x.clone())];
        assert_matches_ort(
            &model,
            &inputs,
            1e-12,
            1e-300,
            &format!("CumSum f64 exclusive {exclusive} reverse {reverse}"),
        );
    }
    for op in [
        "ReduceSum",
        "ReduceMean",
        "ReduceMax",
        "ReduceMin",
        "ReduceProd",
        "ReduceLogSumExp",
        "ReduceL2",
        "ReduceSumSquare",
    ] {
        for (axes, keepdims) in [(vec![1i64], 1), (vec![0, 2], 0)] {
            let model = ModelBuilder::new(18)
                .input("x", DOUBLE, &[2.into(), 3.into(), 2.into()])
                .initializer_i64("axes", &[axes.len() as i64], axes.clone())
                .node_with(op, "op", &["x", "axes"], &["y"], &[("keepdims", Attr::Int(keepdims))])
                .output("y", DOUBLE, None)
                .build();
            let inputs = [HostTensor::typed("x", E::Float64, &[2, 3, 2], x.clone())];
            assert_matches_ort(&model, &inputs, 1e-12, 1e-300, &format!("{op} f64 axes {axes:?}"));
        }
    }
}

/// Integer Abs, Neg, Relu, Sign, CumSum and every reduction, and bool ReduceMax/Min,
/// against ORT (only the type combinations ORT's CPU EP implements).
#[test]
fn integer_math_cumsum_and_reductions_match_ort() {
    let x: Vec<f64> = vec![-7.0, 3.0, 0.0, 12.0, -1.0, 5.0, 2.0, -4.0, 9.0, 1.0, -2.0, 6.0];
    for (op, types) in [
        ("Abs", vec![INT32, INT64, INT8]),
        ("Neg", vec![INT32, INT64, INT8]),
        ("Relu", vec![INT32, INT8]),
        ("Sign", vec![INT32, INT64]),
    ] {
        for t in types {
            let inputs = [HostTensor::typed("x", elem(t), &[12], x.clone())];
            assert_matches_ort(&unary_model(op, t, t, &[], 14), &inputs, 0.0, 0.0, &format!("{op} {}", name(t)));
        }
    }
    for t in [INT32, INT64] {
        let model = ModelBuilder::new(14)
            .input("x", t, &[3.into(), 4.into()])
            .initializer_i64("axis", &[], vec![0])
            .node_with("CumSum", "op", &["x", "axis"], &["y"], &[("reverse", Attr::Int(1))])
            .output("y", t, None)
            .build();
        let inputs = [HostTensor::typed("x", elem(t), &[3, 4], x.clone())];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("CumSum {}", name(t)));
        for op in ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceSumSquare"] {
            let model = ModelBuilder::new(18)
                .input("x", t, &[2.into(), 3.into(), 2.into()])
                .initializer_i64("axes", &[1], vec![1])
                .node_with(op, "op", &["x", "axes"], &["y"], &[("keepdims", Attr::Int(0))])
                .output("y", t, None)
                .build();
            let inputs = [HostTensor::typed("x", elem(t), &[2, 3, 2], x.clone())];
            assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("{op} {}", name(t)));
        }
        // Not exact in integers: computed in f64 and truncated, as ORT does (on |x|: the
        // log of a negative sum is NaN, whose cast to an integer C++ leaves undefined).
        for op in ["ReduceL2", "ReduceLogSum", "ReduceLogSumExp"] {
            let model = ModelBuilder::new(18)
                .input("x", t, &[2.into(), 3.into(), 2.into()])
                .initializer_i64("axes", &[1], vec![1])
                .node_with(op, "op", &["x", "axes"], &["y"], &[("keepdims", Attr::Int(0))])
                .output("y", t, None)
                .build();
            let abs: Vec<f64> = x.iter().map(|v| v.abs()).collect();
            let inputs = [HostTensor::typed("x", elem(t), &[2, 3, 2], abs)];
            assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("{op} {}", name(t)));
        }
    }
    for op in ["ReduceMax", "ReduceMin"] {
        let model = ModelBuilder::new(20)
            .input("x", BOOL, &[2.into(), 3.into()])
            .initializer_i64("axes", &[1], vec![1])
            .node(op, "op", &["x", "axes"], &["y"])
            .output("y", BOOL, None)
            .build();
        let inputs = [HostTensor::typed("x", E::Bool, &[2, 3], vec![1.0, 0.0, 1.0, 1.0, 1.0, 1.0])];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("{op} bool"));
    }
}

/// Pad on other element types (edge, reflect, zero constant) and in wrap mode.
#[test]
fn pad_on_any_type_and_wrap_mode_match_ort() {
    for (t, mode, opset) in [
        (INT32, "edge", 18i64),
        (INT32, "reflect", 18),
        (INT64, "constant", 18),
        (FLOAT, "wrap", 19),
        (INT32, "wrap", 19),
    ] {
        let model = ModelBuilder::new(opset)
            .input("x", t, &[2.into(), 3.into()])
            .initializer_i64("pads", &[4], vec![1, 2, 0, 1])
            .node_with("Pad", "pad", &["x", "pads"], &["y"], &[("mode", Attr::Str(mode.into()))])
            .output("y", t, None)
            .build();
        let inputs = [HostTensor::typed("x", elem(t), &[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Pad {mode} {}", name(t)));
    }
}

/// ConstantOfShape (value from a tensor attribute, or the default 0.0) with the shape a
/// constant or fed at Run, against ORT.
#[test]
fn constant_of_shape_matches_ort() {
    let values: [(i32, Option<Vec<u8>>); 4] = [
        (FLOAT, None),
        (FLOAT, Some(1.5f32.to_le_bytes().to_vec())),
        (INT64, Some(7i64.to_le_bytes().to_vec())),
        (INT32, Some((-3i32).to_le_bytes().to_vec())),
    ];
    for (t, value) in values {
        let attrs: Vec<(&str, Attr)> = match &value {
            Some(raw) => vec![("value", Attr::Tensor(t, vec![1], raw.clone()))],
            None => vec![],
        };
        let model = ModelBuilder::new(20)
            .input("shape", INT64, &[2.into()])
            .node_with("ConstantOfShape", "op", &["shape"], &["y"], &attrs)
            .output("y", t, None)
            .build();
        for dims in [vec![2.0, 3.0], vec![0.0, 4.0]] {
            let inputs = [HostTensor::typed("shape", E::Int64, &[2], dims.clone())];
            assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("ConstantOfShape {} {value:?} {dims:?}", name(t)));
        }
    }
}

/// float64 Softmax/LogSoftmax (opset 11's 2-D coercion and 13's axis), LayerNormalization,
/// MatMul (batched, broadcast, 1-D) and Gemm computed in float64, against ORT at rtol 1e-12.
#[test]
fn float64_softmax_norm_and_products_match_ort() {
    let v = |seed: u64, n: usize| harness::values(seed, n, -2.0, 2.0);
    for (op, opset, axis) in [("Softmax", 13i64, -1i64), ("LogSoftmax", 13, 1), ("Softmax", 11, 1)] {
        let model = ModelBuilder::new(opset)
            .input("x", DOUBLE, &[2.into(), 3.into(), 4.into()])
            .node_with(op, "op", &["x"], &["y"], &[("axis", Attr::Int(axis))])
            .output("y", DOUBLE, None)
            .build();
        let inputs = [HostTensor::typed("x", E::Float64, &[2, 3, 4], v(1, 24))];
        assert_matches_ort(&model, &inputs, 1e-12, 1e-300, &format!("{op} f64 opset {opset} axis {axis}"));
    }
    let ln = ModelBuilder::new(17)
        .input("x", DOUBLE, &[2.into(), 3.into(), 4.into()])
        .input("s", DOUBLE, &[4.into()])
        .input("b", DOUBLE, &[4.into()])
        .node_with("LayerNormalization", "ln", &["x", "s", "b"], &["y"], &[("axis", Attr::Int(-1))])
        .output("y", DOUBLE, None)
        .build();
    let inputs = [
        HostTensor::typed("x", E::Float64, &[2, 3, 4], v(2, 24)),
        HostTensor::typed("s", E::Float64, &[4], v(3, 4)),
        HostTensor::typed("b", E::Float64, &[4], v(4, 4)),
    ];
    assert_matches_ort(&ln, &inputs, 1e-12, 1e-12, "LayerNormalization f64");
    for (sa, sb) in [
        (vec![2i64, 3, 4], vec![4i64, 5]),
        (vec![1, 3, 4], vec![2, 4, 2]),
        (vec![4], vec![2, 4, 3]),
        (vec![3, 4], vec![4]),
    ] {
        let dims = |s: &[i64]| s.iter().map(|&d| d.into()).collect::<Vec<Dim>>();
        let model = ModelBuilder::new(13)
            .input("a", DOUBLE, &dims(&sa))
            .input("b", DOUBLE, &dims(&sb))
            .node("MatMul", "mm", &["a", "b"], &["y"])
            .output("y", DOUBLE, None)
            .build();
        let inputs = [
            HostTensor::typed("a", E::Float64, &sa, v(5, sa.iter().product::<i64>() as usize)),
            HostTensor::typed("b", E::Float64, &sb, v(6, sb.iter().product::<i64>() as usize)),
        ];
        assert_matches_ort(&model, &inputs, 1e-12, 1e-12, &format!("MatMul f64 {sa:?} x {sb:?}"));
    }
    for (ta, tb) in [(0i64, 0i64), (1, 0), (0, 1), (1, 1)] {
        let (sa, sb) = (if ta == 1 { [4i64, 3] } else { [3, 4] }, if tb == 1 { [5i64, 4] } else { [4, 5] });
        let model = ModelBuilder::new(13)
            .input("a", DOUBLE, &[sa[0].into(), sa[1].into()])
            .input("b", DOUBLE, &[sb[0].into(), sb[1].into()])
            .input("c", DOUBLE, &[5.into()])
            .node_with(
                "Gemm",
                "gemm",
                &["a", "b", "c"],
                &["y"],
                &[
                    ("transA", Attr::Int(ta)),
                    ("transB", Attr::Int(tb)),
                    ("alpha", Attr::Float(0.5)),
                    ("beta", Attr::Float(2.0)),
                ],
            )
            .output("y", DOUBLE, None)
            .build();
        let inputs = [
            HostTensor::typed("a", E::Float64, &sa, v(7, 12)),
            HostTensor::typed("b", E::Float64, &sb, v(8, 20)),
            HostTensor::typed("c", E::Float64, &[5], v(9, 5)),
        ];
        assert_matches_ort(&model, &inputs, 1e-12, 1e-12, &format!("Gemm f64 transA {ta} transB {tb}"));
    }
}

/// Clip on integers and float64, bounds read at Run in the element type.
#[test]
fn clip_on_integers_and_float64_matches_ort() {
    for t in [INT32, INT64, INT8, UINT8, DOUBLE] {
        let model = ModelBuilder::new(13)
            .input("x", t, &[6.into()])
            .input("lo", t, &[])
            .input("hi", t, &[])
            .node("Clip", "clip", &["x", "lo", "hi"], &["y"])
            .output("y", t, None)
            .build();
        let inputs = [
            HostTensor::typed("x", elem(t), &[6], vec![0.0, 3.0, 9.0, 12.0, 100.0, 5.0]),
            HostTensor::typed("lo", elem(t), &[], vec![3.0]),
            HostTensor::typed("hi", elem(t), &[], vec![10.0]),
        ];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Clip {}", name(t)));
    }
}

/// float64 BatchNormalization against ORT and Hardmax against its one-hot, computed in
/// float64.
#[test]
fn float64_batch_norm_and_hardmax_match_ort() {
    let v = |seed: u64, n: usize, lo: f64| harness::values(seed, n, lo, 2.0);
    let x = HostTensor::typed("x", E::Float64, &[2, 4, 3], v(1, 24, -2.0));
    let c = |name: &str, seed: u64, lo: f64| HostTensor::typed(name, E::Float64, &[4], v(seed, 4, lo));
    let bn = ModelBuilder::new(15)
        .input("x", DOUBLE, &[2.into(), 4.into(), 3.into()])
        .input("s", DOUBLE, &[4.into()])
        .input("b", DOUBLE, &[4.into()])
        .input("m", DOUBLE, &[4.into()])
        .input("var", DOUBLE, &[4.into()])
        .node("BatchNormalization", "bn", &["x", "s", "b", "m", "var"], &["y"])
        .output("y", DOUBLE, None)
        .build();
    let inputs = [x.clone(), c("s", 2, -1.0), c("b", 3, -1.0), c("m", 4, -1.0), c("var", 5, 0.1)];
    assert_matches_ort(&bn, &inputs, 1e-12, 1e-12, "BatchNormalization f64");
    // ORT has no float64 Hardmax: the expected one-hot is written out (axis 1 of [1, 3, 2],
    // ties to the first maximum).
    let hm = ModelBuilder::new(13)
        .input("x", DOUBLE, &[1.into(), 3.into(), 2.into()])
        .node_with("Hardmax", "hm", &["x"], &["y"], &[("axis", Attr::Int(1))])
        .output("y", DOUBLE, None)
        .build();
    let mut rivet = harness::session(env(), &hm, Arm::Rivet, &strict()).expect("session");
    let x = HostTensor::typed("x", E::Float64, &[1, 3, 2], vec![1.0, 5.0, 3.0, 5.0, 2.0, -1.0]);
    let y = harness::run(&mut rivet, &[x]).expect("runs");
    assert_eq!(y[0].data, vec![0.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
}

/// Pow with base and exponent of different numeric types, computed in f64.
#[test]
fn pow_with_mixed_types_matches_ort() {
    for (tb, te) in [(FLOAT, INT64), (INT32, FLOAT), (INT64, INT64), (DOUBLE, INT32), (INT32, INT32)] {
        let model = ModelBuilder::new(15)
            .input("x", tb, &[2.into(), 3.into()])
            .input("e", te, &[3.into()])
            .node("Pow", "pow", &["x", "e"], &["y"])
            .output("y", tb, None)
            .build();
        let inputs = [
            HostTensor::typed("x", elem(tb), &[2, 3], vec![1.0, 2.0, 3.0, -2.0, 5.0, 0.0]),
            HostTensor::typed("e", elem(te), &[3], vec![2.0, 3.0, 0.0]),
        ];
        assert_matches_ort(&model, &inputs, 1e-12, 0.0, &format!("Pow {} ^ {}", name(tb), name(te)));
    }
}

/// Comparisons, ArgMax/ArgMin, TopK and Mod (fmod) on float16 and bfloat16 run in float32
/// between casts, which is exact for them: inputs that are exact in the half type give
/// ORT's float32 answer bit for bit (bool and int64 outputs are written directly).
#[test]
fn half_comparisons_arg_max_top_k_and_mod_are_exact() {
    // (op, attrs, inputs, output types: FLOAT16 marks "the half type")
    type Case = (&'static str, Vec<(&'static str, Attr)>, usize, Vec<i32>);
    let cases: Vec<Case> = vec![
        ("Equal", vec![], 2, vec![BOOL]),
        ("Less", vec![], 2, vec![BOOL]),
        ("GreaterOrEqual", vec![], 2, vec![BOOL]),
        ("ArgMax", vec![("axis", Attr::Int(1))], 1, vec![INT64]),
        ("ArgMin", vec![("axis", Attr::Int(0)), ("select_last_index", Attr::Int(1))], 1, vec![INT64]),
        ("Mod", vec![("fmod", Attr::Int(1))], 2, vec![FLOAT16]),
        ("TopK", vec![("axis", Attr::Int(-1))], 1, vec![FLOAT16, INT64]),
    ];
    // Quarter steps in [-4, 4): exact in float16 and bfloat16, with ties.
    let data =
        |seed: u64| -> Vec<f64> { harness::values(seed, 12, -16.0, 16.0).iter().map(|v| v.floor() / 4.0).collect() };
    for half in [FLOAT16, 16 /* bfloat16 */] {
        for (op, attrs, arity, outs) in &cases {
            // Opset 24: TopK takes bfloat16 from there.
            let mut with_casts = ModelBuilder::new(24);
            let mut plain = ModelBuilder::new(24);
            let mut inputs = vec![];
            let (mut h_in, mut x_in) = (vec![], vec![]);
            for k in 0..*arity {
                let x = format!("x{k}");
                with_casts = with_casts.input(&x, FLOAT, &[3.into(), 4.into()]).node_with(
                    "Cast",
                    &format!("to_half{k}"),
                    &[&x],
                    &[&format!("h{k}")],
                    &[("to", Attr::Int(half as i64))],
                );
                plain = plain.input(&x, FLOAT, &[3.into(), 4.into()]);
                let mut v = data(k as u64 + 40);
                if *op == "Mod" && k == 1 {
                    v.iter_mut().for_each(|d| *d = if *d == 0.0 { 1.5 } else { *d });
                }
                inputs.push(HostTensor::typed(&x, E::Float32, &[3, 4], v));
                h_in.push(format!("h{k}"));
                x_in.push(x);
            }
            let mut h_refs: Vec<&str> = h_in.iter().map(String::as_str).collect();
            let mut x_refs: Vec<&str> = x_in.iter().map(String::as_str).collect();
            if *op == "TopK" {
                with_casts = with_casts.initializer_i64("k", &[1], vec![3]);
                plain = plain.initializer_i64("k", &[1], vec![3]);
                h_refs.push("k");
                x_refs.push("k");
            }
            let y_names: Vec<String> = (0..outs.len()).map(|k| format!("y{k}")).collect();
            let hy_names: Vec<String> = (0..outs.len()).map(|k| format!("hy{k}")).collect();
            let node_outs: Vec<&str> = outs
                .iter()
                .enumerate()
                .map(|(k, &t)| if t == FLOAT16 { hy_names[k].as_str() } else { y_names[k].as_str() })
                .collect();
            with_casts = with_casts.node_with(op, "op", &h_refs, &node_outs, attrs);
            let y_refs: Vec<&str> = y_names.iter().map(String::as_str).collect();
            plain = plain.node_with(op, "op", &x_refs, &y_refs, attrs);
            for (k, &t) in outs.iter().enumerate() {
                let real = if t == FLOAT16 { FLOAT } else { t };
                if t == FLOAT16 {
                    with_casts = with_casts.node_with(
                        "Cast",
                        &format!("to_float{k}"),
                        &[&hy_names[k]],
                        &[&y_names[k]],
                        &[("to", Attr::Int(FLOAT as i64))],
                    );
                }
                with_casts = with_casts.output(&y_names[k], real, None);
                plain = plain.output(&y_names[k], real, None);
            }
            let mut rivet = harness::session(env(), &with_casts.build(), Arm::Rivet, &strict()).expect("Rivet session");
            let mut ort = common::ort_session(&plain.build());
            let got = harness::run(&mut rivet, &inputs).expect("Rivet run");
            let want = harness::run(&mut ort, &inputs).expect("ORT run");
            harness::compare(&got, &want, 0.0, 0.0).unwrap_or_else(|e| panic!("{op} as type {half}: {e}"));
        }
    }
}

/// float64 GroupNormalization, InstanceNormalization and Attention are claimed and computed
/// in float64: against ORT's float32 result on the same values, and (for the norms) on
/// values a float32 cannot hold, against the normalization written out.
#[test]
fn float64_group_and_instance_norm_and_attention() {
    let norm = |op: &str, t: i32, opset: i64, attrs: &[(&str, Attr)]| {
        ModelBuilder::new(opset)
            .input("x", t, &[2.into(), 4.into(), 3.into()])
            .input("s", t, &[4.into()])
            .input("b", t, &[4.into()])
            .node_with(op, "op", &["x", "s", "b"], &["y"], attrs)
            .output("y", t, None)
            .build()
    };
    let x = harness::values(31, 24, -2.0, 3.0);
    let (s, b) = (harness::values(32, 4, 0.5, 2.0), harness::values(33, 4, -1.0, 1.0));
    type Case = (&'static str, i64, Vec<(&'static str, Attr)>);
    let cases: [Case; 2] = [
        ("GroupNormalization", 21, vec![("num_groups", Attr::Int(2)), ("epsilon", Attr::Float(1e-3))]),
        ("InstanceNormalization", 6, vec![("epsilon", Attr::Float(1e-3))]),
    ];
    for (op, opset, attrs) in &cases {
        let feed = |e: E, x: &[f64], s: &[f64], b: &[f64]| {
            vec![
                HostTensor::typed("x", e, &[2, 4, 3], x.to_vec()),
                HostTensor::typed("s", e, &[4], s.to_vec()),
                HostTensor::typed("b", e, &[4], b.to_vec()),
            ]
        };
        let mut rivet = harness::session(env(), &norm(op, DOUBLE, *opset, attrs), Arm::Rivet, &strict())
            .unwrap_or_else(|e| panic!("{op} f64 is claimed: {e}"));
        let mut ort = common::ort_session(&norm(op, FLOAT, *opset, attrs));
        let got = harness::run(&mut rivet, &feed(E::Float64, &x, &s, &b)).expect("Rivet run");
        let want = harness::run(&mut ort, &feed(E::Float32, &x, &s, &b)).expect("ORT run");
        harness::compare(&got, &want, 1e-5, 1e-5).unwrap_or_else(|e| panic!("{op} f64 vs ORT f32: {e}"));
        // 1e8 + k: no float32 holds these; each group (and channel) has variance 1.25 or 2/3.
        let big: Vec<f64> = (0..24).map(|k| 1e8 + (k % 4) as f64).collect();
        let got = harness::run(&mut rivet, &feed(E::Float64, &big, &[1.0; 4], &[0.0; 4])).expect("runs");
        let per = if *op == "GroupNormalization" { 6 } else { 3 };
        for (k, chunk) in big.chunks(per).enumerate() {
            let mean = chunk.iter().sum::<f64>() / per as f64;
            let var = chunk.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / per as f64;
            for (j, v) in chunk.iter().enumerate() {
                let want = (v - mean) / (var + f64::from(1e-3f32)).sqrt();
                let at = k * per + j;
                assert!((got[0].data[at] - want).abs() < 1e-9, "{op} at {at}: {} vs {want}", got[0].data[at]);
            }
        }
    }
    // Attention: float64 Q, K, V with a float64 mask and with an int32 one (added).
    for mask in [DOUBLE, INT32] {
        let model = |t: i32, mt: i32| {
            ModelBuilder::new(23)
                .input("Q", t, &[1.into(), 2.into(), 3.into(), 4.into()])
                .input("K", t, &[1.into(), 2.into(), 5.into(), 4.into()])
                .input("V", t, &[1.into(), 2.into(), 5.into(), 4.into()])
                .input("M", mt, &[3.into(), 5.into()])
                .node_with("Attention", "attn", &["Q", "K", "V", "M"], &["Y"], &[("is_causal", Attr::Int(1))])
                .output("Y", t, None)
                .build()
        };
        let m: Vec<f64> = (0..15).map(|k| -((k % 3) as f64)).collect();
        let feed = |e: E, me: E| {
            vec![
                HostTensor::typed("Q", e, &[1, 2, 3, 4], harness::values(41, 24, -1.0, 1.0)),
                HostTensor::typed("K", e, &[1, 2, 5, 4], harness::values(42, 40, -1.0, 1.0)),
                HostTensor::typed("V", e, &[1, 2, 5, 4], harness::values(43, 40, -1.0, 1.0)),
                HostTensor::typed("M", me, &[3, 5], m.clone()),
            ]
        };
        let mut rivet = harness::session(env(), &model(DOUBLE, mask), Arm::Rivet, &strict())
            .unwrap_or_else(|e| panic!("Attention f64 is claimed: {e}"));
        let mut ort = common::ort_session(&model(FLOAT, FLOAT));
        let got = harness::run(&mut rivet, &feed(E::Float64, elem(mask))).expect("Rivet run");
        let want = harness::run(&mut ort, &feed(E::Float32, E::Float32)).expect("ORT run");
        harness::compare(&got, &want, 1e-5, 1e-6).unwrap_or_else(|e| panic!("Attention f64, {} mask: {e}", name(mask)));
    }
}

/// CumSum's axis fed at Run (int32 or int64) and OneHot's depth fed at Run (its output
/// shape then comes from that value) match ORT; a depth of 0 is an error naming the node.
#[test]
fn cumsum_axis_and_one_hot_depth_fed_at_run_match_ort() {
    for (axis_type, axis) in [(INT32, 1.0), (INT64, -2.0), (INT32, 0.0)] {
        let model = ModelBuilder::new(14)
            .input("x", FLOAT, &[3.into(), 4.into()])
            .input("axis", axis_type, &[])
            .node_with("CumSum", "op", &["x", "axis"], &["y"], &[("exclusive", Attr::Int(1))])
            .output("y", FLOAT, None)
            .build();
        let inputs = [
            HostTensor::typed("x", E::Float32, &[3, 4], harness::values(51, 12, -2.0, 2.0)),
            HostTensor::typed("axis", elem(axis_type), &[], vec![axis]),
        ];
        assert_matches_ort(&model, &inputs, 1e-6, 1e-6, &format!("CumSum axis {axis} as {}", name(axis_type)));
    }
    for (it, dt, vt, axis) in [(INT64, INT64, INT64, -1i64), (FLOAT, FLOAT, FLOAT, 0), (INT32, FLOAT, FLOAT, 1)] {
        let model = ModelBuilder::new(11)
            .input("i", it, &[2.into(), 2.into()])
            .input("depth", dt, &[1.into()])
            .input("v", vt, &[2.into()])
            .node_with("OneHot", "onehot", &["i", "depth", "v"], &["y"], &[("axis", Attr::Int(axis))])
            .output("y", vt, None)
            .build();
        for depth in [4.0, 9.0] {
            let inputs = [
                HostTensor::typed("i", elem(it), &[2, 2], vec![0.0, 3.0, -1.0, 7.0]),
                HostTensor::typed("depth", elem(dt), &[1], vec![depth]),
                HostTensor::typed("v", elem(vt), &[2], vec![-1.0, 5.0]),
            ];
            assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("OneHot depth {depth} fed at Run, axis {axis}"));
        }
        let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
        let bad = [
            HostTensor::typed("i", elem(it), &[2, 2], vec![0.0; 4]),
            HostTensor::typed("depth", elem(dt), &[1], vec![0.0]),
            HostTensor::typed("v", elem(vt), &[2], vec![0.0, 1.0]),
        ];
        let err = harness::run(&mut rivet, &bad).expect_err("depth 0");
        assert!(err.contains("node 'onehot' (OneHot): depth 0 is not a positive count"), "{err}");
    }
}

/// Pad's constant value fed at Run (float32, int64, float16) or a constant of another type
/// than float32, and its axes fed at Run, against ORT; a value of two elements or an axis
/// given twice is an error naming the node.
#[test]
fn pad_value_and_axes_fed_at_run_match_ort() {
    for (t, value) in [(FLOAT, -2.5), (INT64, 9.0), (INT32, -4.0), (DOUBLE, 0.125)] {
        for axes_at_run in [false, true] {
            let mut m = ModelBuilder::new(18)
                .input("x", t, &[2.into(), 3.into()])
                .input("pads", INT64, &[2.into()])
                .input("value", t, &[]);
            m = if axes_at_run {
                m.input("axes", INT64, &[1.into()])
            } else {
                m.initializer_i64("axes", &[1], vec![-1])
            };
            let model = m.node("Pad", "pad", &["x", "pads", "value", "axes"], &["y"]).output("y", t, None).build();
            let mut inputs = vec![
                HostTensor::typed("x", elem(t), &[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
                HostTensor::typed("pads", E::Int64, &[2], vec![1.0, 2.0]),
                HostTensor::typed("value", elem(t), &[], vec![value]),
            ];
            if axes_at_run {
                for axis in [0.0, -1.0] {
                    inputs.truncate(3);
                    inputs.push(HostTensor::typed("axes", E::Int64, &[1], vec![axis]));
                    assert_matches_ort(
                        &model,
                        &inputs,
                        0.0,
                        0.0,
                        &format!("Pad {} value and axis {axis} at Run", name(t)),
                    );
                }
            } else {
                assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Pad {} value at Run", name(t)));
            }
        }
    }
    // A constant int64 value (not a float32 one) is read as a data input too.
    let model = ModelBuilder::new(18)
        .input("x", INT64, &[2.into(), 2.into()])
        .initializer_i64("pads", &[4], vec![0, 1, 1, 0])
        .initializer_i64("value", &[], vec![-7])
        .node("Pad", "pad", &["x", "pads", "value"], &["y"])
        .output("y", INT64, None)
        .build();
    let x = [HostTensor::typed("x", E::Int64, &[2, 2], vec![1.0, 2.0, 3.0, 4.0])];
    assert_matches_ort(&model, &x, 0.0, 0.0, "Pad int64 with a constant int64 value");
    // float16, fed through Casts: against the padded values written out.
    let half = ModelBuilder::new(18)
        .input("x", FLOAT, &[2.into(), 2.into()])
        .input("pads", INT64, &[4.into()])
        .input("value", FLOAT, &[])
        .node_with("Cast", "cx", &["x"], &["hx"], &[("to", Attr::Int(FLOAT16 as i64))])
        .node_with("Cast", "cv", &["value"], &["hv"], &[("to", Attr::Int(FLOAT16 as i64))])
        .node("Pad", "pad", &["hx", "pads", "hv"], &["hy"])
        .node_with("Cast", "cy", &["hy"], &["y"], &[("to", Attr::Int(FLOAT as i64))])
        .output("y", FLOAT, None)
        .build();
    let mut rivet = harness::session(env(), &half, Arm::Rivet, &strict()).expect("session");
    let inputs = [
        HostTensor::f32("x", &[2, 2], vec![1.0, 2.0, 3.0, 4.0]),
        HostTensor::typed("pads", E::Int64, &[4], vec![1.0, 0.0, 0.0, 1.0]),
        HostTensor::f32("value", &[], vec![-0.5]),
    ];
    let y = harness::run(&mut rivet, &inputs).expect("runs");
    assert_eq!(y[0].data, vec![-0.5, -0.5, -0.5, 1.0, 2.0, -0.5, 3.0, 4.0, -0.5]);
    // Bad input at Run.
    let model = ModelBuilder::new(18)
        .input("x", FLOAT, &[2.into(), 2.into()])
        .input("pads", INT64, &[4.into()])
        .input("value", FLOAT, &[Dim::Sym("n".into())])
        .input("axes", INT64, &[2.into()])
        .node("Pad", "pad", &["x", "pads", "value", "axes"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let feed = |value: Vec<f32>, axes: Vec<f64>| {
        vec![
            HostTensor::f32("x", &[2, 2], vec![1.0; 4]),
            HostTensor::typed("pads", E::Int64, &[4], vec![1.0; 4]),
            HostTensor::f32("value", &[value.len() as i64], value),
            HostTensor::typed("axes", E::Int64, &[2], axes),
        ]
    };
    let err = harness::run(&mut rivet, &feed(vec![1.0, 2.0], vec![0.0, 1.0])).expect_err("two values");
    assert!(err.contains("node 'pad' (Pad)") && err.contains("constant_value must hold one value"), "{err}");
    let err = harness::run(&mut rivet, &feed(vec![1.0], vec![1.0, -1.0])).expect_err("axis twice");
    assert!(err.contains("node 'pad' (Pad)") && err.contains("axis 1 is given twice"), "{err}");
    assert!(harness::run(&mut rivet, &feed(vec![1.0], vec![1.0, 0.0])).is_ok());
}

/// Dropout in training mode (ORT's own mask is random, so this checks the definition, not
/// ORT): with a seed the mask is numpy's `RandomState(seed).uniform(0, 1, shape) >=
/// ratio` (pinned from numpy), the same each Run, and the output is x / (1 - ratio) where
/// kept; without a seed each Run draws anew, keeping about 1 - ratio; training_mode false
/// at Run is the identity with an all-true mask; a ratio of 1 is an error naming the node.
#[test]
fn dropout_in_training_mode() {
    let model = |t: i32, seed: Option<i64>, with_mask: bool| {
        let attrs: Vec<(&str, Attr)> = seed.map(|s| ("seed", Attr::Int(s))).into_iter().collect();
        let outs: &[&str] = if with_mask { &["y", "mask"] } else { &["y"] };
        let mut m = ModelBuilder::new(13)
            .input("x", t, &[Dim::from("N")])
            .input("ratio", FLOAT, &[])
            .input("training", BOOL, &[])
            .node_with("Dropout", "drop", &["x", "ratio", "training"], outs, &attrs)
            .output("y", t, None);
        if with_mask {
            m = m.output("mask", BOOL, None);
        }
        m.build()
    };
    let feed = |e: E, x: &[f64], ratio: f64, training: bool| {
        vec![
            HostTensor::typed("x", e, &[x.len() as i64], x.to_vec()),
            HostTensor::f32("ratio", &[], vec![ratio as f32]),
            HostTensor::typed("training", E::Bool, &[], vec![f64::from(u8::from(training))]),
        ]
    };
    let x: Vec<f64> = (1..=12).map(f64::from).collect();
    // numpy: RandomState(0).random_sample(12) >= 0.75, and RandomState(42) >= 0.5.
    let pinned = [(0, 0.75, [0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 1, 0]), (42, 0.5, [0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0, 1])];
    for (t, e) in [(FLOAT, E::Float32), (DOUBLE, E::Float64)] {
        for (seed, ratio, want) in pinned {
            let mut s = harness::session(env(), &model(t, Some(seed), true), Arm::Rivet, &strict()).expect("session");
            for _ in 0..2 {
                let y = harness::run(&mut s, &feed(e, &x, ratio, true)).expect("runs");
                let mask: Vec<f64> = want.iter().map(|&m| f64::from(m)).collect();
                assert_eq!(y[1].data, mask, "seed {seed} mask, {}", name(t));
                let scaled: Vec<f64> =
                    x.iter().zip(&want).map(|(v, &m)| if m == 1 { v / (1.0 - ratio) } else { 0.0 }).collect();
                assert_eq!(y[0].data, scaled, "seed {seed} output, {}", name(t));
            }
            // Without the mask output, the same output.
            let mut s = harness::session(env(), &model(t, Some(seed), false), Arm::Rivet, &strict()).expect("session");
            let y = harness::run(&mut s, &feed(e, &x, ratio, true)).expect("runs");
            assert_eq!(y[0].data.iter().filter(|v| **v != 0.0).count(), want.iter().sum::<i32>() as usize);
        }
    }
    // Unseeded: a new mask each Run, about 1 - ratio kept.
    let mut s = harness::session(env(), &model(FLOAT, None, true), Arm::Rivet, &strict()).expect("session");
    let big: Vec<f64> = vec![1.0; 20_000];
    let a = harness::run(&mut s, &feed(E::Float32, &big, 0.3, true)).expect("runs");
    let b = harness::run(&mut s, &feed(E::Float32, &big, 0.3, true)).expect("runs");
    assert_ne!(a[1].data, b[1].data, "unseeded Runs draw anew");
    let kept = a[1].data.iter().sum::<f64>() / big.len() as f64;
    assert!((0.68..0.72).contains(&kept), "kept {kept}");
    // Not training (fed at Run): the identity and an all-true mask.
    let y = harness::run(&mut s, &feed(E::Float32, &x, 0.9, false)).expect("runs");
    assert_eq!((y[0].data.clone(), y[1].data.clone()), (x.clone(), vec![1.0; 12]));
    let err = harness::run(&mut s, &feed(E::Float32, &x, 1.0, true)).expect_err("ratio 1");
    assert!(err.contains("node 'drop' (Dropout)") && err.contains("ratio 1 is outside [0, 1)"), "{err}");
}

/// BatchNormalization in training mode (ORT's CPU EP has no training kernel): Y from the
/// batch's statistics and the running mean and variance moved by `1 - momentum`, against
/// the definition written out, on float32 and float64.
#[test]
fn batch_norm_in_training_mode() {
    let (n, c, hw) = (2usize, 3usize, 4usize);
    let x = harness::values(61, n * c * hw, -2.0, 3.0);
    let (scale, bias) = (harness::values(62, c, 0.5, 2.0), harness::values(63, c, -1.0, 1.0));
    let (mean, var) = (harness::values(64, c, -1.0, 1.0), harness::values(65, c, 0.5, 2.0));
    let (eps, momentum) = (1e-2f32, 0.8f32);
    for (t, e, tol) in [(FLOAT, E::Float32, 1e-5), (DOUBLE, E::Float64, 1e-12)] {
        let model = ModelBuilder::new(15)
            .input("x", t, &[(n as i64).into(), (c as i64).into(), (hw as i64).into()])
            .input("s", t, &[(c as i64).into()])
            .input("b", t, &[(c as i64).into()])
            .input("m", t, &[(c as i64).into()])
            .input("v", t, &[(c as i64).into()])
            .node_with(
                "BatchNormalization",
                "bn",
                &["x", "s", "b", "m", "v"],
                &["y", "rm", "rv"],
                &[("training_mode", Attr::Int(1)), ("epsilon", Attr::Float(eps)), ("momentum", Attr::Float(momentum))],
            )
            .output("y", t, None)
            .output("rm", t, None)
            .output("rv", t, None)
            .build();
        let mut s = harness::session(env(), &model, Arm::Rivet, &strict()).expect("training mode is claimed");
        let cs = [c as i64];
        let inputs = [
            HostTensor::typed("x", e, &[n as i64, c as i64, hw as i64], x.clone()),
            HostTensor::typed("s", e, &cs, scale.clone()),
            HostTensor::typed("b", e, &cs, bias.clone()),
            HostTensor::typed("m", e, &cs, mean.clone()),
            HostTensor::typed("v", e, &cs, var.clone()),
        ];
        let got = harness::run(&mut s, &inputs).expect("runs");
        let close = |g: f64, w: f64, what: &str| assert!((g - w).abs() <= tol * (1.0 + w.abs()), "{what}: {g} vs {w}");
        for ch in 0..c {
            let vals: Vec<f64> = (0..n).flat_map(|b| x[(b * c + ch) * hw..][..hw].to_vec()).collect();
            let m = vals.iter().sum::<f64>() / vals.len() as f64;
            let v = vals.iter().map(|a| (a - m).powi(2)).sum::<f64>() / vals.len() as f64;
            let mo = f64::from(momentum);
            close(got[1].data[ch], mean[ch] * mo + m * (1.0 - mo), "running mean");
            close(got[2].data[ch], var[ch] * mo + v * (1.0 - mo), "running var");
            for b in 0..n {
                for k in 0..hw {
                    let at = (b * c + ch) * hw + k;
                    let want = (x[at] - m) / (v + f64::from(eps)).sqrt() * scale[ch] + bias[ch];
                    close(got[0].data[at], want, &format!("y[{at}] {}", name(t)));
                }
            }
        }
    }
}
