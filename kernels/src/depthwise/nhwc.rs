//! The AVX-512 depthwise convolution of 3x3 and 5x5 windows on small planes, channels
//! last: 16 channels a vector, so each step of a window is one load and one multiply-add
//! for 16 outputs, with the block's filters held in registers.
//!
//! Laid out as NCHW, a 7x7 plane fills 49 of 64 lanes, each tap is a masked load whose
//! lanes come from a table, and a plane's vector sums its 25 taps in one chain of
//! dependent multiply-adds: 2.1-2.8x ORT's time on EfficientNet-B0's 5x5 layers, and the
//! stride-2 ones, on the row path, 2.4-3.8x (AMD Zen 5, one thread). Here a task's
//! channels (whole blocks of 16, one image) are transposed into a zero-padded
//! `[rows, columns, channels]` copy, each block runs over its padded plane with its
//! filters in 9 or 25 registers and 8 or 4 outputs at a time (independent chains), and
//! the `[positions, channels]` result is transposed back into the planes. Every output
//! sums all its taps in (h, w) order from 0, the padding ones as `w * 0`, then adds the
//! bias, as the same-size path does.

use std::arch::x86_64::*;
use std::ops::Range;

use crate::arch::mem::{load16, store16, Window16};
use crate::conv::Window3d;
use crate::gemm::Epilogue;
use crate::movement::x86::transpose_avx512;

/// Channels a vector (a block).
const LANES: usize = 16;
/// The largest plane taken: past it the two transposes cost more than the row paths lose
/// (measured on Zen 5; see the kernel's doc).
const MAX_PLANE: usize = 28 * 28;

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

/// Whether a window takes this path: one depth plane, 3x3 or 5x5, a plane of at most
/// [`MAX_PLANE`] inputs and outputs.
pub(crate) fn fits(g: &Window3d) -> bool {
    let two_d = g.input[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1 && g.pad_begin[0] == 0;
    let window = matches!((g.kernel[1], g.kernel[2]), (3, 3) | (5, 5));
    two_d && window && g.positions() > 0 && g.plane() > 0 && g.plane() <= MAX_PLANE && g.positions() <= MAX_PLANE
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
    // Both parts start on a cache line (whole vectors of 16 floats from there), so that
    // no load or store of a vector spans two lines.
    if scratch.len() < xp_len + yt_len + LANES {
        scratch.resize(xp_len + yt_len + LANES, 0.0);
    }
    let skip = scratch.as_ptr().align_offset(64).min(LANES);
    let (xp, yt) = scratch[skip..].split_at_mut(xp_len);
    let yt = &mut yt[..yt_len];
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
        let bias = bias.map_or(_mm512_setzero_ps(), |bs| load16(bs[c..][..LANES].try_into().expect("16 floats")));
        match g.kernel[1] {
            3 => block::<3, 3, 8>(xp, g, pad, wb, bias, yt),
            _ => block::<5, 5, 6>(xp, g, pad, wb, bias, yt),
        }
        transpose_avx512(&yt[..positions * LANES], positions, LANES, ys);
        epilogue.apply_rows(ys, positions, p..p + LANES);
    }
    true
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

/// One block of 16 channels (`xp`: `[hp, wp, 16]`) over the whole output, `U` outputs at
/// a time in position order (a group may span two rows), then 4, then one at a time,
/// into `yt` (`[positions, 16]`): `U` independent chains keep both multiply-add pipes busy
/// where one row's chain waited on each of its 25 steps.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn block<const KH: usize, const KW: usize, const U: usize>(
    xp: &[f32],
    g: &Window3d,
    pad: Padded,
    wb: &[f32],
    bias: __m512,
    yt: &mut [f32],
) {
    // The block's filters, tap by tap, 16 channels a vector: filter c's tap t is wb[c * taps + t].
    let mut wv = [[_mm512_setzero_ps(); KW]; KH];
    for (ky, row) in wv.iter_mut().enumerate() {
        for (kx, v) in row.iter_mut().enumerate() {
            let lanes: [f32; LANES] = std::array::from_fn(|c| wb[c * KH * KW + ky * KW + kx]);
            *v = load16(&lanes);
        }
    }
    // Each tap's offset from an output's first input, in floats.
    let mut taps = [[0usize; KW]; KH];
    for (ky, row) in taps.iter_mut().enumerate() {
        for (kx, t) in row.iter_mut().enumerate() {
            *t = (ky * g.dilation[1] * pad.wp + kx * g.dilation[2]) * LANES;
        }
    }
    // Each output's first input, in floats, walked in position order (no division).
    let (ow, row_step, col_step) = (g.out[2], g.stride[1] * pad.wp * LANES, g.stride[2] * LANES);
    let (mut oy, mut ox) = (0, 0);
    let mut next = || {
        let at = oy * row_step + ox * col_step;
        ox += 1;
        if ox == ow {
            (oy, ox) = (oy + 1, 0);
        }
        at
    };
    let positions = g.positions();
    let mut p = 0;
    while p + U <= positions {
        outputs::<KH, KW, U>(xp, std::array::from_fn(|_| next()), &taps, &wv, bias, &mut yt[p * LANES..]);
        p += U;
    }
    while p + 4 <= positions {
        outputs::<KH, KW, 4>(xp, std::array::from_fn(|_| next()), &taps, &wv, bias, &mut yt[p * LANES..]);
        p += 4;
    }
    while p < positions {
        outputs::<KH, KW, 1>(xp, [next()], &taps, &wv, bias, &mut yt[p * LANES..]);
        p += 1;
    }
}

/// `U` outputs whose first inputs are at `bases` in `xp`, into the first `U` vectors of
/// `yt`: `U` independent chains of `KH * KW` multiply-adds, each in (h, w) order from 0,
/// then the bias.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn outputs<const KH: usize, const KW: usize, const U: usize>(
    xp: &[f32],
    bases: [usize; U],
    taps: &[[usize; KW]; KH],
    wv: &[[__m512; KW]; KH],
    bias: __m512,
    yt: &mut [f32],
) {
    let window = Window16::new(xp, bases, taps).expect("the padded plane holds every tap");
    let mut acc = [_mm512_setzero_ps(); U];
    for (ky, wrow) in wv.iter().enumerate() {
        for (kx, &wt) in wrow.iter().enumerate() {
            for (j, acc) in acc.iter_mut().enumerate() {
                *acc = _mm512_fmadd_ps(window.load(j, ky, kx), wt, *acc);
            }
        }
    }
    for (j, acc) in acc.iter().enumerate() {
        store16((&mut yt[j * LANES..][..LANES]).try_into().expect("16 floats"), _mm512_add_ps(*acc, bias));
    }
}
