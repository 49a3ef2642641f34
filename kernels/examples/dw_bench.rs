//! Kernel-only timing of depthwise convolutions on the windows MobileNetV2 and
//! EfficientNet-B0 have: `cargo run --release -p rivet-kernels --example dw_bench`.
//!
//! Prints us per call (best of several batches), with `RIVET_KERNELS_LEVEL` choosing
//! the build.

use rivet_kernels::depthwise::depthwise_planes;
use rivet_kernels::nn::Epilogue;
use std::time::Instant;

#[path = "timing/mod.rs"]
mod timing;

fn main() {
    // (channels, plane side, kernel, stride)
    let cases = [
        (576, 14, 3, 1),
        (144, 28, 3, 1),
        (672, 14, 5, 1),
        (1152, 7, 5, 1),
        (672, 14, 5, 2),
        (1152, 7, 3, 1),
        (240, 28, 5, 1),
        (144, 56, 3, 1),
        (96, 112, 3, 2),
        (32, 112, 3, 1),
        (192, 28, 3, 1),
        (144, 56, 3, 2),
        (144, 56, 5, 2),
        (144, 56, 5, 1),
        (240, 28, 5, 2),
        (384, 14, 3, 1),
        (576, 14, 3, 2),
        (32, 112, 5, 1),
        (32, 112, 5, 2),
    ];
    for (c, hw, k, s) in cases {
        let out = (hw + 2 * (k / 2) - k) / s + 1;
        let g = timing::square_window(hw, k, s, k / 2);
        assert_eq!(g.out[2], out);
        let x: Vec<f32> = (0..c * hw * hw).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
        let w: Vec<f32> = (0..c * k * k).map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5).collect();
        let bias: Vec<f32> = (0..c).map(|i| i as f32 / c as f32).collect();
        let mut y = vec![0.0f32; c * out * out];
        let mut scratch = Vec::new();
        let mut best = f64::MAX;
        for _ in 0..7 {
            let iters = 50;
            let t = Instant::now();
            for _ in 0..iters {
                depthwise_planes(&x, &w, Some(&bias), 0..c, c, &g, &mut y, &Epilogue::default(), &mut scratch);
            }
            best = best.min(t.elapsed().as_secs_f64() / iters as f64);
        }
        let macs = (c * out * out * k * k) as f64;
        println!("{c}x{hw}x{hw} k{k} s{s}: {:8.1} us  {:6.1} GMAC/s", best * 1e6, macs / best / 1e9);
    }
}
