//! Cost per counted event and per timed phase of Rivet's probe, next to `tracing`
//! (`#[instrument]` with no subscriber and with a counting subscriber) and `fastrace`
//! (`#[trace]`), measured in this one binary. Timing is a per-process choice
//! (`RIVET_PROFILE_DISPATCH=1`, read once), so the timed rows come from a child run.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use rivet_ep::probe::{Phase, PhaseGuard};
use rivet_macros::{dispatch_phase, ort_ffi};

const ITERS: u64 = 20_000_000;

/// Nanoseconds per call of `f`, best of 5 runs of `ITERS` calls.
fn ns_per_call(mut f: impl FnMut(u64)) -> f64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for i in 0..ITERS {
                f(black_box(i));
            }
            t.elapsed().as_secs_f64() * 1e9 / ITERS as f64
        })
        .fold(f64::INFINITY, f64::min)
}

#[inline(never)]
fn plain(x: u64) -> u64 {
    x.wrapping_mul(3)
}

#[dispatch_phase(KernelInvoke)]
#[inline(never)]
fn in_phase(x: u64) -> u64 {
    x.wrapping_mul(3)
}

/// A stand-in for an ORT table member: `#[ort_ffi]` counts one call per use.
#[allow(non_snake_case)]
struct Table {
    Member: fn(u64) -> u64,
}
struct Api {
    ort: Table,
}
impl Api {
    #[ort_ffi]
    #[inline(never)]
    fn member(&self, x: u64) -> u64 {
        (self.ort.Member)(x)
    }
}

#[tracing::instrument(skip_all)]
#[inline(never)]
fn traced(x: u64) -> u64 {
    x.wrapping_mul(3)
}

#[fastrace::trace]
#[inline(never)]
fn fast_traced(x: u64) -> u64 {
    x.wrapping_mul(3)
}

/// A subscriber that only counts spans and enters.
struct Counting(AtomicU64);
impl tracing::Subscriber for Counting {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(self.0.fetch_add(1, Ordering::Relaxed) + 1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn exit(&self, _: &tracing::span::Id) {}
}

fn main() {
    let timed = std::env::var_os("RIVET_PROFILE_DISPATCH").is_some_and(|v| v == "1");
    let base = ns_per_call(|i| {
        black_box(plain(i));
    });
    let row = |name: &str, ns: f64| println!("| {name} | {:.2} | {:.2} |", ns, (ns - base).max(0.0));
    if timed {
        row(
            "Rivet #[dispatch_phase], timed (RIVET_PROFILE_DISPATCH=1)",
            ns_per_call(|i| {
                black_box(in_phase(i));
            }),
        );
        row(
            "Rivet PhaseGuard enter+drop, timed",
            ns_per_call(|i| {
                let _g = PhaseGuard::enter(Phase::TensorBind);
                black_box(plain(i));
            }),
        );
        return;
    }
    println!("| what (per call) | ns | ns over a plain call |");
    println!("|---|---|---|");
    row("plain call (baseline)", base);
    let api = Api { ort: Table { Member: plain } };
    row(
        "Rivet #[ort_ffi], counting (one event)",
        ns_per_call(|i| {
            black_box(api.member(i));
        }),
    );
    row(
        "Rivet #[dispatch_phase], counting only",
        ns_per_call(|i| {
            black_box(in_phase(i));
        }),
    );
    row(
        "tracing #[instrument], no subscriber",
        ns_per_call(|i| {
            black_box(traced(i));
        }),
    );
    let counting = Counting(AtomicU64::new(0));
    tracing::subscriber::with_default(counting, || {
        row(
            "tracing #[instrument], counting subscriber",
            ns_per_call(|i| {
                black_box(traced(i));
            }),
        );
    });
    row(
        "fastrace #[trace], no reporter (no root span)",
        ns_per_call(|i| {
            black_box(fast_traced(i));
        }),
    );
    let exe = std::env::current_exe().expect("own path");
    let child = std::process::Command::new(exe).env("RIVET_PROFILE_DISPATCH", "1").output().expect("timed child run");
    print!("{}", String::from_utf8_lossy(&child.stdout));
}
