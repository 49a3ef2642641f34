//! With the probe: nesting, attribution and the allocator's totals. Runs with
//! `--features probe` (allocation columns must then read 0: nothing counts them) and
//! with `probe-allocator` (exact counts).
#![cfg(feature = "probe")]

use rivet_ep::probe::{self, Counters, Phase, PhaseGuard};
use rivet_macros::{dispatch_phase, dispatch_phase_block};

/// `n` when the counting allocator is installed, else 0.
fn counted(n: u64) -> u64 {
    if cfg!(feature = "probe-allocator") {
        n
    } else {
        0
    }
}

#[dispatch_phase(KernelInvoke)]
fn inner(n: usize) -> Vec<u8> {
    // black_box: an optimised build may otherwise elide an allocation it can see through.
    std::hint::black_box(vec![0u8; n])
}

#[dispatch_phase(TensorBind)]
fn outer(fail: bool) -> Result<usize, String> {
    let a = inner(100);
    let b = std::hint::black_box(vec![1u8; 10]); // charged to tensor_bind
    if fail {
        return Err(std::hint::black_box("early".into())); // the guard restores on an early return
    }
    let c: usize = "7".parse::<usize>().map_err(|e| e.to_string())?;
    Ok(a.len() + b.len() + c)
}

struct Holder;
impl Holder {
    #[dispatch_phase(Allocate)]
    fn method<T: Default>(&self) -> Vec<T> {
        let mut v = std::hint::black_box(Vec::with_capacity(4));
        v.push(T::default());
        v
    }
}

#[test]
fn nested_phases_attribute_to_the_innermost_and_restore_the_outer() {
    let before = probe::snapshot();
    assert_eq!(outer(false), Ok(117));
    assert_eq!(outer(true), Err("early".into()));
    let d = probe::snapshot().since(&before);
    assert_eq!(d.phase(Phase::TensorBind).calls, 2);
    assert_eq!(d.phase(Phase::KernelInvoke).calls, 2);
    assert_eq!(d.phase(Phase::KernelInvoke).allocs, counted(2));
    assert_eq!(d.phase(Phase::KernelInvoke).bytes, counted(200));
    // `vec![1u8; 10]` twice and the error String once.
    assert_eq!(d.phase(Phase::TensorBind).allocs, counted(3));
    assert_eq!(d.phase(Phase::TensorBind).bytes, counted(25));
    // After both returns we are outside every phase again.
    let x = probe::snapshot();
    let _v = std::hint::black_box(vec![0u8; 3]);
    let y = probe::snapshot().since(&x);
    assert_eq!(y.phase(Phase::Unattributed).allocs, counted(1));
}

#[test]
fn generic_methods_and_blocks_get_guards() {
    let before = probe::snapshot();
    let v: Vec<u32> = Holder.method();
    let s = dispatch_phase_block!(StatusCrossing, { std::hint::black_box(String::from("status")) });
    let d = probe::snapshot().since(&before);
    assert_eq!((v.len(), s.as_str()), (1, "status"));
    assert_eq!(d.phase(Phase::Allocate).calls, 1);
    assert_eq!(d.phase(Phase::Allocate).bytes, counted(16));
    assert_eq!(d.phase(Phase::StatusCrossing).allocs, counted(1));
}

#[test]
fn phase_columns_plus_unattributed_add_up_to_the_allocators_total() {
    let before = probe::snapshot();
    let mut keep = std::hint::black_box(Vec::with_capacity(20)); // one allocation of 20 * 24 bytes
    for i in 0..10 {
        let _g = PhaseGuard::enter(Phase::ALL[i % 7]);
        keep.push(std::hint::black_box(vec![0u64; i + 1]));
        drop(_g);
        keep.push(std::hint::black_box(vec![0u64; 1])); // unattributed
    }
    let d = probe::snapshot().since(&before);
    let by_phase: u64 = d.phases.iter().map(|p| p.allocs).sum();
    let bytes: u64 = d.phases.iter().map(|p| p.bytes).sum();
    assert_eq!(by_phase, d.total().allocs);
    assert_eq!(bytes, d.total().bytes);
    // 20 vectors plus `keep` itself.
    assert_eq!(d.total().allocs, counted(21), "{d:#?}");
    assert_eq!(d.phase(Phase::Unattributed).allocs, counted(10 + 1));
    // 8 * (1 + 2 + .. + 10) in phases, 10 * 8 + 20 * 24 unattributed.
    assert_eq!(bytes, counted(8 * 55 + 80 + 480), "{d:#?}");
    assert_eq!(d.phase(Phase::Unattributed).bytes, counted(80 + 480));
}

#[test]
fn other_threads_do_not_bleed_into_this_threads_counts() {
    let before = probe::snapshot();
    std::thread::spawn(|| {
        let _g = PhaseGuard::enter(Phase::KernelInvoke);
        let _v = std::hint::black_box(vec![0u8; 1000]);
    })
    .join()
    .unwrap();
    let d = probe::snapshot().since(&before);
    assert_eq!(d.phase(Phase::KernelInvoke), &Default::default());
    assert!(probe::global_snapshot().phase(Phase::KernelInvoke).allocs >= counted(1));
}

#[test]
fn a_fresh_thread_starts_from_the_default_counters() {
    let c = std::thread::spawn(probe::snapshot).join().unwrap();
    // `allocations_counted` says how the process counts, not what this thread did.
    assert_eq!(Counters { allocations_counted: 0, ..c }, Counters::default());
}

#[test]
fn the_macro_phase_list_matches_the_runtime() {
    // `rivet-macros` validates phase names against its own list; every runtime phase but
    // `unattributed` must be accepted there (compile-checked by the uses above and in ep).
    let names: Vec<&str> = Phase::ALL.iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        [
            "callback_entry",
            "metadata_query",
            "tensor_bind",
            "allocate",
            "dispatch_lookup",
            "kernel_invoke",
            "status_crossing",
            "unattributed"
        ]
    );
}
