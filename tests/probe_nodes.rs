//! Per-node attribution with the probe build in real ORT: each inner node of a fused
//! node is counted, timed (the probe's own cost subtracted) and charged its ORT calls;
//! `rivet profile` lists the top nodes by time above the phase table; the timeline
//! carries one named event per node per Run.

use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT};
use serde_json::Value;

/// Conv (16 -> 32 channels, 3x3 on 16x16) + Relu (folded into it) + MaxPool + Sigmoid.
fn model() -> Vec<u8> {
    let w: Vec<f32> = (0..32 * 16 * 9).map(|i| ((i % 7) as f32 - 3.0) * 0.05).collect();
    let b: Vec<f32> = (0..32).map(|i| i as f32 * 0.01).collect();
    ModelBuilder::new(21)
        .input("x", FLOAT, &[Dim::from(1), Dim::from(16), Dim::from(16), Dim::from(16)])
        .initializer("w", &[32, 16, 3, 3], w)
        .initializer("b", &[32], b)
        .node_with("Conv", "conv1", &["x", "w", "b"], &["c"], &[("pads", Attr::Ints(vec![1, 1, 1, 1]))])
        .node("Relu", "relu1", &["c"], &["r"])
        .node_with(
            "MaxPool",
            "pool1",
            &["r"],
            &["p"],
            &[("kernel_shape", Attr::Ints(vec![2, 2])), ("strides", Attr::Ints(vec![2, 2]))],
        )
        .node("Sigmoid", "sig1", &["p"], &["y"])
        .output("y", FLOAT, None)
        .build()
}

fn input() -> HostTensor {
    HostTensor::f32("x", &[1, 16, 16, 16], (0..16 * 256).map(|i| (i % 13) as f32 * 0.1 - 0.6).collect())
}

#[test]
fn each_inner_node_is_counted_timed_and_charged_its_ort_calls() {
    // Read once, when the library first enters a phase: set before ORT loads it.
    std::env::set_var("RIVET_PROFILE_DISPATCH", "1");
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    let probe = rivet::probe_reader::ProbeReader::open(&path).expect("probe exports");
    let opts = SessionOpts { no_fallback: true, intra_threads: Some(1), ..Default::default() };
    let mut s = harness::session(env, &model(), Arm::Rivet, &opts).expect("session");
    let inputs = harness::prepare(&[input()]).unwrap();
    harness::run_prepared(&mut s, &inputs).expect("warm-up");
    probe.nodes_reset();
    let runs = 25;
    for _ in 0..runs {
        harness::run_prepared(&mut s, &inputs).expect("run");
    }
    let rows: Vec<_> = probe.nodes().into_iter().filter(|r| r.stats.runs > 0).collect();
    let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["conv1 (+relu1)", "pool1", "sig1"], "{rows:#?}");
    let fused = &rows[0].fused;
    assert!(rows.iter().all(|r| &r.fused == fused && r.stats.runs == runs && r.stats.timed == runs), "{rows:#?}");
    let shapes: Vec<&[u64]> = rows.iter().map(|r| &r.stats.dims[..r.stats.rank as usize]).collect();
    assert_eq!(shapes, [&[1, 32, 16, 16][..], &[1, 32, 8, 8], &[1, 32, 8, 8]]);
    for r in &rows {
        let st = &r.stats;
        assert_eq!(st.allocs, 0, "a steady-state Run allocates nothing: {r:?}");
        assert!(st.p50_ns > 0.0 && st.p90_ns >= st.p50_ns && st.sum_ns > 0, "{r:?}");
        assert!(st.probe_ns > 0, "the probe's own cost is measured and subtracted: {r:?}");
    }
    // The fused output is allocated through ORT (GetOutput, GetTensorMutableData) by the
    // node that writes it; the Conv packs its weights on the first Run, not these, and
    // splits by output rows over the pool where the machine has two cores or more (one
    // ParallelFor, its tasks run in turn at this session's one thread).
    let ffi: Vec<u64> = rows.iter().map(|r| r.stats.ffi_calls / runs).collect();
    let split = std::thread::available_parallelism().map_or(1, |n| n.get()) > 1;
    assert_eq!(ffi, [split as u64, 0, 2]);
    // The Conv (about 1.2 M multiply-adds) takes longer than the small pool.
    assert!(rows[0].stats.p50_ns > rows[1].stats.p50_ns, "{rows:#?}");
    let (node_cost, guard_cost) = probe.probe_costs_ns();
    assert!(node_cost > 0.0 && guard_cost > 0.0, "calibrated: {node_cost} {guard_cost}");

    // The timeline: one named node event per node per Run.
    let file = std::env::temp_dir().join(format!("rivet-node-timeline-{}.json", std::process::id()));
    probe.timeline_start().unwrap();
    for _ in 0..3 {
        harness::run_prepared(&mut s, &inputs).expect("run");
    }
    probe.timeline_write(&file).unwrap();
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).expect("valid JSON");
    let _ = std::fs::remove_file(&file);
    let nodes: Vec<&Value> =
        trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["cat"] == "rivet.node").collect();
    for label in labels {
        let mine: Vec<&&Value> = nodes.iter().filter(|e| e["name"] == label).collect();
        assert_eq!(mine.len(), 3, "{label}: {nodes:?}");
        assert!(mine
            .iter()
            .all(|e| e["ph"] == "X" && e["dur"].as_f64().unwrap() >= 0.0 && e["args"]["fused_node"] == *fused));
    }
}

#[test]
fn rivet_profile_prints_the_top_nodes_by_time_above_the_phase_table() {
    let model_file = std::env::temp_dir().join(format!("rivet-profile-nodes-{}.onnx", std::process::id()));
    std::fs::write(&model_file, model()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rivet"))
        .args(["profile", "--model", model_file.to_str().unwrap(), "--iters", "30", "--top", "2", "--threads", "1"])
        .env("RIVET_PROFILE_DISPATCH", "1")
        .output()
        .expect("rivet profile runs");
    let _ = std::fs::remove_file(&model_file);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    let head = lines.iter().position(|l| l.starts_with("top 2 of 3 nodes by total time")).expect(&text);
    let row = |k: usize| lines[head + 2 + k];
    assert!(
        row(0).starts_with("#1 conv1 (+relu1)") && row(0).contains("Conv") && row(0).contains("[1, 32, 16, 16]"),
        "{text}"
    );
    assert!(row(0).contains(" 1.00 "), "one Run of the node per Run: {text}");
    assert!(row(1).starts_with("#1 "), "{text}");
    assert!(lines[head + 4].starts_with("#1: fused node "), "two rows then the legend: {text}");
    let phases = lines.iter().position(|l| l.starts_with("phase (per Run)")).expect(&text);
    assert!(phases > head, "the node table comes first: {text}");
}

#[test]
fn rivet_profile_times_nodes_by_default() {
    let model_file = std::env::temp_dir().join(format!("rivet-profile-default-{}.onnx", std::process::id()));
    std::fs::write(&model_file, model()).unwrap();
    let run = |dispatch: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_rivet"));
        c.args(["profile", "--model", model_file.to_str().unwrap(), "--iters", "5", "--threads", "1"]);
        match dispatch {
            Some(v) => c.env("RIVET_PROFILE_DISPATCH", v),
            None => c.env_remove("RIVET_PROFILE_DISPATCH"),
        };
        let out = c.output().expect("rivet profile runs");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let default = run(None);
    let off = run(Some("0"));
    let _ = std::fs::remove_file(&model_file);
    assert!(default.contains("nodes by total time"), "{default}");
    assert!(off.contains("by ORT calls and allocations") && off.contains("not timed"), "{off}");
}
