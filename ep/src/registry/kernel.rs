//! The kernels a plan step can run, with their resolved attributes (all `Copy`).

use rivet_kernels::typed::Arith;
use rivet_kernels::{BinaryOp, UnaryOp};

pub use crate::ops::math::MathOp;
pub use crate::ops::params::*;

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
    /// `legacy`: opset < 13, the input is coerced to 2-D at `axis`.
    Softmax {
        axis: i64,
        log: bool,
        legacy: bool,
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
    BatchNorm {
        epsilon: f32,
    },
    /// BatchNormalization in training mode: normalized with the batch's own mean and
    /// (population) variance; `out` 0 is Y, 1 and 2 the running mean and variance
    /// updated as `running * momentum + batch * (1 - momentum)`.
    BatchNormTrain {
        epsilon: f32,
        momentum: f32,
        out: u8,
    },
    GlobalPool {
        max: bool,
    },
    Conv {
        window: Window,
        group: usize,
    },
    InstanceNorm {
        epsilon: f32,
    },
    Lrn {
        size: usize,
        alpha: f32,
        beta: f32,
        bias: f32,
    },
    CumSum {
        axis: ReduceAxes,
        exclusive: bool,
        reverse: bool,
    },
    Trilu {
        k: ReduceAxes,
        upper: bool,
    },
    Math(MathOp),
    /// LayerNormalization (or RMSNormalization when `rms`) over the axes from `axis` on.
    Norm {
        axis: i64,
        epsilon: f32,
        rms: bool,
    },
    Pool {
        window: Window,
        max: bool,
        count_pad: bool,
    },
    /// Casts to ONNX element type `to` (half floats through f32; float to integer
    /// truncates toward zero and saturates, NaN gives 0; to bool is `x != 0`).
    Cast {
        to: i32,
    },
    /// Arithmetic on non-float32 numbers (and Mod on any).
    Arith(Arith),
    /// ArgMax / ArgMin: int64 indices along `axis`.
    ArgReduce {
        axis: i64,
        keepdims: bool,
        max: bool,
        last: bool,
    },
    /// Gather along `axis` with int64 or int32 indices.
    Gather {
        axis: i64,
    },
    GatherElements {
        axis: i64,
    },
    /// One-hot of the maximum along `axis` (first one on ties); `legacy`: opset < 13, the
    /// input is coerced to 2-D at `axis`.
    Hardmax {
        axis: i64,
        legacy: bool,
    },
    /// Ones on diagonal `k` of a 2-D output shaped like the input.
    EyeLike {
        k: i64,
    },
    /// LayerNormalization's mean (or inverse standard deviation) per normalized row.
    NormStat {
        axis: i64,
        epsilon: f32,
        inverse_std: bool,
    },
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
    /// MaxPool's Indices output (int64, flattened over the whole input).
    PoolIndices {
        window: Window,
        /// `storage_order` 1: indices within a plane count down columns first.
        column_major: bool,
    },
    /// NegativeLogLikelihoodLoss, or SoftmaxCrossEntropyLoss's loss when `softmax` (the
    /// log-softmax over axis 1 first).
    Loss {
        reduction: Reduction,
        ignore_index: Option<i64>,
        softmax: bool,
    },
    Attention(AttentionSpec),
    /// An op of a family in `ops::FAMILIES`: the step's `op` holds its parameters, shape
    /// rule and run.
    Op,
    /// Tile: each axis repeated.
    Tile {
        repeats: ReduceAxes,
    },
    /// GatherND with int64 index tuples.
    GatherNd {
        batch_dims: usize,
    },
    /// ScatterElements along `axis`, or ScatterND when `axis` is None.
    Scatter {
        axis: Option<i64>,
        reduction: ScatterReduction,
    },
    /// OneHot; `values` = [off, on]. `depth`: a constant, or `None` when it is fed at Run
    /// (then the output's shape comes from that data).
    OneHot {
        axis: i64,
        depth: Option<i64>,
    },
    /// TopK's values (or, with `indices`, their int64 positions), sorted; ties keep the
    /// lower index first.
    TopK {
        axis: i64,
        largest: bool,
        k: ReduceAxes,
        indices: bool,
    },
    /// GroupNormalization; `per_channel`: scale and bias have one value per channel
    /// (opset 21) rather than per group (opset 18).
    GroupNorm {
        groups: usize,
        epsilon: f32,
        per_channel: bool,
    },
    /// Range: `start`, `start + delta`, ... below `limit`; its length depends on the data.
    Range,
    /// NonZero: the int64 indices `[rank, count]` of the non-zero elements.
    NonZero,
    /// Einsum; the equation's bytes (at most 64).
    Einsum {
        equation: [u8; 64],
        len: u8,
    },
    /// ConvTranspose on 1-D or 2-D images (1-D runs as height 1).
    ConvTranspose(ConvTransposeSpec),
    /// Shape: the input's dims `start..end` (clamped, negative counting back) as int64.
    ShapeOf {
        start: i64,
        end: Option<i64>,
    },
    /// Size: the input's element count as an int64 scalar.
    SizeOf,
    /// ConstantOfShape: the output (of the value's type) filled with the value, whose
    /// native bytes are kept here.
    ConstantOfShape {
        shape: ReduceAxes,
        value: [u8; 8],
    },
    /// RotaryEmbedding (opset 23).
    Rotary {
        heads: usize,
        rotary_dim: usize,
        interleaved: bool,
        positions: bool,
    },
}

impl Kernel {
    /// Kernels that only run on the typed path.
    pub fn is_typed(&self) -> bool {
        matches!(
            self,
            Kernel::Cast { .. }
                | Kernel::Arith(_)
                | Kernel::ArgReduce { .. }
                | Kernel::Gather { .. }
                | Kernel::GatherElements { .. }
                | Kernel::EyeLike { .. }
                | Kernel::Ones
                | Kernel::Dropout { .. }
                | Kernel::BatchNormTrain { .. }
                | Kernel::DropoutMask { .. }
                | Kernel::DropoutApply { .. }
                | Kernel::PoolIndices { .. }
                | Kernel::PowTyped
                | Kernel::Loss { .. }
                | Kernel::Attention(_)
                | Kernel::Tile { .. }
                | Kernel::GatherNd { .. }
                | Kernel::Scatter { .. }
                | Kernel::OneHot { .. }
                | Kernel::TopK { .. }
                | Kernel::Rotary { .. }
                | Kernel::Range
                | Kernel::NonZero
                | Kernel::Einsum { .. }
                | Kernel::ShapeOf { .. }
                | Kernel::SizeOf
                | Kernel::ConstantOfShape { .. }
                | Kernel::Op
        )
    }

    /// Einsum's equation.
    pub fn einsum_equation(&self) -> &str {
        match self {
            Kernel::Einsum { equation, len } => std::str::from_utf8(&equation[..*len as usize]).unwrap_or(""),
            _ => "",
        }
    }

    /// Kernels whose output shape depends on their input data, known only at Run.
    /// Whether the kernel keeps an index per axis on the stack, up to rank 8 (Squeeze's
    /// shape rule, the typed arithmetic, Transpose, NonZero, GatherElements, the
    /// scatters): a tensor of higher rank at Run is then an error naming the node, not a
    /// panic (`exec::run_step` checks, for plans whose shapes are known only at Run; the
    /// family ops that stop there check in their run: `ops::elementwise::up_to_rank_8`).
    pub fn stops_at_rank_8(&self) -> bool {
        matches!(
            self,
            Kernel::Reshape(ReshapeRule::Squeeze { .. } | ReshapeRule::SqueezeAtRun)
                | Kernel::Arith(_)
                | Kernel::Transpose(_)
                | Kernel::NonZero
                | Kernel::GatherElements { .. }
                | Kernel::Scatter { .. }
        )
    }

    pub fn shape_from_data(&self) -> bool {
        matches!(self, Kernel::Range | Kernel::NonZero | Kernel::OneHot { depth: None, .. })
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
