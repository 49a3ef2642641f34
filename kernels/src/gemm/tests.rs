//! SGEMM against an f64 reference: edge sizes, all transposes, alpha/beta, row splits,
//! every supported level.

use super::*;

/// Deterministic values in [-1, 1).
fn values(n: usize, seed: u64) -> Vec<f32> {
    crate::test_values(n, seed)
}

struct Case {
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    beta: f32,
    ta: bool,
    tb: bool,
}

/// The f64 result and, per element, a bound on the f32 rounding error.
fn reference(t: &Case, a: &[f32], b: &[f32], c0: &[f32]) -> (Vec<f64>, Vec<f64>) {
    let (m, n, k) = (t.m, t.n, t.k);
    let mut out = vec![0.0; m * n];
    let mut bound = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            let (mut s, mut abs) = (0.0f64, 0.0f64);
            for p in 0..k {
                let av = f64::from(if t.ta { a[p * m + i] } else { a[i * k + p] });
                let bv = f64::from(if t.tb { b[j * k + p] } else { b[p * n + j] });
                s += av * bv;
                abs += (av * bv).abs();
            }
            let alpha = f64::from(t.alpha);
            let cv = if t.beta == 0.0 { 0.0 } else { f64::from(t.beta) * f64::from(c0[i * n + j]) };
            out[i * n + j] = alpha * s + cv;
            bound[i * n + j] = (k as f64 + 3.0) * f64::from(f32::EPSILON) * (alpha.abs() * abs + cv.abs()) + 1e-30;
        }
    }
    (out, bound)
}

fn check(level: Level, scratch: &mut GemmScratch, t: &Case) {
    let (m, n, k) = (t.m, t.n, t.k);
    let a = values(m * k, (m * 31 + k) as u64);
    let b = values(k * n, (n * 17 + k) as u64 + 1);
    let mut c0 = values(m * n, 7);
    if t.beta == 0.0 {
        c0.iter_mut().step_by(3).for_each(|v| *v = f32::NAN);
    }
    let (want, bound) = reference(t, &a, &b, &c0);
    let mut c = c0.clone();
    gemm_rows_at(level, scratch, 0..m, m, n, k, t.alpha, &a, t.ta, &b, t.tb, t.beta, &mut c);
    for (idx, ((&got, &w), &e)) in c.iter().zip(&want).zip(&bound).enumerate() {
        let err = (f64::from(got) - w).abs();
        assert!(
            err <= e,
            "{level:?} {m}x{n}x{k} ta={} tb={} alpha={} beta={}: c[{}][{}] = {got}, want {w} (err {err:e} > {e:e})",
            t.ta,
            t.tb,
            t.alpha,
            t.beta,
            idx / n.max(1),
            idx % n.max(1)
        );
    }
    // Any split into row ranges gives the same bits as the whole product.
    if m > 2 {
        let mut split = c0.clone();
        let cuts = [0, 1, m / 3, m / 3 + 5.min(m - m / 3), m];
        for w in cuts.windows(2) {
            let part = &mut split[w[0] * n..w[1] * n];
            gemm_rows_at(level, scratch, w[0]..w[1], m, n, k, t.alpha, &a, t.ta, &b, t.tb, t.beta, part);
        }
        assert!(split.iter().zip(&c).all(|(x, y)| x.to_bits() == y.to_bits()), "{level:?} {m}x{n}x{k} split");
    }
    // Blocks of columns (and rows), each computed alone into its own buffer: the same
    // bits again (a matrix-vector product of one row too). The buffers start as C's
    // blocks, for beta.
    if n > 1 {
        let col_cuts = [0, n / 3, n / 3 + 33.min(n - n / 3), n];
        for rw in [[0, m / 2], [m / 2, m], [0, m]] {
            for cw in col_cuts.windows(2) {
                let (rows, cols) = (rw[0]..rw[1], cw[0]..cw[1]);
                let pick = |from: &[f32]| -> Vec<f32> {
                    rows.clone().flat_map(|i| from[i * n..][cols.clone()].to_vec()).collect()
                };
                let want = pick(&c);
                let same = |got: &[f32]| got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                let (r, cl) = (rows.clone(), cols.clone());
                let mut block = pick(&c0);
                gemm_block_at(level, scratch, r, cl, m, n, k, t.alpha, &a, t.ta, None, &b, t.tb, t.beta, &mut block);
                assert!(same(&block), "{level:?} {m}x{n}x{k} block {rows:?} x {cols:?}");
                if rows == (0..m) {
                    // A packed once for all the column blocks (over a larger product's buffer).
                    let mut pa = PackedA::new();
                    pack_a_at(level, &mut pa, m + 5, n, k + 3, &values((m + 5) * (k + 3), 4), t.ta);
                    // Packed for another n (so maybe another tile), as conv filters are.
                    pack_a_at(level, &mut pa, m, 3 * n + 1, k, &a, t.ta);
                    let (pa, cl) = (Some(&pa), cols.clone());
                    let mut block = pick(&c0);
                    gemm_block_at(
                        level,
                        scratch,
                        0..m,
                        cl,
                        m,
                        n,
                        k,
                        t.alpha,
                        &a,
                        t.ta,
                        pa,
                        &b,
                        t.tb,
                        t.beta,
                        &mut block,
                    );
                    assert!(same(&block), "{level:?} {m}x{n}x{k} columns {cols:?} with packed A");
                }
            }
        }
    }
    // B packed once and shared by the row ranges: the same bits again. The packing
    // reuses a buffer left by a larger product, so stale data past this B is there.
    let mut packed = PackedB::new();
    pack_b_at(level, &mut packed, m + 3, n + 50, k + 9, &values((k + 9) * (n + 50), 3), t.tb);
    pack_b_at(level, &mut packed, m, n, k, &b, t.tb);
    let mut shared = c0.clone();
    let cuts = [0, m / 2, m];
    for w in cuts.windows(2) {
        let part = &mut shared[w[0] * n..w[1] * n];
        gemm_rows_packed(scratch, w[0]..w[1], m, n, k, t.alpha, &a, t.ta, &b, t.tb, &packed, t.beta, part);
    }
    assert!(shared.iter().zip(&c).all(|(x, y)| x.to_bits() == y.to_bits()), "{level:?} {m}x{n}x{k} packed B");
    // B packed for another m (its panel width then fixes the tile) and read by blocks of
    // columns from whole panels, alone and with A packed for that tile: the same bits
    // (for one row too: a matrix-vector product reads the panels in memory order).
    if n > 1 {
        let mut pb = PackedB::new();
        pack_b_at(level, &mut pb, m + 7, n, k, &b, t.tb);
        let nr = pb.panel_width().expect("packed");
        let g = Gemm { alpha: t.alpha, beta: t.beta, packed_b: Some(&pb), ..Gemm::new(m, n, k, &a, t.ta, &b, t.tb) };
        let mut pa = PackedA::new();
        pack_a_for(&mut pa, &g);
        let cut = (n / 2).next_multiple_of(nr).min(n);
        for packed_a in [None, Some(&pa)] {
            let g = Gemm { packed_a, ..g };
            for cols in [0..cut, cut..n] {
                let pick =
                    |from: &[f32]| -> Vec<f32> { (0..m).flat_map(|i| from[i * n..][cols.clone()].to_vec()).collect() };
                let mut block = pick(&c0);
                g.compute_at(level, scratch, 0..m, cols.clone(), &mut block);
                let want = pick(&c);
                let same = block.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(
                    same,
                    "{level:?} {m}x{n}x{k} columns {cols:?} of a packed B (A packed: {})",
                    packed_a.is_some()
                );
            }
        }
    }
}

fn sweep(shapes: &[(usize, usize, usize)]) {
    for level in Level::supported() {
        let mut scratch = GemmScratch::new();
        for &(m, n, k) in shapes {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                // (1.5, -0.75): products whose roundings differ between one fused merge
                // and two steps, so a row moved between a full and an edge tile shows.
                for (alpha, beta) in [(1.0, 0.0), (-0.5, 1.0), (2.0, 0.25), (1.5, -0.75)] {
                    check(level, &mut scratch, &Case { m, n, k, alpha, beta, ta, tb });
                }
            }
        }
    }
}

#[test]
fn tiny_and_degenerate_sizes() {
    let shapes: Vec<_> = (0..64).map(|i| (i % 4, i / 4 % 4, i / 16)).collect();
    sweep(&shapes);
}

#[test]
fn edge_tiles_around_every_microkernel() {
    // Around the tile sizes of all levels (4×8, 6×16, 14×32 and 8×48) and the depth
    // block (256); 64×144 and 16×96 take AVX-512's 8×48 tile, the others its 14×32.
    sweep(&[
        (8, 48, 5),
        (9, 49, 3),
        (16, 96, 7),
        (64, 144, 20),
        (4, 8, 5),
        (5, 9, 1),
        (6, 16, 7),
        (7, 17, 3),
        (13, 31, 2),
        (14, 32, 9),
        (15, 33, 4),
        (29, 65, 11),
        (28, 64, 256),
        (17, 23, 257),
        (1, 100, 300),
        (100, 1, 300),
        (9, 7, 600),
        // A depth of 1024: rows 4 KiB apart, read in place on the x86 tiles (8 x 48: 8
        // rows; 14 x 32 for fewer than 128 columns), or on the 14-row tile copied `kc`
        // apart first (`copies_a_strip`).
        (29, 65, 1024),
        (28, 96, 1024),
        (28, 128, 1024),
        (42, 160, 2048),
        // Last strips of 5 to 8 rows on the 14-row tile: AVX-512's 8-row kernel (a 1x1
        // convolution's 49 positions, 64 tokens), across a depth block too.
        (22, 40, 30),
        (49, 64, 300),
        (64, 96, 130),
        (19, 33, 7),
        // Last strips cut in two (`strip_parts`), as whole products: 65 rows on the 14-row
        // tile (65 tokens: 4 x 14 + 9 -> 8 + 1), 12 rows (8 + 4), 26 (14 + 12), 20 (14 +
        // 6 -> 4 + 2), 11 (8 + 3); on the 8 x 48 tile 13 rows (8 + 5 -> 4 + 1) and 6 (4 +
        // 2); some across a depth block (256).
        (65, 64, 300),
        (12, 64, 300),
        (26, 64, 140),
        (11, 31, 9),
        (20, 32, 300),
        (13, 48, 20),
        (6, 96, 9),
    ]);
}

#[test]
fn column_blocks_wider_than_nc() {
    // NC is 512 (x86) / 1024 (portable): cross both, with a depth block boundary too.
    // One row (a decode step's projection) reads a packed B's blocks in memory order.
    sweep(&[(3, 1100, 5), (15, 530, 260), (1, 1100, 260), (1, 530, 129), (1, 1376, 40)]);
}

#[test]
fn gemm_and_gemm_with_agree_and_nan_in_c_is_ignored_with_beta_zero() {
    let (m, n, k) = (37, 45, 70);
    let (a, b) = (values(m * k, 1), values(k * n, 2));
    let mut c1 = vec![f32::NAN; m * n];
    let mut c2 = vec![f32::INFINITY; m * n];
    gemm(m, n, k, 1.5, &a, false, &b, true, 0.0, &mut c1);
    gemm_with(&mut GemmScratch::new(), m, n, k, 1.5, &a, false, &b, true, 0.0, &mut c2);
    assert!(c1.iter().all(|v| v.is_finite()));
    assert!(c1.iter().zip(&c2).all(|(x, y)| x.to_bits() == y.to_bits()));
    // k == 0: beta * C, zeros with beta 0 even over NaN.
    let mut c = vec![f32::NAN, 2.0];
    gemm(1, 2, 0, 1.0, &[], false, &[], false, 0.0, &mut c);
    assert_eq!(c, [0.0, 0.0]);
    let mut c = vec![1.0, 2.0];
    gemm(2, 1, 0, 1.0, &[], true, &[], true, 3.0, &mut c);
    assert_eq!(c, [3.0, 6.0]);
}

#[test]
#[should_panic(expected = "packed for another product")]
fn b_packed_for_another_shape_panics() {
    let mut packed = PackedB::new();
    pack_b(&mut packed, 2, 3, 4, &values(12, 1), false);
    let mut c = vec![0.0; 6];
    let (a, b) = (values(8, 2), values(12, 3));
    gemm_rows_packed(&mut GemmScratch::new(), 0..2, 2, 3, 4, 1.0, &a, false, &b, true, &packed, 0.0, &mut c);
}

#[test]
#[should_panic(expected = "outside")]
fn rows_past_m_panic() {
    let mut c = vec![0.0; 4];
    gemm_rows(&mut GemmScratch::new(), 1..3, 2, 2, 1, 1.0, &[1.0, 2.0], false, &[1.0, 2.0], false, 0.0, &mut c);
}

#[test]
fn a_packed_a_keeps_its_tile_for_a_product_that_would_take_the_other() {
    // 64 × 32 takes AVX-512's 14-row tile and 64 × 144 its 8-row one: A packed for the
    // first serves the second with the same bits.
    let (m, n, k) = (64, 144, 40);
    let (a, b) = (values(m * k, 5), values(k * n, 6));
    for level in Level::supported() {
        let mut want = vec![0.0; m * n];
        gemm_rows_at(level, &mut GemmScratch::new(), 0..m, m, n, k, 1.0, &a, false, &b, false, 0.0, &mut want);
        let mut pa = PackedA::new();
        pack_a_at(level, &mut pa, m, 32, k, &a, false);
        let mut got = vec![0.0; m * n];
        let s = &mut GemmScratch::new();
        gemm_block_at(level, s, 0..m, 0..n, m, n, k, 1.0, &a, false, Some(&pa), &b, false, 0.0, &mut got);
        assert!(got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()), "{level:?}");
    }
}

/// The unfused chain: the product, then each epilogue part as its own pass.
fn unfused(level: Level, g: &Gemm<'_>, c0: &[f32]) -> Vec<f32> {
    let (m, n) = (g.m, g.n);
    let mut c = c0.to_vec();
    gemm_rows_at(
        level,
        &mut GemmScratch::new(),
        0..m,
        m,
        n,
        g.k,
        g.alpha,
        g.a,
        g.trans_a,
        g.b,
        g.trans_b,
        g.beta,
        &mut c,
    );
    let act = |x: &mut [f32], act: Option<Activation>| match act {
        Some(Activation::Unary(op)) => op.apply_inplace_at(level, x),
        Some(Activation::Clip { min, max }) => x.iter_mut().for_each(|v| *v = v.max(min).min(max)),
        // The unfused pair: a Sigmoid op over the whole tensor, then a Mul.
        Some(Activation::Silu) => {
            let mut g = x.to_vec();
            crate::UnaryOp::Sigmoid.apply_inplace_at(level, &mut g);
            x.iter_mut().zip(&g).for_each(|(v, &s)| *v *= s);
        }
        None => {}
    };
    match g.epilogue.scale {
        Some(Scale::Mul(s)) => c.iter_mut().for_each(|v| *v *= s),
        Some(Scale::Div(s)) => c.iter_mut().for_each(|v| *v /= s),
        None => {}
    }
    for (i, row) in c.chunks_exact_mut(n.max(1)).enumerate().take(m) {
        match g.epilogue.bias {
            Bias::None => {}
            Bias::Rows(b) => row.iter_mut().for_each(|v| *v += b[i]),
            Bias::Cols(b) => row.iter_mut().zip(b).for_each(|(v, &bv)| *v += bv),
        }
    }
    act(&mut c, g.epilogue.act);
    if let Some(r) = g.epilogue.residual {
        c.iter_mut().zip(r).for_each(|(v, &rv)| *v += rv);
    }
    act(&mut c, g.epilogue.after);
    c
}

#[test]
fn epilogues_give_the_unfused_bits_whole_split_and_packed() {
    use crate::UnaryOp;
    let epilogues = |m: usize, n: usize, rb: &'static [f32], cb: &'static [f32], res: &'static [f32]| {
        let (rb, cb, res) = (&rb[..m], &cb[..n], &res[..m * n]);
        [
            Epilogue { bias: Bias::Rows(rb), act: Some(Activation::Unary(UnaryOp::Relu)), ..Epilogue::default() },
            Epilogue { bias: Bias::Cols(cb), act: Some(Activation::Unary(UnaryOp::Gelu)), ..Epilogue::default() },
            Epilogue {
                bias: Bias::Rows(rb),
                residual: Some(res),
                after: Some(Activation::Unary(UnaryOp::Relu)),
                ..Epilogue::default()
            },
            Epilogue {
                scale: Some(Scale::Div(3.0)),
                bias: Bias::Cols(cb),
                act: Some(Activation::Clip { min: 0.0, max: 0.5 }),
                residual: Some(res),
                after: Some(Activation::Unary(UnaryOp::Sigmoid)),
            },
            Epilogue { scale: Some(Scale::Mul(0.3)), residual: Some(res), ..Epilogue::default() },
            Epilogue { bias: Bias::Rows(rb), act: Some(Activation::Silu), residual: Some(res), ..Epilogue::default() },
            // The forms the AVX-512 tiles apply in their registers.
            Epilogue {
                bias: Bias::Cols(cb),
                act: Some(Activation::Clip { min: -0.25, max: 0.5 }),
                ..Epilogue::default()
            },
            Epilogue { bias: Bias::Cols(cb), ..Epilogue::default() },
            Epilogue { bias: Bias::Rows(rb), ..Epilogue::default() },
            Epilogue { act: Some(Activation::Unary(UnaryOp::Relu)), ..Epilogue::default() },
        ]
    };
    let leak = |v: Vec<f32>| -> &'static [f32] { Vec::leak(v) };
    // Edge tiles, two depth blocks, column blocks wider than NC, matrix-vector and k = 0.
    for (m, n, k) in [(29, 65, 11), (16, 96, 300), (8, 1100, 7), (1, 70, 40), (33, 1, 20), (5, 7, 0)] {
        let (a, b, c0) = (values(m * k, 1), values(k * n, 2), values(m * n, 3));
        let (rb, cb, res) = (leak(values(m, 4)), leak(values(n, 5)), leak(values(m * n, 6)));
        for level in Level::supported() {
            for (e, epilogue) in epilogues(m, n, rb, cb, res).into_iter().enumerate() {
                for beta in [0.0, 0.5] {
                    let g = Gemm { beta, alpha: 1.5, epilogue, ..Gemm::new(m, n, k, &a, false, &b, false) };
                    let want = unfused(level, &g, &c0);
                    let same = |got: &[f32]| got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                    let mut got = c0.clone();
                    g.compute_at(level, &mut GemmScratch::new(), 0..m, 0..n, &mut got);
                    assert!(same(&got), "{level:?} {m}x{n}x{k} epilogue {e} beta {beta}");
                    // Split by rows.
                    let mut got = c0.clone();
                    let cut = m / 3;
                    let (top, bottom) = got.split_at_mut(cut * n);
                    g.compute_at(level, &mut GemmScratch::new(), 0..cut, 0..n, top);
                    g.compute_at(level, &mut GemmScratch::new(), cut..m, 0..n, bottom);
                    assert!(same(&got), "{level:?} {m}x{n}x{k} epilogue {e} beta {beta}, rows split at {cut}");
                    if m > 1 && n > 1 {
                        // Packed B, read by two column blocks.
                        let mut pb = PackedB::new();
                        pack_b_at(level, &mut pb, m, n, k, &b, false);
                        let g = Gemm { packed_b: Some(&pb), ..g };
                        let cut = (n / 2).next_multiple_of(pb.panel_width().expect("packed")).min(n);
                        let mut got = c0.clone();
                        for cols in [0..cut, cut..n] {
                            let mut block: Vec<f32> = (0..m).flat_map(|i| c0[i * n..][cols.clone()].to_vec()).collect();
                            g.compute_at(level, &mut GemmScratch::new(), 0..m, cols.clone(), &mut block);
                            for (i, row) in block.chunks_exact(cols.len().max(1)).enumerate() {
                                got[i * n..][cols.clone()].copy_from_slice(row);
                            }
                        }
                        assert!(same(&got), "{level:?} {m}x{n}x{k} epilogue {e} beta {beta}, packed B columns");
                    }
                }
            }
        }
    }
}

/// The epilogues the AVX-512 tiles apply in their registers give the strip pass's bits
/// where the two could differ: NaN and infinite sums, -0 sums (alpha negative, A's row
/// zero) with no bias, bounds of NaN and infinity, C merged with beta (NaN for NaN).
#[test]
fn in_register_epilogues_give_the_strip_pass_bits_on_nan_and_signed_zeros() {
    use crate::UnaryOp;
    let special = [f32::NAN, -0.0, 0.0, f32::INFINITY, f32::NEG_INFINITY, 1e-40, -1e-40];
    // Two depth blocks (k > 256) in the last shape: the epilogue after the last one only.
    for (m, n, k) in [(29, 65, 11), (16, 96, 20), (14, 64, 3), (30, 97, 300)] {
        // Rows of A: zero, NaN, infinite or ordinary; C: every special value in turn.
        let mut a = values(m * k, 7);
        for (i, row) in a.chunks_exact_mut(k).enumerate() {
            match i % 4 {
                0 => row.fill(0.0),
                1 => row[0] = f32::NAN,
                2 => row[k - 1] = f32::INFINITY,
                _ => {}
            }
        }
        let b = values(k * n, 8);
        let c0: Vec<f32> = (0..m * n).map(|i| special[i % special.len()]).collect();
        let mut rb = values(m, 9);
        rb[1] = f32::NAN;
        rb[2] = -0.0;
        let mut cb = values(n, 10);
        cb[3] = f32::NAN;
        cb[5] = -0.0;
        let clips = [(0.0, 6.0), (-0.0, 0.0), (f32::NAN, 0.5), (-0.25, f32::NAN), (f32::NEG_INFINITY, f32::INFINITY)];
        let mut epilogues = vec![Epilogue::default()];
        for bias in [Bias::None, Bias::Rows(&rb), Bias::Cols(&cb)] {
            epilogues.push(Epilogue { bias, ..Epilogue::default() });
            epilogues.push(Epilogue { bias, act: Some(Activation::Unary(UnaryOp::Relu)), ..Epilogue::default() });
            for (min, max) in clips {
                epilogues.push(Epilogue { bias, act: Some(Activation::Clip { min, max }), ..Epilogue::default() });
            }
        }
        for level in Level::supported() {
            for (e, epilogue) in epilogues.iter().enumerate() {
                for beta in [0.0, 0.5] {
                    let g = Gemm { beta, alpha: -1.5, ..Gemm::new(m, n, k, &a, false, &b, false) };
                    let mut want = c0.clone();
                    g.compute_at(level, &mut GemmScratch::new(), 0..m, 0..n, &mut want);
                    epilogue.apply(level, &mut want, n, n, 0..m, 0..n);
                    let mut got = c0.clone();
                    let g = Gemm { epilogue: *epilogue, ..g };
                    g.compute_at(level, &mut GemmScratch::new(), 0..m, 0..n, &mut got);
                    // NaN as NaN: which NaN payload an addition of two keeps is the
                    // compiler's choice of operand order, in the strip pass too.
                    let same = |x: &f32, y: &f32| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
                    let differ = got.iter().zip(&want).position(|(x, y)| !same(x, y));
                    assert!(differ.is_none(), "{level:?} {m}x{n}x{k} epilogue {e} beta {beta}: first at {differ:?}");
                }
            }
        }
    }
}

#[test]
#[should_panic(expected = "whole panels")]
fn a_packed_b_read_from_inside_a_panel_panics() {
    let (m, n, k) = (20, 100, 8);
    let (a, b) = (values(m * k, 1), values(k * n, 2));
    let mut pb = PackedB::new();
    pack_b(&mut pb, m, n, k, &b, false);
    let g = Gemm { packed_b: Some(&pb), ..Gemm::new(m, n, k, &a, false, &b, false) };
    let mut c = vec![0.0; m * (n - 3)];
    g.compute(&mut GemmScratch::new(), 0..m, 3..n, &mut c);
}

/// `apply_rows` runs each part over the whole block; every element must still get the
/// bits of the parts applied row by row (as it did before), whatever the parts, on rows
/// of a length that is no multiple of 16, from a first row past 0 (the bias and the
/// residual indexed from it), with NaN, signed zeros and large values in C.
#[test]
fn apply_rows_gives_the_row_by_row_bits() {
    let (rows, n) = (3..10, 49);
    let m = rows.end;
    let mut c0 = values(rows.len() * n, 71);
    for (i, v) in c0.iter_mut().enumerate() {
        *v = match i % 37 {
            0 => f32::NAN,
            1 => -0.0,
            2 => 120.0,
            3 => -95.0,
            _ => *v * 6.0,
        };
    }
    let bias = values(m, 72);
    let residual = values(m * n, 73);
    let acts = [
        None,
        Some(Activation::Silu),
        Some(Activation::Unary(crate::UnaryOp::Sigmoid)),
        Some(Activation::Unary(crate::UnaryOp::Gelu)),
        Some(Activation::Clip { min: -0.5, max: 0.75 }),
    ];
    for act in acts {
        for (scale, with_bias, with_residual, after) in [
            (None, false, false, None),
            (None, true, false, None),
            (Some(Scale::Mul(0.5)), true, true, None),
            (Some(Scale::Div(3.0)), false, true, Some(Activation::Unary(crate::UnaryOp::Relu))),
            (None, true, true, Some(Activation::Silu)),
        ] {
            let e = Epilogue {
                scale,
                bias: if with_bias { Bias::Rows(&bias) } else { Bias::None },
                act,
                residual: with_residual.then_some(&residual[..]),
                after,
            };
            let mut whole = c0.clone();
            e.apply_rows(&mut whole, n, rows.clone());
            let mut by_row = c0.clone();
            for (r, row) in rows.clone().zip(by_row.chunks_exact_mut(n)) {
                e.apply(crate::arch::Level::detected(), row, n, n, r..r + 1, 0..n);
            }
            let same = whole.iter().zip(&by_row).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{act:?} {scale:?} bias {with_bias} residual {with_residual} {after:?}");
        }
    }
}
