//! With `CountingAllocator` as this binary's global allocator: allocations are charged
//! to the innermost phase, and the counters say they were counted.
#![cfg(feature = "probe")]

use rivet_probe::{snapshot, CountingAllocator, Phase, PhaseGuard};

#[global_allocator]
static ALLOCATOR: CountingAllocator<std::alloc::System> = CountingAllocator(std::alloc::System);

#[test]
fn allocations_land_in_the_innermost_phase() {
    let before = snapshot();
    let outer = PhaseGuard::enter(Phase::TensorBind);
    let a = std::hint::black_box(vec![0u8; 10]);
    let inner = PhaseGuard::enter(Phase::Allocate);
    let b = std::hint::black_box(vec![0u8; 30]);
    drop(inner);
    drop(outer);
    let d = snapshot().since(&before);
    drop((a, b));
    assert!(d.counts_allocations() && rivet_probe::allocations_counted());
    assert_eq!((d.phase(Phase::TensorBind).allocs, d.phase(Phase::TensorBind).bytes), (1, 10));
    assert_eq!((d.phase(Phase::Allocate).allocs, d.phase(Phase::Allocate).bytes), (1, 30));
}
