//! The runtime of Rivet's dispatch probe: phases, counters, phase guards, per-call-site
//! FFI counts and a counting allocator. The `rivet-macros` attributes expand to calls
//! into this crate (by default as `::rivet_probe`; `crate = "path"` names another path,
//! e.g. a re-export), so a crate outside Rivet depends on this crate and the macros only.
//!
//! With the `probe` feature, work is counted per phase: calls, ORT calls, statuses,
//! heap allocations and bytes (when [`CountingAllocator`] is the global allocator), and,
//! with `RIVET_PROFILE_DISPATCH=1`, time. Without it every function is an empty inline
//! function, [`PhaseGuard`] is a zero-sized type with no `Drop`, and [`snapshot`] is
//! `Counters::default()`.
//!
//! Besides Rivet's seven phases a crate may declare its own (up to
//! [`MAX_USER_PHASES`]) as statics:
//!
//! ```
//! use rivet_probe::{PhaseGuard, UserPhase};
//!
//! static PARSE: UserPhase = UserPhase::new("parse");
//!
//! fn parse(s: &str) -> usize {
//!     let _g = PhaseGuard::enter_user(&PARSE);
//!     s.split(',').count()
//! }
//! assert_eq!(parse("a,b"), 2);
//! ```
//!
//! Counters live in one shard per thread, written only by their thread (no shared
//! cache line, no atomic read-modify-write), and are merged when read:
//! [`snapshot`] is the calling thread's shard (exact: a test never sees another
//! thread's work), [`global_snapshot`] every shard plus those of exited threads.

mod alloc;
#[cfg(feature = "probe")]
mod clock;
#[cfg(feature = "probe")]
mod nodes;
#[cfg(feature = "probe")]
mod on;

pub use alloc::CountingAllocator;
pub use rivet_macros::{dispatch_phase, dispatch_phase_block, ort_ffi, staging_log};

/// Whether this build counts (the `probe` feature).
pub const ENABLED: bool = cfg!(feature = "probe");

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

/// Rivet's phases plus `unattributed`.
pub const NUM_PHASES: usize = 8;
/// How many phases other crates may declare with [`UserPhase`]; a phase declared past
/// this is charged to `unattributed`.
pub const MAX_USER_PHASES: usize = 8;

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

impl PhaseCounters {
    fn plus(self, p: &PhaseCounters) -> PhaseCounters {
        PhaseCounters {
            calls: self.calls + p.calls,
            ns: self.ns + p.ns,
            allocs: self.allocs + p.allocs,
            bytes: self.bytes + p.bytes,
            ffi_calls: self.ffi_calls + p.ffi_calls,
            statuses: self.statuses + p.statuses,
        }
    }

    fn minus(self, e: &PhaseCounters) -> PhaseCounters {
        PhaseCounters {
            calls: self.calls.saturating_sub(e.calls),
            ns: self.ns.saturating_sub(e.ns),
            allocs: self.allocs.saturating_sub(e.allocs),
            bytes: self.bytes.saturating_sub(e.bytes),
            ffi_calls: self.ffi_calls.saturating_sub(e.ffi_calls),
            statuses: self.statuses.saturating_sub(e.statuses),
        }
    }
}

/// A snapshot of every counter. `#[repr(C)]`: a C export writes it as is.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub phases: [PhaseCounters; NUM_PHASES],
    /// Phases declared with [`UserPhase`], in the order they were first entered
    /// ([`user_phase_names`]).
    pub user_phases: [PhaseCounters; MAX_USER_PHASES],
    /// Fused-node Runs that completed.
    pub runs: u64,
    /// Plan steps executed.
    pub nodes_executed: u64,
    /// 1 when [`CountingAllocator`] is the process's global allocator (it has served an
    /// allocation), 0 when allocations are not counted: the `allocs` and `bytes`
    /// columns then mean "not measured", not "none".
    pub allocations_counted: u64,
}

impl Counters {
    pub fn phase(&self, p: Phase) -> &PhaseCounters {
        &self.phases[p as usize]
    }

    /// Whether the allocation columns were measured (see `allocations_counted`).
    pub fn counts_allocations(&self) -> bool {
        self.allocations_counted != 0
    }

    /// Every phase added up, `unattributed` and user phases included.
    pub fn total(&self) -> PhaseCounters {
        self.phases.iter().chain(&self.user_phases).fold(PhaseCounters::default(), |a, p| a.plus(p))
    }

    /// Counter-by-counter difference `self - earlier` (saturating).
    pub fn since(&self, earlier: &Counters) -> Counters {
        let mut out = *self;
        for (o, e) in
            out.phases.iter_mut().zip(&earlier.phases).chain(out.user_phases.iter_mut().zip(&earlier.user_phases))
        {
            *o = o.minus(e);
        }
        out.runs = out.runs.saturating_sub(earlier.runs);
        out.nodes_executed = out.nodes_executed.saturating_sub(earlier.nodes_executed);
        out
    }
}

#[cfg(feature = "probe")]
pub use nodes::{
    current_node, node_count, node_names, node_stats, nodes_reset, probe_costs_ns, record_node_shape, register_node,
    NodeId, NodeScope, NodeStats, MAX_NODES,
};
#[cfg(feature = "probe")]
use on::note_counting_allocator;
#[cfg(feature = "probe")]
pub use on::{
    allocations_counted, ffi_sites, global_snapshot, record_heap_alloc, record_nodes, record_run, record_status, reset,
    snapshot, thread_ffi_sites, timeline_json, timeline_start, trace, trace_enabled, user_phase_names, FfiSite,
    PhaseGuard, UserPhase,
};

#[cfg(not(feature = "probe"))]
mod off;

#[cfg(not(feature = "probe"))]
use off::note_counting_allocator;
#[cfg(not(feature = "probe"))]
pub use off::{
    allocations_counted, ffi_sites, global_snapshot, record_heap_alloc, record_nodes, record_run, record_status, reset,
    snapshot, thread_ffi_sites, timeline_json, timeline_start, trace, trace_enabled, user_phase_names, FfiSite,
    PhaseGuard, UserPhase,
};
#[cfg(not(feature = "probe"))]
pub use off::{
    current_node, node_count, node_names, node_stats, nodes_reset, probe_costs_ns, record_node_shape, register_node,
    NodeId, NodeScope, NodeStats, MAX_NODES,
};
