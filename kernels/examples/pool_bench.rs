//! Kernel-only timing of the float pools on the windows the light CNNs have:
//! `cargo run --release -p rivet-kernels --example pool_bench`.
//!
//! Prints us per call (best of several batches) and ns per output.

use rivet_kernels::conv::{pool, Pool, Window3d};
use std::time::Instant;

fn window(c_hw: [usize; 2], k: usize, s: usize, pad: [usize; 2]) -> Window3d {
    let hw = c_hw[1];
    let out = (hw + pad[0] + pad[1] - k) / s + 1;
    Window3d {
        input: [1, hw, hw],
        out: [1, out, out],
        kernel: [1, k, k],
        stride: [1, s, s],
        dilation: [1; 3],
        pad_begin: [0, pad[0], pad[0]],
    }
}

/// A case: its name, channels and input size, kernel, stride, padding before and after.
type Case = (&'static str, [usize; 2], usize, usize, [usize; 2], Pool);

fn main() {
    let cases: [Case; 9] = [
        ("avg 192x28 k3s1 p0", [192, 28], 3, 1, [0, 0], Pool::Average { count_pad: false }),
        ("max 64x112 k3s2 p0/1", [64, 112], 3, 2, [0, 1], Pool::Max),
        ("max 64x111 k3s2", [64, 111], 3, 2, [0, 0], Pool::Max),
        ("max 64x112 k3s2 p1", [64, 112], 3, 2, [1, 1], Pool::Max),
        ("avg 192x28 k3s1 p1", [192, 28], 3, 1, [1, 1], Pool::Average { count_pad: false }),
        ("avg 576x14 k3s1 p1", [576, 14], 3, 1, [1, 1], Pool::Average { count_pad: false }),
        ("avg 128x56 k2s2", [128, 56], 2, 2, [0, 0], Pool::Average { count_pad: false }),
        ("avg 24x56 k3s2 p1", [24, 56], 3, 2, [1, 1], Pool::Average { count_pad: false }),
        ("max 1024x7 k3s1 p1", [1024, 7], 3, 1, [1, 1], Pool::Max),
    ];
    // One case from the command line: `max|avg|avgpad C HW K S PAD_BEGIN PAD_END`.
    let args: Vec<String> = std::env::args().skip(1).collect();
    let one: Vec<Case>;
    let cases: &[Case] = if args.len() == 7 {
        let n: Vec<usize> = args[1..].iter().map(|a| a.parse().expect("a number")).collect();
        let mode = match args[0].as_str() {
            "max" => Pool::Max,
            "avgpad" => Pool::Average { count_pad: true },
            _ => Pool::Average { count_pad: false },
        };
        one = vec![("command line", [n[0], n[1]], n[2], n[3], [n[4], n[5]], mode)];
        &one
    } else {
        &cases
    };
    for &(name, [c, hw], k, s, pad, mode) in cases {
        let g = window([c, hw], k, s, pad);
        let x: Vec<f32> = (0..c * hw * hw).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
        let mut y = vec![0.0; c * g.out[1] * g.out[2]];
        let mut best = f64::MAX;
        for _ in 0..std::env::var("BATCHES").ok().and_then(|v| v.parse().ok()).unwrap_or(7) {
            let t = Instant::now();
            for _ in 0..10 {
                pool(&x, c, &g, mode, [0, pad[1], pad[1]], &mut y);
            }
            best = best.min(t.elapsed().as_secs_f64() / 10.0);
        }
        // The floor: reading the input and writing the output once.
        let mut z = vec![0.0f32; x.len()];
        let mut floor = f64::MAX;
        for _ in 0..7 {
            let t = Instant::now();
            for _ in 0..10 {
                z.copy_from_slice(&x);
                let n = y.len();
                y.copy_from_slice(&z[..n]);
                std::hint::black_box(&mut y);
            }
            floor = floor.min(t.elapsed().as_secs_f64() / 10.0);
        }
        println!(
            "{name:<24} {:8.1} us {:6.2} ns/output  copy {:6.1} us",
            best * 1e6,
            best * 1e9 / y.len() as f64,
            floor * 1e6
        );
    }
}

#[allow(dead_code)]
fn copy_floor() {}
