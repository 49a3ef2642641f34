//! The dispatch probe: counts ORT round trips, heap allocations and statuses per dispatch
//! phase, plus Runs and executed nodes. Behind the `probe` feature; without it every
//! function here is an empty inline function, `PhaseGuard` is a zero-sized type with no
//! `Drop`, and `snapshot()` is `Counters::default()`.
//!
//! Counters are kept twice: per thread, exact (a test's assertion never sees another
//! thread's work), and in a global relaxed mirror (ORT chooses the Compute thread; the
//! harness reads the mirror over the C ABI).

mod alloc;
#[cfg(feature = "probe")]
mod clock;
#[cfg(feature = "probe")]
mod on;

pub use alloc::CountingAllocator;

/// Dispatch phases in dispatch order, then the bucket for work outside every phase.
#[repr(u8)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    CallbackEntry = 0,
    MetadataQuery,
    TensorBind,
    Allocate,
    DispatchLookup,
    KernelInvoke,
    StatusCrossing,
    Unattributed,
}

pub const NUM_PHASES: usize = 8;

impl Phase {
    pub const ALL: [Phase; NUM_PHASES] = [
        Phase::CallbackEntry,
        Phase::MetadataQuery,
        Phase::TensorBind,
        Phase::Allocate,
        Phase::DispatchLookup,
        Phase::KernelInvoke,
        Phase::StatusCrossing,
        Phase::Unattributed,
    ];

    /// snake_case name, as the C export and the profile table show it.
    pub const fn name(self) -> &'static str {
        match self {
            Phase::CallbackEntry => "callback_entry",
            Phase::MetadataQuery => "metadata_query",
            Phase::TensorBind => "tensor_bind",
            Phase::Allocate => "allocate",
            Phase::DispatchLookup => "dispatch_lookup",
            Phase::KernelInvoke => "kernel_invoke",
            Phase::StatusCrossing => "status_crossing",
            Phase::Unattributed => "unattributed",
        }
    }

    /// NUL-terminated name for the C export.
    pub const fn c_name(self) -> &'static std::ffi::CStr {
        match self {
            Phase::CallbackEntry => c"callback_entry",
            Phase::MetadataQuery => c"metadata_query",
            Phase::TensorBind => c"tensor_bind",
            Phase::Allocate => c"allocate",
            Phase::DispatchLookup => c"dispatch_lookup",
            Phase::KernelInvoke => c"kernel_invoke",
            Phase::StatusCrossing => c"status_crossing",
            Phase::Unattributed => c"unattributed",
        }
    }
}

/// What one phase accumulated.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PhaseCounters {
    /// Times the phase was entered.
    pub calls: u64,
    /// Time spent in the phase itself (nested phases excluded); only with
    /// `RIVET_PROFILE_DISPATCH=1`.
    pub ns: u64,
    pub allocs: u64,
    pub bytes: u64,
    pub ffi_calls: u64,
    pub statuses: u64,
}

/// A snapshot of every counter. `#[repr(C)]`: the C export writes it as is.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub phases: [PhaseCounters; NUM_PHASES],
    /// Fused-node Runs that completed.
    pub runs: u64,
    /// Plan steps executed.
    pub nodes_executed: u64,
}

impl Counters {
    pub fn phase(&self, p: Phase) -> &PhaseCounters {
        &self.phases[p as usize]
    }

    /// Every phase added up, `unattributed` included.
    pub fn total(&self) -> PhaseCounters {
        self.phases.iter().fold(PhaseCounters::default(), |a, p| PhaseCounters {
            calls: a.calls + p.calls,
            ns: a.ns + p.ns,
            allocs: a.allocs + p.allocs,
            bytes: a.bytes + p.bytes,
            ffi_calls: a.ffi_calls + p.ffi_calls,
            statuses: a.statuses + p.statuses,
        })
    }

    /// Counter-by-counter difference `self - earlier` (saturating).
    pub fn since(&self, earlier: &Counters) -> Counters {
        let mut out = *self;
        for (o, e) in out.phases.iter_mut().zip(&earlier.phases) {
            o.calls = o.calls.saturating_sub(e.calls);
            o.ns = o.ns.saturating_sub(e.ns);
            o.allocs = o.allocs.saturating_sub(e.allocs);
            o.bytes = o.bytes.saturating_sub(e.bytes);
            o.ffi_calls = o.ffi_calls.saturating_sub(e.ffi_calls);
            o.statuses = o.statuses.saturating_sub(e.statuses);
        }
        out.runs = out.runs.saturating_sub(earlier.runs);
        out.nodes_executed = out.nodes_executed.saturating_sub(earlier.nodes_executed);
        out
    }
}

#[cfg(feature = "probe")]
pub use on::{
    ffi_sites, global_snapshot, record_heap_alloc, record_nodes, record_run, record_status, reset, snapshot, trace,
    trace_enabled, FfiSite, PhaseGuard,
};

#[cfg(not(feature = "probe"))]
mod off {
    use super::{Counters, Phase};

    /// Zero-sized, no `Drop`: entering a phase costs nothing.
    #[derive(Debug)]
    pub struct PhaseGuard;

    impl PhaseGuard {
        #[inline(always)]
        pub const fn enter(_phase: Phase) -> PhaseGuard {
            PhaseGuard
        }
    }

    /// A call site of an ORT API member (inert without the probe).
    pub struct FfiSite;

    impl FfiSite {
        pub const fn new(_member: &'static str) -> FfiSite {
            FfiSite
        }
        #[inline(always)]
        pub fn hit(&'static self) {}
    }

    #[inline(always)]
    pub fn snapshot() -> Counters {
        Counters::default()
    }
    #[inline(always)]
    pub fn global_snapshot() -> Counters {
        Counters::default()
    }
    #[inline(always)]
    pub fn reset() {}
    #[inline(always)]
    pub fn record_run() {}
    #[inline(always)]
    pub fn record_nodes(_n: usize) {}
    #[inline(always)]
    pub fn record_status() {}
    #[inline(always)]
    pub fn record_heap_alloc(_bytes: usize) {}
    #[inline(always)]
    pub fn trace_enabled() -> bool {
        false
    }
    #[inline(always)]
    pub fn trace(_args: std::fmt::Arguments<'_>) {}
    /// Per-member FFI counts (none without the probe).
    pub fn ffi_sites() -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

#[cfg(not(feature = "probe"))]
pub use off::*;
