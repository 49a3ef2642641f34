//! Unary elementwise f32 operators.

use crate::math;

/// Unary elementwise f32 operators (ONNX semantics). Attribute values are
/// already resolved (defaults applied by the caller).
///
/// Special values: NaN in gives NaN out for every op (including `Relu`,
/// `HardSigmoid`, `ThresholdedRelu`, `Floor`, ...). Infinities give the
/// mathematical limit, e.g. `Sigmoid(±inf) = 1 / 0`, `Tanh(±inf) = ±1`,
/// `Softsign(±inf) = ±1`, `Gelu(-inf) = GeluTanh(-inf) = Mish(-inf) = -0`,
/// `HardSwish(-inf) = -0`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UnaryOp {
    /// `max(x, 0)`; NaN stays NaN.
    Relu,
    /// `1 / (1 + e^-x)`, evaluated without overflow.
    Sigmoid,
    /// Hyperbolic tangent, from an inlined `expm1` (within ~2 ulp).
    Tanh,
    /// Error function (within 2e-7 absolute error).
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
enum Io<'a> {
    Out(&'a [f32], &'a mut [f32]),
    InPlace(&'a mut [f32]),
}

/// The one loop every op runs through. `f` is inlined, so each op gets its own
/// monomorphized, bounds-check-free loop that LLVM can vectorize; the loop
/// body is the same for both variants so they agree bit for bit.
#[inline(always)]
fn map<F: Fn(f32) -> f32>(io: Io<'_>, f: F) {
    match io {
        Io::Out(x, y) => {
            for (o, &v) in y.iter_mut().zip(x) {
                *o = f(v);
            }
        }
        Io::InPlace(xy) => {
            for v in xy {
                *v = f(*v);
            }
        }
    }
}

impl UnaryOp {
    /// Applies the op to `x`, writing `y` (same length; panics if lengths differ).
    pub fn apply(&self, x: &[f32], y: &mut [f32]) {
        assert_eq!(
            x.len(),
            y.len(),
            "UnaryOp::apply: input and output lengths differ"
        );
        self.run(Io::Out(x, y));
    }

    /// In place variant.
    pub fn apply_inplace(&self, xy: &mut [f32]) {
        self.run(Io::InPlace(xy));
    }

    fn run(&self, io: Io<'_>) {
        match *self {
            UnaryOp::Relu => map(io, relu),
            UnaryOp::Sigmoid => map(io, math::sigmoid),
            UnaryOp::Tanh => map(io, math::tanh),
            UnaryOp::Erf => map(io, math::erf),
            UnaryOp::Exp => map(io, math::exp),
            UnaryOp::Log => map(io, math::ln),
            UnaryOp::Sqrt => map(io, f32::sqrt),
            UnaryOp::Abs => map(io, f32::abs),
            UnaryOp::Neg => map(io, |v| -v),
            UnaryOp::Reciprocal => map(io, |v| 1.0 / v),
            UnaryOp::Floor => map(io, |v| math::round_dir(v, false)),
            UnaryOp::Ceil => map(io, |v| math::round_dir(v, true)),
            UnaryOp::Softplus => map(io, softplus),
            UnaryOp::Softsign => map(io, softsign),
            UnaryOp::HardSigmoid { alpha, beta } => map(io, |v| hard_sigmoid(v, alpha, beta)),
            UnaryOp::HardSwish => map(io, hard_swish),
            UnaryOp::LeakyRelu { alpha } => map(io, |v| if v < 0.0 { alpha * v } else { v }),
            UnaryOp::Elu { alpha } => map(io, |v| elu(v, alpha)),
            UnaryOp::Selu { alpha, gamma } => map(io, |v| gamma * elu(v, alpha)),
            UnaryOp::Celu { alpha } => map(io, |v| celu(v, alpha)),
            UnaryOp::ThresholdedRelu { alpha } => map(io, |v| if v <= alpha { 0.0 } else { v }),
            UnaryOp::Mish => map(io, mish),
            UnaryOp::Gelu => map(io, gelu),
            UnaryOp::GeluTanh => map(io, gelu_tanh),
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
fn softplus(x: f32) -> f32 {
    let pos = if x > 0.0 { x } else { 0.0 };
    pos + math::ln_1p(math::exp(-x.abs()))
}

#[inline(always)]
fn softsign(x: f32) -> f32 {
    let a = x.abs();
    let y = x / (1.0 + a);
    if a == f32::INFINITY {
        1.0f32.copysign(x)
    } else {
        y
    }
}

/// Clamp to `[0, 1]` that lets NaN through (`f32::clamp` would too, but
/// `min`/`max` would not).
#[inline(always)]
fn clamp01(v: f32) -> f32 {
    if v < 0.0 {
        0.0
    } else if v > 1.0 {
        1.0
    } else {
        v
    }
}

#[inline(always)]
fn hard_sigmoid(x: f32, alpha: f32, beta: f32) -> f32 {
    clamp01(alpha * x + beta)
}

#[inline(always)]
fn hard_swish(x: f32) -> f32 {
    let v = x * (1.0 / 6.0) + 0.5;
    if v <= 0.0 {
        -0.0 // x <= -3, also for x = -inf
    } else if v >= 1.0 {
        x
    } else {
        x * v
    }
}

/// `x` if `x > 0` else `alpha * expm1(x)` (the shared part of Elu and Selu).
#[inline(always)]
fn elu(x: f32, alpha: f32) -> f32 {
    let neg = alpha * math::expm1(x);
    if x > 0.0 {
        x
    } else {
        neg
    }
}

#[inline(always)]
fn celu(x: f32, alpha: f32) -> f32 {
    let pos = if x > 0.0 { x } else { 0.0 };
    let q = alpha * math::expm1(x / alpha);
    // min(0, q) that propagates NaN.
    let neg = if q > 0.0 { 0.0 } else { q };
    pos + neg
}

/// `x * tanh(ln(1 + e^x))`; with `e = e^x`, `tanh(ln(1 + e)) = n / (n + 2)`
/// where `n = e (e + 2)`. Above 20 the factor is 1 in f32, so the exponent is
/// capped there to avoid `inf / inf`.
#[inline(always)]
fn mish(x: f32) -> f32 {
    let e = math::exp(if x > 20.0 { 20.0 } else { x });
    let n = e * (e + 2.0);
    let y = x * (n / (n + 2.0));
    if x == f32::NEG_INFINITY {
        -0.0
    } else {
        y
    }
}

/// `x * Phi(x)` (standard normal CDF), with `Phi` evaluated from the erfc
/// tail on the negative side so tiny results keep their relative accuracy.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    let y = x * math::normal_cdf(x);
    if x == f32::NEG_INFINITY {
        -0.0
    } else {
        y
    }
}

/// `0.5 (1 + tanh(u)) = sigmoid(2u)`, so the tanh form is `x * sigmoid(2u)`
/// with `u = sqrt(2/pi) (x + 0.044715 x^3)`; no cancellation for `x < 0`.
#[inline(always)]
fn gelu_tanh(x: f32) -> f32 {
    const TWO_SQRT_2_OVER_PI: f32 = 1.595_769_1;
    let u2 = TWO_SQRT_2_OVER_PI * (x + 0.044_715 * (x * x * x));
    let y = x * math::sigmoid(u2);
    if x == f32::NEG_INFINITY {
        -0.0
    } else {
        y
    }
}
