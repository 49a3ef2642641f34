//! Per-node attribution (feature on): each node a plan registers at Compile gets a slot
//! of a fixed table; a [`NodeScope`] around the node's steps counts its Runs, charges
//! the allocations and ORT calls made meanwhile (on the Run's thread and, through
//! [`NodeScope::attach`], on pool workers running its tasks) and, with timing on, puts
//! its time into a log-scale histogram, less the probe's own calibrated cost.
//! Nothing here allocates after registration, so the counting allocator can call it.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

use crate::clock;

/// How many nodes the table holds; nodes registered past it are not attributed.
pub const MAX_NODES: usize = 1024;
/// Exact buckets below 8 ns, then 8 per octave up to 2^40 ns.
const BUCKETS: usize = 8 * 38 + 8;
const MAX_DIMS: usize = 8;

/// A node registered with the probe ([`register_node`]); `NONE` is attributed nowhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeId(u16);

impl NodeId {
    pub const NONE: NodeId = NodeId(u16::MAX);
}

struct Slot {
    runs: AtomicU64,
    timed: AtomicU64,
    sum_ns: AtomicU64,
    probe_ns: AtomicU64,
    allocs: AtomicU64,
    bytes: AtomicU64,
    ffi: AtomicU64,
    rank: AtomicU8,
    dims: [AtomicU64; MAX_DIMS],
    hist: [AtomicU32; BUCKETS],
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    runs: AtomicU64::new(0),
    timed: AtomicU64::new(0),
    sum_ns: AtomicU64::new(0),
    probe_ns: AtomicU64::new(0),
    allocs: AtomicU64::new(0),
    bytes: AtomicU64::new(0),
    ffi: AtomicU64::new(0),
    rank: AtomicU8::new(0),
    dims: [const { AtomicU64::new(0) }; MAX_DIMS],
    hist: [const { AtomicU32::new(0) }; BUCKETS],
};

static SLOTS: [Slot; MAX_NODES] = [EMPTY; MAX_NODES];
static NAMES: [OnceLock<NodeName>; MAX_NODES] = [const { OnceLock::new() }; MAX_NODES];
static NEXT: AtomicUsize = AtomicUsize::new(0);

struct NodeName {
    fused: String,
    label: String,
    op: String,
}

thread_local! {
    static CURRENT: Cell<u16> = const { Cell::new(u16::MAX) };
}

/// Registers a node (at Compile: this allocates its names).
pub fn register_node(fused: &str, label: &str, op: &str) -> NodeId {
    let k = NEXT.fetch_add(1, Relaxed);
    match NAMES.get(k) {
        Some(cell) => {
            let _ = cell.set(NodeName { fused: fused.to_string(), label: label.to_string(), op: op.to_string() });
            NodeId(k as u16)
        }
        None => NodeId::NONE,
    }
}

/// The node whose work this thread is doing, `NONE` outside every node.
#[inline]
pub fn current_node() -> NodeId {
    NodeId(CURRENT.try_with(Cell::get).unwrap_or(u16::MAX))
}

#[inline]
fn slot(id: u16) -> Option<&'static Slot> {
    SLOTS.get(id as usize)
}

/// Charges an allocation to the current node (called by the counting allocator).
#[inline]
pub(crate) fn charge_alloc(bytes: usize) {
    if let Some(s) = slot(current_node().0) {
        s.allocs.fetch_add(1, Relaxed);
        s.bytes.fetch_add(bytes as u64, Relaxed);
    }
}

/// Charges an ORT call to the current node.
#[inline]
pub(crate) fn charge_ffi() {
    if let Some(s) = slot(current_node().0) {
        s.ffi.fetch_add(1, Relaxed);
    }
}

/// Records the node's output shape (the last Run's).
pub fn record_node_shape(id: NodeId, shape: &[usize]) {
    let Some(s) = slot(id.0) else { return };
    s.rank.store(shape.len().min(MAX_DIMS) as u8, Relaxed);
    for (d, &v) in s.dims.iter().zip(shape) {
        d.store(v as u64, Relaxed);
    }
}

/// The probe's own cost inside a timed node, in ticks (f64 bits): what an empty
/// [`NodeScope`] measures, and what one phase guard inside it adds.
static NODE_SELF_TICKS: AtomicU64 = AtomicU64::new(0);
static GUARD_TICKS: AtomicU64 = AtomicU64::new(0);

/// Work inside this scope is the node's: its Run (on [`NodeScope::enter`]), its
/// allocations and ORT calls, and with timing on its time.
#[derive(Debug)]
#[must_use = "the node ends when the scope is dropped: bind it with `let _n = ...`"]
pub struct NodeScope {
    id: u16,
    prev: u16,
    /// Tick at entry when timed or on a timeline, else 0.
    start: u64,
    /// This thread's phase-guard count at entry (timed scopes).
    guards: u64,
    timed: bool,
    /// A worker's task of the node (its timeline event is a task's, not the node's Run).
    task: bool,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl NodeScope {
    /// Enters node `id` on the Run's thread: one Run of it, timed when timing is on.
    #[inline]
    pub fn enter(id: NodeId) -> NodeScope {
        if let Some(s) = slot(id.0) {
            s.runs.fetch_add(1, Relaxed);
        }
        let timed = crate::on::timing();
        let mut scope = NodeScope::attach(id);
        scope.task = false;
        if timed || crate::on::timeline_on() {
            scope.timed = timed;
            scope.guards = crate::on::guards_entered();
            scope.start = clock::ticks();
        }
        scope
    }

    /// Attributes this thread's work to node `id` (a pool worker running its task),
    /// without counting a Run or timing it. On a timeline, a thread that was not inside
    /// the node already (a worker, not the Run's thread running a task itself) gets an
    /// event of its own for the task.
    #[inline]
    pub fn attach(id: NodeId) -> NodeScope {
        let prev = CURRENT.try_with(|c| c.replace(id.0)).unwrap_or(u16::MAX);
        let start = if prev != id.0 && crate::on::timeline_on() { clock::ticks() } else { 0 };
        NodeScope {
            id: id.0,
            prev,
            start,
            guards: 0,
            timed: false,
            task: start != 0,
            _not_send: std::marker::PhantomData,
        }
    }

    /// Ends the timing: the ticks measured and the phase guards entered meanwhile.
    #[inline]
    fn finish(&mut self) -> Option<(u64, u64)> {
        if self.start == 0 {
            return None;
        }
        let end = clock::ticks();
        let start = std::mem::replace(&mut self.start, 0);
        crate::on::record_node_event(self.id, start, end, self.task);
        Some((end.wrapping_sub(start), crate::on::guards_entered().wrapping_sub(self.guards)))
    }
}

impl Drop for NodeScope {
    #[inline]
    fn drop(&mut self) {
        let timed = self.timed;
        if let Some((ticks, inner)) = self.finish() {
            if timed {
                record_time(self.id, ticks, inner);
            }
        }
        let _ = CURRENT.try_with(|c| c.set(self.prev));
    }
}

fn record_time(id: u16, ticks: u64, inner_guards: u64) {
    let Some(s) = slot(id) else { return };
    let own =
        f64::from_bits(NODE_SELF_TICKS.load(Relaxed)) + inner_guards as f64 * f64::from_bits(GUARD_TICKS.load(Relaxed));
    let probe = own.min(ticks as f64);
    let net = crate::on::ticks_to_ns((ticks as f64 - probe) as u64);
    s.timed.fetch_add(1, Relaxed);
    s.sum_ns.fetch_add(net, Relaxed);
    s.probe_ns.fetch_add(crate::on::ticks_to_ns(probe as u64), Relaxed);
    s.hist[bucket(net)].fetch_add(1, Relaxed);
}

fn bucket(ns: u64) -> usize {
    if ns < 8 {
        return ns as usize;
    }
    let e = 63 - ns.leading_zeros() as usize; // >= 3
    let mant = ((ns >> (e - 3)) & 7) as usize;
    (8 * (e - 2) + mant).min(BUCKETS - 1)
}

/// The middle of bucket `i`, in ns.
fn bucket_mid(i: usize) -> f64 {
    if i < 8 {
        return i as f64;
    }
    let (e, mant) = (i / 8 + 2, (i % 8) as u64);
    let width = 1u64 << (e - 3);
    ((8 + mant) << (e - 3)) as f64 + width as f64 / 2.0
}

fn quantile(hist: &[u32], q: f64) -> f64 {
    let total: u64 = hist.iter().map(|&c| c as u64).sum();
    if total == 0 {
        return 0.0;
    }
    let rank = ((q * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (i, &c) in hist.iter().enumerate() {
        seen += c as u64;
        if seen >= rank {
            return bucket_mid(i);
        }
    }
    bucket_mid(hist.len() - 1)
}

/// Measures the probe's own cost in a timed node (median over batches), with this
/// thread's counters saved and restored around it by the caller.
pub(crate) fn calibrate() {
    const BATCHES: usize = 31;
    const PER: u64 = 200;
    let mut empty = [0f64; BATCHES];
    let mut guarded = [0f64; BATCHES];
    for b in 0..BATCHES {
        let (mut e, mut g) = (0u64, 0u64);
        for _ in 0..PER {
            let mut s = NodeScope::enter(NodeId::NONE);
            e += s.finish().map_or(0, |(t, _)| t);
            drop(s);
            let mut s = NodeScope::enter(NodeId::NONE);
            drop(crate::PhaseGuard::enter(crate::Phase::Unattributed));
            g += s.finish().map_or(0, |(t, _)| t);
            drop(s);
        }
        empty[b] = e as f64 / PER as f64;
        guarded[b] = g as f64 / PER as f64;
    }
    let median = |v: &mut [f64]| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let node = median(&mut empty);
    let guard = (median(&mut guarded) - node).max(0.0);
    NODE_SELF_TICKS.store(node.to_bits(), Relaxed);
    GUARD_TICKS.store(guard.to_bits(), Relaxed);
}

/// The calibrated costs in ns: an empty node scope, one phase guard inside one.
pub fn probe_costs_ns() -> (f64, f64) {
    let to_ns = |t: f64| crate::on::ticks_to_ns(t as u64) as f64;
    (to_ns(f64::from_bits(NODE_SELF_TICKS.load(Relaxed))), to_ns(f64::from_bits(GUARD_TICKS.load(Relaxed))))
}

/// What the probe holds for one node. `#[repr(C)]`: a C export writes it as is.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NodeStats {
    /// Runs of the node (scopes entered on a Run's thread).
    pub runs: u64,
    /// Of which timed (timing on).
    pub timed: u64,
    /// Time over the timed Runs, the probe's own cost subtracted.
    pub sum_ns: u64,
    /// The probe's own cost subtracted, over the timed Runs.
    pub probe_ns: u64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub allocs: u64,
    pub bytes: u64,
    pub ffi_calls: u64,
    pub rank: u64,
    pub dims: [u64; MAX_DIMS],
}

/// How many nodes are registered (up to [`MAX_NODES`]).
pub fn node_count() -> usize {
    NEXT.load(Relaxed).min(MAX_NODES)
}

/// Node `i`'s fused node, label and op type.
pub fn node_names(i: usize) -> Option<(&'static str, &'static str, &'static str)> {
    NAMES.get(i)?.get().map(|n| (n.fused.as_str(), n.label.as_str(), n.op.as_str()))
}

/// Node `i`'s counts since the last [`nodes_reset`].
pub fn node_stats(i: usize) -> Option<NodeStats> {
    let s = SLOTS.get(i).filter(|_| i < node_count())?;
    let hist: [u32; BUCKETS] = std::array::from_fn(|k| s.hist[k].load(Relaxed));
    let mut dims = [0; MAX_DIMS];
    for (d, v) in dims.iter_mut().zip(&s.dims) {
        *d = v.load(Relaxed);
    }
    Some(NodeStats {
        runs: s.runs.load(Relaxed),
        timed: s.timed.load(Relaxed),
        sum_ns: s.sum_ns.load(Relaxed),
        probe_ns: s.probe_ns.load(Relaxed),
        p50_ns: quantile(&hist, 0.5),
        p90_ns: quantile(&hist, 0.9),
        allocs: s.allocs.load(Relaxed),
        bytes: s.bytes.load(Relaxed),
        ffi_calls: s.ffi.load(Relaxed),
        rank: s.rank.load(Relaxed) as u64,
        dims,
    })
}

/// Zeroes every node's counts (registrations and shapes stay).
pub fn nodes_reset() {
    for s in &SLOTS {
        for c in [&s.runs, &s.timed, &s.sum_ns, &s.probe_ns, &s.allocs, &s.bytes, &s.ffi] {
            c.store(0, Relaxed);
        }
        s.hist.iter().for_each(|h| h.store(0, Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_hold_their_values() {
        let mut last = 0;
        for ns in [0u64, 1, 7, 8, 9, 15, 16, 100, 1000, 12_345, 1 << 30] {
            let b = bucket(ns);
            assert!(b >= last, "{ns}");
            last = b;
            let mid = bucket_mid(b);
            assert!((mid - ns as f64).abs() <= ns as f64 / 16.0 + 0.5, "{ns} -> {mid}");
        }
    }

    #[test]
    fn quantiles_of_a_histogram() {
        let mut h = [0u32; BUCKETS];
        h[bucket(100)] = 5;
        h[bucket(1000)] = 4;
        h[bucket(10_000)] = 1;
        assert!((quantile(&h, 0.5) - 100.0).abs() < 8.0);
        assert!((quantile(&h, 0.9) - 1000.0).abs() < 64.0);
        assert_eq!(quantile(&[0; BUCKETS], 0.5), 0.0);
    }
}
