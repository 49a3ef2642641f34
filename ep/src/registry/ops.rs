//! The table of supported ops.

use rivet_kernels::typed::Arith;
use rivet_kernels::{BinaryOp, UnaryOp};

use super::attrs::*;
use super::kernel::*;
use super::{Arity, OpSpec};
use crate::graph::{dtype, AttrValue, NodeDesc};

macro_rules! unary {
    ($name:literal, $lo:literal..=$hi:literal, $op:expr) => {
        OpSpec { op_type: $name, since: ($lo, $hi), arity: Arity::Unary, attrs: &[], build: |_| Ok(Kernel::Unary($op)) }
    };
}

macro_rules! binary {
    ($name:literal, $lo:literal..=$hi:literal, $op:expr) => {
        OpSpec { op_type: $name, since: ($lo, $hi), arity: Arity::Binary, attrs: &[], build: |n| Ok(binary(n, $op)) }
    };
}

macro_rules! math {
    ($name:literal, $lo:literal..=$hi:literal, $op:expr) => {
        OpSpec { op_type: $name, since: ($lo, $hi), arity: Arity::Unary, attrs: &[], build: |_| Ok(Kernel::Math($op)) }
    };
}

macro_rules! variadic {
    ($name:literal, $lo:literal..=$hi:literal, $op:expr, $mean:expr) => {
        OpSpec {
            op_type: $name,
            since: ($lo, $hi),
            arity: Arity::Variadic { min: 1, max: usize::MAX },
            attrs: &[],
            build: |_| Ok(Kernel::Variadic { op: $op, mean: $mean }),
        }
    };
}

/// float32 (and the half floats, computed in float32) takes the tuned kernels; other
/// numbers the typed ones (Pow only on floats).
fn binary(n: &NodeDesc, op: BinaryOp) -> Kernel {
    let t = n.inputs[0].as_ref().map_or(dtype::FLOAT, |v| v.elem_type);
    let t1 = n.inputs.get(1).and_then(Option::as_ref).map_or(dtype::FLOAT, |v| v.elem_type);
    let half = |t: i32| matches!(t, dtype::FLOAT16 | dtype::BFLOAT16);
    if op == BinaryOp::Pow && (t != dtype::FLOAT || t1 != dtype::FLOAT) && !(half(t) && t1 == t) {
        return Kernel::PowTyped;
    }
    if matches!(t, dtype::FLOAT | dtype::FLOAT16 | dtype::BFLOAT16) || op == BinaryOp::Pow {
        Kernel::Binary(op)
    } else {
        Kernel::arith(op)
    }
}

macro_rules! typed {
    ($name:literal, $lo:literal..=$hi:literal, $arity:expr, $kernel:expr) => {
        OpSpec { op_type: $name, since: ($lo, $hi), arity: $arity, attrs: &[], build: |_| Ok($kernel) }
    };
}

fn arg_reduce(n: &NodeDesc, max: bool) -> Result<Kernel, String> {
    Ok(Kernel::ArgReduce {
        axis: int_attr(n, "axis", 0)?,
        keepdims: int_attr(n, "keepdims", 1)? != 0,
        max,
        last: int_attr(n, "select_last_index", 0)? != 0,
    })
}

/// Every op Rivet claims (domain `ai.onnx`); `check_types` says for which element types.
/// The shape ops' versions 23-25 only add element types Rivet does not hold.
pub static OPS: &[OpSpec] = &[
    unary!("Relu", 6..=14, UnaryOp::Relu),
    unary!("Sigmoid", 6..=13, UnaryOp::Sigmoid),
    unary!("Tanh", 6..=13, UnaryOp::Tanh),
    unary!("Erf", 9..=13, UnaryOp::Erf),
    unary!("Exp", 6..=13, UnaryOp::Exp),
    unary!("Log", 6..=13, UnaryOp::Log),
    unary!("Sqrt", 6..=13, UnaryOp::Sqrt),
    unary!("Abs", 6..=13, UnaryOp::Abs),
    unary!("Neg", 6..=13, UnaryOp::Neg),
    unary!("Reciprocal", 6..=13, UnaryOp::Reciprocal),
    unary!("Floor", 6..=13, UnaryOp::Floor),
    unary!("Ceil", 6..=13, UnaryOp::Ceil),
    unary!("Softplus", 1..=22, UnaryOp::Softplus),
    unary!("Softsign", 1..=22, UnaryOp::Softsign),
    OpSpec {
        op_type: "HardSigmoid",
        since: (6, 22),
        arity: Arity::Unary,
        attrs: &["alpha", "beta"],
        build: |n| {
            Ok(Kernel::Unary(UnaryOp::HardSigmoid {
                alpha: float_attr(n, "alpha", 0.2)?,
                beta: float_attr(n, "beta", 0.5)?,
            }))
        },
    },
    unary!("HardSwish", 14..=22, UnaryOp::HardSwish),
    OpSpec {
        op_type: "LeakyRelu",
        since: (6, 16),
        arity: Arity::Unary,
        attrs: &["alpha"],
        build: |n| Ok(Kernel::Unary(UnaryOp::LeakyRelu { alpha: float_attr(n, "alpha", 0.01)? })),
    },
    OpSpec {
        op_type: "Elu",
        since: (6, 22),
        arity: Arity::Unary,
        attrs: &["alpha"],
        build: |n| Ok(Kernel::Unary(UnaryOp::Elu { alpha: float_attr(n, "alpha", 1.0)? })),
    },
    OpSpec {
        op_type: "Selu",
        since: (6, 22),
        arity: Arity::Unary,
        attrs: &["alpha", "gamma"],
        build: |n| {
            Ok(Kernel::Unary(UnaryOp::Selu {
                alpha: float_attr(n, "alpha", 1.673_263_2)?,
                gamma: float_attr(n, "gamma", 1.050_701)?,
            }))
        },
    },
    OpSpec {
        op_type: "Celu",
        since: (12, 12),
        arity: Arity::Unary,
        attrs: &["alpha"],
        build: |n| {
            let alpha = float_attr(n, "alpha", 1.0)?;
            if alpha == 0.0 {
                return Err("Celu alpha must not be 0".into());
            }
            Ok(Kernel::Unary(UnaryOp::Celu { alpha }))
        },
    },
    OpSpec {
        op_type: "ThresholdedRelu",
        since: (10, 22),
        arity: Arity::Unary,
        attrs: &["alpha"],
        build: |n| Ok(Kernel::Unary(UnaryOp::ThresholdedRelu { alpha: float_attr(n, "alpha", 1.0)? })),
    },
    unary!("Mish", 18..=22, UnaryOp::Mish),
    OpSpec {
        op_type: "Gelu",
        since: (20, 20),
        arity: Arity::Unary,
        attrs: &["approximate"],
        build: |n| match string_attr(n, "approximate", "none")? {
            "none" => Ok(Kernel::Unary(UnaryOp::Gelu)),
            "tanh" => Ok(Kernel::Unary(UnaryOp::GeluTanh)),
            other => Err(format!("Gelu approximate='{other}' is not 'none' or 'tanh'")),
        },
    },
    binary!("Add", 7..=14, BinaryOp::Add),
    binary!("Sub", 7..=14, BinaryOp::Sub),
    binary!("Mul", 7..=14, BinaryOp::Mul),
    binary!("Div", 7..=14, BinaryOp::Div),
    binary!("Pow", 7..=15, BinaryOp::Pow),
    variadic!("Max", 8..=13, BinaryOp::Max, false),
    variadic!("Min", 8..=13, BinaryOp::Min, false),
    variadic!("Sum", 8..=13, BinaryOp::Add, false),
    variadic!("Mean", 8..=13, BinaryOp::Add, true),
    OpSpec { op_type: "Identity", since: (1, 25), arity: Arity::Unary, attrs: &[], build: |_| Ok(Kernel::Identity) },
    OpSpec {
        op_type: "Dropout",
        since: (7, 22),
        arity: Arity::DataThenConstants { max: 3 },
        attrs: &["ratio", "seed"],
        build: dropout,
    },
    OpSpec {
        op_type: "Clip",
        since: (6, 13),
        arity: Arity::Optional { min: 1, max: 3 },
        attrs: &["min", "max"],
        build: clip,
    },
    OpSpec { op_type: "Softmax", since: (1, 13), arity: Arity::Unary, attrs: &["axis"], build: |n| softmax(n, false) },
    OpSpec {
        op_type: "LogSoftmax",
        since: (1, 13),
        arity: Arity::Unary,
        attrs: &["axis"],
        build: |n| softmax(n, true),
    },
    OpSpec {
        op_type: "Transpose",
        since: (1, 25),
        arity: Arity::Unary,
        attrs: &["perm"],
        build: |n| Ok(Kernel::Transpose(Axes::new(&ints_attr(n, "perm")?.unwrap_or_default())?)),
    },
    OpSpec {
        op_type: "Flatten",
        since: (1, 25),
        arity: Arity::Unary,
        attrs: &["axis"],
        build: |n| Ok(Kernel::Reshape(ReshapeRule::Flatten { axis: int_attr(n, "axis", 1)? })),
    },
    OpSpec {
        op_type: "Reshape",
        since: (5, 25),
        arity: Arity::DataThenConstants { max: 2 },
        attrs: &["allowzero"],
        build: |n| {
            let allowzero = int_attr(n, "allowzero", 0)? != 0;
            if runtime_i64(n, 1) {
                return Ok(Kernel::Reshape(ReshapeRule::ToAtRun { allowzero }));
            }
            let dims = const_i64(n, 1, "the shape")?.ok_or("Reshape needs its shape input")?;
            Ok(Kernel::Reshape(ReshapeRule::To {
                dims: Axes::new(&dims)?,
                allowzero: int_attr(n, "allowzero", 0)? != 0,
            }))
        },
    },
    OpSpec {
        op_type: "Squeeze",
        since: (1, 25),
        arity: Arity::DataThenConstants { max: 2 },
        attrs: &["axes"],
        build: |n| {
            if n.since_version >= 13 && runtime_i64(n, 1) {
                return Ok(Kernel::Reshape(ReshapeRule::SqueezeAtRun));
            }
            Ok(Kernel::Reshape(ReshapeRule::Squeeze { axes: squeeze_axes(n)? }))
        },
    },
    OpSpec {
        op_type: "Unsqueeze",
        since: (1, 25),
        arity: Arity::DataThenConstants { max: 2 },
        attrs: &["axes"],
        build: |n| {
            if n.since_version >= 13 && runtime_i64(n, 1) {
                return Ok(Kernel::Reshape(ReshapeRule::UnsqueezeAtRun));
            }
            let axes = squeeze_axes(n)?;
            if axes.len == 0 {
                return Err("Unsqueeze needs axes".into());
            }
            Ok(Kernel::Reshape(ReshapeRule::Unsqueeze { axes }))
        },
    },
    OpSpec {
        op_type: "MatMul",
        since: (1, 13),
        arity: Arity::Binary,
        attrs: &[],
        build: |_| Ok(Kernel::MatMul { trans_b: false }),
    },
    OpSpec {
        op_type: "Gemm",
        since: (7, 13),
        arity: Arity::Data { min: 2, max: 3 },
        attrs: &["alpha", "beta", "transA", "transB"],
        build: |n| {
            Ok(Kernel::Gemm {
                alpha: float_attr(n, "alpha", 1.0)?,
                beta: float_attr(n, "beta", 1.0)?,
                trans_a: int_attr(n, "transA", 0)? != 0,
                trans_b: int_attr(n, "transB", 0)? != 0,
            })
        },
    },
    OpSpec {
        op_type: "BatchNormalization",
        since: (7, 15),
        arity: Arity::Data { min: 5, max: 5 },
        attrs: &["epsilon", "momentum", "spatial", "training_mode"],
        build: |n| {
            if int_attr(n, "spatial", 1)? != 1 {
                return Err("only spatial BatchNormalization is supported".into());
            }
            if int_attr(n, "training_mode", 0)? != 0 {
                // Opset 14+: Y, then the updated running mean and variance.
                let (epsilon, momentum) = (float_attr(n, "epsilon", 1e-5)?, float_attr(n, "momentum", 0.9)?);
                return Ok(Kernel::BatchNormTrain { epsilon, momentum, out: 0 });
            }
            if n.outputs.iter().skip(1).any(Option::is_some) {
                return Err("BatchNormalization's running statistics outputs are not supported".into());
            }
            Ok(Kernel::BatchNorm { epsilon: float_attr(n, "epsilon", 1e-5)? })
        },
    },
    OpSpec {
        op_type: "Conv",
        since: (1, 22),
        arity: Arity::Data { min: 2, max: 3 },
        attrs: &["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"],
        build: |n| {
            let group = int_attr(n, "group", 1)?;
            if group < 1 {
                return Err(format!("group {group}"));
            }
            Ok(Kernel::Conv { window: window(n, false)?, group: group as usize })
        },
    },
    math!("Sin", 7..=22, MathOp::Sin),
    math!("Cos", 7..=22, MathOp::Cos),
    math!("Tan", 7..=22, MathOp::Tan),
    math!("Asin", 7..=22, MathOp::Asin),
    math!("Acos", 7..=22, MathOp::Acos),
    math!("Atan", 7..=22, MathOp::Atan),
    math!("Sinh", 9..=22, MathOp::Sinh),
    math!("Cosh", 9..=22, MathOp::Cosh),
    math!("Asinh", 9..=22, MathOp::Asinh),
    math!("Acosh", 9..=22, MathOp::Acosh),
    math!("Atanh", 9..=22, MathOp::Atanh),
    math!("Round", 11..=22, MathOp::Round),
    math!("Sign", 9..=13, MathOp::Sign),
    OpSpec {
        op_type: "Shrink",
        since: (9, 9),
        arity: Arity::Unary,
        attrs: &["bias", "lambd"],
        build: |n| Ok(Kernel::Math(crate::ops::math::shrink(n)?)),
    },
    OpSpec {
        op_type: "LayerNormalization",
        since: (17, 17),
        arity: Arity::Data { min: 2, max: 3 },
        attrs: &["axis", "epsilon", "stash_type"],
        build: |n| norm(n, false),
    },
    OpSpec {
        op_type: "RMSNormalization",
        since: (23, 23),
        arity: Arity::Data { min: 2, max: 2 },
        attrs: &["axis", "epsilon", "stash_type"],
        build: |n| norm(n, true),
    },
    OpSpec {
        op_type: "CumSum",
        since: (11, 14),
        arity: Arity::DataThenConstants { max: 2 },
        attrs: &["exclusive", "reverse"],
        build: |n| {
            Ok(Kernel::CumSum {
                axis: ints_input(n, 1, "axis")?,
                exclusive: int_attr(n, "exclusive", 0)? != 0,
                reverse: int_attr(n, "reverse", 0)? != 0,
            })
        },
    },
    OpSpec {
        op_type: "Trilu",
        since: (14, 14),
        arity: Arity::DataThenConstants { max: 2 },
        attrs: &["upper"],
        build: |n| Ok(Kernel::Trilu { k: ints_input(n, 1, "k")?, upper: int_attr(n, "upper", 1)? != 0 }),
    },
    OpSpec {
        op_type: "InstanceNormalization",
        since: (6, 22),
        arity: Arity::Data { min: 3, max: 3 },
        attrs: &["epsilon"],
        build: |n| Ok(Kernel::InstanceNorm { epsilon: float_attr(n, "epsilon", 1e-5)? }),
    },
    OpSpec {
        op_type: "LRN",
        since: (1, 13),
        arity: Arity::Unary,
        attrs: &["alpha", "beta", "bias", "size"],
        build: |n| {
            let size = match n.attr("size") {
                Some(AttrValue::Int(s)) if *s >= 1 => *s as usize,
                _ => return Err("LRN needs a positive size".into()),
            };
            Ok(Kernel::Lrn {
                size,
                alpha: float_attr(n, "alpha", 1e-4)?,
                beta: float_attr(n, "beta", 0.75)?,
                bias: float_attr(n, "bias", 1.0)?,
            })
        },
    },
    OpSpec {
        op_type: "MaxPool",
        since: (1, 22),
        arity: Arity::Unary,
        attrs: &["auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"],
        build: |n| Ok(Kernel::Pool { window: window(n, true)?, max: true, count_pad: false }),
    },
    OpSpec {
        op_type: "AveragePool",
        since: (1, 22),
        arity: Arity::Unary,
        attrs: &["auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"],
        build: |n| {
            let count_pad = int_attr(n, "count_include_pad", 0)? != 0;
            Ok(Kernel::Pool { window: window(n, true)?, max: false, count_pad })
        },
    },
    OpSpec {
        op_type: "GlobalAveragePool",
        since: (1, 22),
        arity: Arity::Unary,
        attrs: &[],
        build: |_| Ok(Kernel::GlobalPool { max: false }),
    },
    OpSpec {
        op_type: "GlobalMaxPool",
        since: (1, 22),
        arity: Arity::Unary,
        attrs: &[],
        build: |_| Ok(Kernel::GlobalPool { max: true }),
    },
    OpSpec {
        op_type: "Cast",
        since: (6, 25),
        arity: Arity::Unary,
        // `saturate` and `round_mode` only change casts to 8-bit floats, which are not claimed.
        attrs: &["to", "saturate", "round_mode"],
        build: |n| Ok(Kernel::Cast { to: int_attr(n, "to", 0)? as i32 }),
    },
    OpSpec {
        op_type: "CastLike",
        since: (15, 25),
        arity: Arity::DataThenConstants { max: 2 },
        attrs: &["saturate", "round_mode"],
        build: |n| match n.inputs.get(1) {
            Some(Some(like)) => Ok(Kernel::Cast { to: like.elem_type }),
            _ => Err("CastLike needs its target_type input".into()),
        },
    },
    OpSpec {
        op_type: "Mod",
        since: (10, 13),
        arity: Arity::Binary,
        attrs: &["fmod"],
        build: |n| {
            let fmod = int_attr(n, "fmod", 0)? != 0;
            let t = n.inputs[0].as_ref().map_or(dtype::FLOAT, |v| v.elem_type);
            if !fmod && matches!(t, dtype::FLOAT | dtype::DOUBLE | dtype::FLOAT16 | dtype::BFLOAT16) {
                return Err("Mod on floats needs fmod=1".into());
            }
            Ok(Kernel::Arith(Arith::Mod { fmod }))
        },
    },
    OpSpec {
        op_type: "ArgMax",
        since: (1, 13),
        arity: Arity::Unary,
        attrs: &["axis", "keepdims", "select_last_index"],
        build: |n| arg_reduce(n, true),
    },
    OpSpec {
        op_type: "ArgMin",
        since: (1, 13),
        arity: Arity::Unary,
        attrs: &["axis", "keepdims", "select_last_index"],
        build: |n| arg_reduce(n, false),
    },
    OpSpec {
        op_type: "Gather",
        since: (1, 13),
        arity: Arity::Binary,
        attrs: &["axis"],
        build: |n| Ok(Kernel::Gather { axis: int_attr(n, "axis", 0)? }),
    },
    OpSpec {
        op_type: "GatherElements",
        since: (11, 13),
        arity: Arity::Binary,
        attrs: &["axis"],
        build: |n| Ok(Kernel::GatherElements { axis: int_attr(n, "axis", 0)? }),
    },
    OpSpec {
        op_type: "Hardmax",
        since: (1, 13),
        arity: Arity::Unary,
        attrs: &["axis"],
        build: |n| {
            let legacy = n.since_version < 13;
            Ok(Kernel::Hardmax { axis: int_attr(n, "axis", if legacy { 1 } else { -1 })?, legacy })
        },
    },
    OpSpec {
        op_type: "EyeLike",
        since: (9, 22),
        arity: Arity::Unary,
        attrs: &["dtype", "k"],
        build: |n| Ok(Kernel::EyeLike { k: int_attr(n, "k", 0)? }),
    },
    OpSpec {
        op_type: "NegativeLogLikelihoodLoss",
        since: (12, 22),
        arity: Arity::Data { min: 2, max: 3 },
        attrs: &["reduction", "ignore_index"],
        build: |n| loss(n, false),
    },
    OpSpec {
        op_type: "SoftmaxCrossEntropyLoss",
        since: (12, 13),
        arity: Arity::Data { min: 2, max: 3 },
        attrs: &["reduction", "ignore_index"],
        build: |n| loss(n, true),
    },
    OpSpec {
        op_type: "Attention",
        since: (23, 24),
        arity: Arity::Optional { min: 3, max: 7 },
        // softmax_precision: Rivet's softmax runs in float32 whatever it asks.
        attrs: &[
            "q_num_heads",
            "kv_num_heads",
            "scale",
            "softcap",
            "is_causal",
            "qk_matmul_output_mode",
            "softmax_precision",
        ],
        build: attention,
    },
    OpSpec {
        op_type: "Tile",
        since: (6, 13),
        arity: Arity::DataThenConstants { max: 2 },
        attrs: &[],
        build: |n| Ok(Kernel::Tile { repeats: ints_input(n, 1, "repeats")? }),
    },
    OpSpec {
        op_type: "GatherND",
        since: (11, 13),
        arity: Arity::Binary,
        attrs: &["batch_dims"],
        build: |n| {
            let b = int_attr(n, "batch_dims", 0)?;
            Ok(Kernel::GatherNd { batch_dims: usize::try_from(b).map_err(|_| format!("batch_dims {b}"))? })
        },
    },
    OpSpec {
        op_type: "ScatterElements",
        since: (11, 18),
        arity: Arity::Data { min: 3, max: 3 },
        attrs: &["axis", "reduction"],
        build: |n| scatter(n, true),
    },
    // The deprecated Scatter (opsets 9 and 10) is ScatterElements without a reduction.
    OpSpec {
        op_type: "Scatter",
        since: (9, 10),
        arity: Arity::Data { min: 3, max: 3 },
        attrs: &["axis"],
        build: |n| scatter(n, true),
    },
    OpSpec {
        op_type: "ScatterND",
        since: (11, 18),
        arity: Arity::Data { min: 3, max: 3 },
        attrs: &["reduction"],
        build: |n| scatter(n, false),
    },
    OpSpec {
        op_type: "OneHot",
        since: (9, 11),
        arity: Arity::Data { min: 3, max: 3 },
        attrs: &["axis"],
        build: one_hot,
    },
    OpSpec {
        op_type: "TopK",
        since: (10, 24),
        arity: Arity::DataThenConstants { max: 2 },
        attrs: &["axis", "largest", "sorted"],
        build: |n| {
            Ok(Kernel::TopK {
                axis: int_attr(n, "axis", -1)?,
                largest: int_attr(n, "largest", 1)? != 0,
                k: ints_input(n, 1, "K")?,
                indices: false,
            })
        },
    },
    OpSpec {
        op_type: "GroupNormalization",
        since: (18, 21),
        arity: Arity::Data { min: 3, max: 3 },
        attrs: &["num_groups", "epsilon", "stash_type"],
        build: |n| {
            if int_attr(n, "stash_type", 1)? != 1 {
                return Err("stash_type other than float".into());
            }
            let g = int_attr(n, "num_groups", 0)?;
            Ok(Kernel::GroupNorm {
                groups: usize::try_from(g).ok().filter(|&g| g > 0).ok_or(format!("num_groups {g}"))?,
                epsilon: float_attr(n, "epsilon", 1e-5)?,
                per_channel: n.since_version >= 21,
            })
        },
    },
    OpSpec {
        op_type: "RotaryEmbedding",
        since: (23, 23),
        arity: Arity::Optional { min: 3, max: 4 },
        attrs: &["num_heads", "rotary_embedding_dim", "interleaved"],
        build: |n| {
            let nonneg = |name| {
                let v = int_attr(n, name, 0)?;
                usize::try_from(v).map_err(|_| format!("{name} {v}"))
            };
            Ok(Kernel::Rotary {
                heads: nonneg("num_heads")?,
                rotary_dim: nonneg("rotary_embedding_dim")?,
                interleaved: int_attr(n, "interleaved", 0)? != 0,
                positions: n.inputs.get(3).is_some_and(Option::is_some),
            })
        },
    },
    typed!("Range", 11..=11, Arity::Data { min: 3, max: 3 }, Kernel::Range),
    typed!("NonZero", 9..=13, Arity::Unary, Kernel::NonZero),
    OpSpec {
        op_type: "Einsum",
        since: (12, 12),
        arity: Arity::Variadic { min: 1, max: usize::MAX },
        attrs: &["equation"],
        build: |n| {
            let eq = string_attr(n, "equation", "")?;
            if eq.is_empty() || eq.len() > 64 || !eq.is_ascii() {
                return Err(format!("Einsum equation '{eq}' (Rivet takes up to 64 ASCII characters)"));
            }
            let ranks: Vec<usize> =
                n.inputs.iter().flatten().map(|v| v.dims.as_ref().map_or(usize::MAX, |d| d.len())).collect();
            if ranks.iter().all(|&r| r != usize::MAX) {
                rivet_kernels::einsum::parse(eq, &ranks)?;
            }
            let mut equation = [0u8; 64];
            equation[..eq.len()].copy_from_slice(eq.as_bytes());
            Ok(Kernel::Einsum { equation, len: eq.len() as u8 })
        },
    },
    OpSpec {
        op_type: "Shape",
        since: (1, 25),
        arity: Arity::Unary,
        attrs: &["start", "end"],
        build: |n| {
            let end = match n.attr("end") {
                Some(AttrValue::Int(e)) => Some(*e),
                Some(_) => return Err("Shape end must be an int".into()),
                None => None,
            };
            Ok(Kernel::ShapeOf { start: int_attr(n, "start", 0)?, end })
        },
    },
    typed!("Size", 1..=25, Arity::Unary, Kernel::SizeOf),
    OpSpec {
        op_type: "ConvTranspose",
        since: (1, 22),
        arity: Arity::Data { min: 2, max: 3 },
        attrs: &["auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"],
        build: conv_transpose,
    },
    OpSpec {
        op_type: "ConstantOfShape",
        since: (9, 25),
        arity: Arity::Unary,
        attrs: &["value"],
        build: |n| {
            let mut value = [0u8; 8];
            match n.attr("value") {
                None => {}
                Some(AttrValue::Tensor(shape, buf)) if shape.iter().product::<usize>() == 1 => {
                    let out = n.outputs[0].as_ref().map_or(0, |v| v.elem_type);
                    if buf.elem_type() != out {
                        return Err("ConstantOfShape's value and output types differ".into());
                    }
                    let bytes = buf.to_ne_bytes();
                    value[..bytes.len()].copy_from_slice(&bytes);
                }
                Some(_) => return Err("ConstantOfShape's value must be a one-element tensor Rivet holds".into()),
            }
            Ok(Kernel::ConstantOfShape { shape: ints_input(n, 0, "the shape")?, value })
        },
    },
];
