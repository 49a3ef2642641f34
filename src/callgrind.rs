//! Instructions per Run under `valgrind --tool=callgrind`: deterministic where timings
//! are noisy. Each arm runs in its own process; collection is switched on only inside
//! `harness::measured_runs` (after session creation and warm-up), so the total divided
//! by the number of Runs is the cost of one Run.

use std::path::Path;
use std::process::Command;

use crate::bench::Case;
use crate::harness::{self, Arm, SessionOpts};

/// Runs measured per arm.
pub const RUNS: usize = 200;

/// Body of the `rivet bench-one` helper that valgrind runs: `runs` Runs of one arm.
pub fn run_one(case: &Case, arm: Arm, runs: usize) -> Result<(), String> {
    let env = harness::environment()?;
    let opts =
        SessionOpts { intra_threads: Some(1), no_fallback: arm == Arm::Rivet && !case.fallback, ..Default::default() };
    let mut s = harness::session(env, &case.session_model()?, arm, &opts)?;
    let inputs = harness::prepare(&case.inputs)?;
    harness::time_runs(&mut s, &inputs, 10, 0)?;
    harness::measured_runs(&mut s, &inputs, runs)
}

fn instructions(exe: &Path, case: &str, arm: &str, runs: usize, out_dir: &Path) -> Result<u64, String> {
    let out = out_dir.join(format!("callgrind.{}.{arm}.{runs}.out", case.replace('/', "_")));
    let status = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--collect-atstart=no")
        .arg("--toggle-collect=*measured_runs*")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(exe)
        .args(["bench-one", "--case", case, "--arm", arm, "--runs", &runs.to_string()])
        .output()
        .map_err(|e| format!("could not start valgrind (apt-get install valgrind): {e}"))?;
    if !status.status.success() {
        return Err(format!("valgrind run failed: {}", String::from_utf8_lossy(&status.stderr)));
    }
    let text = std::fs::read_to_string(&out).map_err(|e| format!("reading {}: {e}", out.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("summary:").or_else(|| l.strip_prefix("totals:")))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| format!("no instruction total in {}", out.display()))
}

/// (ORT instructions per Run, Rivet instructions per Run).
pub fn per_run(exe: &Path, case: &str, out_dir: &Path) -> Result<(f64, f64), String> {
    let ort = instructions(exe, case, "ort", RUNS, out_dir)?;
    let rivet = instructions(exe, case, "rivet", RUNS, out_dir)?;
    Ok((ort as f64 / RUNS as f64, rivet as f64 / RUNS as f64))
}
