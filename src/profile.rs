//! `rivet profile`: the probe's per-phase table for a model on Rivet.

use std::fmt::Write;

use rivet_ep::probe::{Counters, PhaseCounters};

/// Formats counters accumulated over `runs` Runs as a per-Run and per-node table; the
/// last row is the column totals.
pub fn table(names: &[String], c: &Counters, runs: u64) -> String {
    let runs = runs.max(1) as f64;
    let nodes = (c.nodes_executed as f64 / runs).max(1.0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<16} {:>9} {:>10} {:>8} {:>9} {:>8} {:>8} | {:>9} {:>8} {:>8}",
        "phase (per Run)", "calls", "ns", "allocs", "bytes", "ffi", "statuses", "ns/node", "ffi/node", "allocs/node"
    );
    let row = |out: &mut String, name: &str, p: &PhaseCounters| {
        let per = |v: u64| v as f64 / runs;
        let _ = writeln!(
            out,
            "{:<16} {:>9.2} {:>10.0} {:>8.2} {:>9.1} {:>8.2} {:>8.2} | {:>9.1} {:>8.2} {:>8.2}",
            name,
            per(p.calls),
            per(p.ns),
            per(p.allocs),
            per(p.bytes),
            per(p.ffi_calls),
            per(p.statuses),
            per(p.ns) / nodes,
            per(p.ffi_calls) / nodes,
            per(p.allocs) / nodes,
        );
    };
    for (name, p) in names.iter().zip(&c.phases) {
        row(&mut out, name, p);
    }
    row(&mut out, "total", &c.total());
    let _ = writeln!(
        out,
        "{} Runs of the fused nodes per session Run, {nodes:.0} nodes executed per Run",
        c.runs as f64 / runs
    );
    out
}
