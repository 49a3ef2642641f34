//! f64 reference implementations of the unary ops, used by the accuracy tests.
//!
//! They follow the definitions literally (std's f64 libm functions plus an f64
//! `erf`/`erfc` written here), only rearranged where the literal form loses
//! accuracy in f64 (e.g. `1 + tanh(u)` for very negative `u`).

use crate::UnaryOp;

impl UnaryOp {
    /// Scalar reference of the op, computed in f64 then rounded; used by tests.
    ///
    /// "Rounded" means rounded to the nearest f32 (so overflow gives ±inf) and
    /// returned as f64: the result is the correctly rounded f32 answer except
    /// for the rare double-rounding case. Special values follow the same
    /// conventions as [`UnaryOp::apply`].
    pub fn reference(&self, x: f64) -> f64 {
        f64::from(self.reference_exact(x) as f32)
    }

    /// The op on an f64 value, computed in f64 (the float64 kernel).
    pub fn apply_f64(&self, x: f64) -> f64 {
        self.reference_exact(x)
    }

    fn reference_exact(&self, x: f64) -> f64 {
        let softplus = |v: f64| v.max(0.0) + (-v.abs()).exp().ln_1p();
        if x.is_nan() {
            // NaN propagates, except through ThresholdedRelu's comparison (as in ORT).
            return if matches!(self, UnaryOp::ThresholdedRelu { .. }) { 0.0 } else { x };
        }
        match *self {
            UnaryOp::Relu => x.max(0.0),
            UnaryOp::Sigmoid => {
                let e = (-x.abs()).exp();
                if x >= 0.0 {
                    1.0 / (1.0 + e)
                } else {
                    e / (1.0 + e)
                }
            }
            UnaryOp::Tanh => x.tanh(),
            UnaryOp::Erf => erf(x),
            UnaryOp::Exp => x.exp(),
            UnaryOp::Log => x.ln(),
            UnaryOp::Sqrt => x.sqrt(),
            UnaryOp::Abs => x.abs(),
            UnaryOp::Neg => -x,
            UnaryOp::Reciprocal => 1.0 / x,
            UnaryOp::Floor => x.floor(),
            UnaryOp::Ceil => x.ceil(),
            UnaryOp::Softplus => softplus(x),
            UnaryOp::Softsign => x / (1.0 + x.abs()),
            UnaryOp::HardSigmoid { alpha, beta } => (f64::from(alpha) * x + f64::from(beta)).clamp(0.0, 1.0),
            UnaryOp::HardSwish => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
            UnaryOp::LeakyRelu { alpha } => {
                if x >= 0.0 {
                    x
                } else {
                    f64::from(alpha) * x
                }
            }
            UnaryOp::Elu { alpha } => {
                if x > 0.0 {
                    x
                } else {
                    f64::from(alpha) * x.exp_m1()
                }
            }
            UnaryOp::Selu { alpha, gamma } => {
                let (alpha, gamma) = (f64::from(alpha), f64::from(gamma));
                if x > 0.0 {
                    gamma * x
                } else {
                    // alpha * e^x - alpha, without the cancellation near 0.
                    gamma * alpha * x.exp_m1()
                }
            }
            UnaryOp::Celu { alpha } => {
                let alpha = f64::from(alpha);
                x.max(0.0) + (alpha * (x / alpha).exp_m1()).min(0.0)
            }
            UnaryOp::ThresholdedRelu { alpha } => {
                if x > f64::from(alpha) {
                    x
                } else {
                    0.0
                }
            }
            UnaryOp::Mish => x * softplus(x).tanh(),
            UnaryOp::Gelu => 0.5 * x * erfc(-x * std::f64::consts::FRAC_1_SQRT_2),
            UnaryOp::GeluTanh => {
                // 0.5 * (1 + tanh(u)) == 1 / (1 + exp(-2u)).
                let u = (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x);
                x / (1.0 + (-2.0 * u).exp())
            }
        }
    }
}

const FRAC_1_SQRT_PI: f64 = 0.564_189_583_547_756_3;

/// Where the series (below) hands over to the continued fraction (above).
const ERF_SPLIT: f64 = 2.5;

/// f64 error function, accurate to a few ulp.
///
/// Below [`ERF_SPLIT`]: `erf(x) = 2/sqrt(pi) e^{-x^2} sum_n 2^n x^{2n+1} /
/// (1*3*...*(2n+1))`, a series of positive terms (no cancellation). Above:
/// `1 - erfc(x)` with the continued fraction of [`erfc`].
pub fn erf(x: f64) -> f64 {
    let a = x.abs();
    let y = if a < ERF_SPLIT {
        let z2 = 2.0 * a * a;
        let mut term = a;
        let mut sum = a;
        let mut k = 1.0;
        while term > 1e-18 * sum {
            term *= z2 / (2.0 * k + 1.0);
            sum += term;
            k += 1.0;
        }
        2.0 * FRAC_1_SQRT_PI * (-a * a).exp() * sum
    } else {
        1.0 - erfc(a)
    };
    y.copysign(x)
}

/// f64 complementary error function with good relative accuracy in the tail.
///
/// For `x >= ERF_SPLIT`: `erfc(x) = e^{-x^2}/sqrt(pi) / (x + (1/2)/(x + 1/(x +
/// (3/2)/(x + 2/(x + ...)))))`, evaluated bottom-up from a fixed depth that is
/// ample for `x >= 2.5`.
pub fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return x;
    }
    if x < ERF_SPLIT {
        return 1.0 - erf(x);
    }
    if x == f64::INFINITY {
        return 0.0;
    }
    let mut f = x;
    for k in (1..=120).rev() {
        f = x + f64::from(k) * 0.5 / f;
    }
    (-x * x).exp() * FRAC_1_SQRT_PI / f
}

#[cfg(test)]
mod tests {
    use super::{erf, erfc};

    /// Values of Python's `math.erf` / `math.erfc` (glibc).
    #[test]
    fn f64_erf_matches_known_values() {
        let cases: [(f64, f64, f64); 8] = [
            (1e-10, 1.1283791670955126e-10, 0.999999999887162),
            (0.5, 0.5204998778130465, 0.4795001221869535),
            (1.0, 0.8427007929497149, 0.15729920705028513),
            (2.0, 0.9953222650189527, 0.004677734981047265),
            (2.4999, 0.9995928300996666, 0.0004071699003334514),
            (2.5, 0.999593047982555, 0.0004069520174449589),
            (5.0, 0.9999999999984626, 1.5374597944280351e-12),
            (10.0, 1.0, 2.088487583762545e-45),
        ];
        for (x, e, c) in cases {
            assert!((erf(x) - e).abs() <= 4e-16 * e.abs(), "erf({x})");
            assert!((erf(-x) + e).abs() <= 4e-16 * e.abs(), "erf(-{x})");
            assert!((erfc(x) - c).abs() <= 1e-15 + 1e-14 * c, "erfc({x}) = {}", erfc(x));
        }
        assert_eq!(erf(f64::INFINITY), 1.0);
        assert_eq!(erf(f64::NEG_INFINITY), -1.0);
        assert_eq!(erfc(f64::INFINITY), 0.0);
        assert!(erf(f64::NAN).is_nan() && erfc(f64::NAN).is_nan());
    }
}
