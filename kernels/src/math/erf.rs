//! The error function and the standard normal CDF (for GELU).

use super::{exp_rough, exp_small2, fma, horner};

/// `erf(x) = x P(x^2)` on `[0, 0.85]`; minimax for relative error, 5.4e-8
/// with the f32 coefficients, most of it the rounding of `2/sqrt(pi)` (see
/// `tools/fit_poly.py`).
#[allow(clippy::approx_constant)] // the fit lands one ulp below 2/sqrt(pi)
pub(crate) const ERF_P: [f32; 6] =
    [1.128_379_1, -0.376_122_03, 0.112_786_36, -0.026_644_398, 0.004_800_872, -0.000_492_931];

/// `erfc(a) = exp(L(a - 2.5))` on `[0.83, 3.95]`; minimax for the absolute
/// error of `erfc`, 2.2e-9 (see `tools/fit_poly.py`).
pub(crate) const ERFC_LN: [f32; 7] =
    [-7.806_82, -5.352_691, -0.943_822_6, -0.010_549_94, 0.002_645_135_6, -5.985_871_4e-5, 0.000_204_285];

/// [`ERFC_LN`] one degree lower: 3.7e-8 absolute error of `erfc` (see
/// `tools/fit_poly.py`), for the fused SIMD kernels (`arch::simd`), whose
/// roundings leave room for it.
pub(crate) const ERFC_LN5: [f32; 6] =
    [-7.806_842, -5.353_215, -0.945_968_9, -0.014_204_796, -0.000_426_374_58, -0.001_324_874_9];

/// `erfc(a) = exp(-a^2) Q(2 / (2 + a))` on `[0, 10.5]`; minimax for relative
/// error, 3.5e-8 (see `tools/fit_poly.py`).
pub(crate) const ERFC_Q: [f32; 10] = [
    -4.606_052_7e-6,
    0.282_190_8,
    0.281_379_67,
    0.248_356_49,
    0.185_754_76,
    0.008_067_415,
    0.232_724_12,
    -0.450_616_36,
    0.267_983_32,
    -0.055_835_64,
];

/// Error function: `x P(x^2)` below 0.85, `1 - exp(L)` above (where only
/// the absolute error of `erfc` matters); exactly ±1 beyond 3.95.
#[inline(always)]
pub(crate) fn erf<const F: bool>(x: f32) -> f32 {
    let a = x.abs();
    let small = x * horner::<F, 6>(x * x, &ERF_P);
    // Clamping also turns ±inf into ±1 (NaN passes).
    let b = if a > 3.95 { 3.95 } else { a };
    let big = (1.0 - exp_rough::<F>(horner::<F, 7>(b - 2.5, &ERFC_LN))).copysign(x);
    if a < 0.85 {
        small
    } else {
        big
    }
}

/// `-(v * v) k` as an unevaluated sum `hi + lo` for `k` = 1 or 1/2. With `F`
/// the fused `v * v - hi` is the exact error of `hi`; otherwise `vh` = `v` cut
/// to 12 significant bits makes `vh * vh` exact and `v^2 = vh^2 + (v - vh)(v +
/// vh)`. Requires `|v| <= 30` (no overflow).
#[inline(always)]
pub(crate) fn neg_square<const F: bool>(v: f32, k: f32) -> (f32, f32) {
    if F {
        let s = v * v;
        (-s * k, -v.mul_add(v, -s) * k)
    } else {
        let vh = f32::from_bits(v.to_bits() & 0xffff_f000);
        let vl = v - vh;
        (-(vh * vh) * k, -(vl * (v + vh)) * k)
    }
}

/// `erfc(a)` for `a >= 0` (0 beyond 10.5, where it underflows anyway), given
/// `-a^2 = hi + lo` from [`neg_square`]: the split keeps `exp(-a^2)` accurate
/// to a few ulp even where `a^2` is large.
#[inline(always)]
pub(crate) fn erfc_split<const F: bool>(a: f32, (hi, lo): (f32, f32)) -> f32 {
    let t = 2.0 / (2.0 + a);
    exp_small2::<F>(hi, lo) * horner::<F, 10>(t, &ERFC_Q)
}

/// `Phi(x) = erfc(-x / sqrt 2) / 2`, the standard normal CDF, with good
/// relative accuracy also for very negative `x` (used by GELU).
#[inline(always)]
pub(crate) fn normal_cdf<const F: bool>(x: f32) -> f32 {
    // Beyond 30 Phi is exactly 0 or 1 in f32 (NaN passes).
    let v = if x.abs() > 30.0 { 30.0 } else { x.abs() };
    let c = erfc_split::<F>(v * std::f32::consts::FRAC_1_SQRT_2, neg_square::<F>(v, 0.5));
    if x < 0.0 {
        0.5 * c
    } else {
        fma::<F>(-0.5, c, 1.0)
    }
}
