//! Rivet's workflows: `cargo xtask setup | build | run | test`.
//!
//! `setup` makes `.venv/` with the pinned ONNX Runtime wheel and friends (idempotent);
//! `run` and `test` call it when needed and pass the library paths to what they start.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask <command>
  setup           make .venv/ with requirements.txt (onnxruntime==1.32.0, onnx, numpy, pytest)
  build           build the plugin (target/release/librivet_ep.so) and its probe build
  run [ARGS]      build, then `rivet run ARGS` (a built-in model, or --model PATH [--dim N=V])
  bench [ARGS]    build, then `rivet bench ARGS` (A/B against ORT's CPU EP; --case, --callgrind, --precision bf16)
  leakcheck       end-to-end tests under valgrind memcheck: 0 bytes definitely lost and no
                  invalid access inside Rivet (`--short`: the error-path suites, as CI runs it)
  miri            the marshalling layer's tests under Miri (nightly + miri, added if missing)
  fuzz [N]        N random graphs (default 10000) compared with ORT's CPU EP
  probe-overhead  the probe's cost per counted event and timed phase, next to tracing and fastrace
  conformance     the ONNX node cases on Rivet alone (`-- --bless` rewrites the expected passes)
  wheel           build, then target/wheels/onnxruntime_ep_rivet-*.whl (both libraries, no
                  Python extension module; `pip install` it beside onnxruntime>=1.32)
  test            build, then every check and test: fmt, clippy (with and without probe),
                  Rust unit and end-to-end tests, Python tests";

type Result<T = ()> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("setup") => setup().map(|_| ()),
        Some("build") => setup().and_then(|env| build(&env)),
        Some("run") => setup().and_then(|env| build(&env).and_then(|()| run(&env, &args[1..]))),
        Some("bench") => setup().and_then(|env| build(&env).and_then(|()| bench(&env, &args[1..]))),
        Some("leakcheck") => {
            setup().and_then(|env| build(&env).and_then(|()| leakcheck(&env, args.iter().any(|a| a == "--short"))))
        }
        Some("miri") => miri(),
        Some("fuzz") => setup().and_then(|env| build(&env).and_then(|()| fuzz(&env, args.get(1).map(String::as_str)))),
        Some("probe-overhead") => status(
            cargo()
                .args([
                    "run",
                    "--quiet",
                    "--release",
                    "--manifest-path",
                    "benches/Cargo.toml",
                    "--target-dir",
                    "target/probe-overhead",
                ])
                .current_dir(root()),
        ),
        Some("conformance") => setup().and_then(|env| {
            build(&env).and_then(|()| {
                status(
                    env.apply(&mut Command::new(&env.python))
                        .arg("tests/conformance/run_conformance.py")
                        .args(&args[1..]),
                )
            })
        }),
        Some("wheel") => setup().and_then(|env| build(&env).and_then(|()| wheel(&env).map(|_| ()))),
        Some("test") => setup().and_then(|env| build(&env).and_then(|()| test(&env))),
        Some("-h" | "--help") | None => {
            println!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(format!("unknown command '{other}'\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace").to_path_buf()
}

/// Paths every child process gets.
struct Env {
    python: PathBuf,
    ort_dylib: PathBuf,
    rivet_lib: PathBuf,
    rivet_probe_lib: PathBuf,
}

impl Env {
    fn apply<'c>(&self, cmd: &'c mut Command) -> &'c mut Command {
        cmd.env("ORT_DYLIB_PATH", &self.ort_dylib)
            .env("RIVET_EP_LIB", &self.rivet_lib)
            .env("RIVET_EP_PROBE_LIB", &self.rivet_probe_lib)
            .env("RIVET_PYTHON", &self.python)
            .current_dir(root())
    }
}

fn status(cmd: &mut Command) -> Result {
    let shown = format!("{cmd:?}");
    let st = cmd.status().map_err(|e| format!("could not start {shown}: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({st})"))
    }
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn find_python() -> Result<String> {
    let candidates =
        std::env::var("PYTHON").map(|p| vec![p]).unwrap_or_else(|_| vec!["python3".into(), "python".into()]);
    for c in &candidates {
        if Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Ok(c.clone());
        }
    }
    Err(format!(
        "no Python found (tried {}). Install Python 3.9+ with its venv module (Debian: apt-get install python3 python3-venv) or set PYTHON=/path/to/python3",
        candidates.join(", ")
    ))
}

fn venv_python(venv: &Path) -> PathBuf {
    venv.join("bin/python")
}

/// Creates `.venv/` and installs requirements.txt unless the stamp says it is done.
fn setup() -> Result<Env> {
    let root = root();
    let venv = root.join(".venv");
    let reqs =
        std::fs::read_to_string(root.join("requirements.txt")).map_err(|e| format!("reading requirements.txt: {e}"))?;
    let stamp = venv.join(".rivet-requirements");
    let python = venv_python(&venv);
    let done = python.exists() && std::fs::read_to_string(&stamp).is_ok_and(|s| s == reqs);
    if !python.exists() {
        let system = find_python()?;
        eprintln!("xtask: creating {} with {system}", venv.display());
        status(Command::new(&system).args(["-m", "venv"]).arg(&venv)).map_err(|e| {
            format!("{e}\nCould not create the virtual environment: on Debian/Ubuntu install python3-venv")
        })?;
    }
    // The requirements' wheels are kept in a local wheelhouse: .venv installs from it, and
    // so does the wheel test's fresh venv, which may download nothing.
    let wheelhouse = wheelhouse();
    let wheelhouse_stamp = wheelhouse.join(".rivet-requirements");
    if !std::fs::read_to_string(&wheelhouse_stamp).is_ok_and(|s| s == reqs) {
        eprintln!("xtask: downloading requirements.txt's wheels into {}", wheelhouse.display());
        status(
            Command::new(&python)
                .args(["-m", "pip", "download", "--disable-pip-version-check", "-q", "-d"])
                .arg(&wheelhouse)
                .arg("-r")
                .arg(root.join("requirements.txt")),
        )
        .map_err(|e| format!("{e}\npip could not download the requirements: check that PyPI is reachable"))?;
        std::fs::write(&wheelhouse_stamp, &reqs).map_err(|e| format!("writing {}: {e}", wheelhouse_stamp.display()))?;
    }
    if !done {
        eprintln!("xtask: installing requirements.txt into .venv (onnxruntime==1.32.0, onnx, numpy, pytest)");
        status(
            Command::new(&python)
                .args(["-m", "pip", "install", "--disable-pip-version-check", "-q", "--no-index", "--find-links"])
                .arg(&wheelhouse)
                .arg("-r")
                .arg(root.join("requirements.txt")),
        )
        .map_err(|e| format!("{e}\npip could not install the requirements: check that PyPI is reachable"))?;
        std::fs::write(&stamp, &reqs).map_err(|e| format!("writing {}: {e}", stamp.display()))?;
    }
    let ort_dylib = find_ort(&venv)?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
    Ok(Env {
        python,
        ort_dylib,
        rivet_lib: target.join("release/librivet_ep.so"),
        rivet_probe_lib: target.join("probe/release/librivet_ep.so"),
    })
}

/// `.venv/wheelhouse`: the wheels of requirements.txt and their dependencies.
fn wheelhouse() -> PathBuf {
    root().join(".venv/wheelhouse")
}

fn find_ort(venv: &Path) -> Result<PathBuf> {
    let lib = venv.join("lib");
    for entry in std::fs::read_dir(&lib).map_err(|e| format!("reading {}: {e}", lib.display()))?.flatten() {
        let p = entry.path().join("site-packages/onnxruntime/capi/libonnxruntime.so.1.32.0");
        if p.exists() {
            return Ok(p);
        }
    }
    Err(format!("libonnxruntime.so.1.32.0 is not in {}: delete .venv and run `cargo xtask setup` again", lib.display()))
}

/// Builds the production plugin and the probe build (in its own target dir so the two
/// never overwrite each other), plus the CLI.
fn build(env: &Env) -> Result {
    status(env.apply(&mut cargo()).args(["build", "--release", "-p", "rivet-ep", "-p", "rivet"]))?;
    let probe_dir = env.rivet_probe_lib.parent().and_then(Path::parent).ok_or("bad probe path")?;
    status(
        env.apply(&mut cargo())
            .args(["build", "--release", "-p", "rivet-ep", "--features", "probe-allocator", "--target-dir"])
            .arg(probe_dir),
    )
}

/// Packs the two libraries `build` made into `target/wheels/` (python/build_wheel.py) and
/// returns the wheel's path.
fn wheel(env: &Env) -> Result<PathBuf> {
    let out = env.rivet_lib.parent().and_then(Path::parent).ok_or("bad library path")?.join("wheels");
    status(
        env.apply(&mut Command::new(&env.python))
            .arg("python/build_wheel.py")
            .args(["--version", env!("CARGO_PKG_VERSION"), "--readme", "README.md", "--lib"])
            .arg(&env.rivet_lib)
            .arg("--probe-lib")
            .arg(&env.rivet_probe_lib)
            .arg("--out")
            .arg(&out),
    )?;
    let wheels: Vec<PathBuf> = std::fs::read_dir(&out)
        .map_err(|e| format!("reading {}: {e}", out.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    match wheels.as_slice() {
        [one] => Ok(one.clone()),
        _ => Err(format!("expected one wheel in {}, found {wheels:?}", out.display())),
    }
}

fn run(env: &Env, args: &[String]) -> Result {
    status(env.apply(&mut cargo()).args(["run", "--quiet", "--release", "-p", "rivet", "--", "run"]).args(args))
}

fn bench(env: &Env, args: &[String]) -> Result {
    status(env.apply(&mut cargo()).args(["run", "--quiet", "--release", "-p", "rivet", "--", "bench"]).args(args))
}

/// Test binaries of the `rivet` package, by test name.
fn test_executables(env: &Env) -> Result<Vec<(String, PathBuf)>> {
    let out = env
        .apply(&mut cargo())
        .args(["test", "--release", "-p", "rivet", "--no-run", "--message-format=json"])
        .output()
        .map_err(|e| format!("cargo test --no-run: {e}"))?;
    if !out.status.success() {
        return Err(format!("cargo test --no-run failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let mut found = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(exe) = line.split("\"executable\":\"").nth(1).and_then(|r| r.split('"').next()) else { continue };
        let name = Path::new(exe).file_name().and_then(|f| f.to_str()).unwrap_or("");
        if exe.contains("/deps/") {
            let test = name.rsplit_once('-').map_or(name, |(n, _)| n).to_string();
            found.push((test, PathBuf::from(exe)));
        }
    }
    Ok(found)
}

/// One memcheck report: the loss records and invalid accesses whose stacks pass through
/// Rivet (ORT's own reports and the dynamic loader's are not ours to fix).
fn rivet_reports(log: &str) -> Vec<String> {
    let mut reports = Vec::new();
    let mut block: Vec<&str> = Vec::new();
    let flush = |block: &mut Vec<&str>, reports: &mut Vec<String>| {
        // A record may follow a "Thread N:" line in the same block.
        let serious = block.iter().any(|l| {
            l.contains("are definitely lost")
                || l.contains("Invalid read")
                || l.contains("Invalid write")
                || l.contains("Invalid free")
                || l.contains("Mismatched free")
        });
        if serious && block.iter().any(|l| l.contains("rivet_ep")) {
            reports.push(block.join("\n"));
        }
        block.clear();
    };
    for line in log.lines() {
        let body = line.splitn(3, "==").nth(2).unwrap_or("").trim_start();
        if body.is_empty() {
            flush(&mut block, &mut reports);
        } else {
            block.push(line);
        }
    }
    flush(&mut block, &mut reports);
    reports
}

fn leakcheck(env: &Env, short: bool) -> Result {
    if Command::new("valgrind").arg("--version").output().is_err() {
        return Err("valgrind is not installed (Debian: apt-get install valgrind)".into());
    }
    let suites: &[&str] = if short {
        &["e2e_graph", "hostile"]
    } else {
        &["e2e_graph", "hostile", "e2e_ops", "lifecycle", "concurrency"]
    };
    let exes = test_executables(env)?;
    let mut problems = Vec::new();
    for suite in suites {
        let (_, exe) = exes.iter().find(|(n, _)| n == suite).ok_or_else(|| format!("no test binary {suite}"))?;
        eprintln!("xtask: memcheck {suite}");
        let log = std::env::temp_dir().join(format!("rivet-memcheck-{suite}.log"));
        let st = env
            .apply(&mut Command::new("valgrind"))
            .args(["--leak-check=full", "--show-leak-kinds=definite", "--num-callers=40"])
            .arg(format!("--log-file={}", log.display()))
            .arg(exe)
            .arg("--test-threads=1")
            .env("RIVET_LIFECYCLE_CYCLES", "20")
            .env("RIVET_UNDER_VALGRIND", "1")
            .status()
            .map_err(|e| format!("valgrind: {e}"))?;
        if !st.success() {
            return Err(format!("{suite} failed under valgrind ({st}); see {}", log.display()));
        }
        let text = std::fs::read_to_string(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let found = rivet_reports(&text);
        let lost = text.lines().find(|l| l.contains("definitely lost:")).unwrap_or("").to_string();
        eprintln!("xtask: {suite}: {} report(s) through Rivet; whole process {}", found.len(), lost.trim());
        problems.extend(found);
    }
    if problems.is_empty() {
        eprintln!("leakcheck: 0 bytes definitely lost and no invalid access inside Rivet");
        Ok(())
    } else {
        Err(format!("memcheck found {} problem(s) inside Rivet:\n{}", problems.len(), problems.join("\n\n")))
    }
}

fn miri() -> Result {
    let has_miri =
        Command::new("cargo").args(["+nightly", "miri", "--version"]).output().is_ok_and(|o| o.status.success());
    if !has_miri {
        eprintln!("xtask: adding miri and rust-src to the nightly toolchain");
        status(Command::new("rustup").args(["component", "add", "--toolchain", "nightly", "miri", "rust-src"]))
            .map_err(|e| {
                format!("{e}\nMiri needs a nightly toolchain: rustup toolchain install nightly --component miri")
            })?;
    }
    status(
        Command::new("cargo")
            .args(["+nightly", "miri", "test", "-p", "rivet-ep", "--test", "marshalling"])
            .current_dir(root()),
    )
}

fn fuzz(env: &Env, cases: Option<&str>) -> Result {
    let cases = cases.unwrap_or("10000");
    status(
        env.apply(&mut cargo())
            .args(["test", "--release", "-p", "rivet", "--test", "fuzz_vs_ort"])
            .env("RIVET_FUZZ_CASES", cases),
    )
}

fn test(env: &Env) -> Result {
    eprintln!("xtask: rustfmt");
    status(env.apply(&mut cargo()).args(["fmt", "--all", "--check"]))?;
    eprintln!("xtask: clippy (default features, then probe)");
    status(env.apply(&mut cargo()).args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    status(env.apply(&mut cargo()).args([
        "clippy",
        "-p",
        "rivet-ep",
        "-p",
        "rivet-macros",
        "-p",
        "rivet-probe",
        "--all-targets",
        "--features",
        "probe",
        "--",
        "-D",
        "warnings",
    ]))?;
    eprintln!("xtask: cargo test (unit and end-to-end)");
    status(env.apply(&mut cargo()).args(["test", "--workspace", "--release"]))?;
    eprintln!("xtask: cargo test with the probe (exact counts, allocator, phases)");
    // In the probe build's own target dir: a cdylib+rlib crate's rlib has no hash in
    // its name, so two feature sets in one target dir would overwrite each other.
    let probe_dir = env.rivet_probe_lib.parent().and_then(Path::parent).ok_or("bad probe path")?;
    status(
        env.apply(&mut cargo())
            .args(["test", "--release", "-p", "rivet-ep", "--features", "probe-allocator", "--target-dir"])
            .arg(probe_dir),
    )?;
    eprintln!("xtask: the probe without the counting allocator (counts, and allocations reported as not counted)");
    // Debug profile in the probe's target dir: apart from the release probe-allocator build.
    status(
        env.apply(&mut cargo())
            .args(["test", "-p", "rivet-ep", "--features", "probe", "--target-dir"])
            .arg(probe_dir)
            .args(["--test", "probe_ffi_match", "--test", "probe_fake_api", "--test", "probe_phases"]),
    )?;
    eprintln!("xtask: the probe runtime and macros with the feature (UI and doc tests in this build too)");
    status(env.apply(&mut cargo()).args(["test", "-p", "rivet-probe", "-p", "rivet-macros", "--features", "probe"]))?;
    eprintln!("xtask: tests/probe-user, a crate outside the workspace on the runtime crate alone, feature off and on");
    for features in [&[][..], &["--features", "probe"][..]] {
        status(
            env.apply(&mut cargo())
                .args(["run", "--quiet", "--manifest-path", "tests/probe-user/Cargo.toml", "--target-dir"])
                .arg(root().join("target/probe-user"))
                .args(features),
        )?;
    }
    eprintln!("xtask: memcheck of the error-path suites (cargo xtask leakcheck runs more)");
    leakcheck(env, true)?;
    eprintln!("xtask: ONNX conformance (node cases of onnx 1.20.1 on Rivet alone; writes CONFORMANCE.md)");
    status(env.apply(&mut Command::new(&env.python)).arg("tests/conformance/run_conformance.py"))?;
    eprintln!("xtask: the README's Rust example (examples/rivet_ort.rs)");
    status(env.apply(&mut cargo()).args(["run", "--quiet", "--release", "-p", "rivet", "--example", "rivet_ort"]))?;
    eprintln!("xtask: the wheel (python/build_wheel.py)");
    let wheel = wheel(env)?;
    eprintln!("xtask: Python tests (the README snippet through the wheel in a fresh venv, against the pinned wheel)");
    status(
        env.apply(&mut Command::new(&env.python))
            .args(["-m", "pytest", "-q", "tests/python"])
            .env("RIVET_WHEEL", wheel)
            .env("RIVET_WHEELHOUSE", wheelhouse()),
    )
}
