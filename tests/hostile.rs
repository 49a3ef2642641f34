//! Hostile or broken models get a clear error at session creation or at Run, never a
//! crash or an out-of-bounds access.

mod common;

use common::{env, strict};
use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT, INT64};

#[test]
fn an_intermediate_declared_with_the_wrong_static_shape_is_an_error_or_is_corrected() {
    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &[Dim::from(4)])
        .value_info("h", FLOAT, &[Dim::from(3)])
        .node("Relu", "relu", &["x"], &["h"])
        .node("Neg", "neg", &["h"], &["y"])
        .output("y", FLOAT, None)
        .build();
    // ORT 1.32's shape inference replaces the wrong declaration with the inferred [4]
    // before Rivet sees the graph; if a declaration did reach Rivet, its plan would fail
    // the session naming node and value (see ep's plan tests). Either way: no crash, and
    // what runs is right.
    match harness::session(env(), &model, Arm::Rivet, &strict()) {
        Err(e) => assert!(e.contains("'h'"), "{e}"),
        Ok(mut s) => {
            let y = harness::run(&mut s, &[HostTensor::f32("x", &[4], vec![-1.0, 2.0, -3.0, 4.0])]).expect("runs");
            assert_eq!(y[0].data, vec![0.0, -2.0, 0.0, -4.0]);
        }
    }
}

/// A declared intermediate size that the data contradicts is not an error: ONNX shape
/// inference and ORT's kernels part in places (a ceil-mode pool window in the end
/// padding), and ORT runs with the computed shape, as Rivet does.
#[test]
fn a_symbolic_model_whose_declared_intermediate_size_lies_runs_with_the_computed_shape() {
    let lying = |h: &[Dim]| {
        ModelBuilder::new(21)
            .input("x", FLOAT, &[Dim::from("N")])
            .value_info("h", FLOAT, h)
            .node("Relu", "relu", &["x"], &["h"])
            .node("Neg", "neg", &["h"], &["y"])
            .output("y", FLOAT, None)
            .build()
    };
    let x = [HostTensor::f32("x", &[4], vec![-1.0, 2.0, -3.0, 4.0])];
    if let Ok(mut s) = harness::session(env(), &lying(&[Dim::from(3)]), Arm::Rivet, &strict()) {
        let y = harness::run(&mut s, &x).expect("h is [4], declared [3]: runs as ORT does");
        assert_eq!(
            (y[0].shape.as_slice(), y[0].data.as_slice()),
            ([4i64].as_slice(), [0.0, -2.0, 0.0, -4.0].as_slice())
        );
    }
    // (A declared rank that differs never reaches Rivet: ORT re-infers it at load. The
    // plan's unit tests check that one fails at Run naming the value.)
}

#[test]
fn attributes_out_of_their_range_are_not_claimed() {
    let model = ModelBuilder::new(12)
        .input("x", FLOAT, &[Dim::from(4)])
        .node_with("Celu", "celu0", &["x"], &["y"], &[("alpha", Attr::Float(0.0))])
        .output("y", FLOAT, None)
        .build();
    let err = harness::session(env(), &model, Arm::Rivet, &strict()).expect_err("alpha 0 divides by zero");
    assert!(err.contains("node 'celu0' (Celu)") && err.contains("alpha must not be 0"), "{err}");
    let wrong_kind = ModelBuilder::new(21)
        .input("x", FLOAT, &[Dim::from(4)])
        .node_with("LeakyRelu", "leaky", &["x"], &["y"], &[("alpha", Attr::Int(2))])
        .output("y", FLOAT, None)
        .build();
    match harness::session(env(), &wrong_kind, Arm::Rivet, &strict()) {
        Err(e) => assert!(e.contains("alpha") || e.contains("leaky"), "{e}"),
        Ok(_) => panic!("an int alpha must not be claimed"),
    }
}

#[test]
fn a_reshape_to_an_impossible_shape_is_an_error_at_run() {
    // Reshape is ORT's (fallback on); Rivet runs the nodes around it.
    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &[Dim::from("N")])
        .input("shape", INT64, &[Dim::from(1)])
        .node("Relu", "relu", &["x"], &["r"])
        .node("Reshape", "reshape", &["r", "shape"], &["s"])
        .node("Neg", "neg", &["s"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let mut s = harness::session(env(), &model, Arm::Rivet, &SessionOpts::default()).expect("session");
    let bad_shape = HostTensor {
        name: "shape".into(),
        elem: ort::value::TensorElementType::Int64,
        shape: vec![1],
        data: vec![5.0],
    };
    let err = harness::run(&mut s, &[HostTensor::f32("x", &[4], vec![1.0; 4]), bad_shape]).expect_err("4 into 5");
    assert!(err.to_lowercase().contains("reshape"), "{err}");
    let good_shape = HostTensor {
        name: "shape".into(),
        elem: ort::value::TensorElementType::Int64,
        shape: vec![1],
        data: vec![4.0],
    };
    let y = harness::run(&mut s, &[HostTensor::f32("x", &[4], vec![1.0; 4]), good_shape]).expect("still runs");
    assert_eq!(y[0].data, vec![-1.0; 4]);
}

#[test]
fn a_huge_declared_dimension_is_rejected_before_any_size_arithmetic() {
    let big = Dim::from(1i64 << 40);
    let model = ModelBuilder::new(21)
        .input("a", FLOAT, &[big.clone(), big.clone()])
        .input("b", FLOAT, &[big])
        .node("Add", "add", &["a", "b"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let err = harness::session(env(), &model, Arm::Rivet, &strict()).expect_err("2^80 elements");
    assert!(err.contains("node 'add' (Add)") && err.contains("more than 2^48 elements"), "{err}");
}
