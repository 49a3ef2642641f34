//! `rivet profile`: the probe's per-phase table for a model on Rivet.

use std::fmt::Write;

use rivet_ep::probe::{Counters, PhaseCounters};

use crate::probe_reader::NodeRow;

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

/// The `top` nodes by total time at their median Run over `runs` Runs (p50 times the
/// timed Runs; its share of all of theirs; by ORT calls and allocations when
/// untimed), one row each: time per Run (p50, p90; the probe's own cost, `costs` = (an
/// empty node scope, one phase guard inside it) in ns, already subtracted and shown per
/// Run), output shape, allocations, bytes and ORT calls per Run. Fused nodes are numbered
/// (`#1`) and listed below the table.
pub fn node_table(rows: &[NodeRow], runs: u64, top: usize, costs: (f64, f64)) -> String {
    let per = |v: u64| v as f64 / runs.max(1) as f64;
    let mut ran: Vec<&NodeRow> = rows.iter().filter(|r| r.stats.runs > 0).collect();
    let timed = ran.iter().any(|r| r.stats.timed > 0);
    // A node's total time at its median Run: one Run held up by another process (a
    // preempted thread can add milliseconds to a microsecond node) moves its sum, not
    // its median, and had put a small pool above a convolution (a flaky probe_nodes).
    let typical = |r: &NodeRow| r.stats.p50_ns * r.stats.timed as f64;
    ran.sort_by(|a, b| {
        let order = if timed {
            typical(b).total_cmp(&typical(a))
        } else {
            (b.stats.ffi_calls + b.stats.allocs).cmp(&(a.stats.ffi_calls + a.stats.allocs))
        };
        order.then_with(|| a.label.cmp(&b.label))
    });
    let total_ns: f64 = ran.iter().map(|r| typical(r)).sum();
    let mut fused: Vec<&str> = Vec::new();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "top {} of {} nodes by {} (per Run; times less the probe's own cost: {:.0} ns a node, {:.0} ns a phase guard inside)",
        top.min(ran.len()),
        ran.len(),
        if timed { "total time at the median Run (p50 x Runs)" } else { "ORT calls and allocations" },
        costs.0,
        costs.1
    );
    let _ = writeln!(
        out,
        "{:<36} {:<14} {:<18} {:>6} {:>10} {:>10} {:>6} {:>9} {:>8} {:>10} {:>7}",
        "node", "op", "output shape", "runs", "p50 us", "p90 us", "share", "probe ns", "allocs", "bytes", "ffi"
    );
    for r in ran.iter().take(top) {
        let k = match fused.iter().position(|f| *f == r.fused) {
            Some(k) => k,
            None => {
                fused.push(&r.fused);
                fused.len() - 1
            }
        };
        let s = &r.stats;
        let shape = format!("{:?}", &s.dims[..(s.rank as usize).min(s.dims.len())]);
        let time = |v: f64| if s.timed > 0 { format!("{:.2}", v / 1000.0) } else { "-".to_string() };
        let share = if total_ns > 0.0 { format!("{:.1}%", 100.0 * typical(r) / total_ns) } else { "-".into() };
        let probe_per_run = if s.timed > 0 { format!("{:.0}", s.probe_ns as f64 / s.timed as f64) } else { "-".into() };
        let _ = writeln!(
            out,
            "{:<36} {:<14} {:<18} {:>6.2} {:>10} {:>10} {:>6} {:>9} {:>8.2} {:>10.1} {:>7.2}",
            format!("#{} {}", k + 1, r.label),
            r.op_type,
            shape,
            per(s.runs),
            time(s.p50_ns),
            time(s.p90_ns),
            share,
            probe_per_run,
            per(s.allocs),
            per(s.bytes),
            per(s.ffi_calls),
        );
    }
    for (k, f) in fused.iter().enumerate() {
        let _ = writeln!(out, "#{}: fused node {f}", k + 1);
    }
    if !timed {
        let _ = writeln!(out, "(no node times: set RIVET_PROFILE_DISPATCH=1 to time nodes)");
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

    fn row(fused: &str, label: &str, op: &str, sum_ns: u64, p50: f64, runs: u64) -> NodeRow {
        let mut stats = rivet_ep::probe::NodeStats {
            runs,
            timed: runs,
            sum_ns,
            p50_ns: p50,
            p90_ns: p50 * 2.0,
            ..Default::default()
        };
        stats.rank = 2;
        stats.dims[..2].copy_from_slice(&[1, 8]);
        stats.probe_ns = 40 * runs;
        NodeRow { fused: fused.into(), label: label.into(), op_type: op.into(), stats }
    }

    #[test]
    fn nodes_are_listed_by_total_time_with_their_fused_node() {
        let mut rows = vec![
            // One Run of the pool held up for 5 ms: its sum is the largest, its median not.
            row("F1", "pool1", "MaxPool", 5_001_000, 100.0, 10),
            row("F1", "conv1 (+relu1)", "Conv", 50_000, 5_000.0, 10),
            row("F2", "sig1", "Sigmoid", 9_000, 900.0, 10),
            row("F3", "other session", "Relu", 0, 0.0, 0),
        ];
        rows[2].stats.ffi_calls = 20;
        let t = node_table(&rows, 10, 2, (12.0, 30.0));
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("top 2 of 3 nodes by total time"), "{t}");
        assert!(lines[0].contains("12 ns a node, 30 ns a phase guard"), "{t}");
        assert!(lines[2].starts_with("#1 conv1 (+relu1)") && lines[2].contains("Conv"), "{t}");
        assert!(lines[2].contains("[1, 8]") && lines[2].contains(" 5.00 ") && lines[2].contains(" 10.00 "), "{t}");
        assert!(lines[2].contains("83.3%") && lines[2].contains(" 40 "), "{t}");
        assert!(lines[3].starts_with("#2 sig1") && lines[3].trim_end().ends_with("2.00"), "{t}");
        assert!(!t.contains("pool1") && !t.contains("other session"), "{t}");
        assert!(t.contains("#1: fused node F1") && t.contains("#2: fused node F2"), "{t}");
        assert!(!t.contains("no node times"));
    }

    #[test]
    fn untimed_nodes_say_how_to_time_them() {
        let mut r = row("F", "a", "Relu", 0, 0.0, 4);
        r.stats.timed = 0;
        let t = node_table(&[r], 4, 10, (0.0, 0.0));
        assert!(t.contains("by ORT calls and allocations") && t.contains("RIVET_PROFILE_DISPATCH=1"), "{t}");
        assert!(t.lines().nth(2).unwrap().contains(" - "), "{t}");
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
