//! Row-wise softmax and layer normalization over plain slices: each row's reductions in
//! 16 f32 lanes (so they vectorise), `e^x` on the unary kernel's vectorised build.

/// Softmax (or log-softmax) along the middle axis of `x` viewed as `[outer, n, inner]`.
pub fn softmax(x: &[f32], y: &mut [f32], outer: usize, n: usize, inner: usize, log: bool) {
    assert_eq!(x.len(), outer * n * inner);
    assert_eq!(y.len(), x.len());
    // No element (an axis after this one of size 0 included: review found the column
    // kernel's checks panic on it).
    if n == 0 || x.is_empty() {
        return;
    }
    if inner == 1 {
        if crate::arch::softmax_rows(x, y, n, log) {
            // Done, in three passes a row.
        } else if log {
            for (xr, yr) in x.chunks_exact(n).zip(y.chunks_exact_mut(n)) {
                softmax_row(xr, yr, log);
            }
        } else {
            // Blocks of whole rows, about BLOCK elements, each with one Exp call.
            let rows = (BLOCK / n).max(1);
            for (xb, yb) in x.chunks(rows * n).zip(y.chunks_mut(rows * n)) {
                yb.copy_from_slice(xb);
                softmax_rows_in_place(yb, n);
            }
        }
        return;
    }
    if inner >= COLS_MIN && crate::arch::softmax_cols(x, y, n, inner, log) {
        // Done, 16 columns a vector.
        return;
    }
    for o in 0..outer {
        let base = o * n * inner;
        for i in 0..inner {
            let at = |k: usize| base + k * inner + i;
            let max = (0..n).map(|k| x[at(k)]).fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0f32;
            for k in 0..n {
                let e = (x[at(k)] - max).exp();
                y[at(k)] = e;
                sum += e;
            }
            for k in 0..n {
                y[at(k)] = if log { x[at(k)] - max - sum.ln() } else { y[at(k)] / sum };
            }
        }
    }
}

/// Softmax of one contiguous row: the max and the sum in 16 lanes, `e^x` on the unary
/// kernel's vectorised build (the row is in L1 between the passes).
fn softmax_row(x: &[f32], y: &mut [f32], log: bool) {
    let max = lanes_max(x);
    y.iter_mut().zip(x).for_each(|(o, &v)| *o = above_underflow(v - max));
    crate::UnaryOp::Exp.apply_inplace(y);
    let sum = lanes_sum(y);
    if log {
        let ln_sum = sum.ln();
        for (o, &v) in y.iter_mut().zip(x) {
            *o = v - max - ln_sum;
        }
    } else {
        scale_terms(y, 1.0 / sum);
    }
}

/// A row's terms times the inverse of their sum, a term below [`FLUSH`] 0 (see
/// [`above_underflow`]): zeroed before the multiply so that no multiply makes a subnormal
/// (selecting 0 after it would compute the product anyway).
#[inline(always)]
pub(crate) fn scale_terms(y: &mut [f32], inv: f32) {
    y.iter_mut().for_each(|o| *o = if *o < FLUSH { 0.0 } else { *o } * inv);
}

/// The fewest columns (`inner`) the column kernel takes: with 2 of its 16 lanes used,
/// its three passes over every row took 1.2-1.7x the scalar loop's time ([1,100000,2],
/// review); at 3 they were even, from 4 on 1.7-17x faster.
const COLS_MIN: usize = 4;

/// Softmax terms below this are 0: just above `e^-87` (see [`above_underflow`]).
pub(crate) const FLUSH: f32 = 1.65e-38;

/// Elements of one block of [`softmax_rows_in_place`]: rows of 64 (attention's scores
/// at 64 keys) called the vectorised Exp 64 times as often as the work needed, one call
/// per row; in blocks, a [64, 64] head's scores take one.
const BLOCK: usize = 4096;

/// Softmax of each row of `n` elements of `s`, in place (attention's score rows): each row
/// less its maximum, then `e^x` over the whole slice in one call of the unary kernel's
/// vectorised build, then each row scaled by the inverse of its sum (the same values as
/// [`softmax_row`] row by row).
pub(crate) fn softmax_rows_in_place(s: &mut [f32], n: usize) {
    if n == 0 {
        return;
    }
    for row in s.chunks_exact_mut(n) {
        let max = lanes_max(row);
        row.iter_mut().for_each(|v| *v = above_underflow(*v - max));
    }
    crate::UnaryOp::Exp.apply_inplace(s);
    for row in s.chunks_exact_mut(n) {
        scale_terms(row, 1.0 / lanes_sum(row));
    }
}

/// `d` (an element less its row's maximum) raised to -87 if below (NaN kept): `e^-87`
/// (1.6447e-38) is still a normal float. Below it `e^d` is subnormal, and on Intel cores
/// every arithmetic instruction that makes or reads a subnormal takes a microcode assist:
/// attention's scores spread over a few hundred made Softmax 10x slower there (0.78 ->
/// 7.8 ns an element; AMD's cores take no assist). Every term below [`FLUSH`] (those so
/// raised) is then 0: an element more than 87 below its row's maximum has probability 0
/// (its exact value is below 1.7e-38). The raised terms add at most `n · 1.7e-38` to a
/// row's sum, which is at least 1 (its maximum's term), so the sum keeps its bits, and
/// so does every other output.
#[inline(always)]
pub(crate) fn above_underflow(d: f32) -> f32 {
    if d < -87.0 {
        -87.0
    } else {
        d
    }
}

/// The largest element (NaN ignored, as by `f32::max`; -inf for an empty slice), in 16
/// lanes so that it vectorises.
#[inline(always)]
pub(crate) fn lanes_max(x: &[f32]) -> f32 {
    let pick = |a: f32, v: f32| if v > a { v } else { a };
    let mut lanes = [f32::NEG_INFINITY; 16];
    let (chunks, tail) = x.as_chunks::<16>();
    for c in chunks {
        lanes.iter_mut().zip(c).for_each(|(a, &v)| *a = pick(*a, v));
    }
    lanes.iter().chain(tail).fold(f32::NEG_INFINITY, |a, &v| pick(a, v))
}

/// The sum in 16 lanes (vectorises; each lane sums every 16th element).
#[inline(always)]
fn lanes_sum(x: &[f32]) -> f32 {
    lanes_sum_of(x, |v| v)
}

/// The sum of `f(x)` over `x`, in 16 lanes (each every 16th element, then the tail in
/// order): the reductions' and the norms' sums.
#[inline(always)]
pub(crate) fn lanes_sum_of(x: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0.0f32; 16];
    let (chunks, tail) = x.as_chunks::<16>();
    for c in chunks {
        lanes.iter_mut().zip(c).for_each(|(a, &v)| *a += f(v));
    }
    let tail: f32 = tail.iter().map(|&v| f(v)).sum();
    lanes.iter().sum::<f32>() + tail
}

/// Layer normalization (or RMS normalization when `rms`) of `x` viewed as `[outer, inner]`,
/// each row normalized over its `inner` elements, then `* scale[j] + bias[j]`.
pub fn layer_norm(
    x: &[f32],
    scale: &[f32],
    bias: Option<&[f32]>,
    inner: usize,
    epsilon: f32,
    rms: bool,
    y: &mut [f32],
) {
    if inner == 0 {
        return;
    }
    let scale = &scale[..inner];
    // Built for the widest instruction set (the lanes' sums in one register): the same
    // operations in the same order, so the same values on every build, bit for bit but
    // for a NaN's sign and payload (where two NaNs meet, LLVM's vector build may order an
    // addition's or a product's operands otherwise, and x86 keeps the first operand's
    // NaN: found by review). Kernel only, one
    // thread (Intel Xeon, AVX-512; `--example norm_bench`): RMS rows 64x256 5.6 -> 3.4-3.9
    // us, 197x384 23.0 -> 16.1; LayerNorm rows 64x256 9.7 -> 7.5, 197x384 39.8 -> 30.1.
    crate::arch::widest(
        #[inline(always)]
        || layer_norm_rows(x, scale, bias, inner, epsilon, rms, y),
    );
}

/// [`layer_norm`]'s rows, inlined into each instruction set's build.
#[inline(always)]
fn layer_norm_rows(
    x: &[f32],
    scale: &[f32],
    bias: Option<&[f32]>,
    inner: usize,
    epsilon: f32,
    rms: bool,
    y: &mut [f32],
) {
    for (xs, ys) in x.chunks_exact(inner).zip(y.chunks_exact_mut(inner)) {
        // Passes in 16 f32 lanes. The mean is kept as hi + lo: `v - hi` is exact for the
        // values near a large mean, and `lo` (the mean of those differences) corrects hi's
        // rounding, so a row of 1e4 + small noise keeps its noise's digits.
        let n = inner as f32;
        let (hi, lo) = if rms {
            (0.0, 0.0)
        } else {
            let hi = lanes_sum(xs) / n;
            (hi, lanes_sum_of(xs, |v| v - hi) / n)
        };
        let centred = |v: f32| (v - hi) - lo;
        let var = lanes_sum_of(xs, |v| centred(v) * centred(v)) / n;
        let inv = 1.0 / (var + epsilon).sqrt();
        match bias {
            Some(b) => {
                for ((o, &v), (&s, &b)) in ys.iter_mut().zip(xs).zip(scale.iter().zip(&b[..inner])) {
                    *o = centred(v) * inv * s + b;
                }
            }
            None => ys.iter_mut().zip(xs).zip(scale).for_each(|((o, &v), &s)| *o = centred(v) * inv * s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The widest instruction set's build of the norms' rows gives the bits of the
    /// baseline build (this test's own, calling the rows directly): rows of 1 to 300
    /// elements, about a large mean, NaN and infinities among them; a row with two NaNs
    /// of different payloads gives NaN on both (which NaN may differ).
    #[test]
    fn the_norms_give_the_same_bits_on_every_build() {
        for inner in [1usize, 15, 16, 17, 64, 200, 300] {
            let rows = 5;
            let mut x: Vec<f32> = (0..rows * inner)
                .map(|i| 1e3 + ((i * 37 % 101) as f32 - 50.0) * 0.37 + (i % 7) as f32 * 1e-3)
                .collect();
            if inner > 16 {
                (x[inner + 3], x[2 * inner + 1]) = (f32::NAN, f32::INFINITY);
            }
            let scale: Vec<f32> = (0..inner).map(|i| 0.5 + i as f32 * 0.01).collect();
            let bias: Vec<f32> = (0..inner).map(|i| i as f32 * -0.02).collect();
            for (rms, b) in [(true, None), (false, None), (false, Some(&bias[..]))] {
                let (mut wide, mut base) = (vec![0.0f32; x.len()], vec![0.0f32; x.len()]);
                layer_norm(&x, &scale, b, inner, 1e-5, rms, &mut wide);
                layer_norm_rows(&x, &scale, b, inner, 1e-5, rms, &mut base);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&wide), bits(&base), "inner {inner} rms {rms} bias {}", b.is_some());
            }
        }
        // Two NaNs of different payloads in one row: NaN either way, the rest of the rows
        // bit for bit.
        let mut x: Vec<f32> = (0..64).map(|i| i as f32 * 0.25 - 3.0).collect();
        (x[0], x[16]) = (f32::from_bits(0x7fc0_1234), f32::from_bits(0xffc0_0000));
        let scale = vec![1.5f32; 32];
        for rms in [true, false] {
            let (mut wide, mut base) = (vec![0.0f32; 64], vec![0.0f32; 64]);
            layer_norm(&x, &scale, None, 32, 1e-5, rms, &mut wide);
            layer_norm_rows(&x, &scale, None, 32, 1e-5, rms, &mut base);
            assert!(wide[..32].iter().chain(&base[..32]).all(|v| v.is_nan()), "rms {rms}");
            assert_eq!(
                wide[32..].iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                base[32..].iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
    }

    /// Rows in blocks with one Exp call, or on AVX-512 row by row in three passes (also
    /// for LogSoftmax), give each row's own softmax, bit for bit: rows of 1 to 197, whose
    /// ends fall inside the Exp kernel's blocks and the AVX-512 rows' masked tails, with
    /// -inf, NaN, terms flushed to 0 (more than 87 below the maximum), a row whose
    /// maximum is +0 and -0, and one of -inf only (a NaN's payload may differ).
    #[test]
    fn softmax_in_blocks_of_rows_gives_each_rows_bits() {
        for n in [64usize, 197, 5, 1, 16, 17, 31] {
            let rows = 3 * BLOCK / n + 6;
            let mut x: Vec<f32> = (0..rows * n).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.17).collect();
            x[3 % n] = f32::NEG_INFINITY;
            x[n + n / 2] = f32::NAN;
            x[2 * n + n - 1] = 120.0;
            for (j, v) in x[3 * n..4 * n].iter_mut().enumerate() {
                *v = if j % 2 == 0 { -0.0 } else { 0.0 };
            }
            x[3 * n + n / 3] = -3.0;
            x[4 * n..5 * n].fill(f32::NEG_INFINITY);
            for log in [false, true] {
                let mut blocks = vec![0.0; x.len()];
                softmax(&x, &mut blocks, rows, n, 1, log);
                let mut one = vec![0.0; n];
                for (r, got) in blocks.chunks(n).enumerate() {
                    softmax_row(&x[r * n..][..n], &mut one, log);
                    let same =
                        got.iter().zip(&one).all(|(a, b)| a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan());
                    assert!(same, "n {n} row {r} log {log}: {got:?} vs {one:?}");
                }
            }
        }
    }

    /// Along an axis other than the last (`inner` > 1), each column gets the bits its row
    /// gets along the last axis, the columns transposed into rows (on AVX-512, from
    /// `COLS_MIN` columns; elsewhere within rounding): axes of 1 to 40 elements, 4 to 35
    /// columns (a masked last vector), with -inf, NaN, terms flushed to 0 and a column
    /// whose maximum is +0 and -0; and tensors of no element.
    #[test]
    fn softmax_along_a_middle_axis_gives_its_rows_bits() {
        let avx512 = crate::arch::Level::detected() == crate::arch::Level::Avx512;
        // No element: an axis after this one, or before it, of size 0.
        for (outer, n, inner) in [(2usize, 3usize, 0usize), (0, 3, 4), (0, 3, 1)] {
            softmax(&[], &mut [], outer, n, inner, false);
            softmax(&[], &mut [], outer, n, inner, true);
        }
        for (outer, n, inner) in
            [(2usize, 17usize, 4usize), (1, 40, 16), (3, 5, 35), (1, 1, 7), (2, 16, 5), (1, 33, 20)]
        {
            let len = outer * n * inner;
            let mut x: Vec<f32> = (0..len).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.17).collect();
            for (at, v) in [(inner + 1, f32::NEG_INFINITY), (len - 1, f32::NAN), (2 * inner, 120.0)] {
                if let Some(e) = x.get_mut(at) {
                    *e = v;
                }
            }
            for k in 0..n {
                x[k * inner + inner - 1] = if k % 2 == 0 { -0.0 } else { 0.0 };
            }
            let shape = [outer, n, inner];
            let mut rows_in = vec![0.0; len];
            crate::movement::transpose(&x, &shape, &[0, 2, 1], &mut rows_in);
            for log in [false, true] {
                let mut got = vec![0.0; len];
                softmax(&x, &mut got, outer, n, inner, log);
                let mut rows = vec![0.0; len];
                softmax(&rows_in, &mut rows, outer * inner, n, 1, log);
                let mut want = vec![0.0; len];
                crate::movement::transpose(&rows, &[outer, inner, n], &[0, 2, 1], &mut want);
                for (i, (a, b)) in got.iter().zip(&want).enumerate() {
                    let same = a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan();
                    let close = same || (a - b).abs() <= 1e-6 * (1.0 + b.abs());
                    assert!(if avx512 { same } else { close }, "{shape:?} log {log} at {i}: {a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn softmax_and_layer_norm_rows_within_pinned_error_of_f64() {
        for len in [1, 2, 15, 16, 17, 33, 300, 1000] {
            let mut x: Vec<f32> = crate::test_values(2 * len, len as u64).iter().map(|v| v * 20.0).collect();
            if len > 2 {
                x[1] = f32::NEG_INFINITY;
            }
            for log in [false, true] {
                let mut y = vec![0.0; x.len()];
                softmax(&x, &mut y, 2, len, 1, log);
                for (xr, yr) in x.chunks(len).zip(y.chunks(len)) {
                    let max = xr.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
                    let sum: f64 = xr.iter().map(|&v| (f64::from(v) - max).exp()).sum();
                    for (&v, &got) in xr.iter().zip(yr) {
                        let want = (f64::from(v) - max).exp() / sum;
                        if log {
                            let want = f64::from(v) - max - sum.ln();
                            let ok = if want.is_infinite() {
                                f64::from(got) == want
                            } else {
                                (f64::from(got) - want).abs() <= 1e-5 * (1.0 + want.abs())
                            };
                            assert!(ok, "log_softmax len {len}: {got} vs {want}");
                        } else {
                            // x - max is rounded to f32 first: e^x then carries |x - max| ulps;
                            // an element more than 87 below its row's maximum is 0.
                            let bound = if want == 0.0 {
                                0.0
                            } else if f64::from(v) - max < -87.0 {
                                want
                            } else {
                                want * (4e-7 + 1.2e-7 * (f64::from(v) - max).abs()) + 1e-38
                            };
                            assert!((f64::from(got) - want).abs() <= bound, "softmax len {len}: {got} vs {want}");
                        }
                    }
                }
            }
            // Rows around 1.5, and noise of 0.01 on a mean of 1e4 (its digits must survive).
            for (rms, mean, spread) in [(false, 1.5, 4.0), (true, 1.5, 4.0), (false, 1e4, 0.01)] {
                let x: Vec<f32> = crate::test_values(3 * len, 7).iter().map(|v| v * spread + mean).collect();
                let (scale, bias) = (crate::test_values(len, 8), crate::test_values(len, 9));
                let mut y = vec![0.0; x.len()];
                layer_norm(&x, &scale, Some(&bias), len, 1e-5, rms, &mut y);
                for (xr, yr) in x.chunks(len).zip(y.chunks(len)) {
                    let n = len as f64;
                    let mean = if rms { 0.0 } else { xr.iter().map(|&v| f64::from(v)).sum::<f64>() / n };
                    let var = xr.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / n;
                    let inv = 1.0 / (var + 1e-5).sqrt();
                    for (j, (&v, &got)) in xr.iter().zip(yr).enumerate() {
                        let want = (f64::from(v) - mean) * inv * f64::from(scale[j]) + f64::from(bias[j]);
                        assert!(
                            (f64::from(got) - want).abs() <= 2e-6,
                            "layer_norm rms={rms} len {len}: {got} vs {want}"
                        );
                    }
                }
            }
        }
    }
}
