//! Direct convolution on AVX-512: no im2col, vectorised over output channels.
//!
//! A tile is `R` consecutive outputs of one output row (R <= 6, or 8 with one or two
//! blocks) by `16 * NB` output channels (NB <= 4): `R * NB` zmm accumulators. Each step
//! of depth (input channel, kernel row, kernel column) loads `NB` filter vectors (the
//! 16-channel blocks' weights for that tap, packed once: [`pack_filters`]) and broadcasts
//! `R` input elements straight from the (zero-padded) NCHW input, at row
//! `oy * sy + ky * dy` and column `(ox + r) * sx + kx * dx` of channel `c`, then makes
//! `R * NB` fused multiply-adds. The depth is summed in chunks of input channels whose
//! filters stay in L1, each chunk tap by tap, each tap channel by channel: every output
//! sums its taps in that order from zero, in one chain, whatever the tile and whatever
//! the split (the chunks depend on the depth and the kernel only).
//!
//! The GEMM path packs an im2col block of `op(B)` for each product and wastes the empty
//! part of its 32- or 48-column edge panels; at the small spatial sizes of a CNN's late
//! layers (7x7, 14x14) and its strided convolutions that packing and waste was a third
//! to a half of the time. Here nothing is packed per Run but the zero-padded copy of the
//! input (when the convolution pads), and a tile's edge costs nothing: a row's last
//! `out_w % 6` outputs take a narrower tile.
//!
//! Shallow convolutions (a depth of at most 64: a stem's 3 input channels of 3x3) with
//! rows of 16 outputs and more take wide tiles instead: 32 consecutive outputs of a row by
//! 8 channels (or, for a row's last 16 or fewer, 16 by 16), one zmm per channel and 16
//! outputs, each step of depth one load of the inputs per 16 outputs and one broadcast
//! filter per channel, stored straight into NCHW: the same sums, channel by channel, each
//! channel's taps in turn. Which tiles take a position depends on the convolution alone,
//! so its bits do not depend on the split either.
//!
//! The tile is written to NCHW through a transposed store; bias, activation and residual
//! are applied to the tile first (each in the order the unfused ops would), so a fused
//! Conv + bias + Relu + Add gives the bits of the separate steps on this sum.

use crate::arch::{self, Level};
use crate::conv::Window3d;
use crate::gemm::Epilogue;

#[cfg(target_arch = "x86_64")]
mod amx;
mod bf16;
#[cfg(target_arch = "x86_64")]
pub use amx::{
    amx_pair_len, amx_pairs, amx_planes, amx_planes_folded, amx_planes_len, fits_amx, fold_filters, folded, folds,
    pack_filters_amx, packed_len_amx,
};
pub use bf16::{fits_bf16, pack_filters_bf16, packed_len_bf16, pair_planes, pair_source};
pub(crate) use bf16::{pair_bf16_halves_portable, pair_bf16_portable};
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

/// Output channels per filter block (one zmm).
pub const BLOCK: usize = 16;
/// The least depth (input channels × taps) the direct path takes: below it the
/// transposed store costs more than im2col's packing saves.
const MIN_DEPTH: usize = 16;
/// The most positions of a 1x1 convolution (stride 1, no padding) the direct path takes:
/// past them the GEMM's packed panels of B read the input better than the direct
/// kernel's broadcasts, one plane per step of depth.
const MAX_POINTWISE_POSITIONS: usize = 256;
/// The least positions from which a 1x1 convolution that widens its channels runs on the
/// plain GEMM (W packed, the input read in place, the bias and a Relu or Clip applied in
/// the tiles' registers) rather than on the direct kernel or the EP's transposed product:
/// there the transposed store, or the transpose and epilogue passes over the large output,
/// cost more than the GEMM's part-empty last panel. One thread, Intel Xeon (AVX-512), in
/// MobileNetV2 (probe): 96 -> 576 channels on 14x14 205 -> 172 us, 64 -> 384 111 -> 78-86
/// (ORT 154, 77); the narrowing ones (576 -> 96) were slower there, and 7x7 planes too
/// (160 -> 960 kernel only: 105 us transposed, 133 on the GEMM).
const GEMM_WIDENING_POSITIONS: usize = 128;

/// Whether a 1x1 convolution of `positions` positions from `in_c` to `out_c` channels (a
/// group's) is one that runs on the plain GEMM (see [`GEMM_WIDENING_POSITIONS`]).
pub fn widens_on_gemm(positions: usize, in_c: usize, out_c: usize) -> bool {
    positions >= GEMM_WIDENING_POSITIONS && out_c >= in_c
}

/// Whether the direct kernel runs a convolution of `mg` output channels per group and
/// depth `kk` (input channels per group × taps) on `g` on this CPU: AVX-512, one or two
/// spatial axes, a width stride of 1 or 2.
pub fn fits(g: &Window3d, mg: usize, kk: usize) -> bool {
    Level::detected() == Level::Avx512
        && g.input[0] == 1
        && g.kernel[0] == 1
        && g.out[0] == 1
        && g.pad_begin[0] == 0
        && matches!(g.stride[2], 1 | 2)
        && mg >= BLOCK
        && kk >= MIN_DEPTH
        && g.positions() > 0
        && g.plane() > 0
        && (!g.is_pointwise() || g.positions() <= MAX_POINTWISE_POSITIONS && !widens_on_gemm(g.positions(), kk, mg))
}

/// Floats of the packed filters of `out_c` channels in `group` groups of depth `kk`.
pub fn packed_len(out_c: usize, group: usize, kk: usize) -> usize {
    group * (out_c / group).div_ceil(BLOCK) * kk * BLOCK
}

/// Packs `w` (`[out_c, kk]`, `kk` = input channels per group × taps, tap-minor) for the
/// direct kernel into `dst`: per group, per block of 16 output channels, `kk` rows of 16
/// lanes (zero past the group's channels).
pub fn pack_filters(w: &[f32], out_c: usize, group: usize, kk: usize, dst: &mut Vec<f32>) {
    let mg = out_c / group;
    let blocks = mg.div_ceil(BLOCK);
    dst.clear();
    dst.resize(packed_len(out_c, group, kk), 0.0);
    for gi in 0..group {
        for b in 0..blocks {
            let block = &mut dst[(gi * blocks + b) * kk * BLOCK..][..kk * BLOCK];
            for lane in 0..BLOCK.min(mg - b * BLOCK) {
                let filter = &w[(gi * mg + b * BLOCK + lane) * kk..][..kk];
                for (k, &v) in filter.iter().enumerate() {
                    block[k * BLOCK + lane] = v;
                }
            }
        }
    }
}

/// The input one group's convolution reads: its planes zero-padded so that every tap of
/// every output is inside, `rows` × `cols` each (or the input itself when no output
/// reads past it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Source {
    pub rows: usize,
    pub cols: usize,
    /// Whether the planes need a padded copy.
    pub copy: bool,
    /// Whether each padded row holds its even columns, then its odd ones, `cols / 2`
    /// each (with room past the last): the wide tiles of a width stride of 2 then load
    /// each tap's 16 inputs as one run, not as the even lanes of 32.
    pub split: bool,
}

/// The padded planes `g` needs, with `cg` input channels a group.
pub fn source(g: &Window3d, cg: usize) -> Source {
    let plain = unsplit_source(g);
    if g.stride[2] == 2 && g.dilation[2] == 1 && wide_tiles(g, cg) {
        // Tiles of up to 32 outputs from multiples of 32 read past the row's last output
        // by at most 31 + kw / 2 in either half: all inside the row.
        let half = (plain.cols.div_ceil(2)).max(g.out[2].next_multiple_of(32) + g.kernel[2] / 2 + 1);
        return Source { cols: 2 * half, copy: true, split: true, ..plain };
    }
    plain
}

/// The padded planes of `g` with whole rows (not split).
fn unsplit_source(g: &Window3d) -> Source {
    let [_, in_h, in_w] = g.input;
    let [_, out_h, out_w] = g.out;
    let [_, kh, kw] = g.kernel;
    let reach = |a: usize, o: usize, k: usize| (o - 1) * g.stride[a] + (k - 1) * g.dilation[a] + 1;
    let rows = (in_h + g.pad_begin[1]).max(reach(1, out_h, kh));
    let cols = (in_w + g.pad_begin[2]).max(reach(2, out_w, kw));
    let copy = g.pad_begin[1] > 0 || g.pad_begin[2] > 0 || rows > in_h || cols > in_w;
    Source { rows, cols, copy, split: false }
}

/// The deepest convolution the wide tiles take, and the stems they take at any depth (up
/// to 4 input channels of 7x7). On the double tiles (AMD Zen 5, kernel only), 3->64
/// channels of 7x7 at stride 2 ran at 190-195 GFLOP/s against the narrow tiles' 154;
/// 16->32 of 3x3 (a depth of 144) at 96-137 against 198, the narrow tiles reusing each
/// broadcast input for two blocks.
const WIDE_DEPTH: usize = 64;
const STEM_CHANNELS: usize = 4;
const STEM_TAPS: usize = 49;

/// Whether a convolution of `cg` input channels a group runs on wide tiles (see the
/// module's notes): 2-D with rows of at least 16 outputs, shallow or a stem. The narrow
/// tiles broadcast each input and load each tap's filters, `R + NB` loads for `R × NB`
/// multiply-adds, then transpose the tile into NCHW; at a depth of 27 that transpose and
/// those loads were most of the time (3->32 channels of 3x3 at stride 2 on 224x224: 2.25x
/// ORT's time).
pub fn wide_tiles(g: &Window3d, cg: usize) -> bool {
    !g.is_pointwise() && g.out[2] >= 16 && shallow(g, cg)
}

/// Whether a convolution of `cg` input channels a group is shallow (a depth of at most
/// [`WIDE_DEPTH`]) or a stem (see [`STEM_CHANNELS`]): the ones the wide tiles take on rows
/// of 16 outputs or more, and the bfloat16 kernel never (see [`fits_bf16`]).
pub(crate) fn shallow(g: &Window3d, cg: usize) -> bool {
    let taps = g.kernel[1] * g.kernel[2];
    cg * taps <= WIDE_DEPTH || (cg <= STEM_CHANNELS && taps <= STEM_TAPS)
}

/// Copies one group's `cg` input planes into `dst`, zero-padded (and split) as `src` says.
pub fn pad_planes(x: &[f32], cg: usize, g: &Window3d, src: Source, dst: &mut Vec<f32>) {
    let len = padded_len(cg, src);
    // Every element is written below: grown, not cleared (a clear wrote it all twice).
    dst.truncate(len);
    dst.resize(len, 0.0);
    pad_rows(x, g, src, 0..cg * src.rows, dst);
}

/// Floats of `cg` padded planes.
pub fn padded_len(cg: usize, src: Source) -> usize {
    cg * src.rows * src.cols
}

/// Rows `rows` of the padded planes of [`pad_planes`] (their rows counted one plane after
/// the other) into `dst`, which holds just those rows: every element written, zero where
/// the padding is. Disjoint ranges can be padded by different tasks.
pub fn pad_rows(x: &[f32], g: &Window3d, src: Source, rows: std::ops::Range<usize>, dst: &mut [f32]) {
    let [_, in_h, in_w] = g.input;
    let (pt, pl) = (g.pad_begin[1], g.pad_begin[2]);
    assert_eq!(dst.len(), rows.len() * src.cols, "pad_rows: output length");
    if !src.split && src.cols <= 16 && crate::arch::pad_rows(crate::arch::isa(), x, g, src, rows.clone(), dst) {
        return;
    }
    let half = src.cols / 2;
    for (r, out) in rows.zip(dst.chunks_exact_mut(src.cols)) {
        let (c, y) = (r / src.rows, r % src.rows);
        if y < pt || y - pt >= in_h {
            out.fill(0.0);
            continue;
        }
        let row = &x[(c * in_h + y - pt) * in_w..][..in_w];
        if !src.split {
            // The padding zeroed, the row copied: each element written once (zeroing the
            // whole row first wrote the copied part twice).
            let (left, rest) = out.split_at_mut(pl);
            let (mid, right) = rest.split_at_mut(in_w);
            left.fill(0.0);
            mid.copy_from_slice(row);
            right.fill(0.0);
            continue;
        }
        out.fill(0.0);
        // Padded column j = pl + i goes to half j % 2 at j / 2: the row's even inputs to
        // one half and its odd ones to the other, as runs.
        let (even, odd) = out.split_at_mut(half);
        let (first, second) = if pl.is_multiple_of(2) { (even, odd) } else { (odd, even) };
        let (a, b) = (&mut first[pl / 2..][..in_w.div_ceil(2)], &mut second[pl.div_ceil(2)..][..in_w / 2]);
        for ((a, b), pair) in a.iter_mut().zip(b.iter_mut()).zip(row.chunks_exact(2)) {
            (*a, *b) = (pair[0], pair[1]);
        }
        if in_w % 2 == 1 {
            a[in_w / 2] = row[in_w - 1];
        }
    }
}

/// What one call of the direct kernel computes: output channels `channels` (of the
/// group's `mg`) of one group, into `y` (those channels' rows of the group's
/// `[mg, positions]` output).
pub struct Direct<'a> {
    /// The group's input planes, as [`source`] describes them (padded or not).
    pub x: &'a [f32],
    pub src: Source,
    /// Input channels of the group.
    pub cg: usize,
    pub g: &'a Window3d,
    /// The group's packed filters (all its blocks, from [`pack_filters`]).
    pub w: &'a [f32],
    /// The group's `mg` biases.
    pub bias: Option<&'a [f32]>,
    /// The epilogue's activation, residual (the group's `[mg, positions]` block) and
    /// second activation; its bias is ignored (`bias` is it).
    pub epilogue: Epilogue<'a>,
}

/// Where a call of the direct kernel puts its outputs: all positions of its channels
/// one after the other, or, for a call on some output rows, each channel's part.
pub(crate) enum Out<'y, 'p> {
    /// `[channels][positions]`.
    Whole(&'y mut [f32]),
    /// Channel `l`'s outputs from position `first` on: `parts[l]`.
    Rows { parts: &'y mut [&'p mut [f32]], first: usize },
}

impl<'p> Out<'_, 'p> {
    /// The `len` outputs of channel `l` (of the call's) from position `pos`, with
    /// `positions` a channel.
    #[inline(always)]
    pub(crate) fn at(&mut self, positions: usize, l: usize, pos: usize, len: usize) -> &mut [f32] {
        match self {
            Out::Whole(y) => &mut y[l * positions + pos..][..len],
            Out::Rows { parts, first } => &mut parts[l][pos - *first..][..len],
        }
    }

    /// The outputs of the channels from `l` on.
    #[inline(always)]
    pub(crate) fn from(&mut self, positions: usize, l: usize) -> Out<'_, 'p> {
        match self {
            Out::Whole(y) => Out::Whole(&mut y[l * positions..]),
            Out::Rows { parts, first } => Out::Rows { parts: &mut parts[l..], first: *first },
        }
    }
}

impl Direct<'_> {
    /// Computes output channels `channels` (a range starting at a multiple of 16) into
    /// `y` (`channels.len() * positions` elements); `carry` is working memory (it grows to
    /// at most 64 floats per position, for deep convolutions). Panics on a length
    /// mismatch or off AVX-512.
    pub fn run(&self, channels: std::ops::Range<usize>, y: &mut [f32], carry: &mut Vec<f32>) {
        let positions = self.g.positions();
        assert_eq!(y.len(), channels.len() * positions, "direct: output length");
        let rows = if self.g.is_pointwise() { 0..1 } else { 0..self.g.out[1] };
        self.checked(channels, rows, Out::Whole(y), carry);
    }

    /// [`Direct::run`] on output rows `rows` only (of any convolution but a 1x1 one of
    /// stride 1 without padding, whose positions the kernel walks as one row): channel
    /// `l`'s outputs of those rows go to `parts[l]`
    /// (`rows.len()` rows of `out_w` each). Calls on disjoint rows give the bits of the
    /// whole call: a split of the convolution by rows, each part written in place.
    pub fn run_rows(
        &self,
        channels: std::ops::Range<usize>,
        rows: std::ops::Range<usize>,
        parts: &mut [&mut [f32]],
        carry: &mut Vec<f32>,
    ) {
        let g = self.g;
        assert!(!g.is_pointwise() && rows.start <= rows.end && rows.end <= g.out[1], "direct: output rows");
        assert_eq!(parts.len(), channels.len(), "direct: a part a channel");
        let len = rows.len() * g.out[2];
        assert!(parts.iter().all(|p| p.len() == len), "direct: part length");
        let first = rows.start * g.out[2];
        self.checked(channels, rows, Out::Rows { parts, first }, carry);
    }

    fn checked(
        &self,
        channels: std::ops::Range<usize>,
        rows: std::ops::Range<usize>,
        y: Out<'_, '_>,
        carry: &mut Vec<f32>,
    ) {
        assert!(channels.start.is_multiple_of(BLOCK), "direct: channels start at a block");
        let kk = self.cg * self.g.kernel[1] * self.g.kernel[2];
        assert!(self.w.len() >= channels.end.div_ceil(BLOCK) * kk * BLOCK, "direct: packed filters");
        assert_eq!(self.x.len(), self.cg * self.src.rows * self.src.cols, "direct: input planes");
        arch::direct(arch::isa(), self, channels, rows, y, carry);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::conv::{self, window_geometry, Padding};
    use crate::gemm::{Activation, GemmScratch};
    use crate::UnaryOp;

    pub(crate) fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(1);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    /// The direct convolution of one case against the im2col + GEMM one (same sums in
    /// another order: within a few ulp of the depth's magnitude), whole and split by
    /// channel blocks (the same bits).
    #[allow(clippy::too_many_arguments)]
    fn check(
        in_c: usize,
        out_c: usize,
        group: usize,
        hw: [usize; 2],
        k: [usize; 2],
        s: [usize; 2],
        d: usize,
        pad: [usize; 4],
        fused: bool,
    ) {
        if Level::detected() != Level::Avx512 {
            return;
        }
        let pads = Padding::Explicit([0, pad[0], pad[1], 0, pad[2], pad[3]]);
        let (g, _) =
            window_geometry([1, hw[0], hw[1]], [1, k[0], k[1]], [1, s[0], s[1]], [1, d, d], pads, false).unwrap();
        let (cg, mg) = (in_c / group, out_c / group);
        let kk = cg * k[0] * k[1];
        let positions = g.positions();
        let x = values(in_c * g.plane(), 1);
        let w = values(out_c * kk, 2);
        let bias = values(out_c, 3);
        let residual = values(out_c * positions, 4);
        let relu = Some(Activation::Unary(UnaryOp::Relu));
        let clip = Some(Activation::Clip { min: 0.0, max: 0.5 });
        let ep = |res: Option<&'static [f32]>| -> Epilogue<'static> {
            if fused {
                Epilogue { act: relu, residual: res, after: clip, ..Epilogue::default() }
            } else {
                Epilogue::default()
            }
        };
        let residual: &'static [f32] = Box::leak(residual.into_boxed_slice());
        let mut want = vec![0.0; out_c * positions];
        let (mut col, mut scratch) = (Vec::new(), GemmScratch::new());
        let res = fused.then_some(residual);
        conv::conv(&x, &w, Some(&bias), 1, in_c, out_c, group, &g, &mut want, &mut col, &mut scratch, None, &ep(res));
        let mut packed = Vec::new();
        pack_filters(&w, out_c, group, kk, &mut packed);
        let src = source(&g, cg);
        let blocks = mg.div_ceil(BLOCK);
        let mut got = vec![f32::NAN; out_c * positions];
        let mut split = vec![f32::NAN; out_c * positions];
        let mut rows_split = vec![f32::NAN; out_c * positions];
        let mut padded = Vec::new();
        for gi in 0..group {
            let xg = &x[gi * cg * g.plane()..][..cg * g.plane()];
            let xs: &[f32] = if src.copy {
                pad_planes(xg, cg, &g, src, &mut padded);
                &padded
            } else {
                xg
            };
            let block = gi * mg * positions..(gi + 1) * mg * positions;
            let run = Direct {
                x: xs,
                src,
                cg,
                g: &g,
                w: &packed[gi * blocks * kk * BLOCK..][..blocks * kk * BLOCK],
                bias: Some(&bias[gi * mg..][..mg]),
                epilogue: ep(res.map(|r| &r[block.clone()])),
            };
            let mut carry = Vec::new();
            run.run(0..mg, &mut got[block.clone()], &mut carry);
            // Split after the first block: the same bits.
            let cut = BLOCK.min(mg);
            let (a, b) = split[block.clone()].split_at_mut(cut * positions);
            run.run(0..cut, a, &mut carry);
            run.run(cut..mg, b, &mut carry);
            // By output rows, in three parts (the last two of one row, or empty, on short
            // planes), the first and last channel blocks apart: each part in place.
            if !g.is_pointwise() {
                let (out_h, out_w) = (g.out[1], g.out[2]);
                let cuts = [0, out_h / 3, out_h - out_h.min(1), out_h];
                for ch in [0..cut, cut..mg] {
                    for rows in cuts.windows(2).map(|c| c[0]..c[1]) {
                        let mut parts: Vec<&mut [f32]> = rows_split[block.clone()]
                            .chunks_mut(positions)
                            .skip(ch.start)
                            .take(ch.len())
                            .map(|c| &mut c[rows.start * out_w..rows.end * out_w])
                            .collect();
                        run.run_rows(ch.clone(), rows, &mut parts, &mut carry);
                    }
                }
            }
        }
        if !g.is_pointwise() {
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                rows_split.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "by rows"
            );
        }
        let depth = kk as f32;
        for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 4e-7 * depth * (1.0 + b.abs()), "{i}: direct {a} im2col {b}");
        }
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            split.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
    }

    /// Padded rows written over stale values, whole or in parts, are the padded planes of
    /// a fresh buffer: every element is written.
    #[test]
    fn padded_rows_overwrite_what_was_there() {
        for (hw, k, s, p, cg) in [(20, 3, 2, 1, 3), (13, 3, 1, 1, 5), (12, 7, 2, 3, 3), (11, 3, 2, 0, 2)] {
            let pads = Padding::Explicit([0, p, p, 0, p, p]);
            let (g, _) = window_geometry([1, hw, 3 * hw], [1, k, k], [1, s, s], [1; 3], pads, false).unwrap();
            let src = source(&g, cg);
            let x = values(cg * g.plane(), 9);
            let mut fresh = Vec::new();
            pad_planes(&x, cg, &g, src, &mut fresh);
            assert!(src.copy && fresh.contains(&0.0) && fresh.len() == padded_len(cg, src));
            assert_eq!(src.split, s == 2, "{hw} {k} {s} {p} {cg}");
            let mut stale = vec![f32::NAN; fresh.len() + 7];
            pad_planes(&x, cg, &g, src, &mut stale);
            assert_eq!(stale, fresh);
            let mut parts = vec![f32::NAN; fresh.len()];
            let rows = cg * src.rows;
            for cut in [0..rows / 3, rows / 3..rows / 3 + 1, rows / 3 + 1..rows] {
                pad_rows(&x, &g, src, cut.clone(), &mut parts[cut.start * src.cols..cut.end * src.cols]);
            }
            assert_eq!(parts, fresh, "{hw} {k} {s} {p} {cg}");
        }
    }

    /// Padded rows of up to 16 floats (the AVX-512 build's one masked load and store a
    /// row): every element is the input's or a zero where the formula says, over stale
    /// values, whole or in parts, with the padding before and after of any size.
    #[test]
    fn short_padded_rows_hold_the_input_and_zeros() {
        let mut taken = 0;
        for (h, w) in [(1, 1), (3, 2), (7, 7), (10, 10), (14, 14), (5, 13), (9, 12)] {
            for (k, s) in [(3, 1), (3, 2), (5, 1), (7, 2)] {
                for [pt, pl, pb, pr] in [[1, 1, 1, 1], [0, 2, 2, 0], [2, 0, 0, 2], [3, 3, 3, 3], [1, 0, 0, 1]] {
                    let pads = Padding::Explicit([0, pt, pl, 0, pb, pr]);
                    let Ok((g, _)) = window_geometry([1, h, w], [1, k, k], [1, s, s], [1; 3], pads, false) else {
                        continue;
                    };
                    let cg = 3;
                    let src = source(&g, cg);
                    if !src.copy || src.split || src.cols > 16 {
                        continue;
                    }
                    taken += 1;
                    let x = values(cg * g.plane(), 11);
                    let want: Vec<f32> = (0..padded_len(cg, src))
                        .map(|i| {
                            let (r, j) = (i / src.cols, i % src.cols);
                            let (c, y) = (r / src.rows, r % src.rows);
                            let (y, j) = (y.wrapping_sub(g.pad_begin[1]), j.wrapping_sub(g.pad_begin[2]));
                            if y < h && j < w {
                                x[(c * h + y) * w + j]
                            } else {
                                0.0
                            }
                        })
                        .collect();
                    let mut stale = vec![f32::NAN; want.len() + 5];
                    pad_planes(&x, cg, &g, src, &mut stale);
                    assert_eq!(stale, want, "{g:?}");
                    let mut parts = vec![f32::NAN; want.len()];
                    let rows = cg * src.rows;
                    for cut in [0..rows / 3, rows / 3..rows / 3 + 1, rows / 3 + 1..rows] {
                        pad_rows(&x, &g, src, cut.clone(), &mut parts[cut.start * src.cols..cut.end * src.cols]);
                    }
                    assert_eq!(parts, want, "{g:?}");
                }
            }
        }
        assert!(taken > 30, "{taken} cases");
    }

    #[test]
    fn pointwise_convs_match_the_gemm_path() {
        check(64, 16, 1, [7, 7], [1, 1], [1, 1], 1, [0; 4], false);
        check(96, 96, 1, [14, 14], [1, 1], [1, 1], 1, [0; 4], true);
        check(80, 37, 1, [5, 9], [1, 1], [1, 1], 1, [0; 4], true);
        check(64, 130, 1, [3, 3], [1, 1], [2, 2], 1, [0; 4], false);
    }

    #[test]
    fn spatial_convs_match_the_gemm_path() {
        check(16, 32, 1, [10, 11], [3, 3], [1, 1], 1, [1, 1, 1, 1], true);
        check(8, 64, 1, [9, 13], [3, 3], [2, 2], 1, [1, 1, 1, 1], false);
        check(8, 20, 1, [12, 12], [5, 5], [2, 2], 1, [2, 1, 2, 0], true);
        check(12, 48, 1, [11, 8], [3, 3], [1, 2], 2, [2, 2, 1, 2], false);
        check(3, 32, 1, [23, 23], [7, 7], [2, 2], 1, [3, 3, 3, 3], true);
        check(32, 16, 1, [6, 6], [3, 1], [1, 1], 1, [0; 4], false);
        check(64, 128, 2, [7, 7], [3, 3], [1, 1], 1, [1, 1, 1, 1], true);
        check(16, 80, 1, [1, 40], [1, 5], [1, 1], 1, [0, 2, 0, 2], true);
    }

    #[test]
    fn shallow_convs_on_wide_rows_match_the_gemm_path() {
        // Stems: 3 input channels, rows of 16 outputs and more (wide tiles of 32 or 16)
        // with a rest of 1 to 15 (narrow ones), strides 1 and 2, fused or not, a block of
        // 16 and part of one (8 channels a double tile: 4 and 12 of a block too).
        check(3, 32, 1, [40, 40], [3, 3], [2, 2], 1, [1, 1, 1, 1], true);
        check(3, 24, 1, [6, 54], [3, 3], [1, 1], 1, [1, 1, 1, 1], true);
        check(3, 44, 1, [9, 101], [3, 3], [2, 2], 1, [0; 4], false);
        check(3, 64, 1, [35, 38], [7, 7], [2, 2], 1, [3, 3, 3, 3], false);
        check(3, 20, 1, [19, 37], [3, 3], [1, 1], 1, [1, 1, 1, 1], true);
        check(4, 24, 1, [9, 70], [3, 3], [2, 2], 2, [2, 2, 2, 2], false);
        check(8, 16, 1, [17, 33], [3, 3], [1, 2], 1, [0, 1, 0, 0], true);
    }

    /// A lone Relu or Clip is applied in the registers before the store, on the wide
    /// tiles (3 input channels) and on the narrow ones (16, a depth of 144; 40 output
    /// channels, the last block part-full): the bits of the conv followed by the
    /// activation's own pass, NaN and -0 included (a NaN input; a Clip whose lower bound
    /// is -0).
    #[test]
    fn tiles_clamp_in_registers_as_the_activation_would() {
        if Level::detected() != Level::Avx512 {
            return;
        }
        for (stride, pad, cg, mg) in [(2, 1, 3, 24), (1, 0, 3, 24), (2, 0, 3, 24), (1, 1, 16, 40), (2, 1, 16, 40)] {
            let pads = Padding::Explicit([0, pad, pad, 0, pad, pad]);
            let (g, _) = window_geometry([1, 20, 45], [1, 3, 3], [1, stride, stride], [1, 1, 1], pads, false).unwrap();
            assert_eq!(wide_tiles(&g, cg), cg == 3);
            let kk = cg * 9;
            let mut x = values(cg * g.plane(), 5);
            x[7 * 45 + 9] = f32::NAN;
            let w = values(mg * kk, 6);
            let bias = values(mg, 7);
            let mut packed = Vec::new();
            pack_filters(&w, mg, 1, kk, &mut packed);
            let src = source(&g, cg);
            let mut padded = Vec::new();
            let xs: &[f32] = if src.copy {
                pad_planes(&x, cg, &g, src, &mut padded);
                &padded
            } else {
                &x
            };
            let clips = [Activation::Clip { min: -0.25, max: 0.5 }, Activation::Clip { min: -0.0, max: 0.5 }];
            for act in [Activation::Unary(UnaryOp::Relu), clips[0], clips[1]] {
                let run = |epilogue: Epilogue<'static>| {
                    let d = Direct { x: xs, src, cg, g: &g, w: &packed, bias: Some(&bias), epilogue };
                    let mut y = vec![f32::NAN; mg * g.positions()];
                    d.run(0..mg, &mut y, &mut Vec::new());
                    y
                };
                let got = run(Epilogue { act: Some(act), ..Epilogue::default() });
                let mut want = run(Epilogue::default());
                act.apply(Level::Avx512, &mut want);
                assert!(want.iter().any(|v| v.is_nan()));
                assert_eq!(want.iter().any(|v| v.to_bits() == (-0.0f32).to_bits()), act == clips[1]);
                let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&got), bits(&want), "{act:?} stride {stride} pad {pad}");
            }
        }
    }

    #[test]
    fn deep_convs_sum_in_chunks_with_the_same_result() {
        // 1200 input channels of 1x1 and 130 of 3x3: ten chunks each (of 128 steps, 14
        // channels of 3x3).
        check(1200, 48, 1, [5, 5], [1, 1], [1, 1], 1, [0; 4], true);
        check(130, 64, 1, [7, 7], [3, 3], [1, 1], 1, [1, 1, 1, 1], true);
        check(300, 20, 1, [6, 5], [3, 3], [2, 2], 1, [1, 0, 1, 1], false);
    }
}
