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
    // The same convolution without the im2col (phase planes, a panel at a time).
    let mut planes = rivet_kernels::qgemm::ConvPlanes::new();
    stats("implicit 32x3x3 on 64x64 (GOP/s)", 2.0 * 32.0 * 4096.0 * 288.0, 5, || {
        planes.pack(&img, 32, &g, 7);
        planes.product(&w, QOut::I32(&mut out))
    });
    stats("im2col + product (GOP/s)", 2.0 * 32.0 * 4096.0 * 288.0, 5, || {
        pi.pack_conv_input(&img, 32, &g, 7);
        qgemm(&w, &pi, 0..4096, QOut::I32(&mut out), 4096)
    });
    // ResNet's 64 -> 64 3x3 on 56x56, requantized, both ways.
    let g56 = rivet_kernels::conv::Window3d {
        input: [1, 56, 56],
        out: [1, 56, 56],
        kernel: [1, 3, 3],
        stride: [1; 3],
        dilation: [1; 3],
        pad_begin: [0, 1, 1],
    };
    let img56: Vec<u8> = (0..64 * 56 * 56).map(|i| (i * 7 % 251) as u8).collect();
    let wt56: Vec<i8> = (0..64 * 576).map(|i| (i % 200) as i8 - 100).collect();
    let mut w56 = QPackedA::new();
    w56.pack_conv_weights(&wt56, 64, 64, 9, &[0]);
    let s56: Vec<f32> = (0..64).map(|i| 0.0001 * (i % 5 + 1) as f32).collect();
    let rq56 = rivet_kernels::qgemm::Requant { scale: &s56, per_row: true, bias: None, zy: 3 };
    let mut y56 = vec![0u8; 64 * 3136];
    let ops56 = 2.0 * 64.0 * 3136.0 * 576.0;
    stats("64->64 3x3 56x56 implicit (GOP/s)", ops56, 3, || {
        planes.pack(&img56, 64, &g56, 7);
        planes.product(&w56, QOut::U8(&mut y56, rq56))
    });
    stats("64->64 3x3 56x56 im2col (GOP/s)", ops56, 3, || {
        pi.pack_conv_input(&img56, 64, &g56, 7);
        qgemm(&w56, &pi, 0..3136, QOut::U8(&mut y56, rq56), 3136)
    });
    // MobileNetV2's 16 -> 96 1x1 on 112x112, requantized, both ways.
    let g1 = rivet_kernels::conv::Window3d {
        input: [1, 112, 112],
        out: [1, 112, 112],
        kernel: [1, 1, 1],
        stride: [1; 3],
        dilation: [1; 3],
        pad_begin: [0; 3],
    };
    let img1: Vec<u8> = (0..16 * 12544).map(|i| (i * 7 % 251) as u8).collect();
    let wt1: Vec<i8> = (0..96 * 16).map(|i| (i % 200) as i8 - 100).collect();
    let mut w1 = QPackedA::new();
    w1.pack_conv_weights(&wt1, 96, 16, 1, &[0]);
    let mut y1 = vec![0u8; 96 * 12544];
    let rq1 = rivet_kernels::qgemm::Requant { scale: &s56[..1], per_row: true, bias: None, zy: 3 };
    let ops1 = 2.0 * 96.0 * 12544.0 * 16.0;
    stats("16->96 1x1 112x112 implicit (GOP/s)", ops1, 3, || {
        planes.pack(&img1, 16, &g1, 7);
        planes.product(&w1, QOut::U8(&mut y1, rq1))
    });
    stats("  its pack alone (GOP/s)", ops1, 3, || planes.pack(&img1, 16, &g1, 7));
    stats("16->96 1x1 112x112 im2col (GOP/s)", ops1, 3, || {
        pi.pack_conv_input(&img1, 16, &g1, 7);
        qgemm(&w1, &pi, 0..12544, QOut::U8(&mut y1, rq1), 12544)
    });
    stats("  its pack alone (GOP/s)", ops1, 3, || pi.pack_conv_input(&img1, 16, &g1, 7));
    stats("  its product alone (GOP/s)", ops1, 3, || qgemm(&w1, &pi, 0..12544, QOut::U8(&mut y1, rq1), 12544));
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
