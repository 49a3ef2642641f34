//! Kernel-only timing of a one-row product (a decode step's projection) against the
//! memory bandwidth of reading the same bytes:
//! `cargo run --release -p rivet-kernels --example gemv_bench [N K PARTS]`.
//!
//! B (K×N) is packed as a constant weight; the product is computed whole and split into
//! 2..=PARTS column blocks (run in turn, as a one-thread session runs a split), from enough
//! copies of B that none stays in cache. Env `UNPACKED=1` reads B unpacked.

use rivet_kernels::nn;
use std::time::Instant;

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().expect("a number")).collect();
    let (n, k, most) = match args[..] {
        [n, k, p] => (n, k, p),
        _ => (4096, 512, 2),
    };
    let a: Vec<f32> = (0..k).map(|i| (i % 7) as f32 * 0.1).collect();
    let copies = (64 << 20) / (n * k * 4) + 1;
    let bs: Vec<Vec<f32>> = (0..copies).map(|c| (0..n * k).map(|i| ((i + c) % 13) as f32 * 0.01).collect()).collect();
    let packed: Vec<nn::PackedB> = bs
        .iter()
        .map(|b| {
            let mut p = nn::PackedB::new();
            nn::pack_b(&mut p, 1, n, k, b, false);
            p
        })
        .collect();
    let unpacked = std::env::var_os("UNPACKED").is_some();
    let nr = packed[0].panel_width().unwrap_or(1);
    let (mut c, mut s) = (vec![0.0f32; n], nn::GemmScratch::new());
    let mut sink = 0.0f32;
    for round in 0..5 {
        // The bytes of B read alone (a sum), for the bandwidth the product can reach.
        let t = Instant::now();
        for b in &bs {
            let mut lanes = [0.0f32; 16];
            for chunk in b.as_chunks::<16>().0 {
                lanes.iter_mut().zip(chunk).for_each(|(l, v)| *l += v);
            }
            sink += lanes.iter().sum::<f32>();
        }
        let read = t.elapsed().as_secs_f64() / copies as f64;
        let mut line = format!("round {round}: {n}x{k}: read {:.1} GB/s", (n * k * 4) as f64 / read / 1e9);
        for parts in 1..=most {
            let width = if parts == 1 { n } else { n.div_ceil(parts).next_multiple_of(nr) };
            let reps = 4 * copies;
            let t = Instant::now();
            for r in 0..reps {
                let mut g = nn::Gemm::new(1, n, k, &a, false, &bs[r % copies], false);
                if !unpacked {
                    g.packed_b = Some(&packed[r % copies]);
                }
                for j in (0..n).step_by(width) {
                    let cols = j..(j + width).min(n);
                    let len = cols.len();
                    g.compute(&mut s, 0..1, cols, &mut c[j..j + len]);
                }
            }
            let dt = t.elapsed().as_secs_f64() / reps as f64;
            line += &format!("  {parts} part(s) {:.1} us {:.1} GB/s", dt * 1e6, (n * k * 4) as f64 / dt / 1e9);
        }
        println!("{line}");
    }
    std::hint::black_box((sink, c));
}
