//! Cost of recording with the probe on, on one thread and on two at once (each thread
//! enters a phase and records one status per iteration): shared counters make the
//! two-thread figure grow, per-thread shards keep it flat.
//! `cargo run --release -p rivet-probe --features probe --example record_cost`

use std::hint::black_box;

use rivet_probe::{Phase, PhaseGuard};

const ITERS: u64 = 2_000_000;

/// CPU time of the calling thread in nanoseconds (`/proc/thread-self/schedstat`): time
/// the thread was descheduled on a busy machine is left out, stalls on a cache line
/// another core holds are not.
fn thread_cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").expect("Linux schedstat");
    s.split_whitespace().next().and_then(|v| v.parse().ok()).expect("run time in ns")
}

/// CPU nanoseconds per iteration on each of `threads` threads started together (the
/// slower thread), median of 21 rounds.
fn ns_per_event(threads: usize) -> f64 {
    let mut rounds: Vec<f64> = (0..21)
        .map(|_| {
            let start = std::sync::Barrier::new(threads);
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            let t = thread_cpu_ns();
                            for i in 0..ITERS {
                                let _g = PhaseGuard::enter(Phase::TensorBind);
                                rivet_probe::record_status();
                                black_box(i);
                            }
                            (thread_cpu_ns() - t) as f64 / ITERS as f64
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).fold(0.0, f64::max)
            })
        })
        .collect();
    rounds.sort_by(f64::total_cmp);
    rounds[rounds.len() / 2]
}

fn main() {
    let one = ns_per_event(1);
    let two = ns_per_event(2);
    println!("phase enter+exit and one status: 1 thread {one:.2} ns, 2 threads {two:.2} ns ({:.2}x)", two / one);
}
