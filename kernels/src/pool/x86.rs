//! The AVX-512 build of the float pools: a safe `#[target_feature]` function that
//! `arch::dispatch` calls once an `Isa` proves the features; loads and stores go through
//! `arch::mem`'s slice-taking helpers.
//!
//! A row of outputs runs 16 at a time in one register: all the window's taps, in (d, h, w)
//! order, are merged into it before one store. Each width tap has a lane mask per chunk
//! (the outputs whose tap is in the input row, worked out once per call), so the borders
//! take the same path as the interior: a masked-off lane reads nothing and keeps its value.
//! Up to four rows with the same taps run together, so four chains of dependent adds or
//! maxes overlap. A width stride of 2 loads 32 inputs and keeps the even lanes. Every
//! output takes its in-range taps in the tap-by-tap definition's order, so Average's sums
//! and Max (NaN wins, ties keep the earlier tap) have its bits; only a NaN's payload may
//! differ.

use std::arch::x86_64::*;

use super::{average_count, taps_in_range, Pool};
use crate::arch::mem::{load16, load_lanes, store_first};
use crate::conv::Window3d;

/// Lanes per chunk.
const LANES: usize = 16;
/// Rows per group.
const ROWS: usize = 4;
/// The widest output row and kernel this build takes; wider ones take the portable rows.
const MAX_CHUNKS: usize = 16;
const MAX_KW: usize = 16;

/// Per chunk of a row and width tap: the lanes whose tap is in the row, and for stride 2
/// the same lanes as positions in the 32 inputs loaded (the even ones of two vectors).
type TapLanes = [[[u16; 3]; MAX_KW]; MAX_CHUNKS];

/// One group of output rows that share their taps: the input index (in the plane) of each
/// row's first in-range tap before the width offsets, where the row's outputs go, and the
/// row's depth × height count for Average's divisor.
struct Group {
    base: [usize; ROWS],
    out: [usize; ROWS],
    count: [f32; ROWS],
    rows: usize,
    /// In-range taps along depth and height, and the input step of one along each.
    taps_d: usize,
    taps_h: usize,
    step_d: usize,
    step_h: usize,
}

/// Sets bit `2k` for each bit `k` of the low 8 bits of `b`.
fn spread(b: u16) -> u16 {
    (0..8).filter(|k| b >> k & 1 == 1).fold(0, |r, k| r | 1 << (2 * k))
}

/// See [`super::pool`]. Width strides other than 1 and 2, rows of more than 256 outputs,
/// kernels wider than 16 and kernels of 2^24 taps or more take the portable rows.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn pool_avx512(x: &[f32], planes: usize, g: &Window3d, pool: Pool, pad_end: [usize; 3], y: &mut [f32]) {
    let (plane, positions) = (g.plane(), g.positions());
    let [_, in_h, in_w] = g.input;
    let [out_d, out_h, out_w] = g.out;
    let kw = g.kernel[2];
    // Average's divisor is (d × h) × w in f32, exact while the kernel has fewer than 2^24
    // taps (each count is at most the kernel's); past that it would round twice.
    let huge = g.kernel.iter().product::<usize>() >= 1 << 24;
    if plane == 0
        || positions == 0
        || !matches!(g.stride[2], 1 | 2)
        || kw > MAX_KW
        || out_w > MAX_CHUNKS * LANES
        || huge
    {
        return super::pool_rows(x, planes, g, pool, pad_end, y);
    }
    let mut lanes: TapLanes = [[[0; 3]; MAX_KW]; MAX_CHUNKS];
    // Average's width count of each output.
    let mut width = [[0.0f32; LANES]; MAX_CHUNKS];
    for zw in 0..out_w {
        let (ci, l) = (zw / LANES, zw % LANES);
        for tw in taps_in_range(g, 2, zw) {
            lanes[ci][tw][0] |= 1 << l;
        }
        width[ci][l] = average_count(g, pool, pad_end, 2, zw) as f32;
    }
    for tap in lanes.iter_mut().flatten() {
        (tap[1], tap[2]) = (spread(tap[0] & 0xff), spread(tap[0] >> 8));
    }
    for (src, dst) in x.chunks_exact(plane).zip(y.chunks_exact_mut(positions)).take(planes) {
        for zd in 0..out_d {
            let kd = taps_in_range(g, 0, zd);
            let cd = average_count(g, pool, pad_end, 0, zd);
            let mut zh = 0;
            while zh < out_h {
                let taps_h = taps_in_range(g, 1, zh).len();
                let mut group = Group {
                    base: [0; ROWS],
                    out: [0; ROWS],
                    count: [1.0; ROWS],
                    rows: 0,
                    taps_d: kd.len(),
                    taps_h,
                    step_d: g.dilation[0] * in_h * in_w,
                    step_h: g.dilation[1] * in_w,
                };
                // The next rows with as many height taps, up to ROWS.
                while group.rows < ROWS && zh < out_h {
                    let kh = taps_in_range(g, 1, zh);
                    if kh.len() != taps_h {
                        break;
                    }
                    let r = group.rows;
                    if !kd.is_empty() && !kh.is_empty() {
                        let sd = zd * g.stride[0] + kd.start * g.dilation[0] - g.pad_begin[0];
                        let sh = zh * g.stride[1] + kh.start * g.dilation[1] - g.pad_begin[1];
                        group.base[r] = (sd * in_h + sh) * in_w;
                    }
                    group.out[r] = (zd * out_h + zh) * out_w;
                    group.count[r] = (cd * average_count(g, pool, pad_end, 1, zh)) as f32;
                    group.rows += 1;
                    zh += 1;
                }
                let rows = (src, &mut *dst, g, pool, &group, &lanes, &width);
                match group.rows {
                    4 => run_rows::<4>(rows),
                    3 => run_rows::<3>(rows),
                    2 => run_rows::<2>(rows),
                    _ => run_rows::<1>(rows),
                }
            }
        }
    }
}

/// What [`run_rows`] reads and writes: a plane's input and output, the window, the pool,
/// the rows and the per-chunk lanes and width counts.
type Rows<'a> = (&'a [f32], &'a mut [f32], &'a Window3d, Pool, &'a Group, &'a TapLanes, &'a [[f32; LANES]; MAX_CHUNKS]);

/// The `R` rows of a group, 16 outputs at a time.
/// Kept out of line: inlined four times into [`pool_avx512`], Average ran up to 12%
/// slower (best of six interleaved pool_bench runs) and Max within 3%.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline(never)]
fn run_rows<const R: usize>((src, dst, g, pool, group, lanes, width): Rows<'_>) {
    let out_w = g.out[2];
    let (s, kw, dil, pad) = (g.stride[2], g.kernel[2], g.dilation[2], g.pad_begin[2] as isize);
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let init = _mm512_set1_ps(if pool == Pool::Max { f32::NEG_INFINITY } else { 0.0 });
    for (ci, c) in (0..out_w).step_by(LANES).enumerate() {
        let n = (out_w - c).min(LANES);
        let first = (c * s) as isize - pad;
        let mut acc = [init; R];
        let mut nan = [0u16; R];
        for a in 0..group.taps_d {
            for b in 0..group.taps_h {
                let row = (a * group.step_d + b * group.step_h) as isize + first;
                for (tw, &[mask, low, high]) in lanes[ci].iter().enumerate().take(kw) {
                    if mask == 0 {
                        continue;
                    }
                    let off = row + (tw * dil) as isize;
                    for i in 0..R {
                        let at = group.base[i] as isize + off;
                        let v = if s == 1 {
                            load_lanes(src, at, mask)
                        } else {
                            let (l, h) = (load_lanes(src, at, low), load_lanes(src, at + 16, high));
                            _mm512_permutex2var_ps(l, evens, h)
                        };
                        match pool {
                            Pool::Max => {
                                // `v > acc ? v : acc` (ties keep the earlier tap); a NaN tap is
                                // marked and wins at the end, as in `max_step`.
                                acc[i] = _mm512_mask_max_ps(acc[i], mask, v, acc[i]);
                                nan[i] |= _mm512_mask_cmp_ps_mask::<_CMP_UNORD_Q>(mask, v, v);
                            }
                            Pool::Average { .. } => acc[i] = _mm512_mask_add_ps(acc[i], mask, acc[i], v),
                        }
                    }
                }
            }
        }
        let widths = load16(&width[ci]);
        for i in 0..R {
            let v = match pool {
                Pool::Max => _mm512_mask_mov_ps(acc[i], nan[i], _mm512_set1_ps(f32::NAN)),
                Pool::Average { .. } => {
                    // (d × h) × w, exact in f32 as in the scalar divisor; an empty window's 0
                    // divides by 1.
                    let count = _mm512_mul_ps(_mm512_set1_ps(group.count[i]), widths);
                    _mm512_div_ps(acc[i], _mm512_max_ps(count, _mm512_set1_ps(1.0)))
                }
            };
            store_first(&mut dst[group.out[i] + c..], n, v);
        }
    }
}
