//! Timing shared by the kernel examples.

use std::time::Instant;

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
