//! Integer matrix products for the quantized ops: `C[i][j] = Σ_k (A[i][k] - za) ·
//! (B[k][j] - zb[j])` with i32 accumulation, exact for 8-bit operands (|term| ≤ 255² and
//! K up to 33 000 before an i32 could overflow).
//!
//! The operands are widened to i16 with their zero points subtracted as they are packed
//! (so no row/column-sum correction is needed afterwards): A row-major with K padded to
//! even, B as pairs of rows interleaved (`[k/2][n][2]`), so the inner loop is the
//! `a0·b0 + a1·b1` pair-sum the compiler turns into `pmaddwd` / `vpmaddwd`.
//! Then requantization: `y = clamp(round_half_even(acc · scale) + zy)`, the float
//! arithmetic ORT's int8 kernels use.

use crate::conv::Window3d;

/// Columns of C computed together in the inner loop (one accumulator strip).
const STRIP: usize = 64;
/// Rows of C computed together (each B pair-row loaded once for all of them).
const ROWS: usize = 4;

/// A quantized element type: 8-bit integers (the GEMM operands) and the 16-bit ones
/// (Quantize/Dequantize only).
pub trait QInt: Copy + Send + Sync + 'static {
    const MIN: i32;
    const MAX: i32;
    fn to_i32(self) -> i32;
    /// `v` must be in `MIN..=MAX`.
    fn from_i32(v: i32) -> Self;
}

macro_rules! qint {
    ($($t:ty),*) => {$(
        impl QInt for $t {
            const MIN: i32 = <$t>::MIN as i32;
            const MAX: i32 = <$t>::MAX as i32;
            #[inline(always)]
            fn to_i32(self) -> i32 {
                self as i32
            }
            #[inline(always)]
            fn from_i32(v: i32) -> Self {
                v as $t
            }
        }
    )*};
}
qint!(u8, i8, u16, i16, i32);

/// Length of the packed K (K rounded up to even).
pub fn packed_k(k: usize) -> usize {
    k.div_ceil(2) * 2
}

/// Elements [`pack_a`] writes for an m×k A.
pub fn packed_a_len(m: usize, k: usize) -> usize {
    m * packed_k(k)
}

/// Elements [`pack_b`] writes for a k×n B.
pub fn packed_b_len(k: usize, n: usize) -> usize {
    packed_k(k) * n
}

/// Packs A (m×k, row `i` at `a[i * lda..]`) minus its zero points (`za(i)` for row `i`)
/// into `out` ([`packed_a_len`] elements).
pub fn pack_a<T: QInt>(a: &[T], m: usize, k: usize, lda: usize, za: impl Fn(usize) -> i32, out: &mut [i16]) {
    let kp = packed_k(k);
    for (i, row) in out[..m * kp].chunks_exact_mut(kp).enumerate() {
        let z = za(i);
        for (o, &v) in row.iter_mut().zip(&a[i * lda..i * lda + k]) {
            *o = (v.to_i32() - z) as i16;
        }
        row[k..].fill(0);
    }
}

/// Packs B (k×n, row `r` at `b[r * ldb..]`, or k×n read transposed when `trans`: element
/// (r, j) at `b[j * ldb + r]`) minus its zero points (`zb(j)` for column `j`) into `out`
/// ([`packed_b_len`] elements).
pub fn pack_b<T: QInt>(
    b: &[T],
    k: usize,
    n: usize,
    ldb: usize,
    trans: bool,
    zb: impl Fn(usize) -> i32,
    out: &mut [i16],
) {
    let at = |r: usize, j: usize| if trans { b[j * ldb + r] } else { b[r * ldb + j] };
    for p in 0..packed_k(k) / 2 {
        let dst = &mut out[p * 2 * n..(p + 1) * 2 * n];
        let r = 2 * p;
        for j in 0..n {
            let z = zb(j);
            dst[2 * j] = (at(r, j).to_i32() - z) as i16;
            dst[2 * j + 1] = if r + 1 < k { (at(r + 1, j).to_i32() - z) as i16 } else { 0 };
        }
    }
}

/// Packs the im2col matrix of `channels` planes of one image (`x`, planes of
/// `g.plane()` elements) minus the zero point `zx` as a B of depth `channels · taps` and
/// `g.positions()` columns: row `(c, kd, ky, kx)`, column the output position. Taps in the
/// padding are 0 (the zero point's value).
pub fn pack_im2col<T: QInt>(x: &[T], channels: usize, g: &Window3d, zx: i32, out: &mut [i16]) {
    let n = g.positions();
    let k = channels * g.kernel.iter().product::<usize>();
    let plane = g.plane();
    let mut row = 0;
    for c in 0..channels {
        let src = &x[c * plane..(c + 1) * plane];
        for t in crate::conv::taps(g) {
            let base = (row / 2) * 2 * n + row % 2;
            for (pos, o) in crate::conv::outputs(g).enumerate() {
                out[base + 2 * pos] = match g.tap(o, t) {
                    Some(i) => (src[i].to_i32() - zx) as i16,
                    None => 0,
                };
            }
            row += 1;
        }
    }
    if k % 2 == 1 {
        let base = (k / 2) * 2 * n + 1;
        for pos in 0..n {
            out[base + 2 * pos] = 0;
        }
    }
}

/// `c` (m×n, row stride `ldc`) = packed A × packed B, both packed with depth `k`.
pub fn qgemm_packed(m: usize, n: usize, k: usize, a: &[i16], b: &[i16], c: &mut [i32], ldc: usize) {
    let kp = packed_k(k);
    let pairs = kp / 2;
    let mut i0 = 0;
    while i0 < m {
        let rows = ROWS.min(m - i0);
        let mut j0 = 0;
        while j0 < n {
            let cols = STRIP.min(n - j0);
            let mut acc = [[0i32; STRIP]; ROWS];
            for p in 0..pairs {
                let bp = &b[p * 2 * n + 2 * j0..p * 2 * n + 2 * (j0 + cols)];
                for (r, acc_r) in acc.iter_mut().enumerate().take(rows) {
                    let ar = &a[(i0 + r) * kp + 2 * p..(i0 + r) * kp + 2 * p + 2];
                    let (a0, a1) = (ar[0] as i32, ar[1] as i32);
                    for (s, pair) in acc_r[..cols].iter_mut().zip(bp.chunks_exact(2)) {
                        *s += a0 * pair[0] as i32 + a1 * pair[1] as i32;
                    }
                }
            }
            for (r, acc_r) in acc.iter().enumerate().take(rows) {
                c[(i0 + r) * ldc + j0..(i0 + r) * ldc + j0 + cols].copy_from_slice(&acc_r[..cols]);
            }
            j0 += cols;
        }
        i0 += rows;
    }
}

/// `y = clamp(round_half_even(v · scale) + zy)` to `T`'s range: the clamp is taken in
/// float before rounding, so NaN gives the type's minimum (as ORT's kernels do).
#[inline(always)]
pub fn requantize<T: QInt>(v: f32, zy: i32) -> T {
    let lo = (T::MIN - zy) as f32;
    let hi = (T::MAX - zy) as f32;
    T::from_i32(v.max(lo).min(hi).round_ties_even() as i32 + zy)
}

/// Rows of i32 accumulators (`acc`, m×n) scaled and rounded into `y`: column `j` of
/// every row uses `scale[j]` (or `scale[0]` if one).
pub fn requantize_cols<T: QInt>(acc: &[i32], n: usize, scale: &[f32], zy: i32, y: &mut [T]) {
    for (arow, yrow) in acc.chunks_exact(n).zip(y.chunks_exact_mut(n)) {
        if scale.len() == 1 {
            for (o, &v) in yrow.iter_mut().zip(arow) {
                *o = requantize::<T>(v as f32 * scale[0], zy);
            }
        } else {
            for ((o, &v), &s) in yrow.iter_mut().zip(arow).zip(scale) {
                *o = requantize::<T>(v as f32 * s, zy);
            }
        }
    }
}

/// One row of accumulators plus `bias`, scaled by `scale` and rounded into `y`.
pub fn requantize_row<T: QInt>(acc: &[i32], bias: i32, scale: f32, zy: i32, y: &mut [T]) {
    for (o, &v) in y.iter_mut().zip(acc) {
        *o = requantize::<T>(v.wrapping_add(bias) as f32 * scale, zy);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[u8], b: &[i8], m: usize, n: usize, k: usize, za: i32, zb: &[i32]) -> Vec<i32> {
        let mut c = vec![0; m * n];
        for i in 0..m {
            for j in 0..n {
                let z = if zb.len() == 1 { zb[0] } else { zb[j] };
                c[i * n + j] = (0..k).map(|p| (a[i * k + p] as i32 - za) * (b[p * n + j] as i32 - z)).sum();
            }
        }
        c
    }

    #[test]
    fn packed_product_matches_the_definition_on_odd_sizes() {
        for &(m, n, k) in &[(1, 1, 1), (5, 70, 3), (9, 130, 17), (4, 64, 2)] {
            let a: Vec<u8> = (0..m * k).map(|i| (i * 37 % 256) as u8).collect();
            let b: Vec<i8> = (0..k * n).map(|i| ((i * 91 % 256) as i32 - 128) as i8).collect();
            let zb: Vec<i32> = (0..n).map(|j| (j % 7) as i32 - 3).collect();
            for zb in [vec![5], zb] {
                let mut pa = vec![0; packed_a_len(m, k)];
                let mut pb = vec![0; packed_b_len(k, n)];
                pack_a(&a, m, k, k, |_| 131, &mut pa);
                pack_b(&b, k, n, n, false, |j| if zb.len() == 1 { zb[0] } else { zb[j] }, &mut pb);
                let mut c = vec![0; m * n];
                qgemm_packed(m, n, k, &pa, &pb, &mut c, n);
                assert_eq!(c, naive(&a, &b, m, n, k, 131, &zb), "{m}x{n}x{k}");
            }
        }
    }

    #[test]
    fn transposed_b_packs_like_its_transpose() {
        let (k, n) = (3, 2);
        let bt: Vec<u8> = vec![1, 2, 3, 4, 5, 6]; // n×k
        let b: Vec<u8> = vec![1, 4, 2, 5, 3, 6]; // k×n
        let (mut p1, mut p2) = (vec![0; packed_b_len(k, n)], vec![0; packed_b_len(k, n)]);
        pack_b(&bt, k, n, k, true, |_| 1, &mut p1);
        pack_b(&b, k, n, n, false, |_| 1, &mut p2);
        assert_eq!(p1, p2);
    }

    #[test]
    fn requantize_rounds_half_to_even_and_saturates() {
        assert_eq!(requantize::<u8>(2.5, 0), 2);
        assert_eq!(requantize::<u8>(3.5, 0), 4);
        assert_eq!(requantize::<u8>(-0.5, 10), 10);
        assert_eq!(requantize::<u8>(300.0, 10), 255);
        assert_eq!(requantize::<i8>(-300.0, 0), -128);
        assert_eq!(requantize::<i8>(f32::NAN, 3), -128);
    }
}
