//! Shared helpers for the end-to-end tests.
#![allow(dead_code)]

pub mod nn;
pub mod quant;
pub mod typed;

use ort::session::Session;
use rivet::harness::{self, Arm, HostTensor, SessionOpts};

/// Rivet only, CPU fallback off.
pub fn strict() -> SessionOpts {
    SessionOpts { no_fallback: true, record_assignment: true, ..Default::default() }
}

pub fn env() -> &'static ort::environment::Environment {
    harness::environment().expect("ORT and the Rivet plugin load (run through `cargo xtask test`)")
}

pub fn rivet_session(model: &[u8]) -> Session {
    harness::session(env(), model, Arm::Rivet, &strict()).expect("Rivet session")
}

/// The outputs of the last of `runs` Runs of one Rivet session (strict) with
/// `intra_op_num_threads = threads` (0: all cores).
pub fn rivet_run_at(model: &[u8], inputs: &[HostTensor], threads: usize, runs: usize) -> Vec<HostTensor> {
    let opts = SessionOpts { intra_threads: Some(threads), ..strict() };
    let mut s = harness::session(env(), model, Arm::Rivet, &opts).expect("Rivet session");
    (0..runs.max(1)).map(|_| harness::run(&mut s, inputs).expect("runs")).last().expect("one Run")
}

/// Whether the first outputs of two runs have the same bits.
pub fn same_first_output_bits(a: &[HostTensor], b: &[HostTensor]) -> bool {
    a[0].data.iter().zip(&b[0].data).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The baseline: ORT's own CPU EP, checked to be what really runs every node (once the
/// plugin is registered, a session that does not pick devices explicitly gets Rivet).
pub fn ort_session(model: &[u8]) -> Session {
    let opts = SessionOpts { record_assignment: true, ..Default::default() };
    let s = harness::session(env(), model, Arm::OrtCpu, &opts).expect("ORT CPU session");
    let assigned = rivet::ort_extra::graph_assignment(&s).expect("assignment info");
    if let Some((ep, node, op)) = assigned.iter().find(|(ep, _, _)| ep != harness::ORT_CPU_EP) {
        panic!("the ORT baseline ran node {node} ({op}) on {ep}");
    }
    s
}

/// Values covering the interesting range plus special values at the end.
pub fn sweep(n: usize, lo: f64, hi: f64, specials: bool) -> Vec<f32> {
    let mut v: Vec<f32> = (0..n).map(|i| (lo + (hi - lo) * i as f64 / (n.max(2) - 1) as f64) as f32).collect();
    if specials && n >= 8 {
        let s = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1e-40, -1e-40, 1e30];
        let k = s.len();
        v[n - k..].copy_from_slice(&s);
    }
    v
}

/// Runs the same inputs on Rivet (strict) and on ORT's CPU EP and compares; every node
/// must be assigned to Rivet.
pub fn check_matches_ort(model: &[u8], inputs: &[HostTensor], rtol: f64, atol: f64, what: &str) -> Result<(), String> {
    let mut rivet = harness::session(env(), model, Arm::Rivet, &strict()).map_err(|e| format!("{what}: {e}"))?;
    let mut ort = ort_session(model);
    let assigned = rivet::ort_extra::graph_assignment(&rivet).map_err(|e| format!("{what}: {e}"))?;
    if assigned.is_empty() {
        return Err(format!("{what}: no assignment info"));
    }
    if let Some((ep, node, op)) = assigned.iter().find(|(ep, _, _)| ep != harness::RIVET_EP) {
        return Err(format!("{what}: node {node} ({op}) ran on {ep}"));
    }
    let want = harness::run(&mut ort, inputs).map_err(|e| format!("{what}: ORT run failed: {e}"))?;
    let got = harness::run(&mut rivet, inputs).map_err(|e| format!("{what}: Rivet run failed: {e}"))?;
    harness::compare(&got, &want, rtol, atol).map(|_| ()).map_err(|e| format!("{what}: {e}"))
}

pub fn assert_matches_ort(model: &[u8], inputs: &[HostTensor], rtol: f64, atol: f64, what: &str) {
    if let Err(e) = check_matches_ort(model, inputs, rtol, atol, what) {
        panic!("{e}");
    }
}

/// `len` values in [-1, 1) from `seed`, as f32.
pub fn vals(seed: u64, len: usize) -> Vec<f32> {
    harness::values(seed, len, -1.0, 1.0).into_iter().map(|v| v as f32).collect()
}

/// The elements of a shape.
pub fn count(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

/// A shape as fixed model dimensions.
pub fn fixed(shape: &[i64]) -> Vec<rivet::model::Dim> {
    shape.iter().map(|&d| rivet::model::Dim::Fixed(d)).collect()
}

/// `Clip(Relu(Conv(x, w, b)) + r, 0, 2)` with constant filters and bias: the chain the
/// fusion pass folds into the convolution's epilogue. Returns the model and its inputs.
pub fn conv_chain(
    xs: &[i64],
    ws: &[i64],
    attrs: &[(&str, rivet::model::Attr)],
    out: &[i64],
    seed: u64,
) -> (Vec<u8>, Vec<HostTensor>) {
    let model = rivet::model::ModelBuilder::new(17)
        .input("x", rivet::model::FLOAT, &fixed(xs))
        .input("r", rivet::model::FLOAT, &fixed(out))
        .initializer("w", ws, vals(seed + 1, count(ws)))
        .initializer("b", &[ws[0]], vals(seed + 2, ws[0] as usize))
        .initializer("lo", &[], vec![0.0])
        .initializer("hi", &[], vec![2.0])
        .node_with("Conv", "conv", &["x", "w", "b"], &["c"], attrs)
        .node("Relu", "relu", &["c"], &["a"])
        .node("Add", "add", &["a", "r"], &["s"])
        .node("Clip", "clip", &["s", "lo", "hi"], &["y"])
        .output("y", rivet::model::FLOAT, None)
        .build();
    let inputs =
        vec![HostTensor::f32("x", xs, vals(seed, count(xs))), HostTensor::f32("r", out, vals(seed + 3, count(out)))];
    (model, inputs)
}
