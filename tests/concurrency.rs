//! 8 threads share one session, 1,000 Runs each with their own inputs (static and
//! symbolic shapes): every output is bit-identical to the same input run alone. Two
//! sessions of one model also run in parallel.

mod common;

use ort::value::DynValue;
use rivet::harness::{self, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT};
use rivet::ort_extra::{run_shared, RawOutput};

/// x[N, 64] (symbolic) and s[64] (static): two fused inputs, one of each kind.
fn model() -> Vec<u8> {
    ModelBuilder::new(21)
        .input("x", FLOAT, &[Dim::from("N"), Dim::from(64)])
        .input("s", FLOAT, &[Dim::from(64)])
        .node("Mul", "scale", &["x", "s"], &["xs"])
        .node("Tanh", "tanh", &["xs"], &["t"])
        .node_with("Gelu", "gelu", &["t"], &["g"], &[("approximate", Attr::Str("tanh".into()))])
        .node("Add", "add", &["g", "x"], &["y"])
        .output("y", FLOAT, None)
        .build()
}

fn inputs(thread: usize) -> Vec<(String, DynValue)> {
    let rows = 1 + thread % 5; // different N per thread
    let x = HostTensor::f32(
        "x",
        &[rows as i64, 64],
        harness::values(thread as u64, rows * 64, -3.0, 3.0).iter().map(|&v| v as f32).collect(),
    );
    let s = HostTensor::f32(
        "s",
        &[64],
        harness::values(100 + thread as u64, 64, 0.5, 1.5).iter().map(|&v| v as f32).collect(),
    );
    harness::prepare(&[x, s]).unwrap().into_values()
}

fn run(session: &ort::session::Session, values: &[(String, DynValue)]) -> Vec<RawOutput> {
    let refs: Vec<(&str, &DynValue)> = values.iter().map(|(n, v)| (n.as_str(), v)).collect();
    run_shared(session, &refs, &["y"]).expect("run")
}

#[test]
fn eight_threads_share_one_session() {
    let session = common::rivet_session(&model());
    let per_thread: Vec<Vec<(String, DynValue)>> = (0..8).map(inputs).collect();
    let alone: Vec<Vec<RawOutput>> = per_thread.iter().map(|v| run(&session, v)).collect();
    std::thread::scope(|scope| {
        for (t, values) in per_thread.iter().enumerate() {
            let (session, want) = (&session, &alone[t]);
            scope.spawn(move || {
                for i in 0..1000 {
                    let got = run(session, values);
                    // Bit-identical: compare the bits, so NaN and -0 count too.
                    let same = got[0].shape == want[0].shape
                        && got[0].data.iter().zip(&want[0].data).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "thread {t}, Run {i}: output differs from the Run alone");
                }
            });
        }
    });
}

#[test]
fn two_sessions_of_one_model_run_in_parallel() {
    let m = model();
    let (a, b) = (common::rivet_session(&m), common::rivet_session(&m));
    let values = inputs(3);
    let want = run(&a, &values);
    std::thread::scope(|scope| {
        for s in [&a, &b] {
            let (values, want) = (&values, &want);
            scope.spawn(move || {
                for _ in 0..500 {
                    assert_eq!(&run(s, values), want);
                }
            });
        }
    });
}
