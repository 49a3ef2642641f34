//! The probe's per-member ORT call counts against the fake `OrtApi`'s own counts of the
//! calls it received, on every Compute route the fake can drive: a call the probe does
//! not see (a copied function pointer, a call inside a macro, a member the fake does not
//! implement) makes the two lists differ. Statuses likewise: the probe's status count
//! against the statuses the fake made and Rivet released. With `--features probe`,
//! with or without `probe-allocator`.
#![cfg(feature = "probe")]

mod fake_ort;

use fake_ort::*;
use ort_sys::OrtKernelContext;
use rivet_ep::abi::api::Api;
use rivet_ep::exec::RunState;
use rivet_ep::plan::Plan;
use rivet_ep::probe;

/// Calls per ORT API member.
type PerMember = Vec<(&'static str, u64)>;

/// One Run; returns (probe's per-member calls, fake's per-member calls, probe counters).
fn counted_run(api: &Api, p: &Plan, c: &FakeCtx) -> (PerMember, PerMember, probe::Counters) {
    let mut state = RunState::new(p);
    let ptr = (c as *const FakeCtx).cast_mut().cast::<OrtKernelContext>();
    let (probe_before, fake_before, counters_before) = (probe::thread_ffi_sites(), fake_calls(), probe::snapshot());
    let _ = run(api, p, &mut state, ptr);
    let counters = probe::snapshot().since(&counters_before);
    (delta(&probe::thread_ffi_sites(), &probe_before), delta(&fake_calls(), &fake_before), counters)
}

#[test]
fn every_call_the_fake_receives_is_one_the_probe_counted() {
    let v23 = Api::from_tables_version(&FAKE_ORT, &FAKE_EP, 23);
    let big = rivet_ep::exec::PARALLEL_MIN_LEN + 7;
    let two_outputs = || {
        let c = ctx(2, &[4]);
        c.outputs.borrow_mut().push(FakeTensor { shape: Vec::with_capacity(8), data: Vec::with_capacity(4) });
        c
    };
    let cases: Vec<(&str, Api, Plan, FakeCtx)> = vec![
        ("one input", api(), plan(1, 1, &[2, 3]), ctx(1, &[2, 3])),
        ("three inputs", api(), plan(3, 0, &[4]), ctx(3, &[4])),
        ("scalar", api(), plan(1, 1, &[]), ctx(1, &[])),
        ("two outputs", api(), two_output_plan(), two_outputs()),
        ("API 23, two inputs", v23, plan(2, 1, &[4]), ctx(2, &[4])),
        ("split through ParallelFor", api(), plan(1, 1, &[big]), ctx(1, &[big])),
    ];
    for (what, api, p, c) in &cases {
        let (probe_calls, fake_calls, counters) = counted_run(api, p, c);
        assert!(!fake_calls.is_empty(), "{what}: the fake saw no calls");
        assert_eq!(probe_calls, fake_calls, "{what}: the probe's per-member counts differ from the fake's");
        let total: u64 = fake_calls.iter().map(|(_, n)| n).sum();
        assert_eq!(counters.total().ffi_calls, total, "{what}: phase ffi columns");
        assert_eq!(counters.total().statuses, 0, "{what}");
    }
    let (probe_calls, _, _) = counted_run(&cases[5].1, &cases[5].2, &cases[5].3);
    assert!(probe_calls.iter().any(|(m, n)| *m == "KernelContext_ParallelFor" && *n >= 1), "{probe_calls:?}");
}

#[test]
fn every_status_rivet_releases_is_counted() {
    let p = plan(1, 1, &[4]);
    let c = ctx(1, &[4]);
    let made_before = fake_statuses_made();
    fail_outputs(true);
    let (probe_calls, fake_calls, counters) = counted_run(&api(), &p, &c);
    fail_outputs(false);
    let made = fake_statuses_made() - made_before;
    assert_eq!(made, 1);
    assert_eq!(probe_calls, fake_calls);
    let released = fake_calls.iter().find(|(m, _)| *m == "ReleaseStatus").map_or(0, |(_, n)| *n);
    assert_eq!(released, made, "every status the fake made is released once: {fake_calls:?}");
    assert_eq!(counters.total().statuses, made, "the probe counts each status: {counters:#?}");
}

#[test]
fn time_is_not_measured_unless_asked_for() {
    assert!(
        std::env::var_os("RIVET_PROFILE_DISPATCH").is_none(),
        "run this test without RIVET_PROFILE_DISPATCH: it checks that timing stays off"
    );
    let (_, _, counters) = counted_run(&api(), &plan(1, 3, &[64]), &ctx(1, &[64]));
    assert!(counters.phase(probe::Phase::KernelInvoke).calls == 3);
    assert_eq!(counters.total().ns, 0, "phases were timed with timing off: {counters:#?}");
}

#[test]
fn allocations_are_counted_exactly_when_the_counting_allocator_is_installed() {
    let before = probe::snapshot();
    let v = std::hint::black_box(vec![0u8; 64]);
    let d = probe::snapshot().since(&before);
    drop(v);
    if cfg!(feature = "probe-allocator") {
        assert!(probe::allocations_counted() && d.counts_allocations());
        assert_eq!(d.total().allocs, 1);
    } else {
        // `probe` alone keeps the program's allocator: the columns say "not measured".
        assert!(!probe::allocations_counted(), "the counting allocator is installed without probe-allocator");
        assert!(!d.counts_allocations());
        assert_eq!(d.total().allocs, 0);
    }
}
