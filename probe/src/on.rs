//! The probe with the feature on.

use crate::clock;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

use super::{Counters, Phase, PhaseCounters, NUM_PHASES};

const FIELDS: usize = 6; // calls, ns, allocs, bytes, ffi_calls, statuses
const CALLS: usize = 0;
const NS: usize = 1;
const ALLOCS: usize = 2;
const BYTES: usize = 3;
const FFI: usize = 4;
const STATUSES: usize = 5;
const RUNS: usize = NUM_PHASES * FIELDS;
const NODES: usize = RUNS + 1;
const SLOTS: usize = NODES + 1;

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: Cell<u64> = Cell::new(0);

thread_local! {
    // `const` thread locals without destructors: safe to touch from the allocator (no
    // lazy initialisation, no allocation, no registration of a destructor).
    static LOCAL: [Cell<u64>; SLOTS] = const { [ZERO; SLOTS] };
    static CURRENT: Cell<u8> = const { Cell::new(Phase::Unattributed as u8) };
    /// Tick count when the current phase's clock started; 0 when none runs.
    static CLOCK: Cell<u64> = const { Cell::new(0) };
}

#[allow(clippy::declare_interior_mutable_const)]
const AZERO: AtomicU64 = AtomicU64::new(0);
static GLOBAL: [AtomicU64; SLOTS] = [AZERO; SLOTS];

#[inline(always)]
fn add(slot: usize, n: u64) {
    // `try_with`: during thread teardown the thread local may be gone; the global mirror
    // still counts.
    let _ = LOCAL.try_with(|l| l[slot].set(l[slot].get() + n));
    GLOBAL[slot].fetch_add(n, Relaxed);
}

#[inline(always)]
fn current() -> usize {
    CURRENT.try_with(Cell::get).unwrap_or(Phase::Unattributed as u8) as usize
}

#[inline(always)]
fn add_phase(field: usize, n: u64) {
    add(current() * FIELDS + field, n);
}

// ---- timing, opt-in ----

const TIMING_UNKNOWN: u8 = 0;
const TIMING_OFF: u8 = 1;
const TIMING_ON: u8 = 2;
static TIMING: AtomicU8 = AtomicU8::new(TIMING_UNKNOWN);
/// Clock ticks per nanosecond (f64 bits), measured when timing is switched on.
static TICKS_PER_NS: AtomicU64 = AtomicU64::new(0);

/// `RIVET_PROFILE_DISPATCH=1`, read once.
#[inline]
fn timing() -> bool {
    match TIMING.load(Relaxed) {
        TIMING_ON => true,
        TIMING_OFF => false,
        _ => {
            let on = std::env::var_os("RIVET_PROFILE_DISPATCH").is_some_and(|v| v == "1");
            if on {
                TICKS_PER_NS.store(clock::calibrate().to_bits(), Relaxed);
            }
            TIMING.store(if on { TIMING_ON } else { TIMING_OFF }, Relaxed);
            on
        }
    }
}

/// Charges the ticks since the last clock mark to the current phase, and restarts it.
/// Counters hold ticks; snapshots convert them to nanoseconds.
#[inline]
fn charge_clock(restart: bool) {
    let now = clock::ticks();
    if let Ok(start) = CLOCK.try_with(Cell::get) {
        if start != 0 {
            add_phase(NS, now.wrapping_sub(start));
        }
    }
    let _ = CLOCK.try_with(|c| c.set(if restart { now } else { 0 }));
}

fn ticks_to_ns(ticks: u64) -> u64 {
    let per_ns = f64::from_bits(TICKS_PER_NS.load(Relaxed));
    if per_ns > 0.0 {
        (ticks as f64 / per_ns) as u64
    } else {
        ticks
    }
}

/// Work inside this guard is charged to its phase; the previous phase is restored on
/// every exit (return, `?`, panic).
#[derive(Debug)]
pub struct PhaseGuard {
    prev: u8,
}

impl PhaseGuard {
    #[inline]
    pub fn enter(phase: Phase) -> PhaseGuard {
        if timing() {
            charge_clock(true);
        }
        let prev = CURRENT.try_with(|c| c.replace(phase as u8)).unwrap_or(Phase::Unattributed as u8);
        add(phase as usize * FIELDS + CALLS, 1);
        PhaseGuard { prev }
    }
}

impl Drop for PhaseGuard {
    #[inline]
    fn drop(&mut self) {
        if timing() {
            // Leaving the outermost phase stops the clock: time outside phases is not charged.
            charge_clock(self.prev != Phase::Unattributed as u8);
        }
        let _ = CURRENT.try_with(|c| c.set(self.prev));
    }
}

// ---- events ----

pub fn record_heap_alloc(bytes: usize) {
    add_phase(ALLOCS, 1);
    add_phase(BYTES, bytes as u64);
}

pub fn record_status() {
    add_phase(STATUSES, 1);
}

pub fn record_run() {
    add(RUNS, 1);
}

pub fn record_nodes(n: usize) {
    add(NODES, n as u64);
}

// ---- FFI call sites ----

/// One `#[ort_ffi]` wrapper: counts its calls and knows its member's name. A site claims
/// a slot of a fixed table on first use (no allocation, no lock held while counting).
pub struct FfiSite {
    member: &'static str,
    hits: AtomicU64,
    registered: AtomicBool,
}

const MAX_SITES: usize = 256;
static SITES: [OnceLock<&'static FfiSite>; MAX_SITES] = [const { OnceLock::new() }; MAX_SITES];
static NEXT_SITE: AtomicUsize = AtomicUsize::new(0);

impl FfiSite {
    pub const fn new(member: &'static str) -> FfiSite {
        FfiSite { member, hits: AtomicU64::new(0), registered: AtomicBool::new(false) }
    }

    #[inline]
    pub fn hit(&'static self) {
        add_phase(FFI, 1);
        self.hits.fetch_add(1, Relaxed);
        if !self.registered.load(Relaxed) && !self.registered.swap(true, Relaxed) {
            let slot = NEXT_SITE.fetch_add(1, Relaxed);
            if let Some(cell) = SITES.get(slot) {
                let _ = cell.set(self);
            }
        }
    }
}

/// (member, calls) for every ORT API member called so far in the process.
pub fn ffi_sites() -> Vec<(&'static str, u64)> {
    let mut out: Vec<(&'static str, u64)> =
        SITES.iter().filter_map(OnceLock::get).map(|s| (s.member, s.hits.load(Relaxed))).collect();
    out.sort();
    out
}

// ---- snapshots ----

fn read(get: impl Fn(usize) -> u64) -> Counters {
    let mut c = Counters::default();
    for (i, p) in c.phases.iter_mut().enumerate() {
        let base = i * FIELDS;
        *p = PhaseCounters {
            calls: get(base + CALLS),
            ns: ticks_to_ns(get(base + NS)),
            allocs: get(base + ALLOCS),
            bytes: get(base + BYTES),
            ffi_calls: get(base + FFI),
            statuses: get(base + STATUSES),
        };
    }
    c.runs = get(RUNS);
    c.nodes_executed = get(NODES);
    c
}

/// This thread's counters: exact, untouched by other threads.
pub fn snapshot() -> Counters {
    LOCAL.with(|l| read(|i| l[i].get()))
}

/// Every thread's counters added up (relaxed).
pub fn global_snapshot() -> Counters {
    read(|i| GLOBAL[i].load(Relaxed))
}

/// Zeroes this thread's counters and the global mirror.
pub fn reset() {
    LOCAL.with(|l| l.iter().for_each(|c| c.set(0)));
    GLOBAL.iter().for_each(|g| g.store(0, Relaxed));
}

// ---- tracing ----

const TRACE_UNKNOWN: u8 = 0;
const TRACE_OFF: u8 = 1;
const TRACE_ON: u8 = 2;
static TRACE: AtomicU8 = AtomicU8::new(TRACE_UNKNOWN);

/// `RIVET_TRACE=1`, cached: after the first call, one relaxed load.
#[inline]
pub fn trace_enabled() -> bool {
    match TRACE.load(Relaxed) {
        TRACE_ON => true,
        TRACE_OFF => false,
        _ => {
            let on = std::env::var_os("RIVET_TRACE").is_some_and(|v| v == "1");
            TRACE.store(if on { TRACE_ON } else { TRACE_OFF }, Relaxed);
            on
        }
    }
}

#[cold]
pub fn trace(args: std::fmt::Arguments<'_>) {
    eprintln!("[rivet] {args}");
}
