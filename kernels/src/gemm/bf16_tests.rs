use super::*;
use crate::gemm::{Activation, Bias, Epilogue};
use crate::typed::bf16_to_f32 as from_bf16;
use crate::unary::UnaryOp;

/// A reproducible pseudo-random float in [-2, 2).
fn noise(seed: &mut u64) -> f32 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
}

fn round(x: f32) -> f64 {
    from_bf16(to_bf16(x)) as f64
}

struct Case {
    m: usize,
    n: usize,
    k: usize,
    trans_a: bool,
    trans_b: bool,
    alpha: f32,
    beta: f32,
}

/// `c` after the bf16 product of `case`, from `c0`, whole.
fn run(case: &Case, a: &[f32], b: &[f32], c0: &[f32], epilogue: Epilogue<'_>) -> Vec<f32> {
    let Case { m, n, k, trans_a, trans_b, alpha, beta } = *case;
    let mut packed = PackedB::new();
    assert!(pack_b_bf16(&mut packed, n, k, b, trans_b));
    let g = Gemm { alpha, beta, packed_b: Some(&packed), epilogue, ..Gemm::new(m, n, k, a, trans_a, b, trans_b) };
    let mut c = c0.to_vec();
    g.compute(&mut GemmScratch::new(), 0..m, 0..n, &mut c);
    c
}

#[test]
fn bf16_products_sum_the_rounded_operands_in_float() {
    if !bf16_supported() {
        eprintln!("skipped: no AVX-512 BF16 on this CPU");
        return;
    }
    let mut seed = 7;
    let mut cases = 0;
    for &(m, n, k) in &[
        (1, 32, 64),
        (1, 70, 33),
        (2, 33, 1),
        (3, 17, 2),
        (13, 31, 31),
        (14, 32, 32),
        (15, 64, 100),
        (29, 96, 3),
        (64, 70, 257),
        (300, 40, 96),
    ] {
        for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
            for (alpha, beta) in [(1.0, 0.0), (0.5, 1.5)] {
                let case = Case { m, n, k, trans_a, trans_b, alpha, beta };
                let a: Vec<f32> = (0..m * k).map(|_| noise(&mut seed)).collect();
                let b: Vec<f32> = (0..k * n).map(|_| noise(&mut seed)).collect();
                let c0: Vec<f32> = (0..m * n).map(|_| noise(&mut seed)).collect();
                let c = run(&case, &a, &b, &c0, Epilogue::default());
                let at = |i: usize, p: usize| if trans_a { a[p * m + i] } else { a[i * k + p] };
                let bt = |p: usize, j: usize| if trans_b { b[j * k + p] } else { b[p * n + j] };
                for i in 0..m {
                    for j in 0..n {
                        let (mut sum, mut mag) = (0f64, 0f64);
                        for p in 0..k {
                            let t = round(at(i, p)) * round(bt(p, j));
                            sum += t;
                            mag += t.abs();
                        }
                        let old = c0[i * n + j] as f64;
                        let want = alpha as f64 * sum + beta as f64 * old;
                        let bound = (k as f64 + 4.0) * f32::EPSILON as f64 * (mag + old.abs()) + 1e-30;
                        let got = c[i * n + j] as f64;
                        assert!(
                            (got - want).abs() <= bound,
                            "{m}x{n}x{k} ta={trans_a} tb={trans_b} beta={beta} at ({i},{j}): {got} vs {want}"
                        );
                    }
                }
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 80);
}

#[test]
fn bf16_splits_give_the_whole_products_bits_and_the_epilogue_the_separate_ops() {
    if !bf16_supported() {
        return;
    }
    let (m, n, k) = (45, 100, 70);
    let mut seed = 11;
    let a: Vec<f32> = (0..m * k).map(|_| noise(&mut seed)).collect();
    let b: Vec<f32> = (0..k * n).map(|_| noise(&mut seed)).collect();
    let bias: Vec<f32> = (0..n).map(|_| noise(&mut seed)).collect();
    let residual: Vec<f32> = (0..m * n).map(|_| noise(&mut seed)).collect();
    let case = Case { m, n, k, trans_a: false, trans_b: false, alpha: 1.0, beta: 0.0 };
    let epilogue = Epilogue {
        bias: Bias::Cols(&bias),
        act: Some(Activation::Unary(UnaryOp::Relu)),
        residual: Some(&residual),
        ..Epilogue::default()
    };
    let zeros = vec![0.0; m * n];
    let whole = run(&case, &a, &b, &zeros, epilogue);
    // The separate ops on the plain product.
    let mut separate = run(&case, &a, &b, &zeros, Epilogue::default());
    for (i, row) in separate.chunks_exact_mut(n).enumerate() {
        for (j, o) in row.iter_mut().enumerate() {
            *o = (*o + bias[j]).max(0.0) + residual[i * n + j];
        }
    }
    assert_eq!(whole, separate, "the fused epilogue");
    let mut packed = PackedB::new();
    assert!(pack_b_bf16(&mut packed, n, k, &b, false));
    let g = Gemm { packed_b: Some(&packed), epilogue, ..Gemm::new(m, n, k, &a, false, &b, false) };
    // By rows (any cut) and by columns (cuts on the 32-column panels).
    let mut by_rows = vec![0.0; m * n];
    for rows in [0..1, 1..17, 17..45] {
        let part = &mut by_rows[rows.start * n..rows.end * n];
        g.compute(&mut GemmScratch::new(), rows, 0..n, part);
    }
    assert_eq!(by_rows, whole, "split by rows");
    let mut by_cols = vec![0.0; m * n];
    for cols in [0..32, 32..96, 96..100] {
        let mut block = vec![0.0; m * cols.len()];
        g.compute(&mut GemmScratch::new(), 0..m, cols.clone(), &mut block);
        for (row, src) in by_cols.chunks_exact_mut(n).zip(block.chunks_exact(cols.len())) {
            row[cols.clone()].copy_from_slice(src);
        }
    }
    assert_eq!(by_cols, whole, "split by columns");
}

#[test]
fn a_is_rounded_as_the_scalar_rounding_does() {
    if !bf16_supported() {
        return;
    }
    // One row times an identity: the product gives back bf16(a) exactly.
    let k = 48;
    let tie = f32::from_bits(0x3f80_8000); // 1 + 2^-8: halfway, rounds to even (1.0)
    let odd_tie = f32::from_bits(0x3f81_8000); // halfway above an odd bfloat16: rounds up
                                               // (No infinity: times the identity's zeros it makes NaN.)
    let mut a = vec![tie, odd_tie, -tie, 1e-40, -1e-40, -0.0, 65504.0, 3.0e38, -3.0e38];
    let mut seed = 3;
    a.extend((a.len()..k).map(|_| noise(&mut seed)));
    let mut b = vec![0.0; k * k];
    (0..k).for_each(|p| b[p * k + p] = 1.0);
    let case = Case { m: 1, n: k, k, trans_a: false, trans_b: false, alpha: 1.0, beta: 0.0 };
    let c = run(&case, &a, &b, &vec![0.0; k], Epilogue::default());
    for (p, (&got, &x)) in c.iter().zip(&a).enumerate() {
        // (Compared as values: the identity's other terms add +0 to a -0.)
        assert_eq!(got, from_bf16(to_bf16(x)), "depth {p}: {x:e}");
    }
    // Depth 0: nothing to round; left to the float kernels (found by review: it panicked).
    assert!(!pack_b_bf16(&mut PackedB::new(), 32, 0, &[], false));
    // Fewer than 16 columns: mostly padding; left to the float kernels.
    assert!(!pack_b_bf16(&mut PackedB::new(), 15, 2, &[0.0; 30], false));
    assert!(pack_b_bf16(&mut PackedB::new(), 16, 2, &[0.0; 32], false));
    assert_eq!(to_bf16(tie), 0x3f80);
    assert_eq!(to_bf16(odd_tie), 0x3f82);
    assert_eq!(to_bf16(1e-40), 0);
    assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
}

/// `c` after the product of `case` (no transposes) by a bf16-packed A, from `c0`, as
/// blocks `rows` × `cols`.
fn run_a(case: &Case, a: &[f32], b: &[f32], c0: &[f32], epilogue: Epilogue<'_>, cuts: (usize, usize)) -> Vec<f32> {
    let Case { m, n, k, alpha, beta, .. } = *case;
    let mut packed = PackedA::new();
    assert!(pack_a_bf16(&mut packed, m, k, a));
    let g = Gemm { alpha, beta, packed_a: Some(&packed), epilogue, ..Gemm::new(m, n, k, a, false, b, false) };
    let mut c = c0.to_vec();
    let (row_cut, col_cut) = (cuts.0.min(m), cuts.1.min(n));
    for rows in [0..row_cut, row_cut..m] {
        for cols in [0..col_cut, col_cut..n] {
            let mut block: Vec<f32> = rows.clone().flat_map(|i| c0[i * n..][cols.clone()].to_vec()).collect();
            g.compute(&mut GemmScratch::new(), rows.clone(), cols.clone(), &mut block);
            for (i, src) in rows.clone().zip(block.chunks_exact(cols.len().max(1))) {
                c[i * n..][cols.clone()].copy_from_slice(src);
            }
        }
    }
    c
}

#[test]
fn products_by_a_bf16_packed_a_sum_the_rounded_operands_in_float_whatever_the_split() {
    if !bf16_supported() {
        return;
    }
    let mut seed = 5;
    for &(m, n, k) in &[(1, 40, 64), (2, 33, 1), (13, 31, 31), (14, 32, 32), (16, 300, 33), (64, 70, 257), (45, 3, 70)]
    {
        for (alpha, beta) in [(1.0, 0.0), (0.5, 1.5)] {
            let case = Case { m, n, k, trans_a: false, trans_b: false, alpha, beta };
            let a: Vec<f32> = (0..m * k).map(|_| noise(&mut seed)).collect();
            let b: Vec<f32> = (0..k * n).map(|_| noise(&mut seed)).collect();
            let c0: Vec<f32> = (0..m * n).map(|_| noise(&mut seed)).collect();
            let c = run_a(&case, &a, &b, &c0, Epilogue::default(), (m, n));
            for i in 0..m {
                for j in 0..n {
                    let (mut sum, mut mag) = (0f64, 0f64);
                    for p in 0..k {
                        let t = round(a[i * k + p]) * round(b[p * n + j]);
                        sum += t;
                        mag += t.abs();
                    }
                    let old = c0[i * n + j] as f64;
                    let want = alpha as f64 * sum + beta as f64 * old;
                    let bound = (k as f64 + 4.0) * f32::EPSILON as f64 * (mag + old.abs()) + 1e-30;
                    let got = c[i * n + j] as f64;
                    assert!((got - want).abs() <= bound, "{m}x{n}x{k} beta={beta} at ({i},{j}): {got} vs {want}");
                }
            }
            // Split by whole strips of rows and by any column: the same bits.
            assert_eq!(run_a(&case, &a, &b, &c0, Epilogue::default(), (14, 7)), c, "{m}x{n}x{k} split");
        }
    }
    // The epilogue: a row bias, Relu and a residual, as the separate ops on the product.
    let (m, n, k) = (30, 290, 27);
    let case = Case { m, n, k, trans_a: false, trans_b: false, alpha: 1.0, beta: 0.0 };
    let a: Vec<f32> = (0..m * k).map(|_| noise(&mut seed)).collect();
    let b: Vec<f32> = (0..k * n).map(|_| noise(&mut seed)).collect();
    let bias: Vec<f32> = (0..m).map(|_| noise(&mut seed)).collect();
    let residual: Vec<f32> = (0..m * n).map(|_| noise(&mut seed)).collect();
    let relu = Some(Activation::Unary(UnaryOp::Relu));
    let epilogue = Epilogue { bias: Bias::Rows(&bias), act: relu, residual: Some(&residual), ..Epilogue::default() };
    let zeros = vec![0.0; m * n];
    let fused = run_a(&case, &a, &b, &zeros, epilogue, (14, 100));
    let mut separate = run_a(&case, &a, &b, &zeros, Epilogue::default(), (m, n));
    for (i, row) in separate.chunks_exact_mut(n).enumerate() {
        for (j, o) in row.iter_mut().enumerate() {
            *o = (*o + bias[i]).max(0.0) + residual[i * n + j];
        }
    }
    assert_eq!(fused, separate, "the fused epilogue");
    assert!(!pack_a_bf16(&mut PackedA::new(), 3, 0, &[]), "depth 0 is left to the float kernels");
}
