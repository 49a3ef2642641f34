//! The probe with the feature on.
//!
//! Every counter lives in a per-thread shard: a fixed array of atomics that only its
//! thread writes (a relaxed load and store, no read-modify-write, no cache line shared
//! with another writer) and that readers sum. A thread claims a shard on its first event
//! and returns it on exit, folding its counts into `RETIRED`. Nothing here allocates or
//! locks, so the counting allocator can call it.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

use crate::clock;
use crate::{Counters, Phase, PhaseCounters, MAX_USER_PHASES, NUM_PHASES};

const FIELDS: usize = 6; // calls, ns, allocs, bytes, ffi_calls, statuses
const CALLS: usize = 0;
const NS: usize = 1;
const ALLOCS: usize = 2;
const BYTES: usize = 3;
const FFI: usize = 4;
const STATUSES: usize = 5;
const ALL_PHASES: usize = NUM_PHASES + MAX_USER_PHASES;
const RUNS: usize = ALL_PHASES * FIELDS;
const NODES: usize = RUNS + 1;
/// One slot per `FfiSite`, after the phase counters.
const SITE_BASE: usize = NODES + 1;
const MAX_SITES: usize = 128;
const SLOTS: usize = SITE_BASE + MAX_SITES;
const UNATTRIBUTED: u8 = Phase::Unattributed as u8;

/// One thread's counters. Aligned so two shards never share a cache line.
#[repr(align(128))]
struct Shard {
    owned: AtomicBool,
    slots: [AtomicU64; SLOTS],
}

impl Shard {
    const fn new() -> Shard {
        Shard { owned: AtomicBool::new(false), slots: [const { AtomicU64::new(0) }; SLOTS] }
    }

    /// For the owning thread only: no other thread writes this slot.
    #[inline(always)]
    fn bump(&self, slot: usize, n: u64) {
        let c = &self.slots[slot];
        c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
    }
}

const MAX_SHARDS: usize = 128;
static SHARDS: [Shard; MAX_SHARDS] = [const { Shard::new() }; MAX_SHARDS];
/// For threads that found no free shard, and for work during a thread's teardown after
/// its shard was returned: written with atomic adds.
static SHARED: Shard = Shard::new();
/// The counts of threads that exited.
static RETIRED: Shard = Shard::new();

const UNCLAIMED: u16 = u16::MAX;
const USE_SHARED: u16 = u16::MAX - 1;

/// Returns the thread's shard when the thread exits.
struct Release;

impl Drop for Release {
    fn drop(&mut self) {
        let Ok(i) = SHARD.try_with(|s| s.replace(USE_SHARED)) else { return };
        if let Some(shard) = SHARDS.get(i as usize) {
            for (slot, retired) in shard.slots.iter().zip(&RETIRED.slots) {
                retired.fetch_add(slot.swap(0, Relaxed), Relaxed);
            }
            shard.owned.store(false, std::sync::atomic::Ordering::Release);
        }
    }
}

thread_local! {
    // `const` thread locals without destructors: safe to touch from the allocator (no
    // lazy initialisation, no allocation).
    static SHARD: Cell<u16> = const { Cell::new(UNCLAIMED) };
    static CURRENT: Cell<u8> = const { Cell::new(UNATTRIBUTED) };
    /// Tick count when the current phase's clock started; 0 when none runs.
    static CLOCK: Cell<u64> = const { Cell::new(0) };
    /// Touched once, after the shard is claimed, to register the destructor that returns it.
    static RELEASE: Release = const { Release };
    /// Phase guards entered with timing on (see `guards_entered`).
    static GUARDS: Cell<u64> = const { Cell::new(0) };
}

#[inline(always)]
fn add(slot: usize, n: u64) {
    match SHARD.try_with(Cell::get) {
        Ok(i) if (i as usize) < MAX_SHARDS => SHARDS[i as usize].bump(slot, n),
        Ok(UNCLAIMED) => claim_and_add(slot, n),
        _ => {
            SHARED.slots[slot].fetch_add(n, Relaxed);
        }
    }
}

#[cold]
#[inline(never)]
fn claim_and_add(slot: usize, n: u64) {
    let free = SHARDS
        .iter()
        .position(|s| s.owned.compare_exchange(false, true, std::sync::atomic::Ordering::Acquire, Relaxed).is_ok());
    let index = free.map_or(USE_SHARED, |i| i as u16);
    let _ = SHARD.try_with(|s| s.set(index));
    if free.is_some() {
        // Registering the destructor may allocate; the shard is already set, so a
        // counted allocation from in there lands in it and does not come back here.
        let _ = RELEASE.try_with(|_| ());
    }
    add(slot, n);
}

#[inline(always)]
fn current() -> usize {
    CURRENT.try_with(Cell::get).unwrap_or(UNATTRIBUTED) as usize
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

/// `RIVET_PROFILE_DISPATCH=1`, read once. Switching timing on calibrates the clock and
/// the probe's own cost in a timed node (subtracted from node times).
#[inline]
pub(crate) fn timing() -> bool {
    match TIMING.load(Relaxed) {
        TIMING_ON => true,
        TIMING_OFF => false,
        _ => {
            let on = std::env::var_os("RIVET_PROFILE_DISPATCH").is_some_and(|v| v == "1");
            if on && TICKS_PER_NS.load(Relaxed) == 0 {
                TICKS_PER_NS.store(clock::calibrate().to_bits(), Relaxed);
            }
            TIMING.store(if on { TIMING_ON } else { TIMING_OFF }, Relaxed);
            if on {
                calibrate_probe_cost();
            }
            on
        }
    }
}

/// Runs `nodes::calibrate` with this thread's counters, phase and clock saved and put
/// back, so the calibration's own guards leave no trace in any count.
#[cold]
fn calibrate_probe_cost() {
    add(RUNS, 0); // claims this thread's shard
    let Ok(i) = SHARD.try_with(Cell::get) else { return };
    let Some(shard) = SHARDS.get(i as usize) else { return };
    let saved: [u64; SLOTS] = std::array::from_fn(|k| shard.slots[k].load(Relaxed));
    let phase = CURRENT.try_with(Cell::get).unwrap_or(UNATTRIBUTED);
    let clock_mark = CLOCK.try_with(Cell::get).unwrap_or(0);
    let guards = guards_entered();
    crate::nodes::calibrate();
    for (slot, v) in shard.slots.iter().zip(saved) {
        slot.store(v, Relaxed);
    }
    let _ = CURRENT.try_with(|c| c.set(phase));
    let _ = CLOCK.try_with(|c| c.set(clock_mark));
    let _ = GUARDS.try_with(|c| c.set(guards));
}

/// Phase guards this thread entered with timing on (the probe cost inside a node).
#[inline]
pub(crate) fn guards_entered() -> u64 {
    GUARDS.try_with(Cell::get).unwrap_or(0)
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

pub(crate) fn ticks_to_ns(ticks: u64) -> u64 {
    let per_ns = f64::from_bits(TICKS_PER_NS.load(Relaxed));
    if per_ns > 0.0 {
        (ticks as f64 / per_ns) as u64
    } else {
        ticks
    }
}

// ---- phases ----

/// Work inside this guard is charged to its phase; the previous phase is restored on
/// every exit (return, `?`, panic). A guard belongs to its thread (it is `!Send`), so
/// a phase cannot follow a task onto another thread.
#[derive(Debug)]
#[must_use = "the phase ends when the guard is dropped: bind it with `let _g = ...`"]
pub struct PhaseGuard {
    prev: u8,
    phase: u8,
    /// Tick count at entry while a timeline records, else 0.
    start: u64,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl PhaseGuard {
    #[inline]
    pub fn enter(phase: Phase) -> PhaseGuard {
        PhaseGuard::enter_index(phase as u8)
    }

    /// Enters a phase another crate declared.
    #[inline]
    pub fn enter_user(phase: &'static UserPhase) -> PhaseGuard {
        PhaseGuard::enter_index(phase.index())
    }

    #[inline]
    fn enter_index(phase: u8) -> PhaseGuard {
        if timing() {
            charge_clock(true);
            let _ = GUARDS.try_with(|g| g.set(g.get() + 1));
        }
        let prev = CURRENT.try_with(|c| c.replace(phase)).unwrap_or(UNATTRIBUTED);
        add(phase as usize * FIELDS + CALLS, 1);
        let start = if TIMELINE_ON.load(Relaxed) { clock::ticks() } else { 0 };
        PhaseGuard { prev, phase, start, _not_send: std::marker::PhantomData }
    }
}

impl Drop for PhaseGuard {
    #[inline]
    fn drop(&mut self) {
        if timing() {
            // Leaving the outermost phase stops the clock: time outside phases is not charged.
            charge_clock(self.prev != UNATTRIBUTED);
        }
        let _ = CURRENT.try_with(|c| c.set(self.prev));
        if self.start != 0 {
            record_event(self.phase, self.start, clock::ticks());
        }
    }
}

// ---- timeline ----

/// Phase events kept for one timeline; later ones are counted as dropped.
const MAX_EVENTS: usize = 1 << 16;

/// One finished phase or node: its ticks and `(lane + 1) << 24 | node << 8 | phase`
/// (phase `NODE_EVENT` for a node; 0 while being written).
struct Event {
    start: AtomicU64,
    end: AtomicU64,
    lane_phase: AtomicU64,
}

static TIMELINE_ON: AtomicBool = AtomicBool::new(false);
static EVENTS: [Event; MAX_EVENTS] =
    [const { Event { start: AtomicU64::new(0), end: AtomicU64::new(0), lane_phase: AtomicU64::new(0) } }; MAX_EVENTS];
static NEXT_EVENT: AtomicUsize = AtomicUsize::new(0);
static NEXT_LANE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

thread_local! {
    /// This thread's timeline lane + 1 (0: none yet).
    static LANE: Cell<u32> = const { Cell::new(0) };
}

const NODE_EVENT: u8 = u8::MAX;
/// A pool worker's share of a node: one task it ran.
const TASK_EVENT: u8 = u8::MAX - 1;

/// Whether a timeline is recording.
#[inline]
pub(crate) fn timeline_on() -> bool {
    TIMELINE_ON.load(Relaxed)
}

/// Records a node on the timeline (a no-op while none records).
#[inline]
pub(crate) fn record_node_event(node: u16, start: u64, end: u64, task: bool) {
    if node != u16::MAX && TIMELINE_ON.load(Relaxed) {
        let kind = if task { TASK_EVENT } else { NODE_EVENT };
        record_lane_event((node as u64) << 8 | kind as u64, start, end);
    }
}

#[cold]
fn record_event(phase: u8, start: u64, end: u64) {
    record_lane_event(phase as u64, start, end);
}

#[cold]
fn record_lane_event(what: u64, start: u64, end: u64) {
    // One lane per thread, numbered in the order threads first record.
    let lane = LANE
        .try_with(|l| {
            if l.get() == 0 {
                l.set(NEXT_LANE.fetch_add(1, Relaxed) + 1);
            }
            l.get() - 1
        })
        .unwrap_or(u32::MAX) as u64;
    let i = NEXT_EVENT.fetch_add(1, Relaxed);
    if let Some(e) = EVENTS.get(i) {
        e.start.store(start, Relaxed);
        e.end.store(end, Relaxed);
        e.lane_phase.store((lane + 1) << 24 | what, std::sync::atomic::Ordering::Release);
    }
}

/// Starts recording every phase entered on any thread, with its start and end, until
/// [`timeline_json`]. Costs one relaxed load per phase while off.
pub fn timeline_start() {
    let _ = timing(); // calibrates first, so the calibration's guards stay off the timeline
    if TICKS_PER_NS.load(Relaxed) == 0 {
        TICKS_PER_NS.store(clock::calibrate().to_bits(), Relaxed);
    }
    let n = NEXT_EVENT.swap(0, Relaxed).min(MAX_EVENTS);
    EVENTS[..n].iter().for_each(|e| e.lane_phase.store(0, Relaxed));
    TIMELINE_ON.store(true, Relaxed);
}

/// Stops the timeline and returns it as Chrome trace-event JSON (Perfetto and
/// chrome://tracing open it): one complete (`"ph":"X"`) event per phase, one lane
/// (`tid`) per thread, named by a `thread_name` metadata event; times in microseconds
/// from the first event.
pub fn timeline_json() -> String {
    use std::fmt::Write;
    TIMELINE_ON.store(false, Relaxed);
    let recorded = NEXT_EVENT.load(Relaxed);
    let events: Vec<(u64, u64, u64, u64)> = EVENTS[..recorded.min(MAX_EVENTS)]
        .iter()
        .filter_map(|e| {
            let lp = e.lane_phase.load(std::sync::atomic::Ordering::Acquire);
            (lp != 0).then(|| ((lp >> 24) - 1, e.start.load(Relaxed), e.end.load(Relaxed), lp & 0xff_ffff))
        })
        .collect();
    let t0 = events.iter().map(|e| e.1).min().unwrap_or(0);
    let per_ns = f64::from_bits(TICKS_PER_NS.load(Relaxed)).max(1e-9);
    let us = |ticks: u64| ticks as f64 / per_ns / 1000.0;
    let user = user_phase_names();
    let name = |p: u8| match Phase::ALL.get(p as usize) {
        Some(ph) => ph.name(),
        None => user.get(p as usize - NUM_PHASES).copied().unwrap_or("user"),
    };
    let mut lanes: Vec<u64> = events.iter().map(|e| e.0).collect();
    lanes.sort_unstable();
    lanes.dedup();
    let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !first {
            out.push(',');
        }
        first = false;
    };
    for lane in &lanes {
        sep(&mut out);
        let _ = write!(
            out,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{lane},\"args\":{{\"name\":\"rivet thread {lane}\"}}}}"
        );
    }
    // JSON string escapes: backslash, quote and every control character.
    let json = |s: &str| {
        let mut o = String::with_capacity(s.len());
        for c in s.chars() {
            match c {
                '\\' => o.push_str("\\\\"),
                '"' => o.push_str("\\\""),
                c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
                c => o.push(c),
            }
        }
        o
    };
    for (lane, start, end, what) in &events {
        sep(&mut out);
        let (ts, dur) = (us(start - t0), us(end.saturating_sub(*start)));
        if *what as u8 == NODE_EVENT || *what as u8 == TASK_EVENT {
            let node = (*what >> 8) as usize;
            let (fused, label, op) = crate::nodes::node_names(node).unwrap_or(("?", "node", "?"));
            let cat = if *what as u8 == NODE_EVENT { "rivet.node" } else { "rivet.task" };
            let _ = write!(
                out,
                "{{\"name\":\"{}\",\"cat\":\"{cat}\",\"ph\":\"X\",\"pid\":1,\"tid\":{lane},\"ts\":{ts:.3},\"dur\":{dur:.3},\"args\":{{\"op_type\":\"{}\",\"fused_node\":\"{}\"}}}}",
                json(label),
                json(op),
                json(fused)
            );
        } else {
            let _ = write!(
                out,
                "{{\"name\":\"{}\",\"cat\":\"rivet\",\"ph\":\"X\",\"pid\":1,\"tid\":{lane},\"ts\":{ts:.3},\"dur\":{dur:.3}}}",
                json(name(*what as u8))
            );
        }
    }
    let _ = write!(out, "],\"otherData\":{{\"dropped_events\":{}}}}}", recorded.saturating_sub(MAX_EVENTS));
    out
}

/// A phase declared outside Rivet: `static PARSE: UserPhase = UserPhase::new("parse");`.
/// It takes the next free user slot the first time it is entered.
pub struct UserPhase {
    name: &'static str,
    /// 0: not registered yet; `REGISTERING` while a thread registers it; else the
    /// phase index + 1.
    index: AtomicU8,
}

const REGISTERING: u8 = u8::MAX;
static USER_NAMES: [OnceLock<&'static str>; MAX_USER_PHASES] = [const { OnceLock::new() }; MAX_USER_PHASES];
static NEXT_USER: AtomicUsize = AtomicUsize::new(0);

impl UserPhase {
    pub const fn new(name: &'static str) -> UserPhase {
        UserPhase { name, index: AtomicU8::new(0) }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    #[inline]
    fn index(&'static self) -> u8 {
        match self.index.load(Relaxed) {
            0 | REGISTERING => self.register(),
            i => i - 1,
        }
    }

    #[cold]
    fn register(&'static self) -> u8 {
        if self.index.compare_exchange(0, REGISTERING, Relaxed, Relaxed).is_ok() {
            let k = NEXT_USER.fetch_add(1, Relaxed);
            let index = match USER_NAMES.get(k) {
                Some(cell) => {
                    let _ = cell.set(self.name);
                    (NUM_PHASES + k) as u8
                }
                None => UNATTRIBUTED,
            };
            self.index.store(index + 1, Relaxed);
            return index;
        }
        loop {
            match self.index.load(Relaxed) {
                REGISTERING => std::hint::spin_loop(),
                i => return i - 1,
            }
        }
    }
}

/// Names of the user phases entered so far, in `Counters::user_phases` order.
pub fn user_phase_names() -> Vec<&'static str> {
    USER_NAMES.iter().map_while(|c| c.get().copied()).collect()
}

// ---- events ----

pub fn record_heap_alloc(bytes: usize) {
    add_phase(ALLOCS, 1);
    add_phase(BYTES, bytes as u64);
    crate::nodes::charge_alloc(bytes);
}

static ALLOCATIONS_COUNTED: AtomicBool = AtomicBool::new(false);

/// Called by `CountingAllocator` on every allocation: it is the global allocator.
#[inline(always)]
pub(crate) fn note_counting_allocator() {
    if !ALLOCATIONS_COUNTED.load(Relaxed) {
        ALLOCATIONS_COUNTED.store(true, Relaxed);
    }
}

/// True once `CountingAllocator` has served an allocation, i.e. it is the global
/// allocator and the allocation columns mean something.
pub fn allocations_counted() -> bool {
    ALLOCATIONS_COUNTED.load(Relaxed)
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

/// One ORT API call site (the `#[ort_ffi]` expansion puts a static one beside each
/// call): counts the calls made there and knows the member's name. A site takes a slot
/// of a fixed table the first time it is hit (no allocation, no lock).
pub struct FfiSite {
    member: &'static str,
    /// 0: not registered yet; `SITE_REGISTERING` while one thread registers it; else
    /// the slot + 1 (`SITE_FULL` when the table was full).
    slot: AtomicU16,
}

const SITE_REGISTERING: u16 = u16::MAX;
const SITE_FULL: u16 = u16::MAX - 1;
static SITES: [OnceLock<&'static str>; MAX_SITES] = [const { OnceLock::new() }; MAX_SITES];
static NEXT_SITE: AtomicUsize = AtomicUsize::new(0);

impl FfiSite {
    pub const fn new(member: &'static str) -> FfiSite {
        FfiSite { member, slot: AtomicU16::new(0) }
    }

    #[inline]
    pub fn hit(&'static self) {
        add_phase(FFI, 1);
        crate::nodes::charge_ffi();
        let slot = match self.slot.load(Relaxed) {
            0 | SITE_REGISTERING => self.register(),
            s => s - 1,
        };
        if (slot as usize) < MAX_SITES {
            add(SITE_BASE + slot as usize, 1);
        }
    }

    #[cold]
    fn register(&'static self) -> u16 {
        if self.slot.compare_exchange(0, SITE_REGISTERING, Relaxed, Relaxed).is_ok() {
            let k = NEXT_SITE.fetch_add(1, Relaxed);
            let slot = match SITES.get(k) {
                Some(cell) => {
                    let _ = cell.set(self.member);
                    k as u16
                }
                None => SITE_FULL - 1,
            };
            self.slot.store(slot + 1, Relaxed);
            return slot;
        }
        loop {
            match self.slot.load(Relaxed) {
                SITE_REGISTERING => std::hint::spin_loop(),
                s => return s - 1,
            }
        }
    }
}

fn sites(get: impl Fn(usize) -> u64) -> Vec<(&'static str, u64)> {
    let mut out: Vec<(&'static str, u64)> = Vec::new();
    for (k, name) in SITES.iter().enumerate() {
        let Some(&name) = name.get() else { continue };
        let n = get(SITE_BASE + k);
        match out.iter_mut().find(|(m, _)| *m == name) {
            Some((_, c)) => *c += n,
            None => out.push((name, n)),
        }
    }
    out.sort();
    out
}

/// (member, calls) for every ORT API member called so far in the process, every thread.
pub fn ffi_sites() -> Vec<(&'static str, u64)> {
    sites(global_slot)
}

/// (member, calls) made by this thread.
pub fn thread_ffi_sites() -> Vec<(&'static str, u64)> {
    sites(local_slot)
}

// ---- snapshots ----

fn local_slot(i: usize) -> u64 {
    match SHARD.try_with(Cell::get) {
        Ok(s) if (s as usize) < MAX_SHARDS => SHARDS[s as usize].slots[i].load(Relaxed),
        Ok(USE_SHARED) => SHARED.slots[i].load(Relaxed),
        _ => 0,
    }
}

fn global_slot(i: usize) -> u64 {
    SHARDS.iter().chain([&SHARED, &RETIRED]).map(|s| s.slots[i].load(Relaxed)).fold(0, u64::wrapping_add)
}

fn read(get: impl Fn(usize) -> u64) -> Counters {
    let mut c = Counters::default();
    for (i, p) in c.phases.iter_mut().chain(c.user_phases.iter_mut()).enumerate() {
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
    c.allocations_counted = allocations_counted() as u64;
    c
}

/// This thread's counters: exact, untouched by other threads (unless more than 128
/// threads are counting at once: the rest share one shard).
pub fn snapshot() -> Counters {
    read(local_slot)
}

/// Every thread's counters added up (relaxed), exited threads included.
pub fn global_snapshot() -> Counters {
    read(global_slot)
}

/// Zeroes every counter of every thread. Meant for quiet moments: an event another
/// thread records at the same instant may survive it.
pub fn reset() {
    for s in SHARDS.iter().chain([&SHARED, &RETIRED]) {
        s.slots.iter().for_each(|c| c.store(0, Relaxed));
    }
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
