//! Reads the probe build's counters over its C exports.

use std::ffi::{c_char, CStr};
use std::path::Path;

use rivet_ep::probe::{Counters, NodeStats};

/// One inner node of a fused node, as the probe counted it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeRow {
    pub fused: String,
    pub label: String,
    pub op_type: String,
    pub stats: NodeStats,
}

pub struct ProbeReader {
    lib: libloading::Library,
}

type SnapshotFn = unsafe extern "C" fn(*mut Counters, i32) -> usize;
type PhaseNameFn = unsafe extern "C" fn(usize) -> *const c_char;
type FfiSiteFn = unsafe extern "C" fn(usize, *mut c_char, usize, *mut u64) -> i32;

impl ProbeReader {
    /// Opens the probe build at `path`. Pass the same file ORT loaded: dlopen then returns
    /// the same handle, so these are the counters ORT's calls into Rivet update.
    pub fn open(path: &Path) -> Result<ProbeReader, String> {
        // SAFETY: loading Rivet's own plugin; its initialisers only set up statics.
        let lib = unsafe { libloading::Library::new(path) }.map_err(|e| format!("opening {}: {e}", path.display()))?;
        // SAFETY: only checks that the symbol exists.
        unsafe { lib.get::<SnapshotFn>(b"rivet_probe_snapshot") }
            .map_err(|_| format!("{} has no probe exports: build it with --features probe", path.display()))?;
        Ok(ProbeReader { lib })
    }

    /// Every thread's counters (ORT picks the Compute thread).
    pub fn global(&self) -> Counters {
        // SAFETY: checked in `open`; the signature is the export's.
        let f = unsafe { self.lib.get::<SnapshotFn>(b"rivet_probe_snapshot") }.expect("checked in open");
        let mut c = Counters::default();
        // SAFETY: `c` is a writable Counters.
        let size = unsafe { f(&mut c, 1) };
        assert_eq!(
            size,
            std::mem::size_of::<Counters>(),
            "the probe library's Counters layout differs from this build's"
        );
        c
    }

    /// Phase names as the library reports them, in counter order.
    pub fn phase_names(&self) -> Vec<String> {
        // SAFETY: the export's signature.
        let Ok(f) = (unsafe { self.lib.get::<PhaseNameFn>(b"rivet_probe_phase_name") }) else {
            return Vec::new();
        };
        let mut names = Vec::new();
        for i in 0.. {
            // SAFETY: returns a static NUL-terminated name, or null past the end.
            let p = unsafe { f(i) };
            if p.is_null() {
                break;
            }
            // SAFETY: as above.
            names.push(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
        }
        names
    }

    /// (ORT API member, calls) for every member called so far, every thread.
    pub fn ffi_sites(&self) -> Vec<(String, u64)> {
        // SAFETY: the export's signature.
        let Ok(f) = (unsafe { self.lib.get::<FfiSiteFn>(b"rivet_probe_ffi_site") }) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for i in 0.. {
            let mut name = [0 as c_char; 128];
            let mut calls = 0u64;
            // SAFETY: `name` has 128 writable bytes, `calls` is a writable u64.
            if unsafe { f(i, name.as_mut_ptr(), name.len(), &mut calls) } == 0 {
                break;
            }
            // SAFETY: the export wrote a NUL-terminated name into `name`.
            out.push((unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned(), calls));
        }
        out
    }

    /// Starts the library's timeline of phases on every thread.
    pub fn timeline_start(&self) -> Result<(), String> {
        // SAFETY: the export's signature.
        let f = unsafe { self.lib.get::<unsafe extern "C" fn()>(b"rivet_probe_timeline_start") }
            .map_err(|_| "this probe library has no timeline: rebuild it".to_string())?;
        // SAFETY: takes nothing, touches only the library's statics.
        unsafe { f() };
        Ok(())
    }

    /// Stops the timeline and writes it to `path` (Chrome trace-event JSON).
    pub fn timeline_write(&self, path: &Path) -> Result<(), String> {
        type WriteFn = unsafe extern "C" fn(*const c_char) -> i32;
        // SAFETY: the export's signature.
        let f = unsafe { self.lib.get::<WriteFn>(b"rivet_probe_timeline_write") }
            .map_err(|_| "this probe library has no timeline: rebuild it".to_string())?;
        let c = std::ffi::CString::new(path.display().to_string()).map_err(|_| "path has a NUL byte".to_string())?;
        // SAFETY: `c` is NUL-terminated and outlives the call.
        match unsafe { f(c.as_ptr()) } {
            0 => Ok(()),
            _ => Err(format!("could not write the timeline to {}", path.display())),
        }
    }

    /// Every node the library registered, with its counts since `nodes_reset`.
    pub fn nodes(&self) -> Vec<NodeRow> {
        type CountFn = unsafe extern "C" fn() -> usize;
        type StatsFn = unsafe extern "C" fn(usize, *mut NodeStats) -> usize;
        type NameFn = unsafe extern "C" fn(usize, u32, *mut c_char, usize) -> i32;
        // SAFETY: the exports' signatures.
        let (Ok(count), Ok(stats), Ok(name)) = (unsafe {
            (
                self.lib.get::<CountFn>(b"rivet_probe_node_count"),
                self.lib.get::<StatsFn>(b"rivet_probe_node_stats"),
                self.lib.get::<NameFn>(b"rivet_probe_node_name"),
            )
        }) else {
            return Vec::new();
        };
        // SAFETY: takes nothing.
        let n = unsafe { count() };
        let text = |i: usize, which: u32| {
            let mut buf = [0 as c_char; 512];
            // SAFETY: `buf` has 512 writable bytes.
            if unsafe { name(i, which, buf.as_mut_ptr(), buf.len()) } == 0 {
                return String::new();
            }
            // SAFETY: the export wrote a NUL-terminated string into `buf`.
            unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned()
        };
        let mut rows = Vec::with_capacity(n);
        for i in 0..n {
            let mut s = NodeStats::default();
            // SAFETY: `s` is a writable NodeStats.
            let size = unsafe { stats(i, &mut s) };
            if size == 0 {
                break;
            }
            assert_eq!(size, std::mem::size_of::<NodeStats>(), "the probe library's NodeStats layout differs");
            rows.push(NodeRow { fused: text(i, 0), label: text(i, 1), op_type: text(i, 2), stats: s });
        }
        rows
    }

    /// Zeroes the nodes' counts (after a warm-up).
    pub fn nodes_reset(&self) {
        // SAFETY: the export's signature; it touches only the library's statics.
        if let Ok(f) = unsafe { self.lib.get::<unsafe extern "C" fn()>(b"rivet_probe_nodes_reset") } {
            // SAFETY: as above.
            unsafe { f() };
        }
    }

    /// The probe's calibrated own cost in ns: (an empty node scope, one phase guard in it).
    pub fn probe_costs_ns(&self) -> (f64, f64) {
        type CostFn = unsafe extern "C" fn(u32) -> f64;
        // SAFETY: the export's signature.
        let Ok(f) = (unsafe { self.lib.get::<CostFn>(b"rivet_probe_cost_ns") }) else { return (0.0, 0.0) };
        // SAFETY: reads two statics.
        unsafe { (f(0), f(1)) }
    }
}
