//! Pooling windows: MaxPool (any ordered type, and its indices) and AveragePool.

use crate::conv::{outputs, taps, Window3d};

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

/// How a pooling window reduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    Max,
    /// Average; `count_pad` divides by the full window, padding included.
    Average {
        count_pad: bool,
    },
}

/// Max pooling on any ordered element type (MaxPool on integers): the largest tap of each
/// window; padding taps do not count.
pub fn max_pool<T: Copy + PartialOrd>(x: &[T], planes: usize, g: &Window3d, y: &mut [T]) {
    let (plane, positions) = (g.plane(), g.positions());
    for p in 0..planes {
        let src = &x[p * plane..(p + 1) * plane];
        for (i, o) in outputs(g).enumerate() {
            let mut best: Option<T> = None;
            for k in taps(g) {
                if let Some(at) = g.tap(o, k) {
                    let v = src[at];
                    if best.is_none_or(|b| v > b) {
                        best = Some(v);
                    }
                }
            }
            if let Some(b) = best {
                y[p * positions + i] = b;
            }
        }
    }
}

/// MaxPool's Indices: for each window, the index in the whole `[N, C, ...]` input of its
/// maximum (the first one on ties, as `pool` picks it); within a plane row-major, or
/// column-major with `column_major` (storage_order 1).
pub fn max_pool_indices(x: &[f32], planes: usize, g: &Window3d, column_major: bool, y: &mut [i64]) {
    let (plane, positions) = (g.plane(), g.positions());
    let [in_d, in_h, _] = g.input;
    for p in 0..planes {
        let src = &x[p * plane..(p + 1) * plane];
        for (i, o) in outputs(g).enumerate() {
            let (mut best, mut at) = (f32::NEG_INFINITY, None);
            for k in taps(g) {
                if let Some(row_major) = g.tap(o, k) {
                    let v = src[row_major];
                    if at.is_none() || v > best || (v.is_nan() && !best.is_nan()) {
                        best = v;
                        at = Some(if column_major {
                            let s = |a: usize| g.source(a, o[a], k[a]).unwrap_or(0);
                            (s(2) * in_h + s(1)) * in_d + s(0)
                        } else {
                            row_major
                        });
                    }
                }
            }
            y[p * positions + i] = (p * plane + at.unwrap_or(0)) as i64;
        }
    }
}

/// Pools `planes` planes of `x` into `y`. Padding is ignored by Max and by Average without
/// `count_pad`; windows that run past the padded input (ceil mode) count only their
/// in-range taps. `pad_end`: the declared padding after each axis.
///
/// Runs the build for the CPU's instruction set (see [`pool_rows`]).
pub fn pool(x: &[f32], planes: usize, g: &Window3d, pool: Pool, pad_end: [usize; 3], y: &mut [f32]) {
    crate::arch::pool(crate::arch::isa(), x, planes, g, pool, pad_end, y)
}

/// Planes pooled side by side by [`whole_plane`]: their sums (or maxima) are independent,
/// so a step of 16 of them waits on no add's latency.
const WHOLE_PLANE_LANES: usize = 16;

/// [`pool`] for one window that covers the whole plane from its start (the AveragePool 7x7
/// on 7x7 planes ending ResNet-50 and DenseNet, and Inception-v1's on 6x6 planes padded
/// after): each plane's one output merges the plane's elements in memory order, which is
/// the taps' (d, h, w) order, so the bits are the definition's (an Average divides by the
/// plane's size, or with `count_pad` by its taps in the padded input). Inception-v1's took
/// 86 us on the row path inside its model (ORT 10). Sixteen
/// planes go side by side; on the row path a plane cost a call per tap and input row:
/// 144 us for ResNet-50's 2048 planes of 7x7 (alone; 171 inside the model), against
/// ORT's 21. Returns false, writing nothing, for windows it does not take.
pub(crate) fn whole_plane(
    x: &[f32],
    planes: usize,
    g: &Window3d,
    pool: Pool,
    pad_end: [usize; 3],
    y: &mut [f32],
) -> bool {
    let plane = g.plane();
    // One window from the plane's start, as wide as the plane or wider (padding after it,
    // or taps past it): every element is one of its taps, in memory order.
    let covers = (0..3).all(|a| g.kernel[a] >= g.input[a]);
    let whole = g.out == [1; 3] && covers && g.dilation == [1; 3] && g.pad_begin == [0; 3];
    if !whole || plane == 0 {
        return false;
    }
    // Average's divisor: the plane, or with `count_pad` the taps in the input or its
    // declared padding (the padding's taps add +0, which changes no sum from +0).
    let count = match pool {
        Pool::Average { count_pad: true } => (0..3).map(|a| padded_taps(g, a, 0, pad_end[a])).product(),
        _ => plane,
    };
    let (x, y) = (&x[..planes * plane], &mut y[..planes]);
    let init = if pool == Pool::Max { f32::NEG_INFINITY } else { 0.0 };
    for (src, dst) in x.chunks(WHOLE_PLANE_LANES * plane).zip(y.chunks_mut(WHOLE_PLANE_LANES)) {
        let mut acc = [init; WHOLE_PLANE_LANES];
        for t in 0..plane {
            for (a, lane) in acc.iter_mut().zip(src.chunks_exact(plane)) {
                *a = match pool {
                    Pool::Max => max_step(*a, lane[t]),
                    Pool::Average { .. } => *a + lane[t],
                };
            }
        }
        for (o, a) in dst.iter_mut().zip(acc) {
            *o = match pool {
                Pool::Max => a,
                Pool::Average { .. } => a / count as f32,
            };
        }
    }
    true
}

/// Max pooling of small integers (a quantized model's uint8 or int8 MaxPool, which a QDQ
/// group leaves between its quantized convolutions), in their own type, in the widest
/// build: for each output row, the maximum of its in-range input rows (whole vectors, 64
/// bytes on AVX-512), then of that row's width taps. A window with no input gives the
/// type's least value. `row` is scratch (one input row), reused. Through floats and the
/// float kernel, ResNet-18's quantized max pool (64 planes of 112x112) took 642 us
/// against ORT's 122.
pub fn max_pool_ints<T: crate::qgemm::QInt + Ord>(x: &[T], planes: usize, g: &Window3d, y: &mut [T], row: &mut Vec<T>) {
    let (plane, positions) = (g.plane(), g.positions());
    assert!(x.len() >= planes * plane && y.len() >= planes * positions, "pool: x or y is short");
    if crate::arch::max_pool_bytes(&x[..planes * plane], planes, g, &mut y[..planes * positions], row) {
        return;
    }
    row.clear();
    row.resize(g.input[2], T::from_i32(T::MIN));
    crate::arch::widest(
        #[inline(always)]
        || max_rows(x, planes, g, y, row),
    )
}

/// [`max_pool_ints`]' body.
#[inline(always)]
fn max_rows<T: crate::qgemm::QInt + Ord>(x: &[T], planes: usize, g: &Window3d, y: &mut [T], rows: &mut [T]) {
    let (plane, positions) = (g.plane(), g.positions());
    let in_w = g.input[2];
    let [out_d, out_h, out_w] = g.out;
    let least = T::from_i32(T::MIN);
    if plane == 0 || positions == 0 {
        y[..planes * positions].fill(least);
        return;
    }
    let kw = g.kernel[2];
    let span = width_spans(g, out_w);
    for (src, dst) in x.chunks_exact(plane).zip(y.chunks_exact_mut(positions)).take(planes) {
        for zd in 0..out_d {
            for zh in 0..out_h {
                // The maximum of the window's in-range input rows (the least value when
                // it has none), then its width taps over that row.
                rows.fill(least);
                for at in window_rows(g, zd, zh) {
                    for (m, &v) in rows.iter_mut().zip(&src[at..][..in_w]) {
                        *m = (*m).max(v);
                    }
                }
                let row = &mut dst[(zd * out_h + zh) * out_w..][..out_w];
                row.fill(least);
                for tw in 0..kw {
                    if let Some((outs, first)) = span(tw) {
                        let (outs, input) = (&mut row[outs], &rows[first..]);
                        match g.stride[2] {
                            1 => merge_strided_ints::<T, 1>(outs, input),
                            2 => merge_strided_ints::<T, 2>(outs, input),
                            s => outs.iter_mut().zip(input.iter().step_by(s)).for_each(|(o, &v)| *o = (*o).max(v)),
                        }
                    }
                }
            }
        }
    }
}

/// `outs[i] = max(outs[i], input[i * S])`, on slices cut to length first.
#[inline(always)]
fn merge_strided_ints<T: Copy + Ord, const S: usize>(outs: &mut [T], input: &[T]) {
    let n = outs.len();
    if n == 0 {
        return;
    }
    let input = &input[..(n - 1) * S + 1];
    for i in 0..n {
        outs[i] = outs[i].max(input[i * S]);
    }
}

/// Width taps whose spans are kept on the stack; wider kernels work them out per row.
const SPANS: usize = 16;

/// [`pool`]'s body, one output row at a time: the row starts at Max's or Average's
/// identity, then each in-range (depth, height) tap row is merged into it once per width
/// tap, over the outputs whose tap is in range: a plain loop over the row, with no bound
/// checks per tap, that LLVM vectorises for the build's instruction set (stride 1 and 2
/// as constants, so stride 2 becomes a load of pairs and a shuffle). Every output still
/// takes its taps in (d, h, w) order, so Max (NaN wins) and the Average sums give the bits
/// of the tap-by-tap definition. The width spans and Average's divisors are worked out
/// once per call, not per row: integer divisions had cost about 8 ns an output.
#[inline(always)]
pub(crate) fn pool_rows(x: &[f32], planes: usize, g: &Window3d, pool: Pool, pad_end: [usize; 3], y: &mut [f32]) {
    let (plane, positions) = (g.plane(), g.positions());
    let in_w = g.input[2];
    let [out_d, out_h, out_w] = g.out;
    let init = if pool == Pool::Max { f32::NEG_INFINITY } else { 0.0 };
    if plane == 0 || positions == 0 {
        // No input: every window is empty (Max's identity, Average's 0 / its count).
        y[..planes * positions].fill(init);
        return;
    }
    let kw = g.kernel[2];
    let span = width_spans(g, out_w);
    // Average: the width count of output zw; full (kw) on the interior `inner`, worked out
    // one by one at the borders.
    let width_count = |zw: usize| average_count(g, pool, pad_end, 2, zw);
    let full = (0..out_w).find(|&zw| width_count(zw) == kw).unwrap_or(out_w);
    let inner = full..(full..out_w).find(|&zw| width_count(zw) != kw).unwrap_or(out_w);
    for (src, dst) in x.chunks_exact(plane).zip(y.chunks_exact_mut(positions)).take(planes) {
        for zd in 0..out_d {
            for zh in 0..out_h {
                let row = &mut dst[(zd * out_h + zh) * out_w..][..out_w];
                row.fill(init);
                for at in window_rows(g, zd, zh) {
                    let input = &src[at..][..in_w];
                    for tw in 0..kw {
                        if let Some((outs, first)) = span(tw) {
                            merge_tap(&mut row[outs], &input[first..], g.stride[2], pool);
                        }
                    }
                }
                if let Pool::Average { .. } = pool {
                    let (cd, ch) = (average_count(g, pool, pad_end, 0, zd), average_count(g, pool, pad_end, 1, zh));
                    let inner_count = (cd * ch * kw).max(1) as f32;
                    for o in &mut row[inner.clone()] {
                        *o /= inner_count;
                    }
                    for zw in (0..inner.start).chain(inner.end..out_w) {
                        row[zw] /= (cd * ch * width_count(zw)).max(1) as f32;
                    }
                }
            }
        }
    }
}

/// Floats of the padded plane and of the output grid [`pool_flat`] keeps on the stack.
const FLAT_LEN: usize = 3072;
/// Output columns and taps [`pool_flat`] takes.
const FLAT_COLS: usize = 256;
const FLAT_TAPS: usize = 64;

/// [`pool`] for 2-D windows of strides 1 and 2 on small planes, for the builds without AVX-512's
/// paths: the plane is copied into a padded plane (the pool's identity in the padding:
/// -inf for Max, +0 for Average; at stride 2 split into phase planes, as the depthwise
/// convolution's 2-D path does), and the outputs are computed on a grid of `out_h` rows
/// of the padded width, so that every tap reads one contiguous run of the padded plane
/// at one offset, `grid[o] = merge(grid[o], padded[o + offset])`, a loop over the whole
/// plane that LLVM vectorises. Row by row, a 7x7 plane's rows of 7 outputs cost a loop's
/// overhead per tap and row: max 3x3/1 on 1024 planes of 7x7 took 14 ns an output on
/// AVX2 against 0.7 on AVX-512's same-size path. Each output still merges its taps in
/// (h, w) order from the identity, which the padding taps do not change (`max_step`
/// keeps its value against -inf, and a sum from +0 is never -0, so adding +0 is exact):
/// the bits of the tap-by-tap definition. Average's column counts are worked out once
/// per call, its row counts once per row. Returns false, writing nothing, for windows it
/// does not take.
#[inline(always)]
pub(crate) fn pool_flat(
    x: &[f32],
    planes: usize,
    g: &Window3d,
    pool: Pool,
    pad_end: [usize; 3],
    y: &mut [f32],
) -> bool {
    let [in_d, in_h, in_w] = g.input;
    let [out_d, out_h, out_w] = g.out;
    let ([kd, kh, kw], [_, sh, sw], [_, dh, dw], [_, pt, pl]) = (g.kernel, g.stride, g.dilation, g.pad_begin);
    let two_d = in_d == 1 && out_d == 1 && kd == 1 && taps_in_range(g, 0, 0) == (0..1);
    let (plane, positions) = (g.plane(), g.positions());
    // Stride 2 along an axis only with 3 taps or more along it: the phase split costs a
    // scattered copy of the plane, which a 2x2 window's four taps do not repay (avg 2x2/2
    // on 256 planes of 28x28, AVX2: 137 us by rows, 190-203 flat).
    let strides = matches!((sh, kh), (1, _) | (2, 3..)) && matches!((sw, kw), (1, _) | (2, 3..));
    if !two_d || !strides || plane == 0 || positions == 0 || kh == 0 || kw == 0 {
        return false;
    }
    // Sizes checked small before any product of them can wrap.
    if [kh, kw, dh, dw, pt, pl, in_h, in_w, out_h, out_w].iter().any(|&v| v > FLAT_LEN) {
        return false;
    }
    // The padded plane (its rows and columns as far as any tap or input reaches), split
    // into `sh * sw` phase planes: padded (u, v) is place (u / sh, v / sw) of phase
    // (u % sh, v % sw), each phase `wq` places wide. Output (zh, zw)'s tap (th, tw) is
    // then place (zh + th dh / sh, zw + tw dw / sw) of phase (th dh % sh, tw dw % sw): on
    // a grid of `out_h` rows of `wq`, every tap reads one run of one phase at one offset.
    let reach = ((kh - 1) * dh, (kw - 1) * dw);
    let hp = ((out_h - 1) * sh + reach.0 + 1).max(pt + in_h);
    let wp = ((out_w - 1) * sw + reach.1 + 1).max(pl + in_w);
    let (hq, wq) = (hp.div_ceil(sh), wp.div_ceil(sw));
    // The grid rounded up to whole vectors (no loop remainders; the extra outputs are
    // never copied out), a phase to what its last tap reads.
    let grid = (out_h * wq).next_multiple_of(16);
    let phase = (hq * wq).max(grid + reach.0 / sh * wq + reach.1 / sw);
    if sh * sw * phase > FLAT_LEN || grid > FLAT_LEN || kh * kw > FLAT_TAPS {
        return false;
    }
    let padded_len = sh * sw * phase;
    // Each tap's offset in the phases, in (h, w) order.
    let mut offsets = [0usize; FLAT_TAPS];
    for (t, off) in offsets.iter_mut().enumerate().take(kh * kw) {
        let (r, c) = ((t / kw) * dh, (t % kw) * dw);
        *off = ((r % sh) * sw + c % sw) * phase + (r / sh) * wq + c / sw;
    }
    let offsets = &offsets[..kh * kw];
    let init = if pool == Pool::Max { f32::NEG_INFINITY } else { 0.0 };
    let mut padded = [init; FLAT_LEN];
    let mut sums = [0.0f32; FLAT_LEN];
    // Average's count of output column zw's taps (times its row's count).
    let mut width_count = [0usize; FLAT_COLS];
    if out_w > FLAT_COLS {
        return false;
    }
    if let Pool::Average { .. } = pool {
        for (zw, c) in width_count.iter_mut().enumerate().take(out_w) {
            *c = average_count(g, pool, pad_end, 2, zw);
        }
    }
    for (src, dst) in x.chunks_exact(plane).zip(y.chunks_exact_mut(positions)).take(planes) {
        // The padding is never written: it keeps the identity for every plane.
        for (r, row) in src.chunks_exact(in_w).enumerate() {
            let u = pt + r;
            let at = (u % sh) * sw * phase + (u / sh) * wq;
            if sw == 1 {
                padded[at + pl..][..in_w].copy_from_slice(row);
            } else {
                // Input column c is padded column v = c + pl: phase v % 2, place v / 2.
                for k in 0..2 {
                    let first = (k + 2 - pl % 2) % 2;
                    let dst = &mut padded[at + k * phase + (first + pl) / 2..];
                    for (d, &v) in dst.iter_mut().zip(row.iter().skip(first).step_by(2)) {
                        *d = v;
                    }
                }
            }
        }
        let (padded, sums) = (&padded[..padded_len], &mut sums[..grid]);
        // 16 outputs at a time, their sums in registers over all the taps, in order.
        for (o, block) in sums.chunks_exact_mut(16).enumerate() {
            let mut acc = [init; 16];
            for &off in offsets {
                let taps: &[f32; 16] = padded[16 * o + off..][..16].try_into().expect("16 floats");
                match pool {
                    Pool::Max => acc.iter_mut().zip(taps).for_each(|(a, &v)| *a = max_step(*a, v)),
                    Pool::Average { .. } => acc.iter_mut().zip(taps).for_each(|(a, &v)| *a += v),
                }
            }
            block.copy_from_slice(&acc);
        }
        for (zh, (out, row)) in dst.chunks_exact_mut(out_w).zip(sums.chunks_exact(wq)).enumerate() {
            out.copy_from_slice(&row[..out_w]);
            if let Pool::Average { .. } = pool {
                let height = average_count(g, pool, pad_end, 1, zh);
                let mut counts = [0.0f32; FLAT_COLS];
                for (c, &w) in counts.iter_mut().zip(&width_count[..out_w]) {
                    *c = (height * w).max(1) as f32;
                }
                out.iter_mut().zip(&counts).for_each(|(o, &c)| *o /= c);
            }
        }
    }
    true
}

/// LpPool: `(sum |x|^p)^(1/p)` over each window's in-range taps (padding adds nothing).
pub fn lp_pool(x: &[f32], planes: usize, g: &Window3d, p: i32, y: &mut [f32]) {
    let (plane, positions) = (g.plane(), g.positions());
    let pf = p as f32;
    for (pl, dst) in y.chunks_exact_mut(positions.max(1)).take(planes).enumerate() {
        let src = &x[pl * plane..(pl + 1) * plane];
        for (o, out) in outputs(g).zip(dst.iter_mut()) {
            let mut sum = 0.0f32;
            for k in taps(g) {
                if let Some(at) = g.tap(o, k) {
                    let v = src[at].abs();
                    sum += match p {
                        1 => v,
                        2 => v * v,
                        _ => v.powi(p),
                    };
                }
            }
            *out = match p {
                1 => sum,
                2 => sum.sqrt(),
                _ => sum.powf(1.0 / pf),
            };
        }
    }
}

/// The taps along axis `a` of output `o` that land in the input.
#[inline(always)]
pub(crate) fn taps_in_range(g: &Window3d, a: usize, o: usize) -> std::ops::Range<usize> {
    let (start, dil, len) = (o * g.stride[a], g.dilation[a], g.input[a]);
    let pad = g.pad_begin[a];
    // Tap k reads input start + k * dil - pad: in range when pad <= start + k * dil < pad + len.
    let (lo, hi) = if dil == 1 {
        (pad.saturating_sub(start), (pad + len).saturating_sub(start).min(g.kernel[a]))
    } else {
        (pad.saturating_sub(start).div_ceil(dil), (pad + len).saturating_sub(start).div_ceil(dil).min(g.kernel[a]))
    };
    lo.min(hi)..hi
}

/// Average's count along axis `a` for output `o`: its in-range taps, or with `count_pad`
/// those in the declared padding too (`pad_end` after each axis).
#[inline(always)]
pub(crate) fn average_count(g: &Window3d, pool: Pool, pad_end: [usize; 3], a: usize, o: usize) -> usize {
    match pool {
        Pool::Average { count_pad: true } => padded_taps(g, a, o, pad_end[a]),
        _ => taps_in_range(g, a, o).len(),
    }
}

/// The taps along axis `a` of output `o` that land in the input or its declared padding.
#[inline(always)]
fn padded_taps(g: &Window3d, a: usize, o: usize, pad_end: usize) -> usize {
    let end = (g.pad_begin[a] + g.input[a] + pad_end).saturating_sub(o * g.stride[a]);
    let dil = g.dilation[a];
    if dil == 1 { end } else { end.div_ceil(dil) }.min(g.kernel[a])
}

/// Where each in-range (depth, height) input row of output row (`zd`, `zh`)'s window
/// starts in its plane, in tap order.
#[inline(always)]
fn window_rows(g: &Window3d, zd: usize, zh: usize) -> impl Iterator<Item = usize> + '_ {
    let [_, in_h, in_w] = g.input;
    let kh = taps_in_range(g, 1, zh);
    taps_in_range(g, 0, zd).flat_map(move |td| {
        let sd = zd * g.stride[0] + td * g.dilation[0] - g.pad_begin[0];
        kh.clone().map(move |th| (sd * in_h + zh * g.stride[1] + th * g.dilation[1] - g.pad_begin[1]) * in_w)
    })
}

/// [`width_span`] of each width tap, the first [`SPANS`] worked out once.
#[inline(always)]
fn width_spans(g: &Window3d, out_w: usize) -> impl Fn(usize) -> Option<(std::ops::Range<usize>, usize)> + '_ {
    let mut spans = [const { None }; SPANS];
    for (tw, span) in spans.iter_mut().enumerate().take(g.kernel[2]) {
        *span = width_span(g, tw, out_w);
    }
    move |tw| if tw < SPANS { spans[tw].clone() } else { width_span(g, tw, out_w) }
}

/// The outputs of a row whose width tap `tw` is in the input row, and the input index of
/// the first: output `zw` reads input `zw * stride + tw * dilation - pad`. `None` when
/// there are none.
#[inline(always)]
pub(crate) fn width_span(g: &Window3d, tw: usize, outs: usize) -> Option<(std::ops::Range<usize>, usize)> {
    let (stride, pad, len) = (g.stride[2], g.pad_begin[2], g.input[2]);
    let off = tw * g.dilation[2];
    // zw * stride + off in [pad, pad + len).
    let lo = pad.saturating_sub(off).div_ceil(stride);
    let hi = (pad + len).saturating_sub(off).div_ceil(stride).min(outs);
    (lo < hi).then(|| (lo..hi, lo * stride + off - pad))
}

/// Merges one width tap into the outputs `outs` whose tap is in the input row: output `i`
/// takes `input[i * stride]`. Stride 1 and 2 are constants to the loop, so it vectorises.
#[inline(always)]
fn merge_tap(outs: &mut [f32], input: &[f32], stride: usize, pool: Pool) {
    match (pool, stride) {
        (Pool::Max, 1) => merge_strided::<1>(outs, input, max_step),
        (Pool::Max, 2) => merge_strided::<2>(outs, input, max_step),
        (Pool::Max, _) => outs.iter_mut().zip(input.iter().step_by(stride)).for_each(|(o, &v)| *o = max_step(*o, v)),
        (Pool::Average { .. }, 1) => merge_strided::<1>(outs, input, |a, v| a + v),
        (Pool::Average { .. }, 2) => merge_strided::<2>(outs, input, |a, v| a + v),
        (Pool::Average { .. }, _) => outs.iter_mut().zip(input.iter().step_by(stride)).for_each(|(o, &v)| *o += v),
    }
}

/// `outs[i] = f(outs[i], input[i * S])`, on slices cut to length first so the loop has no
/// bound checks.
#[inline(always)]
fn merge_strided<const S: usize>(outs: &mut [f32], input: &[f32], f: impl Fn(f32, f32) -> f32) {
    let n = outs.len();
    if n == 0 {
        return;
    }
    let input = &input[..(n - 1) * S + 1];
    for i in 0..n {
        outs[i] = f(outs[i], input[i * S]);
    }
}

/// One step of Max: the tap wins when larger or NaN (a NaN, once in, stays).
#[inline(always)]
pub(crate) fn max_step(acc: f32, v: f32) -> f32 {
    if v > acc || v.is_nan() {
        v
    } else {
        acc
    }
}

#[cfg(test)]
mod tests;
