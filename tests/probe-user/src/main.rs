//! A toy engine instrumented with Rivet's probe: a phase of its own beside Rivet's, an
//! ORT-style table wrapped with `#[ort_ffi]`, and a re-export named with `crate = ".."`.
//! It checks its own counts (all zero without the feature) and prints them.

use rivet_probe::{dispatch_phase, ort_ffi, snapshot, staging_log, Phase, UserPhase};

mod phases {
    pub static TOKENIZE: super::UserPhase = super::UserPhase::new("tokenize");
}

/// A facade re-exporting the runtime, as a crate wrapping it would. Only the probe's
/// expansion names it.
#[allow(dead_code, unused_imports)]
mod facade {
    pub use rivet_probe as probe;
}

#[allow(non_snake_case)]
struct Table {
    GetLength: fn(&str) -> usize,
}

struct Runtime {
    ort: Table,
}

impl Runtime {
    #[ort_ffi(crate = "facade::probe")]
    fn length(&self, s: &str) -> usize {
        (self.ort.GetLength)(s)
    }
}

#[dispatch_phase(phases::TOKENIZE)]
fn tokenize(s: &str) -> Vec<&str> {
    s.split_whitespace().collect()
}

#[dispatch_phase(KernelInvoke)]
fn run(rt: &Runtime, text: &str) -> usize {
    staging_log!("running on {} bytes", text.len());
    tokenize(text).iter().map(|w| rt.length(w)).sum()
}

fn main() {
    let rt = Runtime { ort: Table { GetLength: str::len } };
    let before = snapshot();
    let n = run(&rt, "counts that cannot lie");
    let d = snapshot().since(&before);
    assert_eq!(n, 19);
    let on = rivet_probe::ENABLED as u64;
    assert_eq!(d.phase(Phase::KernelInvoke).calls, on);
    assert_eq!(d.phase(Phase::KernelInvoke).ffi_calls, 4 * on, "four lengths asked, in kernel_invoke");
    assert_eq!(d.user_phases.iter().map(|p| p.calls).sum::<u64>(), on);
    let sites = rivet_probe::thread_ffi_sites();
    assert_eq!(sites, if on == 1 { vec![("GetLength", 4)] } else { vec![] });
    println!(
        "probe-user: probe {}; kernel_invoke calls {}, ORT-style calls {:?}, user phases {:?}",
        if rivet_probe::ENABLED { "on" } else { "off" },
        d.phase(Phase::KernelInvoke).calls,
        sites,
        rivet_probe::user_phase_names()
    );
}
