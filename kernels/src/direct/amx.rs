//! The bfloat16 convolution on AMX tiles, for the opt-in `bf16` precision on CPUs that
//! have them: a 2-D (or 1-D) convolution as a product of its filters by its padded
//! input, with no im2col.
//!
//! The input is rounded once per call into pair planes (each word channels `2p` and
//! `2p + 1` at one padded position), each split into its `sh · sw` phases for a stride
//! of `(sh, sw)` ([`amx_planes`]). Number the outputs `q = oy · P + ox` for a phase's
//! width `P`: the input of tap `(ky, kx)` for output `q` is word `q + c` of one phase of
//! each pair plane, `c` the tap's constant, so 16 consecutive outputs read 16
//! consecutive words of 16 pair planes, one tile of B. A tile of A is 16 output
//! channels' filters at one tap for 16 pairs of input channels ([`pack_filters_amx`]).
//! Each call of the tiles sums 32 channels by runs of 32 consecutive `q` over every tap
//! and pair; the `P - out_w` positions of each row past its outputs are computed and
//! dropped (3% of a 56-wide plane, 22% of a 7-wide one). Each output's sum runs over the
//! same steps in the same order whatever the split, so splits give the whole
//! convolution's bits.

use super::{pair_source, Direct, BLOCK};
use crate::arch::Level;
use crate::arch::{self, amx};
use crate::conv::Window3d;
use crate::gemm::{to_bf16, Bias, Epilogue};
use std::ops::Range;

/// Pairs of input channels in one tile's row.
const PAIRS: usize = 16;
/// Outputs (padded positions) of one call of the tiles.
const COLS: usize = 32;
/// Padded positions a band of output rows covers at least: the band's sums (32 channels)
/// stay in L2 until they are copied out and the epilogue runs on them.
const BAND: usize = 512;
/// Steps of one call of the tiles at most.
const STEPS: usize = 64;

/// Whether the AMX kernel runs a convolution of `cg` input and `mg` output channels a
/// group on `g`: the CPU has AMX-BF16 tiles, the convolution is 1-D or 2-D, and it has
/// at least 16 input and 16 output channels a group (fewer input channels would leave
/// most of each tile zero: stems fold their kernel's columns into channels, [`folds`];
/// other shallow convolutions keep the float kernels).
pub fn fits_amx(g: &Window3d, cg: usize, mg: usize) -> bool {
    takes(g) && cg >= PAIRS && mg >= BLOCK
}

/// Whether the AMX kernel can run a convolution on `g` at all: the CPU has the tiles, and
/// `g` is 1-D or 2-D with outputs.
fn takes(g: &Window3d) -> bool {
    amx::bf16_tiles() && g.input[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1 && g.positions() > 0
}

/// Words of the AMX-packed filters of `out_c` channels in `group` groups of `cg` input
/// channels and `taps` taps.
pub fn packed_len_amx(out_c: usize, group: usize, cg: usize, taps: usize) -> usize {
    group * (out_c / group).div_ceil(BLOCK) * cg.div_ceil(2 * PAIRS) * taps * BLOCK * PAIRS
}

/// Packs `w` (`[out_c, cg, taps]`) for the AMX kernel into `dst` (as float bits): per
/// group, per block of 16 output channels, per chunk of 16 pairs of input channels, per
/// tap, a tile of 16 rows (the channels) of 16 words, word `j` of row `r` holding the
/// weights of input channels `2j` (low half) and `2j + 1` (high half) of the chunk (zero
/// past the group's channels).
pub fn pack_filters_amx(w: &[f32], out_c: usize, group: usize, cg: usize, taps: usize, dst: &mut Vec<f32>) {
    let (mg, chunks, kk) = (out_c / group, cg.div_ceil(2 * PAIRS), cg * taps);
    let blocks = mg.div_ceil(BLOCK);
    let tile = BLOCK * PAIRS;
    dst.clear();
    dst.resize(packed_len_amx(out_c, group, cg, taps), 0.0);
    for gi in 0..group {
        for b in 0..blocks {
            let block = &mut dst[(gi * blocks + b) * chunks * taps * tile..][..chunks * taps * tile];
            for r in 0..BLOCK.min(mg - b * BLOCK) {
                let filter = &w[(gi * mg + b * BLOCK + r) * kk..][..kk];
                let at = |c: usize, t: usize| if c < cg { to_bf16(filter[c * taps + t]) as u32 } else { 0 };
                for ch in 0..chunks {
                    for t in 0..taps {
                        let row = &mut block[(ch * taps + t) * tile + r * PAIRS..][..PAIRS];
                        for (j, o) in row.iter_mut().enumerate() {
                            let c = 2 * (ch * PAIRS + j);
                            *o = f32::from_bits(at(c, t) | (at(c + 1, t) << 16));
                        }
                    }
                }
            }
        }
    }
}

/// Where the AMX kernel's input is: each pair of input channels is `sh · sw` phase
/// planes of the padded plane (phase `(a, b)` holds its rows `a, a + sh, ...` and columns
/// `b, b + sw, ...`), so that at any stride a tap's inputs for consecutive outputs are
/// consecutive words of one phase.
#[derive(Clone, Copy, Debug)]
struct Phases {
    sh: usize,
    sw: usize,
    /// Rows and words a row of a phase.
    rows: usize,
    width: usize,
    /// Words of a pair of input channels (all its phases).
    pair: usize,
}

impl Phases {
    fn of(g: &Window3d) -> Phases {
        let src = pair_source(g);
        let (sh, sw) = (g.stride[1], g.stride[2]);
        let (rows, width) = (src.rows.div_ceil(sh), src.cols.div_ceil(sw));
        // (Each pair from a 64-byte boundary, as the planes: a tile's row of a 1x1
        // convolution's input is then one access, see `lines`.)
        Phases { sh, sw, rows, width, pair: (sh * sw * rows * width).next_multiple_of(16) }
    }

    /// The word of padded row `y`, column `x` within a pair's phases.
    fn at(&self, y: usize, x: usize) -> usize {
        ((y % self.sh) * self.sw + x % self.sw) * self.rows * self.width + (y / self.sh) * self.width + x / self.sw
    }

    /// Zeroes padded row `y` of a pair's phases `out`, all its columns.
    fn zero_row(&self, y: usize, out: &mut [f32]) {
        for b in 0..self.sw {
            out[self.at(y, b)..][..self.width].fill(0.0);
        }
    }

    /// Rounds `l` and `h` (zeros when `None`) to bfloat16 pairs into padded row `y` of a
    /// pair's phases `out`, from padded column `x0`, each word to its column's phase.
    fn round_row(&self, l: &[f32], h: Option<&[f32]>, y: usize, x0: usize, out: &mut [f32]) {
        let n = l.len();
        match self.sw {
            1 => arch::pair_bf16(l, h, &mut out[self.at(y, x0)..][..n]),
            2 => {
                // The even and odd inputs, each to its phase's row.
                let (a, b) = (self.at(y, x0), self.at(y, x0 + 1));
                let (first, second) = out.split_at_mut(a.max(b));
                let (lower, upper) = (&mut first[a.min(b)..], second);
                let (even, odd) = if a < b { (lower, upper) } else { (upper, lower) };
                arch::pair_bf16_halves(l, h, &mut even[..n.div_ceil(2)], &mut odd[..n / 2]);
            }
            sw => {
                let mut words = [0f32; 256];
                for c0 in (0..n).step_by(words.len()) {
                    let m = words.len().min(n - c0);
                    arch::pair_bf16(&l[c0..][..m], h.map(|h| &h[c0..][..m]), &mut words[..m]);
                    // Each phase's words of the row: every sw-th, from the first in it.
                    for b in 0..sw.min(m) {
                        let row = &mut out[self.at(y, x0 + c0 + b)..];
                        for (o, &w) in row.iter_mut().zip(words[b..m].iter().step_by(sw)) {
                            *o = w;
                        }
                    }
                }
            }
        }
    }
}

/// Words of the input [`amx_planes`] writes for `cg` input channels on `g`.
pub fn amx_planes_len(cg: usize, g: &Window3d) -> usize {
    let ph = Phases::of(g);
    cg.div_ceil(2 * PAIRS) * PAIRS * ph.pair + ph.width + 2 * COLS
}

/// Rounds one group's `cg` input planes for the AMX kernel into `dst`, from its first
/// 64-byte boundary (`lines::aligned_in`), and returns them: per pair of input channels
/// (channel `2p` in the low half of each word, `2p + 1` or zero in the high half), the
/// phases of its padded plane (the padding zero), then zero pairs up to whole chunks of
/// 16 and words past the last (the last tiles read past the last output's input, into
/// the next row, for outputs they drop).
pub fn amx_planes<'d>(x: &[f32], cg: usize, g: &Window3d, dst: &'d mut Vec<f32>) -> &'d [f32] {
    let ph = Phases::of(g);
    // Not cleared: the words no valid output reads (past a row's or a plane's reach, the
    // slack) may keep what was there; the padding and the zero pairs are written.
    let planes = crate::lines::aligned_in(dst, amx_planes_len(cg, g));
    let pairs = cg.div_ceil(2);
    let (real, zero) = planes.split_at_mut(pairs * ph.pair);
    zero.fill(0.0);
    amx_pairs(x, cg, g, 0, real);
    planes
}

/// Words of one pair of input channels in [`amx_planes`]' layout (all its phases).
pub fn amx_pair_len(g: &Window3d) -> usize {
    Phases::of(g).pair
}

/// The pairs of input channels from `first` on of [`amx_planes`] into `out` (whole pairs
/// of [`amx_pair_len`] words: `out` is that part of the whole buffer), for splitting the
/// rounding over a pool: the words past the real pairs (zero pairs, slack) are the
/// caller's. Panics if `out` is not whole pairs of `g`'s or runs past the last pair.
pub fn amx_pairs(x: &[f32], cg: usize, g: &Window3d, first: usize, out: &mut [f32]) {
    let ph = Phases::of(g);
    let [_, in_h, in_w] = g.input;
    let plane_in = in_h * in_w;
    assert_eq!(x.len(), cg * plane_in, "direct amx: input planes");
    assert!(out.len().is_multiple_of(ph.pair), "direct amx: whole pairs");
    assert!(first + out.len() / ph.pair <= cg.div_ceil(2), "direct amx: pairs past the channels");
    let (pt, pl) = (g.pad_begin[1], g.pad_begin[2]);
    let src = pair_source(g);
    for (p, out) in out.chunks_exact_mut(ph.pair).enumerate().map(|(i, o)| (first + i, o)) {
        let lo = &x[2 * p * plane_in..][..plane_in];
        let hi = (2 * p + 1 < cg).then(|| &x[(2 * p + 1) * plane_in..][..plane_in]);
        for y in (0..pt).chain(pt + in_h..src.rows) {
            ph.zero_row(y, out);
        }
        for y in pt..pt + in_h {
            for x in (0..pl).chain(pl + in_w..src.cols) {
                out[ph.at(y, x)] = 0.0;
            }
        }
        if ph.sh == 1 && ph.sw == 1 && pl == 0 && src.cols == in_w {
            // Whole rows, one after the other in both (one phase).
            arch::pair_bf16(lo, hi, &mut out[ph.at(pt, 0)..][..plane_in]);
            continue;
        }
        for iy in 0..in_h {
            let (l, h) = (&lo[iy * in_w..][..in_w], hi.map(|h| &h[iy * in_w..][..in_w]));
            ph.round_row(l, h, iy + pt, pl, out);
        }
    }
}

/// Whether a convolution of few input channels (`cg` < 16, a stem) runs on the AMX
/// kernel with its kernel's columns folded into its channels ([`folded`]): one group of
/// 16 or more output channels, a kernel wider than one column, and at least 16 folded
/// channels (a 7x7 stem of 3 channels has 21). A 3x3 stem of 3 channels (9) ran slower
/// folded, with a chunk of 16 pairs mostly empty (YOLO-tiny 0.66 -> 0.90 of ORT), and
/// keeps the float kernel; [`run_amx`](Direct::run_amx) takes it all the same.
pub fn folds(g: &Window3d, cg: usize, mg: usize, group: usize) -> bool {
    let kw = g.kernel[2];
    group == 1 && cg < PAIRS && kw > 1 && cg * kw >= PAIRS && mg >= BLOCK && takes(g)
}

/// The convolution `g` with its `kw` kernel columns folded into the channels: folded
/// channel `c · kw + kx` at padded position `(y, x)` is channel `c` at `(y, x + kx · dw)`
/// of `g`'s padded input, so the folded convolution has a kernel of one column, no
/// horizontal padding, and an input as wide as its outputs reach. Its outputs are `g`'s.
pub fn folded(g: &Window3d) -> Window3d {
    let ([_, in_h, _], [_, _, out_w]) = (g.input, g.out);
    Window3d {
        input: [1, in_h, (out_w.max(1) - 1) * g.stride[2] + 1],
        out: g.out,
        kernel: [1, g.kernel[1], 1],
        stride: g.stride,
        dilation: [1, g.dilation[1], 1],
        pad_begin: [0, g.pad_begin[1], 0],
    }
}

/// The filters `w` (`[out_c, cg, kh, kw]`) of `g` as [`folded`]'s (`[out_c, cg · kw, kh]`).
pub fn fold_filters(w: &[f32], out_c: usize, cg: usize, g: &Window3d) -> Vec<f32> {
    let (kh, kw) = (g.kernel[1], g.kernel[2]);
    assert_eq!(w.len(), out_c * cg * kh * kw, "direct amx: filters");
    let mut out = vec![0.0; w.len()];
    for m in 0..out_c {
        for c in 0..cg {
            for ky in 0..kh {
                for kx in 0..kw {
                    out[((m * cg + c) * kw + kx) * kh + ky] = w[((m * cg + c) * kh + ky) * kw + kx];
                }
            }
        }
    }
    out
}

/// [`amx_planes`] of [`folded`]`(g)`'s input, made from `g`'s `cg` input planes `x`.
pub fn amx_planes_folded<'d>(x: &[f32], cg: usize, g: &Window3d, dst: &'d mut Vec<f32>) -> &'d [f32] {
    let f = folded(g);
    let ph = Phases::of(&f);
    let src = pair_source(&f);
    let ([_, in_h, in_w], kw, dw) = (g.input, g.kernel[2], g.dilation[2]);
    let (pt, pl) = (g.pad_begin[1], g.pad_begin[2]);
    let (cf, cols) = (cg * kw, f.input[2]);
    assert_eq!(x.len(), cg * in_h * in_w, "direct amx: input planes");
    let dst = crate::lines::aligned_in(dst, amx_planes_len(cf, &f));
    let pairs = cf.div_ceil(2);
    dst[pairs * ph.pair..].fill(0.0);
    // Folded channel `c'`'s row `iy`, columns `x0 ..`, into `row` (zero outside g's input).
    let fill = |c: usize, iy: usize, x0: usize, row: &mut [f32]| {
        let (ch, kx) = (c / kw, c % kw);
        let input = &x[(ch * in_h + iy) * in_w..][..in_w];
        let first = (x0 + kx * dw) as isize - pl as isize;
        let lo = (-first).clamp(0, row.len() as isize) as usize;
        let hi = (in_w as isize - first).clamp(lo as isize, row.len() as isize) as usize;
        row[..lo].fill(0.0);
        row[hi..].fill(0.0);
        if hi > lo {
            row[lo..hi].copy_from_slice(&input[(first + lo as isize) as usize..][..hi - lo]);
        }
    };
    // Columns a step (even, so a stride of 2 starts each step on phase 0).
    const CHUNK: usize = 240;
    let (mut lo, mut hi) = ([0f32; CHUNK], [0f32; CHUNK]);
    for p in 0..pairs {
        let out = &mut dst[p * ph.pair..][..ph.pair];
        for y in (0..pt).chain(pt + in_h..src.rows) {
            ph.zero_row(y, out);
        }
        for iy in 0..in_h {
            for x0 in (0..cols).step_by(CHUNK) {
                let n = CHUNK.min(cols - x0);
                fill(2 * p, iy, x0, &mut lo[..n]);
                let second = 2 * p + 1 < cf;
                if second {
                    fill(2 * p + 1, iy, x0, &mut hi[..n]);
                }
                ph.round_row(&lo[..n], second.then_some(&hi[..n]), iy + pt, x0, out);
            }
        }
    }
    dst
}

impl Direct<'_> {
    /// The convolution of the output channels `channels` (from a multiple of 16) into `y`
    /// (`[channels][positions]`) on AMX tiles: `x` holds the group's [`amx_planes`] and
    /// `w` its [`pack_filters_amx`] filters (`cg` is still the input channels). `band`
    /// holds each band's sums. Panics on a length mismatch or where [`fits_amx`] is
    /// false.
    pub fn run_amx(&self, channels: Range<usize>, y: &mut [f32], band: &mut Vec<f32>) {
        let g = self.g;
        let positions = g.positions();
        assert!(takes(g), "direct amx: a convolution the tiles do not take");
        assert!(channels.start.is_multiple_of(BLOCK), "direct amx: channels start at a block");
        assert_eq!(y.len(), channels.len() * positions, "direct amx: output length");
        assert!(self.src == pair_source(g), "direct amx: the input is the pair planes");
        assert_eq!(self.x.len(), amx_planes_len(self.cg, g), "direct amx: the input planes");
        let ph = Phases::of(g);
        let p = ph.width;
        let chunks = self.cg.div_ceil(2 * PAIRS);
        let [_, kh, kw] = g.kernel;
        let (taps, tile) = (kh * kw, BLOCK * PAIRS);
        let per_block = chunks * taps * tile;
        assert!(self.w.len() >= channels.end.div_ceil(BLOCK) * per_block, "direct amx: packed filters");
        // The steps (chunk of pairs, tap) run in groups of at most `STEPS`, each group's
        // tiles adding to the sums the last one stored.
        let mut offsets = [0usize; STEPS];
        let steps = chunks * taps;
        let [_, out_h, out_w] = g.out;
        // Bands from a multiple of 16 positions where the width allows: a tile's rows
        // then start on 64-byte boundaries for the taps whose offsets are multiples of 16
        // (all of a 1x1 convolution's).
        let band_rows = BAND.div_ceil(p).next_multiple_of(16 / gcd(p, 16)).min(out_h);
        let ldo = (band_rows * p).next_multiple_of(COLS);
        if band.len() < 2 * BLOCK * ldo {
            band.resize(2 * BLOCK * ldo, 0.0);
        }
        let epilogue = Epilogue { bias: self.bias.map_or(Bias::None, Bias::Rows), ..self.epilogue };
        let filters: &[[f32; 16]] = self.w.as_chunks::<16>().0;
        let mut c0 = channels.start;
        while c0 < channels.end {
            let c1 = (c0 + 2 * BLOCK).min(channels.end);
            let first = c0 / BLOCK;
            let block = |i: usize| &filters[(first + i) * per_block / 16..][..per_block / 16];
            let mut oy0 = 0;
            while oy0 < out_h {
                let oy1 = (oy0 + band_rows).min(out_h);
                // The band's positions, from its first row to the last row's last output.
                let q0 = oy0 * p;
                let tiles = ((oy1 - 1) * p + out_w - q0).div_ceil(COLS);
                let mut s0 = 0;
                while s0 < steps {
                    let s1 = (s0 + STEPS).min(steps);
                    for (s, o) in (s0..s1).zip(offsets.iter_mut()) {
                        let (ch, t) = (s / taps, s % taps);
                        let (ky, kx) = (t / kw, t % kw);
                        *o = ch * PAIRS * ph.pair + ph.at(ky * g.dilation[1], kx * g.dilation[2]);
                    }
                    let (offs, more) = (&offsets[..s1 - s0], s0 > 0);
                    let step_filters = |i: usize| &block(i)[16 * s0..16 * s1];
                    if c1 - c0 > BLOCK {
                        let f = [step_filters(0), step_filters(1)];
                        amx::bf16_conv::<2>(f, self.x, ph.pair, offs, (q0, tiles), band, (ldo, 0), more);
                    } else {
                        amx::bf16_conv::<1>(
                            [step_filters(0)],
                            self.x,
                            ph.pair,
                            offs,
                            (q0, tiles),
                            band,
                            (ldo, 0),
                            more,
                        );
                    }
                    s0 = s1;
                }
                for c in c0..c1 {
                    let sums = &band[(c - c0) * ldo..][..ldo];
                    let out = &mut y[(c - channels.start) * positions..][..positions];
                    for oy in oy0..oy1 {
                        out[oy * out_w..][..out_w].copy_from_slice(&sums[(oy - oy0) * p..][..out_w]);
                    }
                }
                // The epilogue on the band's outputs while they are in cache.
                let at = (c0 - channels.start) * positions + oy0 * out_w;
                epilogue.apply(Level::Avx512, &mut y[at..], positions, positions, c0..c1, oy0 * out_w..oy1 * out_w);
                oy0 = oy1;
            }
            c0 = c1;
        }
    }
}

/// The greatest common divisor of `a` and `b`.
fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
#[path = "amx_tests.rs"]
mod tests;
