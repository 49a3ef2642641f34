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

/// Adds to `acc[r]` (two vectors of 16 i32) the products of row `r`'s quads (four
/// unsigned bytes each) by the quads of `panel` (two vectors of 16 columns' signed bytes
/// a quad), tap by tap: tap `t`'s `quads` quads of row `r` are the bytes of `x` at
/// `offsets[t][r]`, or of `zrow` where that is `pad`, against the panel's quads from `t ·
/// quads`. One `vpdpbusd` a vector, each row's quad broadcast; the sums stay in
/// registers over every tap (through `acc`, they went to memory around each read). Every
/// row's reach is checked once a tap, before its first quad.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
pub(crate) fn dpbusd_taps<const R: usize>(
    acc: &mut [[__m512i; 2]; R],
    (x, zrow, pad): (&[u8], &[u8], u32),
    offsets: &[[u32; R]],
    quads: usize,
    panel: &[[i32; 16]],
) {
    let len = 4 * quads;
    assert!(zrow.len() >= len && panel.len() >= 2 * quads * offsets.len(), "taps past their rows or panel");
    let mut local = *acc;
    for (t, offs) in offsets.iter().enumerate() {
        let mut at = [zrow.as_ptr(); R];
        for (p, &o) in at.iter_mut().zip(offs) {
            if o != pad {
                // (The slice checks the reach: `len` bytes from `o` inside `x`.)
                *p = x[o as usize..o as usize + len].as_ptr();
            }
        }
        let bs = &panel[2 * t * quads..2 * (t + 1) * quads];
        for (q, bq) in bs.chunks_exact(2).enumerate() {
            if q % 16 == 0 {
                for &p in &at {
                    // (A hint: no access; the address may lie past the row.)
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(4 * q + 128).cast());
                }
            }
            let (b0, b1) = (load16i(&bq[0]), load16i(&bq[1]));
            for (sums, &p) in local.iter_mut().zip(&at) {
                // SAFETY: each row pointer starts `len = 4 · quads` readable bytes (a
                // slice of `x` of that length, or `zrow`, asserted at least that long)
                // and `q < quads`: the four bytes at `4 q` are in it; the read has no
                // alignment needs.
                let a = _mm512_set1_epi32(unsafe { p.add(4 * q).cast::<i32>().read_unaligned() });
                sums[0] = _mm512_dpbusd_epi32(sums[0], a, b0);
                sums[1] = _mm512_dpbusd_epi32(sums[1], a, b1);
            }
        }
    }
    *acc = local;
}

/// Stores a vector as eight u64 lanes.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store8_u64(x: &mut [u64; 8], v: __m512i) {
    // SAFETY: `x` is 64 writable bytes; the store has no alignment requirement.
    unsafe { _mm512_storeu_si512(x.as_mut_ptr().cast(), v) }
}

/// Loads 64 bytes.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn load64_bytes(x: &[u8; 64]) -> __m512i {
    // SAFETY: `x` is 64 readable bytes; the load has no alignment requirement.
    unsafe { _mm512_loadu_si512(x.as_ptr().cast()) }
}

/// Stores 32 bytes to `x` (a one-byte type: u8 or i8).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store32_bytes<T: Copy>(x: &mut [T; 32], v: __m256i) {
    const { assert!(std::mem::size_of::<T>() == 1, "one-byte elements") };
    // SAFETY: `T` is one byte (checked at compile time), so `x` is 32 writable bytes;
    // the store has no alignment requirement.
    unsafe { _mm256_storeu_si256(x.as_mut_ptr().cast(), v) }
}

/// Stores 16 floats.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store16(x: &mut [f32; 16], v: __m512) {
    // SAFETY: `x` is 16 writable f32s; the store has no alignment requirement.
    unsafe { _mm512_storeu_ps(x.as_mut_ptr(), v) }
}

/// Asks for the lines of a row of `N` floats in L1 ahead of its use (a hint: no read, no
/// fault).
#[inline(always)]
pub(crate) fn prefetch_l1<const N: usize>(x: &[f32; N]) {
    for line in x.chunks(16) {
        // SAFETY: SSE, which `_mm_prefetch` needs, is in every x86-64 CPU; a prefetch
        // reads nothing architecturally and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast()) };
    }
}

/// Asks for the lines of `x` in L2 ahead of their use (a hint: no read, no fault).
#[inline]
pub(crate) fn prefetch_l2(x: &[[f32; 16]]) {
    for v in x {
        // SAFETY: SSE, which `_mm_prefetch` needs, is in every x86-64 CPU; a prefetch
        // reads nothing architecturally and cannot fault.
        unsafe { _mm_prefetch::<_MM_HINT_T1>(v.as_ptr().cast()) };
    }
}

/// A direct convolution's kernel window: `kh` rows of `kw` taps, tap `(ky, kx)` reading
/// `ky * ky_step + kx * kx_step` past an output's first input.
#[derive(Clone, Copy)]
pub(crate) struct Window {
    pub(crate) kh: usize,
    pub(crate) kw: usize,
    pub(crate) ky_step: usize,
    pub(crate) kx_step: usize,
}

/// A depth chunk of a direct convolution's tile of `R` outputs by `NB` blocks of 16
/// output channels, from the sums `acc`: tap by tap (`t = ky * kw + kx`), `n` steps each,
/// one per input channel; step `j` of tap `t` broadcasts `x[bases[r] + ky * ky_step +
/// kx * kx_step + j * x_step]` for each output `r`, loads each block's filter vector
/// `w[i][t + j * w_step]`, and adds their products to `acc[r][i]`, one fused multiply-add
/// each. Every read's reach is checked once, before the first step (a check per read,
/// and the sums leaving the registers between taps, cost the tiles a fifth of their
/// time).
#[target_feature(enable = "avx512f,fma")]
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn fma_taps<const R: usize, const NB: usize>(
    mut acc: [[__m512; NB]; R],
    x: &[f32],
    bases: &[usize; R],
    win: Window,
    x_step: usize,
    w: &[&[[f32; 16]]; NB],
    w_step: usize,
    n: usize,
) -> [[__m512; NB]; R] {
    let Some(last) = n.checked_sub(1) else { return acc };
    let (kh1, kw1) = (win.kh.checked_sub(1), win.kw.checked_sub(1));
    let (Some(kh1), Some(kw1)) = (kh1, kw1) else { return acc };
    // The furthest input and filter any step reads, past the first.
    let reach = |a: usize, b: usize, c: usize, d: usize, e: usize, f: usize| {
        a.checked_mul(b)?.checked_add(c.checked_mul(d)?)?.checked_add(e.checked_mul(f)?)
    };
    let x_reach = reach(kh1, win.ky_step, kw1, win.kx_step, last, x_step).expect("a tile's input reach overflows");
    for &b in bases {
        assert!(b.checked_add(x_reach).is_some_and(|e| e < x.len()), "a tile's input outside its planes");
    }
    // The window's taps, and the furthest filter: tap (kh-1, kw-1) of the last step (a
    // window whose tap count wraps read past the filters, found by review).
    let w_reach = reach(kh1, win.kw, kw1, 1, last, w_step).expect("a tile's filter reach overflows");
    for wi in w {
        assert!(w_reach < wi.len(), "a tile's filters outside their block");
    }
    let mut xs = [x.as_ptr(); R];
    for (p, &b) in xs.iter_mut().zip(bases) {
        *p = p.wrapping_add(b);
    }
    let mut ws = [std::ptr::null::<[f32; 16]>(); NB];
    for (p, wi) in ws.iter_mut().zip(w) {
        *p = wi.as_ptr();
    }
    for ky in 0..win.kh {
        for kx in 0..win.kw {
            let (mut xo, mut wo) = (ky * win.ky_step + kx * win.kx_step, ky * win.kw + kx);
            for _ in 0..n {
                let mut wv = [_mm512_setzero_ps(); NB];
                for (v, &p) in wv.iter_mut().zip(&ws) {
                    // SAFETY: wo = ky * kw + kx + j * w_step <= w_reach < w[i].len() (ky <
                    // kh, kx < kw, j < n; checked above), so the filter vector is 16
                    // readable f32s of `w[i]`; the load has no alignment requirement.
                    *v = unsafe { _mm512_loadu_ps(p.add(wo).cast()) };
                }
                for (a, &xr) in acc.iter_mut().zip(&xs) {
                    // SAFETY: xo = ky * ky_step + kx * kx_step + j * x_step <= x_reach and
                    // bases[r] + x_reach < x.len() (checked above): the element is in `x`.
                    let v = _mm512_set1_ps(unsafe { *xr.add(xo) });
                    for (a, &wi) in a.iter_mut().zip(&wv) {
                        *a = _mm512_fmadd_ps(v, wi, *a);
                    }
                }
                // Past the last step these wrap unread (a reach at usize::MAX).
                xo = xo.wrapping_add(x_step);
                wo = wo.wrapping_add(w_step);
            }
        }
    }
    acc
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

/// `R` rows of `width` floats, `stride` apart in one slice, read 16 columns at a time and
/// merged by Max, checked once when it is made: a pool's inner loop takes the column
/// maxima of a window's rows with one check a vector, not one a row.
pub(crate) struct RowStack<'a, const R: usize> {
    x: &'a [f32],
    stride: usize,
    width: usize,
}

impl<'a, const R: usize> RowStack<'a, R> {
    /// `None` unless `R` is at least 1 and `x` holds the `R` rows: `(R - 1) stride + width`.
    #[inline]
    pub(crate) fn new(x: &'a [f32], stride: usize, width: usize) -> Option<Self> {
        let end = (R.checked_sub(1)?).checked_mul(stride)?.checked_add(width)?;
        (end <= x.len()).then_some(RowStack { x, stride, width })
    }

    /// `max(row R - 1, ... max(row 1, row 0))` of columns `at..at + 16` (`vmaxps`, so a
    /// NaN or the sign of a tied zero need not be the rows' order's), and the lanes where
    /// any row is in the `fpclass` classes `CLASS`; panics past the width.
    #[target_feature(enable = "avx512f,avx512dq")]
    #[inline]
    pub(crate) fn max<const CLASS: i32>(&self, at: usize) -> (__m512, u16) {
        assert!(at.checked_add(16).is_some_and(|end| end <= self.width), "columns past the row");
        let base = self.x.as_ptr().wrapping_add(at);
        // SAFETY: row 0's columns at..at + 16 are x[at..][..16], inside `x` because `new`
        // checked (R - 1) stride + width <= x.len() and at + 16 <= width (above); no
        // alignment requirement.
        let mut acc = unsafe { _mm512_loadu_ps(base) };
        let mut class = _mm512_fpclass_ps_mask::<CLASS>(acc);
        for r in 1..R {
            // SAFETY: as above, for row r < R, at x[r stride + at..][..16].
            let v = unsafe { _mm512_loadu_ps(base.add(r * self.stride)) };
            class |= _mm512_fpclass_ps_mask::<CLASS>(v);
            acc = _mm512_max_ps(v, acc);
        }
        (acc, class)
    }

    /// [`RowStack::max`] of `reads`' vector `v` (its tap 0, `fill` in the lanes masked
    /// off, which are not classed); panics unless the reads are within the rows' width.
    #[target_feature(enable = "avx512f,avx512dq")]
    #[inline]
    pub(crate) fn max_masked<const CLASS: i32>(&self, reads: &MaskedTaps<'_>, v: usize, fill: __m512) -> (__m512, u16) {
        assert!(reads.len <= self.width && v < reads.vectors, "reads past the rows");
        let mask = reads.masks[v * reads.offsets.len()];
        if mask == 0 {
            return (fill, 0);
        }
        let base = self.x.as_ptr().wrapping_offset((16 * v) as isize + reads.offsets[0]);
        // SAFETY: `MaskedTaps::new` checked that this mask's lanes read inside 0..len of
        // row 0, len <= width (above), and row 0's 0..width is inside `x` (`new`);
        // masked-off lanes are not read and cannot fault.
        let mut acc = unsafe { _mm512_mask_loadu_ps(fill, mask, base) };
        let mut class = _mm512_mask_fpclass_ps_mask::<CLASS>(mask, acc);
        for r in 1..R {
            // SAFETY: as above, for row r < R, `r stride` further on.
            let v = unsafe { _mm512_mask_loadu_ps(fill, mask, base.wrapping_add(r * self.stride)) };
            class |= _mm512_mask_fpclass_ps_mask::<CLASS>(mask, v);
            acc = _mm512_max_ps(v, acc);
        }
        (acc, class)
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

/// Stores the low `n` (at most 8) lanes of `v` to the first `n` floats of `x`.
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
pub(crate) fn store_first8(x: &mut [f32], n: usize, v: __m256) {
    assert!(n <= 8 && n <= x.len());
    let mask = ((1u32 << n) - 1) as __mmask8;
    // SAFETY: the mask selects lanes 0..n, which are in `x` (checked above); masked-off
    // lanes are not written.
    unsafe { _mm256_mask_storeu_ps(x.as_mut_ptr(), mask, v) }
}

/// Stores the low `n` (at most 16) lanes of `v` to the first `n` i32s of `x`.
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store_first_i32(x: &mut [i32], n: usize, v: __m512i) {
    assert!(n <= 16 && n <= x.len());
    let mask = ((1u32 << n) - 1) as __mmask16;
    // SAFETY: the mask selects lanes 0..n, which are in `x` (checked above); masked-off
    // lanes are not written; no alignment requirement.
    unsafe { _mm512_mask_storeu_epi32(x.as_mut_ptr(), mask, v) }
}

/// Stores the low `n` (at most 16) lanes of `v`, each truncated to its low byte, to the
/// first `n` elements of `x` (a one-byte type: u8 or i8).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn store_first_bytes<T: Copy>(x: &mut [T], n: usize, v: __m512i) {
    const { assert!(std::mem::size_of::<T>() == 1, "one-byte elements") };
    assert!(n <= 16 && n <= x.len());
    let mask = ((1u32 << n) - 1) as __mmask16;
    // SAFETY: `T` is one byte (checked at compile time); the mask selects lanes 0..n,
    // whose bytes are in `x` (checked above); masked-off lanes are not written; no
    // alignment requirement.
    unsafe { _mm512_mask_cvtepi32_storeu_epi8(x.as_mut_ptr().cast(), mask, v) }
}

/// Copies the first `n` (at most 64) bytes of `src` (u8 or i8) to the first `n` of `dst`,
/// each xor the byte of `flip` in its lane (0x80 turns int8 into uint8 shifted by 128).
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
pub(crate) fn copy_first_bytes_xor<T: crate::qgemm::Q8>(dst: &mut [u8], src: &[T], n: usize, flip: __m512i) {
    const { assert!(std::mem::size_of::<T>() == 1, "one-byte elements") };
    assert!(n <= 64 && n <= src.len() && n <= dst.len());
    let mask: __mmask64 = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    // SAFETY: `T` is a one-byte `Q8` (u8 or i8: checked at compile time, and the trait
    // cannot be implemented for core's types outside this crate), so `src`'s elements are
    // initialised bytes; the mask selects bytes 0..n, which are in `src` and in `dst`
    // (checked above); masked-off bytes are neither read nor written; no alignment
    // requirement.
    unsafe {
        let v = _mm512_maskz_loadu_epi8(mask, src.as_ptr().cast());
        _mm512_mask_storeu_epi8(dst.as_mut_ptr().cast(), mask, _mm512_xor_si512(v, flip));
    }
}

/// Loads the first `n` (at most 64) bytes of `x` into the low bytes of a vector, zero in
/// the others.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
pub(crate) fn load_first_bytes(x: &[u8], n: usize) -> __m512i {
    assert!(n <= 64 && n <= x.len());
    let mask: __mmask64 = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    // SAFETY: the mask selects bytes 0..n, which are in `x` (checked above); masked-off
    // bytes are not read; no alignment requirement.
    unsafe { _mm512_maskz_loadu_epi8(mask, x.as_ptr().cast()) }
}

/// Stores the low `n` (at most 64) bytes of `v` to the first `n` bytes of `x`.
#[target_feature(enable = "avx512f,avx512bw")]
#[inline]
pub(crate) fn store_first_bytes64(x: &mut [u8], n: usize, v: __m512i) {
    assert!(n <= 64 && n <= x.len());
    let mask: __mmask64 = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
    // SAFETY: the mask selects bytes 0..n, which are in `x` (checked above); masked-off
    // bytes are not written; no alignment requirement.
    unsafe { _mm512_mask_storeu_epi8(x.as_mut_ptr().cast(), mask, v) }
}

/// Whether `T` is `u8` or `i8`: one-byte integers, every byte a valid value.
fn is_byte<T: 'static>() -> bool {
    use std::any::TypeId;
    TypeId::of::<T>() == TypeId::of::<u8>() || TypeId::of::<T>() == TypeId::of::<i8>()
}

/// `x` as bytes, when its elements are `u8` or `i8` (`None` for other types).
pub(crate) fn bytes_of<T: 'static>(x: &[T]) -> Option<&[u8]> {
    is_byte::<T>().then(|| {
        // SAFETY: `T` is u8 or i8 (checked above): one initialised byte an element; the
        // slice keeps `x`'s length and lifetime.
        unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u8>(), x.len()) }
    })
}

/// `x` as bytes to write, when its elements are `u8` or `i8` (`None` for other types).
pub(crate) fn bytes_of_mut<T: 'static>(x: &mut [T]) -> Option<&mut [u8]> {
    is_byte::<T>().then(|| {
        // SAFETY: `T` is u8 or i8 (checked above), for which every byte is a valid value;
        // the slice keeps `x`'s length and exclusive borrow.
        unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast::<u8>(), x.len()) }
    })
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

#[cfg(test)]
mod fma_taps_tests {
    use super::*;
    use crate::arch::Level;

    /// Two outputs by two blocks, a 2x3 window, 3 channels: each sum is the scalar chain
    /// of fused multiply-adds tap by tap, channel by channel, from the sums given.
    #[test]
    fn fma_taps_sum_tap_by_tap_then_channel_by_channel() {
        if Level::detected() != Level::Avx512 {
            return;
        }
        let win = Window { kh: 2, kw: 3, ky_step: 10, kx_step: 2 };
        let (n, x_step, taps) = (3, 40, 6);
        let x: Vec<f32> = (0..130).map(|i| ((i * 37) % 23) as f32 / 7.0 - 1.5).collect();
        let w: Vec<[f32; 16]> =
            (0..2 * n * taps).map(|i| std::array::from_fn(|l| ((i * 16 + l) * 13 % 29) as f32 / 11.0 - 1.0)).collect();
        let (w0, w1) = w.split_at(n * taps);
        let bases = [1, 6];
        let start = [[0.25f32; 16], [-0.5; 16]];
        #[target_feature(enable = "avx512f,fma")]
        fn sums(
            start: &[[f32; 16]; 2],
            x: &[f32],
            bases: &[usize; 2],
            win: Window,
            w: [&[[f32; 16]]; 2],
            (x_step, w_step, n): (usize, usize, usize),
        ) -> [[[f32; 16]; 2]; 2] {
            let mut acc = [[_mm512_setzero_ps(); 2]; 2];
            for (r, a) in acc.iter_mut().enumerate() {
                for (i, a) in a.iter_mut().enumerate() {
                    *a = load16(&start[(r + i) % 2]);
                }
            }
            let acc = fma_taps(acc, x, bases, win, x_step, &w, w_step, n);
            let mut out = [[[0.0f32; 16]; 2]; 2];
            for (o, a) in out.iter_mut().zip(&acc) {
                for (o, &a) in o.iter_mut().zip(a) {
                    store16(o, a);
                }
            }
            out
        }
        // SAFETY: the test returns early unless the CPU has AVX-512 (and so FMA).
        let got = unsafe { sums(&start, &x, &bases, win, [w0, w1], (x_step, taps, n)) };
        for (r, &b) in bases.iter().enumerate() {
            for (i, wi) in [w0, w1].iter().enumerate() {
                for l in 0..16 {
                    let mut want = start[(r + i) % 2][l];
                    for ky in 0..2 {
                        for kx in 0..3 {
                            for j in 0..n {
                                let xv = x[b + ky * 10 + kx * 2 + j * x_step];
                                want = xv.mul_add(wi[ky * 3 + kx + j * taps][l], want);
                            }
                        }
                    }
                    assert_eq!(got[r][i][l].to_bits(), want.to_bits(), "output {r} block {i} lane {l}");
                }
            }
        }
    }

    /// An input or a filter past the slices panics before any read.
    #[test]
    fn fma_taps_refuse_a_reach_past_their_slices() {
        if Level::detected() != Level::Avx512 {
            return;
        }
        let win = Window { kh: 3, kw: 3, ky_step: 5, kx_step: 1 };
        let x = vec![1.0f32; 5 * 5 + 2 * 25];
        let w = vec![[0.5f32; 16]; 9 * 3];
        #[target_feature(enable = "avx512f,fma")]
        fn steps(x: &[f32], bases: [usize; 2], win: Window, w: &[[f32; 16]]) {
            fma_taps([[_mm512_setzero_ps(); 1]; 2], x, &bases, win, 25, &[w], 9, 3);
        }
        let run = |x: &[f32], bases: [usize; 2], w: &[[f32; 16]]| {
            // SAFETY: the test returns early unless the CPU has AVX-512 (and so FMA).
            std::panic::catch_unwind(|| unsafe { steps(x, bases, win, w) }).is_ok()
        };
        // The furthest read: base + 2 * 5 + 2 + 2 * 25 (= base + 62) < 75.
        assert!(run(&x, [0, 12], &w));
        assert!(!run(&x, [0, 13], &w), "an output's input past the planes");
        assert!(!run(&x[..74], [0, 12], &w), "the planes one short");
        assert!(!run(&x, [0, 12], &w[..26]), "the filters one short");
        // A window of 3 x (2^64 + 1) / 3 taps: their count wraps to 1.
        let wide = Window { kh: 3, kw: 0xAAAA_AAAA_AAAA_AAAB, ky_step: 0, kx_step: 0 };
        #[target_feature(enable = "avx512f,fma")]
        fn one(x: &[f32], w: &[[f32; 16]], win: Window) {
            fma_taps([[_mm512_setzero_ps(); 1]; 1], x, &[0], win, 0, &[w], 1, 1);
        }
        // SAFETY: the test returns early unless the CPU has AVX-512 (and so FMA).
        let wrapped = std::panic::catch_unwind(|| unsafe { one(&[1.0], &w[..1], wide) });
        assert!(wrapped.is_err(), "a window whose tap count wraps");
    }
}
