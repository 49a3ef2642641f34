//! The AVX-512 build of the direct convolution: safe `#[target_feature]` functions that
//! `arch::dispatch` calls once an `Isa` proves the features; vector loads and stores go
//! through `arch::mem`'s reference-taking helpers.

use std::arch::x86_64::*;
use std::ops::Range;

use super::{Direct, BLOCK};
use crate::arch::mem::{load16, store16, store_first};
use crate::arch::Level;

/// The most outputs of a row per tile of `nb` blocks: 6 × 4 blocks = 24 accumulators, 4
/// filter vectors and a broadcast in the 32 zmm; one or two blocks take 8 outputs, so a
/// step of depth still makes enough multiply-adds per load. (More tile shapes cost more
/// than they gain: past about a hundred of them the compiler stops inlining the tiles
/// and the accumulators leave the registers, 2x slower.)
const fn r_max(nb: usize) -> usize {
    match nb {
        1 | 2 => 8,
        _ => 6,
    }
}

/// Where a call's outputs are: `rows` output rows of `cols` outputs (one row of all
/// positions for a 1x1 convolution that needs no padding), row `oy`'s first input at
/// `oy * row_step` of a padded plane.
struct Geo {
    rows: usize,
    cols: usize,
    row_step: usize,
    plane: usize,
    cg: usize,
    /// Kernel rows and columns, and the input offset of one step along each.
    kh: usize,
    kw: usize,
    ky_step: usize,
    kx_step: usize,
    positions: usize,
}

/// See [`Direct::run`].
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn direct_avx512(d: &Direct<'_>, channels: Range<usize>, y: &mut [f32], carry: &mut Vec<f32>) {
    let g = d.g;
    let (sy, sx) = (g.stride[1], g.stride[2]);
    let (kh, kw) = (g.kernel[1], g.kernel[2]);
    let cols_in = d.src.cols;
    let plane = d.src.rows * cols_in;
    let positions = g.positions();
    let flat = g.is_pointwise();
    let (rows, cols) = if flat { (1, positions) } else { (g.out[1], g.out[2]) };
    let geo = Geo {
        rows,
        cols,
        row_step: sy * cols_in,
        plane,
        cg: d.cg,
        kh,
        kw,
        ky_step: g.dilation[1] * cols_in,
        kx_step: g.dilation[2],
        positions,
    };
    let blocks = channels.len().div_ceil(BLOCK);
    if wide(d, &geo, flat) {
        for b in 0..blocks {
            let first = channels.start + b * BLOCK;
            let ch = first..(first + BLOCK).min(channels.end);
            let y = &mut y[(first - channels.start) * positions..][..ch.len() * positions];
            match sx {
                1 => wide_rows::<1>(d, &geo, ch, y),
                _ => wide_rows::<2>(d, &geo, ch, y),
            }
        }
        return;
    }
    let mut b = 0;
    while b < blocks {
        let nb = (blocks - b).min(4);
        let first = channels.start + b * BLOCK;
        let ch = first..(first + nb * BLOCK).min(channels.end);
        let y = &mut y[(first - channels.start) * positions..][..ch.len() * positions];
        match (nb, sx) {
            (4, 1) => block_rows::<4, 1>(d, &geo, ch, y, carry),
            (3, 1) => block_rows::<3, 1>(d, &geo, ch, y, carry),
            (2, 1) => block_rows::<2, 1>(d, &geo, ch, y, carry),
            (1, 1) => block_rows::<1, 1>(d, &geo, ch, y, carry),
            (4, _) => block_rows::<4, 2>(d, &geo, ch, y, carry),
            (3, _) => block_rows::<3, 2>(d, &geo, ch, y, carry),
            (2, _) => block_rows::<2, 2>(d, &geo, ch, y, carry),
            _ => block_rows::<1, 2>(d, &geo, ch, y, carry),
        }
        b += nb;
    }
}

/// Input channels per depth chunk: a chunk's filters (at most this many taps of 4
/// blocks, 256 KiB) stay in L2 while every tile of the block reads them. A deeper
/// convolution (512 channels of 3x3 is 1.2 MB a block) is run chunk by chunk, each tile's
/// sums carried from one chunk to the next in `carry`: the same chain of fused
/// multiply-adds, so the same bits.
const CHUNK_TAPS: usize = 1024;

/// The outputs of channels `ch` (at most `NB` blocks) into `y` (their rows).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn block_rows<const NB: usize, const S: usize>(
    d: &Direct<'_>,
    geo: &Geo,
    ch: Range<usize>,
    y: &mut [f32],
    carry: &mut Vec<f32>,
) {
    let taps = geo.kh * geo.kw;
    let kk = geo.cg * taps;
    let first_block = ch.start / BLOCK;
    let w: [&[[f32; BLOCK]]; NB] =
        std::array::from_fn(|i| d.w[(first_block + i) * kk * BLOCK..][..kk * BLOCK].as_chunks().0);
    let bias: Option<[__m512; NB]> = d.bias.map(|b| {
        std::array::from_fn(|i| {
            let mut lanes = [0.0f32; BLOCK];
            let at = ch.start + i * BLOCK;
            let n = BLOCK.min(ch.end.saturating_sub(at));
            lanes[..n].copy_from_slice(&b[at..at + n]);
            load16(&lanes)
        })
    });
    let per_chunk = (CHUNK_TAPS / taps).clamp(1, geo.cg);
    let chunked = per_chunk < geo.cg;
    if chunked && carry.len() < geo.positions * NB * BLOCK {
        carry.resize(geo.positions * NB * BLOCK, 0.0);
    }
    let carry: &mut [[[f32; BLOCK]; NB]] =
        if chunked { carry[..geo.positions * NB * BLOCK].as_chunks_mut().0.as_chunks_mut().0 } else { &mut [] };
    let mut c0 = 0;
    while c0 < geo.cg {
        let cs = c0..(c0 + per_chunk).min(geo.cg);
        for oy in 0..geo.rows {
            let mut ox = 0;
            while ox < geo.cols {
                let r = (geo.cols - ox).min(r_max(NB));
                let at = Tile { base: oy * geo.row_step + ox * S, pos: oy * geo.cols + ox, cs: cs.clone() };
                let carry = if chunked { &mut carry[at.pos..at.pos + r] } else { &mut [] };
                let b = bias.as_ref();
                macro_rules! tiles {
                    ($($n:literal)*) => {
                        match r {
                            $($n => tile::<$n, NB, S>(d, geo, &w, b, &ch, at, carry, y),)*
                            _ => unreachable!("tile of {r} outputs"),
                        }
                    };
                }
                tiles!(1 2 3 4 5 6 7 8);
                ox += r;
            }
        }
        c0 = cs.end;
    }
}

/// A tile's first input (in a padded plane), first output position, and the input
/// channels (of a depth chunk) it sums now.
struct Tile {
    base: usize,
    pos: usize,
    cs: Range<usize>,
}

/// One tile: `R` outputs from position `at.pos`, the channels `ch`, summed over the
/// input channels `at.cs` (from the sums in `carry` after the first chunk, into them
/// before the last).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
fn tile<const R: usize, const NB: usize, const S: usize>(
    d: &Direct<'_>,
    geo: &Geo,
    w: &[&[[f32; BLOCK]]; NB],
    bias: Option<&[__m512; NB]>,
    ch: &Range<usize>,
    at: Tile,
    carry: &mut [[[f32; BLOCK]; NB]],
    y: &mut [f32],
) {
    let mut acc = [[_mm512_setzero_ps(); NB]; R];
    if at.cs.start > 0 {
        for (a, c) in acc.iter_mut().zip(carry.iter()) {
            for (a, c) in a.iter_mut().zip(c) {
                *a = load16(c);
            }
        }
    }
    // The inputs one tap reads: R of them, S apart.
    let span = (R - 1) * S + 1;
    let mut k = at.cs.start * geo.kh * geo.kw;
    for c in at.cs.clone() {
        for ky in 0..geo.kh {
            let row = &d.x[at.base + c * geo.plane + ky * geo.ky_step..];
            for kx in 0..geo.kw {
                let xs = &row[kx * geo.kx_step..][..span];
                let wv: [__m512; NB] = std::array::from_fn(|i| load16(&w[i][k]));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let v = _mm512_set1_ps(xs[r * S]);
                    for (a, &wi) in acc.iter_mut().zip(&wv) {
                        *a = _mm512_fmadd_ps(v, wi, *a);
                    }
                }
                k += 1;
            }
        }
    }
    if at.cs.end < geo.cg {
        for (a, c) in acc.iter().zip(carry.iter_mut()) {
            for (&a, c) in a.iter().zip(c) {
                store16(c, a);
            }
        }
        return;
    }
    // The tile as [output][channel], its epilogue, then transposed into y's rows.
    let mut t = [[[0.0f32; BLOCK]; NB]; R];
    for (tr, ar) in t.iter_mut().zip(&acc) {
        for (i, (ti, &a)) in tr.iter_mut().zip(ar).enumerate() {
            store16(ti, if let Some(b) = bias { _mm512_add_ps(a, b[i]) } else { a });
        }
    }
    let lanes = (NB * BLOCK).min(ch.len());
    let ep = &d.epilogue;
    debug_assert!(ep.scale.is_none(), "the direct convolution takes no scale");
    let flat = t.as_flattened_mut().as_flattened_mut();
    if let Some(act) = &ep.act {
        act.apply(Level::Avx512, flat);
    }
    if let Some(res) = ep.residual {
        for l in 0..lanes {
            let src = &res[(ch.start + l) * geo.positions + at.pos..][..R];
            for (r, &v) in src.iter().enumerate() {
                flat[r * NB * BLOCK + l] += v;
            }
        }
    }
    if let Some(act) = &ep.after {
        act.apply(Level::Avx512, flat);
    }
    for l in 0..lanes {
        let dst = &mut y[l * geo.positions + at.pos..][..R];
        for (r, o) in dst.iter_mut().enumerate() {
            *o = flat[r * NB * BLOCK + l];
        }
    }
}

/// The deepest convolution the wide tiles take: 3->64 channels of 7x7 at stride 2 (a
/// depth of 147) ran 1.11x ORT's time on them and 0.93x on the narrow tiles, 3x3 (27)
/// 1.24x and 1.73x.
const WIDE_DEPTH: usize = 64;

/// Whether the convolution runs on wide tiles: shallow (a stem's 3 input channels of 3x3
/// or 7x7), rows of at least 16 outputs. The narrow tiles broadcast each input and load
/// each tap's filters, `R + NB` loads for `R × NB` multiply-adds, then transpose the tile
/// into NCHW; at a depth of 27 that transpose and those loads were most of the time
/// (3->32 channels of 3x3 at stride 2 on 224x224: 2.25x ORT's time).
fn wide(d: &Direct<'_>, geo: &Geo, flat: bool) -> bool {
    !flat && geo.cols >= 16 && d.cg * geo.kh * geo.kw <= WIDE_DEPTH
}

/// The outputs of channels `ch` (one block) into `y` (their rows), on wide tiles, and on
/// the narrow ones where a wide tile would read past the planes (a last row's end).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn wide_rows<const S: usize>(d: &Direct<'_>, geo: &Geo, ch: Range<usize>, y: &mut [f32]) {
    let kk = geo.cg * geo.kh * geo.kw;
    let block = ch.start / BLOCK;
    let w: &[[f32; BLOCK]] = d.w[block * kk * BLOCK..][..kk * BLOCK].as_chunks().0;
    let ws = [w];
    let bias_lanes: [f32; BLOCK] =
        std::array::from_fn(|l| d.bias.map_or(0.0, |b| b.get(ch.start + l).copied().unwrap_or(0.0)));
    let bias = d.bias.map(|_| [load16(&bias_lanes)]);
    // The last input a wide tile reads, past its first: 16 outputs S apart, the 32 floats
    // loaded at stride 2 reaching one past the last.
    let reach = (geo.cg - 1) * geo.plane + (geo.kh - 1) * geo.ky_step + (geo.kw - 1) * geo.kx_step + 16 * S;
    for oy in 0..geo.rows {
        let mut ox = 0;
        // A row's last tile may have fewer than 16 outputs: it reads past them (inside
        // the padded planes) and stores only them.
        while ox < geo.cols && oy * geo.row_step + ox * S + reach <= d.x.len() {
            let n = (geo.cols - ox).min(16);
            wide_tile::<S>(d, geo, w, &bias_lanes, &ch, oy * geo.row_step + ox * S, oy * geo.cols + ox, n, y);
            ox += n;
        }
        // The wide tiles' epilogue, a row of each channel at a time.
        wide_epilogue(d, geo, &ch, oy * geo.cols..oy * geo.cols + ox, y);
        while ox < geo.cols {
            let base = oy * geo.row_step + ox * S;
            let r = (geo.cols - ox).min(r_max(1));
            let at = Tile { base, pos: oy * geo.cols + ox, cs: 0..geo.cg };
            let b = bias.as_ref();
            macro_rules! tiles {
                ($($n:literal)*) => {
                    match r {
                        $($n => tile::<$n, 1, S>(d, geo, &ws, b, &ch, at, &mut [], y),)*
                        _ => unreachable!("tile of {r} outputs"),
                    }
                };
            }
            tiles!(1 2 3 4 5 6 7 8);
            ox += r;
        }
    }
}

/// One wide tile: `n` (up to 16) outputs of a row from position `pos` (input `base`) for each of the
/// block's channels, one zmm a channel. Each step of depth loads the 16 inputs once (two
/// loads and a permute that keeps the even lanes at stride 2) and makes one fused
/// multiply-add a channel, its filter broadcast: the same sums in the same order as the
/// narrow tiles, then the bias and the epilogue, stored straight into the channels' rows.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
fn wide_tile<const S: usize>(
    d: &Direct<'_>,
    geo: &Geo,
    w: &[[f32; BLOCK]],
    bias: &[f32; BLOCK],
    ch: &Range<usize>,
    base: usize,
    pos: usize,
    n: usize,
    y: &mut [f32],
) {
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let mut acc = [_mm512_setzero_ps(); BLOCK];
    let mut k = 0;
    for c in 0..geo.cg {
        for ky in 0..geo.kh {
            let row = &d.x[base + c * geo.plane + ky * geo.ky_step..];
            for kx in 0..geo.kw {
                let xs = &row[kx * geo.kx_step..][..16 * S];
                let v = if S == 1 {
                    load16(xs.try_into().unwrap())
                } else {
                    let (a, b) = xs.split_at(16);
                    _mm512_permutex2var_ps(load16(a.try_into().unwrap()), evens, load16(b.try_into().unwrap()))
                };
                let wk = &w[k];
                for j in 0..BLOCK {
                    acc[j] = _mm512_fmadd_ps(v, _mm512_set1_ps(wk[j]), acc[j]);
                }
                k += 1;
            }
        }
    }
    for (j, &a) in acc.iter().enumerate().take(ch.len()) {
        let v = if d.bias.is_some() { _mm512_add_ps(a, _mm512_set1_ps(bias[j])) } else { a };
        let out = &mut y[j * geo.positions + pos..];
        if n == 16 {
            store16((&mut out[..16]).try_into().unwrap(), v);
        } else {
            store_first(out, n, v);
        }
    }
}

/// The epilogue (activation, residual, activation) of positions `at` of each of the
/// channels `ch`, elementwise as the narrow tiles apply it.
fn wide_epilogue(d: &Direct<'_>, geo: &Geo, ch: &Range<usize>, at: Range<usize>, y: &mut [f32]) {
    let ep = &d.epilogue;
    debug_assert!(ep.scale.is_none(), "the direct convolution takes no scale");
    if at.is_empty() || (ep.act.is_none() && ep.residual.is_none() && ep.after.is_none()) {
        return;
    }
    for j in 0..ch.len() {
        let out = &mut y[j * geo.positions + at.start..][..at.len()];
        if let Some(act) = &ep.act {
            act.apply(Level::Avx512, out);
        }
        if let Some(res) = ep.residual {
            for (o, &r) in out.iter_mut().zip(&res[(ch.start + j) * geo.positions + at.start..][..at.len()]) {
                *o += r;
            }
        }
        if let Some(act) = &ep.after {
            act.apply(Level::Avx512, out);
        }
    }
}
