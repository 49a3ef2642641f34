//! The AVX-512 depthwise convolution of stride-1 2-D windows whose output is the input's
//! size (3x3 and 5x5 with "same" padding, most of MobileNet's and EfficientNet's) on
//! planes of up to 32x32: straight
//! from the input, with no padded copy and no packing of the output. Output `m` of a plane
//! and its tap `(th, tw)` read input `m + (th·dh - pt)·w + tw·dw - pl`, an offset shared by
//! all outputs, so a plane runs 16 outputs a vector over the whole flat plane, each tap one
//! masked load (the pools' `SameTaps`: the lanes whose tap is in the input, zero in the
//! others) and one fused multiply-add. Every output sums all its taps in (h, w) order from
//! 0, the padding ones as `w * 0`, then adds the bias (or 0), as the 2-D path does: the same
//! bits.

use std::arch::x86_64::*;
use std::ops::Range;

use crate::arch::mem::{load16, load_lanes, store_first};
use crate::conv::Window3d;
use crate::gemm::Epilogue;
use crate::pool::x86::SameTaps;

/// The largest plane this path takes. Against the 2-D path (padded phase planes, three
/// taps a pass), one Conv at one thread, Rivet/ORT: 960 channels of 7x7 1.90 against
/// 3.56, 576 of 14x14 1.22 against 1.54, 192 of 28x28 and 144 of 56x56 the same within
/// noise (1.36-1.44, 1.23-1.36), 32 of 112x112 1.51 against 1.37.
const MAX_PLANE: usize = 1024;

/// See [`super::depthwise_planes`]; returns false, writing nothing, for windows this path
/// does not take.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn same_size(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    planes: Range<usize>,
    channels: usize,
    g: &Window3d,
    y: &mut [f32],
    epilogue: &Epilogue<'_>,
) -> bool {
    // A convolution's output is the input's size only when each axis pads its span less
    // one: what the pools' path checks against the padding after.
    if g.kernel.contains(&0) || channels == 0 || g.plane() > MAX_PLANE {
        return false;
    }
    let Some(pad_end) = [0, 1, 2].iter().try_fold([0; 3], |mut e, &a| {
        e[a] = (g.kernel[a] - 1).checked_mul(g.dilation[a])?.checked_sub(g.pad_begin[a])?;
        Some(e)
    }) else {
        return false;
    };
    let Some(taps) = SameTaps::new(g, pad_end) else {
        return false;
    };
    let Some(reads) = taps.reads() else {
        return false;
    };
    let (plane, count) = (g.plane(), reads.taps());
    let first = planes.start;
    for p in planes {
        let c = p % channels;
        let wc = &w[c * count..][..count];
        let b = _mm512_set1_ps(bias.map_or(0.0, |b| b[c]));
        let src = &x[(p - first) * plane..][..plane];
        let dst = &mut y[(p - first) * plane..][..plane];
        for v in 0..plane.div_ceil(16) {
            let mut acc = _mm512_setzero_ps();
            for (t, &wt) in wc.iter().enumerate() {
                let (xv, _) = reads.load(src, v, t);
                acc = _mm512_fmadd_ps(_mm512_set1_ps(wt), xv, acc);
            }
            store_first(&mut dst[v * 16..], (plane - v * 16).min(16), _mm512_add_ps(acc, b));
        }
        epilogue.apply_rows(dst, plane, p..p + 1);
    }
    true
}

/// The AVX-512 depthwise convolution of stride-1 undilated 2-D windows of 3x3 and 5x5
/// with "same" padding before each axis (1 and 2), on planes of any size: each output row
/// from its input rows in place, 16 outputs at a time, with no padded copy and no grid.
/// An input row is read as whole vectors of 16 columns; the taps left and right of a
/// chunk are those vectors moved by a permute of two neighbours (the lanes past the row
/// are zero, as the padding), and each tap is one fused multiply-add. Every output sums
/// all its taps in (h, w) order from 0, the padding ones (rows outside the input too) as
/// `w * 0`, then adds the bias: the bits of the 2-D path. Returns false, writing nothing,
/// for windows it does not take.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn rows(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    planes: Range<usize>,
    channels: usize,
    g: &Window3d,
    y: &mut [f32],
    epilogue: &Epilogue<'_>,
) -> bool {
    let k = g.kernel[1];
    let fits = rows_fit(g) && channels > 0;
    if !fits {
        return false;
    }
    let (plane, positions) = (g.plane(), g.positions());
    let first = planes.start;
    for p in planes {
        let c = p % channels;
        let b = bias.map_or(0.0, |b| b[c]);
        let src = &x[(p - first) * plane..][..plane];
        let dst = &mut y[(p - first) * positions..][..positions];
        match (k, g.stride[2]) {
            (3, 1) => plane_rows::<3, 1, 4>(src, &w[c * 9..][..9], b, g, dst),
            (3, _) => plane_rows_s2(src, &w[c * 9..][..9], b, g, dst),
            _ => plane_rows::<5, 2, 2>(src, &w[c * 25..][..25], b, g, dst),
        }
        epilogue.apply_rows(dst, positions, p..p + 1);
    }
    true
}

/// Whether [`rows`] takes a window: 2-D, 3x3 or 5x5 with "same" padding before each
/// row (up to the kernel less one above), undilated, stride 1 (or 2, 3x3 only).
fn rows_fit(g: &Window3d) -> bool {
    let k = g.kernel[1];
    g.input[0] == 1
        && g.out[0] == 1
        && g.kernel[0] == 1
        && g.kernel[2] == k
        && matches!(k, 3 | 5)
        && (g.stride == [1; 3] || (g.stride == [1, 2, 2] && k == 3))
        && g.dilation == [1; 3]
        && g.pad_begin[1] < k
        && g.pad_begin[2] == k / 2
        && g.plane() > 0
        && g.positions() > 0
}

/// Whether [`rows`] runs before the channels-last and same-size paths: 3x3 windows on
/// rows of 14 outputs or more. One thread, us, channels last or same size -> rows:
/// 576x14x14 68 -> 50-60, 384x14x14 45 -> 32, 144x28x28 69 -> 35; 1152x7x7 37 -> 62 and
/// 5x5 windows (672x14x14 146 -> 163) stay as they were.
pub(crate) fn rows_first(g: &Window3d) -> bool {
    g.kernel[2] == 3 && g.out[2] >= 14
}

/// Columns `16 j..16 j + 16` of an input row, zero past its end.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn columns(row: &[f32], j: usize) -> __m512 {
    if 16 * j + 16 <= row.len() {
        load16(row[16 * j..16 * j + 16].try_into().unwrap())
    } else if 16 * j < row.len() {
        load_lanes(row, 16 * j as isize, ((1u32 << (row.len() - 16 * j)) - 1) as u16)
    } else {
        _mm512_setzero_ps()
    }
}

/// One plane of [`rows`] for a `K`x`K` window padded by `PL` columns before, `R` output
/// rows at a time (then one at a time): [`row_group`].
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn plane_rows<const K: usize, const PL: usize, const R: usize>(
    src: &[f32],
    wc: &[f32],
    bias: f32,
    g: &Window3d,
    dst: &mut [f32],
) {
    let mut weights = [_mm512_setzero_ps(); 25];
    for (wv, &wt) in weights.iter_mut().zip(&wc[..K * K]) {
        *wv = _mm512_set1_ps(wt);
    }
    let out_w = g.out[2];
    let mut zh = 0;
    for out in dst.chunks_exact_mut(R * out_w) {
        row_group::<K, PL, R>(src, &weights, bias, g, zh, out);
        zh += R;
    }
    for out in dst[zh * out_w..].chunks_exact_mut(out_w) {
        row_group::<K, PL, 1>(src, &weights, bias, g, zh, out);
        zh += 1;
    }
}

/// Output rows `zh..zh + R` of a plane of [`rows`] (`out` holds them): output chunk `c`
/// takes, from each of the group's `R + K - 1` input rows in order, the vectors of columns
/// before, at and after it (`prev`, `cur`, `next`), and tap `tw` reads the 16 columns from
/// `16 c + tw - PL`: `cur` itself, or a permute of `prev` and `cur` (left of it) or of
/// `cur` and `next` (right). Each input row's taps are made once for the output rows
/// whose windows hold it, each of those rows' sums a chain of its own (R chains run
/// together). A row outside the input is all zeros.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn row_group<const K: usize, const PL: usize, const R: usize>(
    src: &[f32],
    weights: &[__m512; 25],
    bias: f32,
    g: &Window3d,
    zh: usize,
    out: &mut [f32],
) {
    let ([_, in_h, in_w], [_, _, out_w]) = (g.input, g.out);
    let lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // Tap tw reads from `shift` = tw - PL on: lanes `16 + shift..` of (prev, cur) when
    // left of the chunk, `shift..` of (cur, next) when right.
    let mut index = [lanes; K];
    for (tw, index) in index.iter_mut().enumerate() {
        *index = _mm512_add_epi32(lanes, _mm512_set1_epi32(((16 + tw - PL) % 16) as i32));
    }
    let (zero, b) = (_mm512_setzero_ps(), _mm512_set1_ps(bias));
    // The group's input rows; one outside the input is empty (all zeros). At most
    // 4 + 5 - 1 of them.
    let mut inputs = [&[] as &[f32]; 8];
    for (j, input) in inputs.iter_mut().enumerate().take(R + K - 1) {
        let r = (zh + j).wrapping_sub(g.pad_begin[1]);
        if r < in_h {
            *input = &src[r * in_w..][..in_w];
        }
    }
    let mut prev = [zero; 8];
    let mut cur = [zero; 8];
    for j in 0..R + K - 1 {
        cur[j] = columns(inputs[j], 0);
    }
    for c in 0..out_w.div_ceil(16) {
        let mut acc = [zero; R];
        for j in 0..R + K - 1 {
            let next = columns(inputs[j], c + 1);
            let mut taps = [zero; K];
            for (tw, tap) in taps.iter_mut().enumerate() {
                *tap = if tw < PL {
                    _mm512_permutex2var_ps(prev[j], index[tw], cur[j])
                } else if tw == PL {
                    cur[j]
                } else {
                    _mm512_permutex2var_ps(cur[j], index[tw], next)
                };
            }
            // Input row j is row th = j - r of output row r's window.
            for (r, acc) in acc.iter_mut().enumerate() {
                if (r..r + K).contains(&j) {
                    for (tw, &tap) in taps.iter().enumerate() {
                        *acc = _mm512_fmadd_ps(tap, weights[(j - r) * K + tw], *acc);
                    }
                }
            }
            (prev[j], cur[j]) = (cur[j], next);
        }
        let n = (out_w - 16 * c).min(16);
        for (r, &acc) in acc.iter().enumerate() {
            let v = _mm512_add_ps(acc, b);
            let out = &mut out[r * out_w + 16 * c..][..n];
            store_first(out, n, v);
        }
    }
}

/// [`plane_rows`] for 3x3 windows at stride 2 (padded by 1 before): the 32 columns under
/// a chunk of 16 outputs are split into their even and odd columns (two loads, two
/// permutes); output `o` takes columns `2 o - 1`, `2 o` and `2 o + 1`: the odd ones moved
/// back a lane across the chunk before (a permute), the even ones, the odd ones.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn plane_rows_s2(src: &[f32], wc: &[f32], bias: f32, g: &Window3d, dst: &mut [f32]) {
    let ([_, in_h, in_w], [_, _, out_w]) = (g.input, g.out);
    let pt = g.pad_begin[1];
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    // Lanes 15.. of (the chunk before's, this chunk's): one output back.
    let back = _mm512_setr_epi32(15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30);
    let mut weights = [_mm512_setzero_ps(); 9];
    for (wv, &wt) in weights.iter_mut().zip(&wc[..9]) {
        *wv = _mm512_set1_ps(wt);
    }
    let (zero, b) = (_mm512_setzero_ps(), _mm512_set1_ps(bias));
    for (zh, out) in dst.chunks_exact_mut(out_w).enumerate() {
        let mut inputs = [&[] as &[f32]; 3];
        for (th, input) in inputs.iter_mut().enumerate() {
            let r = (2 * zh + th).wrapping_sub(pt);
            if r < in_h {
                *input = &src[r * in_w..][..in_w];
            }
        }
        // Each row's odd columns of the chunk before (zero before the row).
        let mut before = [zero; 3];
        for (c, out) in out.chunks_mut(16).enumerate() {
            let mut acc = zero;
            for th in 0..3 {
                let (lo, hi) = (columns(inputs[th], 2 * c), columns(inputs[th], 2 * c + 1));
                let (even, odd) = (_mm512_permutex2var_ps(lo, evens, hi), _mm512_permutex2var_ps(lo, odds, hi));
                let left = _mm512_permutex2var_ps(before[th], back, odd);
                acc = _mm512_fmadd_ps(left, weights[3 * th], acc);
                acc = _mm512_fmadd_ps(even, weights[3 * th + 1], acc);
                acc = _mm512_fmadd_ps(odd, weights[3 * th + 2], acc);
                before[th] = odd;
            }
            let v = _mm512_add_ps(acc, b);
            store_first(out, out.len(), v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::depthwise::{depthwise, depthwise_2d};

    /// Windows the rows path takes with padding above other than the columns' (0 to k - 1
    /// rows), odd and even output heights (the rows left after the groups of 4 or 2),
    /// widths that are whole vectors and not, at stride 1 and 2: the dispatched path gives
    /// the 2-D path's bits. (Found by review: none of these was in a test.)
    #[test]
    fn rows_with_any_padding_above_and_any_width_give_the_2d_paths_bits() {
        let mut taken = 0;
        for (h, w) in [(37, 32), (22, 48), (19, 40), (5, 16)] {
            for (k, stride) in [(3, 1), (3, 2), (5, 1)] {
                for pt in 0..k {
                    for pad_end in [0, k - 1] {
                        let out = |len: usize, pb: usize| (len + pb + pad_end).checked_sub(k).map(|n| n / stride + 1);
                        let (Some(oh), Some(ow)) = (out(h, pt), out(w, k / 2)) else { continue };
                        let g = Window3d {
                            input: [1, h, w],
                            out: [1, oh, ow],
                            kernel: [1, k, k],
                            stride: [1, stride, stride],
                            dilation: [1; 3],
                            pad_begin: [0, pt, k / 2],
                        };
                        taken += rows_fit(&g) as usize;
                        let ch = 3;
                        let x = crate::test_values(ch * g.plane(), (h * w + k + pt) as u64);
                        let wt = crate::test_values(ch * k * k, 5);
                        let bias = crate::test_values(ch, 6);
                        let mut got = vec![f32::NAN; ch * g.positions()];
                        depthwise(&x, &wt, Some(&bias), ch, ch, &g, &mut got);
                        let mut want = vec![f32::NAN; ch * g.positions()];
                        let none = Epilogue::default();
                        depthwise_2d::<true>(&x, &wt, Some(&bias), 0..ch, ch, &g, &mut want, &none, &mut Vec::new());
                        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&got), bits(&want), "{g:?}");
                    }
                }
            }
        }
        assert!(taken > 40, "{taken} windows on the rows path");
    }

    /// MobileNet's and EfficientNet's depthwise windows on planes of 14 or more take the
    /// rows path (a window it refuses gets the same bits from another path, only slower,
    /// so the bit-for-bit tests cannot see it); 5x5 of stride 2 and 7x7 planes do not.
    #[test]
    fn the_cnns_wide_depthwise_windows_take_the_rows_path() {
        // (plane side, kernel, stride)
        for (hw, k, s) in [(112, 3, 1), (112, 3, 2), (56, 3, 1), (56, 3, 2), (28, 3, 1), (14, 3, 1), (56, 5, 1)] {
            let g = Window3d::cube(2, hw, k, s, 1, k / 2, 0).unwrap();
            assert!(rows_fit(&g), "{hw} k{k} s{s}");
            assert_eq!(rows_first(&g), k == 3, "{hw} k{k} s{s}");
        }
        for (hw, k, s) in [(56, 5, 2), (14, 3, 2), (7, 3, 1)] {
            let g = Window3d::cube(2, hw, k, s, 1, k / 2, 0).unwrap();
            assert!(!(rows_fit(&g) && rows_first(&g)), "{hw} k{k} s{s}");
        }
    }
}
