//! The AVX-512 build of the float transpose: 16 x 16 blocks through registers.

use crate::arch::mem::{load16, store16, store_first};
use std::arch::x86_64::*;

/// `y[c][r] = x[r][c]` for `x` of `rows` x `cols` (row-major): 16 x 16 blocks transposed
/// in registers (16 loads, 64 shuffles, 16 stores), the last rows' blocks with their
/// missing rows as zeros and stored under a lane count, the last columns element by element.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn transpose_avx512(x: &[f32], rows: usize, cols: usize, y: &mut [f32]) {
    assert!(x.len() == rows * cols && y.len() == rows * cols, "transpose: x and y must hold rows*cols");
    transpose_into_avx512(x, rows, cols, cols, y, |c| c * rows);
}

/// [`transpose_avx512`] with `x`'s rows `ldx` apart and column `c` of `x` written to
/// `y[dst(c)..][..rows]`: into a padded layout.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn transpose_into_avx512(
    x: &[f32],
    rows: usize,
    cols: usize,
    ldx: usize,
    y: &mut [f32],
    dst: impl Fn(usize) -> usize,
) {
    assert!(cols <= ldx || rows <= 1, "transpose: rows overlap");
    let full_cols = cols / 16 * 16;
    for r0 in (0..rows).step_by(16) {
        let n = (rows - r0).min(16);
        for c0 in (0..full_cols).step_by(16) {
            let mut v = [_mm512_setzero_ps(); 16];
            for (i, v) in v.iter_mut().enumerate().take(n) {
                *v = load16(x[(r0 + i) * ldx + c0..][..16].try_into().expect("16 floats"));
            }
            let v = transpose16(v);
            for (i, &v) in v.iter().enumerate() {
                let out = &mut y[dst(c0 + i) + r0..][..n];
                if n == 16 {
                    store16(out.try_into().expect("16 floats"), v);
                } else {
                    store_first(out, n, v);
                }
            }
        }
        for c in full_cols..cols {
            let out = &mut y[dst(c) + r0..][..n];
            for (i, o) in out.iter_mut().enumerate() {
                *o = x[(r0 + i) * ldx + c];
            }
        }
    }
}

/// The 16 x 16 transpose of the rows `r`: element `j` of the result's vector `i` is
/// element `i` of `r[j]`.
#[target_feature(enable = "avx512f")]
#[inline]
fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
    // Pairs of rows interleaved: in each 128-bit lane, columns 4l, 4l+1 (lo) or 4l+2, 4l+3 (hi).
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4j + q]: in each 128-bit lane l, column 4l + q of rows 4j..4j+4.
    let mut u = [_mm512_setzero_ps(); 16];
    for j in 0..4 {
        u[4 * j] = _mm512_shuffle_ps::<0x44>(t[4 * j], t[4 * j + 2]);
        u[4 * j + 1] = _mm512_shuffle_ps::<0xEE>(t[4 * j], t[4 * j + 2]);
        u[4 * j + 2] = _mm512_shuffle_ps::<0x44>(t[4 * j + 1], t[4 * j + 3]);
        u[4 * j + 3] = _mm512_shuffle_ps::<0xEE>(t[4 * j + 1], t[4 * j + 3]);
    }
    // Then the 128-bit lanes, in two rounds.
    let mut v = [_mm512_setzero_ps(); 16];
    for h in 0..2 {
        for q in 0..4 {
            let (a, b) = (u[8 * h + q], u[8 * h + 4 + q]);
            v[8 * h + q] = _mm512_shuffle_f32x4::<0x88>(a, b);
            v[8 * h + 4 + q] = _mm512_shuffle_f32x4::<0xDD>(a, b);
        }
    }
    let mut w = [_mm512_setzero_ps(); 16];
    for q in 0..8 {
        w[q] = _mm512_shuffle_f32x4::<0x88>(v[q], v[8 + q]);
        w[8 + q] = _mm512_shuffle_f32x4::<0xDD>(v[q], v[8 + q]);
    }
    w
}
