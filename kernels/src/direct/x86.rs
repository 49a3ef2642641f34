//! The AVX-512 build of the direct convolution: safe `#[target_feature]` functions that
//! `arch::dispatch` calls once an `Isa` proves the features; vector loads and stores go
//! through `arch::mem`'s reference-taking helpers.

use std::arch::x86_64::*;
use std::ops::Range;

use super::{Direct, Out, Source, BLOCK};

pub(crate) mod bf16;
mod transposed;
use crate::arch::mem::{fma_taps, load16, load_lanes, prefetch_l2, store16, store_first, Window};
use crate::arch::Level;
use crate::conv::Window3d;
use crate::gemm::Activation;
use crate::UnaryOp;
use transposed::store_transposed;

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

/// Where a call's outputs are: output rows `rows` of `cols` outputs (one row of all
/// positions for a 1x1 convolution that needs no padding), row `oy`'s first input at
/// `oy * row_step` of a padded plane.
struct Geo {
    rows: Range<usize>,
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
    /// The padded rows' length.
    row_len: usize,
}

impl Geo {
    /// The geometry of `d`'s call with `units` steps of input depth per tap (its input
    /// channels, or their pairs for the bfloat16 build).
    fn of(d: &Direct<'_>, units: usize) -> Geo {
        let g = d.g;
        let cols_in = d.src.cols;
        let positions = g.positions();
        let (rows, cols) = if g.is_pointwise() { (1, positions) } else { (g.out[1], g.out[2]) };
        Geo {
            rows: 0..rows,
            cols,
            row_step: g.stride[1] * cols_in,
            plane: d.src.rows * cols_in,
            cg: units,
            kh: g.kernel[1],
            kw: g.kernel[2],
            ky_step: g.dilation[1] * cols_in,
            kx_step: g.dilation[2],
            positions,
            row_len: cols_in,
        }
    }
}

/// [`super::pad_rows`] for unsplit rows (`src.split` false) of up to 16 floats: each
/// padded row made by one masked load of its input row (the lanes before column `pl` and
/// past the row's end masked off, so zero) and one store, no call per row. At a plane of
/// 10x10 (160 channels, 1,920 padded rows) the portable loop's calls to copy and fill
/// took 15 us, 8 ns a row. The same floats. Panics on wider rows.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn pad_rows_avx512(x: &[f32], g: &Window3d, src: Source, rows: Range<usize>, dst: &mut [f32]) {
    let [_, in_h, in_w] = g.input;
    let (pt, pl) = (g.pad_begin[1], g.pad_begin[2]);
    assert!(!src.split && src.cols <= 16 && pl + in_w <= src.cols, "pad_rows_avx512: rows of up to 16 floats");
    let mask = (((1u32 << (pl + in_w)) - 1) & !((1u32 << pl) - 1)) as u16;
    // (The channel and row counted along, not divided out of each row's index.)
    let (mut c, mut y) = (rows.start / src.rows.max(1), rows.start % src.rows.max(1));
    for out in dst.chunks_exact_mut(src.cols) {
        let v = if y >= pt && y - pt < in_h {
            load_lanes(&x[(c * in_h + y - pt) * in_w..][..in_w], -(pl as isize), mask)
        } else {
            _mm512_setzero_ps()
        };
        store_first(out, out.len(), v);
        y += 1;
        if y == src.rows {
            (c, y) = (c + 1, 0);
        }
    }
}

/// See [`Direct::run`].
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn direct_avx512(
    d: &Direct<'_>,
    channels: Range<usize>,
    rows: Range<usize>,
    mut y: Out<'_, '_>,
    carry: &mut Vec<f32>,
) {
    let (g, sx) = (d.g, d.g.stride[2]);
    let geo = Geo { rows, ..Geo::of(d, d.cg) };
    let positions = geo.positions;
    let blocks = channels.len().div_ceil(BLOCK);
    if super::wide_tiles(g, d.cg) || d.src.split {
        for b in 0..blocks {
            let first = channels.start + b * BLOCK;
            let ch = first..(first + BLOCK).min(channels.end);
            let y = y.from(positions, first - channels.start);
            match (sx, d.src.split) {
                (_, true) => wide_rows::<1, true>(d, &geo, ch, y),
                (1, _) => wide_rows::<1, false>(d, &geo, ch, y),
                _ => wide_rows::<2, false>(d, &geo, ch, y),
            }
        }
        return;
    }
    each_block(&channels, positions, &mut y, |nb, ch, y| match (nb, sx) {
        (4, 1) => block_rows::<4, 1>(d, &geo, ch, y, carry),
        (3, 1) => block_rows::<3, 1>(d, &geo, ch, y, carry),
        (2, 1) => block_rows::<2, 1>(d, &geo, ch, y, carry),
        (1, 1) => block_rows::<1, 1>(d, &geo, ch, y, carry),
        (4, _) => block_rows::<4, 2>(d, &geo, ch, y, carry),
        (3, _) => block_rows::<3, 2>(d, &geo, ch, y, carry),
        (2, _) => block_rows::<2, 2>(d, &geo, ch, y, carry),
        _ => block_rows::<1, 2>(d, &geo, ch, y, carry),
    });
}

/// Runs `f(nb, ch, y)` on the channels `channels` in runs of at most 4 blocks: `nb`
/// blocks, their channels `ch` and their rows of `y` (`positions` each).
fn each_block<'p>(
    channels: &Range<usize>,
    positions: usize,
    y: &mut Out<'_, 'p>,
    mut f: impl FnMut(usize, Range<usize>, Out<'_, 'p>),
) {
    let blocks = channels.len().div_ceil(BLOCK);
    let mut b = 0;
    while b < blocks {
        let nb = (blocks - b).min(4);
        let first = channels.start + b * BLOCK;
        let ch = first..(first + nb * BLOCK).min(channels.end);
        f(nb, ch.clone(), y.from(positions, first - channels.start));
        b += nb;
    }
}

/// Steps of depth (input channels × taps) per depth chunk of the bfloat16 tiles: a
/// chunk's filters (at most this many taps of 4 blocks, 256 KiB) stay in L2 while every
/// tile of the block reads them. A deeper convolution is run chunk by chunk, each tile's
/// sums carried from one chunk to the next in `carry`: the same chain of multiply-adds,
/// so the same bits.
const CHUNK_TAPS: usize = 1024;

/// Steps of depth per depth chunk of the float tiles (at most; the chunks of a depth are
/// of even sizes): a chunk's filters, 36 KiB at 4 blocks (16 channels of 3x3), stay in L1
/// while every tile of the block reads them, tap by tap, each tap's steps one per input
/// channel of the chunk. Chunks of 1024 steps in channel order, read from L2, ran 3x3
/// convolutions at 95-100 GFLOP/s, these at 110-135 (Intel Xeon, AVX-512, one core; a
/// loop of nothing but such steps reaches 157 from L1, 143 from L2, 205 with the filters
/// in registers).
const CHUNK_STEPS: usize = 144;
/// [`CHUNK_STEPS`] on a CPU that runs AVX-512 in halves ([`crate::arch::avx512_in_halves`],
/// AMD Zen 4, 32 KiB of L1) for filters of at most [`FILTERS_IN_L2`]: there a step's 4
/// filter vectors per 24 multiply-adds take 24 cycles, not 12, and come from L2 fast
/// enough (a chunk of 144 steps, 36 KiB at 4 blocks, did not fit its L1 anyway), while
/// each chunk's channel loop ended every 16 steps and each tile's sums went out to
/// `carry` and back. Kernel only (`--example direct_bench`, one thread, Zen 4 family 25
/// model 17, the filters in cache), us at 144 -> 1152: 64->64 3x3 on 56x56 2368 -> 2135,
/// 160->64 on 10x10 183 -> 165, 96->48 on 20x20 334 -> 294, 32->64 at stride 2 on 40x40
/// 152 -> 142; 576 steps gained a little less, 2304 and a whole depth the same.
const CHUNK_STEPS_HALVES: usize = 1152;
/// The most bytes of packed filters that take [`CHUNK_STEPS_HALVES`]: larger ones come
/// from L3 or memory on every Run of a model, and there the long chunks lost (Inception
/// v2's 3x3 convolutions of 192-224 channels on 7x7, 1.5 MB of filters, 6-11% slower
/// in the model, one thread) where YOLO's (74-442 KB) gained 5-10%.
const FILTERS_IN_L2: usize = 512 << 10;

/// The most floats of a (padded) input plane that take [`CHUNK_STEPS_HALVES`]: a tile
/// reads its rows of each of a chunk's channels, and on larger planes the rows of a long
/// chunk's channels left the caches between neighbouring tiles (review: 512->16 and
/// 384->16 3x3 at stride 2 on 112x112, 6.8-10.5% slower kernel only; 64->64 on 56x56,
/// 58x58 padded, gained 10%).
const PLANE_MAX_HALVES: usize = 64 * 64;

/// The steps of depth per chunk of the float tiles of `d` on this CPU.
fn chunk_steps(d: &Direct<'_>) -> usize {
    let (filters, plane) = (std::mem::size_of_val(d.w), d.src.rows * d.src.cols);
    if crate::arch::avx512_in_halves() && filters <= FILTERS_IN_L2 && plane <= PLANE_MAX_HALVES {
        CHUNK_STEPS_HALVES
    } else {
        CHUNK_STEPS
    }
}

/// The outputs of channels `ch` (at most `NB` blocks) into `y` (their rows).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn block_rows<const NB: usize, const S: usize>(
    d: &Direct<'_>,
    geo: &Geo,
    ch: Range<usize>,
    mut y: Out<'_, '_>,
    carry: &mut Vec<f32>,
) {
    let blocks = Blocks::<NB>::of(d, geo, &ch, chunk_steps(d));
    let carry = blocks.carry(geo, carry);
    let b = blocks.bias.as_ref();
    let (taps, all) = (geo.kh * geo.kw, d.w.as_chunks::<BLOCK>().0);
    let (kk, first_block) = (geo.cg * taps, ch.start / BLOCK);
    let (first, calls) = (geo.rows.start * geo.cols, geo.rows.len() * geo.cols);
    each_tile(geo, S, across_rows(NB), r_max(NB), blocks.per_chunk, |r, at| {
        // The next chunk's filters into L2 while this one runs, each tile a share in
        // proportion to its positions: a model's filters come from memory, and the first
        // tile of a chunk waited on them (512->512 channels of 3x3 on 7x7, its filters
        // out of the caches: 2,770 us against 2,010 in them).
        // After the last chunk, the next blocks' first (when the filters have them).
        let (next_block, next) = if at.cs.end < geo.cg {
            (first_block, at.cs.end..(at.cs.end + blocks.per_chunk).min(geo.cg))
        } else {
            (first_block + NB, 0..blocks.per_chunk)
        };
        let lines = next.len() * taps;
        let (from, to) = ((at.pos - first) * lines / calls, (at.pos + r - first) * lines / calls);
        for i in next_block..next_block + NB {
            if let Some(w) = all.get(i * kk + next.start * taps + from..i * kk + next.start * taps + to) {
                prefetch_l2(w);
            }
        }
        let carry = if carry.is_empty() { &mut [] } else { &mut carry[at.pos..at.pos + r] };
        macro_rules! tiles {
            ($($n:literal)*) => {
                match r {
                    $($n => tile::<$n, NB, S>(d, geo, &blocks.w, b, &ch, at, carry, &mut y),)*
                    _ => unreachable!("tile of {r} outputs"),
                }
            };
        }
        tiles!(1 2 3 4 5 6 7 8);
    });
}

/// What every tile of a call on `NB` blocks reads: each block's packed filters, the
/// biases as vectors, and how many steps of depth a chunk takes (fewer than the depth's
/// when the sums are carried between chunks).
struct Blocks<'a, const NB: usize> {
    w: [&'a [[f32; BLOCK]]; NB],
    bias: Option<[__m512; NB]>,
    per_chunk: usize,
}

impl<'a, const NB: usize> Blocks<'a, NB> {
    /// The blocks of channels `ch` of `d` on `geo` (each filter vector one of its `cg`
    /// steps of depth of a tap), the depth in chunks of about `chunk_steps` steps.
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
    fn of(d: &Direct<'a>, geo: &Geo, ch: &Range<usize>, chunk_steps: usize) -> Self {
        let taps = geo.kh * geo.kw;
        let kk = geo.cg * taps;
        let first_block = ch.start / BLOCK;
        let w = std::array::from_fn(|i| d.w[(first_block + i) * kk * BLOCK..][..kk * BLOCK].as_chunks().0);
        let bias = d.bias.map(|b| {
            std::array::from_fn(|i| {
                let mut lanes = [0.0f32; BLOCK];
                let at = ch.start + i * BLOCK;
                let n = BLOCK.min(ch.end.saturating_sub(at));
                lanes[..n].copy_from_slice(&b[at..at + n]);
                load16(&lanes)
            })
        });
        // As many chunks as the steps need, of even sizes: 16 channels of 3x3 in chunks of
        // 14 and 2 ran a fifth slower than in two of 8.
        let most = (chunk_steps / taps).clamp(1, geo.cg);
        let per_chunk = geo.cg.div_ceil(geo.cg.div_ceil(most));
        Blocks { w, bias, per_chunk }
    }

    /// Each position's carried sums (`carry` grown to them) when the depth is summed in
    /// chunks, else nothing.
    fn carry<'c>(&self, geo: &Geo, carry: &'c mut Vec<f32>) -> &'c mut [[[f32; BLOCK]; NB]] {
        if self.per_chunk == geo.cg {
            return &mut [];
        }
        let len = geo.positions * NB * BLOCK;
        if carry.len() < len {
            carry.resize(len, 0.0);
        }
        carry[..len].as_chunks_mut().0.as_chunks_mut().0
    }
}

/// Walks the tiles of a call, depth chunk by depth chunk (`per_chunk` steps each): `f(r,
/// tile)` for each tile of `r` outputs, S = `s` inputs apart in a row. Tiles `across` rows walk the positions in order
/// across rows: 7x7 outputs are 9 tiles of 5 or 6, not 7 rows of a 6 and a 1 (a 1-output
/// tile loads 4 filter vectors for 4 multiply-adds); the others stay in a row.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn each_tile(geo: &Geo, s: usize, across: bool, r_max: usize, per_chunk: usize, mut f: impl FnMut(usize, Tile)) {
    let mut c0 = 0;
    while c0 < geo.cg {
        let cs = c0..(c0 + per_chunk).min(geo.cg);
        let (mut oy, mut ox) = (geo.rows.start, 0);
        let (mut pos, end) = (geo.rows.start * geo.cols, geo.rows.end * geo.cols);
        while pos < end {
            let left = end - pos;
            let r = if across { left.div_ceil(left.div_ceil(r_max)) } else { (geo.cols - ox).min(r_max) };
            let mut bases = [0; 8];
            for b in &mut bases[..r] {
                *b = oy * geo.row_step + ox * s;
                ox += 1;
                if ox == geo.cols {
                    (oy, ox) = (oy + 1, 0);
                }
            }
            f(r, Tile { bases, pos, cs: cs.clone() });
            pos += r;
        }
        c0 = cs.end;
    }
}

/// Whether tiles of `nb` blocks run across rows, each output from its own first input.
/// With 1 or 2 blocks a tile has more outputs and so more addresses to hold: 64->16 and
/// 64->32 channels of 3x3 on 20x20 ran 25-30% slower that way (AMD Zen 5), and so they
/// keep the inputs of one row, S apart, from one address.
const fn across_rows(nb: usize) -> bool {
    nb >= 3
}

/// A tile's outputs' first inputs (in a padded plane; its first `R`), first output
/// position, and the input channels (of a depth chunk) it sums now.
struct Tile {
    bases: [usize; 8],
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
    y: &mut Out<'_, '_>,
) {
    let mut acc = first_sums::<R, NB>(&at, carry);
    // Tap by tap, each tap's steps one per input channel of the chunk: the inputs a plane
    // apart, the filters a channel's taps apart. Across rows each output has its own
    // first input; in a row they are S apart from the first's.
    let taps = geo.kh * geo.kw;
    let off = at.cs.start * geo.plane;
    let mut bases = [0; R];
    for (r, b) in bases.iter_mut().enumerate() {
        *b = if across_rows(NB) { at.bases[r] } else { at.bases[0] + r * S } + off;
    }
    // A plain loop: `array::from_fn`'s closure stayed out of line, and the sums left the
    // registers around the call.
    let mut ws = [&[] as &[[f32; BLOCK]]; NB];
    for (wi, w) in ws.iter_mut().zip(w) {
        *wi = &w[at.cs.start * taps..];
    }
    let win = Window { kh: geo.kh, kw: geo.kw, ky_step: geo.ky_step, kx_step: geo.kx_step };
    acc = fma_taps(acc, d.x, &bases, win, geo.plane, &ws, taps, at.cs.len());
    // The sums leave the registers once, here (see `wide_tile`).
    let sums = acc;
    finish::<R, NB>(d, geo, bias, ch, &at, &sums, carry, y);
}

/// A tile's sums before its first step of depth: zero, or those carried from the last
/// chunk.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn first_sums<const R: usize, const NB: usize>(at: &Tile, carry: &[[[f32; BLOCK]; NB]]) -> [[__m512; NB]; R] {
    let mut acc = [[_mm512_setzero_ps(); NB]; R];
    if at.cs.start > 0 {
        for (a, c) in acc.iter_mut().zip(carry.iter()) {
            for (a, c) in a.iter_mut().zip(c) {
                *a = load16(c);
            }
        }
    }
    acc
}

/// A tile's sums `acc` after the depth `at.cs`: carried in `carry` to the next chunk, or
/// after the last, with the bias and the epilogue, transposed into y's rows.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn finish<const R: usize, const NB: usize>(
    d: &Direct<'_>,
    geo: &Geo,
    bias: Option<&[__m512; NB]>,
    ch: &Range<usize>,
    at: &Tile,
    acc: &[[__m512; NB]; R],
    carry: &mut [[[f32; BLOCK]; NB]],
    y: &mut Out<'_, '_>,
) {
    if at.cs.end < geo.cg {
        for (a, c) in acc.iter().zip(carry.iter_mut()) {
            for (&a, c) in a.iter().zip(c) {
                store16(c, a);
            }
        }
        return;
    }
    // The tile as [output][channel], its epilogue, then transposed into y's rows. A
    // Relu or Clip alone is applied in the registers: as a call on the tile's few vectors
    // it cost about 60 ns a tile (16->64 channels of 3x3 on 55x55 with Relu, kernel only:
    // 390 us against 328 without it).
    let clamp = register_clamp(d);
    let mut t = [[[0.0f32; BLOCK]; NB]; R];
    for (tr, ar) in t.iter_mut().zip(acc) {
        for (i, (ti, &a)) in tr.iter_mut().zip(ar).enumerate() {
            let v = if let Some(b) = bias { _mm512_add_ps(a, b[i]) } else { a };
            store16(ti, clamp.map_or(v, |(lo, hi)| clip(v, lo, hi)));
        }
    }
    let lanes = (NB * BLOCK).min(ch.len());
    let ep = &d.epilogue;
    debug_assert!(ep.scale.is_none(), "the direct convolution takes no scale");
    let flat = t.as_flattened_mut().as_flattened_mut();
    if let (Some(act), None) = (&ep.act, clamp) {
        act.apply(Level::Avx512, flat);
    }
    if ep.residual.is_none() && ep.after.is_none() {
        return store_transposed::<R, NB>(&t, lanes, geo.positions, at.pos, y);
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
        let dst = y.at(geo.positions, l, at.pos, R);
        for (r, o) in dst.iter_mut().enumerate() {
            *o = flat[r * NB * BLOCK + l];
        }
    }
}

/// The outputs of channels `ch` (one block) into `y` (their rows), on wide tiles, and on
/// the narrow ones where a wide tile would read past the planes (a last row's end).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn wide_rows<const S: usize, const SPLIT: bool>(d: &Direct<'_>, geo: &Geo, ch: Range<usize>, mut y: Out<'_, '_>) {
    let kk = geo.cg * geo.kh * geo.kw;
    let block = ch.start / BLOCK;
    let w: &[[f32; BLOCK]] = d.w[block * kk * BLOCK..][..kk * BLOCK].as_chunks().0;
    let ws = [w];
    let bias_lanes: [f32; BLOCK] =
        std::array::from_fn(|l| d.bias.map_or(0.0, |b| b.get(ch.start + l).copied().unwrap_or(0.0)));
    let bias = d.bias.map(|_| [load16(&bias_lanes)]);
    // The last input a wide tile reads, past its first: its furthest tap (on split rows
    // an odd tap's half lies past the last even one, found by review), then 16 outputs
    // S apart, the 32 floats loaded at stride 2 reaching one past the last; a double
    // tile reads 16 outputs more.
    let far = (0..geo.kw).map(|kx| tap(geo, kx, SPLIT)).max().unwrap_or(0);
    let reach = (geo.cg - 1) * geo.plane + (geo.kh - 1) * geo.ky_step + far + 16 * S;
    // Split rows: output ox's taps start at column ox of a half.
    let step = if SPLIT { 1 } else { S };
    let fits = |base: usize, vectors: usize| base + reach + 16 * S * (vectors - 1) <= d.x.len();
    // Positions of whole rows whose epilogue is still to apply; none when the wide tiles
    // apply it in their registers.
    let clamp = register_clamp(d);
    let mut pending = 0..0;
    for oy in geo.rows.clone() {
        let mut ox = 0;
        // A row's last tile may have fewer than 16 (or 32) outputs: it reads past them
        // (inside the padded planes) and stores only them.
        while ox < geo.cols {
            let (base, pos, left) = (oy * geo.row_step + ox * step, oy * geo.cols + ox, geo.cols - ox);
            if left > 16 && fits(base, 2) {
                let n = left.min(32);
                for half in 0..ch.len().div_ceil(8) {
                    let at = WideAt { bias: &bias_lanes, clamp, ch: &ch, first: half * 8, pos, n };
                    wide_tile::<S, SPLIT, 2, 8>(d, geo, w, &at, base, &mut y);
                }
                ox += n;
            } else if fits(base, 1) {
                let n = left.min(16);
                let at = WideAt { bias: &bias_lanes, clamp, ch: &ch, first: 0, pos, n };
                wide_tile::<S, SPLIT, 1, 16>(d, geo, w, &at, base, &mut y);
                ox += n;
            } else {
                break;
            }
        }
        // The wide tiles' epilogue over runs of whole rows, each channel's run one call:
        // one call per row and channel cost 10-14 ns on top of the row's few vectors
        // (3->64 channels of 3x3 on 224x224 with Relu: 342 -> 262 us).
        if clamp.is_none() {
            let row = oy * geo.cols..oy * geo.cols + ox;
            if ox == geo.cols && pending.end == row.start && pending.len() < EPILOGUE_RUN {
                pending.end = row.end;
            } else {
                wide_epilogue(d, geo, &ch, std::mem::replace(&mut pending, row), &mut y);
            }
            if ox < geo.cols {
                wide_epilogue(d, geo, &ch, std::mem::take(&mut pending), &mut y);
            }
        }
        // `source` leaves split rows room for every wide tile; the narrow tiles read
        // whole rows, not halves, and must not run on them.
        assert!(!SPLIT || ox == geo.cols, "a split row left to the narrow tiles");
        while ox < geo.cols {
            let base = oy * geo.row_step + ox * S;
            let r = (geo.cols - ox).min(r_max(1));
            let at = Tile { bases: std::array::from_fn(|i| base + i * S), pos: oy * geo.cols + ox, cs: 0..geo.cg };
            let b = bias.as_ref();
            macro_rules! tiles {
                ($($n:literal)*) => {
                    match r {
                        $($n => tile::<$n, 1, S>(d, geo, &ws, b, &ch, at, &mut [], &mut y),)*
                        _ => unreachable!("tile of {r} outputs"),
                    }
                };
            }
            tiles!(1 2 3 4 5 6 7 8);
            ox += r;
        }
    }
    wide_epilogue(d, geo, &ch, pending, &mut y);
}

/// The epilogue as bounds the tiles apply in their registers before they store: a
/// lone Relu (`x < 0 ? 0 : x`, which is Clip to `[0, inf]` bit for bit, NaN and -0
/// included) or Clip, with no residual. `None` for any other epilogue, applied after the
/// stores. (A stem's Relu as a pass over the stored rows: 3->64 channels of 3x3 on
/// 224x224, 262 -> 312 us.)
fn register_clamp(d: &Direct<'_>) -> Option<(f32, f32)> {
    let ep = &d.epilogue;
    if ep.residual.is_some() || ep.after.is_some() {
        return None;
    }
    match ep.act? {
        Activation::Unary(UnaryOp::Relu) => Some((0.0, f32::INFINITY)),
        Activation::Clip { min, max } => Some((min, max)),
        _ => None,
    }
}

/// As `Activation::Clip`: below `lo` is `lo`, then above `hi` is `hi`; NaN passes. A
/// bound of -infinity or infinity (Relu's upper one) or NaN changes nothing and is not
/// compared.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn clip(mut v: __m512, lo: f32, hi: f32) -> __m512 {
    if lo > f32::NEG_INFINITY {
        let lo = _mm512_set1_ps(lo);
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, lo), lo);
    }
    if hi < f32::INFINITY {
        let hi = _mm512_set1_ps(hi);
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, hi), hi);
    }
    v
}

/// Positions a run of the wide tiles' epilogue gathers before it is applied (16 channels
/// of them, 32 KiB, still in L1).
const EPILOGUE_RUN: usize = 512;

/// Where a wide tile goes: `n` outputs from position `pos`, `C` of the block's channels
/// from `first`, with the block's `bias` lanes and the register `clamp`.
struct WideAt<'a> {
    bias: &'a [f32; BLOCK],
    clamp: Option<(f32, f32)>,
    ch: &'a Range<usize>,
    first: usize,
    pos: usize,
    n: usize,
}

/// One wide tile: `n` (up to `16 V`) outputs of a row from position `pos` (input `base`)
/// for `C` of the block's channels from `first`, `V` zmm a channel. Each step of depth
/// loads the `16 V` inputs once (two loads and a permute that keeps the even lanes at
/// stride 2) and makes `V` fused multiply-adds a channel with its filter broadcast once:
/// the same sums as the narrow tiles, channel by channel (a stem's 3 channels a tap, the
/// narrow tiles' order, ran 4-10% slower here), then the bias and the epilogue, stored
/// straight into the channels' rows. Two vectors of 8 channels run at the
/// multiply-add pipes' rate; one of 16, a broadcast per multiply-add, at two thirds of it
/// (141 against 222 GFLOP/s in a loop of nothing else, AMD Zen 5).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline(never)]
fn wide_tile<const S: usize, const SPLIT: bool, const V: usize, const C: usize>(
    d: &Direct<'_>,
    geo: &Geo,
    w: &[[f32; BLOCK]],
    at: &WideAt<'_>,
    base: usize,
    y: &mut Out<'_, '_>,
) {
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let mut acc = [[_mm512_setzero_ps(); V]; C];
    let mut k = 0;
    for c in 0..geo.cg {
        for ky in 0..geo.kh {
            let row = &d.x[base + c * geo.plane + ky * geo.ky_step..];
            for kx in 0..geo.kw {
                let xs = &row[tap(geo, kx, SPLIT)..][..16 * S * V];
                // A loop, not `array::from_fn`: its closure was left out of line once, a
                // call per load (2x slower).
                let mut v = [_mm512_setzero_ps(); V];
                for (q, v) in v.iter_mut().enumerate() {
                    let xs = &xs[16 * S * q..][..16 * S];
                    *v = if S == 1 {
                        load16(xs.try_into().unwrap())
                    } else {
                        let (a, b) = xs.split_at(16);
                        _mm512_permutex2var_ps(load16(a.try_into().unwrap()), evens, load16(b.try_into().unwrap()))
                    };
                }
                let wk = &w[k][at.first..][..C];
                for (acc, &wj) in acc.iter_mut().zip(wk) {
                    let wj = _mm512_set1_ps(wj);
                    for (a, &v) in acc.iter_mut().zip(&v) {
                        *a = _mm512_fmadd_ps(v, wj, *a);
                    }
                }
                k += 1;
            }
        }
    }
    // The sums leave the registers once, here: the stores below index them by a loop
    // that is not unrolled, which on `acc` itself kept it on the stack throughout (2x
    // slower).
    let sums = acc;
    store_tile(d, geo, at, &sums, y);
}

/// Stores a wide tile's `sums` (see [`wide_tile`]): bias, then the register clamp, then
/// each channel's `n` outputs.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline(never)]
fn store_tile<const V: usize, const C: usize>(
    d: &Direct<'_>,
    geo: &Geo,
    at: &WideAt<'_>,
    sums: &[[__m512; V]; C],
    y: &mut Out<'_, '_>,
) {
    let WideAt { bias, clamp, ch, first, pos, n } = *at;
    let channels = ch.len().saturating_sub(first).min(C);
    for (j, acc) in sums.iter().enumerate().take(channels) {
        for (q, &a) in acc.iter().enumerate() {
            let m = n.saturating_sub(16 * q).min(16);
            if m == 0 {
                break;
            }
            let mut v = if d.bias.is_some() { _mm512_add_ps(a, _mm512_set1_ps(bias[first + j])) } else { a };
            if let Some((lo, hi)) = clamp {
                v = clip(v, lo, hi);
            }
            let out = y.at(geo.positions, first + j, pos + 16 * q, m);
            if m == 16 {
                store16(out.try_into().unwrap(), v);
            } else {
                store_first(out, m, v);
            }
        }
    }
}

/// Where tap `kx` of a row's first output is, from its first: `kx` columns on, or on
/// split rows (the even columns, then the odd ones) in the half of its parity.
#[inline(always)]
fn tap(geo: &Geo, kx: usize, split: bool) -> usize {
    if split {
        (kx % 2) * (geo.row_len / 2) + kx / 2
    } else {
        kx * geo.kx_step
    }
}

/// The epilogue (activation, residual, activation) of positions `at` of each of the
/// channels `ch`, elementwise as the narrow tiles apply it.
fn wide_epilogue(d: &Direct<'_>, geo: &Geo, ch: &Range<usize>, at: Range<usize>, y: &mut Out<'_, '_>) {
    let ep = &d.epilogue;
    debug_assert!(ep.scale.is_none(), "the direct convolution takes no scale");
    if at.is_empty() || (ep.act.is_none() && ep.residual.is_none() && ep.after.is_none()) {
        return;
    }
    for j in 0..ch.len() {
        let out = y.at(geo.positions, j, at.start, at.len());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::{window_geometry, Padding};

    /// Where AVX-512 runs in halves (AMD Zen 4) the float tiles sum the depth in chunks
    /// of 1152 steps when the filters fit in L2 and the planes are small, else (and on
    /// other CPUs) of 144.
    #[test]
    fn long_depth_chunks_where_avx512_runs_in_halves_and_the_filters_fit_l2() {
        let pads = Padding::Explicit([0, 1, 1, 0, 1, 1]);
        let (g, _) = window_geometry([1, 10, 10], [1, 3, 3], [1; 3], [1; 3], pads, false).unwrap();
        let (big, _) = window_geometry([1, 112, 112], [1, 3, 3], [1, 2, 2], [1; 3], pads, false).unwrap();
        let chunk = |g: &Window3d, w: &[f32]| -> usize {
            let d = Direct {
                x: &[],
                src: crate::direct::source(g, 160),
                cg: 160,
                g,
                w,
                bias: None,
                epilogue: crate::gemm::Epilogue::default(),
            };
            chunk_steps(&d)
        };
        // YOLO's 160 -> 64 channels (368 KiB of filters) and a 1.5 MiB convolution.
        let (small, large) = (vec![0.0; 64 * 160 * 9], vec![0.0; 224 * 192 * 9]);
        let long = if crate::arch::avx512_in_halves() { CHUNK_STEPS_HALVES } else { CHUNK_STEPS };
        assert_eq!(chunk(&g, &small), long);
        assert_eq!(chunk(&g, &large), CHUNK_STEPS);
        // A 112x112 plane (114x114 padded) keeps the short chunks.
        assert_eq!(chunk(&big, &small), CHUNK_STEPS);
    }
}
