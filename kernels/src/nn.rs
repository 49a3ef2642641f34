//! Layout and neural-network kernels over plain slices: transpose, concat, matrix
//! products (the packed SGEMM, re-exported: see [`GemmScratch`]), softmax and layer norm
//! (re-exported from `norm`), batch normalization, global pooling. Shapes are checked by the caller; these functions
//! assume consistent lengths (and panic on a mismatch).

/// `y = transpose(x, perm)` for `x` of `shape` (row-major), rank ≤ 8.
pub fn transpose<T: Copy>(x: &[T], shape: &[usize], perm: &[usize], y: &mut [T]) {
    let rank = shape.len();
    assert_eq!(perm.len(), rank);
    assert!(rank <= 8);
    assert_eq!(x.len(), shape.iter().product::<usize>());
    assert_eq!(y.len(), x.len());
    if x.is_empty() {
        return;
    }
    let mut in_strides = [0usize; 8];
    let mut acc = 1;
    for d in (0..rank).rev() {
        in_strides[d] = acc;
        acc *= shape[d];
    }
    // Output dims and the input stride each output axis walks.
    let mut dims = [1usize; 8];
    let mut strides = [0usize; 8];
    for (o, &p) in perm.iter().enumerate() {
        dims[o] = shape[p];
        strides[o] = in_strides[p];
    }
    let mut index = [0usize; 8];
    let mut offset = 0usize;
    let last = rank.saturating_sub(1);
    let (last_dim, last_stride) = if rank == 0 { (1, 0) } else { (dims[last], strides[last]) };
    let mut out = y.chunks_exact_mut(last_dim);
    loop {
        let row = out.next().expect("as many rows as index combinations");
        for (j, o) in row.iter_mut().enumerate() {
            *o = x[offset + j * last_stride];
        }
        // Advance the index over all but the last axis.
        let mut d = last;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            offset += strides[d];
            if index[d] < dims[d] {
                break;
            }
            offset -= strides[d] * dims[d];
            index[d] = 0;
        }
    }
}

/// Concatenation along an axis: each input is `[outer, widths[i]]` (its axis length
/// times the inner size), the output `[outer, sum(widths)]`.
pub fn concat<T: Copy>(inputs: &[&[T]], widths: &[usize], outer: usize, y: &mut [T]) {
    let total: usize = widths.iter().sum();
    assert_eq!(y.len(), outer * total);
    for o in 0..outer {
        let mut at = o * total;
        for (x, &w) in inputs.iter().zip(widths) {
            y[at..at + w].copy_from_slice(&x[o * w..(o + 1) * w]);
            at += w;
        }
    }
}

pub use crate::norm::{layer_norm, softmax};

pub use crate::gemm::{
    gemm, gemm_block, gemm_cols_packed_a, gemm_rows, gemm_rows_packed, gemm_with, pack_a, pack_a_for, pack_b, row_tile,
    Activation, Bias, Epilogue, Gemm, GemmScratch, PackedA, PackedB,
};

/// Inference batch normalization of `x` viewed as `[batch, channels, spatial]`.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    x: &[f32],
    scale: &[f32],
    bias: &[f32],
    mean: &[f32],
    var: &[f32],
    epsilon: f32,
    channels: usize,
    spatial: usize,
    y: &mut [f32],
) {
    assert_eq!(x.len(), y.len());
    for (block, (xs, ys)) in x.chunks(spatial.max(1)).zip(y.chunks_mut(spatial.max(1))).enumerate() {
        let ch = block % channels.max(1);
        let g = scale[ch] / (var[ch] + epsilon).sqrt();
        let sh = bias[ch] - mean[ch] * g;
        for (o, &v) in ys.iter_mut().zip(xs) {
            *o = v * g + sh;
        }
    }
}

/// Global average or max pooling: `x` is `[planes, spatial]`, `y` is `[planes]`.
pub fn global_pool(x: &[f32], planes: usize, spatial: usize, max: bool, y: &mut [f32]) {
    assert_eq!(x.len(), planes * spatial);
    assert_eq!(y.len(), planes);
    for (o, plane) in y.iter_mut().zip(x.chunks(spatial.max(1))) {
        *o = if spatial == 0 {
            if max {
                f32::NEG_INFINITY
            } else {
                f32::NAN
            }
        } else if max {
            plane.iter().copied().fold(f32::NEG_INFINITY, |a, b| if b > a || b.is_nan() { b } else { a })
        } else {
            plane.iter().sum::<f32>() / spatial as f32
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_rows_and_strided_axes_agree() {
        let x: Vec<f32> = (0..24).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        // [2, 3, 4] along axis 1 (inner 4) equals transposing the axis last.
        let mut strided = vec![0.0; 24];
        softmax(&x, &mut strided, 2, 3, 4, false);
        let mut t = vec![0.0; 24];
        transpose(&x, &[2, 3, 4], &[0, 2, 1], &mut t);
        let mut rows = vec![0.0; 24];
        softmax(&t, &mut rows, 8, 3, 1, false);
        let mut back = vec![0.0; 24];
        transpose(&rows, &[2, 4, 3], &[0, 2, 1], &mut back);
        for (a, b) in strided.iter().zip(&back) {
            assert!((a - b).abs() < 1e-6);
        }
        let sums: Vec<f32> = rows.chunks(3).map(|r| r.iter().sum()).collect();
        assert!(sums.iter().all(|s| (s - 1.0).abs() < 1e-6));
        let mut logs = vec![0.0; 24];
        softmax(&t, &mut logs, 8, 3, 1, true);
        for (l, p) in logs.iter().zip(&rows) {
            assert!((l.exp() - p).abs() < 1e-6);
        }
    }

    #[test]
    fn transpose_matches_index_arithmetic() {
        let shape = [2, 3, 4, 5];
        let perm = [3, 1, 0, 2];
        let x: Vec<f32> = (0..120).map(|i| i as f32).collect();
        let mut y = vec![0.0; 120];
        transpose(&x, &shape, &perm, &mut y);
        let out_shape: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let mut k = 0;
        for a in 0..out_shape[0] {
            for b in 0..out_shape[1] {
                for c in 0..out_shape[2] {
                    for d in 0..out_shape[3] {
                        let mut idx = [0; 4];
                        for (o, v) in [a, b, c, d].into_iter().enumerate() {
                            idx[perm[o]] = v;
                        }
                        let src = ((idx[0] * 3 + idx[1]) * 4 + idx[2]) * 5 + idx[3];
                        assert_eq!(y[k], src as f32);
                        k += 1;
                    }
                }
            }
        }
        let mut s = [0.0];
        transpose(&[7.0], &[], &[], &mut s);
        assert_eq!(s, [7.0]);
    }

    #[test]
    fn gemm_matches_the_definition_in_every_transpose() {
        let (m, n, k) = (5, 7, 300);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.1).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.1).collect();
        let naive = |ta: bool, tb: bool, c0: &[f32]| -> Vec<f32> {
            let mut c = vec![0.0f32; m * n];
            for i in 0..m {
                for j in 0..n {
                    let mut s = 0.0f64;
                    for p in 0..k {
                        let av = if ta { a[p * m + i] } else { a[i * k + p] };
                        let bv = if tb { b[j * k + p] } else { b[p * n + j] };
                        s += f64::from(av) * f64::from(bv);
                    }
                    c[i * n + j] = (2.0 * s + 0.5 * f64::from(c0[i * n + j])) as f32;
                }
            }
            c
        };
        for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
            let c0: Vec<f32> = (0..m * n).map(|i| i as f32).collect();
            let mut c = c0.clone();
            gemm(m, n, k, 2.0, &a, ta, &b, tb, 0.5, &mut c);
            for (x, y) in c.iter().zip(naive(ta, tb, &c0)) {
                assert!((x - y).abs() < 1e-3 * (1.0 + y.abs()), "{ta} {tb}: {x} vs {y}");
            }
        }
        let mut c = vec![f32::NAN; m * n];
        gemm(m, n, k, 1.0, &a, false, &b, false, 0.0, &mut c);
        assert!(c.iter().all(|v| v.is_finite()), "beta 0 ignores old NaN");
    }

    #[test]
    fn concat_batch_norm_and_pools() {
        let mut y = vec![0.0; 10];
        concat(&[&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0, 9.0, 10.0]], &[2, 3], 2, &mut y);
        assert_eq!(y, [1.0, 2.0, 5.0, 6.0, 7.0, 3.0, 4.0, 8.0, 9.0, 10.0]);
        let x = [1.0, 2.0, 3.0, 4.0];
        let mut bn = [0.0; 4];
        batch_norm(&x, &[2.0, 1.0], &[1.0, 0.0], &[1.0, 3.0], &[4.0, 1.0], 0.0, 2, 2, &mut bn);
        assert_eq!(bn, [1.0, 2.0, 0.0, 1.0]);
        let mut avg = [0.0; 2];
        global_pool(&x, 2, 2, false, &mut avg);
        assert_eq!(avg, [1.5, 3.5]);
        let mut mx = [0.0; 2];
        global_pool(&x, 2, 2, true, &mut mx);
        assert_eq!(mx, [2.0, 4.0]);
    }
}

/// Instance normalization of `x` viewed as `[planes, spatial]`: each plane normalized to
/// zero mean and unit variance, then scaled and shifted by its channel's parameters.
pub fn instance_norm(
    x: &[f32],
    scale: &[f32],
    bias: &[f32],
    epsilon: f32,
    channels: usize,
    spatial: usize,
    y: &mut [f32],
) {
    if spatial == 0 {
        return;
    }
    for (p, (xs, ys)) in x.chunks(spatial).zip(y.chunks_mut(spatial)).enumerate() {
        let c = p % channels;
        let mean = xs.iter().map(|&v| f64::from(v)).sum::<f64>() / spatial as f64;
        let var = xs.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / spatial as f64;
        let g = f64::from(scale[c]) / (var + f64::from(epsilon)).sqrt();
        let (mean, b) = (mean as f32, bias[c]);
        let g = g as f32;
        for (o, &v) in ys.iter_mut().zip(xs) {
            *o = (v - mean) * g + b;
        }
    }
}

/// Local response normalization across channels of `x` viewed as
/// `[batch, channels, spatial]`.
#[allow(clippy::too_many_arguments)]
pub fn lrn(
    x: &[f32],
    batch: usize,
    channels: usize,
    spatial: usize,
    size: usize,
    alpha: f32,
    beta: f32,
    bias: f32,
    y: &mut [f32],
) {
    let before = (size - 1) / 2;
    let after = size - 1 - before;
    for n in 0..batch {
        for c in 0..channels {
            let lo = c.saturating_sub(before);
            let hi = (c + after).min(channels - 1);
            for s in 0..spatial {
                let at = |ch: usize| (n * channels + ch) * spatial + s;
                let sum: f32 = (lo..=hi).map(|ch| x[at(ch)] * x[at(ch)]).sum();
                y[at(c)] = x[at(c)] / (bias + alpha / size as f32 * sum).powf(beta);
            }
        }
    }
}

/// How `pad` fills the border.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    Constant(f32),
    Reflect,
    Edge,
    /// The input repeats (opset 19's `wrap`).
    Wrap,
}

/// Pads `x` of `shape` by `begin`/`end` (non-negative) per axis into `y`. Reflect needs
/// pads smaller than the axis (checked by the caller).
/// Pads `x` of `shape` by `begin`/`end` per axis; `fill` is the constant mode's value in the
/// element type.
pub fn pad<T: Copy>(x: &[T], shape: &[usize], begin: &[usize], end: &[usize], mode: PadMode, fill: T, y: &mut [T]) {
    let rank = shape.len();
    let out: smallvec::SmallVec<[usize; 8]> = (0..rank).map(|a| shape[a] + begin[a] + end[a]).collect();
    let mut index: smallvec::SmallVec<[usize; 8]> = smallvec::SmallVec::from_elem(0, rank);
    for o in y.iter_mut() {
        // Source offset, or None for a constant cell.
        let mut src = Some(0usize);
        for a in 0..rank {
            let i = index[a] as isize - begin[a] as isize;
            let n = shape[a] as isize;
            let j = if (0..n).contains(&i) {
                Some(i)
            } else {
                match mode {
                    PadMode::Constant(_) => None,
                    PadMode::Edge => Some(i.clamp(0, n - 1)),
                    PadMode::Wrap => Some(i.rem_euclid(n.max(1))),
                    PadMode::Reflect => {
                        let period = 2 * (n - 1).max(1);
                        let r = i.rem_euclid(period);
                        Some(if r < n { r } else { period - r })
                    }
                }
            };
            src = match (src, j) {
                (Some(s), Some(j)) => Some(s * shape[a] + j as usize),
                _ => None,
            };
        }
        *o = match src {
            Some(s) => x[s],
            None => fill,
        };
        for a in (0..rank).rev() {
            index[a] += 1;
            if index[a] < out[a] {
                break;
            }
            index[a] = 0;
        }
    }
}

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
pub fn reduce(x: &[f32], shape: &[usize], reduced: &[bool], op: ReduceOp, y: &mut [f32]) {
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

/// Broadcasts `x` of `shape` to `out_shape` (numpy rules; `shape` may have fewer axes).
pub fn expand<T: Copy>(x: &[T], shape: &[usize], out_shape: &[usize], y: &mut [T]) {
    let rank = out_shape.len();
    let pad = rank - shape.len();
    // Input stride per output axis; 0 where the input is broadcast.
    let mut strides = [0usize; 8];
    let mut acc = 1usize;
    for a in (0..shape.len()).rev() {
        if shape[a] != 1 {
            strides[a + pad] = acc;
        }
        acc *= shape[a];
    }
    let mut index = [0usize; 8];
    let mut src = 0usize;
    for o in y.iter_mut() {
        *o = x[src];
        for a in (0..rank).rev() {
            index[a] += 1;
            src += strides[a];
            if index[a] < out_shape[a] {
                break;
            }
            src -= strides[a] * out_shape[a];
            index[a] = 0;
        }
    }
}

/// Cumulative sum along the middle axis of `x` viewed as `[outer, n, inner]`, with the
/// element type's `zero` and `add` (wrapping for integers).
#[allow(clippy::too_many_arguments)]
pub fn cumsum<T: Copy>(
    x: &[T],
    outer: usize,
    n: usize,
    inner: usize,
    exclusive: bool,
    reverse: bool,
    zero: T,
    add: impl Fn(T, T) -> T,
    y: &mut [T],
) {
    for o in 0..outer {
        for i in 0..inner {
            let mut acc = zero;
            for step in 0..n {
                let k = if reverse { n - 1 - step } else { step };
                let at = (o * n + k) * inner + i;
                if exclusive {
                    y[at] = acc;
                    acc = add(acc, x[at]);
                } else {
                    acc = add(acc, x[at]);
                    y[at] = acc;
                }
            }
        }
    }
}

/// Per row of `n` elements: the mean, or `1 / sqrt(variance + epsilon)` (LayerNormalization's
/// second and third outputs), computed as `layer_norm` does.
pub fn norm_stats(x: &[f32], n: usize, epsilon: f32, inverse_std: bool, y: &mut [f32]) {
    for (row, o) in x.chunks(n.max(1)).zip(y.iter_mut()) {
        let mean = row.iter().sum::<f32>() / n as f32;
        *o = if inverse_std {
            let var = row.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>() / n as f32;
            1.0 / (var + epsilon).sqrt()
        } else {
            mean
        };
    }
}

/// GroupNormalization of `x` viewed as `[batch, channels, spatial]`: each group of
/// `channels / groups` channels is normalized over its channels and positions, then
/// scaled and shifted per channel (`per_channel`) or per group.
#[allow(clippy::too_many_arguments)]
pub fn group_norm<T: crate::typed::Number>(
    x: &[T],
    scale: &[T],
    bias: &[T],
    batch: usize,
    channels: usize,
    spatial: usize,
    groups: usize,
    epsilon: f32,
    per_channel: bool,
    y: &mut [T],
) {
    let per_group = channels / groups.max(1);
    let len = per_group * spatial;
    for n in 0..batch {
        for g in 0..groups {
            let at = (n * channels + g * per_group) * spatial;
            let xs = &x[at..at + len];
            let mean = xs.iter().map(|&v| v.to_f64()).sum::<f64>() / len as f64;
            let var = xs.iter().map(|&v| (v.to_f64() - mean).powi(2)).sum::<f64>() / len as f64;
            let inv = 1.0 / (var + epsilon as f64).sqrt();
            for c in 0..per_group {
                let k = if per_channel { g * per_group + c } else { g };
                let (sc, b) = (scale[k], bias[k]);
                let row = at + c * spatial;
                for (o, &v) in y[row..row + spatial].iter_mut().zip(&x[row..row + spatial]) {
                    *o = T::from_f64((v.to_f64() - mean) * inv).mul(sc).add(b);
                }
            }
        }
    }
}

/// One-hot of the first maximum along the middle axis of `x` viewed as `[outer, n, inner]`.
pub fn hardmax(x: &[f32], outer: usize, n: usize, inner: usize, y: &mut [f32]) {
    y.iter_mut().for_each(|v| *v = 0.0);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * n + k) * inner + i;
            let mut best = 0;
            for k in 1..n {
                if x[at(k)] > x[at(best)] {
                    best = k;
                }
            }
            if n > 0 {
                y[at(best)] = 1.0;
            }
        }
    }
}

/// Keeps the upper (or lower) triangle of each trailing `rows × cols` matrix, relative to
/// diagonal `k`; the rest becomes 0.
pub fn trilu<T: Copy + Default>(x: &[T], rows: usize, cols: usize, k: i64, upper: bool, y: &mut [T]) {
    if x.is_empty() {
        return; // some matrix dimension is 0
    }
    for (xs, ys) in x.chunks(rows * cols).zip(y.chunks_mut(rows * cols)) {
        for i in 0..rows {
            for j in 0..cols {
                let d = j as i64 - i as i64;
                let keep = if upper { d >= k } else { d <= k };
                ys[i * cols + j] = if keep { xs[i * cols + j] } else { T::default() };
            }
        }
    }
}

#[cfg(test)]
mod reduce_nan_tests {
    use super::*;

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
}
