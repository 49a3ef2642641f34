//! Kernel-only timing of the 8-bit products:
//! `cargo run --release -p rivet-kernels --example qgemm_bench [M N K]`.
//!
//! Prints the best and median GOP/s (two ops a multiply-add) over repeated runs, one
//! thread, default 64x768x768, for the products the quantized ops run: B packed once
//! (a constant weight) and A packed on every run (an activation), on the VNNI tiles where
//! the CPU has AVX-512 VNNI and on the portable tile.

use rivet_kernels::qgemm::{qgemm, QOut, QPackedA, QPackedB};
use std::time::Instant;

fn stats(label: &str, ops: f64, reps: usize, mut run: impl FnMut()) {
    run();
    let mut g: Vec<f64> = (0..21)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                run();
            }
            ops * reps as f64 / t.elapsed().as_secs_f64() / 1e9
        })
        .collect();
    g.sort_by(f64::total_cmp);
    println!("  {label:<34} {:>8.1} {:>8.1}", g[20], g[10]);
}

fn main() {
    let dims: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (m, n, k) = match dims[..] {
        [m, n, k] => (m, n, k),
        _ => (64, 768, 768),
    };
    let a: Vec<u8> = (0..m * k).map(|i| (i * 7 % 251) as u8).collect();
    let b: Vec<i8> = (0..k * n).map(|i| ((i * 5 % 241) as i32 - 120) as i8).collect();
    let ops = 2.0 * (m * n * k) as f64;
    let reps = ((2e8 / ops) as usize).max(1);
    println!(
        "{m}x{n}x{k}: GOP/s best / median of 21 batches of {reps} (VNNI: {})",
        rivet_kernels::qgemm::vnni_supported()
    );
    let mut pb = QPackedB::new();
    pb.pack(&b, k, n, n, &[3]);
    let mut pa = QPackedA::new();
    let mut c = vec![0i32; m * n];
    stats("packed B, A packed each run", ops, reps, || {
        pa.pack(&a, m, k, k, &[17]);
        qgemm(&pa, &pb, 0..n, QOut::I32(&mut c), n);
    });
    pa.pack(&a, m, k, k, &[17]);
    stats("both packed", ops, reps, || qgemm(&pa, &pb, 0..n, QOut::I32(&mut c), n));
    // The im2col of a 3x3 convolution of 32 channels on 64x64, padded by 1.
    let g = rivet_kernels::conv::Window3d {
        input: [1, 64, 64],
        out: [1, 64, 64],
        kernel: [1, 3, 3],
        stride: [1; 3],
        dilation: [1; 3],
        pad_begin: [0, 1, 1],
    };
    let img: Vec<u8> = (0..32 * 64 * 64).map(|i| (i * 7 % 251) as u8).collect();
    let mut pi = QPackedB::new();
    let len = (32 * 9 * 64 * 64) as f64;
    stats("im2col 32x3x3 on 64x64 (G bytes/s)", len, 5, || pi.pack_conv_input(&img, 32, &g, 7));
    let plain: Vec<u8> = (0..288 * 4096).map(|i| (i * 7 % 251) as u8).collect();
    stats("pack of a plain 288x4096 B (G bytes/s)", len, 5, || pi.pack(&plain, 288, 4096, 4096, &[7]));
    let mut w = QPackedA::new();
    let wt: Vec<i8> = (0..32 * 288).map(|i| (i % 200) as i8).collect();
    w.pack_conv_weights(&wt, 32, 32, 9, &[0]);
    let mut out = vec![0i32; 32 * 4096];
    stats("its product 32x4096x288 (GOP/s)", 2.0 * 32.0 * 4096.0 * 288.0, 5, || {
        qgemm(&w, &pi, 0..4096, QOut::I32(&mut out), 4096)
    });
    // The same product written as requantized bytes (one scale a row), as the quantized
    // convolutions write it, against i32 sums.
    let mut bytes = vec![0u8; m * n];
    let scales: Vec<f32> = (0..m).map(|i| 0.001 * (i % 5 + 1) as f32).collect();
    let rq = rivet_kernels::qgemm::Requant { scale: &scales, per_row: true, bias: None, zy: 3 };
    stats("both packed, requantized to u8", ops, reps, || qgemm(&pa, &pb, 0..n, QOut::U8(&mut bytes, rq), n));
    // The elementwise steps around the products: per element, as G-elements/s.
    let x: Vec<f32> = (0..m * k).map(|i| ((i * 13 % 97) as f32 - 48.0) * 0.05).collect();
    let mut y = vec![0u8; m * k];
    let len = (m * k) as f64;
    let reps = ((1e8 / len) as usize).max(1);
    stats("quantize (G elements/s)", len, reps, || rivet_kernels::qgemm::quantize(&x, 0.02, 128, &mut y));
    stats("min_max (G elements/s)", len, reps, || {
        std::hint::black_box(rivet_kernels::qgemm::min_max(&x));
    });
}
