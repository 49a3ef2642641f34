//! `CountingAllocator`: wraps a `GlobalAlloc`, counts allocations and bytes and charges
//! them to the innermost open phase (or `unattributed`). No locks, no allocation:
//! counting touches only `const` thread locals and atomics, so it cannot re-enter.
//! The cdylib installs it as the global allocator under `probe`; without the feature
//! it only forwards.

use std::alloc::{GlobalAlloc, Layout};

pub struct CountingAllocator<A: GlobalAlloc>(pub A);

// SAFETY: every method forwards to the wrapped allocator with the same arguments; the
// counting beside it neither allocates nor touches the memory.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAllocator<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        crate::record_heap_alloc(layout.size());
        // SAFETY: forwarded as is; the caller upholds GlobalAlloc's contract.
        unsafe { self.0.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
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
