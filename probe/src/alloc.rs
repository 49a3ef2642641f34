//! `CountingAllocator`: wraps a `GlobalAlloc`, counts allocations and bytes and charges
//! them to the innermost open phase (or `unattributed`). No locks, no allocation:
//! counting touches only `const` thread locals and atomics, so it cannot re-enter.
//! A program installs it itself (Rivet's probe cdylib does, under `probe-allocator`);
//! without the `probe` feature it only forwards.

use std::alloc::{GlobalAlloc, Layout};

/// ```
/// use rivet_probe::CountingAllocator;
///
/// #[global_allocator]
/// static ALLOCATOR: CountingAllocator<std::alloc::System> = CountingAllocator(std::alloc::System);
///
/// let v = vec![1u8; 10];
/// // With the `probe` feature, the allocation columns now mean something.
/// assert_eq!(rivet_probe::allocations_counted(), rivet_probe::ENABLED);
/// # drop(v);
/// ```
pub struct CountingAllocator<A: GlobalAlloc>(pub A);

// SAFETY: every method forwards to the wrapped allocator with the same arguments; the
// counting beside it neither allocates nor touches the memory.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAllocator<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        crate::note_counting_allocator();
        crate::record_heap_alloc(layout.size());
        // SAFETY: forwarded as is; the caller upholds GlobalAlloc's contract.
        unsafe { self.0.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        crate::note_counting_allocator();
        crate::record_heap_alloc(layout.size());
        // SAFETY: as above.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A reallocation is a new allocation as far as dispatch cost goes.
        crate::record_heap_alloc(new_size);
        // SAFETY: as above.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}
