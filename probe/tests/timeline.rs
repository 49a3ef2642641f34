//! The timeline is Chrome trace-event JSON (what Perfetto and chrome://tracing load):
//! checked against the format's schema for complete and metadata events, with one lane
//! per thread that ran a phase and nested phases inside their parent.
#![cfg(feature = "probe")]

use rivet_probe::{dispatch_phase, Phase, PhaseGuard};
use serde_json::Value;

#[dispatch_phase(KernelInvoke)]
fn kernel(n: u64) -> u64 {
    (0..n).sum()
}

#[test]
fn phases_on_every_thread_become_complete_events_on_their_own_lane() {
    rivet_probe::timeline_start();
    let work = || {
        let _g = PhaseGuard::enter(Phase::TensorBind);
        std::hint::black_box(kernel(10_000));
    };
    std::thread::scope(|s| {
        s.spawn(work);
        s.spawn(work);
    });
    work();
    let json = rivet_probe::timeline_json();
    let trace: Value = serde_json::from_str(&json).expect("valid JSON");
    let events = trace["traceEvents"].as_array().expect("traceEvents array");
    let complete: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    let names: Vec<&Value> = events.iter().filter(|e| e["ph"] == "M" && e["name"] == "thread_name").collect();
    for e in &complete {
        assert!(e["name"].is_string() && e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        assert!(e["ts"].as_f64().unwrap() >= 0.0 && e["dur"].as_f64().unwrap() >= 0.0, "{e}");
    }
    // Three threads, each with a tensor_bind holding a kernel_invoke.
    assert_eq!(complete.len(), 6, "{json}");
    let mut lanes: Vec<u64> = complete.iter().map(|e| e["tid"].as_u64().unwrap()).collect();
    lanes.sort_unstable();
    lanes.dedup();
    assert_eq!(lanes.len(), 3, "one lane per thread: {json}");
    assert_eq!(names.len(), 3, "each lane is named: {json}");
    for lane in lanes {
        let on_lane: Vec<&&Value> = complete.iter().filter(|e| e["tid"] == lane).collect();
        let outer = on_lane.iter().find(|e| e["name"] == "tensor_bind").expect("tensor_bind");
        let inner = on_lane.iter().find(|e| e["name"] == "kernel_invoke").expect("kernel_invoke");
        let (o0, o1) = (outer["ts"].as_f64().unwrap(), outer["ts"].as_f64().unwrap() + outer["dur"].as_f64().unwrap());
        let (i0, i1) = (inner["ts"].as_f64().unwrap(), inner["ts"].as_f64().unwrap() + inner["dur"].as_f64().unwrap());
        assert!(o0 <= i0 && i1 <= o1 + 1e-3, "kernel_invoke nests in tensor_bind: {outer} {inner}");
    }
    assert_eq!(trace["otherData"]["dropped_events"], 0);
    // Off again: later phases are not recorded.
    work();
    let again: Value = serde_json::from_str(&rivet_probe::timeline_json()).unwrap();
    assert_eq!(again["traceEvents"].as_array().unwrap().iter().filter(|e| e["ph"] == "X").count(), 6);
}
