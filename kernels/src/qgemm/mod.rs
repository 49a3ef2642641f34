//! Integer matrix products for the quantized ops: `C[i][j] = Σ_k (A[i][k] - za) ·
//! (B[k][j] - zb[j])` with i32 accumulation, exact for 8-bit operands (|term| ≤ 255² and
//! K up to 33 000 before an i32 could overflow).
//!
//! The operands are packed as bytes for the dot-product instructions (AVX-512 VNNI),
//! with the sums of A's rows and B's columns for the zero-point terms (`packed`).
//! Then requantization: `y = clamp(round_half_even(acc · scale) + zy)`, the float
//! arithmetic ORT's int8 kernels use.

mod conv;
pub mod depthwise;
mod implicit;
pub(crate) mod nhwc;
mod packed;
#[cfg(test)]
mod packed_tests;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

pub use implicit::{ConvPlanes, ProductScratch};
pub use nhwc::{conv_nhwc, conv_taps, from_channels_last, to_channels_last, ConvTaps};
pub(crate) use packed::{portable_body, Place};
pub use packed::{qgemm, qgemm_rows, vnni_supported, QOut, QPackedA, QPackedB, Requant, MR, NR, Q8};

/// A quantized element type: 8-bit integers (the GEMM operands) and the 16-bit ones
/// (Quantize/Dequantize only).
pub trait QInt: Copy + Send + Sync + 'static {
    const MIN: i32;
    const MAX: i32;
    fn to_i32(self) -> i32;
    /// `v` must be in `MIN..=MAX`.
    fn from_i32(v: i32) -> Self;
}

macro_rules! qint {
    ($($t:ty),*) => {$(
        impl QInt for $t {
            const MIN: i32 = <$t>::MIN as i32;
            const MAX: i32 = <$t>::MAX as i32;
            #[inline(always)]
            fn to_i32(self) -> i32 {
                self as i32
            }
            #[inline(always)]
            fn from_i32(v: i32) -> Self {
                v as $t
            }
        }
    )*};
}
qint!(u8, i8, u16, i16, i32);

/// `y = clamp(round_half_even(v · scale) + zy)` to `T`'s range: the clamp is taken in
/// float before rounding, so NaN gives the type's minimum (as ORT's kernels do).
#[inline(always)]
pub fn requantize<T: QInt>(v: f32, zy: i32) -> T {
    requantize_in(v, zy, T::MIN, T::MAX)
}

/// [`requantize`] to the range `min..=max` (within `T`'s): the 4-bit types held a value
/// a byte.
#[inline(always)]
pub fn requantize_in<T: QInt>(v: f32, zy: i32, min: i32, max: i32) -> T {
    // In i64: for int32 outputs `T::MIN - zy` can pass i32's range.
    let lo = (min as i64 - zy as i64) as f32;
    let hi = (max as i64 - zy as i64) as f32;
    let v = v.max(lo).min(hi);
    if small_range(zy, min, max) {
        magic_round(v, zy)
    } else {
        // (An int32 bound rounded outward as a float: clamped again as an integer.)
        T::from_i32((v.round_ties_even() as i64 + zy as i64).clamp(min as i64, max as i64) as i32)
    }
}

/// Whether [`requantize_in`] to `min..=max` with zero point `zy` takes the rounding by a
/// magic number (a range and a zero point within 2^20: every clamped value below 2^22).
#[inline(always)]
fn small_range(zy: i32, min: i32, max: i32) -> bool {
    (max as i64 - min as i64) < 1 << 20 && zy.unsigned_abs() < 1 << 20
}

/// `round_half_even(v) + zy` for a clamped `v` (|v| < 2^22): adding 1.5 · 2^23 rounds it
/// to an integer (ties to even, the default rounding) in the low bits of the sum, read
/// back without a conversion that the vectoriser would have to saturate.
#[inline(always)]
fn magic_round<T: QInt>(v: f32, zy: i32) -> T {
    const MAGIC: f32 = 12_582_912.0;
    T::from_i32((v + MAGIC).to_bits() as i32 - MAGIC.to_bits() as i32 + zy)
}

/// [`requantize`] where [`small_range`] holds (the caller checks it once, outside its
/// loop: left inside, the compiler kept the other branch in the loop, whose scalar
/// conversions stopped the vectoriser).
#[inline(always)]
fn requantize_small<T: QInt>(v: f32, zy: i32) -> T {
    let (lo, hi) = ((T::MIN - zy) as f32, (T::MAX - zy) as f32);
    magic_round(v.max(lo).min(hi), zy)
}

/// `y = clamp(round_half_even(x / scale) + zy)` (QuantizeLinear, DynamicQuantizeLinear),
/// in the widest build.
pub fn quantize<T: QInt>(x: &[f32], scale: f32, zy: i32, y: &mut [T]) {
    let each = y.iter_mut().zip(x);
    if small_range(zy, T::MIN, T::MAX) {
        crate::arch::widest(
            #[inline(always)]
            move || each.for_each(|(o, &v)| *o = requantize_small(v / scale, zy)),
        )
    } else {
        crate::arch::widest(
            #[inline(always)]
            move || each.for_each(|(o, &v)| *o = requantize(v / scale, zy)),
        )
    }
}

/// `y = quantize(dequantize(a) + dequantize(b))` element by element, with `(scale, zero
/// point)` of A, B and Y: the three ops' float operations in their order (the same bits),
/// in one pass of the widest build (com.microsoft QLinearAdd on same-shape inputs).
///
/// With `recip` (from [`add_reciprocal`]: checked to give every output the division
/// gives), the sum is divided by Y's scale as `q = sum · r` corrected once, `q + (sum - q
/// · sy) · r` (two fused multiply-adds in place of a vector division). ResNet-18's 64 x
/// 56 x 56 additions, kernel only (Xeon family 6 model 207, `--example qadd_bench`): 88
/// us before, 68-70 with the zero point's range checked once outside the loop (inside,
/// the loop kept a scalar branch and was not vectorised), 55-57 by the reciprocal.
pub fn add_requantize<T: QInt>(
    a: &[T],
    b: &[T],
    pa: (f32, i32),
    pb: (f32, i32),
    py: (f32, i32),
    recip: Option<f32>,
    y: &mut [T],
) {
    let ((sa, za), (sb, zb), (sy, zy)) = (pa, pb, py);
    let sums = a
        .iter()
        .zip(b)
        .map(move |(&u, &v)| u.to_i32().wrapping_sub(za) as f32 * sa + v.to_i32().wrapping_sub(zb) as f32 * sb);
    match (recip, small_range(zy, T::MIN, T::MAX)) {
        (Some(r), true) => crate::arch::widest(
            #[inline(always)]
            move || y.iter_mut().zip(sums).for_each(|(o, sum)| *o = requantize_small(quotient(sum, sy, r), zy)),
        ),
        (None, true) => crate::arch::widest(
            #[inline(always)]
            move || y.iter_mut().zip(sums).for_each(|(o, sum)| *o = requantize_small(sum / sy, zy)),
        ),
        (Some(r), false) => y.iter_mut().zip(sums).for_each(|(o, sum)| *o = requantize(quotient(sum, sy, r), zy)),
        (None, false) => y.iter_mut().zip(sums).for_each(|(o, sum)| *o = requantize(sum / sy, zy)),
    }
}

/// `x / d` by the reciprocal `r` of `d`, corrected once: `q + (x - q d) r` with `q = x r`
/// (fused multiply-adds: the residual `x - q d` is exact).
#[inline(always)]
fn quotient(x: f32, d: f32, r: f32) -> f32 {
    let q = x * r;
    (-q).mul_add(d, x).mul_add(r, q)
}

/// The reciprocal of Y's scale for [`add_requantize`] when multiplying by it gives every
/// output that dividing gives, for 8-bit `T`: the outputs depend on the two inputs alone,
/// so every pair of them (65,536) is tried, in the widest build (tens of microseconds).
/// None where a pair differs (a quotient within an ulp of a half), or for wider types.
pub fn add_reciprocal<T: QInt>(pa: (f32, i32), pb: (f32, i32), py: (f32, i32)) -> Option<f32> {
    let ((sa, za), (sb, zb), (sy, zy)) = (pa, pb, py);
    let r = 1.0 / sy;
    if T::MAX - T::MIN > 255 || !small_range(zy, T::MIN, T::MAX) || !r.is_finite() || !sy.is_finite() {
        return None;
    }
    let differs = crate::arch::widest(
        #[inline(always)]
        move || {
            // (Exclusive ranges: an inclusive one kept the inner loop scalar.)
            let mut differs = 0u32;
            for u in T::MIN..T::MAX + 1 {
                let fu = u.wrapping_sub(za) as f32 * sa;
                for v in T::MIN..T::MAX + 1 {
                    let sum = fu + v.wrapping_sub(zb) as f32 * sb;
                    let exact = requantize_small::<T>(sum / sy, zy);
                    let fast = requantize_small::<T>(quotient(sum, sy, r), zy);
                    differs += u32::from(exact.to_i32() != fast.to_i32());
                }
            }
            differs > 0
        },
    );
    (!differs).then_some(r)
}

/// [`quantize`] to the range `min..=max` (within `T`'s): int4 and uint4, a value a byte.
pub fn quantize_in<T: QInt>(x: &[f32], scale: f32, zy: i32, (min, max): (i32, i32), y: &mut [T]) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o = requantize_in::<T>(v / scale, zy, min, max);
    }
}

/// `y = (x - zx) · scale` (DequantizeLinear; the difference wrapping, as for int32), in
/// the widest build.
pub fn dequantize<T: QInt>(x: &[T], scale: f32, zx: i32, y: &mut [f32]) {
    crate::arch::widest(
        #[inline(always)]
        move || {
            for (o, &v) in y.iter_mut().zip(x) {
                *o = v.to_i32().wrapping_sub(zx) as f32 * scale;
            }
        },
    )
}

/// The integer a float holds exactly, for |x| < 2^22 (integer sums made in float32):
/// adding 1.5 · 2^23 puts it in the low bits, read back without a conversion that the
/// vectoriser would have to saturate.
#[inline(always)]
fn float_sum_to_int(x: f32) -> i32 {
    const MAGIC: f32 = 12_582_912.0;
    (x + MAGIC).to_bits() as i32 - MAGIC.to_bits() as i32
}

/// Integer sums held in floats (each an integer below 2^22 in magnitude), plus `bias`,
/// requantized (`(sum + bias) as f32 · scale`, then [`requantize`]); in the widest build.
pub fn requantize_float_sums<T: QInt>(sums: &[f32], bias: i32, scale: f32, zy: i32, y: &mut [T]) {
    let each = y.iter_mut().zip(sums).map(move |(o, &v)| (o, float_sum_to_int(v).wrapping_add(bias) as f32 * scale));
    if small_range(zy, T::MIN, T::MAX) {
        crate::arch::widest(
            #[inline(always)]
            move || each.for_each(|(o, v)| *o = requantize_small(v, zy)),
        )
    } else {
        crate::arch::widest(
            #[inline(always)]
            move || each.for_each(|(o, v)| *o = requantize(v, zy)),
        )
    }
}

/// Integer sums held in floats (each below 2^22 in magnitude) as i32; in the widest build.
pub fn float_sums_to_i32(sums: &[f32], y: &mut [i32]) {
    crate::arch::widest(
        #[inline(always)]
        move || {
            for (o, &v) in y.iter_mut().zip(sums) {
                *o = float_sum_to_int(v);
            }
        },
    )
}

/// The smallest and largest of `x` (NaN ignored unless all are; ±inf for an empty `x`).
pub fn min_max(x: &[f32]) -> (f32, f32) {
    crate::arch::min_max(x)
}

/// [`min_max`] without SIMD.
pub(crate) fn min_max_portable(x: &[f32]) -> (f32, f32) {
    let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
    for &v in x {
        lo = if v < lo { v } else { lo };
        hi = if v > hi { v } else { hi };
    }
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_max_ignores_nan_and_reads_every_element() {
        for len in [0, 1, 15, 16, 17, 40, 1000] {
            let mut x: Vec<f32> = (0..len).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.25).collect();
            for i in (0..len).step_by(7) {
                x[i] = f32::NAN;
            }
            let want = min_max_portable(&x);
            assert_eq!(min_max(&x), want, "len {len}");
            if len > 2 {
                // The extremes at the last element (a tail) and in a vector.
                x[len - 1] = -1e9;
                x[len / 2] = 1e9;
                assert_eq!(min_max(&x), (-1e9, 1e9), "len {len}");
            }
        }
        assert_eq!(min_max(&[f32::NAN; 20]), (f32::INFINITY, f32::NEG_INFINITY));
    }

    #[test]
    fn quantize_matches_requantize_on_ties_and_saturation() {
        let x: Vec<f32> =
            (0..300).map(|i| (i as f32 - 150.0) * 0.5 * 3.0 + if i % 3 == 0 { 1e6 } else { 0.0 }).collect();
        for zy in [0, 17, 255] {
            let mut y = vec![0u8; x.len()];
            quantize(&x, 3.0, zy, &mut y);
            let want: Vec<u8> = x.iter().map(|&v| requantize::<u8>(v / 3.0, zy)).collect();
            assert_eq!(y, want);
            assert!(y
                .iter()
                .zip(&x)
                .all(|(&q, &v)| q as i32 == ((v / 3.0).round_ties_even() as i32 + zy).clamp(0, 255)));
        }
        let mut y = vec![0i16; 3];
        quantize(&[2.5, -3.5, 1e9], 1.0, -100, &mut y);
        assert_eq!(y, [-98, -104, 32767]);
    }

    /// Every pair of inputs (and a tail past a whole vector) through the addition divided
    /// and multiplied by the checked reciprocal: the same bits, for scales and zero points
    /// of many sizes; and the check accepts the corrected quotient for each of them (it
    /// is the correctly rounded one: Markstein's correction of a product by the rounded
    /// reciprocal). Returns for how many of them a product by the reciprocal alone,
    /// uncorrected, gives another output for some pair.
    fn reciprocal_case<T: QInt + PartialEq + std::fmt::Debug>(seed: u64) -> usize {
        let vals = crate::test_values(6 * 40, seed);
        let pairs: Vec<(T, T)> = (T::MIN..T::MAX + 1)
            .flat_map(|u| (T::MIN..T::MAX + 1).map(move |v| (T::from_i32(u), T::from_i32(v))))
            .chain((0..7).map(|i| (T::from_i32(T::MIN + i), T::from_i32(T::MAX - i))))
            .collect();
        let (a, b): (Vec<T>, Vec<T>) = pairs.into_iter().unzip();
        let mut uncorrected_differs = 0;
        for p in vals.chunks_exact(6) {
            // (`test_values` are in [-1, 3).) Scales from 1e-4 to 1e1, zero points within
            // the type.
            let unit = |v: f32| (v + 1.0) / 4.0;
            let scale = |v: f32| 10f32.powf(5.0 * unit(v) - 4.0);
            let zero = |v: f32| T::MIN + (unit(v) * (T::MAX - T::MIN) as f32) as i32;
            let (pa, pb, py) = ((scale(p[0]), zero(p[1])), (scale(p[2]), zero(p[3])), (scale(p[4]), zero(p[5])));
            let r = add_reciprocal::<T>(pa, pb, py);
            assert!(r.is_some(), "{pa:?} {pb:?} {py:?}: the corrected quotient differs");
            let (mut divided, mut multiplied) = (vec![T::from_i32(0); a.len()], vec![T::from_i32(0); a.len()]);
            add_requantize(&a, &b, pa, pb, py, None, &mut divided);
            add_requantize(&a, &b, pa, pb, py, r, &mut multiplied);
            assert_eq!(divided, multiplied, "{pa:?} {pb:?} {py:?}");
            let ((sa, za), (sb, zb), (sy, zy)) = (pa, pb, py);
            uncorrected_differs += a.iter().zip(&b).zip(&divided).any(|((&u, &v), &want)| {
                let sum = u.to_i32().wrapping_sub(za) as f32 * sa + v.to_i32().wrapping_sub(zb) as f32 * sb;
                requantize::<T>(sum * (1.0 / sy), zy) != want
            }) as usize;
        }
        uncorrected_differs
    }

    #[test]
    fn the_reciprocal_gives_the_divisions_bits() {
        let uncorrected = reciprocal_case::<u8>(31) + reciprocal_case::<i8>(32);
        // An uncorrected product differs for two of these 80 scale sets: the cases that
        // show the check failing a quotient that is not the division's (a `quotient`
        // without its correction makes it return None there).
        assert!(uncorrected >= 1, "{uncorrected} of 80 scale sets");
    }

    #[test]
    fn float_sums_convert_exactly() {
        let sums: Vec<f32> = [0.0, -0.0, 1.0, -1.0, 4_194_303.0, -4_194_303.0, 12345.0, -9.0].repeat(5);
        let mut ints = vec![0; sums.len()];
        float_sums_to_i32(&sums, &mut ints);
        assert!(ints.iter().zip(&sums).all(|(&i, &f)| i as f32 == f), "{ints:?}");
        let mut y = vec![0u8; sums.len()];
        requantize_float_sums(&sums, -7, 0.01, 100, &mut y);
        let want: Vec<u8> = sums.iter().map(|&f| requantize::<u8>((f as i32 - 7) as f32 * 0.01, 100)).collect();
        assert_eq!(y, want);
    }

    #[test]
    fn requantize_rounds_half_to_even_and_saturates() {
        assert_eq!(requantize::<u8>(2.5, 0), 2);
        assert_eq!(requantize::<u8>(3.5, 0), 4);
        assert_eq!(requantize::<u8>(-0.5, 10), 10);
        assert_eq!(requantize::<u8>(300.0, 10), 255);
        assert_eq!(requantize::<i8>(-300.0, 0), -128);
        assert_eq!(requantize::<i8>(f32::NAN, 3), -128);
        // int32 (a type too wide for the rounding by addition) rounds on the other path.
        assert_eq!(requantize::<i32>(1e9, 0), 1_000_000_000);
        assert_eq!(requantize::<i32>(-2.5, 1), -1);
    }
}
