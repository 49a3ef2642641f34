//! `rivet profile --trace`'s timeline through real ORT: Chrome trace-event JSON with a
//! complete event per phase, on the Compute thread and on any ORT pool worker that ran a
//! split kernel's tasks, one named lane each.
//!
//! Whether ORT's worker takes a task of a split kernel is up to ORT's scheduler: on a
//! loaded machine the calling thread can run every task of all 20 Runs before the worker
//! wakes (seen: 2 failures in 5 runs at load 13 on 2 cores when this test required a
//! second lane). So the test requires the Compute thread's lane and a name for every lane
//! that ran kernel work; one lane per thread, pool threads included, is pinned without a
//! scheduler by `probe/tests/timeline.rs` (three threads, three named lanes).

use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{ModelBuilder, FLOAT};
use serde_json::Value;

#[test]
fn a_split_kernel_shows_on_the_compute_thread_and_on_the_pool_worker() {
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    let probe = rivet::probe_reader::ProbeReader::open(&path).expect("probe exports");
    let n = 1 << 20;
    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &[1.into(), n.into()])
        .node("Relu", "relu", &["x"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let opts = SessionOpts { no_fallback: true, intra_threads: Some(2), ..Default::default() };
    let mut s = harness::session(env, &model, Arm::Rivet, &opts).expect("session");
    let inputs = harness::prepare(&[HostTensor::f32("x", &[1, n], vec![0.5; n as usize])]).unwrap();
    harness::run_prepared(&mut s, &inputs).expect("warm-up");
    let file = std::env::temp_dir().join(format!("rivet-timeline-{}.json", std::process::id()));
    let runs = 20;
    probe.timeline_start().unwrap();
    for _ in 0..runs {
        harness::run_prepared(&mut s, &inputs).expect("run");
    }
    probe.timeline_write(&file).unwrap();
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).expect("valid JSON");
    let _ = std::fs::remove_file(&file);
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let complete: Vec<&Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    for e in &complete {
        assert!(e["name"].is_string() && e["tid"].is_u64() && e["ts"].is_f64() && e["dur"].is_f64(), "{e}");
    }
    let entries = complete.iter().filter(|e| e["name"] == "callback_entry").count();
    assert_eq!(entries, runs, "one Compute per Run");
    let mut lanes: Vec<u64> =
        complete.iter().filter(|e| e["name"] == "kernel_invoke").map(|e| e["tid"].as_u64().unwrap()).collect();
    lanes.sort_unstable();
    lanes.dedup();
    // The Compute thread's lane (the one its callback_entry events are on) ran kernel work.
    let compute_lane = complete.iter().find(|e| e["name"] == "callback_entry").unwrap()["tid"].as_u64().unwrap();
    assert!(lanes.contains(&compute_lane), "kernel work on the Compute thread: lanes {lanes:?}");
    let named: Vec<u64> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| e["tid"].as_u64().unwrap())
        .collect();
    for lane in &lanes {
        assert!(named.contains(lane), "lane {lane} ran kernel work and is named: named {named:?}");
        // And it shows which node that work was for: the node's event on the Compute
        // thread, a task of it on a worker.
        let of_node =
            |e: &&&Value| e["tid"].as_u64() == Some(*lane) && (e["cat"] == "rivet.node" || e["cat"] == "rivet.task");
        assert!(complete.iter().any(|e| of_node(&e) && e["name"] == "relu"), "lane {lane} has relu's events");
    }
    assert_eq!(trace["otherData"]["dropped_events"], 0);
}
