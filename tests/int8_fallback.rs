//! Quantized models with CPU fallback on: Rivet, whose int8 kernels are not yet as fast as
//! ORT's on these groups, must not claim the float nodes of the groups ORT fuses into its
//! own int8 kernels, so a model runs
//! exactly as on ORT alone (the same kernels: the same bits). Claiming them made these
//! models 3-8x slower with Rivet registered (`cargo xtask bench --case int8` times them).

mod common;

use common::{env, ort_session};
use rivet::harness::{self, Arm, HostTensor, SessionOpts};

/// The models `tests/models/make_quantized.py` made with ORT's quantization tool.
fn model(name: &str) -> Vec<u8> {
    let path = rivet::paths::workspace_root().join("tests/models").join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `name` with fallback on, at 1 and 2 threads: the ops Rivet takes are `rivet_ops`
/// (plain float work outside every quantized group) and the outputs are ORT's, bit for bit.
fn check(name: &str, shape: &[i64], rivet_ops: &[&str]) {
    let bytes = model(name);
    let len = shape.iter().product::<i64>() as usize;
    let data = harness::values(7, len, -2.0, 2.0).into_iter().map(|v| v as f32).collect();
    let inputs = [HostTensor::f32("x", shape, data)];
    let mut ort = ort_session(&bytes);
    let want = harness::run(&mut ort, &inputs).expect("ORT run");
    for threads in [1, 2] {
        let opts = SessionOpts { record_assignment: true, intra_threads: Some(threads), ..Default::default() };
        let mut s = harness::session(env(), &bytes, Arm::Rivet, &opts).expect("session with fallback");
        let assigned = rivet::ort_extra::graph_assignment(&s).expect("assignment");
        let mut on_rivet: Vec<_> =
            assigned.iter().filter(|(ep, _, _)| ep == harness::RIVET_EP).map(|(_, _, op)| op.as_str()).collect();
        on_rivet.sort();
        assert_eq!(on_rivet, rivet_ops, "{name}: the ops Rivet claimed");
        let got = harness::run(&mut s, &inputs).expect("run");
        harness::compare(&got, &want, 0.0, 0.0).unwrap_or_else(|e| panic!("{name} at {threads} threads: {e}"));
    }
}

#[test]
fn a_static_qdq_cnn_runs_as_on_ort_alone() {
    check("qdq_cnn.onnx", &[1, 3, 64, 64], &[]);
}

#[test]
fn a_static_qdq_cnn_on_rivet_alone_gives_orts_fused_int8_output() {
    // With VNNI, Rivet fuses each DequantizeLinear -> Conv -> QuantizeLinear group into a
    // QLinearConv as ORT's QDQ transformer does, and the output is ORT's bit for bit (the
    // Add, pools and Gemm groups, float on Rivet, land on the same quantized values here).
    // Unfused, each Q/DQ rounds on its own: 1.3e-2 of the output's RMS away.
    let bytes = model("qdq_cnn.onnx");
    let data = harness::values(7, 3 * 64 * 64, -2.0, 2.0).into_iter().map(|v| v as f32).collect();
    let inputs = [HostTensor::f32("x", &[1, 3, 64, 64], data)];
    let want = harness::run(&mut ort_session(&bytes), &inputs).expect("ORT run");
    for threads in [1, 2] {
        let opts = SessionOpts { intra_threads: Some(threads), ..common::strict() };
        let mut s = harness::session(env(), &bytes, Arm::Rivet, &opts).expect("session on Rivet alone");
        let got = harness::run(&mut s, &inputs).expect("run");
        let err = rivet::real_models::relative_error(&got, &want).expect("comparable");
        if rivet_ep::plan::passes::fuse_qdq::enabled() {
            assert_eq!(err, 0.0, "at {threads} threads: fused, the output should be ORT's");
        } else {
            assert!(err < 0.05, "at {threads} threads: error {err} of the output's RMS");
        }
    }
}

#[test]
fn a_dynamically_quantized_mlp_runs_as_on_ort_alone() {
    // The Relu between the products and the residual Add are float work ORT fuses with
    // nothing; each product's MatMulInteger -> Cast -> Mul -> Add stays with ORT.
    check("dynamic_mlp.onnx", &[1, 64, 128], &["Add", "Relu"]);
}

#[test]
fn float_nodes_outside_quantized_groups_are_still_claimed() {
    // Relu -> QuantizeLinear -> DequantizeLinear -> Sigmoid -> Tanh: Relu feeds the
    // QuantizeLinear and Sigmoid reads the DequantizeLinear (both left to ORT); Tanh is
    // plain float work, and Rivet takes it.
    use rivet::model::{ModelBuilder, FLOAT};
    let bytes = ModelBuilder::new(21)
        .input("x", FLOAT, &[4.into(), 8.into()])
        .initializer("s", &[], vec![0.05])
        .node("Relu", "relu", &["x"], &["r"])
        .node("QuantizeLinear", "q", &["r", "s"], &["rq"])
        .node("DequantizeLinear", "dq", &["rq", "s"], &["rd"])
        .node("Sigmoid", "sigmoid", &["rd"], &["g"])
        .node("Tanh", "tanh", &["g"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let opts = SessionOpts { record_assignment: true, ..Default::default() };
    let s = harness::session(env(), &bytes, Arm::Rivet, &opts).expect("session");
    let mut on_rivet: Vec<_> = rivet::ort_extra::graph_assignment(&s)
        .expect("assignment")
        .into_iter()
        .filter(|(ep, _, _)| ep == harness::RIVET_EP)
        .map(|(_, node, _)| node)
        .collect();
    on_rivet.sort();
    assert_eq!(on_rivet, ["tanh"]);
}
