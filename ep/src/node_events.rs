//! Rivet's nodes in ORT's own profile. ORT (1.25+) shows a fused subgraph as one node
//! event; with `SessionOptions.enable_profiling` Rivet adds one event per inner node per
//! Run, named after the node (`conv1 (+relu1)` when a fused epilogue folded `relu1` in),
//! tagged with its op type and the fused node it ran in.
//!
//! The ABI layer's profiler (`abi::profiler`) switches recording on and off and hands
//! the events to ORT; Compute asks [`NodeEvents::active`] once per Run (one relaxed
//! load) and only then reads clocks and records.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::exec::NodeTime;
use crate::plan::Plan;

/// A fused node's inner nodes, as events name them.
#[derive(Debug)]
pub struct FusedNodes {
    /// The fused node ORT created (its own event is `<name>_kernel_time`).
    pub name: String,
    /// Per `Plan::units`: (label, op type).
    pub units: Vec<(String, String)>,
}

impl FusedNodes {
    pub fn of(plan: &Plan) -> Arc<FusedNodes> {
        let units = plan.units.iter().map(|u| (u.label.clone(), u.op_type.clone())).collect();
        Arc::new(FusedNodes { name: plan.name.clone(), units })
    }
}

#[derive(Debug)]
struct Recorded {
    fused: Arc<FusedNodes>,
    unit: usize,
    start: Instant,
    dur: Duration,
    thread: u32,
}

#[derive(Debug, Default)]
struct Recording {
    /// ORT's profiling start, on this process's monotonic clock.
    origin: Option<Instant>,
    events: Vec<Recorded>,
}

/// The most events one recording keeps (ORT's own profiler stops at a million).
pub const MAX_EVENTS: usize = 1_000_000;

/// One session's recording, shared by its EP, its fused nodes and its profiler.
#[derive(Debug, Default)]
pub struct NodeEvents {
    active: AtomicBool,
    recording: Mutex<Recording>,
}

/// An event as ORT's profile gets it: times in microseconds from ORT's profiling start.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileEvent {
    pub name: String,
    pub op_type: String,
    pub fused_node: String,
    pub ts_us: i64,
    pub dur_us: i64,
    /// The duration at the clock's resolution (a small node takes under a microsecond).
    pub dur_ns: u64,
    /// The thread that ran the node: the OS thread id where there is one (ORT's own
    /// events use it, so ours share their lane), else a small number per thread.
    pub thread: u32,
}

/// This thread's id, read once per thread (only while profiling).
fn thread_number() -> u32 {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    fn os_tid() -> Option<u32> {
        // "/proc/thread-self" links to "<pid>/task/<tid>".
        let link = std::fs::read_link("/proc/thread-self").ok()?;
        link.file_name()?.to_str()?.parse().ok()
    }
    thread_local! {
        static ID: u32 = os_tid().unwrap_or_else(|| NEXT.fetch_add(1, Relaxed));
    }
    ID.try_with(|i| *i).unwrap_or(0)
}

impl NodeEvents {
    /// Whether ORT's profiler is recording: Compute times its nodes only then.
    #[inline]
    pub fn active(&self) -> bool {
        self.active.load(Relaxed)
    }

    /// ORT started profiling `offset_ns` ago (its `StartProfiling`).
    pub fn start(&self, offset_ns: i64) {
        let now = Instant::now();
        let origin = now.checked_sub(Duration::from_nanos(offset_ns.max(0) as u64)).unwrap_or(now);
        let mut r = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        r.origin = Some(origin);
        r.events.clear();
        self.active.store(true, Relaxed);
    }

    /// Records one Run's node times of `fused` (up to [`MAX_EVENTS`] per recording, as
    /// ORT bounds its own).
    pub fn record(&self, fused: &Arc<FusedNodes>, times: &[NodeTime]) {
        let thread = thread_number();
        let mut r = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        if r.origin.is_none() || r.events.len() + times.len() > MAX_EVENTS {
            return;
        }
        r.events.extend(times.iter().map(|t| Recorded {
            fused: Arc::clone(fused),
            unit: t.unit,
            start: t.start,
            dur: t.end.saturating_duration_since(t.start),
            thread,
        }));
    }

    /// Stops recording and returns the events since `start`, in the order recorded.
    pub fn finish(&self) -> Vec<ProfileEvent> {
        self.active.store(false, Relaxed);
        let mut r = self.recording.lock().unwrap_or_else(|p| p.into_inner());
        let Some(origin) = r.origin.take() else { return Vec::new() };
        std::mem::take(&mut r.events)
            .into_iter()
            .map(|e| {
                let (label, op) = e.fused.units.get(e.unit).map_or(("?", "?"), |(l, o)| (l.as_str(), o.as_str()));
                ProfileEvent {
                    name: label.to_string(),
                    op_type: op.to_string(),
                    fused_node: e.fused.name.clone(),
                    ts_us: e.start.saturating_duration_since(origin).as_micros() as i64,
                    dur_us: e.dur.as_micros() as i64,
                    dur_ns: e.dur.as_nanos() as u64,
                    thread: e.thread,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fused() -> Arc<FusedNodes> {
        Arc::new(FusedNodes {
            name: "Rivet_1".into(),
            units: vec![("conv1 (+relu1)".into(), "Conv".into()), ("pool".into(), "MaxPool".into())],
        })
    }

    #[test]
    fn events_are_recorded_only_between_start_and_finish() {
        let ev = NodeEvents::default();
        let f = fused();
        let times_from = |t0: Instant| {
            [
                NodeTime { unit: 0, start: t0, end: t0 + Duration::from_micros(5) },
                NodeTime { unit: 1, start: t0 + Duration::from_micros(5), end: t0 + Duration::from_micros(7) },
            ]
        };
        let times = times_from(Instant::now());
        assert!(!ev.active());
        ev.record(&f, &times);
        assert!(ev.finish().is_empty(), "nothing before start");
        ev.start(1_000_000);
        assert!(ev.active());
        let times = times_from(Instant::now());
        ev.record(&f, &times);
        ev.record(&f, &times);
        let got = ev.finish();
        assert!(!ev.active());
        assert_eq!(got.len(), 4);
        assert_eq!(got[0].name, "conv1 (+relu1)");
        assert_eq!(got[0].op_type, "Conv");
        assert_eq!(got[0].fused_node, "Rivet_1");
        assert_eq!((got[0].dur_us, got[0].dur_ns), (5, 5000));
        assert_eq!(got[1].name, "pool");
        assert!(got[0].ts_us >= 1_000, "1 ms after ORT's start: {}", got[0].ts_us);
        assert_eq!(got[1].ts_us - got[0].ts_us, 5);
        assert!(ev.finish().is_empty(), "finish drains");
    }
}
