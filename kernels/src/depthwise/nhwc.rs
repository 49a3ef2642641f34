//! The AVX-512 depthwise convolution of 3x3 and 5x5 windows on small planes (and 5x5 on
//! larger ones), channels last: 16 channels a vector, so each step of a window is one
//! multiply-add for 16 outputs.
//!
//! Laid out as NCHW, a 7x7 plane fills 49 of 64 lanes, each tap is a masked load whose
//! lanes come from a table, and a plane's vector sums its 25 taps in one chain of
//! dependent multiply-adds: 2.1-2.8x ORT's time on EfficientNet-B0's 5x5 layers, and the
//! stride-2 ones, on the row path, 2.4-3.8x (AMD Zen 5, one thread). Here a task's
//! channels (whole blocks of 16, one image) are transposed into a zero-padded
//! `[rows, columns, channels]` copy, each block runs over its padded plane a tile of up
//! to 8 outputs of a row at a time (independent chains, in registers), and the
//! `[positions, channels]` result is transposed back into the planes. Every output sums
//! all its taps in (h, w) order from 0, the padding ones as `w * 0`, then adds the bias,
//! as the same-size path does.

use std::arch::x86_64::*;
use std::ops::Range;

use crate::arch::mem::{load16, store16, Reach16};
use crate::conv::Window3d;
use crate::gemm::Epilogue;
use crate::movement::x86::transpose_avx512;

/// Channels a vector (a block).
const LANES: usize = 16;
/// The largest plane taken (inputs and outputs): past it the two transposes cost more
/// than the row paths lose. One thread, Zen 4, us, the path before -> this one: 3x3 on 14x14
/// and 28x28 rows the row paths keep (576x14x14 49 -> 53, 144x28x28 34 -> 54, 144x56x56
/// 119 -> 216); 5x5 at stride 1 144x56x56 413 -> 344 (the rows path), 32x112x112 301 ->
/// 322; at stride 2 (the 2-D path) 144x56x56 225 -> 151, 32x112x112 182 -> 141.
fn max_plane(g: &Window3d) -> usize {
    match (g.kernel[2], g.stride[1].max(g.stride[2])) {
        (5, 1) => 56 * 56,
        (5, _) => 112 * 112,
        _ => 28 * 28,
    }
}

/// The padded plane of a window: rows, columns, and where the input starts in them.
#[derive(Clone, Copy)]
struct Padded {
    hp: usize,
    wp: usize,
    top: usize,
    left: usize,
}

impl Padded {
    fn of(g: &Window3d) -> Padded {
        let span = |a: usize| (g.out[a] - 1) * g.stride[a] + (g.kernel[a] - 1) * g.dilation[a] + 1;
        let (top, left) = (g.pad_begin[1], g.pad_begin[2]);
        Padded { hp: span(1).max(top + g.input[1]), wp: span(2).max(left + g.input[2]), top, left }
    }
}

/// Whether a window takes this path: one depth plane, 3x3 or 5x5, a column stride of 1 or
/// 2 and no dilation along rows, a plane of at most [`max_plane`] inputs and outputs.
pub(crate) fn fits(g: &Window3d) -> bool {
    let two_d = g.input[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1 && g.pad_begin[0] == 0;
    let window = matches!((g.kernel[1], g.kernel[2]), (3, 3) | (5, 5));
    // The tiles' column stride is a constant of their build, and they read a row's taps
    // from consecutive columns.
    let strides = matches!(g.stride[2], 1 | 2) && g.dilation[2] == 1;
    two_d
        && window
        && strides
        && g.positions() > 0
        && g.plane() > 0
        && g.plane() <= max_plane(g)
        && g.positions() <= max_plane(g)
}

/// See [`super::depthwise_planes`]. Returns false, writing nothing, unless the window
/// [`fits`] and `planes` is whole blocks of 16 channels of one image each.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn channels_last(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    planes: Range<usize>,
    channels: usize,
    g: &Window3d,
    y: &mut [f32],
    epilogue: &Epilogue<'_>,
    scratch: &mut Vec<f32>,
) -> bool {
    if !fits(g) || channels == 0 || !channels.is_multiple_of(LANES) || !planes.start.is_multiple_of(LANES) {
        return false;
    }
    if !planes.len().is_multiple_of(LANES) {
        return false;
    }
    let (plane, positions) = (g.plane(), g.positions());
    let pad = Padded::of(g);
    let taps = g.kernel[1] * g.kernel[2];
    let (xp_len, yt_len) = (pad.hp * pad.wp * LANES, positions.max(plane) * LANES);
    let (xp, yt) = parts(scratch, xp_len, yt_len);
    // The borders once: each block writes only the interior.
    zero_borders(g, pad, xp);
    let first = planes.start;
    for p in planes.step_by(LANES) {
        let c = p % channels;
        let at = p - first;
        let xs = &x[at * plane..][..LANES * plane];
        let ys = &mut y[at * positions..][..LANES * positions];
        // The planes transposed into `yt` (free until the block's output), then each
        // input row into its padded row.
        transpose_avx512(xs, LANES, plane, &mut yt[..plane * LANES]);
        let (w_in, Padded { wp, top, left, .. }) = (g.input[2], pad);
        for (r, row) in yt[..plane * LANES].chunks_exact(w_in * LANES).enumerate() {
            xp[((top + r) * wp + left) * LANES..][..w_in * LANES].copy_from_slice(row);
        }
        let wb = &w[c * taps..][..LANES * taps];
        let bias = block_bias(bias, c);
        block(xp, g, pad, wb, bias, yt);
        transpose_avx512(&yt[..positions * LANES], positions, LANES, ys);
        epilogue.apply_rows(ys, positions, p..p + LANES);
    }
    true
}

/// Whether a window takes the channels-last paths whose input is stored channels last
/// ([`from_nhwc`], [`rows_nhwc`]): [`fits`]'s windows on planes of any size.
pub(crate) fn fits_nhwc(g: &Window3d) -> bool {
    let two_d = g.input[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1 && g.pad_begin[0] == 0;
    let window = matches!((g.kernel[1], g.kernel[2]), (3, 3) | (5, 5));
    let strides = matches!(g.stride[2], 1 | 2) && g.dilation[2] == 1;
    two_d && window && strides && g.positions() > 0 && g.plane() > 0
}

/// Padded rows `pr` of block `c0..c0 + 16` of one image's channels-last input `x` (`[h, w,
/// channels]`) into `xp` (`pr.len()` rows of `wp` vectors): padded row `r` is input row
/// `r - top`, its columns from `left`; zero where the padding is.
fn fill_rows(x: &[f32], g: &Window3d, pad: Padded, channels: usize, c0: usize, pr: Range<usize>, xp: &mut [f32]) {
    let (h, w) = (g.input[1], g.input[2]);
    let row = pad.wp * LANES;
    for (r, dst) in pr.zip(xp.chunks_exact_mut(row)) {
        let Some(iy) = r.checked_sub(pad.top).filter(|&iy| iy < h) else {
            dst.fill(0.0);
            continue;
        };
        let (head, rest) = dst.split_at_mut(pad.left * LANES);
        let (mid, tail) = rest.split_at_mut(w * LANES);
        head.fill(0.0);
        tail.fill(0.0);
        let src = &x[iy * w * channels..][..w * channels];
        for (d, s) in mid.chunks_exact_mut(LANES).zip(src.chunks_exact(channels)) {
            d.copy_from_slice(&s[c0..c0 + LANES]);
        }
    }
}

/// A depthwise convolution of one image whose input `x` is stored channels last (`[h, w,
/// channels]`), channels `blocks` (whole blocks of 16) into `y` (their planes, `[16 ·
/// blocks.len(), positions]`), each plane's epilogue rows counted from `row0` (the
/// image's first channel's). The same sums as [`channels_last`], each block's padded
/// plane gathered from the channels-last rows instead of transposed from the planes.
/// Returns false, writing nothing, unless the window [`fits_nhwc`] and the channels are
/// whole blocks.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn from_nhwc(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    channels: usize,
    blocks: Range<usize>,
    g: &Window3d,
    y: &mut [f32],
    (epilogue, row0): (&Epilogue<'_>, usize),
    scratch: &mut Vec<f32>,
) -> bool {
    if !fits_nhwc(g) || channels == 0 || !channels.is_multiple_of(LANES) || blocks.end * LANES > channels {
        return false;
    }
    let positions = g.positions();
    assert_eq!(x.len(), g.plane() * channels, "depthwise: a channels-last image");
    assert_eq!(y.len(), blocks.len() * LANES * positions, "depthwise: the blocks' planes");
    let pad = Padded::of(g);
    let taps = g.kernel[1] * g.kernel[2];
    let (xp_len, yt_len) = (pad.hp * pad.wp * LANES, positions * LANES);
    let (xp, yt) = parts(scratch, xp_len, yt_len);
    for (b, ys) in blocks.zip(y.chunks_exact_mut(LANES * positions)) {
        let c = b * LANES;
        fill_rows(x, g, pad, channels, c, 0..pad.hp, xp);
        let wb = &w[c * taps..][..LANES * taps];
        let bias = block_bias(bias, c);
        block(xp, g, pad, wb, bias, yt);
        transpose_avx512(yt, positions, LANES, ys);
        epilogue.apply_rows(ys, positions, row0 + c..row0 + c + LANES);
    }
    true
}

/// Floats of a strip's padded rows [`rows_nhwc`] aims at (64 KiB).
const STRIP_FLOATS: usize = 1 << 14;

/// A depthwise convolution of one image with its input `x` and output both stored
/// channels last (`[h, w, channels]`, `[out_h, out_w, channels]`): output rows `rows` of
/// every channel into `y` (those rows, `[rows.len() · out_w, channels]`), then `act`.
/// A strip of rows at a time, block by block: the block's padded input rows gathered,
/// its outputs computed as [`channels_last`] computes them (the same sums), and stored
/// into the rows 16 channels a position. Returns false, writing nothing, unless the
/// window [`fits_nhwc`] and the channels are whole blocks.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn rows_nhwc(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    channels: usize,
    g: &Window3d,
    rows: Range<usize>,
    y: &mut [f32],
    act: Option<crate::gemm::Activation>,
    scratch: &mut Vec<f32>,
) -> bool {
    if !fits_nhwc(g) || channels == 0 || !channels.is_multiple_of(LANES) || rows.end > g.out[1] {
        return false;
    }
    let ow = g.out[2];
    assert_eq!(x.len(), g.plane() * channels, "depthwise: a channels-last image");
    assert_eq!(y.len(), rows.len() * ow * channels, "depthwise: the rows' outputs");
    let pad = Padded::of(g);
    let taps = g.kernel[1] * g.kernel[2];
    let (sy, reach) = (g.stride[1], (g.kernel[1] - 1) * g.dilation[1] + 1);
    // Output rows a strip: its padded input rows within STRIP_FLOATS, at least one.
    let fit = STRIP_FLOATS / (pad.wp * LANES);
    let strip = (fit.saturating_sub(reach) / sy + 1).max(1);
    let (xp_len, yt_len) = ((((strip - 1) * sy + reach) * pad.wp * LANES).max(LANES), strip * ow * LANES);
    let (xp, yt) = parts(scratch, xp_len, yt_len);
    let mut oy = rows.start;
    while oy < rows.end {
        let n = strip.min(rows.end - oy);
        let pr = oy * sy..(oy + n - 1) * sy + reach;
        // The strip as a window of its own: its padded rows from `xp`'s first.
        let gs = Window3d { out: [1, n, ow], ..*g };
        let ps = Padded { hp: pr.len(), top: 0, ..pad };
        let (xs, ys) = (&mut xp[..pr.len() * pad.wp * LANES], &mut yt[..n * ow * LANES]);
        let out = &mut y[(oy - rows.start) * ow * channels..][..n * ow * channels];
        for c in (0..channels).step_by(LANES) {
            fill_rows(x, g, pad, channels, c, pr.clone(), xs);
            let wb = &w[c * taps..][..LANES * taps];
            let bias = block_bias(bias, c);
            block(xs, &gs, ps, wb, bias, ys);
            if let Some(act) = &act {
                act.apply(crate::arch::Level::Avx512, ys);
            }
            for (v, dst) in ys.chunks_exact(LANES).zip(out.chunks_exact_mut(channels)) {
                dst[c..c + LANES].copy_from_slice(v);
            }
        }
        oy += n;
    }
    true
}

/// The padded input block (`xp_len` floats) and the block's outputs (`yt_len`) in
/// `scratch`, grown to them: both from a cache line (whole vectors of 16 floats from
/// there), so that no load or store of a vector spans two lines.
fn parts(scratch: &mut Vec<f32>, xp_len: usize, yt_len: usize) -> (&mut [f32], &mut [f32]) {
    if scratch.len() < xp_len + yt_len + LANES {
        scratch.resize(xp_len + yt_len + LANES, 0.0);
    }
    let skip = scratch.as_ptr().align_offset(64).min(LANES);
    let (xp, yt) = scratch[skip..].split_at_mut(xp_len);
    (xp, &mut yt[..yt_len])
}

/// The biases of channels `c..c + 16` as a vector (zero without a bias).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn block_bias(bias: Option<&[f32]>, c: usize) -> __m512 {
    bias.map_or(_mm512_setzero_ps(), |bs| load16(bs[c..][..LANES].try_into().expect("16 floats")))
}

/// Zeroes the padding of the `[hp, wp, 16]` plane `xp`.
fn zero_borders(g: &Window3d, pad: Padded, xp: &mut [f32]) {
    let Padded { hp, wp, top, left } = pad;
    let (h, w) = (g.input[1], g.input[2]);
    let row = wp * LANES;
    xp[..top * row].fill(0.0);
    xp[(top + h) * row..hp * row].fill(0.0);
    for r in top..top + h {
        xp[r * row..][..left * LANES].fill(0.0);
        xp[r * row + (left + w) * LANES..(r + 1) * row].fill(0.0);
    }
}

/// Output columns a tile spans at most: its sums, the tap row's filters and one input
/// stay in registers (at most 14 of 32). Tiles of 16 measured slower (the compiler kept
/// their sums in memory): 672x14x14 5x5 102 -> 197 us.
const MAX_COLS: usize = 8;

/// The strides of one block's walk, in floats: of the padded plane `xp` from one output
/// row's first input to the next's and from one row of taps to the next; and the output's
/// width.
#[derive(Clone, Copy)]
struct Steps {
    kh: usize,
    row: usize,
    tap_row: usize,
    ow: usize,
}

/// One block of 16 channels (`xp`: `[hp, wp, 16]`) over the whole output, a tile of up to
/// [`MAX_COLS`] outputs of a row at a time, into `yt` (`[positions, 16]`). A tile's sums
/// stay in registers while it walks its rows of taps; for each, the row's filters are
/// loaded once and each input vector under the tile once, then multiplied into every
/// output whose window holds it. (Loading both for every multiply-add, with 6 outputs
/// and the 25 filters spilled, ran at 20 GMAC/s on 1152 channels of 7x7 5x5 on Zen 4.)
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn block(xp: &[f32], g: &Window3d, pad: Padded, wb: &[f32], bias: __m512, yt: &mut [f32]) {
    let (kh, kw) = (g.kernel[1], g.kernel[2]);
    let taps = kh * kw;
    // The block's filters, tap by tap, 16 channels a vector: filter c's tap t is wb[c * taps + t].
    let mut wv = [_mm512_setzero_ps(); 25];
    for (t, v) in wv.iter_mut().enumerate().take(taps) {
        let lanes: [f32; LANES] = std::array::from_fn(|c| wb[c * taps + t]);
        *v = load16(&lanes);
    }
    let (oh, ow) = (g.out[1], g.out[2]);
    let steps = Steps { kh, row: g.stride[1] * pad.wp * LANES, tap_row: g.dilation[1] * pad.wp * LANES, ow };
    // Columns in even chunks of at most MAX_COLS (7 for rows of 7, 14 and 28).
    let width = ow.div_ceil(ow.div_ceil(MAX_COLS));
    let wv = &wv[..taps];
    for oy in 0..oh {
        let mut ox = 0;
        while ox < ow {
            let c = width.min(ow - ox);
            match (kw, g.stride[2]) {
                (3, 1) => tile_cols::<3, 1>(c, xp, &steps, wv, bias, oy, ox, yt),
                (3, _) => tile_cols::<3, 2>(c, xp, &steps, wv, bias, oy, ox, yt),
                (_, 1) => tile_cols::<5, 1>(c, xp, &steps, wv, bias, oy, ox, yt),
                (_, _) => tile_cols::<5, 2>(c, xp, &steps, wv, bias, oy, ox, yt),
            }
            ox += c;
        }
    }
}

/// [`tile`] of `c` (1 to [`MAX_COLS`]) columns.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[allow(clippy::too_many_arguments)]
fn tile_cols<const KW: usize, const S: usize>(
    c: usize,
    xp: &[f32],
    steps: &Steps,
    wv: &[__m512],
    bias: __m512,
    oy: usize,
    ox: usize,
    yt: &mut [f32],
) {
    macro_rules! widths {
        ($($n:literal)*) => {
            match c {
                $($n => tile::<KW, S, $n>(xp, steps, wv, bias, oy, ox, yt),)*
                _ => tile::<KW, S, MAX_COLS>(xp, steps, wv, bias, oy, ox, yt),
            }
        };
    }
    widths!(1 2 3 4 5 6 7)
}

/// Output row `oy`, columns `ox..ox + C` (column stride `S`, windows `KW` wide, undilated
/// along the row) of one block: `C` chains of multiply-adds, each over its taps in (h, w)
/// order from 0, then the bias. Along a row of taps, input vector `i` under the tile is
/// tap `kx` of output `j` where `i = S j + kx`: taken in order of `i`, each output's taps
/// come in order of `kx`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn tile<const KW: usize, const S: usize, const C: usize>(
    xp: &[f32],
    steps: &Steps,
    wv: &[__m512],
    bias: __m512,
    oy: usize,
    ox: usize,
    yt: &mut [f32],
) {
    let st = *steps;
    assert!(wv.len() == st.kh * KW);
    let first = oy * st.row + ox * S * LANES;
    // Input vectors under a tile's row of taps.
    let span = S * (C - 1) + KW;
    let mut acc = [_mm512_setzero_ps(); C];
    for ky in 0..st.kh {
        let w: [__m512; KW] = std::array::from_fn(|kx| wv[ky * KW + kx]);
        let run =
            Reach16::new(xp, first + ky * st.tap_row, (span - 1) * LANES).expect("the padded plane holds every tap");
        // Written out (the compiler left the loop over i rolled for some widths, and
        // the sums in memory).
        macro_rules! columns {
            ($($i:literal)*) => {$(
                if $i < span {
                    let v = run.load($i * LANES);
                    for (kx, &w) in w.iter().enumerate() {
                        if $i >= kx && ($i - kx) % S == 0 && ($i - kx) / S < C {
                            let j = ($i - kx) / S;
                            acc[j] = _mm512_fmadd_ps(v, w, acc[j]);
                        }
                    }
                }
            )*};
        }
        columns!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18);
    }
    let at = (oy * st.ow + ox) * LANES;
    for (j, acc) in acc.iter().enumerate() {
        store16((&mut yt[at + j * LANES..][..LANES]).try_into().expect("16 floats"), _mm512_add_ps(*acc, bias));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::Level;
    use crate::depthwise::depthwise_2d;

    /// The channels-last kernel gives the bits of the 2-D path (padded phase planes, fused
    /// multiply-adds) on every window it takes: both strides along each axis, dilation
    /// down the columns, no, "same", full and asymmetric padding, widths of one tile
    /// (7), of two unequal tiles (13) and of four (28), and two blocks of 16 channels a
    /// batch of two images.
    #[test]
    fn channels_last_gives_the_2d_paths_bits() {
        if Level::detected() != Level::Avx512 {
            return;
        }
        let mut taken = 0;
        for k in [3, 5] {
            for (h, w) in [(7, 7), (9, 13), (14, 14), (28, 28), (5, 6)] {
                for stride in [[1, 1], [2, 2], [2, 1], [1, 2]] {
                    for dil in [1, 2] {
                        for (top, left, extra) in [(0, 0, 0), (k / 2, k / 2, 0), (k - 1, k - 1, 0), (1, 0, 1)] {
                            let span = dil * (k - 1) + 1;
                            if h + top < span || w + left < k {
                                continue;
                            }
                            let out = |len: usize, pad: usize, span: usize, s: usize| (len + 2 * pad - span) / s + 1;
                            let g = Window3d {
                                input: [1, h, w],
                                out: [1, out(h, top, span, stride[0]) + extra, out(w, left, k, stride[1])],
                                kernel: [1, k, k],
                                stride: [1, stride[0], stride[1]],
                                dilation: [1, dil, 1],
                                pad_begin: [0, top, left],
                            };
                            if !fits(&g) {
                                continue;
                            }
                            let (channels, planes) = (32, 64);
                            let taps = k * k;
                            let x = crate::test_values(planes * g.plane(), (k * 31 + h * 7 + w) as u64);
                            let wt = crate::test_values(channels * taps, 5);
                            let bias = crate::test_values(channels, 6);
                            let n = planes * g.positions();
                            let (mut want, mut got) = (vec![f32::NAN; n], vec![f32::NAN; n]);
                            let e = Epilogue::default();
                            depthwise_2d::<true>(
                                &x,
                                &wt,
                                Some(&bias),
                                0..planes,
                                channels,
                                &g,
                                &mut want,
                                &e,
                                &mut Vec::new(),
                            );
                            let mut scratch = Vec::new();
                            let done = crate::arch::depthwise_channels_last(
                                &x,
                                &wt,
                                Some(&bias),
                                0..planes,
                                channels,
                                &g,
                                &mut got,
                                &e,
                                &mut scratch,
                            );
                            assert!(done, "{g:?}");
                            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                            assert_eq!(bits(&got), bits(&want), "{g:?}");
                            taken += 1;
                        }
                    }
                }
            }
        }
        assert!(taken > 150, "{taken} windows taken");
    }

    /// The paths whose input (and output) are stored channels last give the bits of the
    /// 2-D path on the planes, on windows of any size, split by channel blocks (input
    /// only) or by output rows (both), with an activation.
    #[test]
    fn channels_last_storage_gives_the_2d_paths_bits() {
        if Level::detected() != Level::Avx512 {
            return;
        }
        let to_nhwc = |x: &[f32], c: usize, plane: usize| -> Vec<f32> {
            (0..plane * c).map(|i| x[(i % c) * plane + i / c]).collect()
        };
        let mut taken = 0;
        for k in [3, 5] {
            for (h, w) in [(7, 7), (9, 13), (14, 14), (29, 31), (58, 57)] {
                for stride in [[1, 1], [2, 2], [2, 1]] {
                    for (top, left) in [(0, 0), (k / 2, k / 2), (1, 0)] {
                        if h + top < k || w + left < k {
                            continue;
                        }
                        let out = |len: usize, pad: usize, s: usize| (len + 2 * pad - k) / s + 1;
                        let g = Window3d {
                            input: [1, h, w],
                            out: [1, out(h, top, stride[0]), out(w, left, stride[1])],
                            kernel: [1, k, k],
                            stride: [1, stride[0], stride[1]],
                            dilation: [1, 1, 1],
                            pad_begin: [0, top, left],
                        };
                        assert!(fits_nhwc(&g));
                        let channels = 48;
                        let taps = k * k;
                        let x = crate::test_values(channels * g.plane(), (k * 31 + h * 7 + w) as u64);
                        let wt = crate::test_values(channels * taps, 5);
                        let bias = crate::test_values(channels, 6);
                        let positions = g.positions();
                        let act = crate::gemm::Activation::Silu;
                        let e = Epilogue { act: Some(act), ..Epilogue::default() };
                        let mut want = vec![f32::NAN; channels * positions];
                        let args = (&x, &wt, Some(&bias[..]), 0..channels, channels, &g);
                        depthwise_2d::<true>(
                            args.0,
                            args.1,
                            args.2,
                            args.3,
                            args.4,
                            args.5,
                            &mut want,
                            &e,
                            &mut Vec::new(),
                        );
                        let xl = to_nhwc(&x, channels, g.plane());
                        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                        // Input channels last, by blocks: 0..1 then 1..3.
                        let mut got = vec![f32::NAN; channels * positions];
                        let (first, rest) = got.split_at_mut(16 * positions);
                        let mut scratch = Vec::new();
                        let ok = crate::arch::depthwise_from_nhwc(
                            &xl,
                            &wt,
                            Some(&bias),
                            channels,
                            0..1,
                            &g,
                            first,
                            (&e, 0),
                            &mut scratch,
                        ) && crate::arch::depthwise_from_nhwc(
                            &xl,
                            &wt,
                            Some(&bias),
                            channels,
                            1..3,
                            &g,
                            rest,
                            (&e, 0),
                            &mut scratch,
                        );
                        assert!(ok, "{g:?}");
                        assert_eq!(bits(&got), bits(&want), "from channels last {g:?}");
                        // Both channels last, by output rows in two parts.
                        let ow = g.out[2];
                        let mut got = vec![f32::NAN; channels * positions];
                        let cut = g.out[1] / 2;
                        let (a, b) = got.split_at_mut(cut * ow * channels);
                        let ok = crate::arch::depthwise_rows_nhwc(
                            &xl,
                            &wt,
                            Some(&bias),
                            channels,
                            &g,
                            0..cut,
                            a,
                            Some(act),
                            &mut scratch,
                        ) && crate::arch::depthwise_rows_nhwc(
                            &xl,
                            &wt,
                            Some(&bias),
                            channels,
                            &g,
                            cut..g.out[1],
                            b,
                            Some(act),
                            &mut scratch,
                        );
                        assert!(ok, "{g:?}");
                        assert_eq!(
                            bits(&got),
                            bits(&to_nhwc(&want, channels, positions)),
                            "channels last both ways {g:?}"
                        );
                        taken += 1;
                    }
                }
            }
        }
        assert!(taken > 50, "{taken} windows taken");
    }
}
