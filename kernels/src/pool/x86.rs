//! The AVX-512 build of the float pools: safe `#[target_feature]` functions that
//! `arch::dispatch` calls once an `Isa` proves the features; loads and stores go through
//! `arch::mem`'s slice-taking helpers. Four paths, all reading the input in place:
//!
//! - [`Columns`]: Max windows of width stride 2, or 1 on rows of 16 outputs or more, with
//!   2 or 3 taps and up to 3 rows (the CNNs' 3x3/2, 2x2/2 and 3x3/1 pools). Each output
//!   row's window rows are merged column by column first and the width taps then taken
//!   from lanes of those vectors; a plane with a NaN or a -0, whose tap order would show
//!   in the bits, runs on the other paths.
//! - [`same_size`]: stride-1 2-D windows whose output is the input's size ("same" pools).
//!   A plane runs as one flat row of outputs, 16 at a time, each tap one masked load at an
//!   offset shared by all outputs, so a 7x7 plane is 4 vectors, not 7 part-empty rows.
//! - [`max_rows`]: other Max windows of width stride 1 or 2 on larger planes. Each input
//!   row's width maxima are taken once and then each output row's rows merged (a 3x3
//!   window of stride 2 read its rows 1.5 times, and its width taps as one permute each);
//!   at width stride 2 with 2 or 3 taps a chunk's 32 positions are loaded once and split
//!   into even and odd, and a NaN is found in the same loads instead of a scan of the
//!   plane first.
//! - [`rows`]: width strides 1 and 2, any other window. An output row runs 16 outputs at a
//!   time; each tap of each in-range input row is one load (stride 1) or two loads and a
//!   permute that keeps the even lanes (stride 2). Only the chunks at a row's ends load
//!   under a mask, with the pool's identity (-inf for Max, +0 for Average) in the lanes
//!   outside the input row.
//!
//! The identities change nothing: `max(acc, -inf)` keeps `acc`, and `acc + 0.0` is `acc`
//! bit for bit because a sum that starts at +0 is never -0. Every output of the last three
//! paths takes its taps in (h, w) order from the identity, so it has the bits of the
//! tap-by-tap definition: Average's sum in tap order over its exact count, Max's largest
//! tap with ties kept by the earlier (`vmaxps(v, acc)` is `v > acc ? v : acc`; the sign
//! of a zero shows which). A NaN wins a Max window: a plane is scanned for NaNs first, and
//! only a plane with one takes the compare per tap that lets a NaN win; only its payload
//! may differ.

use std::arch::x86_64::*;

pub(crate) mod bytes;
pub(super) mod columns;

use super::{average_count, taps_in_range, Pool};
use crate::arch::mem::{load16, store16, store_first, MaskedTaps};
use crate::conv::Window3d;
use columns::Columns;

/// How taps merge: Max without and with NaNs in the plane, Average over the taps in range
/// or (`same_size` with `count_pad`) over all of them.
const MAX: u8 = 0;
const MAX_NAN: u8 = 1;
const AVERAGE: u8 = 2;
const AVERAGE_PAD: u8 = 3;

/// The low `n` (at most 16) lanes.
#[inline(always)]
fn first_lanes(n: usize) -> u16 {
    ((1u32 << n.min(16)) - 1) as u16
}

/// See [`super::pool`]. Windows neither path takes run the portable rows.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn pool_avx512(x: &[f32], planes: usize, g: &Window3d, pool: Pool, pad_end: [usize; 3], y: &mut [f32]) {
    if let Some(columns) = (pool == Pool::Max).then(|| Columns::new(g)).flatten() {
        // Plane by plane where a NaN or a -0 shows the taps' order; as many planes as x
        // and y hold, as the other paths take (`Columns` takes no empty plane).
        let (plane, positions) = (g.plane(), g.positions());
        let planes = planes.min(x.len() / plane).min(y.len() / positions);
        let mut p = 0;
        while p < planes {
            p += columns.planes(&x[p * plane..planes * plane], planes - p, &mut y[p * positions..]);
            if p < planes {
                // That plane and the run of planes after it that hold a NaN or a -0 go to
                // the in-order paths in one call: their setup (`same_size`'s masks,
                // `max_rows`' table) once for the run, not once a plane (a min-pool
                // written -MaxPool(-x) after a Relu has a -0 in every plane: 5x5/1 on 128
                // planes of 20x20 took 506 us a plane at a time, found by review).
                let mut q = p + 1;
                while q < planes && order_may_show(&x[q * plane..][..plane]) {
                    q += 1;
                }
                let (src, dst) = (&x[p * plane..q * plane], &mut y[p * positions..q * positions]);
                in_order(src, q - p, g, pool, pad_end, dst);
                #[cfg(test)]
                PLANES_IN_ORDER.with(|n| n.set(n.get() + q - p));
                #[cfg(test)]
                RUNS_IN_ORDER.with(|n| n.set(n.get() + 1));
                p = q;
            }
        }
        return;
    }
    in_order(x, planes, g, pool, pad_end, y)
}

#[cfg(test)]
thread_local! {
    /// Planes [`Columns`] took and left to [`in_order`] (a NaN or a -0), on this thread.
    pub(crate) static PLANES_IN_ORDER: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// The calls that took them (a run of such planes in one call), on this thread.
    pub(crate) static RUNS_IN_ORDER: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// [`pool_avx512`] with every output's taps merged in (h, w) order.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn in_order(x: &[f32], planes: usize, g: &Window3d, pool: Pool, pad_end: [usize; 3], y: &mut [f32]) {
    let done = same_size(x, planes, g, pool, pad_end, y)
        || (pool == Pool::Max && max_rows(x, planes, g, y))
        || rows(x, planes, g, pool, pad_end, y);
    if !done {
        super::pool_rows(x, planes, g, pool, pad_end, y)
    }
}

/// The merge's identity: -inf for Max, +0 for Average.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn identity<const MODE: u8>() -> __m512 {
    _mm512_set1_ps(if MODE <= MAX_NAN { f32::NEG_INFINITY } else { 0.0 })
}

/// `acc` merged with tap `v` on the lanes of `mask`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn merge<const MODE: u8>(acc: __m512, v: __m512, mask: u16) -> __m512 {
    match MODE {
        MAX => _mm512_mask_max_ps(acc, mask, v, acc),
        MAX_NAN => {
            // As `max_step`: the tap wins when larger or NaN; a NaN, once in, stays.
            let larger = _mm512_mask_cmp_ps_mask::<_CMP_GT_OQ>(mask, v, acc);
            let nan = _mm512_mask_cmp_ps_mask::<_CMP_UNORD_Q>(mask, v, v);
            _mm512_mask_mov_ps(acc, larger | nan, v)
        }
        _ => _mm512_mask_add_ps(acc, mask, acc, v),
    }
}

/// Lane masks a call of [`same_size`] may keep: one per 16 outputs of a plane and tap.
const MASKS: usize = 8192;
/// Taps a window of [`same_size`] may have.
const SAME_TAPS: usize = 49;

/// Stride-1 2-D windows whose output is the input's size, every window inside the input
/// and its declared padding: output `m` of a plane and its tap `(th, tw)` read input
/// `m + (th·dh - pt)·w + tw·dw - pl`, an offset shared by all outputs. The mask of a tap
/// keeps the lanes whose tap is in the input (worked out once per call); a lane masked off
/// reads nothing and keeps its value. Average counts its lanes' taps as it sums them, or
/// with `count_pad` divides by the whole window. Returns false, writing nothing, for
/// windows it does not take.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn same_size(x: &[f32], planes: usize, g: &Window3d, pool: Pool, pad_end: [usize; 3], y: &mut [f32]) -> bool {
    let Some(taps) = SameTaps::new(g, pad_end) else {
        return false;
    };
    let Some(reads) = taps.reads() else {
        return false;
    };
    let plane = g.plane();
    for (src, dst) in x.chunks_exact(plane).zip(y.chunks_exact_mut(plane)).take(planes) {
        match pool {
            Pool::Max if has_nan(src) => same_plane::<MAX_NAN>(src, dst, &reads),
            Pool::Max => same_plane::<MAX>(src, dst, &reads),
            Pool::Average { count_pad: true } => same_plane::<AVERAGE_PAD>(src, dst, &reads),
            Pool::Average { count_pad: false } => same_plane::<AVERAGE>(src, dst, &reads),
        }
    }
    true
}

/// [`same_size`]'s reads: per tap its offset, per 16 outputs and tap the lanes whose tap
/// is in the input.
pub(crate) struct SameTaps {
    offset: [isize; SAME_TAPS],
    masks: [u16; MASKS],
    taps: usize,
    plane: usize,
}

impl SameTaps {
    /// `None` for windows [`same_size`] does not take (also the depthwise convolution's
    /// same-size path).
    pub(crate) fn new(g: &Window3d, pad_end: [usize; 3]) -> Option<SameTaps> {
        let [in_d, in_h, in_w] = g.input;
        let ([kd, kh, kw], [_, dh, dw], [_, pt, pl]) = (g.kernel, g.dilation, g.pad_begin);
        let plane = g.plane();
        let vectors = plane.div_ceil(16);
        let taps = kh * kw;
        let fits = g.out == [1, in_h, in_w] && in_d == 1 && kd == 1 && g.stride == [1; 3] && plane > 0 && taps > 0;
        // No ceil-mode overhang: each window spans its kernel, as `count_pad` divides by.
        let fits = fits
            && [1, 2]
                .iter()
                .all(|&a| (g.kernel[a] - 1).checked_mul(g.dilation[a]) == g.pad_begin[a].checked_add(pad_end[a]));
        if !fits || taps > SAME_TAPS || vectors * taps > MASKS || plane >= 1 << 24 {
            return None;
        }
        let mut t = SameTaps { offset: [0; SAME_TAPS], masks: [0; MASKS], taps, plane };
        for (k, off) in t.offset.iter_mut().enumerate().take(taps) {
            let (rh, rw) = (((k / kw) * dh) as isize - pt as isize, ((k % kw) * dw) as isize - pl as isize);
            *off = rh * in_w as isize + rw;
            // Output (zh, zw)'s tap is in the input for the rows zh + rh in 0..in_h and,
            // on each, the columns zw + rw in 0..in_w: one run of lanes a row.
            let cols = (-rw).clamp(0, in_w as isize) as usize..(in_w as isize - rw).clamp(0, in_w as isize) as usize;
            let rows = (-rh).clamp(0, in_h as isize) as usize..(in_h as isize - rh).clamp(0, in_h as isize) as usize;
            for zh in rows {
                let mut m = zh * in_w + cols.start;
                let end = zh * in_w + cols.end;
                while m < end {
                    let n = (16 - m % 16).min(end - m);
                    t.masks[(m / 16) * taps + k] |= first_lanes(n) << (m % 16);
                    m += n;
                }
            }
        }
        Some(t)
    }

    /// The reads, checked.
    pub(crate) fn reads(&self) -> Option<MaskedTaps<'_>> {
        MaskedTaps::new(self.plane, &self.offset[..self.taps], &self.masks[..self.plane.div_ceil(16) * self.taps])
    }
}

/// One plane of [`same_size`].
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn same_plane<const MODE: u8>(src: &[f32], dst: &mut [f32], reads: &MaskedTaps<'_>) {
    let plane = src.len();
    let init = identity::<MODE>();
    let one = _mm512_set1_ps(1.0);
    for v in 0..plane.div_ceil(16) {
        let mut acc = init;
        let mut count = _mm512_setzero_ps();
        for t in 0..reads.taps() {
            let (x, mask) = reads.load(src, v, t);
            acc = merge::<MODE>(acc, x, mask);
            if MODE == AVERAGE {
                count = _mm512_mask_add_ps(count, mask, count, one);
            }
        }
        if MODE == AVERAGE {
            acc = _mm512_div_ps(acc, _mm512_max_ps(count, one));
        } else if MODE == AVERAGE_PAD {
            acc = _mm512_div_ps(acc, _mm512_set1_ps(reads.taps() as f32));
        }
        store_first(&mut dst[v * 16..], (plane - v * 16).min(16), acc);
    }
}

/// Whether `x` holds a NaN.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn has_nan(x: &[f32]) -> bool {
    holds::<false>(x)
}

/// Whether `x` holds a NaN or a -0 (anywhere: [`Columns`] checks only what its windows
/// read, so a plane this passes may still pool columns first).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn order_may_show(x: &[f32]) -> bool {
    holds::<true>(x)
}

/// Whether `x` holds a NaN, or with `NEGATIVE_ZERO` a NaN or a -0.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn holds<const NEGATIVE_ZERO: bool>(x: &[f32]) -> bool {
    let (mut found, negative_zero) = (0u16, _mm512_set1_epi32(i32::MIN));
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        let v = load16(c.try_into().unwrap());
        found |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
        if NEGATIVE_ZERO {
            found |= _mm512_cmpeq_epi32_mask(_mm512_castps_si512(v), negative_zero);
        }
    }
    found != 0 || chunks.remainder().iter().any(|v| v.is_nan() || NEGATIVE_ZERO && v.to_bits() == 0x8000_0000)
}

/// Chunks of 16 outputs a row of [`rows`] may have.
const MAX_CHUNKS: usize = 32;
/// Taps along a width and input rows a window of [`rows`] may have.
const MAX_KW: usize = 16;
const MAX_KH: usize = 16;
/// Lane masks of [`rows`]: per 16 floats read (two per chunk at stride 2) and width tap.
const ROW_MASKS: usize = 2 * MAX_CHUNKS * MAX_KW;

/// One output row's window for [`row`]: its in-range input rows in order, and Average's
/// height count.
struct Window<'a> {
    inputs: [&'a [f32]; MAX_KH],
    count: usize,
    height: f32,
    /// The output row.
    zh: usize,
}

/// What does not change from row to row: the reads (chunk `c`'s width tap `t` reads the
/// 16 floats `16 (S c + h) + offset[t]` of an input row, `h < S`, under a mask of those
/// inside the row), the outputs, and Average's width count per output.
struct RowPlan<'a> {
    reads: MaskedTaps<'a>,
    /// The width taps' offsets, for the chunks in `inside`.
    offsets: &'a [isize],
    /// The chunks whose reads are all inside the row: plain loads, no masks.
    inside: std::ops::Range<usize>,
    out_w: usize,
    width: [f32; MAX_CHUNKS * 16],
}

impl RowPlan<'_> {
    /// The plan of `taps`' window, Average's width counts all 1; `None` where its reads
    /// do not check.
    fn new<'a>(g: &Window3d, taps: &'a RowTaps) -> Option<RowPlan<'a>> {
        let ([kw, sw], in_w, chunks) = ([g.kernel[2], g.stride[2]], g.input[2], g.out[2].div_ceil(16));
        let reads = taps.reads()?;
        let offsets = &taps.offsets;
        // Whether chunk c reads only inside the row; chunks further right start further
        // right, so the inside ones are one run.
        let inside = |c: usize| {
            // In i128: a dilation or padding near 2^63 wrapped the end below the row's (a
            // panic in the plain loads, found by review).
            let first = (16 * c * sw) as i128;
            first + offsets[0] as i128 >= 0 && first + offsets[kw - 1] as i128 + 16 * sw as i128 <= in_w as i128
        };
        let lo = (0..chunks).find(|&c| inside(c)).unwrap_or(chunks);
        let inside = lo..(lo..chunks).find(|&c| !inside(c)).unwrap_or(chunks);
        Some(RowPlan { reads, offsets: &offsets[..kw], inside, out_w: g.out[2], width: [1.0; MAX_CHUNKS * 16] })
    }
}

/// [`rows`]'s masked reads: chunk `c`'s width tap `t` reads the 16 floats from
/// `16 v + offsets[t]` of an input row for `v = S c + h`, `h < S`, under the mask of those
/// inside the row.
struct RowTaps {
    offsets: [isize; MAX_KW],
    masks: [u16; ROW_MASKS],
    kw: usize,
    vectors: usize,
    in_w: usize,
}

impl RowTaps {
    /// `None` for widths [`rows`] does not take: strides other than 1 and 2, kernels
    /// wider than [`MAX_KW`], rows of more than [`MAX_CHUNKS`] chunks.
    fn new(g: &Window3d) -> Option<RowTaps> {
        let ([kw, sw, dw], in_w) = ([g.kernel[2], g.stride[2], g.dilation[2]], g.input[2]);
        let chunks = g.out[2].div_ceil(16);
        if !matches!(sw, 1 | 2) || kw == 0 || kw > MAX_KW || chunks > MAX_CHUNKS || in_w >= 1 << 24 {
            return None;
        }
        // Taps that reach past a row of up to 2^24 inputs, from either side, are never
        // read: a window that far apart (a dilation near 2^63) goes to the other paths
        // rather than wrap the offsets (a debug build panicked on the overflow here).
        let reach = (kw - 1).checked_mul(dw);
        if reach.is_none_or(|r| r >= 1 << 40) || g.pad_begin[2] >= 1 << 40 {
            return None;
        }
        let mut t = RowTaps { offsets: [0; MAX_KW], masks: [0; ROW_MASKS], kw, vectors: chunks * sw, in_w };
        for (tw, off) in t.offsets.iter_mut().enumerate().take(kw) {
            *off = (tw * dw) as isize - g.pad_begin[2] as isize;
        }
        for v in 0..t.vectors {
            for k in 0..kw {
                let start = (16 * v) as isize + t.offsets[k];
                let (lo, hi) = ((-start).clamp(0, 16), (in_w as isize - start).clamp(0, 16));
                t.masks[v * kw + k] = first_lanes(hi as usize) & !first_lanes(lo as usize);
            }
        }
        Some(t)
    }

    /// The reads, checked.
    fn reads(&self) -> Option<MaskedTaps<'_>> {
        MaskedTaps::new(self.in_w, &self.offsets[..self.kw], &self.masks[..self.vectors * self.kw])
    }
}

/// Width strides 1 and 2, 1-D and 2-D windows of up to 16 × 16 taps, rows of up to 512
/// outputs: each output row from its input rows in place, see the module's notes. Returns
/// false, writing nothing, for windows it does not take.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
fn rows(x: &[f32], planes: usize, g: &Window3d, pool: Pool, pad_end: [usize; 3], y: &mut [f32]) -> bool {
    let [in_d, _, in_w] = g.input;
    let [out_d, out_h, out_w] = g.out;
    let ([kd, kh, _], [_, sh, sw], [_, dh, _]) = (g.kernel, g.stride, g.dilation);
    let (plane, positions) = (g.plane(), g.positions());
    let two_d = in_d == 1 && out_d == 1 && kd == 1 && taps_in_range(g, 0, 0) == (0..1);
    // The width is RowTaps' to refuse; Average's divisor is h × w in f32, exact while the
    // kernel has fewer than 2^24 taps (16 × 16 here).
    if !two_d || plane == 0 || positions == 0 || kh == 0 || kh > MAX_KH {
        return false;
    }
    let Some(taps) = RowTaps::new(g) else {
        return false;
    };
    let Some(mut plan) = RowPlan::new(g, &taps) else {
        return false;
    };
    for zw in 0..out_w {
        plan.width[zw] = average_count(g, pool, pad_end, 2, zw) as f32;
    }
    for (src, dst) in x.chunks_exact(plane).zip(y.chunks_exact_mut(positions)).take(planes) {
        let mode = match pool {
            Pool::Max if has_nan(src) => MAX_NAN,
            Pool::Max => MAX,
            Pool::Average { .. } => AVERAGE,
        };
        // Up to four output rows with as many input rows run together: four independent
        // chains of maxes or adds.
        let mut zh = 0;
        while zh < out_h {
            let count = taps_in_range(g, 1, zh).len();
            let mut group = [const { Window { inputs: [&[] as &[f32]; MAX_KH], count: 0, height: 0.0, zh: 0 } }; ROWS];
            let mut n = 0;
            while n < ROWS && zh < out_h && taps_in_range(g, 1, zh).len() == count {
                let w = &mut group[n];
                for (r, th) in taps_in_range(g, 1, zh).enumerate() {
                    let sh_in = zh * sh + th * dh - g.pad_begin[1];
                    w.inputs[r] = &src[sh_in * in_w..][..in_w];
                }
                (w.count, w.height, w.zh) = (count, average_count(g, pool, pad_end, 1, zh) as f32, zh);
                n += 1;
                zh += 1;
            }
            let group = &group[..n];
            match (mode, sw, n) {
                (MAX, 1, 4) => rows_of::<MAX, 1, 4>(&plan, group, dst),
                (MAX, 1, _) => rows_of::<MAX, 1, 1>(&plan, group, dst),
                (MAX, _, 4) => rows_of::<MAX, 2, 4>(&plan, group, dst),
                (MAX, _, _) => rows_of::<MAX, 2, 1>(&plan, group, dst),
                (MAX_NAN, 1, _) => rows_of::<MAX_NAN, 1, 1>(&plan, group, dst),
                (MAX_NAN, _, _) => rows_of::<MAX_NAN, 2, 1>(&plan, group, dst),
                (_, 1, 4) => rows_of::<AVERAGE, 1, 4>(&plan, group, dst),
                (_, 1, _) => rows_of::<AVERAGE, 1, 1>(&plan, group, dst),
                (_, _, 4) => rows_of::<AVERAGE, 2, 4>(&plan, group, dst),
                _ => rows_of::<AVERAGE, 2, 1>(&plan, group, dst),
            }
        }
    }
    true
}

/// Output rows run together.
const ROWS: usize = 4;

/// Floats of the width maxima [`max_rows`] holds (64 KiB): the rows of a band of output
/// rows' windows.
const MAXIMA: usize = 16384;
/// Output rows [`max_rows`] takes.
const MAX_OUT_ROWS: usize = 1024;

/// Max windows of 2-D planes, width stride 1 or 2: each in-range input row's width maxima
/// are taken once, 16 outputs at a time (as [`rows`] takes one row's taps), for a band of
/// output rows at a time; each output row is then the max of its input rows' maxima, in
/// order. Same bits as [`rows`]: the merge keeps the earlier of equal taps (and lets the
/// first NaN win), so taking each row's taps first and then the rows in order picks the
/// tap that (h, w) order picks. An input row is read once (once more at a band's edge),
/// not once per output row whose window spans it (3x3 windows of stride 2: 1.5 times; of
/// stride 1: 3 times). Returns false, writing nothing, for windows it does not take.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline(never)]
fn max_rows(x: &[f32], planes: usize, g: &Window3d, y: &mut [f32]) -> bool {
    let (plane, positions) = (g.plane(), g.positions());
    let Some(band) = max_rows_band(g) else {
        return false;
    };
    let Some(taps) = RowTaps::new(g) else {
        return false;
    };
    let Some(plan) = RowPlan::new(g, &taps) else {
        return false;
    };
    // Each output row's input rows, the same for every plane.
    let mut table = [Rows { first: 0, count: 0 }; MAX_OUT_ROWS];
    let windows = &mut table[..g.out[1]];
    for (zh, w) in windows.iter_mut().enumerate() {
        let rows = taps_in_range(g, 1, zh);
        if !rows.is_empty() {
            let first = zh * g.stride[1] + rows.start * g.dilation[1] - g.pad_begin[1];
            *w = Rows { first: first as u32, count: rows.len() as u8 };
        }
    }
    let span = (g.kernel[1] - 1) * g.dilation[1] + 1;
    let pairs = match (g.stride[2], g.kernel[2], g.dilation[2]) {
        (2, k @ (2 | 3), 1) => k,
        _ => 0,
    };
    let windows = Windows { rows: windows, band, span, pairs };
    let mut maxima = [0.0f32; MAXIMA];
    let finds_nan = windows.pairs != 0;
    for (src, dst) in x.chunks_exact(plane).zip(y.chunks_exact_mut(positions)).take(planes) {
        let nan = if finds_nan { maxima_plane::<MAX>(&plan, &windows, g, src, dst, &mut maxima) } else { has_nan(src) };
        if nan {
            maxima_plane::<MAX_NAN>(&plan, &windows, g, src, dst, &mut maxima);
        } else if !finds_nan {
            maxima_plane::<MAX>(&plan, &windows, g, src, dst, &mut maxima);
        }
    }
    true
}

/// One output row's input rows in [`max_rows`]: the first and how many (`dilation` apart).
#[derive(Clone, Copy)]
struct Rows {
    first: u32,
    count: u8,
}

/// [`max_rows`]'s output rows: each one's input rows, and how many run as a band.
struct Windows<'a> {
    rows: &'a [Rows],
    band: usize,
    /// Input rows a window spans.
    span: usize,
    /// The width taps (2 or 3) of a width stride of 2 with no dilation, whose pair loads
    /// find NaNs as they read (`width_pairs`); 0 for other windows, whose planes are
    /// scanned for NaNs first.
    pairs: usize,
}

/// The output rows a band of [`max_rows`] takes (at least 2), `None` for windows it does
/// not take (its rows must also check as [`RowTaps`]): 2-D, a stride no longer than the
/// rows a window spans (no input row is skipped), up to [`MAX_OUT_ROWS`] output rows.
fn max_rows_band(g: &Window3d) -> Option<usize> {
    let two_d = g.input[0] == 1 && g.out[0] == 1 && g.kernel[0] == 1 && taps_in_range(g, 0, 0) == (0..1);
    let (kh, sh) = (g.kernel[1], g.stride[1]);
    // Rows a window spans.
    let span = (kh.max(1) - 1).checked_mul(g.dilation[1])?.checked_add(1)?;
    let fits = two_d && g.plane() > 0 && g.positions() > 0 && kh > 0 && kh <= MAX_KH && (1..=span).contains(&sh);
    if !fits || g.out[1] > MAX_OUT_ROWS || g.input[1] >= u32::MAX as usize {
        return None;
    }
    // A band of b output rows reads (b - 1) sh + span input rows.
    let held = MAXIMA / g.out[2].div_ceil(16).checked_mul(16)?;
    let band = held.checked_sub(span)? / sh + 1;
    (band >= 2).then_some(band)
}

/// One plane of [`max_rows`], a band of output rows at a time: the width maxima of the
/// band's input rows, then its output rows. Returns whether a tap read was NaN, in MODE MAX
/// at width stride 2 with 2 or 3 undilated taps (whose loads cover every position they
/// merge): the plane must then run again in MAX_NAN. Other windows check the plane first.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn maxima_plane<const MODE: u8>(
    plan: &RowPlan<'_>,
    windows: &Windows<'_>,
    g: &Window3d,
    src: &[f32],
    dst: &mut [f32],
    maxima: &mut [f32],
) -> bool {
    let ([_, in_h, in_w], [_, out_h, out_w]) = (g.input, g.out);
    let ([_, sh, sw], dh, pt) = (g.stride, g.dilation[1], g.pad_begin[1]);
    let width = out_w.div_ceil(16) * 16;
    let (span, pairs) = (windows.span, windows.pairs);
    let mut nan = 0u16;
    for z0 in (0..out_h).step_by(windows.band) {
        let z1 = (z0 + windows.band).min(out_h);
        // The band's input rows: every window's rows lie in lo..hi.
        let lo = (z0 * sh).saturating_sub(pt);
        let hi = ((z1 - 1) * sh + span).saturating_sub(pt).min(in_h);
        let lo = lo.min(hi);
        let rows = src[lo * in_w..hi * in_w].chunks_exact(in_w);
        for (input, out) in rows.zip(maxima[..(hi - lo) * width].chunks_exact_mut(width)) {
            match (sw, pairs) {
                (_, 2) => width_pairs::<MODE, 2>(plan, input, out, &mut nan),
                (_, 3) => width_pairs::<MODE, 3>(plan, input, out, &mut nan),
                (1, _) => width_maxima::<MODE, 1>(plan, input, out),
                _ => width_maxima::<MODE, 2>(plan, input, out),
            }
        }
        for (w, out) in windows.rows[z0..z1].iter().zip(dst[z0 * out_w..z1 * out_w].chunks_exact_mut(out_w)) {
            let (first, count) = ((w.first as usize).wrapping_sub(lo), w.count as usize);
            for (c, out) in out.chunks_mut(16).enumerate() {
                let mut acc = identity::<MODE>();
                for i in 0..count {
                    let v = load16(maxima[(first + i * dh) * width + 16 * c..][..16].try_into().unwrap());
                    acc = if i == 0 { v } else { merge::<MODE>(acc, v, 0xffff) };
                }
                store_first(out, out.len(), acc);
            }
        }
    }
    MODE == MAX && nan != 0
}

/// The output rows of `group` (all of it at `R` = 4 rows, or one at a time at `R` = 1),
/// chunk by chunk: plain loads for the chunks inside the row, masked ones at its ends.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline(never)]
fn rows_of<const MODE: u8, const S: usize, const R: usize>(plan: &RowPlan<'_>, group: &[Window<'_>], dst: &mut [f32]) {
    for rows in group.chunks_exact(R) {
        let rows: &[Window<'_>; R] = rows.try_into().unwrap();
        for c in 0..plan.out_w.div_ceil(16) {
            let acc = if plan.inside.contains(&c) {
                inside::<MODE, S, R>(plan, rows, c)
            } else {
                border::<MODE, S, R>(plan, rows, c)
            };
            finish::<MODE, R>(plan, rows, c, acc, dst);
        }
    }
}

/// [`width_maxima`] at width stride 2 for `K` = 2 or 3 undilated taps: the 32 positions
/// of a chunk's first tap are loaded once and split into their even (tap 0) and odd
/// (tap 1) positions; tap 2 is the even ones moved down a lane, the last from the next
/// position. Two loads and two permutes per 16 outputs (one load and one permute per tap
/// in `width_maxima`). Same taps in the same order, the identity outside the row.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn width_pairs<const MODE: u8, const K: usize>(plan: &RowPlan<'_>, input: &[f32], out: &mut [f32], nan: &mut u16) {
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    let fill = identity::<MODE>();
    let first = plan.offsets[0];
    for (c, out) in out.chunks_exact_mut(16).enumerate() {
        let base = 32 * c as isize + first;
        let (a, b, next) = if plan.inside.contains(&c) {
            // `inside` checked that the chunk's taps, 32 + K - 1 positions, are in the row.
            let block = &input[base as usize..][..32 + K - 1];
            let next = if K == 3 { _mm512_set1_ps(block[K + 29]) } else { fill };
            (load16(block[..16].try_into().unwrap()), load16(block[16..32].try_into().unwrap()), next)
        } else {
            let next = match usize::try_from(base + 32).ok().and_then(|i| input.get(i)) {
                Some(&v) if K == 3 => _mm512_set1_ps(v),
                _ => fill,
            };
            (plan.reads.load_or(input, 2 * c, 0, fill), plan.reads.load_or(input, 2 * c + 1, 0, fill), next)
        };
        if MODE == MAX {
            // Every position a chunk merges is in `a`, `b` or `next` (identity outside).
            *nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, b) | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(next, next);
        }
        let (e, o) = (_mm512_permutex2var_ps(a, evens, b), _mm512_permutex2var_ps(a, odds, b));
        let mut acc = merge::<MODE>(e, o, 0xffff);
        if K == 3 {
            let shifted = _mm512_alignr_epi32::<1>(_mm512_castps_si512(next), _mm512_castps_si512(e));
            acc = merge::<MODE>(acc, _mm512_castsi512_ps(shifted), 0xffff);
        }
        store16(out.try_into().unwrap(), acc);
    }
}

/// One input row's width maxima, 16 outputs at a time into `out` (whole chunks): the
/// taps of the row's positions `16 v..16 v + 16` are merged in order (position `i` takes
/// `i + offset[t]`, plain loads inside the row, masked ones at its ends with the identity
/// outside), and at stride 2 the even positions of two such vectors kept: one permute per
/// 16 outputs, not one per tap. The first tap starts each merge: `merge(identity, v)` is
/// `v` bit for bit (an equal -inf keeps the identity's same bits; a NaN wins in MAX_NAN).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn width_maxima<const MODE: u8, const S: usize>(plan: &RowPlan<'_>, input: &[f32], out: &mut [f32]) {
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let fill = identity::<MODE>();
    let (offsets, taps) = (plan.offsets, plan.reads.taps());
    for (c, out) in out.chunks_exact_mut(16).enumerate() {
        let mut part = [fill; S];
        for (h, part) in part.iter_mut().enumerate() {
            let v = S * c + h;
            *part = if plan.inside.contains(&c) {
                let at = |t: usize| (16 * v as isize + offsets[t]) as usize;
                let mut acc = load16(input[at(0)..at(0) + 16].try_into().unwrap());
                for t in 1..offsets.len() {
                    acc = merge::<MODE>(acc, load16(input[at(t)..at(t) + 16].try_into().unwrap()), 0xffff);
                }
                acc
            } else {
                let mut acc = plan.reads.load_or(input, v, 0, fill);
                for t in 1..taps {
                    acc = merge::<MODE>(acc, plan.reads.load_or(input, v, t, fill), 0xffff);
                }
                acc
            };
        }
        let h = if S == 1 { part[0] } else { _mm512_permutex2var_ps(part[0], evens, part[S - 1]) };
        store16(out.try_into().unwrap(), h);
    }
}

/// Chunk `c` of each row, all of whose reads are inside the row: plain loads.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn inside<const MODE: u8, const S: usize, const R: usize>(
    plan: &RowPlan<'_>,
    rows: &[Window<'_>; R],
    c: usize,
) -> [__m512; R] {
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let mut acc = [identity::<MODE>(); R];
    let first = (16 * c * S) as isize;
    for i in 0..rows[0].count {
        for &off in plan.offsets {
            let at = (first + off) as usize;
            for (w, acc) in rows.iter().zip(&mut acc) {
                let part = &w.inputs[i][at..at + 16 * S];
                let v = if S == 1 {
                    load16(part.try_into().unwrap())
                } else {
                    let (a, b) = part.split_at(16);
                    _mm512_permutex2var_ps(load16(a.try_into().unwrap()), evens, load16(b.try_into().unwrap()))
                };
                *acc = merge::<MODE>(*acc, v, 0xffff);
            }
        }
    }
    acc
}

/// Chunk `c` of each row, some of whose reads fall outside the row: each 16 floats under
/// the mask of those inside, with the identity in the others; and at stride 2 the even
/// lanes of two.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn border<const MODE: u8, const S: usize, const R: usize>(
    plan: &RowPlan<'_>,
    rows: &[Window<'_>; R],
    c: usize,
) -> [__m512; R] {
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let fill = identity::<MODE>();
    let mut acc = [fill; R];
    for i in 0..rows[0].count {
        for t in 0..plan.reads.taps() {
            for (w, acc) in rows.iter().zip(&mut acc) {
                let input = w.inputs[i];
                let x = if S == 1 {
                    plan.reads.load_or(input, c, t, fill)
                } else {
                    let (a, b) =
                        (plan.reads.load_or(input, 2 * c, t, fill), plan.reads.load_or(input, 2 * c + 1, t, fill));
                    _mm512_permutex2var_ps(a, evens, b)
                };
                *acc = merge::<MODE>(*acc, x, 0xffff);
            }
        }
    }
    acc
}

/// Stores chunk `c` of each row (a row's last chunk may be part of one), Average's over
/// their counts.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn finish<const MODE: u8, const R: usize>(
    plan: &RowPlan<'_>,
    rows: &[Window<'_>; R],
    c: usize,
    acc: [__m512; R],
    dst: &mut [f32],
) {
    let zw = 16 * c;
    let n = (plan.out_w - zw).min(16);
    for (w, mut v) in rows.iter().zip(acc) {
        if MODE == AVERAGE {
            let count = _mm512_mul_ps(_mm512_set1_ps(w.height), load16(plan.width[zw..zw + 16].try_into().unwrap()));
            v = _mm512_div_ps(v, _mm512_max_ps(count, _mm512_set1_ps(1.0)));
        }
        let out = &mut dst[w.zh * plan.out_w + zw..];
        if n == 16 {
            store16((&mut out[..16]).try_into().unwrap(), v);
        } else {
            store_first(out, n, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The windows of the light CNNs take the in-place paths, not the portable rows: a
    /// window a path refuses still gets the right bits, only slower, so the bit-for-bit
    /// tests cannot see it. (The checks that build each path's reads once refused every
    /// stride-2 row, found by timing.)
    #[test]
    fn the_cnns_windows_take_the_avx512_paths() {
        // (input size, kernel, stride, pad, one more output as ceil mode gives)
        let same = [(7, 3, 1, 1, 0), (14, 3, 1, 1, 0), (28, 3, 1, 1, 0), (56, 3, 1, 1, 0), (112, 3, 1, 1, 0)];
        let other = [
            (112, 3, 2, 1, 0),
            (111, 3, 2, 0, 1),
            (109, 3, 2, 0, 1),
            (27, 3, 2, 0, 1),
            (13, 3, 2, 0, 1),
            (28, 3, 1, 0, 0),
            (56, 2, 2, 0, 0),
            (14, 2, 2, 0, 0),
            (416, 2, 2, 0, 0),
        ];
        for (hw, k, s, p, extra) in same {
            let g = Window3d::cube(2, hw, k, s, 1, p, extra).unwrap();
            let taps = SameTaps::new(&g, g.pad_begin);
            assert!(taps.as_ref().and_then(|t| t.reads()).is_some(), "same {hw} k{k} s{s} p{p}");
        }
        for (hw, k, s, p, extra) in other {
            let g = Window3d::cube(2, hw, k, s, 1, p, extra).unwrap();
            assert!(SameTaps::new(&g, g.pad_begin).is_none(), "{hw} k{k} s{s} p{p} is not same-size");
            assert!(RowTaps::new(&g).as_ref().and_then(|t| t.reads()).is_some(), "rows {hw} k{k} s{s} p{p}");
            assert!(max_rows_band(&g).is_some(), "max rows {hw} k{k} s{s} p{p}");
        }
    }
}
