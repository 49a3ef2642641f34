//! Kernel-only timing of LayerNormalization and RMSNormalization rows, the reductions
//! (along rows and along columns) and the global pools, with a hash of each output's bits
//! (so that two builds can be compared for the same bits):
//! `cargo run --release -p rivet-kernels --example norm_bench`.
use std::time::Instant;
/// A hash of the outputs' bits.
fn h(y: &[f32]) -> u64 {
    y.iter().fold(0u64, |h, v| h.wrapping_mul(31).wrapping_add(v.to_bits() as u64))
}
fn main() {
    for (rows, d) in [(64usize, 256usize), (197, 384), (1, 256), (128, 512), (3, 1000)] {
        let x: Vec<f32> = (0..rows * d).map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.1 + (i % 5) as f32 * 3.0).collect();
        let s: Vec<f32> = (0..d).map(|i| 1.0 + i as f32 * 0.01).collect();
        let mut y = vec![0.0f32; rows * d];
        for rms in [true, false] {
            let mut best = f64::MAX;
            for _ in 0..200 {
                let t = Instant::now();
                rivet_kernels::nn::layer_norm(&x, &s, None, d, 1e-6, rms, &mut y);
                best = best.min(t.elapsed().as_secs_f64());
            }
            println!("{rows}x{d} rms {rms}: {:.2} us hash {:x}", best * 1e6, h(&y));
        }
        for op in [
            rivet_kernels::nn::ReduceOp::Mean,
            rivet_kernels::nn::ReduceOp::Sum,
            rivet_kernels::nn::ReduceOp::Max,
            rivet_kernels::nn::ReduceOp::SumSquare,
            rivet_kernels::nn::ReduceOp::Prod,
        ] {
            for reduced in [[false, true], [true, false]] {
                let n = if reduced[1] { rows } else { d };
                let mut y = vec![0.0f32; n];
                let mut best = f64::MAX;
                for _ in 0..100 {
                    let t = Instant::now();
                    rivet_kernels::nn::reduce(&x, &[rows, d], &reduced, op, &mut y);
                    best = best.min(t.elapsed().as_secs_f64());
                }
                println!("  reduce {op:?} {reduced:?}: {:.2} us hash {:x}", best * 1e6, h(&y));
            }
        }
        let mut y = vec![0.0f32; rows];
        for max in [false, true] {
            let t = Instant::now();
            rivet_kernels::nn::global_pool(&x, rows, d, max, &mut y);
            println!("  gpool {max}: {:.2} us hash {:x}", t.elapsed().as_secs_f64() * 1e6, h(&y));
        }
    }
}
