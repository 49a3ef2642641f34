//! A convolution on a channels-last (`[positions][channels]`) 8-bit image as one product
//! whose rows are the output positions: A is the image's im2col, made a block of rows at
//! a time into a scratch that stays in L2 (each row the window's taps, one after the
//! other, each tap the input position's channels as they are stored: one copy of `c`
//! bytes, or the zero point in the padding), and B the weights, packed once (depth
//! `tap · cq + channel`, `cq` the channels rounded up to a quad, zero past them). The
//! product's rows are then the channels-last output: a tile stores 32 output channels of
//! 14 positions, the requantization's scale and bias per column.
//!
//! On the NCHW layout (`implicit`) the input's planes go into phase planes of channel
//! quads and each 32-position panel of B is copied out of them before the tiles use it;
//! here the tiles read the weights' panels as packed and A once a block.
//!
//! A uint8 image of whole channel quads whose weights' zero points are 0 (as ORT's
//! quantizer writes them) needs no im2col at all: [`conv_taps`] has each tile read its
//! rows' taps in place, through offsets made once a window ([`ConvTaps`]; the padding
//! reads a row of the zero point). Kernel only, one thread, AMD Zen 4, us (im2col / taps
//! / the phase planes with their pack): 64 -> 64 3x3 on 56x56 725 / 548 / 648, 128 ->
//! 128 on 28x28 588 / 521 / 624, 256 -> 256 on 14x14 545 / 507 / 609, 512 -> 512 on 7x7
//! 532 / 573 / 680 (there the im2col's blocks, reused by 16 panels, win). Where the
//! plan does not keep the image and the output channels last between convolutions
//! (`passes::channels_last_int8`), [`to_channels_last`] and [`from_channels_last`]
//! transpose them (0.09 ns a byte on AVX-512).

use std::ops::Range;

use super::packed::{qgemm_rows, Place, QOut, QPackedA, QPackedB, CHUNK, MR, Q8};
use crate::conv::Window3d;

/// The im2col rows a block holds at most (whole strips), so that the block (rows × depth
/// bytes) stays within about 512 KiB while every panel of B passes over it.
const BLOCK_BYTES: usize = 512 << 10;

impl QPackedB {
    /// Packs convolution weights (`w`: `m` output channels of `c` channels × `taps`, zero
    /// points `zw`: one, or one per output channel) as a B of `m` columns in the depth
    /// order of [`QPackedA::pack_nhwc_rows`].
    pub fn pack_nhwc_weights<T: Q8>(&mut self, w: &[T], m: usize, c: usize, taps: usize, zw: &[i32]) {
        assert!(w.len() >= m * c * taps, "qgemm: the weights are shorter than their shape");
        let cq = c.next_multiple_of(4);
        self.pack_rows::<T>(cq * taps, m, zw, |d, dst| {
            let (t, ch) = (d / cq, d % cq);
            if ch < c {
                for (o, v) in dst.iter_mut().enumerate() {
                    *v = w[(o * c + ch) * taps + t].signed();
                }
            } else {
                // Zero bytes in both operands: nothing in the sums.
                dst.fill(0);
            }
        });
        self.real_k = c * taps;
    }
}

impl QPackedA {
    /// Packs rows `rows` (output positions, in the order of `g.out`) of the im2col of a
    /// channels-last image `x` (`g.input` positions of `c` channels, zero point `zx`) as
    /// an A in the depth order of [`QPackedB::pack_nhwc_weights`]. Taps in the padding
    /// read the zero point (a difference of 0). The rows' sums are made only when
    /// `sums` (the weights have a zero point other than 0).
    #[allow(clippy::too_many_arguments)]
    pub fn pack_nhwc_rows<T: Q8>(&mut self, x: &[T], c: usize, g: &Window3d, zx: i32, rows: Range<usize>, sums: bool) {
        let positions: usize = g.input.iter().product();
        assert!(x.len() >= positions * c, "qgemm: the image is shorter than its shape");
        assert!(rows.end <= g.positions(), "qgemm: rows past the output");
        let taps: usize = g.kernel.iter().product();
        let cq = c.next_multiple_of(4);
        let (m, k) = (rows.len(), cq * taps);
        self.m = m;
        self.k = k;
        self.real_k = c * taps;
        self.zero.clear();
        let za = zx + T::TO_UNSIGNED;
        self.zero.push(za);
        let chunks = k.div_ceil(4 * CHUNK);
        let strip_len = chunks * MR;
        self.units.resize_any(m.div_ceil(MR) * strip_len);
        self.row_sums.clear();
        self.row_sums.resize(m, 0);
        let (units, row_sums) = (&mut self.units, &mut self.row_sums);
        crate::arch::widest(
            #[inline(always)]
            || {
                let [_, o1, o2] = g.out;
                let words = cq / 4;
                for (i, p) in rows.clone().enumerate() {
                    let at = [p / (o1 * o2), p / o2 % o1, p % o2];
                    let (strip, r) = (i / MR, i % MR);
                    let row = strip * strip_len + r;
                    // Quad `q` of the row's depth: unit `row + (q / 16) · MR`, word `q % 16`
                    // (every tap starts on a quad: `cq` is a multiple of 4).
                    each_tap(g, at, |t, src| {
                        let q0 = t * words;
                        match src {
                            Some(s) if c.is_multiple_of(4 * CHUNK) => {
                                // Whole units, one 64-byte move each.
                                let src = x[s * c..s * c + c].as_chunks::<64>().0;
                                for (u, bytes) in src.iter().enumerate() {
                                    units[row + (q0 / CHUNK + u) * MR] = std::array::from_fn(|j| {
                                        i32::from_le_bytes(std::array::from_fn(|l| bytes[4 * j + l].unsigned()))
                                    });
                                }
                            }
                            Some(s) => {
                                let src = &x[s * c..s * c + c];
                                for j in 0..words {
                                    let byte = |l: usize| src.get(4 * j + l).map_or(0, |v| v.unsigned());
                                    let q = q0 + j;
                                    units[row + (q / CHUNK) * MR][q % CHUNK] =
                                        i32::from_le_bytes([byte(0), byte(1), byte(2), byte(3)]);
                                }
                            }
                            None => {
                                for j in 0..words {
                                    let q = q0 + j;
                                    let byte = |l: usize| if 4 * j + l < c { za as u8 } else { 0 };
                                    units[row + (q / CHUNK) * MR][q % CHUNK] =
                                        i32::from_le_bytes([byte(0), byte(1), byte(2), byte(3)]);
                                }
                            }
                        }
                    });
                    // Depths past k: zero (the AMX tiles read whole chunks).
                    for q in taps * words..chunks * CHUNK {
                        units[row + (q / CHUNK) * MR][q % CHUNK] = 0;
                    }
                    if sums {
                        row_sums[i] = (0..chunks)
                            .flat_map(|u| units[row + u * MR].iter())
                            .map(|w| w.to_le_bytes().iter().map(|&b| b as i32).sum::<i32>())
                            .sum();
                    }
                }
                // Rows past m in the last strip: zero (the AMX tiles read whole strips).
                if !m.is_multiple_of(MR) {
                    let base = (m / MR) * strip_len;
                    for u in 0..chunks {
                        for r in m % MR..MR {
                            units[base + u * MR + r] = [0; 16];
                        }
                    }
                }
            },
        );
    }
}

/// `out` (the positions `rows` of a channels-last output, `b.cols()` channels each, from
/// its start) = the convolution of the channels-last image `x` (`c` channels, zero point
/// `zx`) by the weights `b` ([`QPackedB::pack_nhwc_weights`]), requantized per column
/// (output channel) where `out` says. `scratch` holds the im2col blocks.
#[allow(clippy::too_many_arguments)]
pub fn conv_nhwc<T: Q8>(
    x: &[T],
    c: usize,
    g: &Window3d,
    zx: i32,
    b: &QPackedB,
    rows: Range<usize>,
    out: QOut<'_>,
    scratch: &mut QPackedA,
) {
    let block = (BLOCK_BYTES / b.k.max(1) / MR).max(1) * MR;
    conv_nhwc_blocks(x, c, g, zx, b, rows, out, scratch, block)
}

/// [`conv_nhwc`] with im2col blocks of `block` rows (a multiple of [`MR`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_nhwc_blocks<T: Q8>(
    x: &[T],
    c: usize,
    g: &Window3d,
    zx: i32,
    b: &QPackedB,
    rows: Range<usize>,
    mut out: QOut<'_>,
    scratch: &mut QPackedA,
    block: usize,
) {
    let n = b.cols();
    assert!(block.is_multiple_of(MR) && block > 0, "qgemm: blocks of whole strips");
    assert!(out.len() >= rows.len() * n, "qgemm: the output is shorter than its rows");
    // (The row sums enter only through the weights' zero points, as shifted.)
    let sums = b.zero.iter().any(|&z| z != 0);
    let mut r0 = rows.start;
    while r0 < rows.end {
        let r1 = (r0 + block).min(rows.end);
        scratch.pack_nhwc_rows(x, c, g, zx, r0..r1, sums);
        let at = (r0 - rows.start) * n;
        let part = match &mut out {
            QOut::I32(y) => QOut::I32(&mut y[at..]),
            QOut::U8(y, rq) => QOut::U8(&mut y[at..], *rq),
            QOut::I8(y, rq) => QOut::I8(&mut y[at..], *rq),
        };
        qgemm_rows(scratch, 0..r1 - r0, b, 0..n, part, n);
        r0 = r1;
    }
}

/// Where each tap of each output position of a channels-last convolution reads its input:
/// for every strip of [`MR`] positions and every tap, the byte offset of the input
/// position's channels in the image, or [`ConvTaps::PAD`] where the tap lies in the
/// padding (or the row is past the last position). It depends on the window and the
/// channel count only, so a convolution makes it once and keeps it while they stay.
/// Every offset it holds is at least `channels` bytes before the end of an image of
/// [`ConvTaps::image_len`] bytes (the tiles still check each row's reach once a tap).
#[derive(Debug, Default, Clone)]
pub struct ConvTaps {
    window: Option<(Window3d, usize)>,
    offsets: Vec<[u32; MR]>,
    taps: usize,
    image_len: usize,
}

impl ConvTaps {
    /// The offset of a tap in the padding.
    pub(crate) const PAD: u32 = u32::MAX;

    pub fn new() -> ConvTaps {
        ConvTaps::default()
    }

    /// Whether a convolution of `channels` channels on `g` reads through taps: channels in
    /// whole quads, and an image whose offsets fit 32 bits.
    pub fn fits(g: &Window3d, channels: usize) -> bool {
        channels > 0 && channels.is_multiple_of(4) && g.plane().saturating_mul(channels) < Self::PAD as usize
    }

    /// Makes the offsets for `channels` channels on `g` (unless they are already made).
    pub fn prepare(&mut self, g: &Window3d, channels: usize) {
        assert!(Self::fits(g, channels), "qgemm: taps for a window they do not fit");
        if self.window == Some((*g, channels)) {
            return;
        }
        let taps: usize = g.kernel.iter().product();
        let (p, [_, o1, o2]) = (g.positions(), g.out);
        let strips = p.div_ceil(MR);
        self.offsets.clear();
        self.offsets.resize(strips * taps, [Self::PAD; MR]);
        for pos in 0..p {
            let at = [pos / (o1 * o2), pos / o2 % o1, pos % o2];
            let (strip, r) = (pos / MR, pos % MR);
            each_tap(g, at, |t, source| {
                if let Some(s) = source {
                    self.offsets[strip * taps + t][r] = (s * channels) as u32;
                }
            });
        }
        self.taps = taps;
        self.image_len = g.plane() * channels;
        self.window = Some((*g, channels));
    }

    pub(crate) fn taps(&self) -> usize {
        self.taps
    }

    /// Quads of channels a tap reads.
    pub(crate) fn quads(&self) -> usize {
        self.window.map_or(0, |(_, c)| c / 4)
    }

    pub(crate) fn image_len(&self) -> usize {
        self.image_len
    }

    /// Strip `s`'s offsets, tap by tap.
    pub(crate) fn strip(&self, s: usize) -> &[[u32; MR]] {
        &self.offsets[s * self.taps..(s + 1) * self.taps]
    }
}

/// `out` (the positions `rows` of a channels-last output, `b.cols()` channels each, from
/// its start; `rows.start` a multiple of [`MR`]) = the convolution of the channels-last
/// uint8 image `x` (zero point `zx`) by `b` ([`QPackedB::pack_nhwc_weights`], its zero
/// points 0) through `taps` (prepared for the window and `x`'s channels): as
/// [`conv_nhwc`], with no im2col (each tile reads its rows' taps in place). Needs AVX-512
/// VNNI ([`super::vnni_supported`]). `scratch` holds the zero point's row and the rows'
/// parts for the tiles' stores.
pub fn conv_taps(
    x: &[u8],
    zx: i32,
    taps: &ConvTaps,
    b: &QPackedB,
    rows: Range<usize>,
    mut out: QOut<'_>,
    scratch: &mut QPackedA,
) {
    let (g, c) = taps.window.expect("qgemm: taps prepared for a window");
    assert!(b.zero.iter().all(|&z| z == 0), "qgemm: taps read weights with zero points of 0");
    let n = b.cols();
    if rows.is_empty() || n == 0 {
        return;
    }
    assert!(rows.start.is_multiple_of(MR) && rows.end <= g.positions(), "qgemm: rows off a strip or past the output");
    assert!(out.len() >= rows.len() * n, "qgemm: the output is shorter than its rows");
    let taps_count: usize = g.kernel.iter().product();
    let mut zrow = std::mem::take(&mut scratch.reorder);
    zrow.clear();
    zrow.resize(c, zx as u8);
    scratch.rows_only(rows.end, (c * taps_count, c * taps_count), zx);
    crate::arch::qconv_taps(x, &zrow, taps, scratch, rows, b, &mut out, Place { ldc: n, kept: None });
    scratch.reorder = zrow;
}

/// Calls `f(t, source)` for each tap `t` of output position `at` (its coordinates on
/// `g.out`), in the order of the window's taps: `source` is the input position the tap
/// reads (its index in `g.input`'s positions), or `None` in the padding.
#[inline(always)]
fn each_tap(g: &Window3d, at: [usize; 3], mut f: impl FnMut(usize, Option<usize>)) {
    let mut t = 0;
    for t0 in 0..g.kernel[0] {
        let s0 = g.source(0, at[0], t0);
        for t1 in 0..g.kernel[1] {
            let s1 = s0.and_then(|s| Some(s * g.input[1] + g.source(1, at[1], t1)?));
            for t2 in 0..g.kernel[2] {
                f(t, s1.and_then(|s| Some(s * g.input[2] + g.source(2, at[2], t2)?)));
                t += 1;
            }
        }
    }
}

/// `y` (`plane` positions of `channels`) = `x` (`channels` planes of `plane`): a
/// channels-first image made channels last.
pub fn to_channels_last<T: Q8>(x: &[T], channels: usize, plane: usize, y: &mut [T]) {
    transpose_bytes(x, (channels, plane), y);
}

/// `y` (`channels` planes of `plane`) = `x` (`plane` positions of `channels`).
pub fn from_channels_last<T: Q8>(x: &[T], channels: usize, plane: usize, y: &mut [T]) {
    transpose_bytes(x, (plane, channels), y);
}

/// `y` (`cols` × `rows`) = the transpose of `x` (`rows` × `cols`) of bytes: on AVX-512
/// eight rows of 64 bytes a step (`qgemm::x86::transpose_bytes_avx512`: 200 KB in 18 us,
/// 0.09 ns a byte), elsewhere and at its edges blocks of 8 x 8 as eight u64 transposed by
/// three rounds of masked swaps (0.27 ns a byte, where a byte at a time took 0.43), the
/// last edges a byte at a time.
fn transpose_bytes<T: Q8>(x: &[T], (rows, cols): (usize, usize), y: &mut [T]) {
    assert!(x.len() >= rows * cols && y.len() >= rows * cols, "qgemm: a transpose's operands are short");
    // The AVX-512 build's part (rows in eights, columns in 64s), then the rest here.
    let (_, done_cols) = crate::arch::transpose_bytes(x, (rows, cols), y);
    /// Rows `i` and `i + step` (`step` = `shift / 8`) of each pair swap their off-diagonal
    /// blocks of `step` bytes.
    #[inline(always)]
    fn swap(v: &mut [u64; 8], shift: u32, mask: u64) {
        let step = shift as usize / 8;
        for i in 0..8 {
            if i & step == 0 {
                let t = ((v[i] >> shift) ^ v[i + step]) & mask;
                v[i + step] ^= t;
                v[i] ^= t << shift;
            }
        }
    }
    let (r8, c8) = (rows / 8 * 8, cols / 8 * 8);
    crate::arch::widest(
        #[inline(always)]
        || {
            for r0 in (0..r8).step_by(8) {
                for c0 in (done_cols..c8).step_by(8) {
                    let mut v: [u64; 8] = std::array::from_fn(|i| {
                        let at = (r0 + i) * cols + c0;
                        T::load8(x[at..at + 8].try_into().expect("8 bytes"))
                    });
                    swap(&mut v, 8, 0x00ff_00ff_00ff_00ff);
                    swap(&mut v, 16, 0x0000_ffff_0000_ffff);
                    swap(&mut v, 32, 0xffff_ffff);
                    for (j, &w) in v.iter().enumerate() {
                        let at = (c0 + j) * rows + r0;
                        T::store8(w, (&mut y[at..at + 8]).try_into().expect("8 bytes"));
                    }
                }
                for c in c8..cols {
                    for r in r0..r0 + 8 {
                        y[c * rows + r] = x[r * cols + c];
                    }
                }
            }
            for r in r8..rows {
                for c in 0..cols {
                    y[c * rows + r] = x[r * cols + c];
                }
            }
        },
    );
}
