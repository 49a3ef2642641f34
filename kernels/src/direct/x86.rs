//! The AVX-512 build of the direct convolution: safe `#[target_feature]` functions that
//! `arch::dispatch` calls once an `Isa` proves the features; vector loads and stores go
//! through `arch::mem`'s reference-taking helpers.

use std::arch::x86_64::*;
use std::ops::Range;

use super::{Direct, BLOCK};
use crate::arch::mem::{load16, store16};
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
