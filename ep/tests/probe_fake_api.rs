//! Exact counts with a fake `OrtApi` (ort-sys's stub table with the kernel-context and
//! tensor members replaced): FFI calls, statuses and heap allocations per Run, pinned.
//! Runs with `--features probe`; allocations are counted (and the first-Run ones
//! checked) with `probe-allocator`, where the test binary's global allocator is
//! Rivet's `CountingAllocator`.
#![cfg(feature = "probe")]

mod fake_ort;

use fake_ort::*;
use ort_sys::OrtKernelContext;
use rivet_ep::abi::api::Api;
use rivet_ep::exec::RunState;
use rivet_ep::plan::Plan;
use rivet_ep::probe::{self, Counters, Phase};

/// Runs once to warm up, then measures one steady-state Run on this thread.
fn measured_run(p: &Plan, c: &FakeCtx) -> Counters {
    let api = api();
    let mut state = RunState::new(p);
    let ptr = (c as *const FakeCtx).cast_mut().cast::<OrtKernelContext>();
    run(&api, p, &mut state, ptr).expect("warm-up run");
    let before = probe::snapshot();
    run(&api, p, &mut state, ptr).expect("run");
    probe::snapshot().since(&before)
}

#[test]
fn one_node_one_input() {
    let p = plan(1, 1, &[2, 3]);
    let c = measured_run(&p, &ctx(1, &[2, 3]));
    // Input: GetInput + TypeAndShape + GetTensorData; output: GetOutput + MutableData.
    assert_eq!(c.total().ffi_calls, 5);
    assert_eq!(c.phase(Phase::TensorBind).ffi_calls, 2);
    assert_eq!(c.phase(Phase::MetadataQuery).ffi_calls, 1);
    assert_eq!(c.phase(Phase::Allocate).ffi_calls, 2);
    assert_eq!(c.total().allocs, 0, "steady state allocates nothing: {c:#?}");
    assert_eq!(c.total().statuses, 0);
    assert_eq!((c.runs, c.nodes_executed), (1, 1));
}

#[test]
fn three_inputs_cost_three_times_the_input_part() {
    let one = measured_run(&plan(1, 1, &[4]), &ctx(1, &[4]));
    let three = measured_run(&plan(3, 0, &[4]), &ctx(3, &[4]));
    // Linear per input: 3 calls each, plus 2 for the one output.
    assert_eq!(three.total().ffi_calls, 3 * 3 + 2);
    assert_eq!(three.phase(Phase::TensorBind).ffi_calls + three.phase(Phase::MetadataQuery).ffi_calls, 9);
    assert_eq!(one.phase(Phase::TensorBind).ffi_calls + one.phase(Phase::MetadataQuery).ffi_calls, 3);
    assert_eq!(three.total().allocs, 0);
    assert_eq!((three.runs, three.nodes_executed), (1, 2));
}

#[test]
fn ffi_calls_per_run_are_three_per_input_plus_two_per_output() {
    for (inputs, outputs, counts) in [
        (1, 1, measured_run(&plan(1, 1, &[4]), &ctx(1, &[4]))),
        (3, 1, measured_run(&plan(3, 0, &[4]), &ctx(3, &[4]))),
        (2, 2, {
            let c = ctx(2, &[4]);
            c.outputs.borrow_mut().push(FakeTensor { shape: Vec::with_capacity(8), data: Vec::with_capacity(4) });
            measured_run(&two_output_plan(), &c)
        }),
    ] {
        assert_eq!(counts.total().ffi_calls, 3 * inputs + 2 * outputs, "{inputs} inputs, {outputs} outputs");
        assert_eq!(counts.phase(Phase::Allocate).ffi_calls, 2 * outputs);
        assert_eq!(counts.total().allocs, 0);
    }
}

#[test]
fn a_three_node_plan_allocates_only_on_its_first_run() {
    let p = plan(1, 3, &[16]);
    let c = ctx(1, &[16]);
    let api = api();
    let mut state = RunState::new(&p);
    let ptr = (&c as *const FakeCtx).cast_mut().cast::<OrtKernelContext>();
    let before = probe::snapshot();
    run(&api, &p, &mut state, ptr).expect("first run");
    let first = probe::snapshot().since(&before);
    // Two intermediate buffers are sized on the first Run, in dispatch_lookup.
    let expect = if cfg!(feature = "probe-allocator") { 2 } else { 0 };
    assert_eq!(first.total().allocs, expect, "{first:#?}");
    assert_eq!(first.phase(Phase::DispatchLookup).allocs, expect);
    let steady = measured_run(&p, &c);
    assert_eq!(steady.total().ffi_calls, 5);
    assert_eq!(steady.total().allocs, 0);
    assert_eq!(steady.nodes_executed, 3);
    assert_eq!(steady.phase(Phase::KernelInvoke).calls, 3);
    assert_eq!(steady.phase(Phase::DispatchLookup).calls, 3);
}

#[test]
fn a_scalar_input_with_a_null_shape_pointer_works() {
    let p = plan(1, 1, &[]);
    let c = ctx(1, &[]);
    let counts = measured_run(&p, &c);
    assert_eq!(counts.total().ffi_calls, 5);
    assert_eq!(c.outputs.borrow()[0].data, vec![0.0]); // relu(-1)
}

#[test]
fn a_failing_run_counts_its_status_and_names_the_node() {
    // Declared [4], given [5]: the input check fails before any kernel runs.
    let p = plan(1, 1, &[4]);
    let c = ctx(1, &[5]);
    let api = api();
    let mut state = RunState::new(&p);
    let ptr = (&c as *const FakeCtx).cast_mut().cast::<OrtKernelContext>();
    let err = run(&api, &p, &mut state, ptr).expect_err("shape mismatch");
    assert_eq!(err.message, "node 'relu0' (Relu) input 0 'x0': expected float32 [4], got float32 [5]");
}

#[test]
fn on_api_23_input_metadata_takes_the_five_call_route() {
    let old = Api::from_tables_version(&FAKE_ORT, &FAKE_EP, 23);
    assert!(!old.has_shape_reference());
    for (n, shape) in [(1usize, vec![2usize, 3]), (3, vec![4]), (1, vec![])] {
        let p = plan(n, 1, &shape);
        let c = ctx(n, &shape);
        let mut state = RunState::new(&p);
        let ptr = (&c as *const FakeCtx).cast_mut().cast::<OrtKernelContext>();
        run(&old, &p, &mut state, ptr).expect("warm-up");
        let before = probe::snapshot();
        run(&old, &p, &mut state, ptr).expect("run");
        let d = probe::snapshot().since(&before);
        // GetInput + (TypeAndShape, ElementType, DimensionsCount, Dimensions, Release) + GetTensorData.
        assert_eq!(d.total().ffi_calls as usize, 7 * n + 2, "{n} inputs of shape {shape:?}");
        assert_eq!(d.phase(Phase::MetadataQuery).ffi_calls as usize, 5 * n);
        assert_eq!(d.total().allocs, 0);
        let expect: Vec<f32> = vec![(0..n).map(|i| i as f32 - 1.0).sum::<f32>().max(0.0); shape.iter().product()];
        assert_eq!(c.outputs.borrow()[0].data, expect);
    }
}
