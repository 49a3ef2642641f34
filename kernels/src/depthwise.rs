//! Depthwise convolution (one filter per channel, `group == in_c == out_c`): direct, one
//! output row at a time, with no im2col.
//!
//! The im2col path built a taps × positions matrix per channel and ran a matrix-vector
//! product on it (PERF-FINDINGS: ORT's depthwise was 11-25x faster in-model). Here each
//! in-range (d, h) input row is merged into the output row once per width tap, scaled by
//! that tap's weight, over the outputs whose tap is in range, as the pools do. Every output
//! sums its taps in (d, h, w) order from 0, as the matrix-vector product did; the padding
//! taps it added as `w * 0` are skipped, which can change only the sign of an exact zero.

use std::ops::Range;

#[cfg(target_arch = "x86_64")]
pub(crate) mod nhwc;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

use crate::conv::Window3d;
use crate::gemm::Epilogue;
use crate::pool::{taps_in_range, width_span};

/// `y[n, c] = sum over taps of w[c, tap] * x[n, c, tap] (+ bias[c])` over `planes` =
/// batch × channels planes; `w` is `[channels, 1, kernel...]`.
pub fn depthwise(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    planes: usize,
    channels: usize,
    g: &Window3d,
    y: &mut [f32],
) {
    depthwise_planes(x, w, bias, 0..planes, channels, g, y, &Epilogue::default(), &mut Vec::new());
}

/// [`depthwise`] for the planes `planes` only: `x` and `y` start at the first of them
/// (for splitting over threads by planes). `epilogue` (its rows are planes, indexed from
/// 0 for the whole tensor) is applied to each plane right after it is computed, while it
/// is in L1. `scratch` grows to what the 2-D path needs (about two padded planes) and is
/// reused.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_planes(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    planes: Range<usize>,
    channels: usize,
    g: &Window3d,
    y: &mut [f32],
    epilogue: &Epilogue<'_>,
    scratch: &mut Vec<f32>,
) {
    let positions = g.positions();
    if Flat::fits(g) {
        return crate::arch::depthwise_2d(crate::arch::isa(), x, w, bias, planes, channels, g, y, epilogue, scratch);
    }
    let first = planes.start;
    for p in planes {
        let at = p - first;
        let (x, y) = (&x[at * g.plane()..][..g.plane()], &mut y[at * positions..][..positions]);
        depthwise_by_taps(x, w, bias, p..p + 1, channels, g, y);
        epilogue.apply_rows(y, positions, p..p + 1);
    }
}

/// The planes a split of a depthwise convolution should keep together: 16 where the
/// channels-last kernel takes the window (it runs whole blocks of 16 channels), else 1.
pub fn split_planes(g: &Window3d, channels: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    if crate::arch::Level::detected() == crate::arch::Level::Avx512 && nhwc::fits(g) && channels.is_multiple_of(16) {
        return 16;
    }
    let _ = (g, channels);
    1
}

/// The widest output rows on which a 3x3 depthwise convolution is stored channels last
/// ([`takes_nhwc`]).
const NHWC_MAX_ROW_3X3: usize = 16;

/// Whether a depthwise convolution of `channels` channels on `g` is better stored
/// channels last on this CPU: [`depthwise_from_nhwc`] and [`depthwise_rows_nhwc`] run it
/// (AVX-512, a 3x3 or 5x5 window of column stride 1 or 2, undilated along the row, on one
/// plane, whole blocks of 16 channels), on the planes where the NCHW path runs 5x5
/// windows channels last too (transposing them: up to 56x56, or 112x112 at stride 2) and
/// 3x3 ones on output rows of at most [`NHWC_MAX_ROW_3X3`]. On wider rows the row paths
/// run 3x3 windows on the planes faster than the channels-last tiles (MobileNetV2, one
/// thread, Xeon family 6 model 207, in-model: 96 channels at stride 2 on 112x112 254 ->
/// 508 us, 144 on 56x56 188 -> 311; the whole model, paired against no channels-last
/// blocks, 0.93 with 14x14 planes and smaller, 0.99-1.01 with the 28x28 ones too).
pub fn takes_nhwc(g: &Window3d, channels: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    return crate::arch::Level::detected() == crate::arch::Level::Avx512
        && nhwc::fits(g)
        && (g.kernel[2] == 5 || g.out[2] <= NHWC_MAX_ROW_3X3)
        && channels > 0
        && channels.is_multiple_of(16);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (g, channels);
        false
    }
}

/// A depthwise convolution of one image whose input `x` is stored channels last (`[H, W,
/// channels]` under its `[channels, H, W]` shape): channels `blocks` (blocks of 16) into
/// `y` (their planes), then `epilogue` (its rows are the image's channels from `row0`).
/// Every output sums its taps in (h, w) order from 0, the padding ones as `w * 0`, then
/// adds the bias, as the NCHW channels-last path does (the same bits). Returns false,
/// writing nothing, where it does not run: off AVX-512, a window other than 3x3 or 5x5
/// of column stride 1 or 2 on one plane, or channels not whole blocks of 16.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_from_nhwc(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    channels: usize,
    blocks: Range<usize>,
    g: &Window3d,
    y: &mut [f32],
    epilogue: (&Epilogue<'_>, usize),
    scratch: &mut Vec<f32>,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    return crate::arch::depthwise_from_nhwc(x, w, bias, channels, blocks, g, y, epilogue, scratch);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (x, w, bias, channels, blocks, g, y, epilogue, scratch);
        false
    }
}

/// [`depthwise_from_nhwc`] with the output stored channels last too: output rows `rows`
/// of every channel into `y` (`[rows.len() · out_w, channels]`), then `act` (the same
/// bits as applied to the planes). Returns false, writing nothing, where it does not run.
#[allow(clippy::too_many_arguments)]
pub fn depthwise_rows_nhwc(
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
    #[cfg(target_arch = "x86_64")]
    return crate::arch::depthwise_rows_nhwc(x, w, bias, channels, g, rows, y, act, scratch);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (x, w, bias, channels, g, rows, y, act, scratch);
        false
    }
}

/// Largest kernel height and width of the 2-D path.
const MAX_K: usize = 7;
/// Slack floats past each phase, so the last vector of a tap may read past its plane.
const SLACK: usize = 16;

/// Layout of the 2-D path. The zero-padded input plane is split into `sh * sw` phase
/// planes (phase `(a, b)` holds padded rows `a, a + sh, ...` and columns `b, b + sw,
/// ...`), each `hq` rows of `wq`. Outputs are computed on a grid of `out_h` rows of `wq`
/// (the columns past `out_w` are discarded): then every tap reads one contiguous run of
/// one phase plane, `acc[o] += w * phase[o + offset]`, whatever the stride and dilation.
pub(crate) struct Flat {
    wq: usize,
    /// Floats of one phase plane (with slack).
    phase: usize,
    /// Floats of the output grid.
    grid: usize,
    /// Per tap (height-major): phase plane and offset into it.
    taps: [(usize, usize); MAX_K * MAX_K],
    count: usize,
}

impl Flat {
    pub(crate) fn new(g: &Window3d) -> Flat {
        let span = |a: usize| (g.out[a].max(1) - 1) * g.stride[a] + (g.kernel[a] - 1) * g.dilation[a] + 1;
        let (sh, sw) = (g.stride[1], g.stride[2]);
        let hp = span(1).max(g.pad_begin[1] + g.input[1]);
        let wp = span(2).max(g.pad_begin[2] + g.input[2]);
        let (hq, wq) = (hp.div_ceil(sh), wp.div_ceil(sw));
        let mut taps = [(0, 0); MAX_K * MAX_K];
        let mut count = 0;
        for th in 0..g.kernel[1] {
            for tw in 0..g.kernel[2] {
                let (r, c) = (th * g.dilation[1], tw * g.dilation[2]);
                taps[count] = ((r % sh) * sw + c % sw, (r / sh) * wq + c / sw);
                count += 1;
            }
        }
        let reach = (g.kernel[2] - 1) * g.dilation[2] / sw;
        Flat { wq, phase: hq * wq + reach + SLACK, grid: g.out[1] * wq, taps, count }
    }

    /// Whether a window takes the 2-D path: one depth plane and kernels up to 7x7.
    pub(crate) fn fits(g: &Window3d) -> bool {
        let two_d = g.input[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1;
        let small = (1..=MAX_K).contains(&g.kernel[1]) && (1..=MAX_K).contains(&g.kernel[2]);
        two_d && small && g.plane() > 0 && g.positions() > 0
    }

    /// Scratch floats the path needs: the phase planes and the output grid.
    pub(crate) fn scratch_len(&self, g: &Window3d) -> usize {
        self.phase * g.stride[1] * g.stride[2] + self.grid
    }
}

/// The 2-D path of [`depthwise_planes`], generic over fused multiply-adds (the
/// `#[target_feature]` builds in `arch::dispatch` pass `true`). Every output sums its
/// in-range taps height-major from 0, then adds the bias, as `depthwise_by_taps` does
/// (padding taps add `w * 0`, which can change only the sign of an exact zero); without
/// fused multiply-adds the bits are the same.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_2d<const FMA: bool>(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    planes: Range<usize>,
    channels: usize,
    g: &Window3d,
    y: &mut [f32],
    epilogue: &Epilogue<'_>,
    scratch: &mut Vec<f32>,
) {
    let f = Flat::new(g);
    let (in_h, in_w) = (g.input[1], g.input[2]);
    let out_w = g.out[2];
    let (sh, sw) = (g.stride[1], g.stride[2]);
    let (plane, positions) = (g.plane(), g.positions());
    let len = f.scratch_len(g);
    if scratch.len() < len {
        scratch.resize(len, 0.0);
    }
    let (phases, grid) = scratch[..len].split_at_mut(len - f.grid);
    // The padding is never written: zeroed once, it stays zero for every plane.
    phases.fill(0.0);
    let taps = &f.taps[..f.count];
    let first = planes.start;
    for (p, dst) in planes.zip(y.chunks_exact_mut(positions)) {
        let c = p % channels;
        let wc = &w[c * f.count..][..f.count];
        let b = bias.map_or(0.0, |b| b[c]);
        let src = &x[(p - first) * plane..][..plane];
        for (ih, row) in src.chunks_exact(in_w).enumerate().take(in_h) {
            let r = ih + g.pad_begin[1];
            let at = (r % sh) * sw * f.phase + (r / sh) * f.wq;
            split_row(&mut phases[at..], f.phase, row, g.pad_begin[2], sw);
        }
        // Three taps per pass over the grid (the grid stays in L1), in tap order; the
        // first pass starts the sums from 0 instead of reading the grid.
        let mut t = 0;
        while t < taps.len() {
            let tap = |k: usize| &phases[taps[k].0 * f.phase + taps[k].1..][..grid.len()];
            let n = (taps.len() - t).min(3);
            let (w0, p0) = (wc[t], tap(t));
            let (w1, p1) = if n > 1 { (wc[t + 1], tap(t + 1)) } else { (0.0, p0) };
            let (w2, p2) = if n > 2 { (wc[t + 2], tap(t + 2)) } else { (0.0, p0) };
            match (n, t == 0) {
                (1, true) => pass::<FMA, 1, true>(grid, [w0, w1, w2], [p0, p1, p2]),
                (1, false) => pass::<FMA, 1, false>(grid, [w0, w1, w2], [p0, p1, p2]),
                (2, true) => pass::<FMA, 2, true>(grid, [w0, w1, w2], [p0, p1, p2]),
                (2, false) => pass::<FMA, 2, false>(grid, [w0, w1, w2], [p0, p1, p2]),
                (_, true) => pass::<FMA, 3, true>(grid, [w0, w1, w2], [p0, p1, p2]),
                (_, false) => pass::<FMA, 3, false>(grid, [w0, w1, w2], [p0, p1, p2]),
            }
            t += n;
        }
        for (out, acc) in dst.chunks_exact_mut(out_w).zip(grid.chunks_exact(f.wq)) {
            for (o, &a) in out.iter_mut().zip(acc) {
                *o = a + b;
            }
        }
        epilogue.apply_rows(dst, positions, p..p + 1);
    }
}

/// One pass of `N` (1 to 3) taps over the grid: `grid[o] += w[k] * p[k][o]` for each tap
/// in turn (from 0 instead of `grid[o]` when `FIRST`).
#[inline(always)]
fn pass<const FMA: bool, const N: usize, const FIRST: bool>(grid: &mut [f32], w: [f32; 3], p: [&[f32]; 3]) {
    let (p0, p1, p2) = (&p[0][..grid.len()], &p[1][..grid.len()], &p[2][..grid.len()]);
    for (((a, &v0), &v1), &v2) in grid.iter_mut().zip(p0).zip(p1).zip(p2) {
        let mut acc = madd::<FMA>(w[0], v0, if FIRST { 0.0 } else { *a });
        if N > 1 {
            acc = madd::<FMA>(w[1], v1, acc);
        }
        if N > 2 {
            acc = madd::<FMA>(w[2], v2, acc);
        }
        *a = acc;
    }
}

/// `a + w * v`, fused or not.
#[inline(always)]
fn madd<const FMA: bool>(w: f32, v: f32, a: f32) -> f32 {
    if FMA {
        v.mul_add(w, a)
    } else {
        a + w * v
    }
}

/// Writes one input row into its phase planes: padded column `j = i + pad` goes to phase
/// column `j % sw`, index `j / sw`; `dst` starts at the row in phase column 0, the phase
/// planes `phase` floats apart.
#[inline(always)]
fn split_row(dst: &mut [f32], phase: usize, input: &[f32], pad: usize, sw: usize) {
    if sw == 1 {
        dst[pad..pad + input.len()].copy_from_slice(input);
        return;
    }
    if sw == 2 {
        // Pairs of columns: one to each phase (which first depends on the pad's parity).
        let (even, odd) = dst.split_at_mut(phase);
        let (a, b) = if pad.is_multiple_of(2) { (even, odd) } else { (odd, even) };
        let (a, b) = (&mut a[pad / 2..], &mut b[pad.div_ceil(2)..]);
        let pairs = input.chunks_exact(2);
        if let [last] = pairs.remainder() {
            a[input.len() / 2] = *last;
        }
        for ((a, b), pair) in a.iter_mut().zip(b.iter_mut()).zip(pairs) {
            *a = pair[0];
            *b = pair[1];
        }
        return;
    }
    for q in 0..sw {
        let first = (q + sw - pad % sw) % sw; // the first input column of phase column q
        if first >= input.len() {
            continue;
        }
        let count = (input.len() - first).div_ceil(sw);
        let out = &mut dst[q * phase + (first + pad) / sw..][..count];
        for (k, o) in out.iter_mut().enumerate() {
            *o = input[first + k * sw];
        }
    }
}

/// [`depthwise_planes`] for any window: each in-range input row merged into the output
/// row once per width tap.
fn depthwise_by_taps(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    planes: Range<usize>,
    channels: usize,
    g: &Window3d,
    y: &mut [f32],
) {
    let (plane, positions) = (g.plane(), g.positions());
    if positions == 0 {
        return;
    }
    let [_, in_h, in_w] = g.input;
    let [out_d, out_h, out_w] = g.out;
    let [_, kh, kw] = g.kernel;
    let taps: usize = g.kernel.iter().product();
    let first = planes.start;
    for (p, dst) in planes.zip(y.chunks_exact_mut(positions)) {
        let c = p % channels;
        let wc = &w[c * taps..][..taps];
        let b = bias.map_or(0.0, |b| b[c]);
        if plane == 0 {
            dst.fill(b);
            continue;
        }
        let src = &x[(p - first) * plane..][..plane];
        for zd in 0..out_d {
            let rd = taps_in_range(g, 0, zd);
            for zh in 0..out_h {
                let rh = taps_in_range(g, 1, zh);
                let row = &mut dst[(zd * out_h + zh) * out_w..][..out_w];
                row.fill(0.0);
                for td in rd.clone() {
                    let sd = zd * g.stride[0] + td * g.dilation[0] - g.pad_begin[0];
                    for th in rh.clone() {
                        let sh = zh * g.stride[1] + th * g.dilation[1] - g.pad_begin[1];
                        let input = &src[(sd * in_h + sh) * in_w..][..in_w];
                        for tw in 0..kw {
                            let wv = wc[(td * kh + th) * kw + tw];
                            let Some((outs, at)) = width_span(g, tw, out_w) else { continue };
                            let n = outs.len();
                            let outs = &mut row[outs];
                            if g.stride[2] == 1 {
                                outs.iter_mut().zip(&input[at..][..n]).for_each(|(o, &v)| *o += wv * v);
                            } else {
                                let ins = input[at..].iter().step_by(g.stride[2]);
                                outs.iter_mut().zip(ins).for_each(|(o, &v)| *o += wv * v);
                            }
                        }
                    }
                }
                if b != 0.0 {
                    row.iter_mut().for_each(|o| *o += b);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::conv;
    use crate::gemm::GemmScratch;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        crate::test_values(n, seed)
    }

    /// Splits keep whole blocks of 16 channels only where the channels-last kernel runs
    /// (a 14x14 5x5 window of 32 channels on AVX-512), not for a large plane or a channel
    /// count that is not whole blocks, whose tasks need no such grain. (Found by review:
    /// every depthwise split was rounded to 16 planes.)
    #[test]
    fn splits_keep_blocks_of_16_only_for_the_channels_last_kernel() {
        let small = Window3d::cube(2, 14, 5, 1, 1, 2, 0).expect("fits");
        let large = Window3d::cube(2, 56, 3, 1, 1, 1, 0).expect("fits");
        let avx512 = crate::arch::Level::detected() == crate::arch::Level::Avx512;
        assert_eq!(split_planes(&small, 32), if avx512 { 16 } else { 1 });
        assert_eq!(split_planes(&small, 24), 1);
        assert_eq!(split_planes(&large, 32), 1);
    }

    #[test]
    fn depthwise_matches_the_grouped_im2col_convolution() {
        let (mut checked, mut two_d) = (0, 0);
        for dims in 1..=3usize {
            let len = [0, 13, 9, 5][dims];
            for k in [1, 3, 5] {
                // 2-D planes of 9x9 (six vectors, rows across them) and of 38x38 (past the
                // same-size path's planes on AVX-512).
                for len in if dims == 2 { vec![len, 38] } else { vec![len] } {
                    for stride in 1..=2 {
                        for dil in 1..=2 {
                            for pad in [0, k / 2, k - 1] {
                                let Some(g) = Window3d::cube(dims, len, k, stride, dil, pad, 0) else { continue };
                                let (batch, ch) = (2, 3);
                                let taps: usize = g.kernel.iter().product();
                                let x = values(batch * ch * g.plane(), (k * 5 + stride + dil) as u64);
                                let w = values(ch * taps, 9);
                                let bias = values(ch, 4);
                                let mut want = vec![0.0; batch * ch * g.positions()];
                                let (mut col, mut s) = (Vec::new(), GemmScratch::new());
                                conv(
                                    &x,
                                    &w,
                                    Some(&bias),
                                    batch,
                                    ch,
                                    ch,
                                    ch,
                                    &g,
                                    &mut want,
                                    &mut col,
                                    &mut s,
                                    None,
                                    &Default::default(),
                                );
                                let mut got = vec![f32::NAN; want.len()];
                                depthwise(&x, &w, Some(&bias), batch * ch, ch, &g, &mut got);
                                // The same sums in the same order, with fused multiply-adds in
                                // the 2-D path's vector builds.
                                let close = got.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-5 * (1.0 + b.abs()));
                                assert!(close, "{g:?}: {got:?} vs {want:?}");
                                if Flat::fits(&g) {
                                    // Without fused multiply-adds the 2-D path gives the bits of
                                    // the path by taps.
                                    let planes = 0..batch * ch;
                                    let mut by_taps = vec![f32::NAN; want.len()];
                                    depthwise_by_taps(&x, &w, Some(&bias), planes.clone(), ch, &g, &mut by_taps);
                                    let mut rows = vec![f32::NAN; want.len()];
                                    depthwise_2d::<false>(
                                        &x,
                                        &w,
                                        Some(&bias),
                                        planes,
                                        ch,
                                        &g,
                                        &mut rows,
                                        &Epilogue::default(),
                                        &mut Vec::new(),
                                    );
                                    assert_eq!(rows, by_taps, "{g:?}");
                                    // The build for this CPU (on AVX-512, same-size windows read
                                    // the input in place) gives the bits of the fused 2-D path.
                                    let mut fused = vec![f32::NAN; want.len()];
                                    depthwise_2d::<true>(
                                        &x,
                                        &w,
                                        Some(&bias),
                                        0..batch * ch,
                                        ch,
                                        &g,
                                        &mut fused,
                                        &Epilogue::default(),
                                        &mut Vec::new(),
                                    );
                                    let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                                    assert_eq!(bits(&got), bits(&fused), "{g:?}");
                                    two_d += 1;
                                }
                                checked += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(checked > 50 && two_d > 30, "{checked} windows, {two_d} on the 2-D path");
    }
}
