//! F(4x4, 3x3)'s AVX-512 transforms (`super::super`, for the points 0, 1, -1, 2, -1/2 and
//! infinity), on 16 tiles of a tile row at a time, as F(2x2, 3x3)'s in `super`.
//!
//! A tile's input columns are 4 apart, so a patch column for 16 tiles is every fourth of
//! 64 inputs: four loads, two two-source permutes and one shuffle of halves. The 6x6
//! transforms are sums of the inputs by constant coefficients, their zero terms left out
//! and ±1 taken as additions. The outputs of 16 tiles are four rows of 64, the four
//! columns of each tile interleaved by two rounds of permutes.

use std::arch::x86_64::*;
use std::ops::Range;

use super::super::{InputPart, OutRows, Winograd};
use super::{at16, chunk, each_chunk, each_padded_channel};
use crate::arch::mem::{load16, store_first};

/// Bᵀ (6 x 6): the input transform, `V = Bᵀ d B`.
const BT: [[f32; 6]; 6] = [
    [1.0, 1.5, -2.0, -1.5, 1.0, 0.0],
    [0.0, -1.0, -2.5, -0.5, 1.0, 0.0],
    [0.0, 1.0, 0.5, -2.5, 1.0, 0.0],
    [0.0, -0.5, -1.0, 0.5, 1.0, 0.0],
    [0.0, 2.0, -1.0, -2.0, 1.0, 0.0],
    [0.0, 1.0, 1.5, -2.0, -1.5, 1.0],
];

/// Aᵀ (4 x 6): the output transform, `Y = Aᵀ M A`.
const AT: [[f32; 6]; 4] = [
    [1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
    [0.0, 1.0, -1.0, 2.0, -0.5, 0.0],
    [0.0, 1.0, 1.0, 4.0, 0.25, 0.0],
    [0.0, 1.0, -1.0, 8.0, -0.125, 1.0],
];

/// Columns of the padded rows the input transform reads for `tw` tiles a row: whole
/// chunks of 16 tiles read 69 columns each, 64 apart.
pub(crate) fn padded_cols(tw: usize) -> usize {
    64 * tw.div_ceil(16) + 8
}

/// `m x`: each row of `m` by the six vectors of `x`, its terms in order, zero
/// coefficients left out and ±1 taken as an addition or a subtraction.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn times<const R: usize>(m: &[[f32; 6]; R], x: &[__m512; 6]) -> [__m512; R] {
    std::array::from_fn(|i| {
        let mut acc: Option<__m512> = None;
        for (&c, &v) in m[i].iter().zip(x) {
            acc = match (acc, c) {
                (_, 0.0) => acc,
                (None, 1.0) => Some(v),
                (None, _) => Some(_mm512_mul_ps(v, _mm512_set1_ps(c))),
                (Some(a), 1.0) => Some(_mm512_add_ps(a, v)),
                (Some(a), -1.0) => Some(_mm512_sub_ps(a, v)),
                (Some(a), _) => Some(_mm512_fmadd_ps(v, _mm512_set1_ps(c), a)),
            };
        }
        acc.unwrap_or(_mm512_setzero_ps())
    })
}

/// As `super::input_avx512`, in tiles of 4x4 outputs (6x6 patches, 4 apart).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn input(
    w: &Winograd<'_>,
    block: Range<usize>,
    chans: Range<usize>,
    v: InputPart<'_>,
    pad: &mut Vec<f32>,
) -> bool {
    let [_, tw] = w.tiles();
    let (pb, cols) = (block.len() * tw, padded_cols(tw));
    // Lanes 0..8: every fourth of two vectors (lanes 8..16 unused).
    let fourths = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    // A padded row's horizontal transform (Bᵀ on its patch columns) for the 16 tiles from
    // column `b`: patch column j of tile t is column b + 4 t + j.
    let row_h = |pad: &[f32], i: usize, b: usize| -> [__m512; 6] {
        let at = i * cols + b;
        let d: [__m512; 6] = std::array::from_fn(|j| {
            let low = _mm512_permutex2var_ps(load16(at16(pad, at + j)), fourths, load16(at16(pad, at + j + 16)));
            let high = _mm512_permutex2var_ps(load16(at16(pad, at + j + 32)), fourths, load16(at16(pad, at + j + 48)));
            _mm512_shuffle_f32x4::<0x44>(low, high)
        });
        times(&BT, &d)
    };
    each_padded_channel(w, block.clone(), chans, pad, cols, |pad, k| {
        let mut next = 0;
        while next < tw {
            let (tx0, n) = chunk(next, tw);
            let b = 4 * tx0;
            // Rows 4t + 4 and 4t + 5 of a tile row are rows 0 and 1 of the next.
            let (mut h0, mut h1) = (row_h(pad, 0, b), row_h(pad, 1, b));
            for t in 0..block.len() {
                let h = [
                    h0,
                    h1,
                    row_h(pad, 4 * t + 2, b),
                    row_h(pad, 4 * t + 3, b),
                    row_h(pad, 4 * t + 4, b),
                    row_h(pad, 4 * t + 5, b),
                ];
                let at = t * tw + tx0;
                for s in 0..6 {
                    // Bᵀ on the rows of patch column s.
                    let col = times(&BT, &std::array::from_fn(|r| h[r][s]));
                    for (r, &val) in col.iter().enumerate() {
                        store_first(&mut v[6 * r + s][k * pb + at..], n, val);
                    }
                }
                (h0, h1) = (h[4], h[5]);
            }
            next = tx0 + n;
        }
    })
}

/// As `super::output_avx512`, in tiles of 4x4 outputs.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn output(
    w: &Winograd<'_>,
    block: Range<usize>,
    ch: Range<usize>,
    row0: usize,
    m: &[f32],
    y: OutRows<'_, '_>,
) {
    let [_, out_h, out_w] = w.g.out;
    // Two vectors' lanes interleaved: lanes 0..8 of both, then lanes 8..16; then pairs of
    // lanes of two such interleavings, the first or the second half of each.
    let low = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let high = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    let pairs_low = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
    let pairs_high = _mm512_setr_epi32(8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31);
    each_chunk(w, block, ch, row0, m, y, |p: &[__m512; 36], ty, tx0, yk| {
        // Aᵀ M on each column of points, then A on each row of those.
        let cols: [[__m512; 4]; 6] = std::array::from_fn(|j| times(&AT, &std::array::from_fn(|i| p[6 * i + j])));
        let rows: [[__m512; 6]; 4] = std::array::from_fn(|u| std::array::from_fn(|j| cols[j][u]));
        for (u, row) in rows.iter().enumerate() {
            let oy = 4 * ty + u;
            if oy >= out_h {
                break;
            }
            let o = times(&AT, row);
            let (a, b) = (_mm512_permutex2var_ps(o[0], low, o[1]), _mm512_permutex2var_ps(o[0], high, o[1]));
            let (c, d) = (_mm512_permutex2var_ps(o[2], low, o[3]), _mm512_permutex2var_ps(o[2], high, o[3]));
            let out = [
                _mm512_permutex2var_ps(a, pairs_low, c),
                _mm512_permutex2var_ps(a, pairs_high, c),
                _mm512_permutex2var_ps(b, pairs_low, d),
                _mm512_permutex2var_ps(b, pairs_high, d),
            ];
            let valid = out_w - 4 * tx0;
            let dst = &mut yk[(oy - row0) * out_w + 4 * tx0..];
            for (q, &vals) in out.iter().enumerate() {
                if valid > 16 * q {
                    store_first(&mut dst[16 * q..], (valid - 16 * q).min(16), vals);
                }
            }
        }
    });
}
