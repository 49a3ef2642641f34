//! Column splits of the GEMM: one row times a packed B (`gemv_packed`) against the unpacked matrix-vector
//! product, bit for bit, on every level and panel width, over column ranges starting on a
//! panel, column blocks (NC) and depth blocks, with and without an epilogue; blocks of
//! a product cut on its tile's panels, with beta.

use rivet_kernels::{pack_b_at, Activation, Bias, Epilogue, Gemm, GemmScratch, Level, PackedB, Scale, UnaryOp};

use rivet_kernels::test_values as values;

/// Column ranges starting on a panel of `nr`: the whole, every panel start to the end, and
/// short ranges with ends inside, on and past a panel.
fn ranges(n: usize, nr: usize) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    out.push(0..n);
    for s in (0..n).step_by(nr) {
        for end in [s + 1, s + nr - 1, s + nr, s + nr + 1, s + 3 * nr + 5, n - 1, n] {
            let end = end.min(n);
            if end > s {
                out.push(s..end);
            }
        }
    }
    out
}

fn same(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn one_row_by_a_packed_b_gives_the_unpacked_bits_on_every_range_level_and_panel() {
    let ns = [2, 3, 16, 17, 31, 33, 47, 48, 49, 97, 511, 512, 513, 528, 529, 1100, 1537];
    let ks = [1, 2, 127, 128, 129, 256, 257, 300];
    let mut widths = std::collections::BTreeSet::new();
    let mut checked = 0usize;
    for level in Level::supported() {
        let mut scratch = GemmScratch::new();
        for &n in &ns {
            for &k in &ks {
                let (a, b) = (values(k, (n * 3 + k) as u64), values(k * n, (n + 7 * k) as u64));
                let c_seed = values(n, 11);
                for pack_m in [1, 8, 14, 64] {
                    let mut pb = PackedB::new();
                    // Stale data first (a larger product), as a reused buffer holds.
                    pack_b_at(level, &mut pb, pack_m, n + 40, k + 3, &values((n + 40) * (k + 3), 5), false);
                    pack_b_at(level, &mut pb, pack_m, n, k, &b, false);
                    let nr = pb.panel_width().expect("packed");
                    widths.insert((level.name(), nr));
                    for (alpha, beta) in [(1.0f32, 0.0f32), (-0.5, 1.0), (2.0, 0.25)] {
                        let mut c0 = c_seed.clone();
                        if beta == 0.0 {
                            c0.iter_mut().step_by(3).for_each(|v| *v = f32::NAN);
                        }
                        let plain = Gemm { alpha, beta, ..Gemm::new(1, n, k, &a, false, &b, false) };
                        let packed = Gemm { packed_b: Some(&pb), ..plain };
                        for cols in ranges(n, nr) {
                            let mut want = c0[cols.clone()].to_vec();
                            plain.compute_at(level, &mut scratch, 0..1, cols.clone(), &mut want);
                            let mut got = c0[cols.clone()].to_vec();
                            packed.compute_at(level, &mut scratch, 0..1, cols.clone(), &mut got);
                            assert!(
                                same(&got, &want),
                                "{level:?} nr {nr} (packed for m={pack_m}) 1x{n}x{k} alpha {alpha} beta {beta} cols {cols:?}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    eprintln!("checked {checked} ranges; panel widths {widths:?}");
    // Both AVX-512 tiles, AVX2's and the portable one were exercised where the CPU has them.
    let have = |l: &str, nr: usize| widths.contains(&(l, nr));
    assert!(have("generic", 8));
    if Level::supported().contains(&Level::Avx2) {
        assert!(have("avx2", 16));
    }
    if Level::supported().contains(&Level::Avx512) {
        assert!(have("avx512", 32) && have("avx512", 48), "{widths:?}");
    }
}

#[test]
fn one_row_by_a_packed_b_with_an_epilogue_gives_the_unpacked_bits_on_partial_ranges() {
    for level in Level::supported() {
        let mut scratch = GemmScratch::new();
        for (n, k) in [(70, 40), (530, 129), (1100, 260), (97, 257)] {
            let (a, b, c0) = (values(k, 1), values(k * n, 2), values(n, 3));
            let (bias, rb, res) = (values(n, 4), values(1, 6), values(n, 5));
            let epilogues = [
                Epilogue {
                    scale: Some(Scale::Div(3.0)),
                    bias: Bias::Cols(&bias),
                    act: Some(Activation::Unary(UnaryOp::Gelu)),
                    residual: Some(&res),
                    after: Some(Activation::Unary(UnaryOp::Relu)),
                },
                Epilogue {
                    bias: Bias::Rows(&rb),
                    act: Some(Activation::Silu),
                    residual: Some(&res),
                    ..Epilogue::default()
                },
                Epilogue {
                    bias: Bias::Cols(&bias),
                    act: Some(Activation::Clip { min: -0.2, max: 0.4 }),
                    ..Epilogue::default()
                },
            ];
            for pack_m in [1, 14] {
                let mut pb = PackedB::new();
                pack_b_at(level, &mut pb, pack_m, n, k, &b, false);
                let nr = pb.panel_width().expect("packed");
                for (e, epilogue) in epilogues.iter().enumerate() {
                    for beta in [0.0, 1.0, 0.5] {
                        let plain =
                            Gemm { alpha: 1.5, beta, epilogue: *epilogue, ..Gemm::new(1, n, k, &a, false, &b, false) };
                        let packed = Gemm { packed_b: Some(&pb), ..plain };
                        for cols in ranges(n, nr) {
                            let mut want = c0[cols.clone()].to_vec();
                            plain.compute_at(level, &mut scratch, 0..1, cols.clone(), &mut want);
                            let mut got = c0[cols.clone()].to_vec();
                            packed.compute_at(level, &mut scratch, 0..1, cols.clone(), &mut got);
                            assert!(
                                same(&got, &want),
                                "{level:?} nr {nr} 1x{n}x{k} epilogue {e} beta {beta} cols {cols:?}"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Blocks of columns cut on the panels of the tile the whole product takes
/// (`nn::col_tile`; here AVX-512's 8 x 48 one) keep the whole product's bits with a beta
/// that is not 0, 1 or a power of two. (Cut at 160, a multiple of 32 but not of 48, a full
/// tile of the whole product became an edge tile, whose `store` rounds `beta * c` apart:
/// the bits differed. The other tests use beta 0.25, for which `beta * c` is exact.)
#[test]
fn column_blocks_on_the_tiles_panels_keep_the_whole_products_bits_with_beta() {
    // 64 x 300 takes the 8 x 48 tile on AVX-512 (300/336 of it used against 64/70 *
    // 300/320); the ep splits it by columns at 192 on two cores (160 rounded to 48), a
    // multiple of every build's panel (8, 16, 32, 48).
    let (m, n, k) = (64, 300, 128);
    let (a, b, c0) = (values(m * k, 1), values(k * n, 2), values(m * n, 3));
    for level in Level::supported() {
        for beta in [0.3f32, 0.7] {
            let g = Gemm { beta, ..Gemm::new(m, n, k, &a, false, &b, false) };
            let mut whole = c0.clone();
            g.compute_at(level, &mut GemmScratch::new(), 0..m, 0..n, &mut whole);
            assert_eq!(160usize.next_multiple_of(rivet_kernels::nn::col_tile(m, n)) % 48, 0);
            for cols in [0..192, 192..n] {
                let pick =
                    |from: &[f32]| -> Vec<f32> { (0..m).flat_map(|i| from[i * n..][cols.clone()].to_vec()).collect() };
                let mut block = pick(&c0);
                g.compute_at(level, &mut GemmScratch::new(), 0..m, cols.clone(), &mut block);
                let want = pick(&whole);
                let differ = block.iter().zip(&want).filter(|(x, y)| x.to_bits() != y.to_bits()).count();
                assert_eq!(differ, 0, "{level:?} {m}x{n}x{k} beta {beta} columns {cols:?}: {differ} elements differ");
            }
        }
    }
}
