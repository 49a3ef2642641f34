//! Register, run, unregister the plugin repeatedly in one process: no crash, no growth.

use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{ModelBuilder, FLOAT};

fn resident_kib() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|s| s.parse().ok()).expect("rss pages");
    pages * 4
}

#[test]
fn register_run_unregister_100_times() {
    let env = harness::ort_environment().expect("ORT loads");
    let lib = rivet::paths::rivet_lib().expect("plugin built");
    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &["N".into(), 16.into()])
        .node("Sigmoid", "sig", &["x"], &["s"])
        .node("Mul", "mul", &["s", "x"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let inputs = [HostTensor::f32("x", &[4, 16], (0..64).map(|i| i as f32 / 8.0 - 4.0).collect())];
    let opts = SessionOpts { no_fallback: true, ..Default::default() };
    let mut after_first = 0;
    // `cargo xtask leakcheck` runs fewer cycles under valgrind.
    let cycles: usize = std::env::var("RIVET_LIFECYCLE_CYCLES").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    for cycle in 0..cycles {
        env.register_ep_library("rivet_cycle", &lib).expect("register");
        {
            let mut a = harness::session(env, &model, Arm::Rivet, &opts).expect("session a");
            let mut b = harness::session(env, &model, Arm::Rivet, &opts).expect("session b");
            let ya = harness::run(&mut a, &inputs).expect("run a");
            let yb = harness::run(&mut b, &inputs).expect("run b");
            assert_eq!(ya, yb);
        }
        rivet::ort_extra::unregister_ep_library(env, "rivet_cycle").expect("unregister");
        assert_eq!(env.devices().filter(|d| d.ep().is_ok_and(|n| n == "Rivet")).count(), 0, "cycle {cycle}");
        if cycle == 0 {
            after_first = resident_kib();
        }
    }
    let growth = resident_kib().saturating_sub(after_first);
    eprintln!("resident memory after cycle 1: {after_first} KiB; growth over {} more cycles: {growth} KiB", cycles - 1);
    // Unregistering while a session is alive: the session keeps working and drops cleanly.
    env.register_ep_library("rivet_cycle", &lib).expect("register");
    let mut alive = harness::session(env, &model, Arm::Rivet, &opts).expect("session");
    rivet::ort_extra::unregister_ep_library(env, "rivet_cycle").expect("unregister");
    let y = harness::run(&mut alive, &inputs).expect("runs after unregister");
    assert_eq!(y.len(), 1);
    drop(alive);
    // 99 further cycles of two sessions each: a leaked session (hundreds of KiB with its
    // graph and plans) would cost far more than this bound.
    // Under valgrind, memcheck's quarantine of freed blocks (20 MB) makes RSS meaningless;
    // leaks are what memcheck itself reports there.
    if std::env::var_os("RIVET_UNDER_VALGRIND").is_none() {
        assert!(growth < 16 * 1024, "resident memory grew {growth} KiB over {} cycles", cycles - 1);
    }
}
