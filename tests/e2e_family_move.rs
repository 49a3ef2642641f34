//! The families moved onto `ops::Op` (issue 14), on the paths the move touched: a Concat
//! of more inputs than a step inlined before, Slice's int32 parameters read at Run, Pad's
//! non-zero fill on float16 (padded in float32), reductions on bfloat16 with axes fed at
//! Run, and a bad Expand shape at Run (an error naming the node; the session keeps
//! working). Each on Rivet alone against ORT's CPU EP.

mod common;

use common::{assert_matches_ort, env, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT, FLOAT16, INT32, INT64};

#[test]
fn a_concat_of_twelve_inputs_matches_ort_static_and_symbolic() {
    for symbolic in [false, true] {
        let names: Vec<String> = (0..12).map(|k| format!("x{k}")).collect();
        let mut b = ModelBuilder::new(13);
        let mut inputs = vec![];
        for (k, n) in names.iter().enumerate() {
            let rows: Dim = if symbolic { Dim::Sym("N".into()) } else { 2.into() };
            b = b.input(n, FLOAT, &[rows, (k as i64 + 1).into()]);
            let len = 2 * (k + 1);
            inputs.push(HostTensor::typed(
                n,
                E::Float32,
                &[2, k as i64 + 1],
                harness::values(k as u64, len, -3.0, 3.0),
            ));
        }
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let model =
            b.node_with("Concat", "join", &refs, &["y"], &[("axis", Attr::Int(1))]).output("y", FLOAT, None).build();
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Concat of 12 (symbolic {symbolic})"));
    }
}

#[test]
fn slice_with_int32_parameters_fed_at_run_matches_ort() {
    let model = ModelBuilder::new(13)
        .input("x", FLOAT, &[Dim::Sym("N".into()), 6.into()])
        .input("starts", INT32, &[2.into()])
        .input("ends", INT32, &[2.into()])
        .input("axes", INT32, &[2.into()])
        .input("steps", INT32, &[2.into()])
        .node("Slice", "cut", &["x", "starts", "ends", "axes", "steps"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let x = HostTensor::typed("x", E::Float32, &[4, 6], (0..24).map(f64::from).collect());
    for (starts, ends, steps) in [([1.0, -1.0], [4.0, -7.0], [2.0, -2.0]), ([0.0, 1.0], [9.0, 5.0], [1.0, 3.0])] {
        let int = |name: &str, v: [f64; 2]| HostTensor::typed(name, E::Int32, &[2], v.to_vec());
        let inputs =
            [x.clone(), int("starts", starts), int("ends", ends), int("axes", [0.0, 1.0]), int("steps", steps)];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Slice {starts:?}..{ends:?} by {steps:?}"));
    }
}

/// Pad (opset 2-10) with a non-zero `value` on float16 data: claimed, padded in float32 and
/// rounded back; quarter steps and the fill are exact in float16, so it equals ORT's
/// float32 answer bit for bit.
#[test]
fn pad_of_float16_with_a_non_zero_value_equals_float32() {
    let attrs = [("pads", Attr::Ints(vec![0, 1, 1, 2])), ("value", Attr::Float(1.5))];
    let half = ModelBuilder::new(10)
        .input("x", FLOAT, &[2.into(), 3.into()])
        .node_with("Cast", "to_half", &["x"], &["h"], &[("to", Attr::Int(FLOAT16 as i64))])
        .node_with("Pad", "pad", &["h"], &["hp"], &attrs)
        .node_with("Cast", "to_float", &["hp"], &["y"], &[("to", Attr::Int(FLOAT as i64))])
        .output("y", FLOAT, None)
        .build();
    let plain = ModelBuilder::new(10)
        .input("x", FLOAT, &[2.into(), 3.into()])
        .node_with("Pad", "pad", &["x"], &["y"], &attrs)
        .output("y", FLOAT, None)
        .build();
    let inputs = [HostTensor::typed("x", E::Float32, &[2, 3], vec![-1.25, 0.5, 2.0, 3.75, -0.25, 8.0])];
    let mut rivet = harness::session(env(), &half, Arm::Rivet, &strict()).expect("Rivet session");
    let mut ort = common::ort_session(&plain);
    let got = harness::run(&mut rivet, &inputs).expect("Rivet run");
    let want = harness::run(&mut ort, &inputs).expect("ORT run");
    harness::compare(&got, &want, 0.0, 0.0).unwrap_or_else(|e| panic!("Pad on float16: {e}"));
}

/// ReduceSum and ReduceMax on bfloat16 with their axes fed at Run (int64), computed in
/// float32 between conversions, against ORT on float32.
#[test]
fn reductions_on_bfloat16_with_axes_at_run_match_float32() {
    for op in ["ReduceSum", "ReduceMax"] {
        let opset = if op == "ReduceSum" { 13 } else { 18 };
        let half = ModelBuilder::new(opset)
            .input("x", FLOAT, &[Dim::Sym("N".into()), 4.into(), 5.into()])
            .input("axes", INT64, &[1.into()])
            .node_with("Cast", "to_half", &["x"], &["h"], &[("to", Attr::Int(16))])
            .node(op, "reduce", &["h", "axes"], &["hr"])
            .node_with("Cast", "to_float", &["hr"], &["y"], &[("to", Attr::Int(FLOAT as i64))])
            .output("y", FLOAT, None)
            .build();
        let plain = ModelBuilder::new(opset)
            .input("x", FLOAT, &[Dim::Sym("N".into()), 4.into(), 5.into()])
            .input("axes", INT64, &[1.into()])
            .node(op, "reduce", &["x", "axes"], &["y"])
            .output("y", FLOAT, None)
            .build();
        let mut rivet = harness::session(env(), &half, Arm::Rivet, &strict()).expect("Rivet session");
        let mut ort = common::ort_session(&plain);
        for axis in [1.0, -1.0] {
            // Quarter steps in [-4, 4): exact in bfloat16.
            let x: Vec<f64> = harness::values(7, 40, -16.0, 16.0).iter().map(|v| v.floor() / 4.0).collect();
            let inputs = [
                HostTensor::typed("x", E::Float32, &[2, 4, 5], x),
                HostTensor::typed("axes", E::Int64, &[1], vec![axis]),
            ];
            let got = harness::run(&mut rivet, &inputs).expect("Rivet run");
            let want = harness::run(&mut ort, &inputs).expect("ORT run");
            harness::compare(&got, &want, 1e-2, 1e-2).unwrap_or_else(|e| panic!("{op} axis {axis}: {e}"));
        }
    }
}

#[test]
fn an_expand_to_a_shape_that_does_not_broadcast_is_an_error_naming_the_node() {
    let model = ModelBuilder::new(13)
        .input("x", FLOAT, &[Dim::Sym("N".into()), 3.into()])
        .input("shape", INT64, &[Dim::Sym("R".into())])
        .node("Expand", "grow", &["x", "shape"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let mut s = harness::session(env(), &model, Arm::Rivet, &strict()).expect("Rivet session");
    let x = HostTensor::typed("x", E::Float32, &[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let bad = [x.clone(), HostTensor::typed("shape", E::Int64, &[2], vec![2.0, 4.0])];
    let err = harness::run(&mut s, &bad).expect_err("[2, 3] does not broadcast to [2, 4]");
    assert!(err.contains("node 'grow' (Expand)") && !err.contains("panicked"), "{err}");
    let good = [x, HostTensor::typed("shape", E::Int64, &[3], vec![2.0, 2.0, 3.0])];
    let out = harness::run(&mut s, &good).expect("still works");
    assert_eq!(out[0].data, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0].repeat(2));
}

/// Pad in edge or wrap mode of an empty axis has no cells to repeat: an error naming the
/// node, not a read past the input (wrap's was found by review), and the session keeps
/// working.
#[test]
fn edge_and_wrap_padding_of_an_empty_axis_is_an_error_naming_the_node() {
    for mode in ["edge", "wrap"] {
        let model = ModelBuilder::new(19)
            .input("x", FLOAT, &[Dim::Sym("N".into()), 3.into()])
            .initializer_i64("pads", &[4], vec![1, 0, 1, 0])
            .node_with("Pad", "border", &["x", "pads"], &["y"], &[("mode", Attr::Str(mode.into()))])
            .output("y", FLOAT, None)
            .build();
        let mut s = harness::session(env(), &model, Arm::Rivet, &strict()).expect("Rivet session");
        let empty = [HostTensor::typed("x", E::Float32, &[0, 3], vec![])];
        let err = harness::run(&mut s, &empty).expect_err("an empty axis to pad");
        assert!(
            err.contains("node 'border' (Pad)") && err.contains("empty axis") && !err.contains("panicked"),
            "{mode}: {err}"
        );
        let x = [HostTensor::typed("x", E::Float32, &[1, 3], vec![1.0, 2.0, 3.0])];
        let out = harness::run(&mut s, &x).expect("still works");
        assert_eq!(out[0].data, [1.0, 2.0, 3.0].repeat(3), "{mode}");
    }
}
