//! Timing and set-up shared by the kernel examples (each uses some of it).
#![allow(dead_code)]

use rivet_kernels::conv::{window_geometry, Padding, Window3d};
use std::time::Instant;

/// A `k` x `k` window at stride `s` on planes of `hw` x `hw`, padded by `p` on every side.
pub fn square_window(hw: usize, k: usize, s: usize, p: usize) -> Window3d {
    let pads = Padding::Explicit([0, p, p, 0, p, p]);
    window_geometry([1, hw, hw], [1, k, k], [1, s, s], [1; 3], pads, false).expect("a window that fits its plane").0
}

/// The best of `batches` batches of `iters` calls of `f`, in microseconds per call.
pub fn best_us(batches: usize, iters: usize, mut f: impl FnMut()) -> f64 {
    (0..batches)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..iters {
                f();
            }
            t.elapsed().as_secs_f64() / iters as f64
        })
        .fold(f64::INFINITY, f64::min)
        * 1e6
}

/// The median of 31 calls of `f` (after one to warm up), in microseconds.
pub fn median_us(mut f: impl FnMut()) -> f64 {
    f();
    let mut t: Vec<f64> = (0..31)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[15]
}

/// An FNV-1a hash of `bytes`' values, to compare builds' outputs.
pub fn hash_bytes<T: Copy + Into<i64>>(bytes: &[T]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &v| (h ^ v.into() as u64).wrapping_mul(0x100000001b3))
}
