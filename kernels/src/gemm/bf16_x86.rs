//! The AVX-512 BF16 driver and tiles of [`bf16`](super::bf16): safe `#[target_feature]`
//! code, called by `arch::gemm_bf16` once the CPU is known to have the features.
//!
//! A block of rows is rounded to bfloat16 pairs first, in strips of [`MR`] rows: chunk
//! `c` of a strip holds, for each of its rows, the 16 pairs of depths `32 c .. 32 c + 32`
//! (64 bytes a row, 14 rows), so a tile's broadcast of row `r`, pair `j` reads
//! `chunk + 64 r + 4 j`. Then each 32-column panel of B runs over every strip of the
//! block (the panel stays in L1 or L2), each tile summing the whole depth in 28
//! registers and merging `alpha`, `beta` once; the epilogue runs on the block.

use super::bf16::{padded_pairs, CHUNK, MR, NR};
use super::{Gemm, GemmScratch};
use crate::arch::mem::{bcast_bh, load16, load_bh, store16, store_bh, widen_bh};
use crate::arch::Level;
use std::arch::x86_64::*;
use std::ops::Range;

// MR: rows of a strip (and of the full tile): 14 × 2 accumulators, 2 vectors of B and a
// broadcast fill 31 of the 32 registers. CHUNK: pairs of depths in a chunk of a strip.
/// A block of rows' rounded A is kept to about this many bytes (it is read once per
/// panel, from L2).
const A_BLOCK_BYTES: usize = 384 << 10;

/// `c` (the block `rows` × `cols` of `g`, row stride `cols.len()`) from `b`, `g`'s B as
/// `pack_b_bf16` made it.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
pub(crate) fn gemm_bf16_avx512(
    g: &Gemm<'_>,
    b: &[f32],
    scratch: &mut GemmScratch,
    rows: Range<usize>,
    cols: Range<usize>,
    c: &mut [f32],
) {
    let (k, ldc) = (g.k, cols.len());
    let (pairs, stride) = (k.div_ceil(2), padded_pairs(k));
    let chunks = pairs.div_ceil(CHUNK);
    assert_eq!(c.len(), rows.len() * ldc, "gemm: `c` must hold rows.len()*cols.len() elements");
    assert!(b.len() >= g.n.div_ceil(NR) * stride * NR, "gemm: the packed B is too short");
    let tiles = uses_tiles(g);
    let strip_len = chunks * MR;
    let strips_per_block = (A_BLOCK_BYTES / (strip_len * 64)).max(1);
    let mut r0 = rows.start;
    while r0 < rows.end {
        let r1 = (r0 + strips_per_block * MR).min(rows.end);
        let strips = (r1 - r0).div_ceil(MR);
        let (a, _) = scratch.parts::<16, 16>(strips * strip_len, 0);
        for (s, strip) in a.chunks_exact_mut(strip_len).enumerate() {
            let first = r0 + s * MR;
            round_strip(g, first..(first + MR).min(r1), strip);
        }
        let block = &mut c[(r0 - rows.start) * ldc..(r1 - rows.start) * ldc];
        let mut j0 = cols.start;
        while j0 < cols.end {
            let w = NR.min(cols.end - j0);
            let panel = &b[(j0 / NR) * stride * NR..][..stride * NR];
            let panel: &[[f32; 16]] = panel.as_chunks::<16>().0;
            if tiles {
                let out = Out { c: &mut block[j0 - cols.start..], ldc, w, alpha: g.alpha, beta: g.beta };
                strips_on_tiles(a, strip_len, r1 - r0, panel, out);
                j0 += NR;
                continue;
            }
            for (s, strip) in a.chunks_exact(strip_len).enumerate() {
                let i0 = s * MR;
                let h = MR.min(r1 - r0 - i0);
                let out = Out { c: &mut block[i0 * ldc + (j0 - cols.start)..], ldc, w, alpha: g.alpha, beta: g.beta };
                tile_rows(h, g.m <= 2, strip, panel, pairs, out);
            }
            j0 += NR;
        }
        g.epilogue.apply(Level::Avx512, block, ldc, g.n, r0..r1, cols.clone());
        r0 = r1;
    }
}

/// Columns a product by a bf16-packed A computes (whole 32-column panels) before their
/// epilogue runs: its rows of them stay in L2, and each row's epilogue is one call on
/// 256 columns, not 8 of 32 (a call costs 10-14 ns).
const EPILOGUE_COLS: usize = 8 * NR;

/// `c` (the block `rows` × `cols` of `g`, row stride `cols.len()`) from `a`, `g`'s A as
/// `pack_a_bf16` made it: each 32-column panel of B (`g.b` or `g.im2col`) is rounded to
/// pairs once, then every strip of the block's rows multiplies it.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
pub(crate) fn gemm_bf16_a_avx512(
    g: &Gemm<'_>,
    a: &[f32],
    scratch: &mut GemmScratch,
    rows: Range<usize>,
    cols: Range<usize>,
    c: &mut [f32],
) {
    let (k, n, ldc) = (g.k, g.n, cols.len());
    let pairs = k.div_ceil(2);
    let strip_len = pairs.div_ceil(CHUNK) * MR;
    assert_eq!(c.len(), rows.len() * ldc, "gemm: `c` must hold rows.len()*cols.len() elements");
    let a: &[[f32; 16]] = a.as_chunks::<16>().0;
    assert!(a.len() >= g.m.div_ceil(MR) * strip_len, "gemm: the packed A is too short");
    let (_, panel) = scratch.parts::<16, 16>(0, 2 * padded_pairs(k));
    let tiles = uses_tiles(g);
    let first_strip = rows.start / MR;
    let mut e0 = cols.start;
    while e0 < cols.end {
        let e1 = (e0 + EPILOGUE_COLS).min(cols.end);
        for j0 in (e0..e1).step_by(NR) {
            let w = NR.min(e1 - j0);
            round_panel(g, j0, w, panel);
            if tiles {
                let first = first_strip * strip_len;
                let strips = &a[first..first + rows.len().div_ceil(MR) * strip_len];
                let out = Out { c: &mut c[j0 - cols.start..], ldc, w, alpha: g.alpha, beta: g.beta };
                strips_on_tiles(strips, strip_len, rows.len(), panel, out);
                continue;
            }
            for (s, i0) in (rows.start..rows.end).step_by(MR).enumerate() {
                let h = MR.min(rows.end - i0);
                let strip = &a[(first_strip + s) * strip_len..][..strip_len];
                let out = Out {
                    c: &mut c[(i0 - rows.start) * ldc + (j0 - cols.start)..],
                    ldc,
                    w,
                    alpha: g.alpha,
                    beta: g.beta,
                };
                tile_rows(h, g.m <= 2, strip, panel, pairs, out);
            }
        }
        g.epilogue.apply(Level::Avx512, &mut c[e0 - cols.start..], ldc, n, rows.clone(), e0..e1);
        e0 = e1;
    }
}

/// Products of at least this many rows run on AMX tiles where the CPU has them. Fewer
/// leave most of each 14-row tile empty; the choice is the whole product's, so every
/// split of it sums each element the same way.
const TILE_MIN_ROWS: usize = 8;

/// Whether `g` runs on AMX tiles (see [`TILE_MIN_ROWS`]).
fn uses_tiles(g: &Gemm<'_>) -> bool {
    g.m >= TILE_MIN_ROWS && crate::arch::amx::bf16_tiles()
}

/// The block of `rows` rows (`a`'s strips of `strip_len` vectors, the last one's rows
/// past `rows` zero) by one 32-column panel of B (`16 · chunks` rows of pairs) on AMX
/// tiles, two strips a time, merged into `out`'s first `out.w` columns.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
fn strips_on_tiles(a: &[[f32; 16]], strip_len: usize, rows: usize, panel: &[[f32; 16]], out: Out<'_>) {
    let chunks = strip_len / MR;
    let Out { c, ldc, w, alpha, beta } = out;
    let mut sums = [[0f32; NR]; 2 * MR];
    let mut strips = a.chunks_exact(strip_len);
    let mut i0 = 0;
    while i0 < rows {
        let first = strips.next().expect("a strip for every 14 rows");
        let h = (2 * MR).min(rows - i0);
        if h > MR {
            let second = strips.next().expect("a strip for every 14 rows");
            crate::arch::amx::bf16_panel::<2>([first, second], (panel, 0), chunks, std::slice::from_mut(&mut sums));
        } else {
            crate::arch::amx::bf16_panel::<1>([first], (panel, 0), chunks, std::slice::from_mut(&mut sums));
        }
        merge(&sums[..h], Out { c: &mut c[i0 * ldc..], ldc, w, alpha, beta });
        i0 += h;
    }
}

/// Merges rows of sums into C: `c = alpha * sums + beta * c` (C not read when
/// `beta == 0`), only its first `w` columns, as [`store`] does.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn merge(sums: &[[f32; NR]], out: Out<'_>) {
    let Out { c, ldc, w, alpha, beta } = out;
    let (av, bv) = (_mm512_set1_ps(alpha), _mm512_set1_ps(beta));
    for (r, s) in sums.iter().enumerate() {
        let row = &mut c[r * ldc..][..w];
        if w == NR {
            for h in 0..2 {
                let dst: &mut [f32; 16] = (&mut row[16 * h..16 * h + 16]).try_into().expect("16 floats");
                let v = _mm512_mul_ps(av, load16(s[16 * h..16 * h + 16].try_into().expect("16 floats")));
                store16(dst, if beta == 0.0 { v } else { _mm512_fmadd_ps(bv, load16(dst), v) });
            }
        } else {
            for (o, &v) in row.iter_mut().zip(s) {
                *o = if beta == 0.0 { alpha * v } else { beta.mul_add(*o, alpha * v) };
            }
        }
    }
}

/// Rounds columns `j0 .. j0 + w` (at most [`NR`]) of B into `panel`: row `p` of it (two
/// vectors) holds the pairs of depths `2p, 2p + 1` of the 32 columns (zero past w and k).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
fn round_panel(g: &Gemm<'_>, j0: usize, w: usize, panel: &mut [[f32; 16]]) {
    let (k, n) = (g.k, g.n);
    let mut rows = [[0f32; NR]; 2];
    for (p, out) in panel.chunks_exact_mut(2).enumerate() {
        for (h, row) in rows.iter_mut().enumerate() {
            let d = 2 * p + h;
            if d >= k {
                row.fill(0.0);
            } else if let Some(src) = &g.im2col {
                src.span(d, j0, &mut row[..w]);
            } else {
                row[..w].copy_from_slice(&g.b[d * n + j0..][..w]);
            }
        }
        let [lo, hi] = &rows;
        for (q, o) in out.iter_mut().enumerate() {
            let (l, h) = (&lo[16 * q..][..16], &hi[16 * q..][..16]);
            store16(o, pair16(l.try_into().expect("16"), h.try_into().expect("16")));
        }
    }
}

/// 16 words of bfloat16 pairs: `lo[j]` rounded in the low half of word `j`, `hi[j]` in
/// the high half (rounded as `to_bf16` rounds).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
#[inline]
pub(crate) fn pair16(lo: &[f32; 16], hi: &[f32; 16]) -> __m512 {
    let l = widen_bh(_mm512_cvtneps_pbh(load16(lo)));
    let h = widen_bh(_mm512_cvtneps_pbh(load16(hi)));
    _mm512_castsi512_ps(_mm512_or_si512(l, _mm512_slli_epi32::<16>(h)))
}

/// Rounds rows `rows` of `op(A)` (at most [`MR`]) into `strip`, chunk by chunk; the
/// strip's other rows and the depths past k are zero.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
fn round_strip(g: &Gemm<'_>, rows: Range<usize>, strip: &mut [[f32; 16]]) {
    let (m, k) = (g.m, g.k);
    for (ch, chunk) in strip.chunks_exact_mut(MR).enumerate() {
        let d0 = ch * 2 * CHUNK;
        let len = (2 * CHUNK).min(k - d0);
        for (r, dst) in chunk.iter_mut().enumerate() {
            let i = rows.start + r;
            let mut row = [0f32; 2 * CHUNK];
            if i < rows.end {
                if g.trans_a {
                    for (d, x) in row[..len].iter_mut().enumerate() {
                        *x = g.a[(d0 + d) * m + i];
                    }
                } else {
                    row[..len].copy_from_slice(&g.a[i * k + d0..][..len]);
                }
            }
            let (lo, hi) = row.split_at(16);
            let lo: &[f32; 16] = lo.try_into().expect("16 floats");
            let hi: &[f32; 16] = hi.try_into().expect("16 floats");
            // Lanes 0..8 of the result are lo's pairs, 8..16 hi's: pair j is depths 2j, 2j+1.
            store_bh(dst, _mm512_cvtne2ps_pbh(load16(hi), load16(lo)));
        }
    }
}

/// Where a tile goes: C's rows from `c` with stride `ldc`, its first `w` columns.
struct Out<'a> {
    c: &'a mut [f32],
    ldc: usize,
    w: usize,
    alpha: f32,
    beta: f32,
}

/// The tile of the strip's first `h` rows (1 to [`MR`]); `two_sets` for a product of
/// one or two rows (its every strip, so that any split of it sums as the whole does).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
fn tile_rows(h: usize, two_sets: bool, strip: &[[f32; 16]], panel: &[[f32; 16]], pairs: usize, out: Out<'_>) {
    match h {
        1 if two_sets => tile::<1, 2>(strip, panel, pairs, out),
        2 if two_sets => tile::<2, 2>(strip, panel, pairs, out),
        1 => tile::<1, 1>(strip, panel, pairs, out),
        2 => tile::<2, 1>(strip, panel, pairs, out),
        3 => tile::<3, 1>(strip, panel, pairs, out),
        4 => tile::<4, 1>(strip, panel, pairs, out),
        5 => tile::<5, 1>(strip, panel, pairs, out),
        6 => tile::<6, 1>(strip, panel, pairs, out),
        7 => tile::<7, 1>(strip, panel, pairs, out),
        8 => tile::<8, 1>(strip, panel, pairs, out),
        9 => tile::<9, 1>(strip, panel, pairs, out),
        10 => tile::<10, 1>(strip, panel, pairs, out),
        11 => tile::<11, 1>(strip, panel, pairs, out),
        12 => tile::<12, 1>(strip, panel, pairs, out),
        13 => tile::<13, 1>(strip, panel, pairs, out),
        _ => tile::<MR, 1>(strip, panel, pairs, out),
    }
}

/// `R` rows × 32 columns over the whole depth. `S` sets of sums: a product of one or two
/// rows alternates pairs between two, so that the chain of additions into each register
/// does not bound it, and adds them at the end.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
#[inline]
fn tile<const R: usize, const S: usize>(strip: &[[f32; 16]], panel: &[[f32; 16]], pairs: usize, out: Out<'_>) {
    let mut acc = [[[_mm512_setzero_ps(); 2]; R]; S];
    for (ch, chunk) in strip.chunks_exact(MR).enumerate() {
        let chunk: &[[f32; 16]; MR] = chunk.try_into().expect("a chunk of MR rows");
        let p0 = ch * CHUNK;
        let len = CHUNK.min(pairs - p0);
        let bs = &panel[2 * p0..2 * (p0 + len)];
        for (j, bj) in bs.chunks_exact(2).enumerate() {
            let (b0, b1) = (load_bh(&bj[0]), load_bh(&bj[1]));
            let set = &mut acc[j % S];
            for (r, sums) in set.iter_mut().enumerate() {
                let a = bcast_bh(chunk[r][j]);
                sums[0] = _mm512_dpbf16_ps(sums[0], a, b0);
                sums[1] = _mm512_dpbf16_ps(sums[1], a, b1);
            }
        }
    }
    let mut sums = acc[0];
    for set in &acc[1..] {
        for (x, y) in sums.iter_mut().zip(set) {
            x[0] = _mm512_add_ps(x[0], y[0]);
            x[1] = _mm512_add_ps(x[1], y[1]);
        }
    }
    store(&sums, out);
}

/// Merges a tile into C: `c = alpha * sums + beta * c` (C not read when `beta == 0`),
/// only its first `w` columns.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn store<const R: usize>(sums: &[[__m512; 2]; R], out: Out<'_>) {
    let Out { c, ldc, w, alpha, beta } = out;
    let (av, bv) = (_mm512_set1_ps(alpha), _mm512_set1_ps(beta));
    for (r, s) in sums.iter().enumerate() {
        let row = &mut c[r * ldc..][..w];
        if w == NR {
            for (h, &v) in s.iter().enumerate() {
                let dst: &mut [f32; 16] = (&mut row[16 * h..16 * h + 16]).try_into().expect("16 floats");
                let v = _mm512_mul_ps(av, v);
                store16(dst, if beta == 0.0 { v } else { _mm512_fmadd_ps(bv, load16(dst), v) });
            }
        } else {
            let mut t = [[0f32; 16]; 2];
            store16(&mut t[0], s[0]);
            store16(&mut t[1], s[1]);
            for (o, &v) in row.iter_mut().zip(t.as_flattened()) {
                *o = if beta == 0.0 { alpha * v } else { beta.mul_add(*o, alpha * v) };
            }
        }
    }
}
