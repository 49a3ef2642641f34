//! Kernel-only timing of the Winograd convolution's parts on ResNet's 3x3 layers:
//! `cargo run --release -p rivet-kernels --example wino_bench`. Prints us per call (best
//! of several batches) of the whole convolution and of its input transforms alone.

use rivet_kernels::conv::{window_geometry, Padding};
use rivet_kernels::nn::Epilogue;
use rivet_kernels::winograd::{self, Filters, Scratch, Winograd};
use std::time::Instant;

#[path = "timing/mod.rs"]
mod timing;

/// Microseconds per call, best of 7 batches of 20.
fn best(f: impl FnMut()) -> f64 {
    timing::best_us(7, 20, f)
}

fn main() {
    for (c, hw) in [(64, 56), (128, 28), (256, 14), (16, 55), (64, 27)] {
        let pads = Padding::Explicit([0, 1, 1, 0, 1, 1]);
        let (g, _) = window_geometry([1, hw, hw], [1, 3, 3], [1; 3], [1; 3], pads, false).unwrap();
        if !winograd::fits(&g, c, c) {
            println!("{c}x{hw}: not on Winograd");
            continue;
        }
        let x: Vec<f32> = (0..c * hw * hw).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
        let w: Vec<f32> = (0..c * c * 9).map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5).collect();
        let mut f = Filters::default();
        winograd::transform_filters(&w, c, c, &g, &mut f);
        let run = Winograd { x: &x, g: &g, filters: &f, epilogue: Epilogue::default() };
        let mut y = vec![0.0f32; c * g.positions()];
        let mut s = Scratch::default();
        let th = run.tiles()[0];
        let whole = best(|| assert!(run.run(0..th, &mut y, &mut s)));
        let input = best(|| {
            let mut r0 = 0;
            while r0 < th {
                let block = run.block(r0);
                assert!(run.input(block.clone(), &mut s.v, &mut s.pad));
                r0 = block.end;
            }
        });
        // Two threads as the EP splits it: each block's input transform on this thread,
        // then its products and outputs by halves of the output channels.
        let positions = g.positions();
        let half = (c / 2).next_multiple_of(run.strip_rows());
        let mut s2 = Scratch::default();
        let two = best(|| {
            let mut r0 = 0;
            while r0 < th {
                let block = run.block(r0);
                assert!(run.input(block.clone(), &mut s.v, &mut s.pad));
                let (lo, hi) = y.split_at_mut(half * positions);
                let v = &s.v;
                let (m, gemm) = (&mut s.m, &mut s.gemm);
                std::thread::scope(|sc| {
                    let b = block.clone();
                    let run = &run;
                    let (m2, gemm2) = (&mut s2.m, &mut s2.gemm);
                    sc.spawn(move || run.output(b, half..c, 0, v, hi, m2, gemm2));
                    run.output(block.clone(), 0..half, 0, v, lo, m, gemm);
                });
                r0 = block.end;
            }
        });
        let halfonly = best(|| {
            let mut r0 = 0;
            while r0 < th {
                let block = run.block(r0);
                let (lo, _) = y.split_at_mut(half * positions);
                run.output(block.clone(), 0..half, 0, &s.v, lo, &mut s.m, &mut s.gemm);
                r0 = block.end;
            }
        });
        let fullonly = best(|| {
            let mut r0 = 0;
            while r0 < th {
                let block = run.block(r0);
                run.output(block.clone(), 0..c, 0, &s.v, &mut y, &mut s.m, &mut s.gemm);
                r0 = block.end;
            }
        });
        // Both halves at once on two threads, 50 calls each without sync: contention only.
        let contended = {
            let v = &s.v;
            let (lo, hi) = y.split_at_mut(half * positions);
            let run = &run;
            let mut ts = [Scratch::default(), Scratch::default()];
            let [t0, t1] = &mut ts;
            let t = Instant::now();
            std::thread::scope(|sc| {
                sc.spawn(move || {
                    for _ in 0..50 {
                        let mut r0 = 0;
                        while r0 < th {
                            let block = run.block(r0);
                            run.output(block.clone(), half..c, 0, v, hi, &mut t1.m, &mut t1.gemm);
                            r0 = block.end;
                        }
                    }
                });
                for _ in 0..50 {
                    let mut r0 = 0;
                    while r0 < th {
                        let block = run.block(r0);
                        run.output(block.clone(), 0..half, 0, v, lo, &mut t0.m, &mut t0.gemm);
                        r0 = block.end;
                    }
                }
            });
            t.elapsed().as_secs_f64() / 50.0 * 1e6
        };
        println!("  both halves at once, per call {contended:8.1} us");
        // Split by tile rows instead: each thread transforms and multiplies its own rows.
        let mid = th / 2;
        let out_w = g.out[2];
        let rows_a = (run.side() * mid).min(g.out[1]);
        let mut ya = vec![0.0f32; c * rows_a * out_w];
        let mut yb = vec![0.0f32; c * (g.out[1] - rows_a) * out_w];
        let spatial_one = best(|| assert!(run.run(0..mid, &mut ya, &mut s)));
        let spatial = {
            let run = &run;
            let mut ts = [Scratch::default(), Scratch::default()];
            let [t0, t1] = &mut ts;
            let (ya, yb) = (&mut ya, &mut yb);
            let t = Instant::now();
            std::thread::scope(|sc| {
                sc.spawn(move || {
                    for _ in 0..50 {
                        run.run(mid..th, yb, t1);
                    }
                });
                for _ in 0..50 {
                    run.run(0..mid, ya, t0);
                }
            });
            t.elapsed().as_secs_f64() / 50.0 * 1e6
        };
        println!("  by tile rows: first half alone {spatial_one:8.1} us, both at once {spatial:8.1} us");
        println!("  outputs alone: all channels {fullonly:8.1} us, half {halfonly:8.1} us");
        println!(
            "{c}x{hw}: whole {whole:8.1} us, input transforms {input:8.1} us ({:.0}%), two threads {two:8.1} us ({:.2}x)",
            100.0 * input / whole,
            whole / two
        );
    }
}
