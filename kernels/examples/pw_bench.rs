//! Kernel-only timing of a small plane's 1x1 convolution as the transposed product
//! `Y^T = X^T W^T` (the EP's `pointwise_conv`): the packing of `X^T`, the product and the
//! transpose back, us per call (best of several batches).
//! `cargo run --release -p rivet-kernels --example pw_bench`

use rivet_kernels::nn::{self, Gemm, GemmScratch, PackedA, PackedB};

#[path = "timing/mod.rs"]
mod timing;

/// Microseconds per call, best of 7 batches of 50.
fn best(f: impl FnMut()) -> f64 {
    timing::best_us(7, 50, f)
}

fn main() {
    for (k, n, p) in [
        (512, 64, 169),
        (256, 48, 169),
        (64, 256, 169),
        (512, 1000, 169),
        (672, 112, 196),
        (960, 160, 49),
        (96, 576, 196),
        (64, 384, 196),
        (576, 96, 196),
        (384, 64, 196),
        (160, 960, 49),
        (320, 1280, 49),
    ] {
        let x: Vec<f32> = (0..k * p).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
        let w: Vec<f32> = (0..n * k).map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5).collect();
        let mut packed_b = PackedB::new();
        nn::pack_b(&mut packed_b, p, n, k, &w, true);
        let product = Gemm { packed_b: Some(&packed_b), ..Gemm::new(p, n, k, &x, true, &w, true) };
        let mut packed_a = PackedA::new();
        let pack = best(|| nn::pack_a_for(&mut packed_a, &product));
        let product = Gemm { packed_a: Some(&packed_a), ..product };
        let (mut s, mut yt, mut y) = (GemmScratch::new(), vec![0.0f32; p * n], vec![0.0f32; p * n]);
        let mul = best(|| product.compute(&mut s, 0..p, 0..n, &mut yt));
        let tr = best(|| nn::transpose_2d(&yt, p, n, &mut y));
        let gflops = 2.0 * (k * n * p) as f64 / mul / 1e3;
        println!(
            "{k}->{n} on {p}: pack A {pack:6.1} us, product {mul:6.1} us ({gflops:5.1} GFLOP/s), transpose {tr:5.1} us"
        );
    }
}
