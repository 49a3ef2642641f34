//! The direct convolution's tile stored into NCHW rows through an in-register transpose.

use std::arch::x86_64::*;

use super::super::{Out, BLOCK};
use crate::arch::mem::{load16, store_first8};

/// A tile's outputs `t` (`[R][NB][16]`: output by channel) into y's rows: each output
/// channel's `R` consecutive positions from `pos`, for the first `lanes` channels. Each
/// block's `R` (at most 8) vectors are transposed in registers, 8 outputs by 16 channels
/// to 16 channels by 8 outputs (the outputs past `R` zero and not stored), and each
/// channel's run is one masked store. (Element by element, the store was 7-11% of
/// YOLO's shallow convolutions: 16->32 channels of 3x3 at stride 2 on 80x80, kernel
/// only, 157 us with it and 139 without it, Zen 4.)
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(super) fn store_transposed<const R: usize, const NB: usize>(
    t: &[[[f32; BLOCK]; NB]; R],
    lanes: usize,
    positions: usize,
    pos: usize,
    y: &mut Out<'_, '_>,
) {
    const { assert!(R <= 8) };
    for (i, first) in (0..NB).map(|i| (i, i * BLOCK)).take_while(|&(_, first)| first < lanes) {
        let a: [__m512; 8] = std::array::from_fn(|r| if r < R { load16(&t[r][i]) } else { _mm512_setzero_ps() });
        // Within each 128-bit lane k (channels 4k..4k+3): u[j] holds channel 4k + j of
        // outputs 0-3, u[4 + j] of outputs 4-7.
        let mut u = [_mm512_setzero_ps(); 8];
        for h in 0..2 {
            let (a0, a1, a2, a3) = (a[4 * h], a[4 * h + 1], a[4 * h + 2], a[4 * h + 3]);
            let (lo01, hi01) = (_mm512_unpacklo_ps(a0, a1), _mm512_unpackhi_ps(a0, a1));
            let (lo23, hi23) = (_mm512_unpacklo_ps(a2, a3), _mm512_unpackhi_ps(a2, a3));
            u[4 * h] = _mm512_shuffle_ps::<0x44>(lo01, lo23);
            u[4 * h + 1] = _mm512_shuffle_ps::<0xEE>(lo01, lo23);
            u[4 * h + 2] = _mm512_shuffle_ps::<0x44>(hi01, hi23);
            u[4 * h + 3] = _mm512_shuffle_ps::<0xEE>(hi01, hi23);
        }
        let n = (lanes - first).min(BLOCK);
        for j in 0..4 {
            // Lanes k = 0, 1, then 2, 3 of u[j] and u[4 + j], paired: channel 4k + j's
            // eight outputs in one half each.
            let (low, high) =
                (_mm512_shuffle_f32x4::<0x44>(u[j], u[4 + j]), _mm512_shuffle_f32x4::<0xEE>(u[j], u[4 + j]));
            let pairs = [_mm512_shuffle_f32x4::<0xD8>(low, low), _mm512_shuffle_f32x4::<0xD8>(high, high)];
            for (p, v) in pairs.into_iter().enumerate() {
                for (half, c) in [(0, 8 * p + j), (1, 8 * p + 4 + j)] {
                    if c < n {
                        let run = if half == 0 { _mm512_castps512_ps256(v) } else { _mm512_extractf32x8_ps::<1>(v) };
                        store_first8(y.at(positions, first + c, pos, R), R, run);
                    }
                }
            }
        }
    }
}
