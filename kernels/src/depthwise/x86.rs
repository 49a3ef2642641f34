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

use crate::arch::mem::store_first;
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
