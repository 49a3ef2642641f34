//! 3x3 convolutions of stride 1 by Winograd's minimal filtering, F(2x2, 3x3) and, on
//! large planes, F(4x4, 3x3).
//!
//! Each 2x2 (or 4x4) block of outputs ("tile") is computed from the 4x4 (6x6) input patch
//! under it: the patch is transformed (`V = Bᵀ d B`), multiplied point by point with the
//! transformed filter (`U = G g Gᵀ`, once per filter) and summed over input channels, and
//! the sum is transformed back (`Y = Aᵀ M A`). The sum over channels at each of the 16
//! (36) points is a matrix product, `M[ξ] = U[ξ] · V[ξ]` (output channels × input channels
//! × tiles), run on the packed GEMM with `U[ξ]` packed once. Per output and pair of
//! channels a 2x2 tile takes 4 multiply-adds and a 4x4 tile 2.25, where the direct
//! convolution takes 9.
//!
//! F(2x2, 3x3)'s coefficients are 0, ±1 and ±1/2, so its sums lose about what the direct
//! ones do (a few ulp of the depth's magnitude more). F(4x4, 3x3) interpolates at 0, ±1,
//! 2 and -1/2 (rather than the usual ±2, whose larger coefficients lose 2.5-3.5 times as
//! much) and loses 5-10 times what the direct sum does. Against a float64 sum
//! (`tests::errors_within_the_stated_bounds`, 40x40, inputs and weights uniform in [-1,
//! 1)), the worst output error over the outputs' RMS, 64 and 256 input channels: im2col
//! and the GEMM 1.7e-6 and 1.8e-6, F(2x2, 3x3) 1.7e-6 and 2.9e-6, F(4x4, 3x3) 8.3e-6 and
//! 1.64e-5. It takes the planes where its products save the most: [`side`].
//!
//! Tiles are taken a block of tile rows at a time, its transformed input and products in
//! working memory the caller keeps; a block's transforms run on vectors of 16 tiles
//! ([`x86`], AVX-512). Every output is the same sum whatever the block and whatever the
//! split of the tile rows: the GEMM's depth order does not depend on the columns.

use crate::arch::{self, Level};
use crate::conv::Window3d;
use crate::gemm::{pack_a, Epilogue, Gemm, GemmScratch, PackedA};
use std::ops::Range;

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

/// The most points of a transformed tile (6 x 6, F(4x4, 3x3)'s).
pub const MAX_POINTS: usize = 36;
/// Tiles a block aims at: enough columns for the GEMM's 32- and 48-wide panels.
const BLOCK_TILES: usize = 256;
/// Tiles of 4x4 a block aims at: as many outputs as 256 tiles of 2x2, and 36 points of 64
/// tiles of 128 input channels (1.2 MB) stay within a 2 MB L2. (Kernel only, 32 to 256
/// tiles made no difference beyond the noise on 56x56 planes.)
const BLOCK_TILES_4: usize = 64;
/// The least input and output channels: below them the transforms cost more than the
/// products save.
const MIN_CHANNELS: usize = 16;
/// The least input channels: a product of depth 16 leaves the GEMM mostly loading and
/// storing its sums, and the direct kernel is faster. One thread, 16->64 channels of 3x3
/// with Relu on 55x55 (SqueezeNet's first fires) through the plugin: 460 us here, 395 on
/// the direct kernel (ORT 306-316).
const MIN_IN_CHANNELS: usize = 32;
/// [`MIN_IN_CHANNELS`] on a CPU that runs AVX-512 in halves ([`arch::avx512_in_halves`],
/// AMD Zen 4): there the direct kernel's multiply-adds cost twice Intel's and a depth of
/// 16 gains on the Winograd kernel. Kernel only, one thread, Zen 4, SqueezeNet's first
/// fires (16->64 channels on 55x55, median of 21 interleaved rounds): F(4x4, 3x3) 400 us,
/// F(2x2) 471-475, direct 614-616.
fn min_in_channels() -> usize {
    if arch::avx512_in_halves() {
        MIN_CHANNELS
    } else {
        MIN_IN_CHANNELS
    }
}

/// The fewest tiles: a smaller plane leaves the GEMM's panels mostly empty. Up to
/// [`FEW_TILES`] of them, only a product of [`MIN_CHANNELS_FEW`] output channels or more
/// gains: one thread, 128->32 channels on 14x14 (49 tiles) ran 1.40x ORT's time here and
/// 1.21x on the direct kernel, while 64->256 on 13x13 ran 1.03x here and 1.26x there.
const MIN_TILES: usize = 36;
const FEW_TILES: usize = 100;
const MIN_CHANNELS_FEW: usize = 64;

/// Whether a convolution of `cg` input and `mg` output channels (one group) on `g` runs
/// here on this CPU: AVX-512, a 3x3 kernel on two spatial axes, stride and dilation 1, two
/// tiles a row or more (a block of one tile would be a matrix-vector product, summed in
/// another order). Its inputs must also be within the filters' [`Filters::input_limit`].
pub fn fits(g: &Window3d, cg: usize, mg: usize) -> bool {
    Level::detected() == Level::Avx512
        && g.input[0] == 1
        && g.out[0] == 1
        && g.kernel == [1, 3, 3]
        && g.stride == [1; 3]
        && g.dilation == [1; 3]
        && g.pad_begin[0] == 0
        && cg >= min_in_channels()
        && mg >= MIN_CHANNELS
        && tiles(g, 2)[1] >= 2
        && tiles(g, 2)[0] * tiles(g, 2)[1] >= MIN_TILES
        && (mg >= MIN_CHANNELS_FEW || tiles(g, 2)[0] * tiles(g, 2)[1] >= FEW_TILES)
}

/// The least tiles of 4x4 outputs a plane has for F(4x4, 3x3): see [`side`].
const MIN_TILES_4: usize = 100;
/// Fewer tiles of 4x4, down to [`MIN_TILES_4_WIDE`], take F(4x4, 3x3) when the product of
/// the channel counts is at least this.
const WIDE_4: usize = 128 * 128;
const MIN_TILES_4_WIDE: usize = 49;

/// The side of the output tiles a convolution of `cg` input and `mg` output channels
/// that [`fits`] takes: 4 (F(4x4, 3x3)) on planes of at least [`MIN_TILES_4`] tiles of
/// 4x4 (10x10 tiles: 37x37 outputs and more), or [`MIN_TILES_4_WIDE`] (7x7 tiles: 25x25)
/// with [`WIDE_4`] channel pairs, rows of two tiles or more, else 2. Kernel only (`--example conv3x3_paths`, one thread, Xeon family 6 model 207),
/// F(4x4)'s time over F(2x2)'s: 64 -> 64 on 56x56 0.70-0.83, 128 -> 32 on 56x56
/// 0.69-0.77, 32 -> 32 on 40x40 0.80; on 28x28 (a product of 49 columns, one past the
/// GEMM's 48-wide panel) 128 -> 128 0.82-0.93 and 256 -> 256 0.74-0.77, but 64 -> 64
/// 0.95-1.18 and 128 -> 32 0.94-1.11; on 14x14 128 -> 128 1.04.
pub fn side(g: &Window3d, cg: usize, mg: usize) -> usize {
    let [th, tw] = tiles(g, 4);
    let n = th * tw;
    if tw >= 2 && (n >= MIN_TILES_4 || n >= MIN_TILES_4_WIDE && cg * mg >= WIDE_4) {
        4
    } else {
        2
    }
}

/// The largest magnitude of an input or a filter weight taken in tiles of `side`, as
/// bits: F(2x2, 3x3)'s transforms add up to four inputs (or 2.25 times a weight) before
/// the products and nine products after them, so an inf would become `inf - inf` = NaN
/// and values near `f32::MAX` would overflow where the direct sum does not; 2^64.
/// F(4x4, 3x3)'s grow an input up to 49 times, a weight 3.5 and the products 124 (the
/// sums of their coefficients' magnitudes, squared: 262 times F(2x2)'s growth, about
/// 2^8): 2^60, the same headroom (found by review: inputs of ±2^64 in a pattern of two
/// signs each and one weight of 2^60 gave NaN on F(4x4) and 2.1e37 on im2col). Inputs or
/// filters past it (inf and NaN among them) take another path. The inputs' limit is also
/// bound by the filters' magnitude and depth ([`input_limit_bits`]).
pub(crate) fn limit_bits(side: usize) -> u32 {
    if side == 4 {
        0x5d80_0000 // 2^60
    } else {
        0x5f80_0000 // 2^64
    }
}

/// How much the input and output transforms of tiles of `side` can grow a value: the
/// sums of the coefficients' magnitudes of a row of each transform, squared for two axes
/// (F(2x2, 3x3): 4 and 9; F(4x4, 3x3): 49 and 124).
fn growth(side: usize) -> f64 {
    if side == 4 {
        49.0 * 124.0
    } else {
        4.0 * 9.0
    }
}

/// The largest magnitude of an input, as bits, that filters whose transformed rows sum
/// to at most `u_sum` in magnitude (the largest over points and output channels of
/// `Σ_c |U[ξ][m][c]|`) take in tiles of `side`: [`limit_bits`], and small enough that no
/// transformed input, sum of products or output can pass 2^126 (so finite, with room
/// for the rounding), whatever the signs. Each limit alone let both near it overflow
/// (review, 2026-12-07: inputs and weights of ±2^60, 20 -> 16 channels, gave infs and
/// NaNs where the direct sum's largest output is 7.2e37).
pub(crate) fn input_limit_bits(side: usize, u_sum: f64) -> u32 {
    let bound = 2f64.powi(126) / (growth(side) * u_sum);
    // Rounded down into f32 (a quotient past f32's range bounds nothing).
    let limit = bound as f32;
    let limit = if f64::from(limit) > bound { f32::from_bits(limit.to_bits() - 1) } else { limit };
    limit_bits(side).min(limit.to_bits())
}

/// Whether every value of `x` is finite and within [`limit_bits`] for tiles of `side`.
pub fn in_range(x: &[f32], side: usize) -> bool {
    within(x, limit_bits(side))
}

/// Whether every value of `x` is finite and of a magnitude within `limit` (as bits).
pub(crate) fn within(x: &[f32], limit: u32) -> bool {
    x.iter().map(|v| v.to_bits() & 0x7fff_ffff).max().unwrap_or(0) <= limit
}

/// Tile rows and tiles per row of `g`'s output in tiles of `side` x `side` outputs.
pub fn tiles(g: &Window3d, side: usize) -> [usize; 2] {
    [g.out[1].div_ceil(side), g.out[2].div_ceil(side)]
}

/// Tile rows per block on `g` in tiles of `side`: about [`BLOCK_TILES`] tiles of 2x2 or
/// [`BLOCK_TILES_4`] of 4x4.
pub fn block_rows(g: &Window3d, side: usize) -> usize {
    let [th, tw] = tiles(g, side);
    let want = if side == 4 { BLOCK_TILES_4 } else { BLOCK_TILES };
    want.div_ceil(tw.max(1)).clamp(1, th.max(1))
}

/// The filters of one convolution, transformed (`U[ξ]`, `mg` × `cg` each, ξ-major) and
/// packed for the GEMM.
#[derive(Debug, Default)]
pub struct Filters {
    raw: Vec<f32>,
    packed: Vec<PackedA>,
    mg: usize,
    cg: usize,
    /// The output tiles' side: 2 or 4.
    side: usize,
    /// Whether the weights pass [`in_range`].
    usable: bool,
    /// The inputs' largest magnitude, as bits ([`input_limit_bits`]).
    input_limit: u32,
}

impl Filters {
    /// Whether the weights were [`in_range`]: if not, the convolution takes another path.
    pub fn usable(&self) -> bool {
        self.usable
    }

    /// The output tiles' side: 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3)).
    pub fn side(&self) -> usize {
        self.side
    }

    /// The largest magnitude of an input these filters take, as bits: past it (or at an
    /// inf or a NaN) the convolution takes another path.
    pub fn input_limit(&self) -> u32 {
        self.input_limit
    }

    /// Points of a transformed tile: 16 or 36.
    pub fn points(&self) -> usize {
        (self.side + 2) * (self.side + 2)
    }
}

/// F(2x2, 3x3)'s filter transform (4 x 3).
const G2: [[f32; 3]; 4] = [[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]];
/// F(4x4, 3x3)'s filter transform (6 x 3), for the points 0, 1, -1, 2, -1/2 and infinity.
const G4: [[f32; 3]; 6] = [
    [1.0, 0.0, 0.0],
    [-1.0 / 3.0, -1.0 / 3.0, -1.0 / 3.0],
    [1.0 / 3.0, -1.0 / 3.0, 1.0 / 3.0],
    [1.0 / 15.0, 2.0 / 15.0, 4.0 / 15.0],
    [-16.0 / 15.0, 8.0 / 15.0, -4.0 / 15.0],
    [0.0, 0.0, 1.0],
];

/// Transforms and packs `w` (`[mg, cg, 3, 3]`) for convolutions on `g`, in tiles of the
/// side [`side`] gives.
pub fn transform_filters(w: &[f32], mg: usize, cg: usize, g: &Window3d, f: &mut Filters) {
    transform_filters_side(w, mg, cg, g, side(g, cg, mg), f)
}

/// [`transform_filters`] in tiles of `side` (2 or 4) outputs.
pub fn transform_filters_side(w: &[f32], mg: usize, cg: usize, g: &Window3d, side: usize, f: &mut Filters) {
    assert_eq!(w.len(), mg * cg * 9, "winograd: filters");
    assert!(side == 2 || side == 4, "winograd: tiles of 2 or 4");
    f.side = side;
    let (n, points) = (side + 2, f.points());
    let gm: &[[f32; 3]] = if side == 2 { &G2 } else { &G4 };
    f.raw.clear();
    f.raw.resize(points * mg * cg, 0.0);
    for (kc, g3) in w.chunks_exact(9).enumerate() {
        // G g (n x 3), then (G g) Gᵀ (n x n).
        let mut t = [[0.0f32; 3]; 6];
        for (i, row) in t.iter_mut().enumerate().take(n) {
            for (s, v) in row.iter_mut().enumerate() {
                *v = gm[i][0] * g3[s] + gm[i][1] * g3[3 + s] + gm[i][2] * g3[6 + s];
            }
        }
        for (i, row) in t.iter().enumerate().take(n) {
            for (j, gj) in gm.iter().enumerate() {
                f.raw[(n * i + j) * mg * cg + kc] = row[0] * gj[0] + row[1] * gj[1] + row[2] * gj[2];
            }
        }
    }
    let cols = block_rows(g, side) * tiles(g, side)[1];
    f.packed.resize_with(points, PackedA::new);
    for (xi, packed) in f.packed.iter_mut().enumerate() {
        pack_a(packed, mg, cols, cg, &f.raw[xi * mg * cg..][..mg * cg], false);
    }
    (f.mg, f.cg, f.usable) = (mg, cg, in_range(w, side));
    let u_sum =
        f.raw.chunks_exact(cg.max(1)).map(|row| row.iter().map(|u| f64::from(u.abs())).sum()).fold(0.0, f64::max);
    f.input_limit = if f.usable { input_limit_bits(side, u_sum) } else { 0 };
}

/// A transformed input's part for some input channels: point ξ's rows in `[ξ]` (the
/// points past the tiles' are empty).
pub type InputPart<'v> = [&'v mut [f32]; MAX_POINTS];

/// Working memory of one task: a block's transformed input and its products.
#[derive(Debug, Default)]
pub struct Scratch {
    pub v: Vec<f32>,
    pub m: Vec<f32>,
    /// One channel's input rows, zero-padded.
    pub pad: Vec<f32>,
    pub gemm: GemmScratch,
}

/// One convolution (one image, one group) as [`Winograd::run`] computes it.
pub struct Winograd<'a> {
    /// The input planes, `[cg, in_h, in_w]`.
    pub x: &'a [f32],
    pub g: &'a Window3d,
    pub filters: &'a Filters,
    /// Bias (as `Bias::Rows`), activation, residual (the whole `[mg, positions]` addend)
    /// and second activation.
    pub epilogue: Epilogue<'a>,
}

/// Where [`Winograd::output`] puts its channels' rows: one after the other in one slice
/// (`[channels][rows][out_w]`), or each channel's in a slice of its own (the rows of a
/// plane a task writes in place, see [`Winograd::run_rows`]).
pub(crate) enum OutRows<'y, 'p> {
    Whole(&'y mut [f32]),
    Parts(&'y mut [&'p mut [f32]]),
}

impl<'p> OutRows<'_, 'p> {
    /// The same rows, borrowed for a shorter while.
    fn reborrow(&mut self) -> OutRows<'_, 'p> {
        match self {
            OutRows::Whole(y) => OutRows::Whole(y),
            OutRows::Parts(parts) => OutRows::Parts(parts),
        }
    }

    /// Rows a channel has, `channels` channels of rows of `out_w`. Panics unless every
    /// channel has the same whole rows.
    fn rows(&self, channels: usize, out_w: usize) -> usize {
        let row = out_w.max(1);
        match self {
            OutRows::Whole(y) => {
                assert_eq!(y.len() % (channels * row).max(1), 0, "winograd: output length");
                y.len() / (channels * row).max(1)
            }
            OutRows::Parts(parts) => {
                assert_eq!(parts.len(), channels, "winograd: a part per channel");
                let len = parts.first().map_or(0, |p| p.len());
                assert!(len % row == 0 && parts.iter().all(|p| p.len() == len), "winograd: output parts");
                len / row
            }
        }
    }

    /// Channel `k`'s rows, `len` floats.
    pub(crate) fn channel(&mut self, k: usize, len: usize) -> &mut [f32] {
        match self {
            OutRows::Whole(y) => &mut y[k * len..][..len],
            OutRows::Parts(parts) => &mut parts[k][..len],
        }
    }
}

impl Winograd<'_> {
    /// Computes the outputs of tile rows `tiles` into `y`: output rows `side * tiles.start`
    /// up to `side * tiles.end` (or the last) of every channel, `[mg, rows, out_w]`.
    /// Returns false, `y` then only partly written, if an input is out of range
    /// ([`Filters::input_limit`]). Panics on a length mismatch or off AVX-512.
    pub fn run(&self, tiles: Range<usize>, y: &mut [f32], s: &mut Scratch) -> bool {
        self.run_into(tiles, OutRows::Whole(y), s)
    }

    /// [`Winograd::run`] with each output channel's rows in a slice of its own:
    /// `parts[k]` holds output rows `side * tiles.start` up to `side * tiles.end` (or the
    /// last) of channel `k`. A task of a split by tile rows writes them in place. The
    /// same values as [`Winograd::run`].
    pub fn run_rows(&self, tiles: Range<usize>, parts: &mut [&mut [f32]], s: &mut Scratch) -> bool {
        self.run_into(tiles, OutRows::Parts(parts), s)
    }

    fn run_into(&self, tiles: Range<usize>, mut y: OutRows<'_, '_>, s: &mut Scratch) -> bool {
        let [th, _] = self.tiles();
        assert!(tiles.end <= th, "winograd: tile rows");
        // Blocks of equal rows (within one), as few as `block_rows` allows.
        let step = tiles.len().div_ceil(tiles.len().div_ceil(self.block_rows()).max(1)).max(1);
        let mut r0 = tiles.start;
        while r0 < tiles.end {
            let block = r0..(r0 + step).min(tiles.end);
            if !self.input(block.clone(), &mut s.v, &mut s.pad) {
                return false;
            }
            let row0 = self.side() * tiles.start;
            self.output_into(block.clone(), 0..self.filters.mg, row0, &s.v, y.reborrow(), &mut s.m, &mut s.gemm);
            r0 = block.end;
        }
        true
    }

    /// The tile rows of the block that starts at tile row `r0`.
    pub fn block(&self, r0: usize) -> Range<usize> {
        r0..(r0 + self.block_rows()).min(self.tiles()[0])
    }

    /// The output tiles' side (the filters').
    pub fn side(&self) -> usize {
        self.filters.side
    }

    /// Points of a transformed tile.
    pub fn points(&self) -> usize {
        self.filters.points()
    }

    /// Tile rows and tiles per row.
    pub fn tiles(&self) -> [usize; 2] {
        tiles(self.g, self.side())
    }

    /// Tile rows per block.
    pub fn block_rows(&self) -> usize {
        block_rows(self.g, self.side())
    }

    /// The transformed input of the tile rows `block` (at most [`block_rows`] of them),
    /// into `v`; `pad` is working memory. Returns false if an input the block reads is
    /// out of range ([`Filters::input_limit`]).
    pub fn input(&self, block: Range<usize>, v: &mut Vec<f32>, pad: &mut Vec<f32>) -> bool {
        let cg = self.filters.cg;
        let mut parts = self.input_parts(block.clone(), v, cg);
        let part = parts.next().expect("one part");
        self.input_part(block, 0..cg, part, pad)
    }

    /// The transformed input of the tile rows `block` as parts of `per` input channels
    /// each (the last may have fewer), in order: `v` grown to hold it all (`[points][cg][pb]`),
    /// then cut into each part's 16 pieces, which [`Winograd::input_part`] fills.
    pub fn input_parts<'v>(
        &self,
        block: Range<usize>,
        v: &'v mut Vec<f32>,
        per: usize,
    ) -> impl Iterator<Item = InputPart<'v>> + use<'v> {
        assert!(block.len() <= self.block_rows() && block.end <= self.tiles()[0], "winograd: block");
        let (cg, pb) = (self.filters.cg, block.len() * self.tiles()[1]);
        let len = self.points() * cg * pb;
        if v.len() < len {
            v.resize(len, 0.0);
        }
        let mut points = v[..len].chunks_exact_mut((cg * pb).max(1));
        let mut rest: InputPart<'v> = std::array::from_fn(|_| points.next().unwrap_or_default());
        let (per, n) = (per.max(1), self.points());
        (0..cg.div_ceil(per)).map(move |i| {
            let take = per.min(cg - i * per) * pb;
            std::array::from_fn(|xi| {
                let take = if xi < n { take } else { 0 };
                let (part, after) = std::mem::take(&mut rest[xi]).split_at_mut(take);
                rest[xi] = after;
                part
            })
        })
    }

    /// The transformed input of input channels `chans` in the tile rows `block`, into
    /// `v` (a part from [`Winograd::input_parts`]); `pad` is working memory. Returns false
    /// if an input the part reads is out of range ([`Filters::input_limit`]). Every part gives the
    /// same values it gives whole.
    pub fn input_part(&self, block: Range<usize>, chans: Range<usize>, v: InputPart<'_>, pad: &mut Vec<f32>) -> bool {
        let pb = block.len() * self.tiles()[1];
        assert!(block.len() <= self.block_rows() && block.end <= self.tiles()[0], "winograd: block");
        assert!(chans.end <= self.filters.cg, "winograd: input channels");
        let points = self.points();
        assert!(v[..points].iter().all(|p| p.len() == chans.len() * pb), "winograd: input part");
        assert_eq!(self.x.len(), self.filters.cg * self.g.plane(), "winograd: input planes");
        arch::winograd_input(arch::isa(), self, block, chans, v, pad)
    }

    /// The outputs of channels `ch` in the tile rows `block` from the block's transformed
    /// input `v` ([`Winograd::input`]), with the epilogue, into `y`: `[ch.len(), rows,
    /// out_w]`, its rows the output's from `row0` on. `ch` starts at a multiple of
    /// [`Winograd::strip_rows`]; `m` and `gemm` are working memory.
    #[allow(clippy::too_many_arguments)]
    pub fn output(
        &self,
        block: Range<usize>,
        ch: Range<usize>,
        row0: usize,
        v: &[f32],
        y: &mut [f32],
        m: &mut Vec<f32>,
        gemm: &mut GemmScratch,
    ) {
        self.output_into(block, ch, row0, v, OutRows::Whole(y), m, gemm);
    }

    #[allow(clippy::too_many_arguments)]
    fn output_into(
        &self,
        block: Range<usize>,
        ch: Range<usize>,
        row0: usize,
        v: &[f32],
        y: OutRows<'_, '_>,
        m: &mut Vec<f32>,
        gemm: &mut GemmScratch,
    ) {
        let f = self.filters;
        let (mg, cg) = (f.mg, f.cg);
        let [_, out_h, out_w] = self.g.out;
        let (pb, side, points) = (block.len() * self.tiles()[1], self.side(), self.points());
        assert!(ch.end <= mg && row0 <= side * block.start && (side * block.end).min(out_h) >= row0, "winograd: part");
        let rows = y.rows(ch.len(), out_w);
        assert!(row0 + rows >= (side * block.end).min(out_h), "winograd: output rows");
        self.epilogue.check(mg, self.g.positions());
        let v = &v[..points * cg * pb];
        let len = points * ch.len() * pb;
        if m.len() < len {
            m.resize(len, 0.0);
        }
        let m = &mut m[..len];
        for xi in 0..points {
            let a = &f.raw[xi * mg * cg..][..mg * cg];
            let b = &v[xi * cg * pb..][..cg * pb];
            let gemm_xi = Gemm { packed_a: Some(&f.packed[xi]), ..Gemm::new(mg, pb, cg, a, false, b, false) };
            gemm_xi.compute(gemm, ch.clone(), 0..pb, &mut m[xi * ch.len() * pb..][..ch.len() * pb]);
        }
        arch::winograd_output(arch::isa(), self, block, ch, row0, m, y);
    }

    /// The row multiple a channel range of [`Winograd::output`] starts at.
    pub fn strip_rows(&self) -> usize {
        self.filters.packed[0].strip_rows().max(1)
    }

    /// Input channels.
    pub fn input_channels(&self) -> usize {
        self.filters.cg
    }
}

#[cfg(test)]
mod tests;
