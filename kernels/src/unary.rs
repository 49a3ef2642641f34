//! Unary elementwise f32 operators.

use crate::arch::{self, Level};
use crate::math;

/// Unary elementwise f32 operators (ONNX semantics). Attribute values are
/// already resolved (defaults applied by the caller).
///
/// Special values follow ONNX Runtime's CPU EP, which evaluates each op's
/// defining formula in IEEE arithmetic: NaN in gives NaN out for every op but
/// `ThresholdedRelu` (`NaN > alpha` is false: 0). Where the formula multiplies
/// an infinity by zero the result is NaN, not the mathematical limit:
/// `Softsign(±inf)`, `HardSwish(-inf)`, `Mish(-inf)`, `Gelu(-inf)` and
/// `GeluTanh(-inf)` are NaN. Saturating ops give their limits:
/// `Sigmoid(±inf) = 1 / 0`, `Tanh(±inf) = ±1`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// `max(x, 0)`; NaN stays NaN.
    Relu,
    /// `1 / (1 + e^-x)`, evaluated without overflow.
    Sigmoid,
    /// Hyperbolic tangent: with fused multiply-adds (AVX2, AVX-512) a rational
    /// `a P(a^2) / Q(a^2)` of `a = |x|` capped at 1, portable
    /// `-expm1(-2|x|) / (2 + expm1(-2|x|))`, both with the sign of `x`: within
    /// 2.5 * 2^-23 relative error (measured 2.0 and 1.4 * 2^-23; ONNX
    /// Runtime's CPU EP measures 2.5 * 2^-23), exact at 0 and ±inf.
    Tanh,
    /// Error function (within 1.5e-7 absolute error).
    Erf,
    /// `e^x`.
    Exp,
    /// Natural logarithm: `ln(0) = -inf`, `ln(x < 0) = NaN`.
    Log,
    /// Square root: `sqrt(x < 0) = NaN`.
    Sqrt,
    /// `|x|`.
    Abs,
    /// `-x`.
    Neg,
    /// `1 / x`.
    Reciprocal,
    /// Round towards `-inf`.
    Floor,
    /// Round towards `+inf`.
    Ceil,
    /// `ln(1 + e^x)` as `max(x, 0) + ln_1p(e^-|x|)`.
    Softplus,
    /// `x / (1 + |x|)`.
    Softsign,
    /// `max(0, min(1, alpha * x + beta))`; ONNX defaults alpha=0.2, beta=0.5.
    HardSigmoid { alpha: f32, beta: f32 },
    /// `x * max(0, min(1, x/6 + 0.5))`.
    HardSwish,
    /// `x` if `x >= 0` else `alpha * x`; default alpha=0.01.
    LeakyRelu { alpha: f32 },
    /// `x` if `x > 0` else `alpha * (e^x - 1)`; default alpha=1.0.
    Elu { alpha: f32 },
    /// `gamma * (x if x > 0 else alpha * e^x - alpha)`; defaults
    /// alpha=1.67326319217681884765625, gamma=1.05070102214813232421875.
    Selu { alpha: f32, gamma: f32 },
    /// `max(0, x) + min(0, alpha * (e^(x/alpha) - 1))`; default alpha=1.0.
    Celu { alpha: f32 },
    /// `x` if `x > alpha` else 0; default alpha=1.0.
    ThresholdedRelu { alpha: f32 },
    /// `x * tanh(softplus(x))`.
    Mish,
    /// Exact GELU: `0.5 * x * (1 + erf(x / sqrt(2)))`.
    Gelu,
    /// Tanh GELU: `0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))`.
    GeluTanh,
}

/// Where the results go: a separate output slice or back into the input.
pub(crate) enum Io<'a> {
    Out(&'a [f32], &'a mut [f32]),
    InPlace(&'a mut [f32]),
}

/// The one loop every op runs through: `map!(io, v => expr)` writes `expr`
/// (with `v` bound to each element) to the output. The expression is pasted
/// into the loop body, so the `#[inline(always)]` helpers it calls are
/// inlined for sure (passing them as `Fn` values leaves the larger ones, e.g.
/// `erf`, as per-element calls) and LLVM can vectorize the loop. Both variants
/// run the same expression, so they agree bit for bit.
macro_rules! map {
    ($io:expr, $v:ident => $body:expr) => {
        match $io {
            Io::Out(x, y) => {
                for (o, &$v) in y.iter_mut().zip(x) {
                    *o = $body;
                }
            }
            Io::InPlace(xy) => {
                for o in xy {
                    let $v = *o;
                    *o = $body;
                }
            }
        }
    };
}

/// Block length of [`map_guarded!`]: long enough to amortise the check,
/// short enough to stay in L1.
pub(crate) const GUARD_BLOCK: usize = 256;

/// `map!` with a fast formula for tame inputs: `map_guarded!(io, limit, v =>
/// fast, safe)` runs `fast` on every block of [`GUARD_BLOCK`] elements whose
/// magnitudes are all at most `limit` (so no NaN or infinity), `safe` on the
/// other blocks. `fast` must equal `safe` bit for bit on tame inputs, so the
/// blocking never shows.
macro_rules! map_guarded {
    ($io:expr, $limit:expr, $v:ident => $fast:expr, $safe:expr) => {{
        let limit = f32::to_bits($limit);
        // An integer max reduction, which vectorises (NaN bits exceed inf's).
        let tame = |xs: &[f32]| xs.iter().fold(0u32, |m, v| m.max(v.to_bits() & 0x7fff_ffff)) <= limit;
        match $io {
            Io::Out(x, y) => {
                for (xc, yc) in x.chunks(GUARD_BLOCK).zip(y.chunks_mut(GUARD_BLOCK)) {
                    if tame(xc) {
                        map!(Io::Out(xc, yc), $v => $fast)
                    } else {
                        map!(Io::Out(xc, yc), $v => $safe)
                    }
                }
            }
            Io::InPlace(xy) => {
                for c in xy.chunks_mut(GUARD_BLOCK) {
                    if tame(c) {
                        map!(Io::InPlace(c), $v => $fast)
                    } else {
                        map!(Io::InPlace(c), $v => $safe)
                    }
                }
            }
        }
    }};
}

impl UnaryOp {
    /// Applies the op to `x`, writing `y` (same length; panics if lengths differ).
    pub fn apply(&self, x: &[f32], y: &mut [f32]) {
        assert_eq!(x.len(), y.len(), "UnaryOp::apply: input and output lengths differ");
        arch::unary(arch::isa(), self, Io::Out(x, y));
    }

    /// In place variant.
    pub fn apply_inplace(&self, xy: &mut [f32]) {
        arch::unary(arch::isa(), self, Io::InPlace(xy));
    }

    /// [`UnaryOp::apply`] with the kernel build for `level` (lowered to
    /// [`Level::detected`] if the CPU lacks it). Builds may differ in the last
    /// bit (fused multiply-adds), all within the documented accuracy. For
    /// tests and benchmarks.
    #[doc(hidden)]
    pub fn apply_at(&self, level: Level, x: &[f32], y: &mut [f32]) {
        assert_eq!(x.len(), y.len(), "UnaryOp::apply: input and output lengths differ");
        arch::unary(arch::isa_at(level), self, Io::Out(x, y));
    }

    /// [`UnaryOp::apply_inplace`] with the kernel build for `level`.
    #[doc(hidden)]
    pub fn apply_inplace_at(&self, level: Level, xy: &mut [f32]) {
        arch::unary(arch::isa_at(level), self, Io::InPlace(xy));
    }

    /// The kernel body, instantiated once per [`Level`] by `arch::dispatch`;
    /// `F` selects fused multiply-adds in the formulas.
    #[inline(always)]
    pub(crate) fn run<const F: bool>(&self, io: Io<'_>) {
        match *self {
            UnaryOp::Relu => map!(io, v => relu(v)),
            UnaryOp::Sigmoid => map!(io, v => math::sigmoid::<F>(v)),
            UnaryOp::Tanh => map!(io, v => math::tanh::<F>(v)),
            UnaryOp::Erf => map!(io, v => math::erf::<F>(v)),
            UnaryOp::Exp => map_guarded!(io, 87.0, v => math::exp_fast::<F, 6>(v), math::exp::<F>(v)),
            UnaryOp::Log => map!(io, v => math::ln::<F>(v)),
            UnaryOp::Sqrt => map!(io, v => v.sqrt()),
            UnaryOp::Abs => map!(io, v => v.abs()),
            UnaryOp::Neg => map!(io, v => -v),
            UnaryOp::Reciprocal => map!(io, v => 1.0 / v),
            UnaryOp::Floor => map!(io, v => math::round_dir::<F>(v, false)),
            UnaryOp::Ceil => map!(io, v => math::round_dir::<F>(v, true)),
            UnaryOp::Softplus => map!(io, v => softplus::<F>(v)),
            UnaryOp::Softsign => map!(io, v => softsign(v)),
            UnaryOp::HardSigmoid { alpha, beta } => map!(io, v => hard_sigmoid(v, alpha, beta)),
            UnaryOp::HardSwish => map!(io, v => hard_swish(v)),
            UnaryOp::LeakyRelu { alpha } => map!(io, v => if v < 0.0 { alpha * v } else { v }),
            UnaryOp::Elu { alpha } => map!(io, v => elu::<F>(v, alpha)),
            UnaryOp::Selu { alpha, gamma } => map!(io, v => gamma * elu::<F>(v, alpha)),
            UnaryOp::Celu { alpha } if alpha > 0.0 => map!(io, v => celu::<F, true>(v, alpha)),
            UnaryOp::Celu { alpha } => map!(io, v => celu::<F, false>(v, alpha)),
            UnaryOp::ThresholdedRelu { alpha } => map!(io, v => if v > alpha { v } else { 0.0 }),
            UnaryOp::Mish => map!(io, v => mish::<F>(v)),
            UnaryOp::Gelu => map!(io, v => gelu::<F>(v)),
            UnaryOp::GeluTanh => map!(io, v => gelu_tanh::<F>(v)),
        }
    }
}

#[inline(always)]
fn relu(x: f32) -> f32 {
    // NaN fails the test and is returned unchanged.
    if x < 0.0 {
        0.0
    } else {
        x
    }
}

#[inline(always)]
fn softplus<const F: bool>(x: f32) -> f32 {
    let pos = if x > 0.0 { x } else { 0.0 };
    pos + math::ln_1p::<F>(math::exp_small::<F, 5>(-x.abs()))
}

#[inline(always)]
fn softsign(x: f32) -> f32 {
    // ±inf / inf is NaN, as in ORT.
    x / (1.0 + x.abs())
}

#[inline(always)]
fn hard_sigmoid(x: f32, alpha: f32, beta: f32) -> f32 {
    // `clamp` (unlike `min`/`max`) lets NaN through.
    (alpha * x + beta).clamp(0.0, 1.0)
}

#[inline(always)]
fn hard_swish(x: f32) -> f32 {
    let v = x * (1.0 / 6.0) + 0.5;
    if v <= 0.0 {
        x * 0.0 // -0 for x <= -3, NaN for x = -inf (as ORT's x * 0)
    } else if v >= 1.0 {
        x
    } else {
        x * v
    }
}

/// `x` if `x > 0` else `alpha * expm1(x)` (the shared part of Elu and Selu).
#[inline(always)]
fn elu<const F: bool>(x: f32, alpha: f32) -> f32 {
    let neg = alpha * math::expm1_neg::<F>(x);
    if x > 0.0 {
        x
    } else {
        neg
    }
}

/// `max(0, x) + min(0, alpha * expm1(x / alpha))`. For `alpha > 0` only
/// `x / alpha <= 0` can reach the result, so the one-sided `expm1` suffices;
/// otherwise `expm1(u) = -expm1(-u) e^u` covers `u > 0`.
#[inline(always)]
fn celu<const F: bool, const POS: bool>(x: f32, alpha: f32) -> f32 {
    let pos = if x > 0.0 { x } else { 0.0 };
    let u = x / alpha;
    let em1 = if POS || u <= 0.0 { math::expm1_neg::<F>(u) } else { -math::expm1_neg::<F>(-u) * math::exp::<F>(u) };
    let q = alpha * em1;
    // min(0, q) that propagates NaN.
    let neg = if q > 0.0 { 0.0 } else { q };
    pos + neg
}

/// `x * tanh(ln(1 + e^x))`; with `e = e^x`, `tanh(ln(1 + e)) = n / (n + 2)`
/// where `n = e (e + 2)`. Above 20 the factor is 1 in f32, so the exponent is
/// capped there to avoid `inf / inf`.
#[inline(always)]
fn mish<const F: bool>(x: f32) -> f32 {
    let e = math::exp_small::<F, 6>(if x > 20.0 { 20.0 } else { x });
    let n = e * (e + 2.0);
    // -inf * 0 is NaN, as in ORT.
    x * (n / (n + 2.0))
}

/// `x * Phi(x)` (standard normal CDF), with `Phi` evaluated from the erfc
/// tail on the negative side so tiny results keep their relative accuracy.
#[inline(always)]
fn gelu<const F: bool>(x: f32) -> f32 {
    x * math::normal_cdf::<F>(x)
}

/// `0.5 (1 + tanh(u)) = sigmoid(2u)`, so the tanh form is `x * sigmoid(2u)`
/// with `u = sqrt(2/pi) (x + 0.044715 x^3)`; no cancellation for `x < 0`.
#[inline(always)]
fn gelu_tanh<const F: bool>(x: f32) -> f32 {
    const TWO_SQRT_2_OVER_PI: f32 = 1.595_769;
    let u2 = TWO_SQRT_2_OVER_PI * math::fma::<F>(0.044_715, x * x * x, x);
    x * math::sigmoid::<F>(u2)
}
