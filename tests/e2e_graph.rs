//! Partitioning, fallback, bad input and failure containment against the real runtime.

mod common;

use common::{env, ort_session, rivet_session, strict, sweep};
use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{ModelBuilder, BOOL, FLOAT, INT64};

/// Relu -> Gelu (com.microsoft, a contrib op Rivet does not claim) -> Sigmoid, plus a skip edge Relu -> Add
/// that would make a cycle if Relu and Add were fused across the Gelu.
fn split_model() -> Vec<u8> {
    ModelBuilder::new(21)
        .input("x", FLOAT, &[2.into(), 8.into()])
        .node("Relu", "relu", &["x"], &["r"])
        .node_in_domain("com.microsoft", "Gelu", "contrib_gelu", &["r"], &["s"])
        .node("Sigmoid", "sigmoid", &["s"], &["g"])
        .node("Add", "add", &["g", "r"], &["y"])
        .output("y", FLOAT, None)
        .build()
}

#[test]
fn an_unsupported_node_is_left_to_the_cpu_ep_and_the_graph_still_matches() {
    let model = split_model();
    let opts = SessionOpts { record_assignment: true, ..Default::default() };
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &opts).expect("session with fallback");
    let mut assigned = rivet::ort_extra::graph_assignment(&rivet).expect("assignment");
    assigned.sort();
    let expect = |ep: &str, node: &str, op: &str| (ep.to_string(), node.to_string(), op.to_string());
    assert_eq!(
        assigned,
        vec![
            expect("CPUExecutionProvider", "contrib_gelu", "Gelu"),
            expect("Rivet", "add", "Add"),
            expect("Rivet", "relu", "Relu"),
            expect("Rivet", "sigmoid", "Sigmoid"),
        ]
    );
    let mut ort = ort_session(&model);
    let inputs = [HostTensor::f32("x", &[2, 8], sweep(16, -2.0, 2.0, false))];
    let want = harness::run(&mut ort, &inputs).expect("ORT run");
    let got = harness::run(&mut rivet, &inputs).expect("split run");
    harness::compare(&got, &want, 1e-5, 1e-6).expect("split graph matches ORT");
}

#[test]
fn with_fallback_off_an_unsupported_node_fails_session_creation_naming_it() {
    let err = harness::session(env(), &split_model(), Arm::Rivet, &strict()).expect_err("must not be created");
    assert!(err.contains("node 'contrib_gelu' (Gelu)"), "the message names the node: {err}");
    assert!(err.contains("not implemented"), "and says why: {err}");
    assert!(err.contains("session.disable_cpu_ep_fallback"), "{err}");
}

#[test]
fn unsupported_attribute_values_and_types_are_not_claimed() {
    // Gelu with an unknown approximation and LRN on float64: both left to ORT, which
    // rejects or runs them; with fallback off the session fails naming the node.
    let gelu = ModelBuilder::new(21)
        .input("x", FLOAT, &[4.into()])
        .node_with("Gelu", "odd_gelu", &["x"], &["y"], &[("approximate", rivet::model::Attr::Str("erf".into()))])
        .output("y", FLOAT, None)
        .build();
    let err = harness::session(env(), &gelu, Arm::Rivet, &strict()).expect_err("not claimed");
    assert!(err.contains("node 'odd_gelu' (Gelu)") && err.contains("approximate='erf'"), "{err}");
    let lrn64 = ModelBuilder::new(21)
        .input("x", rivet::model::DOUBLE, &[1.into(), 2.into(), 3.into(), 3.into()])
        .node_with("LRN", "f64_lrn", &["x"], &["y"], &[("size", rivet::model::Attr::Int(3))])
        .output("y", rivet::model::DOUBLE, None)
        .build();
    let err = harness::session(env(), &lrn64, Arm::Rivet, &strict()).expect_err("not claimed");
    assert!(err.contains("node 'f64_lrn' (LRN)") && err.contains("float64"), "{err}");
}

#[test]
fn non_broadcastable_shapes_at_run_name_the_node_and_inputs_and_the_session_keeps_working() {
    let model = ModelBuilder::new(21)
        .input("a", FLOAT, &["N".into()])
        .input("b", FLOAT, &["M".into()])
        .node("Add", "the_add", &["a", "b"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let mut s = rivet_session(&model);
    let bad = [HostTensor::f32("a", &[3], vec![1.0; 3]), HostTensor::f32("b", &[4], vec![1.0; 4])];
    let err = harness::run(&mut s, &bad).expect_err("3 and 4 do not broadcast");
    assert!(err.contains("node 'the_add' (Add)"), "{err}");
    assert!(err.contains("'a'") && err.contains("'b'"), "{err}");
    assert!(err.contains("[3]") && err.contains("[4]"), "{err}");
    let good = [HostTensor::f32("a", &[3], vec![1.0; 3]), HostTensor::f32("b", &[1], vec![2.0])];
    let out = harness::run(&mut s, &good).expect("the session still works");
    assert_eq!(out[0].data, vec![3.0; 3]);
}

#[test]
fn wrong_dtype_or_rank_at_run_is_an_error_and_the_session_keeps_working() {
    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &[2.into(), 3.into()])
        .node("Relu", "relu", &["x"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let mut s = rivet_session(&model);
    // ORT checks declared types and static dims before Rivet sees the inputs; either way
    // the caller gets an error naming the input, and nothing is lost.
    let wrong_type = [HostTensor {
        name: "x".into(),
        elem: ort::value::TensorElementType::Int64,
        shape: vec![2, 3],
        data: vec![1.0; 6],
    }];
    let err = harness::run(&mut s, &wrong_type).expect_err("int64 for a float input");
    assert!(err.contains('x'), "{err}");
    let wrong_shape = [HostTensor::f32("x", &[3, 2], vec![1.0; 6])];
    let err = harness::run(&mut s, &wrong_shape).expect_err("[3, 2] for [2, 3]");
    assert!(err.contains('x'), "{err}");
    let out = harness::run(&mut s, &[HostTensor::f32("x", &[2, 3], vec![-1.0, 2.0, -3.0, 4.0, -5.0, 6.0])])
        .expect("still works");
    assert_eq!(out[0].data, vec![0.0, 2.0, 0.0, 4.0, 0.0, 6.0]);
}

/// A Transpose of an input of unknown rank, fed a rank-9 tensor at Run: an error naming
/// the node (Rivet's transposes stop at rank 8), not a panic; the session keeps working.
/// Found by the session-9 review: it was an assertion in the kernel.
#[test]
fn a_transpose_past_rank_8_at_run_is_an_error_naming_the_node() {
    let model = ModelBuilder::new(21)
        .input_unshaped("x", FLOAT)
        .node("Transpose", "flip", &["x"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let mut s = rivet_session(&model);
    let err = harness::run(&mut s, &[HostTensor::f32("x", &[1; 9], vec![1.0])]).expect_err("rank 9");
    assert!(err.contains("flip") && err.contains("rank 9"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let out = harness::run(&mut s, &[HostTensor::f32("x", &[2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])])
        .expect("still works");
    assert_eq!(out[0].data, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
}

/// The other kernels that keep an index per axis up to rank 8 (the session-9 review found
/// each panicking on a rank-9 tensor at Run): Squeeze, a typed comparison that
/// broadcasts, NonZero. Each is an error naming the node and the value; the session keeps
/// working at rank 2.
#[test]
fn rank_8_kernels_refuse_rank_9_at_run_naming_the_node() {
    let squeeze = ModelBuilder::new(21)
        .input_unshaped("x", FLOAT)
        .node("Squeeze", "squeeze", &["x"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let greater = ModelBuilder::new(21)
        .input_unshaped("x", FLOAT)
        .initializer("zero", &[1], vec![0.0])
        .node("Greater", "greater", &["x", "zero"], &["y"])
        .output("y", BOOL, None)
        .build();
    let nonzero = ModelBuilder::new(21)
        .input_unshaped("x", FLOAT)
        .node("NonZero", "nonzero", &["x"], &["y"])
        .output("y", INT64, None)
        .build();
    for (model, name) in [(squeeze, "squeeze"), (greater, "greater"), (nonzero, "nonzero")] {
        let mut s = rivet_session(&model);
        let shape = [1, 2, 1, 2, 1, 2, 1, 2, 3];
        let err = harness::run(&mut s, &[HostTensor::f32("x", &shape, vec![1.0; 48])]).expect_err("rank 9");
        assert!(err.contains(name) && err.contains("rank 9") && !err.contains("panicked"), "{err}");
        harness::run(&mut s, &[HostTensor::f32("x", &[2, 3], vec![1.0; 6])]).expect("still works at rank 2");
    }
}

#[test]
fn a_panic_inside_compute_becomes_an_error_status_not_an_abort() {
    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &[4.into()])
        .node("Exp", "boom", &["x"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let opts = SessionOpts {
        no_fallback: true,
        // The `ort` crate takes `<EP name>.<key>`; ORT stores it as `ep.rivet.inject_panic`.
        provider_options: vec![("Rivet.inject_panic".into(), "boom".into())],
        ..Default::default()
    };
    let mut s = harness::session(env(), &model, Arm::Rivet, &opts).expect("session");
    let inputs = [HostTensor::f32("x", &[4], vec![0.0; 4])];
    for _ in 0..3 {
        let err = harness::run(&mut s, &inputs).expect_err("the injected panic is an error");
        assert!(err.contains("Rivet panicked in Compute"), "{err}");
        assert!(err.contains("injected panic"), "{err}");
    }
    // The process is alive and other sessions are unaffected.
    let mut fine = rivet_session(&model);
    let out = harness::run(&mut fine, &inputs).expect("normal session runs");
    assert_eq!(out[0].data, vec![1.0; 4]);
}

#[test]
fn the_plugin_reports_its_name_vendor_and_one_cpu_device() {
    // A misplaced factory slot would answer with the wrong string or crash here.
    let devices: Vec<_> = env().devices().filter(|d| d.ep().is_ok_and(|n| n == "Rivet")).collect();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].ep_vendor().expect("vendor"), "Rivet");
    assert_eq!(devices[0].hardware_device().ty(), ort::memory::DeviceType::CPU);
}

/// Depthwise convolutions on the windows each x86 build has its own kernel for (3x3 and
/// 5x5 on planes up to 28x28 channels last, stride-1 "same" windows on planes up to
/// 32x32), against ORT. `cargo xtask test` runs this suite under valgrind, whose CPU has
/// AVX2 and no AVX-512: the AVX2 build once called the AVX-512 kernels there (SIGILL).
#[test]
fn depthwise_convolutions_run_on_the_cpus_own_build() {
    let n = |dims: &[i64]| dims.iter().product::<i64>() as usize;
    for (k, side, stride) in [(3, 14, 1), (5, 7, 2), (3, 20, 1)] {
        let c = 32i64;
        let w = [c, 1, k, k];
        let model = ModelBuilder::new(17)
            .input("x", FLOAT, &[1.into(), c.into(), side.into(), side.into()])
            .initializer("w", &w, sweep(n(&w), -1.0, 1.0, false))
            .node_with(
                "Conv",
                "dw",
                &["x", "w"],
                &["y"],
                &[
                    ("group", rivet::model::Attr::Int(c)),
                    ("pads", rivet::model::Attr::Ints(vec![k / 2; 4])),
                    ("strides", rivet::model::Attr::Ints(vec![stride; 2])),
                ],
            )
            .output("y", FLOAT, None)
            .build();
        let x = [1, c, side, side];
        let inputs = [HostTensor::f32("x", &x, sweep(n(&x), -2.0, 2.0, false))];
        common::assert_matches_ort(&model, &inputs, 1e-4, 1e-5, &format!("depthwise {k}x{k} on {side}"));
    }
}
