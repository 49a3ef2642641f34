//! Elementwise math, computed in f64 and rounded once (float32 and the half floats go
//! through `apply`, float64 through `apply_f64`): trigonometry, hyperbolics, Round, Sign.
//! Shape: the input's (`Kernel::Math` in `shapes::infer_shape`). Types: floats, and
//! integers for Sign (`registry::check_types`).

/// Elementwise math ops computed with Rust's `f32` functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
