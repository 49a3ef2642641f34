//! The AVX-512 (16-lane) kernels.

use std::arch::x86_64::*;
use std::f32::consts::LOG2_E;

use super::{load16 as load, store16 as store};
use crate::math::texp::{C_HI, C_LO, MAGIC8, Q, T_HI, T_REL, X_MAX, X_MIN};

/// An 8-entry table twice: `vpermps` on 16 lanes reads 4 index bits.
const fn twice(t: [f32; 8]) -> [f32; 16] {
    [t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7]]
}
const HI: [f32; 16] = twice(T_HI);
const REL: [f32; 16] = twice(T_REL);

#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn c(v: f32) -> __m512 {
    _mm512_set1_ps(v)
}

/// `(t, kf)` of `x * s` for `s` = 1 or -2 (see `math::texp`).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn round_k(x: __m512, s: f32) -> (__m512, __m512) {
    let t = _mm512_fmadd_ps(x, c(s * LOG2_E), c(MAGIC8));
    (t, _mm512_sub_ps(t, c(MAGIC8)))
}

/// `(T_HI[j], T_REL[j])` for the `j` in the low 3 bits of `t`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn lookup(t: __m512) -> (__m512, __m512) {
    let idx = _mm512_castps_si512(t);
    (_mm512_permutexvar_ps(idx, load(&HI)), _mm512_permutexvar_ps(idx, load(&REL)))
}

/// `e^x 2^-m` for a reduced `x` (in `[0.95, 2)`).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn mantissa(x: __m512) -> (__m512, __m512) {
    let (t, kf) = round_k(x, 1.0);
    let r = _mm512_fnmadd_ps(kf, c(C_LO), _mm512_fnmadd_ps(kf, c(C_HI), x));
    let (hi, rel) = lookup(t);
    let q = _mm512_fmadd_ps(_mm512_fmadd_ps(c(Q[2]), r, c(Q[1])), r, c(Q[0]));
    (_mm512_fmadd_ps(hi, _mm512_fmadd_ps(r, q, rel), hi), kf)
}

/// [`mantissa`] without the `T_REL` correction (one permute less): up to
/// half an ulp of `T_HI[j]` more error, which Sigmoid's bound leaves room for.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn mantissa_coarse(x: __m512) -> (__m512, __m512) {
    let (t, kf) = round_k(x, 1.0);
    let r = _mm512_fnmadd_ps(kf, c(C_LO), _mm512_fnmadd_ps(kf, c(C_HI), x));
    let hi = _mm512_permutexvar_ps(_mm512_castps_si512(t), load(&HI));
    let q = _mm512_fmadd_ps(_mm512_fmadd_ps(c(Q[2]), r, c(Q[1])), r, c(Q[0]));
    (_mm512_fmadd_ps(hi, _mm512_mul_ps(r, q), hi), kf)
}

/// `e^x`; clamped to `[X_MIN, X_MAX]` when `CLAMP`, else `|x| <= 87` is
/// required. `vscalefps` scales exactly or rounds once (into the
/// subnormals, or to `inf`).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(super) fn exp<const CLAMP: bool>(x: &[f32; 16]) -> [f32; 16] {
    store(exp_v::<CLAMP>(load(x)))
}

/// [`exp`] in a register.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(super) fn exp_v<const CLAMP: bool>(mut x: __m512) -> __m512 {
    if CLAMP {
        // A NaN in the second operand passes.
        x = _mm512_min_ps(c(X_MAX), _mm512_max_ps(c(X_MIN), x));
    }
    let (v, kf) = mantissa(x);
    _mm512_scalef_ps(v, kf)
}

/// Whether every `|x|` is at most 87: `vrangeps` keeps the largest
/// magnitude, one instruction per 16 lanes. It drops a quiet NaN (IEEE
/// `maxNum`), so a block with one may pass; the unclamped formula gives NaN
/// for it all the same.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(super) fn tame(xs: &[f32]) -> bool {
    let mut acc = _mm512_setzero_ps();
    let mut blocks = xs.chunks_exact(16);
    for b in &mut blocks {
        acc = _mm512_range_ps::<0b1011>(acc, load(b.try_into().expect("16")));
    }
    // Ordered compare: false for NaN.
    _mm512_cmp_ps_mask::<_CMP_LE_OQ>(acc, c(87.0)) == 0xffff && super::k8::tame(blocks.remainder())
}

/// `e^x` of `xs` into `ys` without clamping, and whether every `|x|` was at most 87
/// (when not, the caller computes the block again with clamping). The magnitudes are
/// gathered as in [`tame`], in the same pass.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(super) fn exp_tame_into(xs: &[f32], ys: &mut [f32]) -> bool {
    let mut acc = _mm512_setzero_ps();
    let mut xc = xs.chunks_exact(16);
    let mut yc = ys.chunks_exact_mut(16);
    for (xb, yb) in (&mut xc).zip(&mut yc) {
        let xb: &[f32; 16] = xb.try_into().expect("16");
        acc = _mm512_range_ps::<0b1011>(acc, load(xb));
        yb.copy_from_slice(&exp::<false>(xb));
    }
    let (xr, yr) = (xc.remainder(), yc.into_remainder());
    if !xr.is_empty() {
        let mut pad = [0.0f32; 16];
        pad[..xr.len()].copy_from_slice(xr);
        acc = _mm512_range_ps::<0b1011>(acc, load(&pad));
        yr.copy_from_slice(&exp::<false>(&pad)[..xr.len()]);
    }
    // Ordered compare: false for NaN.
    _mm512_cmp_ps_mask::<_CMP_LE_OQ>(acc, c(87.0)) == 0xffff
}

/// `n / d`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn quot(n: __m512, d: __m512) -> __m512 {
    _mm512_div_ps(n, d)
}

/// `(x >= 0 ? 1 : e) / (1 + e)` with `e = e^-|x|`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(super) fn sigmoid(x: &[f32; 16]) -> [f32; 16] {
    store(sigmoid_v(load(x)))
}

/// [`sigmoid`] of a register.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn sigmoid_v(x: __m512) -> __m512 {
    // -min(|x|, 104) (NaN passes): below e^-104 rounds to 0.
    let a = _mm512_range_ps::<0b1110>(x, c(-X_MIN));
    let (v, kf) = mantissa_coarse(a);
    let e = _mm512_scalef_ps(v, kf);
    // 1 where x is zero, +1, +inf or positive; e where negative or -inf;
    // NaN where x is NaN (vrangeps returned 104 there).
    let num = _mm512_fixupimm_ps::<0>(e, x, _mm512_set1_epi32(0xa0a0_aa22_u32 as i32));
    quot(num, _mm512_add_ps(e, c(1.0)))
}

/// `x sigmoid(2u)` with `u = sqrt(2/pi) (x + 0.044715 x^3)`: GELU's tanh
/// form (`0.5 (1 + tanh u) = sigmoid(2u)`), as `math`'s `gelu_tanh`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(super) fn gelu_tanh(x: &[f32; 16]) -> [f32; 16] {
    const TWO_SQRT_2_OVER_PI: f32 = 1.595_769;
    let xv = load(x);
    // 2u = x (c + 0.044715 c x^2) with c = 2 sqrt(2/pi): three operations.
    let x2 = _mm512_mul_ps(xv, xv);
    let u2 = _mm512_mul_ps(xv, _mm512_fmadd_ps(c(0.044_715 * TWO_SQRT_2_OVER_PI), x2, c(TWO_SQRT_2_OVER_PI)));
    store(_mm512_mul_ps(xv, sigmoid_v(u2)))
}

/// `p[0] + z p[1] + z^2 p[2] + ...` by Horner's rule.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn horner<const N: usize>(z: __m512, p: &[f32; N]) -> __m512 {
    let mut acc = c(p[N - 1]);
    for &k in p[..N - 1].iter().rev() {
        acc = _mm512_fmadd_ps(acc, z, c(k));
    }
    acc
}

/// `erf(x)`, as `math::erf`: `x P(x^2)` where `x^2 < 0.85^2` (and for NaN), else
/// `1 - e^L(a - 2.5)` with `a = min(|x|, 3.95)` and the sign of `x`. `e^L` (`L` in
/// `[-18.3, -1.5]`) comes from the table with one constant for `ln 2` and no `T_REL`:
/// erf needs only its absolute error, which stays below 1.2e-8 (`e^L <= 0.23`).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(super) fn erf(x: &[f32; 16]) -> [f32; 16] {
    use crate::math::{ERFC_LN5, ERF_P};
    let x = load(x);
    let z = _mm512_mul_ps(x, x);
    let small = _mm512_mul_ps(x, horner(z, &ERF_P));
    // min(|x|, 3.95) (a NaN becomes 3.95; its lane takes `small`).
    let a = _mm512_range_ps::<0b1010>(x, c(3.95));
    let l = horner(_mm512_sub_ps(a, c(2.5)), &ERFC_LN5);
    let (t, kf) = round_k(l, 1.0);
    let r = _mm512_fnmadd_ps(kf, c(std::f32::consts::LN_2), l);
    let hi = _mm512_permutexvar_ps(_mm512_castps_si512(t), load(&HI));
    let q = _mm512_fmadd_ps(_mm512_fmadd_ps(c(Q[2]), r, c(Q[1])), r, c(Q[0]));
    let e = _mm512_scalef_ps(_mm512_fmadd_ps(hi, _mm512_mul_ps(r, q), hi), kf);
    // 1 - e >= 0.77, with the sign bit of x (0xf8: A | (B & C)).
    let big = _mm512_castsi512_ps(_mm512_ternarylogic_epi32::<0xf8>(
        _mm512_castps_si512(_mm512_sub_ps(c(1.0), e)),
        _mm512_set1_epi32(i32::MIN),
        _mm512_castps_si512(x),
    ));
    let take_small = _mm512_cmp_ps_mask::<_CMP_NGE_UQ>(z, c(0.85 * 0.85));
    store(_mm512_mask_blend_ps(take_small, big, small))
}

/// Exact GELU `x Phi(x)`, as `unary::gelu`: `Phi(x) = erfc(a) / 2` for `x < 0` (the
/// sign bit set) and `1 - erfc(a) / 2` otherwise, with `a = v / sqrt(2)`, `v =
/// min(|x|, 30)` and `erfc(a) = e^(-a^2) Q(2 / (2 + a))`. `-a^2 = -v^2 / 2` is the
/// exact sum `hi + lo` (the fused `v v - v^2` is the error of `v^2`), and `e^(hi + lo)`
/// comes from the table (`hi` clamped at `X_MIN`, where the result is 0 anyway), so a
/// tiny `Phi` keeps its relative accuracy.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
pub(super) fn gelu(x: &[f32; 16]) -> [f32; 16] {
    use crate::math::ERFC_Q;
    let x = load(x);
    // min(|x|, 30) (a NaN becomes 30; the last product gives NaN back).
    let v = _mm512_range_ps::<0b1010>(x, c(30.0));
    let s = _mm512_mul_ps(v, v);
    let hi = _mm512_max_ps(_mm512_mul_ps(s, c(-0.5)), c(X_MIN));
    let lo = _mm512_mul_ps(_mm512_fmsub_ps(v, v, s), c(-0.5));
    let (t, kf) = round_k(hi, 1.0);
    let r = _mm512_add_ps(_mm512_fnmadd_ps(kf, c(C_HI), hi), _mm512_fnmadd_ps(kf, c(C_LO), lo));
    let (thi, rel) = lookup(t);
    let q = _mm512_fmadd_ps(_mm512_fmadd_ps(c(Q[2]), r, c(Q[1])), r, c(Q[0]));
    let ex = _mm512_scalef_ps(_mm512_fmadd_ps(thi, _mm512_fmadd_ps(r, q, rel), thi), kf);
    let a = _mm512_mul_ps(v, c(std::f32::consts::FRAC_1_SQRT_2));
    let u = quot(c(2.0), _mm512_add_ps(c(2.0), a));
    let erfc = _mm512_mul_ps(ex, horner(u, &ERFC_Q));
    let neg = _mm512_movepi32_mask(_mm512_castps_si512(x));
    let phi = _mm512_mask_blend_ps(neg, _mm512_fnmadd_ps(c(0.5), erfc, c(1.0)), _mm512_mul_ps(erfc, c(0.5)));
    store(_mm512_mul_ps(x, phi))
}
