//! Kernel-only SGEMM timing at every supported level:
//! `cargo run --release -p rivet-kernels --example gemm_bench [M N K] [--ta] [--tb] [--threads]
//! [--only=LEVEL]`.
//!
//! Prints the best and median GFLOP/s over repeated runs (default 512³, one thread).
//! `--threads` also splits the rows over two threads with `gemm_rows`. The last rows time
//! a B packed once (a constant weight, as the plugin holds it) for the float kernel and,
//! where the CPU has AVX-512 BF16, as bfloat16 pairs for the `bf16` precision; `packed-AB`
//! both operands packed beforehand. `--copies=N`: B packed N times, used in turn (read
//! from past L2, as a model's weights are); `--cold-c=N`: C one of N buffers in turn.

use rivet_kernels::{bf16_supported, gemm_rows_at, pack_b, pack_b_bf16, Gemm, GemmScratch, Level, PackedB};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dims: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let (m, n, k) = match dims[..] {
        [m, n, k] => (m, n, k),
        _ => (512, 512, 512),
    };
    let ta = args.iter().any(|a| a == "--ta");
    let tb = args.iter().any(|a| a == "--tb");
    let threads = args.iter().any(|a| a == "--threads");
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.1).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.1).collect();
    let mut c = vec![0.0f32; m * n];
    let flop = 2.0 * (m * n * k) as f64;
    let reps = ((2e8 / flop) as usize).max(1);
    println!("{m}x{n}x{k} ta={ta} tb={tb}: GFLOP/s best / median of 21 batches of {reps}");
    let only = args.iter().find_map(|a| a.strip_prefix("--only="));
    for level in Level::supported().into_iter().filter(|l| only.is_none_or(|o| o == l.name())) {
        let mut s = GemmScratch::new();
        let mut run = |c: &mut [f32]| gemm_rows_at(level, &mut s, 0..m, m, n, k, 1.0, &a, ta, &b, tb, 0.0, c);
        run(&mut c);
        report(level.name(), flop, reps, |_| run(&mut c));
    }
    let mut packs = vec![("packed-B", PackedB::new())];
    pack_b(&mut packs[0].1, m, n, k, &b, tb);
    if bf16_supported() {
        let mut p = PackedB::new();
        assert!(pack_b_bf16(&mut p, n, k, &b, tb));
        packs.push(("bf16", p));
    }
    // `--copies=N`: as many packings of B, used in turn, so that each product reads B from
    // beyond L2 as a model's weights are read (N x 4 MiB past a 2 MiB L2, say).
    let copies: usize = args.iter().find_map(|a| a.strip_prefix("--copies=")).map_or(0, |n| n.parse().expect("N"));
    if copies > 0 {
        let packed: Vec<PackedB> = (0..copies)
            .map(|_| {
                let mut p = PackedB::new();
                pack_b(&mut p, m, n, k, &b, tb);
                p
            })
            .collect();
        let mut s = GemmScratch::new();
        report(&format!("cold-B x{copies}"), flop, reps.max(copies), |r| {
            let g = Gemm { packed_b: Some(&packed[r % copies]), ..Gemm::new(m, n, k, &a, ta, &b, tb) };
            g.compute(&mut s, 0..m, 0..n, &mut c);
        });
    }
    // `--cold-c=N`: B packed once, C one of N buffers in turn (N x C past L2), as a model
    // writes each product into a buffer it has not touched since the Run before.
    let cold_c: usize = args.iter().find_map(|a| a.strip_prefix("--cold-c=")).map_or(0, |n| n.parse().expect("N"));
    if cold_c > 0 {
        let mut cs: Vec<Vec<f32>> = (0..cold_c).map(|_| vec![0.0f32; m * n]).collect();
        let g = Gemm { packed_b: Some(&packs[0].1), ..Gemm::new(m, n, k, &a, ta, &b, tb) };
        let mut s = GemmScratch::new();
        report(&format!("cold-C x{cold_c}"), flop, reps.max(cold_c), |r| {
            g.compute(&mut s, 0..m, 0..n, &mut cs[r % cold_c])
        });
    }
    // Both operands packed beforehand (a packed A strip: one pointer for its rows).
    {
        let mut pa = rivet_kernels::PackedA::new();
        let g0 = Gemm { packed_b: Some(&packs[0].1), ..Gemm::new(m, n, k, &a, ta, &b, tb) };
        rivet_kernels::pack_a_for(&mut pa, &g0);
        let g = Gemm { packed_a: Some(&pa), ..g0 };
        let mut s = GemmScratch::new();
        report("packed-AB", flop, reps, |_| g.compute(&mut s, 0..m, 0..n, &mut c));
    }
    for (name, packed) in &packs {
        let g = Gemm { packed_b: Some(packed), ..Gemm::new(m, n, k, &a, ta, &b, tb) };
        let mut s = GemmScratch::new();
        report(name, flop, reps, |_| g.compute(&mut s, 0..m, 0..n, &mut c));
    }
    if threads {
        let level = Level::detected();
        let half = m / 2;
        let (mut s0, mut s1) = (GemmScratch::new(), GemmScratch::new());
        let mut best = 0.0f64;
        for _ in 0..21 {
            let t = Instant::now();
            for _ in 0..reps {
                let (c0, c1) = c.split_at_mut(half * n);
                std::thread::scope(|sc| {
                    sc.spawn(|| gemm_rows_at(level, &mut s0, 0..half, m, n, k, 1.0, &a, ta, &b, tb, 0.0, c0));
                    gemm_rows_at(level, &mut s1, half..m, m, n, k, 1.0, &a, ta, &b, tb, 0.0, c1);
                });
            }
            best = best.max(flop * reps as f64 / t.elapsed().as_secs_f64() / 1e9);
        }
        println!("2 threads (gemm_rows, spawn per call) best {best:.1}");
    }
}

/// Prints `name` with the best and the median GFLOP/s of 21 batches of `runs` calls of
/// `run(i)` (`i` the call's index in its batch), each `flop` floating-point operations.
fn report(name: &str, flop: f64, runs: usize, mut run: impl FnMut(usize)) {
    let mut g: Vec<f64> = (0..21)
        .map(|_| {
            let t = Instant::now();
            for i in 0..runs {
                run(i);
            }
            flop * runs as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    g.sort_by(f64::total_cmp);
    println!("{name:<8} {:8.1} {:8.1}", g[20], g[10]);
}
