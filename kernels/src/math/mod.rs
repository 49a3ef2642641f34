//! Scalar f32 building blocks shared by the kernels.
//!
//! Every function here is plain arithmetic, bit manipulation and `if`/`else`
//! expressions whose arms are cheap to evaluate speculatively, with no calls
//! into libm. A loop that maps one of them over a slice can therefore be
//! if-converted and auto-vectorised by LLVM (std's `f32::exp`, `f32::ln`,
//! `f32::tanh` are libm calls and block vectorisation).
//!
//! The const parameter `F` is `true` in the builds whose CPU has fused
//! multiply-add and SSE4.1 rounding (AVX2, AVX-512): [`fma`] is then one
//! `vfmadd` and `floor`/`ceil` one `vroundps`. The portable build (`F =
//! false`) rounds the product first and rounds with adds; both stay within the
//! pinned bounds.
//!
//! Accuracy (pinned by the tests here and the sweeps in `unary_tests.rs`):
//! `exp`, `expm1`, `ln` within 1.5 * 2^-23 relative error (1-2 ulp), `erf`
//! within 1.5e-7 absolute error and 2.5 * 2^-23 relative.

mod erf;
pub(crate) mod texp;

pub(crate) use erf::{erf, normal_cdf, ERFC_LN5, ERFC_Q, ERF_P};

/// `a * b + c`, fused (one rounding) when `F`.
#[inline(always)]
pub(crate) fn fma<const F: bool>(a: f32, b: f32, c: f32) -> f32 {
    if F {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `c[0] + x c[1] + x^2 c[2] + ...` by Horner's rule (unrolled: `N` is a constant).
#[inline(always)]
pub(crate) fn horner<const F: bool, const N: usize>(x: f32, c: &[f32; N]) -> f32 {
    let mut p = c[N - 1];
    for &k in c[..N - 1].iter().rev() {
        p = fma::<F>(p, x, k);
    }
    p
}

/// `ln 2` split in two: `LN2_HI` has its 9 low mantissa bits cleared, so
/// `n * LN2_HI` is exact for every `|n| < 2^9`, and `LN2_HI + LN2_LO` is `ln 2`
/// to about 2^-44.
const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
const LN2_LO: f32 = 1.428_606_8e-6;

/// `1.5 * 2^23`: adding it to any `|v| < 2^22` rounds `v` to the nearest
/// integer (ties to even), held in the low mantissa bits of the sum.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// `e^r = 1 + r Q(r)` for `|r| <= ln(2)/2`: minimax fit, 3.1e-9 relative
/// error (see `tools/fit_poly.py`).
const EXP_Q: [f32; 6] = [1.0, 0.499_999_94, 0.166_665_21, 0.041_668_255, 0.008_368_662, 0.001_382_145_7];

/// [`EXP_Q`] one degree lower: 9.2e-8 relative error, for the users whose
/// bound leaves room for it (one fused multiply-add less).
const EXP5_Q: [f32; 5] = [0.999_999_7, 0.499_991_5, 0.166_676_48, 0.041_897_833, 0.008_289_712];

/// `e^r - 1 = r + r^2 Q(r)` for `|r| <= ln(2)/2`: minimax fit, 1.4e-8
/// relative error (see `tools/fit_poly.py`).
const EXPM1_Q: [f32; 5] = [0.499_999_97, 0.166_665_46, 0.041_667_44, 0.008_366_253, 0.001_387_027_7];

/// `2^-24`.
const TWO_M24: f32 = 5.960_464_5e-8;

/// `c * 2^-24`, exactly.
const fn scaled<const N: usize>(c: [f32; N]) -> [f32; N] {
    let mut out = c;
    let mut i = 0;
    while i < N {
        out[i] = c[i] * TWO_M24;
        i += 1;
    }
    out
}

/// `(r, 2^(n + b - 127))` with `x = n ln 2 + r`, `|r| <= ln(2)/2 + tiny`, given
/// `bias = ROUND_MAGIC + b` and `n + b` in `[1, 254]`: the power of two is read
/// straight from the bits of the rounded `x log2(e) + bias`. `x - n LN2_HI`
/// is exact.
#[inline(always)]
fn reduce<const F: bool>(x: f32, bias: f32) -> (f32, f32) {
    let t = fma::<F>(x, std::f32::consts::LOG2_E, bias);
    let nf = t - bias;
    let r = fma::<F>(nf, -LN2_LO, fma::<F>(nf, -LN2_HI, x));
    (r, f32::from_bits(t.to_bits() << 23))
}

/// [`reduce`] of the unevaluated sum `x + lo` for a small correction `lo`:
/// `lo` joins after the exact `x - n LN2_HI`, so it is never rounded into `x`
/// first.
#[inline(always)]
fn reduce2<const F: bool>(x: f32, lo: f32, bias: f32) -> (f32, f32) {
    let t = fma::<F>(x, std::f32::consts::LOG2_E, bias);
    let nf = t - bias;
    let r = fma::<F>(nf, -LN2_HI, x) + fma::<F>(nf, -LN2_LO, lo);
    (r, f32::from_bits(t.to_bits() << 23))
}

/// `e^r * 2^-24` for a reduced `r`, from [`EXP_Q`] (`N = 6`) or [`EXP5_Q`]
/// (`N = 5`) scaled by 2^-24: the scaling is exact and costs nothing.
#[inline(always)]
fn exp_poly_m24<const F: bool, const N: usize>(r: f32) -> f32 {
    const Q6: [f32; 6] = scaled(EXP_Q);
    const Q5: [f32; 5] = scaled(EXP5_Q);
    let q = if N == 5 { horner::<F, 5>(r, &Q5) } else { horner::<F, 6>(r, &Q6) };
    fma::<F>(r, q, TWO_M24)
}

/// `e^x` for `x <= 70` (any `x` below; NaN in gives NaN), with the degree
/// `N` (5 or 6) polynomial. The scaling `2^n = 2^(n + 24) 2^-24` keeps both
/// factors normal down to the last subnormal, so a subnormal result is
/// rounded once.
#[inline(always)]
pub(crate) fn exp_small<const F: bool, const N: usize>(x: f32) -> f32 {
    // Below -104 the result is 0; clamping keeps n >= -150.
    let x = if x < -104.0 { -104.0 } else { x };
    let (r, s) = reduce::<F>(x, ROUND_MAGIC + 151.0);
    exp_poly_m24::<F, N>(r) * s
}

/// `e^(x + lo)` for `x <= 70` and a small correction `lo` (see [`exp_small`]
/// and [`reduce2`]).
#[inline(always)]
pub(crate) fn exp_small2<const F: bool>(x: f32, lo: f32) -> f32 {
    let x = if x < -104.0 { -104.0 } else { x };
    let (r, s) = reduce2::<F>(x, lo, ROUND_MAGIC + 151.0);
    exp_poly_m24::<F, 6>(r) * s
}

/// `e^x` for `|x| <= 80` to about 1e-7 relative error (one-constant
/// reduction, degree 5): for `erf`, which only needs the absolute error of a
/// result below 1.
#[inline(always)]
pub(crate) fn exp_rough<const F: bool>(x: f32) -> f32 {
    let bias = ROUND_MAGIC + 127.0;
    let t = fma::<F>(x, std::f32::consts::LOG2_E, bias);
    let r = fma::<F>(t - bias, -std::f32::consts::LN_2, x);
    fma::<F>(r, horner::<F, 5>(r, &EXP5_Q), 1.0) * f32::from_bits(t.to_bits() << 23)
}

/// `e^x`. Overflows to `+inf` above ~88.72, underflows through the subnormals
/// to `0` below ~-103.97; NaN in, NaN out.
#[inline(always)]
pub(crate) fn exp<const F: bool>(x: f32) -> f32 {
    // Clamping keeps n in [-150, 128] (`clamp` lets NaN through).
    let x = x.clamp(-104.0, 89.0);
    // 2^n = 2^(n + k) 2^-k with both factors normal: k = 24 for x < 0,
    // k = -1 above.
    let (bias, s2) = if x < 0.0 { (ROUND_MAGIC + 151.0, TWO_M24) } else { (ROUND_MAGIC + 126.0, 2.0) };
    let (r, s1) = reduce::<F>(x, bias);
    let p = fma::<F>(r, horner::<F, 6>(r, &EXP_Q), 1.0);
    p * s1 * s2
}

/// `e^x` for `|x| <= 87` (normal results), equal bit for bit there to
/// [`exp`] (`N = 6`) or [`exp_small`] (`N` = 5 or 6): no clamping, and `2^n`
/// is added straight into the exponent bits of `e^r` (exact while the result
/// is normal; the 2^-24 scaling of `exp_small` is exact too).
#[inline(always)]
pub(crate) fn exp_fast<const F: bool, const N: usize>(x: f32) -> f32 {
    let t = fma::<F>(x, std::f32::consts::LOG2_E, ROUND_MAGIC);
    let nf = t - ROUND_MAGIC;
    let r = fma::<F>(nf, -LN2_LO, fma::<F>(nf, -LN2_HI, x));
    let q = if N == 5 { horner::<F, 5>(r, &EXP5_Q) } else { horner::<F, 6>(r, &EXP_Q) };
    let p = fma::<F>(r, q, 1.0);
    // The low bits of t hold n (two's complement): shifted, n << 23.
    f32::from_bits(p.to_bits().wrapping_add(t.to_bits() << 23))
}

/// `e^x - 1` for `-30 <= x <= 0`.
#[inline(always)]
fn expm1_core<const F: bool>(x: f32) -> f32 {
    let (r, s) = reduce::<F>(x, ROUND_MAGIC + 127.0);
    let p = fma::<F>(r * r, horner::<F, 5>(r, &EXPM1_Q), r);
    // e^x - 1 = 2^n (1 + p) - 1 = 2^n p + (2^n - 1); n in [-44, 0], and
    // 2^n - 1 is exact for n >= -24 (below, the result is -1 anyway).
    fma::<F>(s, p, s - 1.0)
}

/// `e^x - 1` for `x <= 0`, accurate near zero and keeping the sign of `-0`
/// (NaN in gives NaN; `x > 0` gives `+0`).
#[inline(always)]
pub(crate) fn expm1_neg<const F: bool>(x: f32) -> f32 {
    // Below -30 the result rounds to -1.
    let x = x.clamp(-30.0, 0.0);
    expm1_core::<F>(x).copysign(x)
}

/// Natural logarithm: `ln(0) = -inf`, `ln(x < 0) = NaN`, `ln(+inf) = +inf`.
#[inline(always)]
pub(crate) fn ln<const F: bool>(x: f32) -> f32 {
    // Subnormals are scaled into the normal range first.
    let sub = x < f32::MIN_POSITIVE;
    let xs = if sub { x * 8_388_608.0 } else { x };
    let bits = xs.to_bits() as i32;
    // Write xs = 2^k * m with m in [sqrt(1/2), sqrt(2)).
    let k = bits.wrapping_sub(0x3f35_04f3) >> 23; // 0x3f3504f3 = sqrt(1/2)
    let m = f32::from_bits(bits.wrapping_sub(k << 23) as u32);
    let k = k - if sub { 23 } else { 0 };
    // ln(1 + f) = 2 atanh(s) with s = f / (2 + f), |s| <= 0.1716, rearranged
    // as f - (f^2/2 - s (f^2/2 + R)) where R = 2 s^2/3 + 2 s^4/5 + ...; the
    // exact f dominates, so the rounding errors only touch the correction.
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let r = z * horner::<F, 4>(z, &[2.0 / 3.0, 2.0 / 5.0, 2.0 / 7.0, 2.0 / 9.0]);
    let hfsq = 0.5 * f * f;
    let kf = k as f32;
    let y = fma::<F>(kf, LN2_HI, f - (hfsq - fma::<F>(s, hfsq + r, kf * LN2_LO)));
    if x == 0.0 {
        f32::NEG_INFINITY
    } else if x < 0.0 || x.is_nan() {
        f32::NAN
    } else if x == f32::INFINITY {
        x
    } else {
        y
    }
}

/// `ln(1 + x)` for `x >= -1`, accurate for tiny `x`: with `w = 1 + x`
/// rounded, `ln(w) * x / (w - 1)` cancels the rounding of `w`.
#[inline(always)]
pub(crate) fn ln_1p<const F: bool>(x: f32) -> f32 {
    let w = 1.0 + x;
    let d = w - 1.0;
    let q = ln::<F>(w) * (x / d);
    if d == 0.0 {
        x
    } else if w == f32::INFINITY {
        w
    } else {
        q
    }
}

/// `tanh(a) = a P(a^2) / Q(a^2)` on `[0, 9.1]`: minimax for relative error,
/// 1.1e-8 with the f32 coefficients (see `tools/fit_poly.py`). `P(0) = Q(0) =
/// 1`, so a tiny `a` (even a subnormal one) comes back unchanged.
const TANH_P: [f32; 6] = [1.0, 0.136_777_9, 0.003_865_635_3, 2.795_140_6e-5, 3.044_348e-8, -1.209_260_7e-11];
const TANH_Q: [f32; 5] = [1.0, 0.470_111_22, 0.027_236_06, 0.000_393_382_22, 1.283_359_4e-6];

/// Hyperbolic tangent with the sign of `x`. With fused multiply-adds (`F`) the
/// rational `a P(a^2) / Q(a^2)` ([`TANH_P`], [`TANH_Q`]), capped at 1: five
/// fewer vector operations than the `expm1` form, measured within 2.0 * 2^-23
/// of tanh. Unfused, its roundings reach 3 * 2^-23, so the portable build keeps
/// `-expm1(-2|x|) / (2 + expm1(-2|x|))` (1.4 * 2^-23).
#[inline(always)]
pub(crate) fn tanh<const F: bool>(x: f32) -> f32 {
    let a = x.abs();
    if F {
        // Beyond 9.1 tanh rounds to 1; so does the capped rational. Each `if` is one
        // `vminps` that lets NaN through.
        let a = if 9.1 < a { 9.1 } else { a };
        let z = a * a;
        let t = a * horner::<F, 6>(z, &TANH_P) / horner::<F, 5>(z, &TANH_Q);
        let t = if 1.0 < t { 1.0 } else { t };
        return t.copysign(x);
    }
    // Beyond 10 tanh rounds to ±1 (NaN passes). Written as `min(10, a)` and
    // `-2a` so that each is one instruction (`vminps`, `vmulps`).
    let a = if 10.0 < a { 10.0 } else { a };
    let e = expm1_core::<F>(a * -2.0);
    (e / (-2.0 - e)).copysign(x)
}

/// Logistic function without overflow: `1 / (1 + e^-x)` for `x >= 0` and
/// `e^x / (1 + e^x)` below, both from `e = exp(-|x|)`.
#[inline(always)]
pub(crate) fn sigmoid<const F: bool>(x: f32) -> f32 {
    let e = exp_small::<F, 5>(-x.abs());
    let num = if x >= 0.0 { 1.0 } else { e };
    num / (1.0 + e)
}

/// Rounds to an integer towards `-inf` (`up = false`) or `+inf` (`up = true`),
/// exactly like `f32::floor` / `f32::ceil` including the sign of zero: one
/// `vroundps` when `F`, adds and selects otherwise (no libm call).
#[inline(always)]
pub(crate) fn round_dir<const F: bool>(x: f32, up: bool) -> f32 {
    if F {
        return if up { x.ceil() } else { x.floor() };
    }
    const TWO_23: f32 = 8_388_608.0;
    let a = x.abs();
    // Nearest integer to x, exact for |x| < 2^23 (larger floats are integers).
    let n = ((a + TWO_23) - TWO_23).copysign(x);
    let r = if up {
        if n < x {
            n + 1.0
        } else {
            n
        }
    } else if n > x {
        n - 1.0
    } else {
        n
    };
    if a < TWO_23 {
        r.copysign(x)
    } else {
        x
    }
}

#[cfg(test)]
mod tests;
