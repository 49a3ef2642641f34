//! Vector loads and stores through array references, for the intrinsic microkernels:
//! safe `#[target_feature]` functions (callable from code with the same features),
//! each with the one `unsafe` intrinsic call behind its SAFETY line.

use std::arch::x86_64::*;

/// Loads 16 floats.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn load16(x: &[f32; 16]) -> __m512 {
    // SAFETY: `x` is 16 readable f32s; the load has no alignment requirement.
    unsafe { _mm512_loadu_ps(x.as_ptr()) }
}

/// Loads 16 pairs of bfloat16, each pair held in one float's bits.
#[target_feature(enable = "avx512f,avx512bf16")]
#[inline]
pub(crate) fn load_bh(x: &[f32; 16]) -> __m512bh {
    // SAFETY: `x` is 64 readable bytes (no alignment requirement); a 512-bit vector
    // of floats and one of bfloat16 have the same size, any bits being valid in both.
    unsafe { std::mem::transmute::<__m512, __m512bh>(_mm512_loadu_ps(x.as_ptr())) }
}

/// One pair of bfloat16 (held in a float's bits) in all 16 lanes.
#[target_feature(enable = "avx512f,avx512bf16")]
#[inline]
pub(crate) fn bcast_bh(x: f32) -> __m512bh {
    // SAFETY: a transmute between 512-bit vector types of the same size, any bits
    // being valid in both.
    unsafe { std::mem::transmute::<__m512, __m512bh>(_mm512_set1_ps(x)) }
}

/// The bits of 16 bfloat16, zero-extended to 16 32-bit lanes.
#[target_feature(enable = "avx512f,avx512bf16")]
#[inline]
pub(crate) fn widen_bh(v: __m256bh) -> __m512i {
    // SAFETY: a transmute between 256-bit vector types of the same size, any bits being
    // valid in both.
    _mm512_cvtepu16_epi32(unsafe { std::mem::transmute::<__m256bh, __m256i>(v) })
}

/// Stores 32 bfloat16 (16 pairs, each in one float's bits).
#[target_feature(enable = "avx512f,avx512bf16")]
#[inline]
pub(crate) fn store_bh(x: &mut [f32; 16], v: __m512bh) {
    // SAFETY: as in `load_bh`: the same size, any bits valid; `x` is 64 writable bytes
    // and the store has no alignment requirement.
    unsafe { _mm512_storeu_ps(x.as_mut_ptr(), std::mem::transmute::<__m512bh, __m512>(v)) }
}

/// Loads 16 i32s.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn load16i(x: &[i32; 16]) -> __m512i {
    // SAFETY: `x` is 64 readable bytes; the load has no alignment requirement.
    unsafe { _mm512_loadu_si512(x.as_ptr().cast()) }
}

/// Stores 16 i32s.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store16i(x: &mut [i32; 16], v: __m512i) {
    // SAFETY: `x` is 64 writable bytes; the store has no alignment requirement.
    unsafe { _mm512_storeu_si512(x.as_mut_ptr().cast(), v) }
}

/// Stores 16 bytes.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store16b(x: &mut [u8; 16], v: __m128i) {
    // SAFETY: `x` is 16 writable bytes; the store has no alignment requirement.
    unsafe { _mm_storeu_si128(x.as_mut_ptr().cast(), v) }
}

/// Stores 16 signed bytes.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store16b_i8(x: &mut [i8; 16], v: __m128i) {
    // SAFETY: `x` is 16 writable bytes; the store has no alignment requirement.
    unsafe { _mm_storeu_si128(x.as_mut_ptr().cast(), v) }
}

/// Stores 16 floats.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store16(x: &mut [f32; 16], v: __m512) {
    // SAFETY: `x` is 16 writable f32s; the store has no alignment requirement.
    unsafe { _mm512_storeu_ps(x.as_mut_ptr(), v) }
}

/// Loads `x[start + l]` into each lane `l` set in `mask`, zero in the others. Panics
/// unless every selected element is in `x`; `start` may lie before `x` when the lanes
/// that would read there are masked off.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn load_lanes(x: &[f32], start: isize, mask: u16) -> __m512 {
    if mask == 0 {
        return _mm512_setzero_ps();
    }
    let (first, last) = (mask.trailing_zeros() as isize, 15 - mask.leading_zeros() as isize);
    assert!(start + first >= 0 && start + last < x.len() as isize);
    let base = x.as_ptr().wrapping_offset(start);
    // SAFETY: the mask selects lanes first..=last, whose elements are in `x` (checked
    // above); masked-off lanes are not read and cannot fault, so `base` itself need not
    // point into `x`.
    unsafe { _mm512_maskz_loadu_ps(mask, base) }
}

/// Masked reads checked once, for a kernel that makes many: vector `v` and tap `t`
/// read the lanes `masks[v * taps + t]` of `x[16 v + offsets[t]..]`, and every lane
/// so set lies inside `0..len`.
pub(crate) struct MaskedTaps<'a> {
    len: usize,
    offsets: &'a [isize],
    masks: &'a [u16],
    vectors: usize,
}

impl<'a> MaskedTaps<'a> {
    /// `None` unless `masks` has a mask per vector and tap, each selecting only lanes
    /// inside `0..len`.
    pub(crate) fn new(len: usize, offsets: &'a [isize], masks: &'a [u16]) -> Option<MaskedTaps<'a>> {
        let taps = offsets.len();
        if taps == 0 || !masks.len().is_multiple_of(taps) || len > isize::MAX as usize / 2 {
            return None;
        }
        for (v, row) in masks.chunks_exact(taps).enumerate() {
            for (&m, &off) in row.iter().zip(offsets) {
                // In i128: no offset can wrap the sums past the checks (an offset near
                // isize::MAX did, found by review).
                let (first, last) = (m.trailing_zeros() as i128, 15 - m.leading_zeros() as i128);
                let at = 16 * v as i128 + off as i128;
                if m != 0 && (at + first < 0 || at + last >= len as i128) {
                    return None;
                }
            }
        }
        Some(MaskedTaps { len, offsets, masks, vectors: masks.len() / taps })
    }

    /// Taps per vector.
    pub(crate) fn taps(&self) -> usize {
        self.offsets.len()
    }

    /// Tap `t` of vector `v` from `x`, zero in the lanes masked off; and its mask.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn load(&self, x: &[f32], v: usize, t: usize) -> (__m512, u16) {
        // `v * taps + t` names this vector's mask (a huge `v` wrapped onto another's).
        assert!(x.len() >= self.len && v < self.vectors && t < self.offsets.len());
        let m = self.masks[v * self.offsets.len() + t];
        let base = x.as_ptr().wrapping_offset((16 * v) as isize + self.offsets[t]);
        // SAFETY: `new` checked that the lanes of this mask read inside 0..len, which
        // is inside `x` (checked above); masked-off lanes are not read and cannot fault.
        (unsafe { _mm512_maskz_loadu_ps(m, base) }, m)
    }

    /// Tap `t` of vector `v` from `x`, `fill` in the lanes masked off.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn load_or(&self, x: &[f32], v: usize, t: usize, fill: __m512) -> __m512 {
        assert!(x.len() >= self.len && v < self.vectors && t < self.offsets.len());
        let m = self.masks[v * self.offsets.len() + t];
        let base = x.as_ptr().wrapping_offset((16 * v) as isize + self.offsets[t]);
        // SAFETY: as in `load`.
        unsafe { _mm512_mask_loadu_ps(fill, m, base) }
    }
}

#[cfg(test)]
#[test]
fn masked_taps_refuse_an_offset_whose_last_lane_wraps() {
    // Found by review: 16 v + off + 15 wrapped below `len` in isize.
    assert!(MaskedTaps::new(4, &[isize::MAX - 5], &[0xffff]).is_none());
    assert!(MaskedTaps::new(4, &[isize::MIN + 5], &[0x0001]).is_none());
    assert!(MaskedTaps::new(20, &[2], &[0xffff, 0x0003]).is_some());
}

/// 16-float loads from one slice at `start + off` for any `off` up to `reach`, checked
/// once, when it is made: a kernel's inner loop reads a run of vectors (the channels-last
/// depthwise convolution's tile row, at constant offsets) with no check of its own, the
/// one in [`Reach16::load`] folding away for a constant offset within a constant reach.
pub(crate) struct Reach16<'a> {
    x: &'a [f32],
    start: usize,
    reach: usize,
}

impl<'a> Reach16<'a> {
    /// `None` unless `start + reach + 16` is at most `x.len()`.
    #[inline]
    pub(crate) fn new(x: &'a [f32], start: usize, reach: usize) -> Option<Self> {
        let end = start.checked_add(reach)?.checked_add(16)?;
        (end <= x.len()).then_some(Reach16 { x, start, reach })
    }

    /// The 16 floats at `start + off`; panics if `off` is past the reach.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(crate) fn load(&self, off: usize) -> __m512 {
        assert!(off <= self.reach, "a load past the checked reach");
        // SAFETY: `new` checked that `start + reach + 16 <= x.len()`, and `off <= reach`
        // (above), so the 16 floats at `start + off` are in `x`; the fields never change;
        // the load has no alignment requirement.
        unsafe { _mm512_loadu_ps(self.x.as_ptr().add(self.start + off)) }
    }
}

/// Stores the low `n` (at most 16) lanes of `v` to the first `n` floats of `x`.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store_first(x: &mut [f32], n: usize, v: __m512) {
    assert!(n <= 16 && n <= x.len());
    if n == 16 {
        // SAFETY: 16 writable f32s (checked above); no alignment requirement.
        return unsafe { _mm512_storeu_ps(x.as_mut_ptr(), v) };
    }
    let mask = ((1u32 << n) - 1) as __mmask16;
    // SAFETY: the mask selects lanes 0..n, which are in `x` (checked above); masked-off
    // lanes are not written.
    unsafe { _mm512_mask_storeu_ps(x.as_mut_ptr(), mask, v) }
}

/// Loads 8 floats.
#[target_feature(enable = "avx")]
#[inline]
pub(crate) fn load8(x: &[f32; 8]) -> __m256 {
    // SAFETY: `x` is 8 readable f32s; the load has no alignment requirement.
    unsafe { _mm256_loadu_ps(x.as_ptr()) }
}

/// Stores 8 floats.
#[target_feature(enable = "avx")]
#[inline]
pub(crate) fn store8(x: &mut [f32; 8], v: __m256) {
    // SAFETY: `x` is 8 writable f32s; the store has no alignment requirement.
    unsafe { _mm256_storeu_ps(x.as_mut_ptr(), v) }
}
