//! Kernel-only timing of the ways the plan runs an m×n×k product with a constant B:
//! `cargo run --release -p rivet-kernels --example gemm_paths [M N K]`.
use rivet_kernels::nn;
use std::time::Instant;

fn main() {
    let d: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().expect("a number")).collect();
    let (m, n, k) = match d[..] {
        [m, n, k] => (m, n, k),
        _ => (64, 688, 256),
    };
    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.1).collect();
    let b: Vec<f32> = (0..k * n).map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.1).collect();
    let mut c = vec![0.0f32; m * n];
    let mut s = nn::GemmScratch::new();
    let mut pb = nn::PackedB::new();
    nn::pack_b(&mut pb, m, n, k, &b, false);
    let mut pa = nn::PackedA::new();
    let flop = 2.0 * (m * n * k) as f64;
    let reps = ((1e8 / flop) as usize).max(1);
    let mut blocks = vec![vec![0.0f32; m * n]; 2];
    let nr = pb.panel_width().unwrap();
    let width = n.div_ceil(2).max(64).next_multiple_of(32).next_multiple_of(nr);
    for round in 0..5 {
        let mut line = format!("{m}x{n}x{k} round {round}:");
        for path in 0..5 {
            let t = Instant::now();
            for _ in 0..reps {
                match path {
                    0 => nn::Gemm::new(m, n, k, &a, false, &b, false).compute(&mut s, 0..m, 0..n, &mut c),
                    1 => nn::Gemm { packed_b: Some(&pb), ..nn::Gemm::new(m, n, k, &a, false, &b, false) }.compute(
                        &mut s,
                        0..m,
                        0..n,
                        &mut c,
                    ),
                    _ => {
                        let g = nn::Gemm { packed_b: Some(&pb), ..nn::Gemm::new(m, n, k, &a, false, &b, false) };
                        let g = if path == 3 {
                            nn::pack_a_for(&mut pa, &g);
                            nn::Gemm { packed_a: Some(&pa), ..g }
                        } else {
                            g
                        };
                        for (t, blk) in blocks.iter_mut().enumerate() {
                            let cols = t * width..((t + 1) * width).min(n);
                            let w = cols.len();
                            g.compute(&mut s, 0..m, cols.clone(), &mut blk[..m * w]);
                            for (row, src) in c.chunks_exact_mut(n).zip(blk[..m * w].chunks_exact(w)) {
                                row[cols.clone()].copy_from_slice(src);
                            }
                        }
                    }
                }
            }
            let dt = t.elapsed().as_secs_f64() / reps as f64;
            line += &format!(
                "  [{}] {:.1} GF/s",
                ["unpacked", "packed B", "cols", "cols+A", "B+A whole"][path],
                flop / dt / 1e9
            );
        }
        println!("{line}");
    }
}
