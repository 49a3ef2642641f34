//! Element types other than float32 against ORT's CPU EP: casts between every pair of
//! types, integer and f64 arithmetic, comparisons, boolean logic, Where, ArgMax/ArgMin,
//! Gather, data movement of any type, and a mask graph that mixes them with float32 ops
//! in one fused node. Every node runs on Rivet (fallback off) and outputs are compared
//! exactly (rtol = atol = 0) unless said.

mod common;

use common::{assert_matches_ort, env, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{
    Attr, Dim, ModelBuilder, BOOL, DOUBLE, FLOAT, FLOAT16, INT16, INT32, INT64, INT8, UINT16, UINT32, UINT64, UINT8,
};

const TYPES: [i32; 11] = [FLOAT, DOUBLE, INT8, UINT8, INT16, UINT16, INT32, UINT32, INT64, UINT64, BOOL];

fn elem(code: i32) -> E {
    match code {
        FLOAT => E::Float32,
        DOUBLE => E::Float64,
        INT8 => E::Int8,
        UINT8 => E::Uint8,
        INT16 => E::Int16,
        UINT16 => E::Uint16,
        INT32 => E::Int32,
        UINT32 => E::Uint32,
        INT64 => E::Int64,
        UINT64 => E::Uint64,
        BOOL => E::Bool,
        _ => unreachable!(),
    }
}

fn name(code: i32) -> &'static str {
    ["", "f32", "u8", "i8", "u16", "i16", "i32", "i64", "", "bool", "", "f64", "u32", "u64"][code as usize]
}

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

fn unary_model(op: &str, from: i32, to: i32, attrs: &[(&str, Attr)], opset: i64) -> Vec<u8> {
    ModelBuilder::new(opset)
        .input("x", from, &["N".into()])
        .node_with(op, "op", &["x"], &["y"], attrs)
        .output("y", to, None)
        .build()
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

fn binary_model(op: &str, t: i32, out: i32, attrs: &[(&str, Attr)]) -> Vec<u8> {
    ModelBuilder::new(18)
        .input("a", t, &[2.into(), 3.into()])
        .input("b", t, &[3.into()])
        .node_with(op, "op", &["a", "b"], &["y"], attrs)
        .output("y", out, None)
        .build()
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

/// What an Attention case adds to Q, K and V.
#[derive(Clone, Copy, Default)]
struct AttnCase {
    three_d: bool,
    q_heads: i64,
    kv_heads: i64,
    mask: Option<(i32, usize)>, // element type, rank
    past: bool,
    causal: bool,
    softcap: f32,
    scale: Option<f32>,
    qk_mode: Option<i64>,
    nonpad: bool,
}

fn attention_model(c: AttnCase) -> (Vec<u8>, Vec<HostTensor>) {
    let (b, sq, skv, sp, hd, vhd) = (2i64, 3i64, 4i64, if c.past { 2i64 } else { 0 }, 4i64, 6i64);
    let total = sp + skv;
    let shape_of = |heads: i64, s: i64, d: i64| if c.three_d { vec![b, s, heads * d] } else { vec![b, heads, s, d] };
    let (qs, ks, vs) = (shape_of(c.q_heads, sq, hd), shape_of(c.kv_heads, skv, hd), shape_of(c.kv_heads, skv, vhd));
    let dims = |s: &[i64]| s.iter().map(|&d| d.into()).collect::<Vec<Dim>>();
    let mut attrs = vec![];
    if c.three_d {
        attrs.push(("q_num_heads", Attr::Int(c.q_heads)));
        attrs.push(("kv_num_heads", Attr::Int(c.kv_heads)));
    }
    if c.causal {
        attrs.push(("is_causal", Attr::Int(1)));
    }
    if c.softcap > 0.0 {
        attrs.push(("softcap", Attr::Float(c.softcap)));
    }
    if let Some(s) = c.scale {
        attrs.push(("scale", Attr::Float(s)));
    }
    if let Some(m) = c.qk_mode {
        attrs.push(("qk_matmul_output_mode", Attr::Int(m)));
    }
    let mut m = ModelBuilder::new(if c.nonpad { 24 } else { 23 })
        .input("Q", FLOAT, &dims(&qs))
        .input("K", FLOAT, &dims(&ks))
        .input("V", FLOAT, &dims(&vs));
    let mut inputs = vec![
        HostTensor::typed("Q", E::Float32, &qs, harness::values(1, qs.iter().product::<i64>() as usize, -1.0, 1.0)),
        HostTensor::typed("K", E::Float32, &ks, harness::values(2, ks.iter().product::<i64>() as usize, -1.0, 1.0)),
        HostTensor::typed("V", E::Float32, &vs, harness::values(3, vs.iter().product::<i64>() as usize, -1.0, 1.0)),
    ];
    let mut names = vec!["Q", "K", "V"];
    if let Some((t, rank)) = c.mask {
        let full = [b, c.q_heads, sq, total];
        let ms: Vec<i64> = full[4 - rank..].to_vec();
        let n = ms.iter().product::<i64>() as usize;
        let data: Vec<f64> = if t == BOOL {
            (0..n).map(|i| if i % 3 == 2 { 0.0 } else { 1.0 }).collect()
        } else {
            harness::values(4, n, -2.0, 0.5)
        };
        m = m.input("mask", t, &dims(&ms));
        inputs.push(HostTensor::typed("mask", elem(t), &ms, data));
        names.push("mask");
    } else if c.past || c.nonpad {
        names.push("");
    }
    if c.past {
        let (pk, pv) = (vec![b, c.kv_heads, sp, hd], vec![b, c.kv_heads, sp, vhd]);
        m = m.input("past_key", FLOAT, &dims(&pk)).input("past_value", FLOAT, &dims(&pv));
        inputs.push(HostTensor::typed(
            "past_key",
            E::Float32,
            &pk,
            harness::values(5, 16 * c.kv_heads as usize, -1.0, 1.0),
        ));
        inputs.push(HostTensor::typed(
            "past_value",
            E::Float32,
            &pv,
            harness::values(6, 24 * c.kv_heads as usize, -1.0, 1.0),
        ));
        names.extend(["past_key", "past_value"]);
    }
    if c.nonpad {
        if !c.past {
            names.extend(["", ""]);
        }
        m = m.input("nonpad", INT64, &[b.into()]);
        inputs.push(HostTensor::typed("nonpad", E::Int64, &[b], vec![3.0, 4.0]));
        names.push("nonpad");
    }
    let mut outs = vec!["Y"];
    if c.past {
        outs.extend(["present_key", "present_value"]);
    }
    if c.qk_mode.is_some() {
        if !c.past {
            outs.extend(["", ""]);
        }
        outs.push("qk");
    }
    m = m.node_with("Attention", "attn", &names, &outs, &attrs);
    for o in outs.iter().filter(|o| !o.is_empty()) {
        m = m.output(o, FLOAT, None);
    }
    (m.build(), inputs)
}

#[test]
fn attention_matches_ort() {
    let base = AttnCase { q_heads: 4, kv_heads: 4, ..Default::default() };
    let mut cases = vec![];
    for three_d in [false, true] {
        for (q_heads, kv_heads) in [(4, 4), (4, 2), (4, 1)] {
            let c = AttnCase { three_d, q_heads, kv_heads, ..base };
            cases.push(c);
            cases.push(AttnCase { causal: true, ..c });
            cases.push(AttnCase { past: true, causal: true, ..c });
            cases.push(AttnCase { mask: Some((FLOAT, 2)), ..c });
            cases.push(AttnCase { mask: Some((BOOL, 4)), past: true, ..c });
        }
    }
    cases.push(AttnCase { softcap: 2.5, ..base });
    cases.push(AttnCase { scale: Some(0.3), ..base });
    cases.push(AttnCase { mask: Some((FLOAT, 3)), causal: true, ..base });
    // A mask shorter than the keys (padded with exclusion) is not compared here: ORT 1.32's
    // CPU kernel rejects it; the conformance case attention_4d_diff_heads_mask4d_padded_kv
    // checks it against the ONNX reference.
    // Softcap with a mask (or causal) is not compared: ORT 1.32 caps the scores before adding
    // the mask, the ONNX definition after (so a masked score becomes -softcap, not -inf).
    // Rivet follows the definition; the conformance case attention_4d_with_qk_matmul_softcap,
    // which has both, checks it against the ONNX reference.
    // qk_matmul_output modes 1 and 2 are not compared either: ORT 1.32 returns the raw
    // scores for mode 1 and the masked ones for mode 2 (the definition: masked for 1, after
    // softcap for 2; the conformance cases *_qk_matmul_bias and *_qk_matmul_softcap check
    // Rivet against the ONNX reference).
    for mode in [0, 3] {
        let c = AttnCase { qk_mode: Some(mode), past: true, ..base };
        cases.push(AttnCase { mask: Some((FLOAT, 2)), ..c });
        cases.push(AttnCase { softcap: 1.5, ..c });
    }
    cases.push(AttnCase { nonpad: true, mask: Some((FLOAT, 4)), ..base });
    for (k, c) in cases.into_iter().enumerate() {
        let (model, inputs) = attention_model(c);
        let what = format!(
            "attention case {k}: 3d {} heads {}/{} mask {:?} past {} causal {} softcap {} scale {:?} qk {:?} nonpad {}",
            c.three_d, c.q_heads, c.kv_heads, c.mask, c.past, c.causal, c.softcap, c.scale, c.qk_mode, c.nonpad
        );
        assert_matches_ort(&model, &inputs, 1e-4, 1e-5, &what);
    }
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
