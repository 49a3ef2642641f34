//! The probe's C exports (only with the `probe` feature): the harness reads counters and
//! phase names from the library, so it never keeps its own copy of the phase list.

use std::ffi::c_char;

use crate::probe::{self, Counters, Phase, NUM_PHASES};

/// Writes a snapshot to `out`: this thread's counters when `global` is 0, else every
/// thread's. Returns `size_of::<Counters>()` so the reader can check the layout.
///
/// # Safety
/// `out` must be null or point to a writable `Counters`.
#[no_mangle]
pub unsafe extern "C" fn rivet_probe_snapshot(out: *mut Counters, global: i32) -> usize {
    let c = if global != 0 { probe::global_snapshot() } else { probe::snapshot() };
    if !out.is_null() {
        // SAFETY: the caller provides room for one Counters.
        unsafe { out.write(c) };
    }
    std::mem::size_of::<Counters>()
}

/// Zeroes the calling thread's counters and the global mirror.
#[no_mangle]
pub extern "C" fn rivet_probe_reset() {
    probe::reset();
}

/// Name of phase `index` (0..`rivet_probe_num_phases()`), or null past the end.
#[no_mangle]
pub extern "C" fn rivet_probe_phase_name(index: usize) -> *const c_char {
    Phase::ALL.get(index).map_or(std::ptr::null(), |p| p.c_name().as_ptr())
}

/// How many phases `Counters` holds (the last is `unattributed`).
#[no_mangle]
pub extern "C" fn rivet_probe_num_phases() -> usize {
    NUM_PHASES
}

/// ORT API member `index` (0..) with its call count so far, every thread: writes the
/// NUL-terminated name (truncated to `cap` bytes) and the count, returns 1; 0 past the
/// end. The list is sorted by member name.
///
/// # Safety
/// `name` must point to `cap` writable bytes (or be null with `cap` 0), `calls` to a
/// writable `u64` or be null.
#[no_mangle]
pub unsafe extern "C" fn rivet_probe_ffi_site(index: usize, name: *mut c_char, cap: usize, calls: *mut u64) -> i32 {
    let sites = probe::ffi_sites();
    let Some((member, n)) = sites.get(index) else { return 0 };
    if !name.is_null() && cap > 0 {
        let len = member.len().min(cap - 1);
        // SAFETY: the caller provides `cap` bytes; `len + 1 <= cap`.
        unsafe {
            std::ptr::copy_nonoverlapping(member.as_ptr().cast::<c_char>(), name, len);
            name.add(len).write(0);
        }
    }
    if !calls.is_null() {
        // SAFETY: the caller provides a writable u64.
        unsafe { calls.write(*n) };
    }
    1
}

/// Starts recording a timeline of every phase on every thread (ORT's pool workers too).
#[no_mangle]
pub extern "C" fn rivet_probe_timeline_start() {
    probe::timeline_start();
}

/// Stops the timeline and writes it to `path` as Chrome trace-event JSON (Perfetto opens
/// it). Returns 0 on success, -1 when the file cannot be written or the path is bad.
///
/// # Safety
/// `path` must be a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn rivet_probe_timeline_write(path: *const c_char) -> i32 {
    if path.is_null() {
        return -1;
    }
    // SAFETY: the caller passes a NUL-terminated path.
    let path = unsafe { std::ffi::CStr::from_ptr(path) };
    let Ok(path) = path.to_str() else { return -1 };
    match std::fs::write(path, probe::timeline_json()) {
        Ok(()) => 0,
        Err(_) => -1,
    }
}

/// How many nodes the probe has registered (each inner node of each fused node compiled).
#[no_mangle]
pub extern "C" fn rivet_probe_node_count() -> usize {
    probe::node_count()
}

/// Node `index`'s counts since the last `rivet_probe_nodes_reset`: writes them to `out`
/// and returns `size_of::<NodeStats>()` (for the reader's layout check), or 0 past the end.
///
/// # Safety
/// `out` must be null or point to a writable `NodeStats`.
#[no_mangle]
pub unsafe extern "C" fn rivet_probe_node_stats(index: usize, out: *mut probe::NodeStats) -> usize {
    let Some(s) = probe::node_stats(index) else { return 0 };
    if !out.is_null() {
        // SAFETY: the caller provides room for one NodeStats.
        unsafe { out.write(s) };
    }
    std::mem::size_of::<probe::NodeStats>()
}

/// Node `index`'s names: `which` 0 the fused node, 1 the label, 2 the op type. Writes the
/// NUL-terminated text (truncated to `cap` bytes) and returns 1; 0 past the end.
///
/// # Safety
/// `buf` must point to `cap` writable bytes (or be null with `cap` 0).
#[no_mangle]
pub unsafe extern "C" fn rivet_probe_node_name(index: usize, which: u32, buf: *mut c_char, cap: usize) -> i32 {
    let Some(names) = probe::node_names(index) else { return 0 };
    let text = match which {
        0 => names.0,
        1 => names.1,
        _ => names.2,
    };
    if !buf.is_null() && cap > 0 {
        let len = text.len().min(cap - 1);
        // SAFETY: the caller provides `cap` bytes; `len + 1 <= cap`.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr().cast::<c_char>(), buf, len);
            buf.add(len).write(0);
        }
    }
    1
}

/// Zeroes every node's counts (registrations stay).
#[no_mangle]
pub extern "C" fn rivet_probe_nodes_reset() {
    probe::nodes_reset();
}

/// The probe's calibrated own cost inside a timed node, in ns: `which` 0 an empty node
/// scope, 1 one phase guard inside it (0 until timing is on).
#[no_mangle]
pub extern "C" fn rivet_probe_cost_ns(which: u32) -> f64 {
    let (node, guard) = probe::probe_costs_ns();
    if which == 0 {
        node
    } else {
        guard
    }
}
