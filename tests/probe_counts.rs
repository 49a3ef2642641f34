//! With the probe build, Rivet's own count of executed nodes agrees with ORT's assignment.

use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{ModelBuilder, FLOAT};

fn totals(lib: &libloading::Library) -> (u64, u64) {
    // SAFETY: the probe build exports `rivet_probe_totals(out: *mut u64)` writing two values.
    let f: libloading::Symbol<unsafe extern "C" fn(*mut u64)> = unsafe { lib.get(b"rivet_probe_totals") }.expect("probe export");
    let mut out = [0u64; 2];
    // SAFETY: `out` has room for the two values.
    unsafe { f(out.as_mut_ptr()) };
    (out[0], out[1])
}

#[test]
fn assigned_nodes_equal_executed_nodes() {
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    // SAFETY: the same file ORT loaded: dlopen returns the same handle, so the counters are shared.
    let lib = unsafe { libloading::Library::new(&path) }.expect("open probe lib");
    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &["N".into(), 32.into()])
        .node("Relu", "a", &["x"], &["a"])
        .node("Exp", "b", &["a"], &["b"])
        .node("Softmax", "cpu_only", &["b"], &["c"])
        .node("Neg", "d", &["c"], &["d"])
        .node("Add", "e", &["d", "x"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let opts = SessionOpts { record_assignment: true, ..Default::default() };
    let mut s = harness::session(env, &model, Arm::Rivet, &opts).expect("session");
    let on_rivet = rivet::ort_extra::graph_assignment(&s).expect("assignment").iter().filter(|(ep, _, _)| ep == "Rivet").count() as u64;
    assert_eq!(on_rivet, 4);
    let inputs = [HostTensor::f32("x", &[2, 32], vec![0.5; 64])];
    let before = totals(&lib);
    let runs = 7;
    for _ in 0..runs {
        harness::run(&mut s, &inputs).expect("run");
    }
    let after = totals(&lib);
    // Two fused nodes (before and after the Softmax), each run once per session Run.
    assert_eq!(after.0 - before.0, 2 * runs);
    assert_eq!(after.1 - before.1, on_rivet * runs);
}
