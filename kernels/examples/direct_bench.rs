//! Kernel-only timing of the direct convolution on CNN stems and other shallow layers:
//! `cargo run --release -p rivet-kernels --example direct_bench`. Prints us per call
//! (best of several batches) and GFLOP/s. With `BF16` set, the bfloat16 kernel (its
//! input's rounding, which each call needs, timed as the "copy"); with `AMX` set, the
//! AMX one where it takes the case (the others are skipped); with `CASE` set, only the
//! cases whose name contains it; with `SHAPE="C M HW K S P"` (channels in and out, input
//! height = width, kernel, stride, padding), that convolution alone.

use rivet_kernels::conv::{window_geometry, Padding};
use rivet_kernels::direct::{
    amx_planes, amx_planes_folded, fits_amx, fold_filters, folded, folds, pack_filters, pack_filters_amx,
    pack_filters_bf16, pad_planes, pair_planes, pair_source, source, Direct,
};
use rivet_kernels::{Activation, Epilogue, UnaryOp};
use std::time::Instant;

/// A case: name, input channels, output channels, input size, kernel, stride, padding.
type Case = (&'static str, usize, usize, usize, usize, usize, usize);

/// Relu fused when `RELU` is set, as the CNNs' stems have it; SiLU when `SILU` is (YOLO's).
fn epilogue() -> Epilogue<'static> {
    let silu = std::env::var_os("SILU").map(|_| Activation::Silu);
    let act = std::env::var_os("RELU").map(|_| Activation::Unary(UnaryOp::Relu)).or(silu);
    Epilogue { act, ..Epilogue::default() }
}

fn main() {
    let cases: [Case; 29] = [
        ("64->64 3x3 p1 on 56", 64, 64, 56, 3, 1, 1),
        ("128->128 3x3 p1 on 28", 128, 128, 28, 3, 1, 1),
        ("256->256 3x3 p1 on 14", 256, 256, 14, 3, 1, 1),
        ("64->256 1x1 on 56", 64, 256, 56, 1, 1, 0),
        ("squeezenet 3->64 3x3 s2", 3, 64, 224, 3, 2, 0),
        ("resnet 3->64 7x7 s2 p3", 3, 64, 224, 7, 2, 3),
        ("mobilenet 3->32 3x3 s2 p1", 3, 32, 224, 3, 2, 1),
        ("yolo 3->16 3x3 s1 p1", 3, 16, 416, 3, 1, 1),
        ("16->32 3x3 s2 p1 on 80", 16, 32, 80, 3, 2, 1),
        ("512->512 3x3 p1 on 7", 512, 512, 7, 3, 1, 1),
        ("512->512 3x3 s2 p1 on 14", 512, 512, 14, 3, 2, 1),
        ("256->256 3x3 s2 p1 on 28", 256, 256, 28, 3, 2, 1),
        ("128->128 3x3 s2 p1 on 56", 128, 128, 56, 3, 2, 1),
        ("32->64 3x3 s2 p1 on 40", 32, 64, 40, 3, 2, 1),
        ("160->64 3x3 p1 on 10", 160, 64, 10, 3, 1, 1),
        ("96->48 3x3 p1 on 20", 96, 48, 20, 3, 1, 1),
        ("64->32 3x3 p1 on 20", 64, 32, 20, 3, 1, 1),
        ("64->16 3x3 p1 on 20", 64, 16, 20, 3, 1, 1),
        ("512->2048 1x1 on 7", 512, 2048, 7, 1, 1, 0),
        ("1024->256 1x1 on 14", 1024, 256, 14, 1, 1, 0),
        ("256->64 1x1 on 56", 256, 64, 56, 1, 1, 0),
        ("fire 16->64 3x3 p1 on 55", 16, 64, 55, 3, 1, 1),
        ("fire 32->128 3x3 p1 on 27", 32, 128, 27, 3, 1, 1),
        ("fire 48->192 3x3 p1 on 13", 48, 192, 13, 3, 1, 1),
        ("fire 64->256 3x3 p1 on 13", 64, 256, 13, 3, 1, 1),
        ("yolo 32->32 3x3 p1 on 40", 32, 32, 40, 3, 1, 1),
        ("yolo 96->48 3x3 p1 on 20", 96, 48, 20, 3, 1, 1),
        ("yolo 160->64 3x3 p1 on 10", 160, 64, 10, 3, 1, 1),
        ("yolo 32->64 3x3 s2 p1 on 40", 32, 64, 40, 3, 2, 1),
    ];
    let only = std::env::var("CASE").ok();
    // `SHAPE="C M HW K S P"`: that one convolution instead of the cases.
    let shape: Option<Vec<usize>> =
        std::env::var("SHAPE").ok().map(|s| s.split_whitespace().map(|v| v.parse().expect("a number")).collect());
    let custom = shape.as_ref().map(|d| [("SHAPE", d[0], d[1], d[2], d[3], d[4], d[5])]);
    let cases: &[Case] = custom.as_ref().map_or(&cases[..], |c| &c[..]);
    for &(name, cin, cout, hw, k, s, p) in cases {
        if only.as_ref().is_some_and(|o| !name.contains(o.as_str())) {
            continue;
        }
        let pads = Padding::Explicit([0, p, p, 0, p, p]);
        let (g, _) = window_geometry([1, hw, hw], [1, k, k], [1, s, s], [1, 1, 1], pads, false).unwrap();
        let kk = cin * k * k;
        let x: Vec<f32> = (0..cin * hw * hw).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
        let w: Vec<f32> = (0..cout * kk).map(|i| ((i * 104729) % 1000) as f32 / 5000.0 - 0.1).collect();
        let bias = vec![0.1f32; cout];
        let mut packed = Vec::new();
        pack_filters(&w, cout, 1, kk, &mut packed);
        let src = source(&g, cin);
        let mut padded = Vec::new();
        let xs: &[f32] = if src.copy {
            pad_planes(&x, cin, &g, src, &mut padded);
            &padded
        } else {
            &x
        };
        let amx = std::env::var_os("AMX").is_some();
        let fold = amx && folds(&g, cin, cout, 1);
        if amx && !fits_amx(&g, cin, cout) && !fold {
            continue;
        }
        let gf = folded(&g);
        let (gd, cd) = if fold { (&gf, cin * k) } else { (&g, cin) };
        let bf16 = std::env::var_os("BF16").is_some() || amx;
        let (mut pairs, mut packed_bf16) = (Vec::new(), Vec::new());
        let planes: &[f32] = if fold {
            pack_filters_amx(&fold_filters(&w, cout, cin, &g), cout, 1, cd, k, &mut packed_bf16);
            amx_planes_folded(&x, cin, &g, &mut pairs)
        } else if amx {
            pack_filters_amx(&w, cout, 1, cin, k * k, &mut packed_bf16);
            amx_planes(&x, cin, &g, &mut pairs)
        } else {
            pack_filters_bf16(&w, cout, 1, cin, k * k, &mut packed_bf16);
            pair_planes(&x, cin, &g, &mut pairs);
            &pairs
        };
        // The filters from a 64-byte boundary, as the plugin keeps them (float32 filters
        // 16 bytes off a line ran 10-20% slower: each filter vector split over two lines).
        let mut aligned = rivet_kernels::lines::Aligned::default();
        aligned.assign(&packed_bf16);
        let mut aligned_f32 = rivet_kernels::lines::Aligned::default();
        aligned_f32.assign(&packed);
        let run = if bf16 {
            Direct {
                x: planes,
                src: pair_source(if amx { gd } else { &g }),
                cg: if amx { cd } else { cin },
                g: if amx { gd } else { &g },
                w: &aligned,
                bias: Some(&bias),
                epilogue: epilogue(),
            }
        } else {
            Direct { x: xs, src, cg: cin, g: &g, w: &aligned_f32, bias: Some(&bias), epilogue: epilogue() }
        };
        let mut y = vec![0.0; cout * g.positions()];
        let mut carry = Vec::new();
        let mut best = f64::MAX;
        for _ in 0..15 {
            let t = Instant::now();
            for _ in 0..5 {
                if amx {
                    run.run_amx(0..cout, &mut y, &mut carry);
                } else if bf16 {
                    run.run_bf16(0..cout, &mut y, &mut carry);
                } else {
                    run.run(0..cout, &mut y, &mut carry);
                }
            }
            best = best.min(t.elapsed().as_secs_f64() / 5.0);
        }
        let mut copy = f64::MAX;
        let mut pairs_again = Vec::new();
        for _ in 0..15 {
            let t = Instant::now();
            if fold {
                amx_planes_folded(&x, cin, &g, &mut pairs_again);
            } else if amx {
                amx_planes(&x, cin, &g, &mut pairs_again);
            } else if bf16 {
                pair_planes(&x, cin, &g, &mut pairs_again);
            } else {
                pad_planes(&x, cin, &g, src, &mut padded);
            }
            copy = copy.min(t.elapsed().as_secs_f64());
        }
        let flops = 2.0 * (cout * kk * g.positions()) as f64;
        // A hash of the output's bits, to compare builds.
        let hash = y.iter().fold(0xcbf29ce484222325u64, |h, v| (h ^ v.to_bits() as u64).wrapping_mul(0x100000001b3));
        let (split, copy) =
            (if src.split && !bf16 { "split" } else { "" }, if src.copy || bf16 { copy * 1e6 } else { 0.0 });
        println!(
            "{name:<28} {:8.1} us {:6.1} GFLOP/s  padded copy {copy:6.1} us {split:5} {hash:016x}",
            best * 1e6,
            flops / best / 1e9
        );
    }
}
