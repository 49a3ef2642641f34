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
    if !c.counts_allocations() {
        let _ = writeln!(
            out,
            "allocs and bytes: not counted (this build has no counting allocator: build with --features probe-allocator)"
        );
    }
    let _ = writeln!(
        out,
        "{} Runs of the fused nodes per session Run, {nodes:.0} nodes executed per Run",
        c.runs as f64 / runs
    );
    out
}

/// ORT calls per Run by member, most called first: `(member, calls)` accumulated over
/// `runs` Runs, as differences of two `ProbeReader::ffi_sites` readings.
pub fn member_table(after: &[(String, u64)], before: &[(String, u64)], runs: u64) -> String {
    let runs = runs.max(1) as f64;
    let mut rows: Vec<(&str, u64)> = after
        .iter()
        .map(|(m, n)| (m.as_str(), n - before.iter().find(|(b, _)| b == m).map_or(0, |(_, k)| *k)))
        .filter(|(_, n)| *n > 0)
        .collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let mut out = String::new();
    let _ = writeln!(out, "{:<44} {:>10}", "ORT API member", "calls/Run");
    for (m, n) in rows {
        let _ = writeln!(out, "{m:<44} {:>10.2}", n as f64 / runs);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_build_without_the_counting_allocator_says_so_instead_of_showing_zero() {
        let names: Vec<String> = rivet_ep::probe::Phase::ALL.iter().map(|p| p.name().to_string()).collect();
        let off = Counters::default();
        assert!(table(&names, &off, 1).contains("allocs and bytes: not counted"));
        let on = Counters { allocations_counted: 1, ..Counters::default() };
        assert!(!table(&names, &on, 1).contains("not counted"));
    }

    #[test]
    fn members_are_listed_per_run_most_called_first() {
        let before = vec![("GetTensorData".to_string(), 10), ("KernelContext_GetInput".to_string(), 10)];
        let after = vec![
            ("GetTensorData".to_string(), 14),
            ("KernelContext_GetInput".to_string(), 18),
            ("ReleaseStatus".to_string(), 0),
        ];
        let t = member_table(&after, &before, 4);
        let rows: Vec<&str> = t.lines().skip(1).collect();
        assert_eq!(rows.len(), 2, "{t}");
        assert!(rows[0].starts_with("KernelContext_GetInput") && rows[0].ends_with("2.00"), "{t}");
        assert!(rows[1].starts_with("GetTensorData") && rows[1].ends_with("1.00"), "{t}");
    }
}
