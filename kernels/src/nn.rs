//! Layout and neural-network kernels over plain slices: transpose and expand (re-exported
//! from `movement`), concat, matrix
//! products (the packed SGEMM, re-exported: see [`GemmScratch`]), softmax and layer norm
//! (re-exported from `norm`), batch normalization, global pooling. Shapes are checked by the caller; these functions
//! assume consistent lengths (and panic on a mismatch).

pub use crate::movement::{
    expand, space_to_depth_2, transpose, transpose_2d, transpose_block, transpose_f32, transpose_outer, transpose_part,
    transpose_part_f32,
};

/// Concatenation along an axis: each input is `[outer, widths[i]]` (its axis length
/// times the inner size), the output `[outer, sum(widths)]`.
pub fn concat<T: Copy>(inputs: &[&[T]], widths: &[usize], outer: usize, y: &mut [T]) {
    let total: usize = widths.iter().sum();
    assert_eq!(y.len(), outer * total);
    concat_range(inputs, widths, 0, y);
}

/// Elements `start..start + y.len()` of the [`concat`] of `inputs` (each `[outer,
/// widths[i]]`), into `y`: a part of the output, for a split over threads.
pub fn concat_range<T: Copy>(inputs: &[&[T]], widths: &[usize], start: usize, y: &mut [T]) {
    let total: usize = widths.iter().sum();
    if y.is_empty() {
        return;
    }
    assert!(total > 0, "concat: an empty row cannot fill the output");
    let (mut row, mut at) = (start / total, start % total);
    let mut done = 0;
    loop {
        // The inputs' pieces of row `row` from offset `at` on.
        let mut first = 0;
        for (x, &w) in inputs.iter().zip(widths) {
            if at < first + w {
                let (from, n) = (at - first, (first + w - at).min(y.len() - done));
                y[done..done + n].copy_from_slice(&x[row * w + from..][..n]);
                (done, at) = (done + n, at + n);
                if done == y.len() {
                    return;
                }
            }
            first += w;
        }
        (row, at) = (row + 1, 0);
    }
}

pub use crate::channel_norm::{batch_norm, batch_norm_terms, group_norm, instance_norm, lrn, norm_stats};
pub use crate::norm::{layer_norm, softmax};

pub use crate::gemm::{
    bf16_supported, bf16_tiles, col_tile, gemm, gemm_block, gemm_cols_packed_a, gemm_rows, gemm_rows_packed, gemm_with,
    pack_a, pack_a_bf16, pack_a_for, pack_b, pack_b_bf16, reads_b_in_place, row_tile, Activation, Bias, Epilogue, Gemm,
    GemmScratch, PackedA, PackedB, Scale,
};

/// A per-channel chain on `[planes, spatial]` planes (plane `i` of `x` and `y` is plane
/// `first + i` of the tensor, of channel `(first + i) % channels`): `y = act((x · g[c] +
/// s[c]) · m[c] + a[c])`, the Mul and the Add where given, each step rounded as its own op
/// rounds it (BatchNormalization's `x · g + s`, then the Mul, then the Add: the bits of
/// the unfused steps). One pass over memory instead of one per op; the activation runs
/// on each plane while it is in cache. In the widest build.
#[allow(clippy::too_many_arguments)]
pub fn channel_chain(
    x: &[f32],
    channels: usize,
    spatial: usize,
    (g, s): (&[f32], &[f32]),
    (mul, add): (Option<&[f32]>, Option<&[f32]>),
    act: Option<Activation>,
    first: usize,
    y: &mut [f32],
) {
    assert_eq!(x.len(), y.len(), "channel chain: x and y");
    assert!(spatial > 0 && x.len().is_multiple_of(spatial), "channel chain: whole planes");
    assert!(g.len() >= channels && s.len() >= channels, "channel chain: per-channel terms");
    assert!(mul.is_none_or(|m| m.len() >= channels) && add.is_none_or(|a| a.len() >= channels));
    let level = crate::arch::Level::detected();
    for (i, (xs, ys)) in x.chunks_exact(spatial).zip(y.chunks_exact_mut(spatial)).enumerate() {
        let c = (first + i) % channels;
        let (g, s) = (g[c], s[c]);
        let (m, a) = (mul.map(|m| m[c]), add.map(|a| a[c]));
        crate::arch::widest(
            #[inline(always)]
            || match (m, a) {
                (Some(m), Some(a)) => ys.iter_mut().zip(xs).for_each(|(o, &v)| *o = (v * g + s) * m + a),
                (Some(m), None) => ys.iter_mut().zip(xs).for_each(|(o, &v)| *o = (v * g + s) * m),
                (None, Some(a)) => ys.iter_mut().zip(xs).for_each(|(o, &v)| *o = (v * g + s) + a),
                (None, None) => ys.iter_mut().zip(xs).for_each(|(o, &v)| *o = v * g + s),
            },
        );
        if let Some(act) = act {
            act.apply(level, ys);
        }
    }
}

/// Rotary position embedding in the rotate-half form the exporters write out (Llama's
/// `x · cos + rotate_half(x) · sin`, rotate_half(x) = `[-x[h..], x[..h]]`, h = d / 2), one
/// row of `d` outputs at a time: each row of `y` in turn from the rows of `x`, `cos` and
/// `sin` that start where `rows` says. Each output is rounded as the unfused Mul, Neg, Mul
/// and Add round it:
/// `x[i] · cos[i]`, then `(±x[j]) · sin[i]`, then their sum, so the bits are theirs (but
/// for which NaN the sum keeps when both products are NaN).
/// Panics if `d` is odd or a row is out of its slice.
pub fn rotate_half(
    x: &[f32],
    cos: &[f32],
    sin: &[f32],
    d: usize,
    rows: impl Iterator<Item = [usize; 3]>,
    y: &mut [f32],
) {
    assert!(d.is_multiple_of(2) && d > 0, "rotate_half: rows of an even, non-zero length");
    let h = d / 2;
    crate::arch::widest(
        #[inline(always)]
        || {
            for (yr, [xa, ca, sa]) in y.chunks_exact_mut(d).zip(rows) {
                let (xr, cr, sr) = (&x[xa..][..d], &cos[ca..][..d], &sin[sa..][..d]);
                let (lo, hi) = yr.split_at_mut(h);
                let (x1, x2) = xr.split_at(h);
                let ((c1, c2), (s1, s2)) = (cr.split_at(h), sr.split_at(h));
                for ((((o, &a), &b), &c), &s) in lo.iter_mut().zip(x1).zip(x2).zip(c1).zip(s1) {
                    *o = a * c + (-b) * s;
                }
                for ((((o, &a), &b), &c), &s) in hi.iter_mut().zip(x2).zip(x1).zip(c2).zip(s2) {
                    *o = a * c + b * s;
                }
            }
        },
    );
}

/// Global average or max pooling: `x` is `[planes, spatial]`, `y` is `[planes]`. The mean
/// sums each plane as ReduceMean sums a row (16 lanes, then the tail).
pub fn global_pool(x: &[f32], planes: usize, spatial: usize, max: bool, y: &mut [f32]) {
    assert_eq!(x.len(), planes * spatial);
    assert_eq!(y.len(), planes);
    // Built for the widest instruction set: the same values (a NaN's payload aside, as
    // for the norms), the lanes in one register.
    crate::arch::widest(
        #[inline(always)]
        || global_pool_planes(x, spatial, max, y),
    );
}

/// [`global_pool`]'s planes, inlined into each instruction set's build.
#[inline(always)]
fn global_pool_planes(x: &[f32], spatial: usize, max: bool, y: &mut [f32]) {
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
            // In 16 lanes, as ReduceMean sums a row: one float sum in order waits on each
            // add (EfficientNet-B0's squeeze-and-excitation pools took 5x ORT's time).
            crate::norm::lanes_sum_of(plane, |v| v) / spatial as f32
        };
    }
}

#[cfg(test)]
mod tests {
    /// Pad by its definition: every output cell's input index mapped axis by axis.
    fn pad_reference(x: &[u32], shape: &[usize], begin: &[usize], end: &[usize], mode: super::PadMode) -> Vec<u32> {
        use super::PadMode;
        let out: Vec<usize> = (0..shape.len()).map(|a| shape[a] + begin[a] + end[a]).collect();
        let n: usize = out.iter().product();
        (0..n)
            .map(|mut flat| {
                let mut src = Some(0usize);
                let mut idx = vec![0; out.len()];
                for a in (0..out.len()).rev() {
                    idx[a] = flat % out[a];
                    flat /= out[a];
                }
                for a in 0..out.len() {
                    let (i, m) = (idx[a] as isize - begin[a] as isize, shape[a] as isize);
                    let j = if (0..m).contains(&i) {
                        Some(i)
                    } else {
                        match mode {
                            PadMode::Constant(_) => None,
                            PadMode::Edge => Some(i.clamp(0, m - 1)),
                            PadMode::Wrap => Some(i.rem_euclid(m)),
                            PadMode::Reflect => {
                                let period = 2 * (m - 1).max(1);
                                let r = i.rem_euclid(period);
                                Some(if r < m { r } else { period - r })
                            }
                        }
                    };
                    src = src.zip(j).map(|(s, j)| s * shape[a] + j as usize);
                }
                src.map_or(u32::MAX, |s| x[s])
            })
            .collect()
    }

    /// CumSum row by row against one column at a time (the definition's order): forward
    /// and reverse, inclusive and exclusive, -0.0 first (0 + -0 is +0), inner of 1 and 5.
    #[test]
    fn cumsum_rows_give_each_column_s_sums() {
        for (outer, n, inner) in [(2, 7, 5), (1, 9, 1), (3, 1, 4), (2, 6, 3)] {
            let len = outer * n * inner;
            let x: Vec<f32> =
                (0..len).map(|i| if i % 7 == 0 { -0.0 } else { ((i * 37 % 19) as f32) * 0.3 - 2.5 }).collect();
            for exclusive in [false, true] {
                for reverse in [false, true] {
                    let mut want = vec![f32::NAN; len];
                    for o in 0..outer {
                        for i in 0..inner {
                            let mut acc = 0.0f32;
                            for step in 0..n {
                                let k = if reverse { n - 1 - step } else { step };
                                let at = (o * n + k) * inner + i;
                                if exclusive {
                                    want[at] = acc;
                                    acc += x[at];
                                } else {
                                    acc += x[at];
                                    want[at] = acc;
                                }
                            }
                        }
                    }
                    let mut y = vec![f32::NAN; len];
                    super::cumsum(&x, outer, n, inner, exclusive, reverse, 0.0, |a, b| a + b, &mut y);
                    let same = y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{outer}x{n}x{inner} exclusive {exclusive} reverse {reverse}: {y:?} {want:?}");
                }
            }
        }
    }

    /// Every mode, ranks 1 to 4, pads on one side, both or neither, wider than the axis
    /// (but for Reflect), axes of one: the row walk against the definition.
    #[test]
    fn pad_matches_its_definition() {
        use super::{pad, PadMode};
        let cases: [(&[usize], &[usize], &[usize]); 7] = [
            (&[5], &[2], &[3]),
            (&[3, 4], &[1, 0], &[2, 3]),
            (&[2, 3, 7], &[0, 1, 2], &[1, 2, 0]),
            (&[1, 2, 5, 6], &[0, 0, 1, 1], &[0, 0, 1, 1]),
            (&[2, 1, 4, 3], &[1, 2, 0, 2], &[0, 3, 2, 1]),
            (&[3, 4], &[0, 0], &[0, 0]),
            (&[4, 1], &[0, 0], &[2, 0]),
        ];
        for (shape, begin, end) in cases {
            let x: Vec<u32> = (0..shape.iter().product::<usize>() as u32).collect();
            for mode in [PadMode::Constant(0.0), PadMode::Edge, PadMode::Wrap, PadMode::Reflect] {
                let reflect_fits = (0..shape.len()).all(|a| begin[a] < shape[a] && end[a] < shape[a]);
                if mode == PadMode::Reflect && !reflect_fits || mode == PadMode::Wrap && shape.contains(&0) {
                    continue;
                }
                let want = pad_reference(&x, shape, begin, end, mode);
                let mut y = vec![7u32; want.len()];
                pad(&x, shape, begin, end, mode, u32::MAX, &mut y);
                assert_eq!(y, want, "{mode:?} {shape:?} {begin:?} {end:?}");
            }
        }
        let mut y = [0u32];
        pad(&[9u32], &[], &[], &[], PadMode::Constant(0.0), 1, &mut y);
        assert_eq!(y, [9]);
    }

    /// The chain gives the bits of its ops run one after the other: BatchNormalization,
    /// the Mul, the Add, the activation, on planes from any first plane.
    #[test]
    fn channel_chain_gives_the_bits_of_its_ops_in_turn() {
        use super::{batch_norm, channel_chain, Activation};
        use crate::UnaryOp;
        let (c, spatial, n) = (5, 37, 3);
        let x: Vec<f32> = (0..n * c * spatial).map(|i| ((i * 7919 % 1000) as f32 - 500.0) * 0.0137).collect();
        let per = |k: usize, lo: f32| -> Vec<f32> { (0..c).map(|i| lo + ((i * k) % 11) as f32 * 0.173).collect() };
        let (scale, bias, mean, var) = (per(3, -0.9), per(5, -1.0), per(7, -0.4), per(2, 0.05));
        let (m, a) = (per(4, -1.3), per(6, -0.7));
        let eps = 1e-3;
        let mut bn = vec![0.0; x.len()];
        batch_norm(&x, &scale, &bias, &mean, &var, eps, c, spatial, &mut bn);
        let (g, s): (Vec<f32>, Vec<f32>) =
            (0..c).map(|ch| super::batch_norm_terms(&scale, &bias, &mean, &var, eps, ch)).unzip();
        let acts = [None, Some(Activation::Unary(UnaryOp::Relu)), Some(Activation::Clip { min: -0.5, max: 0.25 })];
        for (mul, add) in [(true, true), (true, false), (false, true), (false, false)] {
            for act in acts {
                // The unfused ops, each on the whole tensor.
                let mut want = bn.clone();
                for (i, w) in want.iter_mut().enumerate() {
                    let ch = i / spatial % c;
                    if mul {
                        *w *= m[ch];
                    }
                    if add {
                        *w += a[ch];
                    }
                }
                if let Some(act) = act {
                    act.apply(crate::arch::Level::detected(), &mut want);
                }
                let ops = (mul.then_some(&m[..]), add.then_some(&a[..]));
                // Whole, and as two parts from planes 0 and 4.
                let mut got = vec![f32::NAN; x.len()];
                channel_chain(&x, c, spatial, (&g, &s), ops, act, 0, &mut got);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{mul} {add} {act:?}");
                let mut parts = vec![f32::NAN; x.len()];
                let (lo, hi) = parts.split_at_mut(4 * spatial);
                channel_chain(&x[..4 * spatial], c, spatial, (&g, &s), ops, act, 0, lo);
                channel_chain(&x[4 * spatial..], c, spatial, (&g, &s), ops, act, 4, hi);
                assert_eq!(bits(&parts), bits(&want), "parts {mul} {add} {act:?}");
            }
        }
    }

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
    fn concat_range_gives_every_part_of_the_whole() {
        // Widths with an empty input, 3 rows; every start and length.
        let widths = [2usize, 0, 3, 1];
        let inputs: Vec<Vec<u32>> =
            widths.iter().enumerate().map(|(i, &w)| (0..3 * w as u32).map(|v| 100 * i as u32 + v).collect()).collect();
        let refs: Vec<&[u32]> = inputs.iter().map(|v| v.as_slice()).collect();
        let mut whole = vec![0u32; 18];
        concat(&refs, &widths, 3, &mut whole);
        assert_eq!(&whole[..6], &[0, 1, 200, 201, 202, 300]);
        for start in 0..18 {
            for end in start..=18 {
                let mut part = vec![u32::MAX; end - start];
                concat_range(&refs, &widths, start, &mut part);
                assert_eq!(part, &whole[start..end], "{start}..{end}");
            }
        }
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

/// How `pad` fills the border.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PadMode {
    Constant(f32),
    Reflect,
    Edge,
    /// The input repeats (opset 19's `wrap`).
    Wrap,
}

/// Pads `x` of `shape` by `begin`/`end` (non-negative) per axis into `y`; `fill` is the
/// constant mode's value in the element type. Reflect needs pads smaller than the axis
/// (checked by the caller). Row by row of the innermost axis: a row outside the input
/// (constant mode) is filled, any other has its input run copied whole and only its
/// border cells mapped one by one (an index walk per element took 24x ORT's time on
/// `[1, 64, 56, 56]`).
pub fn pad<T: Copy>(x: &[T], shape: &[usize], begin: &[usize], end: &[usize], mode: PadMode, fill: T, y: &mut [T]) {
    let rank = shape.len();
    let Some(last) = rank.checked_sub(1) else {
        // A scalar: itself.
        if let (Some(o), Some(&v)) = (y.first_mut(), x.first()) {
            *o = v;
        }
        return;
    };
    let out: smallvec::SmallVec<[usize; 8]> = (0..rank).map(|a| shape[a] + begin[a] + end[a]).collect();
    let (n, w, b) = (shape[last], out[last], begin[last]);
    if w == 0 {
        return;
    }
    // The input index an output index `i - begin` reads on an axis of `n`, or None where
    // the constant fills it.
    let source = |i: isize, n: usize| -> Option<usize> {
        let n = n as isize;
        if (0..n).contains(&i) {
            return Some(i as usize);
        }
        let j = match mode {
            PadMode::Constant(_) => return None,
            PadMode::Edge => i.clamp(0, n - 1),
            PadMode::Wrap => i.rem_euclid(n.max(1)),
            PadMode::Reflect => {
                let period = 2 * (n - 1).max(1);
                let r = i.rem_euclid(period);
                if r < n {
                    r
                } else {
                    period - r
                }
            }
        };
        Some(j as usize)
    };
    let mut index: smallvec::SmallVec<[usize; 8]> = smallvec::SmallVec::from_elem(0, last);
    for row in y.chunks_exact_mut(w) {
        // The input row, or None for a row of the constant.
        let mut src = Some(0usize);
        for a in 0..last {
            let j = source(index[a] as isize - begin[a] as isize, shape[a]);
            src = src.zip(j).map(|(s, j)| s * shape[a] + j);
        }
        match src {
            Some(s) if n > 0 => {
                let xs = &x[s * n..][..n];
                let cell = |i: isize| source(i, n).map_or(fill, |j| xs[j]);
                let (left, rest) = row.split_at_mut(b);
                let (mid, right) = rest.split_at_mut(n);
                for (k, o) in left.iter_mut().enumerate() {
                    *o = cell(k as isize - b as isize);
                }
                mid.copy_from_slice(xs);
                for (k, o) in right.iter_mut().enumerate() {
                    *o = cell((n + k) as isize);
                }
            }
            _ => row.fill(fill),
        }
        for a in (0..last).rev() {
            index[a] += 1;
            if index[a] < out[a] {
                break;
            }
            index[a] = 0;
        }
    }
}

pub use crate::reduce::{reduce, ReduceOp};

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
    // Row by row of the summed axis, each row from the one before it over all `inner`
    // columns at once (a loop the compiler vectorises): each column still adds its
    // elements in order from `zero`, the same operations as one column at a time, which
    // strode `inner` elements a step (11x ORT's time on [1, 1024, 256] along axis 1).
    if inner == 0 {
        return;
    }
    for o in 0..outer {
        let mut prev: Option<usize> = None;
        for step in 0..n {
            let k = if reverse { n - 1 - step } else { step };
            let at = (o * n + k) * inner;
            match prev {
                None => {
                    let (row, xr) = (&mut y[at..at + inner], &x[at..at + inner]);
                    if exclusive {
                        row.fill(zero);
                    } else {
                        row.iter_mut().zip(xr).for_each(|(v, &xv)| *v = add(zero, xv));
                    }
                }
                Some(p) => {
                    // The row before in the walk: its sums, and (exclusive) its input.
                    let (done, rest) = if p < at { y.split_at_mut(at) } else { (&mut [][..], &mut y[..]) };
                    let (before, row): (&[T], &mut [T]) = if p < at {
                        (&done[p..p + inner], &mut rest[..inner])
                    } else {
                        let (head, tail) = rest.split_at_mut(p);
                        (&tail[..inner], &mut head[at..at + inner])
                    };
                    let xr = if exclusive { &x[p..p + inner] } else { &x[at..at + inner] };
                    for ((v, &b), &xv) in row.iter_mut().zip(before).zip(xr) {
                        *v = add(b, xv);
                    }
                }
            }
            prev = Some(at);
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
