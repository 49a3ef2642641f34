//! Reductions (ReduceSum, ReduceMean, ReduceMax, ... over any set of axes) over plain
//! slices.

thread_local! {
    static LSE_SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How `reduce` combines the elements of each reduced group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    Prod,
    L1,
    L2,
    LogSum,
    LogSumExp,
    SumSquare,
}

/// Reduces `x` of `shape` over the axes flagged in `reduced` into `y` (the output with
/// those axes of size 1, or removed: the layout is the same). An empty group gives the
/// op's identity (0 for sums, 1 for Prod, -inf for Max / LogSum(Exp), +inf for Min, NaN
/// for Mean).
///
/// When the reduced axes (of size > 1) are consecutive, `x` is `[outer, group, inner]`:
/// a group is a contiguous row (`inner == 1`: the norms' and softmax's last-axis
/// reductions), reduced in 16 lanes, or `group` rows of `inner` elements, summed row by
/// row into the output. Other layouts take a generic walk over `x`. Max and Min follow the
/// same NaN rule on every path (a NaN counts only as a group's first element).
pub fn reduce(x: &[f32], shape: &[usize], reduced: &[bool], op: ReduceOp, y: &mut [f32]) {
    // The rows' loops built for the widest instruction set (the 16 lanes in one
    // register): the same operations in the same order, the same values on every build
    // (bit for bit but for which of two NaNs a sum or product keeps, as for the norms).
    match blocks(shape, reduced) {
        Some((outer, group, 1)) => crate::arch::widest(
            #[inline(always)]
            || {
                for (row, out) in x.chunks_exact(group).zip(y.iter_mut()).take(outer) {
                    *out = reduce_row(row, op);
                }
            },
        ),
        Some((outer, group, inner)) if op != ReduceOp::LogSumExp => crate::arch::widest(
            #[inline(always)]
            || {
                for (xs, ys) in x.chunks_exact(group * inner).zip(y.chunks_exact_mut(inner)).take(outer) {
                    reduce_rows(xs, inner, op, ys);
                }
            },
        ),
        _ => reduce_walk(x, shape, reduced, op, y),
    }
}

/// `[outer, group, inner]` when the reduced axes of size > 1 are consecutive and no axis is
/// empty (`group` is 1 when every reduced axis has size 1).
fn blocks(shape: &[usize], reduced: &[bool]) -> Option<(usize, usize, usize)> {
    let (mut outer, mut group, mut inner) = (1usize, 1usize, 1usize);
    // 0: before the reduced axes, 1: among them, 2: after them.
    let mut state = 0;
    for (&n, &r) in shape.iter().zip(reduced) {
        match (n, r, state) {
            (0, _, _) => return None,
            (1, _, _) => {}
            (_, true, 2) => return None,
            (_, true, _) => {
                state = 1;
                group *= n;
            }
            (_, false, 0) => outer *= n,
            (_, false, _) => {
                state = 2;
                inner *= n;
            }
        }
    }
    Some((outer, group, inner))
}

/// One contiguous, non-empty group, in 16 lanes (each lane takes every 16th element).
#[inline(always)]
fn reduce_row(x: &[f32], op: ReduceOp) -> f32 {
    let sum_of = |f: fn(f32) -> f32| crate::norm::lanes_sum_of(x, f);
    // Max / Min: every lane starts from the group's first element, so a NaN there stays,
    // and any later NaN fails every comparison.
    let pick = |better: fn(f32, f32) -> bool| {
        let mut lanes = [x[0]; 16];
        let (chunks, tail) = x.as_chunks::<16>();
        for c in chunks {
            lanes.iter_mut().zip(c).for_each(|(a, &v)| *a = if better(v, *a) { v } else { *a });
        }
        lanes.iter().chain(tail).fold(x[0], |a, &v| if better(v, a) { v } else { a })
    };
    match op {
        ReduceOp::Sum => sum_of(|v| v),
        ReduceOp::Mean => sum_of(|v| v) / x.len() as f32,
        ReduceOp::L1 => sum_of(f32::abs),
        ReduceOp::SumSquare => sum_of(|v| v * v),
        ReduceOp::L2 => sum_of(|v| v * v).sqrt(),
        ReduceOp::LogSum => sum_of(|v| v).ln(),
        ReduceOp::Max => pick(|v, a| v > a),
        ReduceOp::Min => pick(|v, a| v < a),
        ReduceOp::Prod => {
            let mut lanes = [1.0f32; 16];
            let (chunks, tail) = x.as_chunks::<16>();
            for c in chunks {
                lanes.iter_mut().zip(c).for_each(|(a, &v)| *a *= v);
            }
            lanes.iter().chain(tail).product()
        }
        ReduceOp::LogSumExp => {
            // Any NaN makes the maximum NaN, as in the walk below.
            let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| if v > m || v.is_nan() { v } else { m });
            if !max.is_finite() {
                return max;
            }
            let mut lanes = [0.0f32; 16];
            let (chunks, tail) = x.as_chunks::<16>();
            for c in chunks {
                lanes.iter_mut().zip(c).for_each(|(a, &v)| *a += (v - max).exp());
            }
            max + (lanes.iter().sum::<f32>() + tail.iter().map(|&v| (v - max).exp()).sum::<f32>()).ln()
        }
    }
}

/// `group = xs.len() / inner` rows of `inner` elements reduced into `y` (`inner` long),
/// row after row: every output in the order of the walk, so the same bits.
#[inline(always)]
fn reduce_rows(xs: &[f32], inner: usize, op: ReduceOp, y: &mut [f32]) {
    let rows = xs.chunks_exact(inner);
    let fold = |y: &mut [f32], init: f32, f: fn(f32, f32) -> f32| {
        y.fill(init);
        for row in rows.clone() {
            y.iter_mut().zip(row).for_each(|(a, &v)| *a = f(*a, v));
        }
    };
    match op {
        ReduceOp::Sum | ReduceOp::Mean | ReduceOp::LogSum => fold(y, 0.0, |a, v| a + v),
        ReduceOp::L1 => fold(y, 0.0, |a, v| a + v.abs()),
        ReduceOp::L2 | ReduceOp::SumSquare => fold(y, 0.0, |a, v| a + v * v),
        ReduceOp::Prod => fold(y, 1.0, |a, v| a * v),
        ReduceOp::Max | ReduceOp::Min => {
            let max = op == ReduceOp::Max;
            y.copy_from_slice(&xs[..inner]);
            for row in rows.skip(1) {
                y.iter_mut().zip(row).for_each(|(a, &v)| {
                    if (max && v > *a) || (!max && v < *a) {
                        *a = v
                    }
                });
            }
        }
        ReduceOp::LogSumExp => unreachable!("LogSumExp over strided groups takes the walk"),
    }
    let group = (xs.len() / inner) as f32;
    match op {
        ReduceOp::Mean => y.iter_mut().for_each(|v| *v /= group),
        ReduceOp::L2 => y.iter_mut().for_each(|v| *v = v.sqrt()),
        ReduceOp::LogSum => y.iter_mut().for_each(|v| *v = v.ln()),
        _ => {}
    }
}

/// The generic reduction: one walk over `x` in order, adding each element into its output.
fn reduce_walk(x: &[f32], shape: &[usize], reduced: &[bool], op: ReduceOp, y: &mut [f32]) {
    let rank = shape.len();
    // Output strides with the reduced axes contributing nothing.
    let mut out_strides = [0usize; 8];
    let mut acc = 1usize;
    for a in (0..rank).rev() {
        if !reduced[a] {
            out_strides[a] = acc;
            acc *= shape[a];
        }
    }
    let group: usize = (0..rank).filter(|&a| reduced[a]).map(|a| shape[a]).product();
    let init = match op {
        ReduceOp::Prod => 1.0,
        ReduceOp::Max | ReduceOp::LogSumExp => f32::NEG_INFINITY,
        ReduceOp::Min => f32::INFINITY,
        _ => 0.0,
    };
    y.iter_mut().for_each(|v| *v = init);
    // Visits x in order with its output index and whether it is the first element of its
    // group (every reduced index zero): Max/Min start from that element, as ORT does.
    let for_each = |f: &mut dyn FnMut(usize, f32, bool)| {
        let mut index = [0usize; 8];
        let mut out = 0usize;
        let mut nonzero_reduced = 0usize;
        for &v in x {
            f(out, v, nonzero_reduced == 0);
            for a in (0..rank).rev() {
                if index[a] == 0 && reduced[a] {
                    nonzero_reduced += 1;
                }
                index[a] += 1;
                out += out_strides[a];
                if index[a] < shape[a] {
                    break;
                }
                out -= out_strides[a] * shape[a];
                index[a] = 0;
                if reduced[a] {
                    nonzero_reduced -= 1;
                }
            }
        }
    };
    match op {
        ReduceOp::Sum | ReduceOp::Mean | ReduceOp::LogSum => for_each(&mut |o, v, _| y[o] += v),
        ReduceOp::L1 => for_each(&mut |o, v, _| y[o] += v.abs()),
        ReduceOp::L2 | ReduceOp::SumSquare => for_each(&mut |o, v, _| y[o] += v * v),
        ReduceOp::Prod => for_each(&mut |o, v, _| y[o] *= v),
        // A NaN propagates only from a group's first element, like ORT's CPU EP (a running
        // `std::max` seeded with the first element); later NaNs fail the comparison.
        ReduceOp::Max => for_each(&mut |o, v, first| {
            if first || v > y[o] {
                y[o] = v
            }
        }),
        ReduceOp::Min => for_each(&mut |o, v, first| {
            if first || v < y[o] {
                y[o] = v
            }
        }),
        ReduceOp::LogSumExp => {
            // max + ln(sum exp(x - max)): the maxima in y, the sums in a per-thread
            // scratch (grown once, then reused).
            for_each(&mut |o, v, _| {
                if v > y[o] || v.is_nan() {
                    y[o] = v
                }
            });
            LSE_SCRATCH.with(|scratch| {
                let mut sums = scratch.borrow_mut();
                sums.clear();
                sums.resize(y.len(), 0.0);
                let maxes: &[f32] = y;
                for_each(&mut |o, v, _| {
                    if maxes[o].is_finite() {
                        sums[o] += (v - maxes[o]).exp()
                    }
                });
                for (m, &s) in y.iter_mut().zip(sums.iter()) {
                    if m.is_finite() {
                        *m += s.ln();
                    }
                }
            });
        }
    }
    match op {
        ReduceOp::Mean => y.iter_mut().for_each(|v| *v /= group as f32),
        ReduceOp::L2 => y.iter_mut().for_each(|v| *v = v.sqrt()),
        ReduceOp::LogSum => y.iter_mut().for_each(|v| *v = v.ln()),
        _ => {}
    }
}

#[cfg(test)]
mod reduce_nan_tests {
    use super::*;

    /// The widest instruction set's build of the rows' loops gives the bits of the
    /// baseline build (this test's own, calling the rows directly), along rows and along
    /// columns, for every op the loops take.
    #[test]
    fn reductions_give_the_same_bits_on_every_build() {
        let (rows, cols) = (13usize, 70usize);
        let mut x: Vec<f32> = (0..rows * cols).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.037).collect();
        x[75] = f32::NAN;
        let ops = [
            ReduceOp::Sum,
            ReduceOp::Mean,
            ReduceOp::L1,
            ReduceOp::SumSquare,
            ReduceOp::L2,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::Prod,
        ];
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for op in ops {
            let mut wide = vec![0.0f32; rows];
            reduce(&x, &[rows, cols], &[false, true], op, &mut wide);
            let base: Vec<f32> = x.chunks_exact(cols).map(|r| reduce_row(r, op)).collect();
            assert_eq!(bits(&wide), bits(&base), "{op:?} along rows");
            let mut wide = vec![0.0f32; cols];
            reduce(&x, &[rows, cols], &[true, false], op, &mut wide);
            let mut base = vec![0.0f32; cols];
            reduce_rows(&x, cols, op, &mut base);
            assert_eq!(bits(&wide), bits(&base), "{op:?} along columns");
        }
    }

    fn max_min(x: &[f32], shape: &[usize], reduced: &[bool], n_out: usize) -> (Vec<f32>, Vec<f32>) {
        let (mut mx, mut mn) = (vec![0.0; n_out], vec![0.0; n_out]);
        reduce(x, shape, reduced, ReduceOp::Max, &mut mx);
        reduce(x, shape, reduced, ReduceOp::Min, &mut mn);
        (mx, mn)
    }

    /// ORT 1.32's CPU EP: [NaN, 1, 2] -> NaN, [1, NaN, 2] -> 2 / 1, [1, 2, NaN] -> 2 / 1
    /// (checked with onnxruntime 1.32.0, ReduceMax/ReduceMin over axis 0).
    #[test]
    fn max_min_propagate_nan_only_from_the_first_element() {
        let n = f32::NAN;
        let (mx, mn) = max_min(&[n, 1.0, 2.0], &[3], &[true], 1);
        assert!(mx[0].is_nan() && mn[0].is_nan());
        assert_eq!(max_min(&[1.0, n, 2.0], &[3], &[true], 1), (vec![2.0], vec![1.0]));
        assert_eq!(max_min(&[1.0, 2.0, n], &[3], &[true], 1), (vec![2.0], vec![1.0]));
    }

    /// The same rule over a strided axis (matches ORT: [NaN, 6] / [NaN, 4]) and over two
    /// reduced axes, where "first" is the first element of each group in row-major order.
    /// ORT's multi-axis paths combine per-chunk maxima, so a NaN that starts a later chunk
    /// is dropped there (it gives [2, 8] for the second case); this kernel gives [2, 9]. Only
    /// NaN placement differs; the README's ops notes say so.
    #[test]
    fn first_element_rule_holds_for_strided_and_multi_axis_groups() {
        let n = f32::NAN;
        // [3, 2] over axis 0: column 0 = [NaN, 5, 7], column 1 = [4, NaN, 6].
        let x = [n, 4.0, 5.0, n, 7.0, 6.0];
        let (mx, mn) = max_min(&x, &[3, 2], &[true, false], 2);
        assert!(mx[0].is_nan() && mn[0].is_nan());
        assert_eq!((mx[1], mn[1]), (6.0, 4.0));
        // [2, 2, 2] over axes 0 and 2: group j = x[:, j, :]; group 1 starts with 3.
        let x = [1.0, n, 3.0, 8.0, 2.0, 0.5, n, 9.0];
        let (mx, mn) = max_min(&x, &[2, 2, 2], &[true, false, true], 2);
        assert_eq!((mx[0], mn[0]), (2.0, 0.5));
        assert_eq!((mx[1], mn[1]), (9.0, 3.0));
        // Size-1 axes before the reduced one must not shift the first-element flag.
        let (mx, _) = max_min(&[n, 1.0, 2.0, n], &[1, 2, 2], &[false, false, true], 2);
        assert!(mx[0].is_nan());
        assert_eq!(mx[1], 2.0);
    }

    /// Every op on every fast layout (a last-axis row, a middle block, leading axes, size-1
    /// axes mixed in, a group of one) against the generic walk: max and min exactly, the
    /// sums to a relative 1e-6 (the rows add in 16 lanes; the strided blocks in the walk's
    /// order, so exactly). A NaN in a group's first element and one later hold on both.
    #[test]
    fn fast_layouts_agree_with_the_walk() {
        use ReduceOp::*;
        let cases: &[(&[usize], &[bool])] = &[
            (&[3, 37], &[false, true]),
            (&[2, 5, 40], &[false, false, true]),
            (&[4, 3, 19], &[false, true, false]),
            (&[6, 33], &[true, false]),
            (&[2, 3, 4, 5], &[false, true, true, false]),
            (&[2, 1, 3, 1, 20], &[false, true, false, true, true]),
            (&[3, 1, 5], &[false, true, false]),
            (&[64], &[true]),
        ];
        let mut seed = 7u32;
        for &(shape, reduced) in cases {
            assert!(blocks(shape, reduced).is_some(), "{shape:?} takes a fast path");
            let n: usize = shape.iter().product();
            let mut x: Vec<f32> = (0..n)
                .map(|_| {
                    seed = seed.wrapping_mul(1664525).wrapping_add(1013904223);
                    (seed >> 8) as f32 / (1u32 << 24) as f32 * 1.5 + 0.25
                })
                .collect();
            x[0] = f32::NAN;
            x[n - 2] = f32::NAN;
            let out: usize = shape.iter().zip(reduced).filter(|(_, &r)| !r).map(|(&d, _)| d).product();
            for op in [Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare] {
                let (mut fast, mut walk) = (vec![0.0; out], vec![0.0; out]);
                reduce(&x, shape, reduced, op, &mut fast);
                reduce_walk(&x, shape, reduced, op, &mut walk);
                for (i, (&f, &w)) in fast.iter().zip(&walk).enumerate() {
                    let same = (f.is_nan() && w.is_nan()) || f == w;
                    let close = matches!(op, Max | Min) || (f - w).abs() <= 1e-6 * w.abs().max(1e-30);
                    assert!(
                        same || (close && !matches!(op, Max | Min)),
                        "{op:?} {shape:?} {reduced:?} [{i}]: {f} vs {w}"
                    );
                }
            }
        }
        // A layout the fast paths do not take.
        assert!(blocks(&[2, 3, 4], &[true, false, true]).is_none());
    }
}
