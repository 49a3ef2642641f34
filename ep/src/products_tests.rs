//! The splits of `products` against the unsplit products, bit for bit.

use super::*;
use crate::parallel::Serial;

use rivet_kernels::test_values as values;

#[test]
fn split_products_give_the_unsplit_bits_with_and_without_beta() {
    let mut splits = [0; 3];
    for (m, n, k) in [
        (64, 256, 512),
        (33, 300, 200),
        (2, 1000, 300),
        (200, 96, 160),
        (129, 1, 2000),
        (1, 2000, 300),
        (65, 1040, 512),
    ] {
        for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
            for (alpha, beta) in [(1.0, 0.0), (1.0, 1.0), (0.7, 0.3)] {
                let p = Product { m, n, k, alpha, trans_a, trans_b, beta };
                splits[match p.split(None) {
                    Split::Whole => 0,
                    Split::Rows(_) => 1,
                    Split::Columns(_) => 2,
                }] += 1;
                let (a, b, c0) = (values(m * k, 1), values(k * n, 2), values(m * n, 3));
                let mut want = c0.clone();
                nn::gemm_with(&mut nn::GemmScratch::new(), m, n, k, alpha, &a, trans_a, &b, trans_b, beta, &mut want);
                let mut got = c0.clone();
                product_with(p, &a, &b, Extras::default(), &mut got, &Serial::default());
                let same = got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{m}x{n}x{k} ta={trans_a} tb={trans_b} beta={beta}: {:?}", p.split(None));
            }
        }
    }
    // On a one-core machine nothing splits; elsewhere both splits are exercised.
    if cores() > 1 {
        assert!(splits[1] > 0 && splits[2] > 0, "{splits:?}");
    }
}

#[test]
fn packed_weights_and_epilogues_give_the_whole_products_bits_in_every_split() {
    let mut splits = [0; 3];
    let shapes = [
        (64, 256, 512),
        (33, 300, 200),
        (200, 96, 160),
        (2, 1000, 300),
        (1, 2000, 300),
        (65, 1040, 512),
        (64, 1024, 256),
        (48, 400, 300),
    ];
    for (m, n, k) in shapes {
        let (a, b) = (values(m * k, 1), values(k * n, 2));
        let (bias, res) = (values(n, 4), values(m * n, 5));
        let epilogue = nn::Epilogue {
            scale: Some(nn::Scale::Mul(0.3)),
            bias: nn::Bias::Cols(&bias),
            act: Some(nn::Activation::Unary(rivet_kernels::UnaryOp::Gelu)),
            residual: Some(&res),
            after: None,
        };
        let p = Product { m, n, k, alpha: 1.0, trans_a: false, trans_b: false, beta: 0.0 };
        splits[match p.split(Some(nn::row_tile(m, n))) {
            Split::Whole => 0,
            Split::Rows(_) => 1,
            Split::Columns(_) => 2,
        }] += 1;
        let mut want = vec![0.0; m * n];
        let g = nn::Gemm { epilogue, ..nn::Gemm::new(m, n, k, &a, false, &b, false) };
        g.compute(&mut nn::GemmScratch::new(), 0..m, 0..n, &mut want);
        // B packed for another m, as a constant weight packed on an earlier Run, in
        // either panel width (64 x 144 takes AVX-512's 48-wide tile, 14 rows its 32-wide
        // one).
        let (mut packed, mut wide, mut narrow) = (nn::PackedB::new(), nn::PackedB::new(), nn::PackedB::new());
        nn::pack_b(&mut packed, m + 40, n, k, &b, false);
        nn::pack_b(&mut wide, 64, 144.max(n), k, &values(k * 144.max(n), 9), false);
        nn::pack_b(&mut wide, 64, n, k, &b, false);
        nn::pack_b(&mut narrow, 14, n, k, &b, false);
        for packed_b in [None, Some(&packed), Some(&wide), Some(&narrow)] {
            let mut got = vec![f32::NAN; m * n];
            product_with(p, &a, &b, Extras { packed_b, epilogue }, &mut got, &Serial::default());
            let same = got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
            let tile = packed_b.and_then(nn::PackedB::strip_rows);
            assert!(same, "{m}x{n}x{k} packed B {}: {:?}", packed_b.is_some(), p.split(tile));
        }
    }
    if cores() > 1 {
        assert!(splits[1] > 0 && splits[2] > 0, "{splits:?}");
    }
}

/// A product of many rows whose B outweighs A and C (a GPT-2 MLP's, 128 tokens) splits by
/// columns, so that its tasks read B once between them; one whose A and C weigh as much
/// (BERT's second MLP product, 256 tokens) or whose B stays in L2 splits by rows. Few
/// rows by a packed B in L2 split by rows where whole tiles part them evenly.
#[test]
fn wide_weights_split_by_columns_and_the_rest_by_rows() {
    let product = |m, n, k| Product { m, n, k, alpha: 1.0, trans_a: false, trans_b: false, beta: 0.0 };
    let packed = |m, n, k| product(m, n, k).split(Some(nn::row_tile(m, n)));
    let split = |m, n, k| product(m, n, k).split(None);
    if cores() == 1 {
        return assert_eq!(split(128, 3072, 768), Split::Whole);
    }
    // Few rows by a packed B in L2 split by rows when whole tiles part them evenly (64
    // rows of 8-row tiles, 48 of 8); by columns when its B is not packed, past L2, or the
    // tiles would part them unevenly (64 rows of 14-row tiles: 42 and 22).
    if cores() == 2 {
        for (m, n, k) in [(64, 1024, 256), (48, 400, 300)] {
            assert!(matches!(packed(m, n, k), Split::Rows(_)), "{m}x{n}x{k}: {:?}", packed(m, n, k));
            assert!(matches!(split(m, n, k), Split::Columns(_)), "{m}x{n}x{k} unpacked: {:?}", split(m, n, k));
        }
        for (m, n, k) in [(64, 3072, 768), (64, 256, 1024), (64, 256, 256)] {
            assert!(matches!(packed(m, n, k), Split::Columns(_)), "{m}x{n}x{k}: {:?}", packed(m, n, k));
        }
        // The tile B was packed for decides, not the one this m would take: 8-row tiles
        // part 64 rows evenly, 14-row ones do not.
        assert!(matches!(product(64, 256, 256).split(Some(8)), Split::Rows(32)));
        assert!(matches!(product(64, 1024, 256).split(Some(14)), Split::Columns(_)));
        // A decode step's projections (one row) by columns from a 256x256 weight.
        for (n, k) in [(688, 256), (256, 688), (256, 256)] {
            assert!(matches!(packed(1, n, k), Split::Columns(_)), "1x{n}x{k}: {:?}", packed(1, n, k));
        }
        for (n, k) in [(64, 256), (128, 256)] {
            assert_eq!(packed(1, n, k), Split::Whole, "1x{n}x{k}");
        }
    }
    for (m, n, k) in [(128, 3072, 768), (128, 768, 3072), (128, 2304, 768), (65, 1040, 512)] {
        assert!(matches!(split(m, n, k), Split::Columns(_)), "{m}x{n}x{k}: {:?}", split(m, n, k));
    }
    for (m, n, k) in [(256, 512, 2048), (197, 1536, 384), (128, 256, 256), (1500, 3072, 768)] {
        assert!(matches!(split(m, n, k), Split::Rows(_)), "{m}x{n}x{k}: {:?}", split(m, n, k));
    }
}

/// A convolution as the plan runs it (split over the pool by its shape; `Serial` runs
/// the tasks in turn, as a one-thread session does) against the kernels' unsplit
/// call for its path: the same bits, on the direct kernel, on the Winograd kernel split by
/// tile rows and by output channels (its input transform split by input channels), on
/// the GEMM split by output channels (a widening 1x1, of a large or small plane), on the
/// GEMM split by rows and on the transposed product of a small plane's 1x1 split by
/// output channels or (narrowing) by positions; with batches and groups;
/// on the first Run (packing the filters) and on the second (reading them packed).
#[test]
fn split_convolutions_give_the_unsplit_bits_on_every_path() {
    use conv::{window_geometry, Padding};
    // (batch, in_c, out_c, group, size, kernel, stride, pad)
    for (batch, in_c, out_c, group, hw, k, s, p) in [
        (1, 64, 96, 1, 20, 3, 1, 1),
        (2, 64, 128, 1, 40, 3, 1, 1),
        (1, 128, 128, 1, 28, 3, 1, 1),
        (2, 128, 32, 1, 28, 3, 1, 1),
        // F(4x4, 3x3) split by tile rows (196 tiles of 4x4).
        (1, 64, 64, 1, 56, 3, 1, 1),
        // The same with a last tile row of 2 output rows (54 = 13 * 4 + 2), each task's
        // rows written in place.
        (1, 64, 64, 1, 54, 3, 1, 1),
        // SqueezeNet's first fires: Winograd where AVX-512 runs in halves (Zen 4).
        (1, 16, 64, 1, 55, 3, 1, 1),
        (2, 48, 80, 1, 21, 3, 2, 1),
        (2, 64, 96, 2, 20, 3, 1, 1),
        (2, 16, 96, 1, 56, 1, 1, 0),
        (1, 96, 24, 1, 56, 1, 1, 0),
        (1, 160, 320, 1, 7, 1, 1, 0),
        (2, 128, 256, 1, 7, 1, 1, 0),
        (2, 96, 200, 1, 14, 1, 1, 0),
        (1, 960, 160, 1, 7, 1, 1, 0),
        (2, 256, 48, 1, 13, 1, 1, 0),
        (1, 576, 96, 1, 14, 1, 1, 0),
        (1, 3, 16, 1, 160, 3, 2, 1),
        (1, 16, 32, 1, 80, 3, 2, 1),
        (1, 272, 136, 4, 28, 1, 1, 0),
        (2, 64, 32, 4, 20, 3, 1, 1),
        (1, 60, 90, 3, 28, 1, 1, 0),
    ] {
        let pads = Padding::Explicit([0, p, p, 0, p, p]);
        let (g, _) = window_geometry([1, hw, hw], [1, k, k], [1, s, s], [1; 3], pads, false).unwrap();
        let (cg, mg) = (in_c / group, out_c / group);
        let (kk, positions, plane) = (cg * k * k, g.positions(), g.plane());
        let (x, w) = (values(batch * in_c * plane, 1), values(out_c * kk, 2));
        // `values` leans positive (-1 to 3): every other channel's bias takes its sums
        // below zero, so that the Relu changes them.
        let bias: Vec<f32> = values(out_c, 3)
            .iter()
            .enumerate()
            .map(|(i, &v)| if i % 2 == 1 { v - 2.0 * kk as f32 } else { v })
            .collect();
        let residual = values(batch * out_c * positions, 4);
        // With a residual (the strip pass), and without (the GEMM's tiles apply the bias
        // and Relu as they store).
        for with_residual in [true, false] {
            let res = |block: std::ops::Range<usize>| with_residual.then(|| &residual[block]);
            let epilogue = nn::Epilogue {
                act: Some(nn::Activation::Unary(rivet_kernels::UnaryOp::Relu)),
                residual: res(0..residual.len()),
                ..nn::Epilogue::default()
            };
            let mut want = vec![0.0; batch * out_c * positions];
            let direct = direct::fits(&g, mg, kk);
            let transposed =
                crate::pointwise_conv::fits(positions, in_c, out_c) && !direct::widens_on_gemm(positions, in_c, out_c);
            if group == 1 && g.is_pointwise() && transposed {
                // The transposed product, whole: Y^T = X^T W^T, then Y and the epilogue.
                for (n, yn) in want.chunks_exact_mut(out_c * positions).enumerate() {
                    let xn = &x[n * in_c * plane..][..in_c * plane];
                    let mut yt = vec![0.0; positions * out_c];
                    let product = nn::Gemm::new(positions, out_c, in_c, xn, true, &w, true);
                    product.compute(&mut nn::GemmScratch::new(), 0..positions, 0..out_c, &mut yt);
                    nn::transpose_2d(&yt, positions, out_c, yn);
                    let block = n * out_c * positions..(n + 1) * out_c * positions;
                    let after = nn::Epilogue { bias: nn::Bias::Rows(&bias), residual: res(block), ..epilogue };
                    after.apply_rows(yn, positions, 0..out_c);
                }
            } else if group == 1 && winograd::fits(&g, in_c, out_c) {
                let mut filters = winograd::Filters::default();
                winograd::transform_filters(&w, out_c, in_c, &g, &mut filters);
                for (n, yn) in want.chunks_exact_mut(out_c * positions).enumerate() {
                    let block = n * out_c * positions..(n + 1) * out_c * positions;
                    let run = winograd::Winograd {
                        x: &x[n * in_c * plane..][..in_c * plane],
                        g: &g,
                        filters: &filters,
                        epilogue: nn::Epilogue { bias: nn::Bias::Rows(&bias), residual: res(block), ..epilogue },
                    };
                    assert!(run.run(0..run.tiles()[0], yn, &mut winograd::Scratch::default()));
                }
            } else if direct {
                let mut packed = Vec::new();
                direct::pack_filters(&w, out_c, group, kk, &mut packed);
                let src = direct::source(&g, cg);
                let group_w = packed.len() / group;
                let mut padded = Vec::new();
                for n in 0..batch {
                    for gi in 0..group {
                        let xg = &x[(n * in_c + gi * cg) * plane..][..cg * plane];
                        let input: &[f32] = if src.copy {
                            direct::pad_planes(xg, cg, &g, src, &mut padded);
                            &padded
                        } else {
                            xg
                        };
                        let block = (n * out_c + gi * mg) * positions..(n * out_c + (gi + 1) * mg) * positions;
                        let run = direct::Direct {
                            x: input,
                            src,
                            cg,
                            g: &g,
                            w: &packed[gi * group_w..][..group_w],
                            bias: Some(&bias[gi * mg..][..mg]),
                            epilogue: nn::Epilogue { residual: res(block.clone()), ..epilogue },
                        };
                        run.run(0..mg, &mut want[block], &mut Vec::new());
                    }
                }
            } else {
                let mut filters = Vec::new();
                conv::pack_filters(&w, in_c, out_c, group, &g, false, &mut filters);
                let (mut col, mut scratch) = (Vec::new(), nn::GemmScratch::new());
                let f = Some(filters.as_slice());
                conv::conv(
                    &x,
                    &w,
                    Some(&bias),
                    batch,
                    in_c,
                    out_c,
                    group,
                    &g,
                    &mut want,
                    &mut col,
                    &mut scratch,
                    f,
                    &epilogue,
                );
            }
            let xs = [batch, in_c, hw, hw];
            let par = Serial::default();
            for run in ["first", "second"] {
                let mut got = vec![f32::NAN; want.len()];
                convolution(
                    &x,
                    &w,
                    Some(&bias),
                    &xs,
                    out_c,
                    group,
                    &g,
                    &mut got,
                    &par,
                    Some(Packing { key: 0, bf16: false }),
                    &epilogue,
                );
                let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                same,
                "{batch}x{in_c}->{out_c} g{group} {hw}x{hw} k{k} s{s} direct {direct}, residual {with_residual}, {run} Run"
            );
            }
        }
    }
}

#[test]
fn a_column_split_packs_a_only_where_the_kernel_would() {
    for (m, n, k, trans_a) in [(64, 256, 512, false), (64, 256, 512, true), (64, 256, 1024, false)] {
        let (a, b) = (values(m * k, 1), values(k * n, 2));
        let p = Product { m, n, k, alpha: 1.0, trans_a, trans_b: false, beta: 0.0 };
        if p.split(None) == Split::Whole {
            return; // one core: nothing splits
        }
        let par = Serial::default();
        product_with(p, &a, &b, Extras::default(), &mut vec![0.0; m * n], &par);
        let g = nn::Gemm::new(m, n, k, &a, trans_a, &b, false);
        let packed = lock(&par.scratch().packed_a).strip_rows() > 0;
        assert_eq!(packed, !g.reads_a_in_place(), "k {k} trans_a {trans_a}");
        // The x86 builds read a row-major A in place (rows 4 KiB apart too); every build
        // packs a transposed one.
        let in_place = !trans_a && cfg!(target_arch = "x86_64");
        assert_eq!(packed, !in_place, "k {k} trans_a {trans_a}: A packed {packed}");
    }
}

#[test]
fn a_batched_matmul_by_a_matrix_is_one_product_with_the_per_matrix_bits() {
    let (batch, m, n, k) = (3, 24, 40, 50);
    let (a, b) = (values(batch * m * k, 1), values(k * n, 2));
    let mut got = vec![0.0; batch * m * n];
    let op = MatMul { alpha: 1.0, trans_b: false };
    matmul(&a, &[batch, m, k], &b, &[k, n], op, Extras::default(), &mut got, &Serial::default());
    for (i, c) in got.chunks(m * n).enumerate() {
        let mut want = vec![0.0; m * n];
        nn::gemm(m, n, k, 1.0, &a[i * m * k..][..m * k], false, &b, false, 0.0, &mut want);
        assert!(c.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()), "matrix {i}");
    }
}

/// What `fold_matmul_operands` relies on: B stored transposed with `trans_b`, and an
/// epilogue scale, give the bits of the plain product of the transposed copy followed
/// by a Mul, batched and by a matrix, over several depth blocks (products of more than
/// one row: see the pass for one).
#[test]
fn a_transposed_b_and_a_scale_give_the_bits_of_the_unfolded_nodes() {
    let (batch, m, n, k) = (3, 20, 36, 300);
    let a = values(batch * m * k, 3);
    for b_batch in [batch, 1] {
        let b = values(b_batch * k * n, 4);
        // B^T per matrix: [b_batch, n, k].
        let mut bt = vec![0.0; b.len()];
        for (src, dst) in b.chunks(k * n).zip(bt.chunks_mut(k * n)) {
            nn::transpose(src, &[k, n], &[1, 0], dst);
        }
        let (sb, sbt): (Vec<usize>, Vec<usize>) =
            if b_batch == 1 { (vec![k, n], vec![n, k]) } else { (vec![batch, k, n], vec![batch, n, k]) };
        let run = |b: &[f32], sb: &[usize], op: MatMul, scale: Option<nn::Scale>| {
            let mut c = vec![0.0; batch * m * n];
            let extras = Extras { epilogue: nn::Epilogue { scale, ..Default::default() }, ..Default::default() };
            matmul(&a, &[batch, m, k], b, sb, op, extras, &mut c, &Serial::default());
            c
        };
        let plain = run(&b, &sb, MatMul { alpha: 1.0, trans_b: false }, None);
        let scaled: Vec<f32> = plain.iter().map(|&x| x * 0.3).collect();
        let folded = run(&bt, &sbt, MatMul { alpha: 1.0, trans_b: true }, Some(nn::Scale::Mul(0.3)));
        assert!(folded.iter().zip(&scaled).all(|(x, y)| x.to_bits() == y.to_bits()), "B batch {b_batch}");
    }
}

/// A batched MatMul split by whole matrices (here in turn on `Serial`) gives each
/// matrix's own product bit for bit, with a broadcast batch axis on either side.
#[test]
fn a_batched_matmul_split_by_matrices_gives_each_matrix_its_own_bits() {
    let (m, n, k) = (40, 48, 32);
    for (sa, sb) in [(vec![2, 3, m, k], vec![1, 3, k, n]), (vec![3, 1, m, k], vec![3, 2, k, n])] {
        let (a, b) = (values(sa.iter().product(), 5), values(sb.iter().product(), 6));
        let batch: Vec<usize> = sa[..2].iter().zip(&sb[..2]).map(|(&x, &y)| x.max(y)).collect();
        let count = batch[0] * batch[1];
        assert!(m * n * k * count >= PARALLEL_MIN_MACS && cores().min(count) >= 2 || cores() < 2);
        let mut got = vec![0.0; count * m * n];
        let op = MatMul { alpha: 1.0, trans_b: false };
        matmul(&a, &sa, &b, &sb, op, Extras::default(), &mut got, &Serial::default());
        for i in 0..count {
            let (i0, i1) = (i / batch[1], i % batch[1]);
            let ia = (if sa[0] == 1 { 0 } else { i0 }) * sa[1] + if sa[1] == 1 { 0 } else { i1 };
            let ib = (if sb[0] == 1 { 0 } else { i0 }) * sb[1] + if sb[1] == 1 { 0 } else { i1 };
            let mut want = vec![0.0; m * n];
            nn::gemm(m, n, k, 1.0, &a[ia * m * k..][..m * k], false, &b[ib * k * n..][..k * n], false, 0.0, &mut want);
            let same = got[i * m * n..][..m * n].iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(same, "{sa:?} x {sb:?}: matrix {i}");
        }
    }
}

fn differing(a: &[f32], b: &[f32]) -> usize {
    a.iter().zip(b).filter(|(x, y)| x.to_bits() != y.to_bits()).count()
}

/// A Gemm op with C (beta 0.3) and a B that is not constant, 64 x 300 x 128: split by
/// columns at 160 on two cores, while the whole product takes AVX-512's 8 x 48 tile.
/// Column 144..160 is a full tile of the whole product (merged with an FMA) and an edge
/// tile of the first task's block (merged by `store`, rounding `beta * c` apart).
#[test]
fn a_column_split_of_a_wide_tile_product_with_beta_keeps_the_unsplit_bits() {
    let (m, n, k) = (64, 300, 128);
    let (a, b, c0) = (values(m * k, 1), values(k * n, 2), values(m * n, 3));
    let mut failures = Vec::new();
    for trans_a in [false, true] {
        for beta in [0.3f32, 0.7] {
            let p = Product { m, n, k, alpha: 1.0, trans_a, trans_b: false, beta };
            let mut want = c0.clone();
            // A stored m x k, or k x m when trans_a: any m * k values serve.
            let a_stored = &a;
            nn::gemm_with(&mut nn::GemmScratch::new(), m, n, k, 1.0, a_stored, trans_a, &b, false, beta, &mut want);
            let mut got = c0.clone();
            product_with(p, a_stored, &b, Extras::default(), &mut got, &Serial::default());
            let differ = differing(&got, &want);
            if differ > 0 {
                failures.push(format!("trans_a {trans_a} beta {beta}: {differ} of {} differ", m * n));
            }
        }
    }
    assert!(failures.is_empty(), "{m}x{n}x{k} split on {} cores: {failures:?}", cores());
}

/// One row (a decode step), split by columns from 2^18 multiply-adds: B packed in either
/// AVX-512 panel width, or not packed and stored transposed; beta 0 over NaN, 1 and 0.3;
/// an epilogue with a residual; n not a multiple of any panel.
#[test]
fn one_row_column_splits_keep_the_unsplit_bits() {
    for (n, k) in [(1000, 300), (2001, 131), (1537, 257), (4100, 64)] {
        let a = values(k, 1);
        let (bias, res) = (values(n, 4), values(n, 5));
        for trans_b in [false, true] {
            let b = values(k * n, 2);
            let epilogues = [
                nn::Epilogue::default(),
                nn::Epilogue {
                    scale: Some(nn::Scale::Mul(0.3)),
                    bias: nn::Bias::Cols(&bias),
                    act: Some(nn::Activation::Unary(rivet_kernels::UnaryOp::Gelu)),
                    residual: Some(&res),
                    after: Some(nn::Activation::Unary(rivet_kernels::UnaryOp::Relu)),
                },
            ];
            // Packed for one row (AVX-512's 48-wide panels), for 14 rows (32-wide), none.
            let (mut p1, mut p14) = (nn::PackedB::new(), nn::PackedB::new());
            nn::pack_b(&mut p1, 1, n, k, &b, trans_b);
            nn::pack_b(&mut p14, 14, n, k, &b, trans_b);
            for (e, epilogue) in epilogues.iter().enumerate() {
                for beta in [0.0f32, 1.0, 0.3] {
                    let mut c0 = values(n, 3);
                    if beta == 0.0 {
                        c0.iter_mut().step_by(3).for_each(|v| *v = f32::NAN);
                    }
                    let g = nn::Gemm { beta, epilogue: *epilogue, ..nn::Gemm::new(1, n, k, &a, false, &b, trans_b) };
                    let mut want = c0.clone();
                    g.compute(&mut nn::GemmScratch::new(), 0..1, 0..n, &mut want);
                    for packed_b in [None, Some(&p1), Some(&p14)] {
                        let p = Product { m: 1, n, k, alpha: 1.0, trans_a: false, trans_b, beta };
                        let mut got = c0.clone();
                        product_with(p, &a, &b, Extras { packed_b, epilogue: *epilogue }, &mut got, &Serial::default());
                        let differ = differing(&got, &want);
                        let nr = packed_b.and_then(|p| p.panel_width());
                        assert_eq!(differ, 0, "1x{n}x{k} tb {trans_b} epilogue {e} beta {beta} panels {nr:?}");
                    }
                }
            }
        }
    }
}

/// A Serial that records each split's chunk length.
#[derive(Default)]
struct Recording {
    serial: Serial,
    chunks: std::sync::Mutex<Vec<usize>>,
}

impl Parallel for Recording {
    fn for_each_chunk(&self, out: &mut [f32], chunk_len: usize, f: &(dyn Fn(usize, &mut [f32]) + Sync)) {
        self.chunks.lock().expect("unpoisoned").push(chunk_len);
        self.serial.for_each_chunk(out, chunk_len, f);
    }

    fn scratch(&self) -> &crate::parallel::RunScratch {
        self.serial.scratch()
    }
}

/// `product_with` takes the split by rows for few rows by a packed B of the tile that
/// parts them evenly (chunks of whole rows of C), and by columns without it.
#[test]
fn few_rows_by_a_packed_b_run_split_by_rows_in_place() {
    if cores() != 2 {
        return;
    }
    let (m, n, k) = (64, 1024, 256);
    let (a, b) = (values(m * k, 1), values(k * n, 2));
    let p = Product { m, n, k, alpha: 1.0, trans_a: false, trans_b: false, beta: 0.0 };
    let mut wide = nn::PackedB::new();
    nn::pack_b(&mut wide, m, n, k, &b, false);
    assert_eq!(wide.strip_rows(), Some(8), "64 x 1024 packs for the 8 x 48 tile");
    for (packed_b, by_rows) in [(Some(&wide), true), (None, false)] {
        let par = Recording::default();
        let mut c = vec![0.0; m * n];
        product_with(p, &a, &b, Extras { packed_b, ..Extras::default() }, &mut c, &par);
        let chunks = par.chunks.lock().expect("unpoisoned").clone();
        assert_eq!(chunks.first() == Some(&(32 * n)), by_rows, "packed {}: chunks {chunks:?}", packed_b.is_some());
    }
}

/// The unsplit GEMM convolution of one group (filters packed for `g`), as the kernels run
/// it.
#[allow(clippy::too_many_arguments)]
fn unsplit_gemm_conv(
    x: &[f32],
    w: &[f32],
    bias: &[f32],
    (batch, in_c, out_c): (usize, usize, usize),
    g: &conv::Window3d,
    epilogue: &nn::Epilogue<'_>,
) -> Vec<f32> {
    let mut filters = Vec::new();
    conv::pack_filters(w, in_c, out_c, 1, g, false, &mut filters);
    let mut want = vec![0.0; batch * out_c * g.positions()];
    let (mut col, mut scratch) = (Vec::new(), nn::GemmScratch::new());
    let filters = Some(filters.as_slice());
    conv::conv(x, w, Some(bias), batch, in_c, out_c, 1, g, &mut want, &mut col, &mut scratch, filters, epilogue);
    want
}

/// 1x1 convolutions on the GEMM split by output channels, on both sides of the strips
/// past which the tasks share one packing of the input (8- and 14-row strips), batches of
/// 2 and 3, bias, Relu and a residual: the unsplit bits on the first Run and the next.
#[test]
fn pointwise_splits_around_the_shared_input_give_the_unsplit_bits() {
    use conv::{window_geometry, Padding};
    let (mut shared, mut own) = (0, 0);
    // (batch, in_c, out_c, h, w)
    for (batch, in_c, out_c, h, wd) in [
        (2, 64, 32, 56, 56),
        (2, 64, 33, 56, 56),
        (2, 64, 40, 56, 56),
        (3, 64, 56, 32, 32),
        (2, 64, 57, 32, 32),
        (2, 64, 70, 32, 32),
        (2, 300, 200, 20, 20),
        (2, 1024, 96, 17, 17),
        (3, 37, 129, 17, 19),
    ] {
        let pads = Padding::Explicit([0; 6]);
        let (g, _) = window_geometry([1, h, wd], [1; 3], [1; 3], [1; 3], pads, false).unwrap();
        let positions = g.positions();
        let (x, w, bias) = (values(batch * in_c * positions, 11), values(out_c * in_c, 12), values(out_c, 13));
        let residual = values(batch * out_c * positions, 14);
        let epilogue = nn::Epilogue {
            act: Some(nn::Activation::Unary(rivet_kernels::UnaryOp::Relu)),
            residual: Some(&residual),
            ..nn::Epilogue::default()
        };
        let want = unsplit_gemm_conv(&x, &w, &bias, (batch, in_c, out_c), &g, &epilogue);
        let mut filters = Vec::new();
        conv::pack_filters(&w, in_c, out_c, 1, &g, false, &mut filters);
        if packs_input(out_c, positions, &filters[0]) {
            shared += 1;
        } else {
            own += 1;
        }
        let par = Serial::default();
        for run in 0..2 {
            let mut got = vec![f32::NAN; want.len()];
            let packing = Some(Packing { key: 0, bf16: false });
            convolution(&x, &w, Some(&bias), &[batch, in_c, h, wd], out_c, 1, &g, &mut got, &par, packing, &epilogue);
            assert_eq!(differing(&got, &want), 0, "{batch}x{in_c}->{out_c} {h}x{wd} Run {run}");
        }
    }
    if rivet_kernels::Level::detected() == rivet_kernels::Level::Avx512 {
        assert!(shared >= 4 && own >= 2, "shared {shared}, own {own}");
    }
}

/// A 1x1 convolution whose plane changes between Runs keeps the filters packed on the
/// first: 16x21 takes AVX-512's 8x48 tile, 16x20 would take 14x32 as a new product, so
/// the second Run leaves the input to the tasks (found by review: it had panicked on the
/// tiles' mismatch).
#[test]
fn a_pointwise_split_on_another_plane_size_reuses_its_filters() {
    use conv::{window_geometry, Padding};
    let (batch, in_c, out_c) = (2, 64, 112);
    let (w, bias) = (values(out_c * in_c, 2), values(out_c, 3));
    let par = Serial::default();
    for (h, wd) in [(16, 21), (16, 20), (16, 21)] {
        let pads = Padding::Explicit([0; 6]);
        let (g, _) = window_geometry([1, h, wd], [1; 3], [1; 3], [1; 3], pads, false).unwrap();
        let x = values(batch * in_c * g.positions(), 1);
        let epilogue = nn::Epilogue::default();
        let want = unsplit_gemm_conv(&x, &w, &bias, (batch, in_c, out_c), &g, &epilogue);
        let mut got = vec![f32::NAN; want.len()];
        let packing = Some(Packing { key: 0, bf16: false });
        convolution(&x, &w, Some(&bias), &[batch, in_c, h, wd], out_c, 1, &g, &mut got, &par, packing, &epilogue);
        assert_eq!(differing(&got, &want), 0, "{h}x{wd}");
    }
}

/// A convolution whose input size changes between Runs takes its filters transformed for
/// the new size's Winograd tiles (review found a 56x56 Run's F(4x4) filters read for a
/// 200x4 input, whose rows hold one tile of 4: 43,718 of 51,200 outputs differed).
#[test]
fn winograd_filters_follow_the_input_size() {
    use conv::{window_geometry, Padding};
    let (in_c, out_c) = (64, 64);
    let w = values(out_c * in_c * 9, 2);
    let pads = Padding::Explicit([0, 1, 1, 0, 1, 1]);
    let run = |par: &Serial, h: usize, wd: usize| {
        let (g, _) = window_geometry([1, h, wd], [1, 3, 3], [1; 3], [1; 3], pads, false).unwrap();
        assert!(winograd::fits(&g, in_c, out_c));
        let x = values(in_c * h * wd, 1);
        let mut y = vec![f32::NAN; out_c * g.positions()];
        let packing = Some(Packing { key: 0, bf16: false });
        convolution(&x, &w, None, &[1, in_c, h, wd], out_c, 1, &g, &mut y, par, packing, &nn::Epilogue::default());
        (winograd::side(&g, in_c, out_c), y.iter().map(|v| v.to_bits()).collect::<Vec<_>>())
    };
    let used = Serial::default();
    assert_eq!(run(&used, 56, 56).0, 4);
    let (side, after) = run(&used, 200, 4);
    assert_eq!(side, 2);
    assert!(after == run(&Serial::default(), 200, 4).1, "the 200x4 Run read the 56x56 Run's filters");
}
