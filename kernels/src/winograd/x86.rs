//! The AVX-512 transforms of the Winograd convolution: safe `#[target_feature]` functions
//! that `arch::dispatch` calls once an `Isa` proves the features; loads and stores go
//! through `arch::mem`'s slice-taking helpers.
//!
//! Both run on 16 tiles of a tile row at a time. In tiles of 2x2 (here; 4x4 in [`f4`]) a
//! tile's input columns are 2 apart, so a patch column is the even or the odd lanes of 32
//! inputs (two loads and a permute); the lanes outside the input row load zero, which is
//! the padding. The outputs of 16 tiles are two rows of 32, the two columns of each tile
//! interleaved by a permute. The padded rows' copy and the output loop are the two
//! sizes' ([`each_padded_channel`], [`each_chunk`]).

use std::arch::x86_64::*;
use std::ops::Range;

use super::{InputPart, OutRows, Winograd};

mod f4;
use crate::arch::mem::{load16, load_lanes, store_first};
use crate::arch::Level;

/// Columns of the padded rows the input transform reads for `tw` tiles a row: whole
/// chunks of 16 tiles read 34 columns each, 32 apart.
pub(crate) fn padded_cols(tw: usize) -> usize {
    32 * tw.div_ceil(16) + 16
}

/// The first tile and the count of the chunk of a row of `tw` tiles that starts at tile
/// `next`: 16 tiles, the last chunk moved back over tiles done already (the same values
/// written again) rather than masked, when the row has 16.
#[inline(always)]
pub(super) fn chunk(next: usize, tw: usize) -> (usize, usize) {
    let tx0 = if tw >= 16 { next.min(tw - 16) } else { next };
    (tx0, (tw - tx0).min(16))
}

/// The 16 floats of `x` from `at`.
#[inline(always)]
pub(super) fn at16(x: &[f32], at: usize) -> &[f32; 16] {
    x[at..at + 16].try_into().expect("16 floats")
}

/// Whether every value of `x` is finite and of a magnitude within `limit` (as bits; the
/// filters' `input_limit`).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn row_in_range(x: &[f32], limit: u32) -> bool {
    let (chunks, rest) = x.as_chunks::<16>();
    let (magnitude, limit_v) = (_mm512_set1_epi32(0x7fff_ffff), _mm512_set1_epi32(limit as i32));
    let mut over = 0u16;
    for c in chunks {
        let bits = _mm512_and_si512(_mm512_castps_si512(load16(c)), magnitude);
        over |= _mm512_cmpgt_epu32_mask(bits, limit_v);
    }
    over == 0 && super::within(rest, limit)
}

/// `v` (point ξ's `[chans.len()][pb]` in `v[ξ]`): the transformed input of channels
/// `chans` in the tile rows `block`. `pad` is working memory for one channel's rows,
/// zero-padded. Returns false if an input the part reads is out of range
/// (`super::in_range`); `v` is then not all written.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn input_avx512(
    w: &Winograd<'_>,
    block: Range<usize>,
    chans: Range<usize>,
    v: InputPart<'_>,
    pad: &mut Vec<f32>,
) -> bool {
    if w.side() == 4 {
        return f4::input(w, block, chans, v, pad);
    }
    let [_, tw] = w.tiles();
    let (pb, cols) = (block.len() * tw, padded_cols(tw));
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    // A padded row's horizontal transform (d0 - d2, d1 + d2, d2 - d1, d1 - d3 of its
    // columns) for the 16 tiles from column `b`.
    let row_h = |pad: &[f32], i: usize, b: usize| -> [__m512; 4] {
        let at = i * cols + b;
        let (l0, h0) = (load16(at16(pad, at)), load16(at16(pad, at + 16)));
        let (l2, h2) = (load16(at16(pad, at + 2)), load16(at16(pad, at + 18)));
        let (d0, d1) = (_mm512_permutex2var_ps(l0, evens, h0), _mm512_permutex2var_ps(l0, odds, h0));
        let (d2, d3) = (_mm512_permutex2var_ps(l2, evens, h2), _mm512_permutex2var_ps(l2, odds, h2));
        [_mm512_sub_ps(d0, d2), _mm512_add_ps(d1, d2), _mm512_sub_ps(d2, d1), _mm512_sub_ps(d1, d3)]
    };
    each_padded_channel(w, block.clone(), chans, pad, cols, |pad, k| {
        let mut next = 0;
        while next < tw {
            let (tx0, n) = chunk(next, tw);
            let b = 2 * tx0;
            // Rows 2t and 2t + 1 of a tile row are rows 2 and 3 of the one before.
            let (mut h0, mut h1) = (row_h(pad, 0, b), row_h(pad, 1, b));
            for t in 0..block.len() {
                let (h2, h3) = (row_h(pad, 2 * t + 2, b), row_h(pad, 2 * t + 3, b));
                let at = t * tw + tx0;
                for s in 0..4 {
                    // Bᵀ on the rows: h0 - h2, h1 + h2, h2 - h1, h1 - h3.
                    let col = [
                        _mm512_sub_ps(h0[s], h2[s]),
                        _mm512_add_ps(h1[s], h2[s]),
                        _mm512_sub_ps(h2[s], h1[s]),
                        _mm512_sub_ps(h1[s], h3[s]),
                    ];
                    for (r, &val) in col.iter().enumerate() {
                        store_first(&mut v[4 * r + s][k * pb + at..], n, val);
                    }
                }
                (h0, h1) = (h2, h3);
            }
            next = tx0 + n;
        }
    })
}

/// The input side of both tile sizes: for each channel `k` of `chans`, the input rows the
/// tile rows `block` read copied into `pad` (rows of `cols` columns: padded row `i` is
/// input row `side * block.start + i - pad_top`, column `j` input column `j - pad_left`;
/// the rows and columns outside the input stay zero for every channel), then
/// `transform(pad, k)`. Returns false, stopping there, at a row out of range
/// (`super::in_range`).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(super) fn each_padded_channel(
    w: &Winograd<'_>,
    block: Range<usize>,
    chans: Range<usize>,
    pad: &mut Vec<f32>,
    cols: usize,
    mut transform: impl FnMut(&[f32], usize),
) -> bool {
    let g = w.g;
    let [_, in_h, in_w] = g.input;
    let (pt, pl) = (g.pad_begin[1], g.pad_begin[2]);
    let prows = w.side() * block.len() + 2;
    pad.clear();
    pad.resize(prows * cols, 0.0);
    let first = (w.side() * block.start) as isize - pt as isize;
    // The padded rows in the input: 0 <= first + i < in_h.
    let lo = (-first).clamp(0, prows as isize) as usize;
    let rows = lo..(in_h as isize - first).clamp(lo as isize, prows as isize) as usize;
    for (k, c) in chans.enumerate() {
        let plane = &w.x[c * in_h * in_w..][..in_h * in_w];
        for i in rows.clone() {
            let src = (first + i as isize) as usize * in_w;
            let row = &plane[src..src + in_w];
            if !row_in_range(row, w.filters.input_limit()) {
                return false;
            }
            pad[i * cols + pl..][..in_w].copy_from_slice(row);
        }
        transform(pad, k);
    }
    true
}

/// The outputs of channels `ch` in the tile rows `block` from their products `m`
/// (`[points][ch.len()][pb]`), with the epilogue, into `y` (`[ch.len()][rows][out_w]`, its
/// first row output row `row0`).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn output_avx512(
    w: &Winograd<'_>,
    block: Range<usize>,
    ch: Range<usize>,
    row0: usize,
    m: &[f32],
    y: OutRows<'_, '_>,
) {
    if w.side() == 4 {
        return f4::output(w, block, ch, row0, m, y);
    }
    let [_, out_h, out_w] = w.g.out;
    // Tile columns 0 and 1 interleaved: lanes 0..8 of both, then lanes 8..16.
    let low = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let high = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    each_chunk(w, block, ch, row0, m, y, |p: &[__m512; 16], ty, tx0, yk| {
        // Aᵀ M: rows m0 + m1 + m2 and m1 - m2 - m3; then the same on columns.
        let s: [[__m512; 4]; 2] = std::array::from_fn(|u| {
            std::array::from_fn(|c| {
                let (m0, m1, m2, m3) = (p[c], p[4 + c], p[8 + c], p[12 + c]);
                if u == 0 {
                    _mm512_add_ps(_mm512_add_ps(m0, m1), m2)
                } else {
                    _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3)
                }
            })
        });
        for (u, su) in s.iter().enumerate() {
            let oy = 2 * ty + u;
            if oy >= out_h {
                break;
            }
            let left = _mm512_add_ps(_mm512_add_ps(su[0], su[1]), su[2]);
            let right = _mm512_sub_ps(_mm512_sub_ps(su[1], su[2]), su[3]);
            let valid = out_w - 2 * tx0;
            let row = &mut yk[(oy - row0) * out_w + 2 * tx0..];
            store_first(row, valid.min(16), _mm512_permutex2var_ps(left, low, right));
            if valid > 16 {
                store_first(&mut row[16..], (valid - 16).min(16), _mm512_permutex2var_ps(left, high, right));
            }
        }
    });
}

/// The output side of both tile sizes: for each channel `k` of `ch` and each chunk of up
/// to 16 tiles of a tile row of `block` (tile row `ty`, first tile `tx0`), the chunk's
/// `P` points of `m` (`[P][ch.len()][pb]`, lanes past the chunk zero), given to
/// `put(points, ty, tx0, channel k's rows of y)` to transform back and store; then the
/// epilogue on the block's rows of the channel while they are in L1.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(super) fn each_chunk<const P: usize>(
    w: &Winograd<'_>,
    block: Range<usize>,
    ch: Range<usize>,
    row0: usize,
    m: &[f32],
    mut y: OutRows<'_, '_>,
    mut put: impl FnMut(&[__m512; P], usize, usize, &mut [f32]),
) {
    let (g, mg, side) = (w.g, ch.len(), w.side());
    let [_, out_h, out_w] = g.out;
    let [th, tw] = w.tiles();
    let pb = block.len() * tw;
    debug_assert!(block.end <= th && P == w.points());
    let rows = y.rows(mg, out_w);
    let positions = g.positions();
    for (k, channel) in ch.enumerate() {
        let yk = y.channel(k, rows * out_w);
        for (t, ty) in block.clone().enumerate() {
            let mut next = 0;
            while next < tw {
                let (tx0, n) = chunk(next, tw);
                let mask = ((1u32 << n) - 1) as u16;
                let at = (t * tw + tx0) as isize;
                let p: [__m512; P] = std::array::from_fn(|xi| {
                    let row = &m[(xi * mg + k) * pb..][..pb];
                    if n == 16 {
                        load16(at16(row, at as usize))
                    } else {
                        load_lanes(row, at, mask)
                    }
                });
                put(&p, ty, tx0, yk);
                next = tx0 + n;
            }
        }
        // The epilogue on the block's output rows of channel k while they are in L1.
        let (first, last) = (side * block.start, (side * block.end).min(out_h));
        let part = &mut yk[(first - row0) * out_w..(last - row0) * out_w];
        w.epilogue.apply(Level::Avx512, part, part.len(), positions, channel..channel + 1, first * out_w..last * out_w);
    }
}
