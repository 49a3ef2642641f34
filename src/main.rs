//! `rivet`: run a model on Rivet and on ORT's CPU EP and compare; print the op table.

use std::collections::HashMap;
use std::process::ExitCode;
use std::time::Duration;

use rivet::harness::{self, Arm, SessionOpts};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT};

const USAGE: &str = "usage:
  rivet run [--model PATH] [--dim NAME=VALUE]... [--iters N] [--threads N]
      Runs the model (default: a built-in one) on Rivet and on ORT's CPU EP, checks
      Rivet's outputs against ORT's and prints per-Run time for each.
  rivet profile [--model PATH] [--dim NAME=VALUE]... [--iters N] [--threads N] [--trace FILE] [--top N] [--precision P] [--no-fallback]
      Runs the model on the probe build of Rivet and prints the top N nodes (default 20)
      by total time at the median Run (p50 x Runs, so that one Run held up by another
      process does not reorder them): time per Run (p50, p90, the probe's own calibrated cost subtracted;
      RIVET_PROFILE_DISPATCH=0 turns timing off), output shape, allocations, bytes and ORT calls;
      then per-phase counts per Run and per node: calls, ns, allocations, bytes, ORT
      calls, statuses. CPU fallback stays on (the tables cover the nodes Rivet runs)
      unless --no-fallback. --precision bf16: with Rivet's provider option precision = bf16.
  rivet bench [--case SUBSTRING]... [--rounds N] [--round-ms MS] [--callgrind] [--out DIR] [--precision P]
      A/B benchmark against ORT's CPU EP in this process: interleaved rounds, p50/p90,
      ratio, ORT drift, rounds won. Writes results.csv and ratios.svg to DIR
      (default target/rivet-bench). --callgrind: instructions per Run of both arms
      under valgrind instead (one-thread cases). --precision bf16: Rivet's
      products in bfloat16 against ORT's float32 (outputs checked within 0.1 of their RMS).
  rivet ops
      Prints the table of supported ops (markdown), generated from Rivet's registry.";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("run") => run(&args[1..]),
        Some("profile") => profile(&args[1..]),
        Some("bench") => bench(&args[1..]),
        Some("bench-one") => bench_one(&args[1..]),
        Some("ops") => {
            print!("{}", rivet_ep::registry::markdown_table());
            Ok(())
        }
        Some("-h" | "--help") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command '{other}'\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rivet: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The built-in model: an elementwise block on x[N, 1024] with two initializers.
pub fn builtin_model() -> Vec<u8> {
    let n = 1024;
    let w: Vec<f32> = harness::values(7, n, 0.5, 1.5).into_iter().map(|v| v as f32).collect();
    let b: Vec<f32> = harness::values(8, n, -0.5, 0.5).into_iter().map(|v| v as f32).collect();
    ModelBuilder::new(21)
        .input("x", FLOAT, &[Dim::from("N"), Dim::from(n as i64)])
        .initializer("w", &[n as i64], w)
        .initializer("b", &[n as i64], b)
        .node("Mul", "scale", &["x", "w"], &["xw"])
        .node("Add", "shift", &["xw", "b"], &["h"])
        .node("Tanh", "squash", &["h"], &["t"])
        .node_with("Gelu", "gelu", &["t"], &["g"], &[("approximate", Attr::Str("tanh".into()))])
        .node_with("LeakyRelu", "leaky", &["x"], &["l"], &[("alpha", Attr::Float(0.1))])
        .node("Max", "join", &["g", "l"], &["y"])
        .output("y", FLOAT, None)
        .build()
}

/// `run` and `profile` arguments.
struct RunArgs {
    model: Option<String>,
    dims: HashMap<String, i64>,
    iters: usize,
    threads: Option<usize>,
}

fn parse_run_args(args: &[String]) -> Result<RunArgs, String> {
    let mut model = None;
    let mut dims = HashMap::new();
    let mut iters = 200;
    let mut threads = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        match a.as_str() {
            "--model" => model = Some(value("--model")?),
            "--dim" => {
                let v = value("--dim")?;
                let (k, n) = v.split_once('=').ok_or_else(|| format!("--dim takes NAME=VALUE, got '{v}'"))?;
                let n: i64 = n.parse().map_err(|_| format!("--dim {k}: '{n}' is not a whole number"))?;
                if n < 0 {
                    return Err(format!("--dim {k}: {n} is negative"));
                }
                dims.insert(k.to_string(), n);
            }
            "--iters" => iters = value("--iters")?.parse().map_err(|_| "--iters takes a whole number".to_string())?,
            "--threads" => {
                threads = Some(value("--threads")?.parse().map_err(|_| "--threads takes a whole number".to_string())?)
            }
            other => return Err(format!("unknown argument '{other}'\n{USAGE}")),
        }
    }
    Ok(RunArgs { model, dims, iters: iters.max(1), threads })
}

fn load_model(model_path: &Option<String>, dims: &mut HashMap<String, i64>) -> Result<(String, Vec<u8>), String> {
    Ok(match model_path {
        Some(p) => (p.clone(), std::fs::read(p).map_err(|e| format!("reading {p}: {e}"))?),
        None => {
            dims.entry("N".into()).or_insert(4);
            ("built-in (Mul, Add, Tanh, Gelu, LeakyRelu, Max on x[N, 1024])".to_string(), builtin_model())
        }
    })
}

fn profile(args: &[String]) -> Result<(), String> {
    // Time nodes and phases unless the user says otherwise (RIVET_PROFILE_DISPATCH=0): the
    // probe library reads the variable once, when it loads, which is after this.
    if std::env::var_os("RIVET_PROFILE_DISPATCH").is_none() {
        std::env::set_var("RIVET_PROFILE_DISPATCH", "1");
    }
    // `--trace FILE` is profile's own; the rest are `run`'s.
    let mut trace = None;
    let mut top = 20usize;
    let mut provider_options = Vec::new();
    let mut no_fallback = false;
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--no-fallback" {
            no_fallback = true;
        } else if a == "--precision" {
            let p = it.next().ok_or("--precision needs fp32 or bf16")?;
            provider_options.push(("Rivet.precision".to_string(), p.clone()));
        } else if a == "--trace" {
            trace = Some(std::path::PathBuf::from(it.next().ok_or("--trace needs a file")?));
        } else if a == "--top" {
            top = it.next().ok_or("--top needs a number")?.parse().map_err(|_| "--top takes a whole number")?;
        } else {
            rest.push(a.clone());
        }
    }
    let RunArgs { model: model_path, mut dims, iters, threads } = parse_run_args(&rest)?;
    let (label, bytes) = load_model(&model_path, &mut dims)?;
    let lib = rivet::paths::rivet_probe_lib()?;
    let env = harness::environment_with(&lib)?;
    let probe = rivet::probe_reader::ProbeReader::open(&lib)?;
    let opts = SessionOpts {
        record_assignment: true,
        intra_threads: threads,
        provider_options,
        no_fallback,
        ..Default::default()
    };
    let mut session = harness::session(env, &bytes, Arm::Rivet, &opts)?;
    let assigned = rivet::ort_extra::graph_assignment(&session)?;
    let on_rivet = assigned.iter().filter(|(ep, _, _)| ep == harness::RIVET_EP).count();
    let inputs = harness::prepare(&harness::generate_inputs(&session, &dims)?)?;
    harness::time_runs(&mut session, &inputs, 10, 0)?;
    // Reading members and writing the timeline allocate inside the library: keep them
    // outside the two counter readings.
    let members_before = probe.ffi_sites();
    probe.nodes_reset();
    if trace.is_some() {
        probe.timeline_start()?;
    }
    let before = probe.global();
    harness::time_runs(&mut session, &inputs, 0, iters)?;
    let counts = probe.global().since(&before);
    if let Some(path) = &trace {
        probe.timeline_write(path)?;
    }
    let members = probe.ffi_sites();
    let nodes = probe.nodes();
    println!("model: {label}; {on_rivet}/{} nodes on Rivet; {iters} Runs", assigned.len());
    print!("{}", rivet::profile::node_table(&nodes, iters as u64, top, probe.probe_costs_ns()));
    print!("{}", rivet::profile::table(&probe.phase_names(), &counts, iters as u64));
    print!("{}", rivet::profile::member_table(&members, &members_before, iters as u64));
    if let Some(path) = &trace {
        println!(
            "timeline of the {iters} Runs (phases and nodes on every thread, Chrome trace JSON; open in ui.perfetto.dev): {}",
            path.display()
        );
    }
    if std::env::var_os("RIVET_PROFILE_DISPATCH").is_some_and(|v| v != "1") {
        println!("(ns columns are 0: RIVET_PROFILE_DISPATCH is not 1, so phases and nodes are not timed)");
    }
    Ok(())
}

fn selected_cases(filters: &[String]) -> Vec<rivet::bench::Case> {
    rivet::bench::grid()
        .into_iter()
        .filter(|c| filters.is_empty() || filters.iter().any(|f| c.name.contains(f.as_str())))
        .collect()
}

fn bench(args: &[String]) -> Result<(), String> {
    let (mut filters, mut rounds, mut round_ms, mut callgrind) = (Vec::new(), 5usize, 20.0f64, false);
    let mut precision = rivet::bench::Precision::Fp32;
    let mut out_dir = rivet::paths::workspace_root().join("target/rivet-bench");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        match a.as_str() {
            "--case" => filters.push(value("--case")?),
            "--rounds" => rounds = value("--rounds")?.parse().map_err(|_| "--rounds takes a whole number")?,
            "--round-ms" => round_ms = value("--round-ms")?.parse().map_err(|_| "--round-ms takes a number")?,
            "--out" => out_dir = value("--out")?.into(),
            "--callgrind" => callgrind = true,
            "--precision" => {
                precision = match value("--precision")?.as_str() {
                    "fp32" => rivet::bench::Precision::Fp32,
                    "bf16" => rivet::bench::Precision::Bf16,
                    other => return Err(format!("--precision is fp32 or bf16, not {other}")),
                }
            }
            other => return Err(format!("unknown argument '{other}'\n{USAGE}")),
        }
    }
    if rounds < 1 {
        return Err("--rounds must be at least 1".into());
    }
    let cases = selected_cases(&filters);
    if cases.is_empty() {
        return Err(format!("no case matches {filters:?}"));
    }
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("creating {}: {e}", out_dir.display()))?;
    if callgrind {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut csv = String::from("case,ort_instr_per_run,rivet_instr_per_run,ratio\n");
        println!("{:<28} {:>14} {:>14} {:>7}", "case (instructions/Run)", "ORT", "Rivet", "ratio");
        for case in cases.iter().filter(|c| c.threads == Some(1)) {
            let (o, r) = rivet::callgrind::per_run(&exe, &case.name, &out_dir)?;
            println!("{:<28} {:>14.0} {:>14.0} {:>7.2}", case.name, o, r, r / o.max(1.0));
            csv.push_str(&format!("{},{o:.0},{r:.0},{:.4}\n", case.name, r / o.max(1.0)));
        }
        let path = out_dir.join("callgrind.csv");
        std::fs::write(&path, csv).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
        return Ok(());
    }
    let mut results = Vec::new();
    for case in &cases {
        let r = rivet::bench::run_case_at(case, rounds, round_ms, precision)?;
        eprint!(
            "{}",
            rivet::bench::table(std::slice::from_ref(&r), rounds)
                .lines()
                .nth(1)
                .map(|l| format!("{l}\n"))
                .unwrap_or_default()
        );
        results.push(r);
    }
    println!("{}", rivet::bench::table(&results, rounds));
    print!("{}", rivet::bench::summary(&results));
    for (name, body) in [("results.csv", rivet::bench::csv(&results)), ("ratios.svg", rivet::bench::svg(&results))] {
        let path = out_dir.join(name);
        std::fs::write(&path, body).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn bench_one(args: &[String]) -> Result<(), String> {
    let (mut case, mut arm, mut runs) = (None, None, 100usize);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        match a.as_str() {
            "--case" => case = Some(value("--case")?),
            "--arm" => {
                arm = Some(match value("--arm")?.as_str() {
                    "ort" => Arm::OrtCpu,
                    "rivet" => Arm::Rivet,
                    other => return Err(format!("--arm is ort or rivet, not {other}")),
                })
            }
            "--runs" => runs = value("--runs")?.parse().map_err(|_| "--runs takes a whole number")?,
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    let name = case.ok_or("--case NAME is required")?;
    let case =
        rivet::bench::grid().into_iter().find(|c| c.name == name).ok_or_else(|| format!("no case named {name}"))?;
    rivet::callgrind::run_one(&case, arm.ok_or("--arm is required")?, runs)
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn run(args: &[String]) -> Result<(), String> {
    let RunArgs { model: model_path, mut dims, iters, threads } = parse_run_args(args)?;
    let (label, bytes) = load_model(&model_path, &mut dims)?;
    let env = harness::environment()?;
    let rivet_opts = SessionOpts { record_assignment: true, intra_threads: threads, ..Default::default() };
    let ort_opts = SessionOpts { intra_threads: threads, ..Default::default() };
    let mut rivet = harness::session(env, &bytes, Arm::Rivet, &rivet_opts)?;
    let mut ort = harness::session(env, &bytes, Arm::OrtCpu, &ort_opts)?;

    let assigned = rivet::ort_extra::graph_assignment(&rivet)?;
    let on_rivet = assigned.iter().filter(|(ep, _, _)| ep == harness::RIVET_EP).count();
    let inputs = harness::generate_inputs(&ort, &dims)?;
    let want = harness::run(&mut ort, &inputs)?;
    let got = harness::run(&mut rivet, &inputs)?;
    let score = harness::compare(&got, &want, 1e-4, 1e-5)?;

    let prepared = harness::prepare(&inputs)?;
    let rounds = 5;
    let per_round = iters.div_ceil(rounds);
    let (mut t_rivet, mut t_ort) = (Vec::new(), Vec::new());
    let mut ort_round_medians = Vec::new();
    for _ in 0..rounds {
        t_ort.extend(
            harness::time_runs(&mut ort, &prepared, 10, per_round)
                .inspect(|t| ort_round_medians.push(harness::quantile(t, 0.5)))?,
        );
        t_rivet.extend(harness::time_runs(&mut rivet, &prepared, 10, per_round)?);
    }
    let drift = {
        let lo = ort_round_medians.iter().min().copied().unwrap_or_default();
        let hi = ort_round_medians.iter().max().copied().unwrap_or_default();
        (micros(hi) / micros(lo).max(1e-9) - 1.0) * 100.0
    };
    println!("model: {label}; {on_rivet}/{} nodes on Rivet; outputs match ORT (worst error {:.3} of tolerance rtol 1e-4, atol 1e-5)", assigned.len(), score);
    let (r50, o50) = (harness::quantile(&t_rivet, 0.5), harness::quantile(&t_ort, 0.5));
    println!(
        "Rivet       p50 {:>9.2} us/Run  p90 {:>9.2} us/Run",
        micros(r50),
        micros(harness::quantile(&t_rivet, 0.9))
    );
    println!("ORT CPU EP  p50 {:>9.2} us/Run  p90 {:>9.2} us/Run", micros(o50), micros(harness::quantile(&t_ort, 0.9)));
    println!("Rivet/ORT p50 ratio {:.2} ({rounds} interleaved rounds of {per_round} Runs; ORT drift between rounds {drift:.1}%)", micros(r50) / micros(o50));
    Ok(())
}
