//! The library's heap: large blocks on transparent huge pages.
//!
//! Rivet's large buffers (a plan's intermediate tensors, packed weights, packing scratch)
//! are read at strides of kilobytes: a 1x1 convolution reads its input's rows a plane
//! apart, one 4 KiB page a depth step, more pages than the data TLB holds; a classifier's
//! weights are hundreds of megabytes. On Linux with transparent huge pages in `madvise`
//! mode (the common default) memory stays on 4 KiB pages unless a program asks; this
//! allocator asks for 2 MiB pages for every block of at least [`HUGE_MIN`] bytes: such a
//! block is a private anonymous mapping of its own, whole huge pages 2 MiB aligned,
//! marked `MADV_HUGEPAGE` before anything touches it, and unmapped when freed. (Taking
//! such blocks from the system allocator instead, found by review, advised pages of
//! neighbouring mappings too, and reused heap memory already on small pages.) The kernel
//! backs the pages with huge ones where it can and with small ones where it cannot; the
//! contents are the same either way. Smaller blocks, and every block on other systems
//! (and under Miri), go to the system allocator as they are.

use std::alloc::{GlobalAlloc, Layout, System};

/// A huge page's size and alignment.
const HUGE: usize = 2 << 20;
/// The smallest block put on huge pages. A block of 1-2 MiB takes a whole huge page (at
/// most 1 MiB more of memory for it), as a 128-channel 56x56 activation does.
const HUGE_MIN: usize = 1 << 20;

#[cfg(all(target_os = "linux", not(miri)))]
mod sys {
    use std::ffi::{c_int, c_long, c_void};

    unsafe extern "C" {
        pub(super) fn mmap(
            addr: *mut c_void,
            len: usize,
            prot: c_int,
            flags: c_int,
            fd: c_int,
            off: c_long,
        ) -> *mut c_void;
        pub(super) fn munmap(addr: *mut c_void, len: usize) -> c_int;
        pub(super) fn madvise(addr: *mut c_void, len: usize, advice: c_int) -> c_int;
    }

    // linux/mman.h (the values every Linux architecture Rust targets shares).
    pub(super) const PROT_READ: c_int = 1;
    pub(super) const PROT_WRITE: c_int = 2;
    pub(super) const MAP_PRIVATE: c_int = 2;
    pub(super) const MAP_ANONYMOUS: c_int = 0x20;
    pub(super) const MADV_HUGEPAGE: c_int = 14;
}

/// The system allocator, with blocks of at least [`HUGE_MIN`] bytes mapped by themselves
/// on huge pages (Linux; elsewhere the system allocator alone).
pub struct HugePages;

/// Whether a block of `layout` is mapped by itself (a function of the layout alone, so a
/// block is freed the way it was taken).
fn mapped(layout: Layout) -> bool {
    cfg!(all(target_os = "linux", not(miri))) && layout.size() >= HUGE_MIN && layout.align() <= HUGE
}

/// The bytes a mapped block of `size` bytes holds: whole huge pages, all its own.
fn mapped_len(size: usize) -> usize {
    size.next_multiple_of(HUGE)
}

/// A fresh mapping of `size` bytes rounded up to whole huge pages, 2 MiB aligned, zero,
/// advised onto huge pages before anything touches it; null if the system has no room.
fn map(size: usize) -> *mut u8 {
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        use sys::*;
        let len = mapped_len(size);
        let Some(span) = len.checked_add(HUGE) else { return std::ptr::null_mut() };
        // SAFETY: a new private anonymous mapping: no address asked for, no file; the
        // result is checked before use.
        let at =
            unsafe { mmap(std::ptr::null_mut(), span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) };
        if at as isize == -1 {
            return std::ptr::null_mut();
        }
        let start = at as usize;
        let first = start.next_multiple_of(HUGE);
        let (head, tail) = (first - start, span - (first - start) - len);
        // SAFETY: the mapping's parts before `first` and after `first + len`, both inside
        // the `span` bytes just mapped (page multiples: `start` and `HUGE` are), are
        // unmapped; the part kept is `first..first + len`, which nothing else uses. The
        // advice covers exactly that part and changes only how it is backed.
        unsafe {
            if head > 0 {
                munmap(at, head);
            }
            if tail > 0 {
                munmap((first + len) as *mut _, tail);
            }
            madvise(first as *mut _, len, MADV_HUGEPAGE);
        }
        first as *mut u8
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    {
        let _ = size;
        unreachable!("only Linux maps blocks")
    }
}

/// Unmaps the block `ptr` of `size` bytes made by [`map`].
fn unmap(ptr: *mut u8, size: usize) {
    #[cfg(all(target_os = "linux", not(miri)))]
    // SAFETY: `ptr` is a mapping of `mapped_len(size)` bytes made by `map` for a block of
    // `size` bytes and not unmapped since (GlobalAlloc's contract on `dealloc`).
    unsafe {
        sys::munmap(ptr.cast(), mapped_len(size));
    }
    #[cfg(not(all(target_os = "linux", not(miri))))]
    let _ = (ptr, size);
}

// SAFETY: a block of a `mapped` layout is a mapping of its own, 2 MiB aligned (so at least
// the layout's alignment), of at least its size, zero when made, and unmapped by
// `dealloc` alone; every other block is the system allocator's, taken and returned with
// the caller's layout.
unsafe impl GlobalAlloc for HugePages {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            return map(layout.size());
        }
        // SAFETY: forwarded as is.
        unsafe { System.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if mapped(layout) {
            // A fresh anonymous mapping is zero.
            return map(layout.size());
        }
        // SAFETY: forwarded as is.
        unsafe { System.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if mapped(layout) {
            return unmap(ptr, layout.size());
        }
        // SAFETY: forwarded as is: the block is the system allocator's.
        unsafe { System.dealloc(ptr, layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let Ok(new_layout) = Layout::from_size_align(new_size, layout.align()) else {
            return std::ptr::null_mut();
        };
        match (mapped(layout), mapped(new_layout)) {
            // SAFETY: forwarded as is: both blocks are the system allocator's.
            (false, false) => unsafe { System.realloc(ptr, layout, new_size) },
            // Room to grow in place: a mapping's whole pages.
            (true, true) if mapped_len(new_size) == mapped_len(layout.size()) => ptr,
            // SAFETY: a new block; the contents both hold copied (`ptr` holds
            // `layout.size()` bytes, the new block `new_size`); the old block freed the way
            // it was taken, once the new one exists.
            _ => unsafe {
                let to = self.alloc(new_layout);
                if !to.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, to, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                to
            },
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

    /// Whether `p` starts a mapped block (2 MiB aligned) on this build.
    fn huge_aligned(p: *mut u8) -> bool {
        !cfg!(all(target_os = "linux", not(miri))) || (p as usize).is_multiple_of(HUGE)
    }

    #[test]
    fn large_blocks_are_aligned_zeroed_and_keep_their_contents_when_resized() {
        let heap = HugePages;
        // SAFETY: called below on blocks of at least `n` bytes, all written or zero.
        let bytes = |p: *const u8, n: usize| (0..n).map(move |i| unsafe { *p.add(i) });
        let pattern = |i: usize| (i % 251) as u8;
        // SAFETY: each block is used within its size and freed once with its layout.
        unsafe {
            // 1 MiB is large: mapped, aligned, zero.
            let at_min = Layout::from_size_align(1 << 20, 4).unwrap();
            let z = heap.alloc_zeroed(at_min);
            assert!(huge_aligned(z) && bytes(z, at_min.size()).all(|b| b == 0));
            heap.dealloc(z, at_min);
            // Small -> 3 MiB -> 3.5 MiB (in place) -> 5 MiB -> 1000 bytes keeps every byte
            // each size holds.
            let small = Layout::from_size_align(4096, 4).unwrap();
            let mut p = heap.alloc(small);
            let mut layout = small;
            for i in 0..small.size() {
                *p.add(i) = pattern(i);
            }
            for size in [3 << 20, 7 << 19, 5 << 20, 1000] {
                let q = heap.realloc(p, layout, size);
                assert!(!q.is_null());
                let kept = layout.size().min(size);
                assert!(bytes(q, kept).eq((0..kept).map(pattern)), "{} -> {size} bytes", layout.size());
                assert!(size < HUGE_MIN || huge_aligned(q));
                // Fill what is new, so the next step has every byte to keep.
                for i in kept..size {
                    *q.add(i) = pattern(i);
                }
                (p, layout) = (q, Layout::from_size_align(size, 4).unwrap());
            }
            heap.dealloc(p, layout);
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
