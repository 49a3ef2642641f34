//! The AVX2 (8-lane) kernels: the AVX-512 ones (`k16`) with each of
//! `vrangeps`, `vscalefps` and `vfixupimmps` spelled out, for the same bits.

use std::arch::x86_64::*;
use std::f32::consts::LOG2_E;

use super::{load8 as load, store8 as store};
use crate::math::texp::{C_HI, C_LO, MAGIC8, Q, T_HI, T_HI_M24, T_REL, X_MAX, X_MIN};

#[target_feature(enable = "avx2,fma")]
#[inline]
fn c(v: f32) -> __m256 {
    _mm256_set1_ps(v)
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn ci(v: i32) -> __m256i {
    _mm256_set1_epi32(v)
}

/// `(t, kf)` of `x * s` for `s` = 1 or -2 (see `math::texp`).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn round_k(x: __m256, s: f32) -> (__m256, __m256) {
    let t = _mm256_fmadd_ps(x, c(s * LOG2_E), c(MAGIC8));
    (t, _mm256_sub_ps(t, c(MAGIC8)))
}

/// `tab[j]` for the `j` in the low 3 bits of `t`.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn lookup(t: __m256, tab: &[f32; 8]) -> __m256 {
    _mm256_permutevar8x32_ps(load(tab), _mm256_castps_si256(t))
}

/// `(x 2^m)` for a normal result: `m = kf` rounded down, added to the
/// exponent bits (`t` holds `8 m + j` in its low 13 bits).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn scale_normal(x: __m256, t: __m256) -> __m256 {
    let e = _mm256_and_si256(_mm256_slli_epi32::<20>(_mm256_castps_si256(t)), ci(0xff80_0000_u32 as i32));
    _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(x), e))
}

/// `e^x 2^-m` for a reduced `x` from the table `hi` (`T_HI`, or `T_HI_M24`
/// for `e^x 2^-(m + 24)`), with `t`.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn mantissa(x: __m256, hi: &[f32; 8]) -> (__m256, __m256) {
    let (t, kf) = round_k(x, 1.0);
    let r = _mm256_fnmadd_ps(kf, c(C_LO), _mm256_fnmadd_ps(kf, c(C_HI), x));
    let (hi, rel) = (lookup(t, hi), lookup(t, &T_REL));
    let q = _mm256_fmadd_ps(_mm256_fmadd_ps(c(Q[2]), r, c(Q[1])), r, c(Q[0]));
    (_mm256_fmadd_ps(hi, _mm256_fmadd_ps(r, q, rel), hi), t)
}

/// `e^x` as `k16::exp`. With `CLAMP`, `2^m = 2^(m + c) 2^-c` with both
/// factors normal: the first product is exact, the second rounds once.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) fn exp<const CLAMP: bool>(x: &[f32; 8]) -> [f32; 8] {
    let mut x = load(x);
    if CLAMP {
        x = _mm256_min_ps(c(X_MAX), _mm256_max_ps(c(X_MIN), x));
    }
    let (v, t) = mantissa(x, &T_HI);
    if !CLAMP {
        return store(scale_normal(v, t));
    }
    store(scale_any(v, t))
}

/// `v 2^m` rounded once, as `vscalefps`, for `m` (from `t`, as in `scale_normal`) in
/// `[-150, 128]`: `2^m = 2^(m + c) 2^-c` with both factors normal, so the first
/// product is exact and the second rounds once.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn scale_any(v: __m256, t: __m256) -> __m256 {
    // m = k >> 3, k sign-extended from the low 22 bits of t.
    let m = _mm256_srai_epi32::<13>(_mm256_slli_epi32::<10>(_mm256_castps_si256(t)));
    let neg = _mm256_castsi256_ps(m);
    let cc = _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(ci(-1)), _mm256_castsi256_ps(ci(25)), neg));
    let s1 = _mm256_slli_epi32::<23>(_mm256_add_epi32(m, _mm256_add_epi32(cc, ci(127))));
    let s2 = _mm256_slli_epi32::<23>(_mm256_sub_epi32(ci(127), cc));
    _mm256_mul_ps(_mm256_mul_ps(v, _mm256_castsi256_ps(s1)), _mm256_castsi256_ps(s2))
}

/// Whether every `|x|` is at most 87 (no NaN), by an integer max of the bits.
#[inline(always)]
pub(super) fn tame(xs: &[f32]) -> bool {
    xs.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7fff_ffff)) <= 87.0f32.to_bits()
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn quot(n: __m256, d: __m256) -> __m256 {
    _mm256_div_ps(n, d)
}

/// Sigmoid as `k16::sigmoid`.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) fn sigmoid(x: &[f32; 8]) -> [f32; 8] {
    store(sigmoid_v(load(x)))
}

/// GELU (tanh form) as `k16::gelu_tanh`.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) fn gelu_tanh(x: &[f32; 8]) -> [f32; 8] {
    const TWO_SQRT_2_OVER_PI: f32 = 1.595_769;
    let xv = load(x);
    // 2u = x (c + 0.044715 c x^2) with c = 2 sqrt(2/pi): three operations.
    let x2 = _mm256_mul_ps(xv, xv);
    let u2 = _mm256_mul_ps(xv, _mm256_fmadd_ps(c(0.044_715 * TWO_SQRT_2_OVER_PI), x2, c(TWO_SQRT_2_OVER_PI)));
    store(_mm256_mul_ps(xv, sigmoid_v(u2)))
}

/// [`sigmoid`] of a register.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn sigmoid_v(x: __m256) -> __m256 {
    // -min(|x|, 104): a NaN in the second operand passes.
    let a = _mm256_max_ps(c(X_MIN), _mm256_or_ps(x, c(-0.0)));
    // As `mantissa(a, &T_HI_M24)`, with 151 added to the magic constant:
    // the same k, and t's bits shifted right by 3 then left by 23 are those
    // of 2^(m + 24) (m in [-150, 0]).
    let t = _mm256_fmadd_ps(a, c(LOG2_E), c(MAGIC8 + 151.0));
    let kf = _mm256_sub_ps(t, c(MAGIC8 + 151.0));
    let r = _mm256_fnmadd_ps(kf, c(C_LO), _mm256_fnmadd_ps(kf, c(C_HI), a));
    // Without T_REL, as `k16::mantissa_coarse`.
    let hi = lookup(t, &T_HI_M24);
    let q = _mm256_fmadd_ps(_mm256_fmadd_ps(c(Q[2]), r, c(Q[1])), r, c(Q[0]));
    let v = _mm256_fmadd_ps(hi, _mm256_mul_ps(r, q), hi);
    let s = _mm256_slli_epi32::<23>(_mm256_srli_epi32::<3>(_mm256_castps_si256(t)));
    // v 2^-24 times 2^(m + 24): one rounding, as vscalefps.
    let e = _mm256_mul_ps(v, _mm256_castsi256_ps(s));
    // e where the sign bit of x is set (at -0, e = 1; a NaN gives NaN in e).
    let num = _mm256_blendv_ps(c(1.0), e, x);
    quot(num, _mm256_add_ps(e, c(1.0)))
}

/// `p[0] + z p[1] + z^2 p[2] + ...` by Horner's rule.
#[target_feature(enable = "avx2,fma")]
#[inline]
fn horner<const N: usize>(z: __m256, p: &[f32; N]) -> __m256 {
    let mut acc = c(p[N - 1]);
    for &k in p[..N - 1].iter().rev() {
        acc = _mm256_fmadd_ps(acc, z, c(k));
    }
    acc
}

/// Erf as `k16::erf`.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) fn erf(x: &[f32; 8]) -> [f32; 8] {
    use crate::math::{ERFC_LN5, ERF_P};
    let x = load(x);
    let z = _mm256_mul_ps(x, x);
    let small = _mm256_mul_ps(x, horner(z, &ERF_P));
    // min(|x|, 3.95): a NaN stays NaN here, but its lane takes `small` as in k16.
    let a = _mm256_min_ps(c(3.95), _mm256_andnot_ps(c(-0.0), x));
    let l = horner(_mm256_sub_ps(a, c(2.5)), &ERFC_LN5);
    let (t, kf) = round_k(l, 1.0);
    let r = _mm256_fnmadd_ps(kf, c(std::f32::consts::LN_2), l);
    let hi = lookup(t, &T_HI);
    let q = _mm256_fmadd_ps(_mm256_fmadd_ps(c(Q[2]), r, c(Q[1])), r, c(Q[0]));
    // e^L >= 2^-27 is normal: adding m to the exponent is vscalefps.
    let e = scale_normal(_mm256_fmadd_ps(hi, _mm256_mul_ps(r, q), hi), t);
    let big = _mm256_or_ps(_mm256_sub_ps(c(1.0), e), _mm256_and_ps(c(-0.0), x));
    let take_small = _mm256_cmp_ps::<_CMP_NGE_UQ>(z, c(0.85 * 0.85));
    store(_mm256_blendv_ps(big, small, take_small))
}

/// Exact GELU as `k16::gelu`.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(super) fn gelu(x: &[f32; 8]) -> [f32; 8] {
    use crate::math::ERFC_Q;
    let x = load(x);
    let v = _mm256_min_ps(c(30.0), _mm256_andnot_ps(c(-0.0), x));
    let s = _mm256_mul_ps(v, v);
    let hi = _mm256_max_ps(_mm256_mul_ps(s, c(-0.5)), c(X_MIN));
    let lo = _mm256_mul_ps(_mm256_fmsub_ps(v, v, s), c(-0.5));
    let (t, kf) = round_k(hi, 1.0);
    let r = _mm256_add_ps(_mm256_fnmadd_ps(kf, c(C_HI), hi), _mm256_fnmadd_ps(kf, c(C_LO), lo));
    let (thi, rel) = (lookup(t, &T_HI), lookup(t, &T_REL));
    let q = _mm256_fmadd_ps(_mm256_fmadd_ps(c(Q[2]), r, c(Q[1])), r, c(Q[0]));
    let ex = scale_any(_mm256_fmadd_ps(thi, _mm256_fmadd_ps(r, q, rel), thi), t);
    let a = _mm256_mul_ps(v, c(std::f32::consts::FRAC_1_SQRT_2));
    let u = quot(c(2.0), _mm256_add_ps(c(2.0), a));
    let erfc = _mm256_mul_ps(ex, horner(u, &ERFC_Q));
    let phi = _mm256_blendv_ps(_mm256_fnmadd_ps(c(0.5), erfc, c(1.0)), _mm256_mul_ps(erfc, c(0.5)), x);
    store(_mm256_mul_ps(x, phi))
}
