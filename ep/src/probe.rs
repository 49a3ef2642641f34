//! Run counters. Always-on relaxed counters for runs and executed nodes (two atomic adds
//! per Run); exported over the C ABI only with the `probe` feature.

use std::sync::atomic::{AtomicU64, Ordering};

static RUNS: AtomicU64 = AtomicU64::new(0);
static NODES_EXECUTED: AtomicU64 = AtomicU64::new(0);

/// Records one finished Run of a fused node that executed `nodes` plan steps.
#[inline]
pub fn record_run(nodes: usize) {
    RUNS.fetch_add(1, Ordering::Relaxed);
    NODES_EXECUTED.fetch_add(nodes as u64, Ordering::Relaxed);
}

/// Fused-node Runs and executed nodes so far in this process.
pub fn totals() -> (u64, u64) {
    (RUNS.load(Ordering::Relaxed), NODES_EXECUTED.load(Ordering::Relaxed))
}

#[cfg(feature = "probe")]
mod export {
    /// Writes [runs, nodes_executed] to `out` (2 entries).
    ///
    /// # Safety
    /// `out` must point to 2 writable u64.
    #[no_mangle]
    pub unsafe extern "C" fn rivet_probe_totals(out: *mut u64) {
        let (runs, nodes) = super::totals();
        if !out.is_null() {
            // SAFETY: the caller gives room for two values.
            unsafe {
                *out = runs;
                *out.add(1) = nodes;
            }
        }
    }
}
