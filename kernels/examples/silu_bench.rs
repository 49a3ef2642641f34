//! Kernel-only timing of the SiLU epilogue (`x * sigmoid(x)`, the exporters' Sigmoid + Mul
//! folded into a Conv or MatMul) against Sigmoid alone, on 1 Mi floats in blocks of 64 Ki:
//! `cargo run --release -p rivet-kernels --example silu_bench`.

use rivet_kernels::nn::{Activation, Epilogue};
use rivet_kernels::UnaryOp;
use std::time::Instant;

fn main() {
    let n = 1 << 20;
    let x: Vec<f32> = (0..n).map(|i| ((i * 7919) % 2000) as f32 / 200.0 - 5.0).collect();
    let mut y = x.clone();
    for (name, act) in [("sigmoid", Activation::Unary(UnaryOp::Sigmoid)), ("silu", Activation::Silu)] {
        let e = Epilogue { act: Some(act), ..Epilogue::default() };
        let mut best = f64::MAX;
        for _ in 0..15 {
            y.copy_from_slice(&x);
            let t = Instant::now();
            for block in y.chunks_mut(1 << 16) {
                e.apply_rows(block, 1 << 16, 0..1);
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("{name}: {:.1} us per 1 Mi floats", best * 1e6);
    }
}
