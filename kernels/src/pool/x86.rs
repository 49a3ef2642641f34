//! The AVX-512 build of the float pools: safe `#[target_feature]` functions that
//! `arch::dispatch` calls once an `Isa` proves the features; loads and stores go through
//! `arch::mem`'s slice-taking helpers. Two paths, both reading the input in place:
//!
//! - [`same_size`]: stride-1 2-D windows whose output is the input's size ("same" pools).
//!   A plane runs as one flat row of outputs, 16 at a time, each tap one masked load at an
//!   offset shared by all outputs, so a 7x7 plane is 4 vectors, not 7 part-empty rows.
//! - [`rows`]: width strides 1 and 2, any other window. An output row runs 16 outputs at a
//!   time; each tap of each in-range input row is one load (stride 1) or two loads and a
//!   permute that keeps the even lanes (stride 2). Only the chunks at a row's ends load
//!   under a mask, with the pool's identity (-inf for Max, +0 for Average) in the lanes
//!   outside the input row.
//!
//! The identities change nothing: `max(acc, -inf)` keeps `acc`, and `acc + 0.0` is `acc`
//! bit for bit because a sum that starts at +0 is never -0. Every output takes its taps in
//! (h, w) order from the identity, so it has the bits of the tap-by-tap definition:
//! Average's sum in tap order over its exact count, Max's largest tap with ties kept by the
//! earlier (`vmaxps(v, acc)` is `v > acc ? v : acc`; the sign of a zero shows which). A
//! NaN wins a Max window: a plane is scanned for NaNs first, and only a plane with one
//! takes the compare per tap that lets a NaN win; only its payload may differ.

use std::arch::x86_64::*;

use super::{average_count, taps_in_range, Pool};
use crate::arch::mem::{load16, store16, store_first, MaskedTaps};
use crate::conv::Window3d;

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
    if !same_size(x, planes, g, pool, pad_end, y) && !rows(x, planes, g, pool, pad_end, y) {
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
    let mut nan = 0u16;
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        let v = load16(c.try_into().unwrap());
        nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
    }
    nan != 0 || chunks.remainder().iter().any(|v| v.is_nan())
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
    let ([kd, kh, kw], [_, sh, sw], [_, dh, _]) = (g.kernel, g.stride, g.dilation);
    let (plane, positions) = (g.plane(), g.positions());
    let two_d = in_d == 1 && out_d == 1 && kd == 1 && taps_in_range(g, 0, 0) == (0..1);
    // The width is RowTaps' to refuse; Average's divisor is h × w in f32, exact while the
    // kernel has fewer than 2^24 taps (16 × 16 here).
    if !two_d || plane == 0 || positions == 0 || kh == 0 || kh > MAX_KH {
        return false;
    }
    let chunks = out_w.div_ceil(16);
    let Some(taps) = RowTaps::new(g) else {
        return false;
    };
    let Some(reads) = taps.reads() else {
        return false;
    };
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
    let mut plan = RowPlan { reads, offsets: &offsets[..kw], inside, out_w, width: [1.0; MAX_CHUNKS * 16] };
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
        }
    }
}
