//! Scalar f32 building blocks shared by the kernels.
//!
//! Every function here is plain arithmetic, bit manipulation and `if`/`else`
//! expressions whose arms are cheap to evaluate speculatively, with no calls
//! into libm. A loop that maps one of them over a slice can therefore be
//! if-converted and auto-vectorized by LLVM (std's `f32::exp`, `f32::ln`,
//! `f32::tanh` are libm calls and block vectorization).
//!
//! Accuracy (pinned by the tests here and the sweeps in `unary_tests.rs`):
//! `exp`, `expm1`, `ln` within 1.5 * 2^-23 relative error (1-2 ulp), `erf`
//! within 1.5e-7 absolute error (measured 1.2e-7) and 2.5 * 2^-23 relative.

/// `ln 2` split in two: `LN2_HI` has its 9 low mantissa bits cleared, so
/// `n * LN2_HI` is exact for every `|n| < 2^9`, and `LN2_HI + LN2_LO` is `ln 2`
/// to about 2^-44.
const LN2_HI: f32 = f32::from_bits(0x3f31_7200);
const LN2_LO: f32 = 1.428_606_8e-6;

/// `1.5 * 2^23`: adding then subtracting it rounds any `|v| < 2^22` to the
/// nearest integer (ties to even), and the bits of `v + ROUND_MAGIC` hold that
/// integer in their low mantissa bits.
const ROUND_MAGIC: f32 = 12_582_912.0;

/// `2^k` for `k` in `[-126, 127]` (outside that range the result is garbage,
/// never a panic).
#[inline(always)]
fn pow2(k: i32) -> f32 {
    f32::from_bits((k.wrapping_add(127) as u32) << 23)
}

/// `v * 2^n` for `n` in `[-252, 254]`, with a single rounding when the result
/// is subnormal (the first factor keeps `v` normal).
#[inline(always)]
fn scale(v: f32, n: i32) -> f32 {
    let h = n >> 1;
    v * pow2(h) * pow2(n.wrapping_sub(h))
}

/// Splits `x = n * ln 2 + r` with `|r| <= ln(2) / 2` (for `|x| < 2^21`);
/// `n` is returned as an integer and as a float.
#[inline(always)]
fn split_n(x: f32) -> (i32, f32) {
    let t = x * std::f32::consts::LOG2_E + ROUND_MAGIC;
    let n = (t.to_bits() as i32).wrapping_sub(ROUND_MAGIC.to_bits() as i32);
    (n, t - ROUND_MAGIC)
}

/// `(n, r)` with `x = n ln 2 + r`; `x - n * LN2_HI` is exact.
#[inline(always)]
fn reduce(x: f32) -> (i32, f32) {
    let (n, nf) = split_n(x);
    (n, (x - nf * LN2_HI) - nf * LN2_LO)
}

/// [`reduce`] of the unevaluated sum `x + lo` for a small correction `lo`:
/// `lo` joins after the exact `x - n * LN2_HI`, so it is never rounded into
/// `x` first.
#[inline(always)]
fn reduce2(x: f32, lo: f32) -> (i32, f32) {
    let (n, nf) = split_n(x);
    (n, (x - nf * LN2_HI) + (lo - nf * LN2_LO))
}

/// `exp(r) - 1` for `|r| <= ln(2) / 2`: Taylor series to degree 8, whose
/// truncation error there is below 6e-10 relative.
#[inline(always)]
fn expm1_small(r: f32) -> f32 {
    const C: [f32; 7] = [1.0 / 2.0, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0, 1.0 / 720.0, 1.0 / 5040.0, 1.0 / 40320.0];
    let p = C[0] + r * (C[1] + r * (C[2] + r * (C[3] + r * (C[4] + r * (C[5] + r * C[6])))));
    r + r * r * p
}

/// `e^x`. Overflows to `+inf` above ~88.72, underflows through the subnormals
/// to `0` below ~-103.97; NaN in, NaN out.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    // Clamping keeps `n` in range (`clamp` lets NaN through).
    let x = x.clamp(-104.0, 89.0);
    let (n, r) = reduce(x);
    scale(1.0 + expm1_small(r), n)
}

/// `e^(x + lo)` for a small correction `lo` (see [`reduce2`]).
#[inline(always)]
fn exp2parts(x: f32, lo: f32) -> f32 {
    let x = x.clamp(-104.0, 89.0);
    let (n, r) = reduce2(x, lo);
    scale(1.0 + expm1_small(r), n)
}

/// `e^x - 1`, accurate near zero (keeps the sign of `-0.0`).
#[inline(always)]
pub(crate) fn expm1(x: f32) -> f32 {
    // Below -30 the result rounds to -1.
    let x = x.clamp(-30.0, 89.0);
    let (n, r) = reduce(x);
    let p = expm1_small(r);
    // e^x - 1 = 2^n (p + 1) - 1.
    // n > 0: 2^n (p + (1 - 2^-n)); 1 - 2^-n is exact up to n = 24 and rounds
    // to 1 beyond, where the -1 no longer matters.
    let up = scale(p + (1.0 - pow2(n.min(30).wrapping_neg())), n);
    // n < 0 (n >= -44 after the clamp): 2^n p + (2^n - 1), 2^n - 1 exact.
    let s = pow2(n.max(-60));
    let down = s * p + (s - 1.0);
    if n > 0 {
        up
    } else if n < 0 {
        down
    } else if x == 0.0 {
        x // keep the sign of zero (p is +0 for -0)
    } else {
        p
    }
}

/// Natural logarithm: `ln(0) = -inf`, `ln(x < 0) = NaN`, `ln(+inf) = +inf`.
#[inline(always)]
pub(crate) fn ln(x: f32) -> f32 {
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
    let r = z * (2.0 / 3.0 + z * (2.0 / 5.0 + z * (2.0 / 7.0 + z * (2.0 / 9.0))));
    let hfsq = 0.5 * f * f;
    let kf = k as f32;
    let y = kf * LN2_HI + (f - (hfsq - (s * (hfsq + r) + kf * LN2_LO)));
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
pub(crate) fn ln_1p(x: f32) -> f32 {
    let w = 1.0 + x;
    let d = w - 1.0;
    let q = ln(w) * (x / d);
    if d == 0.0 {
        x
    } else if w == f32::INFINITY {
        w
    } else {
        q
    }
}

/// `tanh(x) = -expm1(-2|x|) / (2 + expm1(-2|x|))` with the sign of `x`; the
/// `expm1` form keeps full relative accuracy near zero.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    let e = expm1(-2.0 * x.abs());
    (-e / (2.0 + e)).copysign(x)
}

/// Logistic function without overflow: `1 / (1 + e^-x)` for `x >= 0` and
/// `e^x / (1 + e^x)` below, both from `e = exp(-|x|)`.
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    let e = exp(-x.abs());
    let s = 1.0 / (1.0 + e);
    if x >= 0.0 {
        s
    } else {
        e * s
    }
}

/// `erf(x) = x * P(x^2)` on `[0, 1)`; fitted for relative error (see
/// `tools/fit_erf.py`), 1.2e-9 before f32 rounding.
#[allow(clippy::approx_constant)] // the fit lands one ulp below 2/sqrt(pi)
const ERF_P: [f32; 7] =
    [1.128_379_1, -0.376_126_26, 0.112_835_854, -0.026_853_813, 0.005_188_328_7, -0.000_801_020_07, 7.853_882_6e-5];

/// `erfc(x) = exp(-x^2) * Q(2 / (2 + x))` on `[0.5, 10.5]`; fitted for
/// relative error (see `tools/fit_erf.py`), 1.7e-9 before f32 rounding.
const ERFC_Q: [f32; 10] = [
    3.498_091_5e-6,
    0.281_985_52,
    0.283_583_58,
    0.235_195_3,
    0.233_973_19,
    -0.104_521_774,
    0.400_675_77,
    -0.605_386_7,
    0.348_167_24,
    -0.073_682_59,
];

#[inline(always)]
fn erf_small(x: f32) -> f32 {
    let z = x * x;
    let p = &ERF_P;
    let q = p[0] + z * (p[1] + z * (p[2] + z * (p[3] + z * (p[4] + z * (p[5] + z * p[6])))));
    x * q
}

/// `-(v * v) / 2^k` as an unevaluated sum `hi + lo` (`k` = 0 or 1): with
/// `vh` = `v` cut to 12 significant bits, `vh * vh` is exact and
/// `v^2 = vh^2 + (v - vh)(v + vh)`. Requires `|v| <= 30` (no overflow).
#[inline(always)]
fn neg_square(v: f32, half: bool) -> (f32, f32) {
    let vh = f32::from_bits(v.to_bits() & 0xffff_f000);
    let vl = v - vh;
    let k = if half { 0.5 } else { 1.0 };
    (-(vh * vh) * k, -(vl * (v + vh)) * k)
}

/// `erfc(a)` for `a >= 0.5` (0 beyond 10.5, where it underflows anyway), given
/// `-a^2 = hi + lo` from [`neg_square`]; the split keeps `exp(-a^2)`
/// accurate to a few ulp even where `a^2` is large.
#[inline(always)]
fn erfc_tail(a: f32, (hi, lo): (f32, f32)) -> f32 {
    let t = 2.0 / (2.0 + a);
    let c = &ERFC_Q;
    let mut q = c[9];
    for &k in c[..9].iter().rev() {
        q = q * t + k;
    }
    exp2parts(hi, lo) * q
}

/// Error function.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    // Beyond 20 erf is exactly ±1 in f32; clamping also avoids inf - inf.
    let a = if x.abs() > 20.0 { 20.0 } else { x.abs() };
    let small = erf_small(x);
    let big = (1.0 - erfc_tail(a, neg_square(a, false))).copysign(x);
    if a < 1.0 {
        small
    } else {
        big
    }
}

/// `Phi(x) = erfc(-x / sqrt 2) / 2`, the standard normal CDF, with good
/// relative accuracy also for very negative `x` (used by GELU).
#[inline(always)]
pub(crate) fn normal_cdf(x: f32) -> f32 {
    // Beyond 30 Phi is exactly 0 or 1 in f32.
    let v = if x.abs() > 30.0 { 30.0 } else { x.abs() };
    let a = v * std::f32::consts::FRAC_1_SQRT_2;
    let c = if a < 0.5 { 1.0 - erf_small(a) } else { erfc_tail(a, neg_square(v, true)) };
    if x < 0.0 {
        0.5 * c
    } else {
        1.0 - 0.5 * c
    }
}

/// Rounds to an integer towards `-inf` (`up = false`) or `+inf` (`up = true`),
/// exactly like `f32::floor` / `f32::ceil` including the sign of zero, but
/// without a libm call.
#[inline(always)]
pub(crate) fn round_dir(x: f32, up: bool) -> f32 {
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
mod tests {
    use super::*;
    use crate::reference;

    const ULP1: f64 = 1.192_092_895_507_812_5e-7;

    #[test]
    fn ln2_split_is_exact_enough() {
        let hi = f64::from(LN2_HI);
        // n * LN2_HI exact for |n| <= 256: LN2_HI has at most 15 significant bits.
        assert_eq!(LN2_HI.to_bits() & 0x1ff, 0);
        let sum = hi + f64::from(LN2_LO);
        assert!((sum - std::f64::consts::LN_2).abs() < 1e-13);
    }

    /// erf: at most 1.5e-7 absolute error against the f64 erf (not rounded
    /// to f32) on a dense grid, and exactly ±1 far out.
    #[test]
    fn erf_abs_error() {
        let mut worst = 0.0f64;
        for i in 0..=240_000 {
            let x = -6.0 + i as f32 * (12.0 / 240_000.0);
            let err = (f64::from(erf(x)) - reference::erf(f64::from(x))).abs();
            worst = worst.max(err);
        }
        assert!(worst <= 1.5e-7, "erf max abs error {worst:e}");
        assert_eq!(erf(4.0), 1.0);
        assert_eq!(erf(-1e30), -1.0);
        assert_eq!(erf(f32::INFINITY), 1.0);
    }

    /// The erfc tail (used by Gelu) keeps its relative accuracy while the
    /// result is a normal f32: within 4 * 2^-23 relative error.
    #[test]
    fn erfc_tail_rel_error() {
        let mut worst = 0.0f64;
        for i in 0..=200_000 {
            let a = 0.5 + i as f32 * (8.6 / 200_000.0);
            let got = f64::from(erfc_tail(a, neg_square(a, false)));
            let want = reference::erfc(f64::from(a));
            worst = worst.max((got / want - 1.0).abs());
        }
        assert!(worst <= 4.0 * ULP1, "erfc tail max rel error {worst:e}");
    }

    #[test]
    fn exp_and_ln_edges() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert_eq!(exp(-104.0), 0.0);
        assert!(exp(-103.0) > 0.0); // subnormal, not flushed
        assert_eq!(expm1(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(expm1(-1e30), -1.0);
        assert_eq!(ln(1.0), 0.0);
        assert_eq!(ln(f32::from_bits(1)), -103.278_93);
        assert_eq!(ln_1p(1e-30), 1e-30);
        assert_eq!(ln_1p(f32::INFINITY), f32::INFINITY);
    }
}
