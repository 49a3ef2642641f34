//! Element types other than float32 against ORT's CPU EP: casts between every pair of
//! types, integer and f64 arithmetic, comparisons, boolean logic, Where, ArgMax/ArgMin,
//! Gather, data movement of any type, and a mask graph that mixes them with float32 ops
//! in one fused node. (The transformer and index ops are in e2e_typed_ops.rs, float64
//! and integer math and the training-mode ops in e2e_typed_math.rs.) Every node runs on Rivet (fallback off) and outputs are compared
//! exactly (rtol = atol = 0) unless said.

mod common;

use common::typed::{binary_model, elem, name, unary_model};
use common::{assert_matches_ort, env, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{
    Attr, Dim, ModelBuilder, BOOL, DOUBLE, FLOAT, FLOAT16, INT16, INT32, INT64, INT8, UINT16, UINT32, UINT64, UINT8,
};

const TYPES: [i32; 11] = [FLOAT, DOUBLE, INT8, UINT8, INT16, UINT16, INT32, UINT32, INT64, UINT64, BOOL];

/// The range of an integer type (None for floats and bool).
fn int_range(code: i32) -> Option<(f64, f64)> {
    Some(match code {
        INT8 => (-128.0, 127.0),
        UINT8 => (0.0, 255.0),
        INT16 => (-32768.0, 32767.0),
        UINT16 => (0.0, 65535.0),
        INT32 => (-2147483648.0, 2147483647.0),
        UINT32 => (0.0, 4294967295.0),
        INT64 => (-9.2e18, 9.2e18),
        UINT64 => (0.0, 1.8e19),
        _ => return None,
    })
}

/// Values of `from` that cast to `to` with a defined result in C++ (ORT's static_cast):
/// integers wrap, but a float out of the target integer's range is undefined, so floats
/// stay within it; NaN and infinities only go to floats and bool.
fn cast_inputs(from: i32, to: i32) -> Vec<f64> {
    if from == BOOL {
        return vec![0.0, 1.0, 1.0, 0.0];
    }
    if let Some((lo, hi)) = int_range(from) {
        let ints = [-70000.0, -300.0, -128.0, -7.0, -1.0, 0.0, 1.0, 2.0, 7.0, 100.0, 127.0, 255.0, 300.0, 65535.0];
        let mut v: Vec<f64> = ints.into_iter().filter(|x| (lo..=hi).contains(x)).collect();
        if hi > 2e7 {
            v.push(16777217.0); // not a float32: rounds to nearest even
        }
        return v;
    }
    let mut v = vec![-2.75, -1.5, -0.0, 0.0, 0.25, 0.5, 1.5, 2.5, 7.9, 100.25, 126.99];
    if let Some((lo, _)) = int_range(to) {
        v.retain(|x| *x >= lo);
    } else {
        v.extend([f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e-40, 3.4e38, 1.0 + 2f64.powi(-30)]);
    }
    v
}

#[test]
fn casts_between_every_pair_of_types_match_ort() {
    let mut pairs = 0;
    for from in TYPES {
        for to in TYPES {
            let x = cast_inputs(from, to);
            let model = unary_model("Cast", from, to, &[("to", Attr::Int(to as i64))], 21);
            let input = [HostTensor::typed("x", elem(from), &[x.len() as i64], x)];
            assert_matches_ort(&model, &input, 0.0, 0.0, &format!("Cast {} -> {}", name(from), name(to)));
            pairs += 1;
        }
    }
    assert_eq!(pairs, 121);
}

#[test]
fn cast_like_takes_the_type_of_its_second_input() {
    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &[4.into()])
        .input("like", INT32, &[1.into()])
        .node("CastLike", "op", &["x", "like"], &["y"])
        .output("y", INT32, None)
        .build();
    let inputs =
        [HostTensor::f32("x", &[4], vec![-2.5, 0.5, 3.9, 1e6]), HostTensor::typed("like", E::Int32, &[1], vec![0.0])];
    assert_matches_ort(&model, &inputs, 0.0, 0.0, "CastLike f32 -> i32");
}

#[test]
fn integer_and_double_arithmetic_matches_ort_with_broadcasting() {
    for t in [INT8, UINT8, INT16, INT32, INT64, UINT32, UINT64, DOUBLE] {
        let signed = int_range(t).is_none_or(|(lo, _)| lo < 0.0);
        let a: Vec<f64> =
            if signed { vec![-7.0, 5.0, 100.0, -128.0, 0.0, 9.0] } else { vec![7.0, 5.0, 100.0, 255.0, 0.0, 9.0] };
        let b: Vec<f64> = if signed { vec![3.0, -2.0, 7.0] } else { vec![3.0, 2.0, 7.0] };
        let inputs = [HostTensor::typed("a", elem(t), &[2, 3], a), HostTensor::typed("b", elem(t), &[3], b)];
        for op in ["Add", "Sub", "Mul", "Div", "Max", "Min", "Mod"] {
            if matches!(op, "Max" | "Min") && matches!(t, INT8 | UINT8 | INT16) {
                continue; // ORT's CPU EP has no Max/Min kernel of these types to compare with
            }
            let attrs: Vec<(&str, Attr)> =
                if op == "Mod" && t == DOUBLE { vec![("fmod", Attr::Int(1))] } else { vec![] };
            let model = binary_model(op, t, t, &attrs);
            // Mul of i8 wraps (-128 * 7) in both: two's complement.
            assert_matches_ort(&model, &inputs, 1e-15, 0.0, &format!("{op} {}", name(t)));
        }
    }
}

#[test]
fn variadic_max_min_on_integers() {
    for op in ["Max", "Min"] {
        let model = ModelBuilder::new(13)
            .input("a", INT64, &[2.into(), 2.into()])
            .input("b", INT64, &[2.into()])
            .input("c", INT64, &[1.into()])
            .node(op, "op", &["a", "b", "c"], &["y"])
            .output("y", INT64, None)
            .build();
        let inputs = [
            HostTensor::typed("a", E::Int64, &[2, 2], vec![1.0, -5.0, 9.0, 4.0]),
            HostTensor::typed("b", E::Int64, &[2], vec![3.0, 3.0]),
            HostTensor::typed("c", E::Int64, &[1], vec![2.0]),
        ];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("{op} int64"));
    }
}

#[test]
fn comparisons_logic_and_where_match_ort() {
    for t in [FLOAT, DOUBLE, INT32, INT64, UINT8] {
        let a = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let mut b = vec![3.0, 2.0, 7.0];
        if t == FLOAT || t == DOUBLE {
            b[2] = f64::NAN; // every comparison with NaN is false
        }
        let inputs = [HostTensor::typed("a", elem(t), &[2, 3], a), HostTensor::typed("b", elem(t), &[3], b)];
        for op in ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"] {
            assert_matches_ort(&binary_model(op, t, BOOL, &[]), &inputs, 0.0, 0.0, &format!("{op} {}", name(t)));
        }
    }
    let bools = [
        HostTensor::typed("a", E::Bool, &[2, 3], vec![1.0, 0.0, 1.0, 0.0, 1.0, 1.0]),
        HostTensor::typed("b", E::Bool, &[3], vec![1.0, 1.0, 0.0]),
    ];
    for op in ["And", "Or", "Xor", "Equal"] {
        assert_matches_ort(&binary_model(op, BOOL, BOOL, &[]), &bools, 0.0, 0.0, &format!("{op} bool"));
    }
    let not = unary_model("Not", BOOL, BOOL, &[], 18);
    assert_matches_ort(&not, &[HostTensor::typed("x", E::Bool, &[3], vec![1.0, 0.0, 1.0])], 0.0, 0.0, "Not");
    for t in [FLOAT, INT64, UINT8, INT32, DOUBLE] {
        let model = ModelBuilder::new(16)
            .input("c", BOOL, &[2.into(), 1.into()])
            .input("x", t, &[3.into()])
            .input("y", t, &[])
            .node("Where", "op", &["c", "x", "y"], &["out"])
            .output("out", t, None)
            .build();
        let inputs = [
            HostTensor::typed("c", E::Bool, &[2, 1], vec![1.0, 0.0]),
            HostTensor::typed("x", elem(t), &[3], vec![1.0, 0.0, 1.0]),
            HostTensor::typed("y", elem(t), &[], vec![0.0]),
        ];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Where {}", name(t)));
    }
}

#[test]
fn arg_max_min_and_gather_match_ort() {
    let x: Vec<f64> = vec![3.0, 1.0, 3.0, -2.0, 8.0, 8.0, 0.0, f64::NAN, 5.0, 5.0, 1.0, 1.0];
    for (t, data) in [(FLOAT, x.clone()), (INT32, x.iter().map(|v| if v.is_nan() { 4.0 } else { *v }).collect())] {
        for op in ["ArgMax", "ArgMin"] {
            for axis in [0i64, 1, -1] {
                for keepdims in [0, 1] {
                    for last in [0, 1] {
                        let attrs = [
                            ("axis", Attr::Int(axis)),
                            ("keepdims", Attr::Int(keepdims)),
                            ("select_last_index", Attr::Int(last)),
                        ];
                        let model = ModelBuilder::new(13)
                            .input("x", t, &[3.into(), 4.into()])
                            .node_with(op, "op", &["x"], &["y"], &attrs)
                            .output("y", INT64, None)
                            .build();
                        let inputs = [HostTensor::typed("x", elem(t), &[3, 4], data.clone())];
                        let what = format!("{op} {} axis {axis} keepdims {keepdims} last {last}", name(t));
                        assert_matches_ort(&model, &inputs, 0.0, 0.0, &what);
                    }
                }
            }
        }
    }
    for (t, it) in [(FLOAT, INT64), (INT64, INT32), (BOOL, INT64)] {
        for axis in [0i64, 1] {
            let model = ModelBuilder::new(13)
                .input("x", t, &[3.into(), 2.into()])
                .input("i", it, &[2.into(), 2.into()])
                .node_with("Gather", "op", &["x", "i"], &["y"], &[("axis", Attr::Int(axis))])
                .output("y", t, None)
                .build();
            let idx = if axis == 0 { vec![0.0, 2.0, -1.0, 1.0] } else { vec![1.0, 0.0, -2.0, 1.0] };
            let inputs = [
                HostTensor::typed("x", elem(t), &[3, 2], vec![1.0, 0.0, 3.0, 1.0, 0.0, 6.0]),
                HostTensor::typed("i", elem(it), &[2, 2], idx),
            ];
            assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Gather {} axis {axis}", name(t)));
        }
    }
}

#[test]
fn data_movement_runs_on_any_type() {
    for t in [INT64, BOOL, UINT8, DOUBLE, INT16] {
        let model = ModelBuilder::new(18)
            .input("x", t, &[2.into(), 3.into()])
            .initializer_i64("shape", &[2], vec![3, 2])
            .initializer_i64("starts", &[1], vec![1])
            .initializer_i64("ends", &[1], vec![3])
            .initializer_i64("axes", &[1], vec![0])
            .initializer_i64("big", &[3], vec![2, 2, 4])
            .node_with("Transpose", "t", &["x"], &["xt"], &[("perm", Attr::Ints(vec![1, 0]))])
            .node("Reshape", "r", &["x", "shape"], &["xr"])
            .node_with("Concat", "c", &["xt", "xr"], &["xc"], &[("axis", Attr::Int(1))])
            .node("Slice", "s", &["xc", "starts", "ends", "axes"], &["xs"])
            .node("Expand", "e", &["xs", "big"], &["xe"])
            .node("Unsqueeze", "u", &["xe", "axes"], &["y"])
            .output("y", t, None)
            .build();
        let x = vec![1.0, 0.0, 1.0, 1.0, 0.0, 0.0];
        assert_matches_ort(&model, &[HostTensor::typed("x", elem(t), &[2, 3], x)], 0.0, 0.0, name(t));
    }
}

/// A decoder's causal mask: int64 positions compared into a bool mask, Where on the float
/// scores, Softmax, and Cast of the mask back to float, with a symbolic sequence length.
/// The float and typed steps share one fused node and its buffers.
#[test]
fn a_causal_mask_graph_mixes_typed_and_float_steps_in_one_fused_node() {
    let s: Dim = "S".into();
    let model = ModelBuilder::new(18)
        .input("scores", FLOAT, &[s.clone(), s.clone()])
        .input("pos", INT64, &["S".into()])
        .initializer_i64("col", &[1], vec![1])
        .initializer("neg", &[], vec![-1e9])
        .node("Unsqueeze", "u", &["pos", "col"], &["pos_col"])
        .node("GreaterOrEqual", "ge", &["pos_col", "pos"], &["mask"])
        .node("Where", "w", &["mask", "scores", "neg"], &["masked"])
        .node_with("Softmax", "sm", &["masked"], &["probs"], &[("axis", Attr::Int(-1))])
        .node_with("Cast", "c", &["mask"], &["maskf"], &[("to", Attr::Int(FLOAT as i64))])
        .node("Mul", "m", &["probs", "maskf"], &["y"])
        .node_with("ArgMax", "am", &["y"], &["best"], &[("axis", Attr::Int(1)), ("keepdims", Attr::Int(0))])
        .node_with("Gather", "g", &["pos", "best"], &["picked"], &[("axis", Attr::Int(0))])
        .output("y", FLOAT, None)
        .output("picked", INT64, None)
        .build();
    for n in [1usize, 5, 8] {
        let scores: Vec<f64> = harness::values(n as u64, n * n, -3.0, 3.0);
        let pos: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let inputs = [
            HostTensor::typed("scores", E::Float32, &[n as i64, n as i64], scores),
            HostTensor::typed("pos", E::Int64, &[n as i64], pos),
        ];
        assert_matches_ort(&model, &inputs, 1e-5, 1e-6, &format!("causal mask S={n}"));
    }
}

/// A shape computed by Rivet (Cast to int64) and read by a Reshape in the same fused node.
#[test]
fn a_shape_computed_in_the_fused_node_feeds_a_reshape() {
    let model = ModelBuilder::new(18)
        .input("x", FLOAT, &[6.into()])
        .input("dims", FLOAT, &[2.into()])
        .node_with("Cast", "c", &["dims"], &["shape"], &[("to", Attr::Int(INT64 as i64))])
        .node("Reshape", "r", &["x", "shape"], &["y0"])
        .node("Relu", "relu", &["y0"], &["y"])
        .output("y", FLOAT, None)
        .build();
    for dims in [vec![2.0, 3.0], vec![3.0, -1.0], vec![6.0, 1.0]] {
        let inputs = [
            HostTensor::f32("x", &[6], vec![-1.0, 2.0, -3.0, 4.0, -5.0, 6.0]),
            HostTensor::typed("dims", E::Float32, &[2], dims.clone()),
        ];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("reshape to {dims:?}"));
    }
}

#[test]
fn integer_division_by_zero_and_bad_gather_indices_are_errors_naming_the_node() {
    let div = binary_model("Div", INT32, INT32, &[]);
    let mut rivet = harness::session(env(), &div, Arm::Rivet, &strict()).expect("session");
    let bad = [
        HostTensor::typed("a", E::Int32, &[2, 3], vec![1.0; 6]),
        HostTensor::typed("b", E::Int32, &[3], vec![1.0, 0.0, 2.0]),
    ];
    let err = harness::run(&mut rivet, &bad).expect_err("division by zero");
    assert!(err.contains("node 'op' (Div)") && err.contains("integer division by zero"), "{err}");
    let good = [
        HostTensor::typed("a", E::Int32, &[2, 3], vec![6.0; 6]),
        HostTensor::typed("b", E::Int32, &[3], vec![1.0, 2.0, 3.0]),
    ];
    let out = harness::run(&mut rivet, &good).expect("the session still runs");
    assert_eq!(out[0].data, vec![6.0, 3.0, 2.0, 6.0, 3.0, 2.0]);

    let gather = ModelBuilder::new(13)
        .input("x", FLOAT, &[3.into()])
        .input("i", INT64, &[1.into()])
        .node("Gather", "pick", &["x", "i"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let mut rivet = harness::session(env(), &gather, Arm::Rivet, &strict()).expect("session");
    for i in [3.0, -4.0] {
        let inputs = [HostTensor::f32("x", &[3], vec![1.0, 2.0, 3.0]), HostTensor::typed("i", E::Int64, &[1], vec![i])];
        let err = harness::run(&mut rivet, &inputs).expect_err("out of range");
        assert!(err.contains("node 'pick' (Gather) input 1: index") && err.contains("out of range"), "{err}");
    }
}

#[test]
fn types_rivet_does_not_run_for_an_op_are_not_claimed() {
    // MatMul on int64, Mod on floats (float16 too) without fmod, LRN on f64: each left to ORT; with
    // fallback off the session fails naming the node and the types.
    let cases = [
        (
            ModelBuilder::new(13)
                .input("a", INT64, &[2.into(), 3.into()])
                .input("b", INT64, &[3.into(), 2.into()])
                .node("MatMul", "op", &["a", "b"], &["y"])
                .output("y", INT64, None)
                .build(),
            "node 'op' (MatMul)",
            "float32",
        ),
        (binary_model("Mod", FLOAT, FLOAT, &[]), "node 'op' (Mod)", "fmod=1"),
        (binary_model("Mod", FLOAT16, FLOAT16, &[]), "node 'op' (Mod)", "fmod=1"),
        (
            ModelBuilder::new(13)
                .input("x", DOUBLE, &[1.into(), 2.into(), 3.into(), 3.into()])
                .node_with("LRN", "op", &["x"], &["y"], &[("size", Attr::Int(3))])
                .output("y", DOUBLE, None)
                .build(),
            "node 'op' (LRN)",
            "float64",
        ),
    ];
    for (model, node, why) in cases {
        let err = harness::session(env(), &model, Arm::Rivet, &strict()).expect_err("not claimed");
        assert!(err.contains(node) && err.contains(why), "{err}");
    }
}
