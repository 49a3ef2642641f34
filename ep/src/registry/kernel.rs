//! The kernels a plan step can run, with their resolved attributes (all `Copy`).

use rivet_kernels::typed::Arith;
use rivet_kernels::{BinaryOp, UnaryOp};

pub use crate::ops::math::MathOp;
pub use crate::ops::params::*;

/// Which of a Conv's input and output a plan stores channels last: `[N, H, W, C]` data
/// under the declared `[N, C, H, W]` shape. Set by `passes::channels_last` on the
/// convolutions of an inverted residual block (a 1x1 one, a depthwise one, a 1x1 one),
/// whose values between them no other step reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelsLast {
    pub input: bool,
    pub output: bool,
}

impl ChannelsLast {
    /// Whether either is.
    pub fn any(self) -> bool {
        self.input || self.output
    }
}

/// The kernel a plan step runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kernel {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Identity,
    /// Sum, Mean, Max, Min over any number of inputs; the plan lowers it to binary
    /// steps (and a `Scale` for Mean).
    Variadic {
        op: BinaryOp,
        mean: bool,
    },
    Scale(f32),
    Clip {
        min: f32,
        max: f32,
    },
    /// Clip with its bounds read at Run from its data inputs (which of min / max it has).
    ClipInputs {
        min: bool,
        max: bool,
    },
    /// Empty `perm`: reverse the axes.
    Transpose(Axes),
    Reshape(ReshapeRule),
    /// `A · op(B)`, numpy-batched: the registry builds `trans_b` false;
    /// `passes::fold_matmul_operands` folds into it the swap of B's last two axes that a
    /// Transpose feeding B did (B is then stored `[.., n, k]`).
    MatMul {
        trans_b: bool,
    },
    Gemm {
        alpha: f32,
        beta: f32,
        trans_a: bool,
        trans_b: bool,
    },
    Conv {
        window: Window,
        group: usize,
        /// Set by `passes::channels_last` only.
        channels_last: ChannelsLast,
    },
    Math(MathOp),
    /// Casts to ONNX element type `to` (half floats through f32; float to integer
    /// truncates toward zero and saturates, NaN gives 0; to bool is `x != 0`).
    ///
    /// To an 8-bit float, rounding to nearest even; `saturate` (ONNX's attribute, default
    /// on) clamps values beyond the format's range to its largest value, else they become
    /// NaN (or infinity for E5M2).
    Cast {
        to: i32,
        saturate: bool,
        /// To FLOAT8E8M0: how a value between two powers of two rounds (`round_mode`).
        round: rivet_kernels::float8::e8m0::Round,
    },
    /// Arithmetic on non-float32 numbers (and Mod on any).
    Arith(Arith),
    /// All ones (true), shaped like the input: Dropout's mask at inference.
    Ones,
    /// Dropout in training mode (its `training_mode` input read at Run); the plan lowers
    /// it into `DropoutMask` then `DropoutApply`. `ratio`: input 1 is present (else 0.5).
    Dropout {
        seed: Option<i64>,
        ratio: bool,
    },
    /// Dropout's mask from inputs (x, ratio?, training_mode); true keeps. Seeded: numpy's
    /// `RandomState(seed).uniform(0, 1, shape) >= ratio`, the ONNX reference's draw, the
    /// same every Run; without a seed, a fresh one each Run.
    DropoutMask {
        seed: Option<i64>,
        ratio: bool,
    },
    /// Dropout's output from inputs (x, mask, ratio?, training_mode): `x / (1 - ratio)`
    /// where the mask keeps, 0 elsewhere; x itself when not training.
    DropoutApply {
        ratio: bool,
    },
    /// Pow on numbers whose base or exponent is not float32 (the types may differ):
    /// computed in f64, converted to the base's type.
    PowTyped,
    /// An op of a family in `ops::FAMILIES`: the step's `op` holds its parameters, shape
    /// rule and run.
    Op,
}

impl Kernel {
    /// Kernels that only run on the typed path.
    pub fn is_typed(&self) -> bool {
        matches!(
            self,
            Kernel::Cast { .. }
                | Kernel::Arith(_)
                | Kernel::Ones
                | Kernel::Dropout { .. }
                | Kernel::DropoutMask { .. }
                | Kernel::DropoutApply { .. }
                | Kernel::PowTyped
                | Kernel::Op
        )
    }

    /// Whether the kernel keeps an index per axis on the stack, up to rank 8 (Squeeze's
    /// shape rule, the typed arithmetic, Transpose): a tensor of higher rank at Run is then an
    /// error naming the node, not a panic (`exec::run_step` checks, for plans whose shapes
    /// are known only at Run; the family ops that stop there check in their run:
    /// `ops::elementwise::up_to_rank_8`).
    pub fn stops_at_rank_8(&self) -> bool {
        matches!(
            self,
            Kernel::Reshape(ReshapeRule::Squeeze { .. } | ReshapeRule::SqueezeAtRun)
                | Kernel::Arith(_)
                | Kernel::Transpose(_)
        )
    }

    /// The typed kernel of a binary float32 op (Pow has none).
    pub fn arith(op: BinaryOp) -> Kernel {
        Kernel::Arith(match op {
            BinaryOp::Add => Arith::Add,
            BinaryOp::Sub => Arith::Sub,
            BinaryOp::Mul => Arith::Mul,
            BinaryOp::Div => Arith::Div,
            BinaryOp::Max => Arith::Max,
            BinaryOp::Min => Arith::Min,
            BinaryOp::Pow => unreachable!("Pow on other types than float32 is not claimed"),
        })
    }
}
