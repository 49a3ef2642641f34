//! Elementwise math, computed in f64 and rounded once (float32 and the half floats go
//! through `apply`, float64 through `apply_f64`): trigonometry, hyperbolics, Round, Sign, Shrink.
//! Shape: the input's (`Kernel::Math` in `shapes::infer_shape`). Types: floats, and
//! integers for Sign (`registry::check_types`).

use crate::graph::NodeDesc;
use crate::node_attrs::float_attr;

/// Elementwise math ops computed with Rust's `f32` functions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MathOp {
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    /// Round half to even.
    Round,
    Sign,
    /// `x + bias` below `-lambd`, `x - bias` above `lambd`, 0 between.
    Shrink {
        lambd: f32,
        bias: f32,
    },
}

impl MathOp {
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        // Computed in f64 and rounded once: at least as accurate as f32 libm.
        self.apply_f64(x as f64) as f32
    }

    /// The op computed in f64, for float64 tensors.
    #[inline]
    pub fn apply_f64(self, x: f64) -> f64 {
        match self {
            MathOp::Sin => x.sin(),
            MathOp::Cos => x.cos(),
            MathOp::Tan => x.tan(),
            MathOp::Asin => x.asin(),
            MathOp::Acos => x.acos(),
            MathOp::Atan => x.atan(),
            MathOp::Sinh => x.sinh(),
            MathOp::Cosh => x.cosh(),
            MathOp::Asinh => x.asinh(),
            MathOp::Acosh => x.acosh(),
            MathOp::Atanh => x.atanh(),
            MathOp::Round => x.round_ties_even(),
            MathOp::Shrink { lambd, bias } => {
                let (lambd, bias) = (lambd as f64, bias as f64);
                if x < -lambd {
                    x + bias
                } else if x > lambd {
                    x - bias
                } else {
                    0.0
                }
            }
            MathOp::Sign => {
                if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    x * 0.0 // 0 stays 0, NaN stays NaN
                }
            }
        }
    }
}

/// Shrink's `lambd` (default 0.5) and `bias` (default 0).
pub fn shrink(node: &NodeDesc) -> Result<MathOp, String> {
    Ok(MathOp::Shrink { lambd: float_attr(node, "lambd", 0.5)?, bias: float_attr(node, "bias", 0.0)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrink_follows_the_onnx_definition() {
        let op = MathOp::Shrink { lambd: 1.5, bias: 0.5 };
        let y: Vec<f32> = [-2.0, -1.5, -1.0, 0.0, 1.0, 1.5, 2.0].map(|x| op.apply(x)).to_vec();
        assert_eq!(y, [-1.5, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5]);
    }
}
