//! The probe with the feature off: the same items, all inert. `PhaseGuard` and
//! `FfiSite` are zero-sized with no `Drop`; every function is empty and inlined.

use crate::{Counters, Phase};

/// Zero-sized, no `Drop`: entering a phase costs nothing. `!Send`, as with the feature.
#[derive(Debug)]
#[must_use = "the phase ends when the guard is dropped: bind it with `let _g = ...`"]
pub struct PhaseGuard(std::marker::PhantomData<*const ()>);

impl PhaseGuard {
    #[inline(always)]
    pub const fn enter(_phase: Phase) -> PhaseGuard {
        PhaseGuard(std::marker::PhantomData)
    }
    #[inline(always)]
    pub const fn enter_user(_phase: &'static UserPhase) -> PhaseGuard {
        PhaseGuard(std::marker::PhantomData)
    }
}

/// A phase declared outside Rivet (inert without the probe).
pub struct UserPhase {
    name: &'static str,
}

impl UserPhase {
    pub const fn new(name: &'static str) -> UserPhase {
        UserPhase { name }
    }
    pub fn name(&self) -> &'static str {
        self.name
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
pub(crate) fn note_counting_allocator() {}
/// Always false: nothing is counted.
#[inline(always)]
pub fn allocations_counted() -> bool {
    false
}
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
/// This thread's per-member FFI counts (none without the probe).
pub fn thread_ffi_sites() -> Vec<(&'static str, u64)> {
    Vec::new()
}
/// Names of the user phases entered so far (none without the probe).
pub fn user_phase_names() -> Vec<&'static str> {
    Vec::new()
}
/// No timeline without the probe.
#[inline(always)]
pub fn timeline_start() {}
/// An empty trace without the probe.
pub fn timeline_json() -> String {
    "{\"traceEvents\":[]}".to_string()
}

/// A node registered with the probe (zero-sized and inert without it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeId;

impl NodeId {
    pub const NONE: NodeId = NodeId;
}

/// No node table without the probe.
pub const MAX_NODES: usize = 0;

#[inline(always)]
pub fn register_node(_fused: &str, _label: &str, _op: &str) -> NodeId {
    NodeId
}
#[inline(always)]
pub fn current_node() -> NodeId {
    NodeId
}
#[inline(always)]
pub fn record_node_shape(_id: NodeId, _shape: &[usize]) {}

/// Zero-sized, no `Drop`: attributing work to a node costs nothing.
#[derive(Debug)]
#[must_use = "the node ends when the scope is dropped: bind it with `let _n = ...`"]
pub struct NodeScope(std::marker::PhantomData<*const ()>);

impl NodeScope {
    #[inline(always)]
    pub const fn enter(_id: NodeId) -> NodeScope {
        NodeScope(std::marker::PhantomData)
    }
    #[inline(always)]
    pub const fn attach(_id: NodeId) -> NodeScope {
        NodeScope(std::marker::PhantomData)
    }
}

/// What the probe holds for one node (nothing without it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NodeStats {
    pub runs: u64,
    pub timed: u64,
    pub sum_ns: u64,
    pub probe_ns: u64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub allocs: u64,
    pub bytes: u64,
    pub ffi_calls: u64,
    pub rank: u64,
    pub dims: [u64; 8],
}

/// No nodes without the probe.
pub fn node_count() -> usize {
    0
}
pub fn node_names(_i: usize) -> Option<(&'static str, &'static str, &'static str)> {
    None
}
pub fn node_stats(_i: usize) -> Option<NodeStats> {
    None
}
pub fn nodes_reset() {}
pub fn probe_costs_ns() -> (f64, f64) {
    (0.0, 0.0)
}
