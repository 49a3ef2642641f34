//! Rivet's heap allocations per Run, counted by the probe build's CountingAllocator
//! across whole Runs inside real ORT: 0 in steady state for every static-shape case of
//! the benchmark grid, and the ORT calls per Run follow 3 per input + 2 per output; 0 too
//! for every real model and its quantized form, at one thread and two.

use rivet::bench;
use rivet::harness::{self, Arm, SessionOpts};
use rivet::probe_reader::ProbeReader;

/// The probe's counters are the process's: the tests here take turns, or each would
/// count the other's session creation (thousands of allocations and ORT calls).
static PROBE_COUNTERS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn every_static_grid_case_allocates_nothing_per_steady_state_run() {
    let _alone = PROBE_COUNTERS.lock().unwrap_or_else(|e| e.into_inner());
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    let probe = ProbeReader::open(&path).expect("probe exports");
    let mut checked = 0;
    let mut encoder_t1 = None;
    for case in bench::grid().into_iter().filter(|c| c.name.contains("/static/")) {
        let opts = SessionOpts {
            no_fallback: true,
            record_assignment: true,
            intra_threads: case.threads,
            ..Default::default()
        };
        let mut s = harness::session(env, &case.model, Arm::Rivet, &opts).expect("session");
        // ORT's optimizer removes all but the last of a chain of Identity nodes: count
        // what ORT assigned, which must be what Rivet executes.
        let assigned = rivet::ort_extra::graph_assignment(&s).expect("assignment").len();
        let inputs = harness::prepare(&case.inputs).expect("inputs");
        harness::time_runs(&mut s, &inputs, 3, 0).expect("warm-up");
        let before = probe.global();
        let runs = 4;
        harness::time_runs(&mut s, &inputs, 0, runs).expect("runs");
        let d = probe.global().since(&before);
        assert_eq!(d.total().allocs, 0, "{}: {} allocations in {runs} Runs: {d:#?}", case.name, d.total().allocs);
        assert_eq!(d.runs, runs as u64, "{}", case.name);
        assert_eq!(d.nodes_executed, (assigned * runs) as u64, "{}", case.name);
        assert!(assigned == case.nodes || case.name.starts_with("identity"), "{}: {assigned} nodes", case.name);
        // 3 ORT calls per input + 2 for the output, however many nodes, and one ParallelFor
        // per node large enough to split.
        let per_run = 3 * case.inputs.len() as u64 + 2;
        let parallel_for = d.total().ffi_calls - per_run * runs as u64;
        let may_split = case.name.contains("_1m/")
            || case.name.starts_with("matmul")
            || case.name.starts_with("conv")
            || case.name.starts_with("gemv")
            || case.name.starts_with("encoder");
        assert!(parallel_for == 0 || may_split, "{}: {} ORT calls", case.name, d.total().ffi_calls);
        // The encoder's six products (64 rows) split by rows from their shapes alone, B
        // packed once for the tasks: the same ORT calls with one thread as with two, at
        // least one ParallelFor per product per Run.
        if case.name.starts_with("encoder") {
            assert!(parallel_for >= 6 * runs as u64, "{}: {parallel_for} ParallelFor calls", case.name);
            match encoder_t1 {
                None => encoder_t1 = Some(parallel_for),
                Some(t1) => assert_eq!(parallel_for, t1, "{}: ParallelFor calls differ from t1", case.name),
            }
        }
        checked += 1;
    }
    // relu tiny (4) and 4k (3), identity (2), add (2), matmul (1), conv (1), gemv (1),
    // einsum (1), the encoder layer (1), 24 unary ops at 2 sizes; x2 threads
    assert_eq!(checked, 2 * (4 + 3 + 2 + 2 + 1 + 1 + 1 + 1 + 1 + 2 * 24));
}

/// The project's real models (`rivet::real_models`) and their quantized forms
/// (`rivet::int8_models`) on Rivet alone, at one thread and two (where the products and
/// the quantized convolutions split over the pool): no heap allocation per steady-state
/// Run either. (A KV-cache model's five outputs made every Run allocate.)
#[test]
fn real_and_quantized_models_allocate_nothing_per_steady_state_run() {
    let _alone = PROBE_COUNTERS.lock().unwrap_or_else(|e| e.into_inner());
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    let probe = ProbeReader::open(&path).expect("probe exports");
    let real = rivet::real_models::REAL_MODELS.iter().map(|stem| {
        let (model, inputs) = rivet::real_models::real_model(stem).unwrap_or_else(|e| panic!("{e}"));
        (stem.to_string(), model, inputs)
    });
    let quantized = rivet::int8_models::INT8_MODELS.into_iter().map(|(stem, mode)| {
        let (model, inputs) = rivet::int8_models::quantized(stem, mode).unwrap_or_else(|e| panic!("{e}"));
        (format!("{stem} {}", mode.name()), model, inputs)
    });
    let mut checked = 0;
    for (name, model, inputs) in real.chain(quantized) {
        for threads in [1, 2] {
            let opts = SessionOpts { no_fallback: true, intra_threads: Some(threads), ..Default::default() };
            let mut s = harness::session(env, &model, Arm::Rivet, &opts).expect("session");
            let inputs = harness::prepare(&inputs).expect("inputs");
            harness::time_runs(&mut s, &inputs, 2, 0).expect("warm-up");
            let before = probe.global();
            probe.nodes_reset();
            let runs = 2;
            harness::time_runs(&mut s, &inputs, 0, runs).expect("runs");
            let d = probe.global().since(&before);
            // (A model with If runs its branches' fused nodes too.)
            assert!(d.runs >= runs as u64, "{name}: {} fused-node Runs", d.runs);
            let allocating: Vec<String> = probe
                .nodes()
                .into_iter()
                .filter(|n| n.stats.allocs > 0)
                .map(|n| format!("{} ({}): {}", n.label, n.op_type, n.stats.allocs))
                .collect();
            let allocs = d.total().allocs;
            assert_eq!(
                allocs, 0,
                "{name} at {threads} threads: {allocs} allocations in {runs} Runs, by node {allocating:?}: {d:#?}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * (rivet::real_models::REAL_MODELS.len() + rivet::int8_models::INT8_MODELS.len()));
}
