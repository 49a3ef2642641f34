//! The library's heap: large blocks on transparent huge pages.
//!
//! Rivet's large buffers (a plan's intermediate tensors, packed weights, packing scratch)
//! are read at strides of kilobytes: a 1x1 convolution reads its input's rows a plane
//! apart, one 4 KiB page a depth step, more pages than the data TLB holds; a classifier's
//! weights are hundreds of megabytes. On Linux with transparent huge pages in `madvise`
//! mode (the common default) memory stays on 4 KiB pages unless a program asks; this
//! allocator asks for 2 MiB pages for every block of at least [`HUGE_MIN`] bytes: it
//! aligns such a block to 2 MiB and marks its pages `MADV_HUGEPAGE` before anything
//! touches them. The kernel backs them with huge pages where it can and with small ones
//! where it cannot; the contents are the same either way. Smaller blocks, and every block
//! on other systems (and under Miri), go to the system allocator as they are.

use std::alloc::{GlobalAlloc, Layout, System};

/// A huge page's size and alignment.
const HUGE: usize = 2 << 20;
/// The smallest block put on huge pages. A block of 1-2 MiB may take a whole huge page
/// (at most 1 MiB more of memory for it), as a 128-channel 56x56 activation does.
const HUGE_MIN: usize = 1 << 20;

#[cfg(target_os = "linux")]
unsafe extern "C" {
    fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: std::ffi::c_int) -> std::ffi::c_int;
}

/// `MADV_HUGEPAGE` (linux/mman.h).
#[cfg(target_os = "linux")]
const MADV_HUGEPAGE: std::ffi::c_int = 14;

/// The system allocator, with blocks of at least [`HUGE_MIN`] bytes on huge pages
/// (Linux; elsewhere the system allocator alone).
pub struct HugePages;

/// The layout a block of `layout` is allocated with: 2 MiB aligned when it is large (a
/// function of `layout` alone, so a block is freed with the layout it was taken with).
fn placed(layout: Layout) -> Layout {
    if cfg!(all(target_os = "linux", not(miri))) && layout.size() >= HUGE_MIN {
        Layout::from_size_align(layout.size(), layout.align().max(HUGE)).unwrap_or(layout)
    } else {
        layout
    }
}

/// Asks for huge pages under a fresh block at `ptr` (2 MiB aligned, or null) of `size`
/// bytes, before it is touched. A refusal (a kernel without transparent huge pages)
/// leaves the block on small pages, which is all it can mean.
fn advise(ptr: *mut u8, size: usize) {
    #[cfg(target_os = "linux")]
    if !ptr.is_null() {
        // SAFETY: `ptr` starts a block of at least `size` bytes just taken from the system
        // allocator, 2 MiB (so page) aligned. The advice covers the whole 2 MiB pages the
        // block starts, which may reach past it into memory the system allocator keeps;
        // it changes only how the pages are backed, never their contents.
        unsafe { madvise(ptr.cast(), size.next_multiple_of(HUGE), MADV_HUGEPAGE) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (ptr, size);
}

// SAFETY: every block is taken from and returned to `System` with the same layout,
// `placed(layout)` (of the caller's size, at least the caller's alignment); the advice
// changes no memory's contents, and `alloc_zeroed` zeroes what it returns.
unsafe impl GlobalAlloc for HugePages {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let placed = placed(layout);
        // SAFETY: forwarded; `placed` is a valid layout of the same, non-zero size.
        let ptr = unsafe { System.alloc(placed) };
        if placed != layout {
            advise(ptr, layout.size());
        }
        ptr
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let placed = placed(layout);
        if placed == layout {
            // SAFETY: forwarded as is.
            return unsafe { System.alloc_zeroed(layout) };
        }
        // The block is advised before the zeroing touches it.
        // SAFETY: as in `alloc`.
        let ptr = unsafe { System.alloc(placed) };
        advise(ptr, layout.size());
        if !ptr.is_null() {
            // SAFETY: `ptr` holds `layout.size()` bytes.
            unsafe { ptr.write_bytes(0, layout.size()) };
        }
        ptr
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the block was taken with `placed(layout)`.
        unsafe { System.dealloc(ptr, placed(layout)) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        if placed(layout) == layout && placed(new_layout) == new_layout {
            // SAFETY: forwarded as is: neither block is placed.
            return unsafe { System.realloc(ptr, layout, new_size) };
        }
        // A block placed before or after: a new one, the contents copied, the old freed.
        // SAFETY: `new_layout` is valid and non-zero (GlobalAlloc's contract on
        // `new_size`); `ptr` holds `layout.size()` bytes and the new block `new_size`;
        // the old block is freed with the layout it was taken with.
        unsafe {
            let to = self.alloc(new_layout);
            if !to.is_null() {
                std::ptr::copy_nonoverlapping(ptr, to, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            to
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `VmFlags` line of the mapping of `/proc/self/smaps` that holds `addr`.
    #[cfg(target_os = "linux")]
    fn vm_flags(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            let head = line.split_whitespace().next().unwrap_or("");
            if let Some((lo, hi)) = head.split_once('-') {
                if let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16)) {
                    inside = (lo..hi).contains(&addr);
                    continue;
                }
            }
            if inside && line.starts_with("VmFlags:") {
                return Some(line.to_string());
            }
        }
        None
    }

    #[test]
    fn large_blocks_are_aligned_zeroed_and_keep_their_contents_when_resized() {
        let heap = HugePages;
        let large = Layout::from_size_align(3 << 20, 4).unwrap();
        let small = Layout::from_size_align(4096, 4).unwrap();
        // SAFETY: each block is used within its size and freed once with its layout.
        unsafe {
            // A large block dirtied and freed, then a zeroed one of its size: all zeros.
            // (glibc hands this one fresh pages, so the zeroing is not what makes them
            // zero here; the test pins the result, whichever does.)
            let p = heap.alloc(large);
            assert!(!p.is_null());
            assert_eq!(p as usize % if cfg!(all(target_os = "linux", not(miri))) { HUGE } else { 4 }, 0);
            p.write_bytes(0xAB, large.size());
            heap.dealloc(p, large);
            let z = heap.alloc_zeroed(large);
            assert!(std::slice::from_raw_parts(z, large.size()).iter().all(|&b| b == 0));
            heap.dealloc(z, large);
            // Small -> large -> small keeps the bytes each size holds.
            let s = heap.alloc(small);
            for i in 0..small.size() {
                *s.add(i) = (i % 251) as u8;
            }
            let l = heap.realloc(s, small, large.size());
            assert_eq!(l as usize % if cfg!(all(target_os = "linux", not(miri))) { HUGE } else { 4 }, 0);
            assert!((0..small.size()).all(|i| *l.add(i) == (i % 251) as u8));
            let back = heap.realloc(l, large, 100);
            assert!((0..100).all(|i| *back.add(i) == (i % 251) as u8));
            heap.dealloc(back, Layout::from_size_align(100, 4).unwrap());
        }
    }

    /// A large block's mapping carries the huge-page advice (`hg` in its `VmFlags`) on a
    /// kernel with transparent huge pages. (Whether the kernel then finds a free huge
    /// page is its business, so that is not asserted.)
    #[cfg(target_os = "linux")]
    #[test]
    fn large_blocks_are_advised_onto_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            return;
        }
        let heap = HugePages;
        let large = Layout::from_size_align(HUGE_MIN, 4).unwrap();
        // SAFETY: the block is read through no pointer and freed once with its layout.
        unsafe {
            let p = heap.alloc(large);
            let flags = vm_flags(p as usize).expect("the block is mapped");
            heap.dealloc(p, large);
            assert!(flags.split_whitespace().any(|f| f == "hg"), "no huge-page advice: {flags}");
        }
    }
}
