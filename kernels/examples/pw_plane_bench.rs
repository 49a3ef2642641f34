//! Kernel-only timing of 1x1 convolutions on large planes (the plain product `Y = W X`,
//! W packed once, X read in place) with a bias and Relu fused, as the EP runs SqueezeNet's
//! and MobileNet's expands: `cargo run --release -p rivet-kernels --example pw_plane_bench`.
//! Prints us per call (best of several batches) and GFLOP/s; `CASE` keeps the cases whose
//! name contains it.

use rivet_kernels::nn::{self, Activation, Bias, Epilogue, Gemm, GemmScratch, PackedA};
use rivet_kernels::UnaryOp;

#[path = "timing/mod.rs"]
mod timing;

fn main() {
    // (name, in channels, out channels, positions)
    let cases = [
        ("squeezenet 16->64 on 55x55", 16, 64, 3025),
        ("squeezenet 32->128 on 27x27", 32, 128, 729),
        ("squeezenet 48->192 on 13x13", 48, 192, 169),
        ("squeezenet 64->256 on 13x13", 64, 256, 169),
        ("squeezenet 128->16 on 55x55", 128, 16, 3025),
        ("mobilenet 16->96 on 112x112", 16, 96, 12544),
        ("mobilenet 24->144 on 56x56", 24, 144, 3136),
        ("resnet 64->256 on 56x56", 64, 256, 3136),
        ("mobilenet 96->576 on 14x14", 96, 576, 196),
        ("mobilenet 64->384 on 14x14", 64, 384, 196),
        ("mobilenet 576->96 on 14x14", 576, 96, 196),
        ("mobilenet 384->64 on 14x14", 384, 64, 196),
        ("mobilenet 160->960 on 7x7", 160, 960, 49),
        ("mobilenet 960->160 on 7x7", 960, 160, 49),
        ("mobilenet 320->1280 on 7x7", 320, 1280, 49),
    ];
    let only = std::env::var("CASE").ok();
    let relu = Some(Activation::Unary(UnaryOp::Relu));
    for (name, k, m, n) in cases {
        if only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            continue;
        }
        let x: Vec<f32> = (0..k * n).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
        let w: Vec<f32> = (0..m * k).map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5).collect();
        let bias: Vec<f32> = (0..m).map(|i| (i % 7) as f32 * 0.01 - 0.03).collect();
        let mut packed = PackedA::new();
        nn::pack_a(&mut packed, m, n, k, &w, false);
        let epilogue = Epilogue { bias: Bias::Rows(&bias), act: relu, ..Epilogue::default() };
        let product = Gemm { packed_a: Some(&packed), epilogue, ..Gemm::new(m, n, k, &w, false, &x, false) };
        let (mut s, mut y) = (GemmScratch::new(), vec![0.0f32; m * n]);
        let us = timing::best_us(9, 40, || product.compute(&mut s, 0..m, 0..n, &mut y));
        let bare = Gemm { epilogue: Epilogue::default(), ..product };
        let us_bare = timing::best_us(9, 40, || bare.compute(&mut s, 0..m, 0..n, &mut y));
        let gflops = 2.0 * (k * m * n) as f64 / us / 1e3;
        let sum: f64 = y.iter().map(|&v| v as f64).sum();
        println!("{name:30} {us:7.1} us ({gflops:5.1} GFLOP/s), without bias and Relu {us_bare:7.1} us  [{sum:.3e}]");
    }
}
