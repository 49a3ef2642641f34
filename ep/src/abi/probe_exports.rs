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
