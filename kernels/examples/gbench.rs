//! Kernel-only timing of one product: whole, and split the ways `ep/src/products.rs` splits
//! it (rows over one packed B, columns over one packed A), the parts run in turn and on two
//! threads:
//! `cargo run --release -p rivet-kernels --example gbench M N K [TASKS]`.

use rivet_kernels::nn::{
    gemm_block, gemm_cols_packed_a, gemm_rows_packed, gemm_with, pack_a, pack_b, GemmScratch, PackedA, PackedB,
};

#[path = "timing/mod.rs"]
mod timing;

/// Microseconds per call, best of 30 batches of 10.
fn best(f: impl FnMut()) -> f64 {
    timing::best_us(30, 10, f)
}

fn main() {
    let a: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().expect("a number")).collect();
    let (m, n, k, tasks) = (a[0], a[1], a[2], a.get(3).copied().unwrap_or(2));
    let av: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
    let bv: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.1).collect();
    let mut c = vec![0.0f32; m * n];
    let mut s = GemmScratch::new();
    let whole = best(|| gemm_with(&mut s, m, n, k, 1.0, &av, false, &bv, false, 0.0, &mut c));
    let mut packed = PackedB::new();
    let pack = best(|| pack_b(&mut packed, m, n, k, &bv, false));
    let rows = m.div_ceil(tasks).next_multiple_of(rivet_kernels::nn::row_tile(m, n));
    let split = best(|| {
        pack_b(&mut packed, m, n, k, &bv, false);
        for (t, part) in c.chunks_mut(rows * n).enumerate() {
            let r0 = t * rows;
            gemm_rows_packed(&mut s, r0..r0 + part.len() / n, m, n, k, 1.0, &av, false, &bv, false, &packed, 0.0, part);
        }
    });
    println!("{m}x{n}x{k}: whole {whole:.1} us, pack B {pack:.1} us, packed + {tasks} row tasks in turn {split:.1} us");
    let width = n.div_ceil(tasks).next_multiple_of(32);
    let mut blocks = vec![vec![0.0f32; m * width]; tasks];
    let cols = best(|| {
        for (t, blk) in blocks.iter_mut().enumerate() {
            let cols = t * width..((t + 1) * width).min(n);
            let w = cols.len();
            gemm_block(&mut s, 0..m, cols, m, n, k, 1.0, &av, false, &bv, false, 0.0, &mut blk[..m * w]);
        }
    });
    let mut pa = PackedA::new();
    let cols_pa = best(|| {
        pack_a(&mut pa, m, n, k, &av, false);
        for (t, blk) in blocks.iter_mut().enumerate() {
            let cols = t * width..((t + 1) * width).min(n);
            let w = cols.len();
            gemm_cols_packed_a(&mut s, cols, m, n, k, 1.0, &av, false, &pa, &bv, false, 0.0, &mut blk[..m * w]);
        }
    });
    println!("  {tasks} column blocks in turn, A packed once: {cols_pa:.1} us");
    let copy = best(|| {
        for (t, blk) in blocks.iter().enumerate() {
            let cols = t * width..((t + 1) * width).min(n);
            let w = cols.len();
            for (row, src) in c.chunks_exact_mut(n).zip(blk[..m * w].chunks_exact(w)) {
                row[cols.clone()].copy_from_slice(src);
            }
        }
    });
    println!("  {tasks} column blocks in turn {cols:.1} us, then copied {copy:.1} us");
    two_threads(m, n, k, &av, &bv);
}

/// Two threads: each packing B itself (`gemm_rows`), or sharing one packed B.
#[allow(dead_code)]
pub fn two_threads(m: usize, n: usize, k: usize, av: &[f32], bv: &[f32]) {
    use rivet_kernels::nn::gemm_rows;
    let rows = m.div_ceil(2).next_multiple_of(rivet_kernels::nn::row_tile(m, n));
    let mut c = vec![0.0f32; m * n];
    let mut scratch = [GemmScratch::new(), GemmScratch::new()];
    let own = best(|| {
        std::thread::scope(|sc| {
            for ((t, part), s) in c.chunks_mut(rows * n).enumerate().zip(scratch.iter_mut()) {
                sc.spawn(move || {
                    let r0 = t * rows;
                    gemm_rows(s, r0..r0 + part.len() / n, m, n, k, 1.0, av, false, bv, false, 0.0, part);
                });
            }
        })
    });
    let mut packed = PackedB::new();
    let shared = best(|| {
        pack_b(&mut packed, m, n, k, bv, false);
        let packed = &packed;
        std::thread::scope(|sc| {
            for ((t, part), s) in c.chunks_mut(rows * n).enumerate().zip(scratch.iter_mut()) {
                sc.spawn(move || {
                    let r0 = t * rows;
                    gemm_rows_packed(s, r0..r0 + part.len() / n, m, n, k, 1.0, av, false, bv, false, packed, 0.0, part);
                });
            }
        })
    });
    println!("{m}x{n}x{k} on 2 threads: each packing B {own:.1} us, one shared packed B {shared:.1} us (thread spawns included)");
}
