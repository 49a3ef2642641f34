//! With the probe build loaded into real ORT: Rivet's executed-node count equals ORT's
//! assignment, per-phase counts are reported, and every steady-state Run costs the same.

use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{ModelBuilder, FLOAT};
use rivet_ep::probe::Phase;

#[test]
fn assigned_nodes_equal_executed_nodes_and_each_run_costs_the_same() {
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    let probe = rivet::probe_reader::ProbeReader::open(&path).expect("probe exports");
    assert_eq!(probe.phase_names(), Phase::ALL.iter().map(|p| p.name()).collect::<Vec<_>>());

    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &[2.into(), 32.into()])
        .node("Relu", "a", &["x"], &["a"])
        .node("Exp", "b", &["a"], &["b"])
        .node_in_domain("com.microsoft", "Gelu", "cpu_only", &["b"], &["c"])
        .node("Neg", "d", &["c"], &["d"])
        .node("Add", "e", &["d", "x"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let opts = SessionOpts { record_assignment: true, intra_threads: Some(1), ..Default::default() };
    let mut s = harness::session(env, &model, Arm::Rivet, &opts).expect("session");
    let assigned = rivet::ort_extra::graph_assignment(&s).expect("assignment");
    let on_rivet = assigned.iter().filter(|(ep, _, _)| ep == "Rivet").count() as u64;
    assert_eq!(on_rivet, 4);
    let inputs = harness::prepare(&[HostTensor::f32("x", &[2, 32], vec![0.5; 64])]).unwrap();
    harness::run_prepared(&mut s, &inputs).expect("warm-up run");

    let mut per_run = Vec::new();
    for _ in 0..5 {
        let before = probe.global();
        harness::run_prepared(&mut s, &inputs).expect("run");
        per_run.push(probe.global().since(&before));
    }
    // Per-member counts (as `rivet profile` lists them) add up to the phase columns.
    let (members_before, before) = (probe.ffi_sites(), probe.global());
    harness::run_prepared(&mut s, &inputs).expect("run");
    let (members, d) = (probe.ffi_sites(), probe.global().since(&before));
    let by_member: u64 =
        members.iter().map(|(m, n)| n - members_before.iter().find(|(b, _)| b == m).map_or(0, |(_, k)| *k)).sum();
    assert_eq!(by_member, d.total().ffi_calls, "{members:?}");
    assert!(members.iter().any(|(m, n)| m == "KernelContext_GetInput" && *n > 0), "{members:?}");
    assert!(d.counts_allocations(), "the probe library counts allocations");
    let first = per_run[0];
    // Two fused nodes (either side of the contrib Gelu), one Compute each per Run.
    assert_eq!(first.runs, 2);
    assert_eq!(first.nodes_executed, on_rivet);
    assert_eq!(first.phase(Phase::CallbackEntry).calls, 2);
    // Fused node 1: x in, Exp out; fused node 2: the Gelu's output and x in, y out:
    // 3 calls per input, 2 per output.
    assert_eq!(first.total().ffi_calls, (3 + 2) + (2 * 3 + 2));
    assert_eq!(first.phase(Phase::KernelInvoke).calls, 4);
    assert_eq!(first.total().statuses, 0);
    assert_eq!(first.total().allocs, 0, "a steady-state Run allocates nothing: {first:#?}");
    for (i, c) in per_run.iter().enumerate() {
        let mut c = *c;
        let mut f = first;
        for p in c.phases.iter_mut().chain(f.phases.iter_mut()) {
            p.ns = 0; // time is the one column that may differ
        }
        assert_eq!(c, f, "Run {i} differs from the first");
    }
}
