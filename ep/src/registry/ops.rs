//! The table of supported ops.

use rivet_kernels::typed::Arith;
use rivet_kernels::{BinaryOp, UnaryOp};

use super::attrs::*;
use super::kernel::*;
use super::{Arity, OpSpec};
use crate::graph::{dtype, NodeDesc};

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
        op_type: "Conv",
        since: (1, 22),
        arity: Arity::Data { min: 2, max: 3 },
        attrs: &["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"],
        build: |n| {
            let group = int_attr(n, "group", 1)?;
            if group < 1 {
                return Err(format!("group {group}"));
            }
            Ok(Kernel::Conv { window: window(n, false)?, group: group as usize, channels_last: Default::default() })
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
        op_type: "Cast",
        since: (6, 25),
        arity: Arity::Unary,
        // `saturate` changes casts to 8-bit floats; `round_mode` only those to FLOAT8E8M0.
        attrs: &["to", "saturate", "round_mode"],
        // `to` is an ONNX TensorProto code; the plan's types are ORT's (they differ past 23).
        build: |n| {
            Ok(Kernel::Cast {
                to: dtype::from_onnx(int_attr(n, "to", 0)?),
                saturate: int_attr(n, "saturate", 1)? != 0,
                round: round_mode(n)?,
            })
        },
    },
    OpSpec {
        op_type: "CastLike",
        since: (15, 25),
        arity: Arity::DataThenConstants { max: 2 },
        attrs: &["saturate", "round_mode"],
        build: |n| match n.inputs.get(1) {
            Some(Some(like)) => Ok(Kernel::Cast {
                to: like.elem_type,
                saturate: int_attr(n, "saturate", 1)? != 0,
                round: round_mode(n)?,
            }),
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
];

/// Cast's `round_mode` (opset 24+, for FLOAT8E8M0): "up" (the default), "down", "nearest".
fn round_mode(n: &NodeDesc) -> Result<rivet_kernels::float8::e8m0::Round, String> {
    use rivet_kernels::float8::e8m0::Round;
    match crate::node_attrs::string_attr(n, "round_mode", "up")? {
        "up" => Ok(Round::Up),
        "down" => Ok(Round::Down),
        "nearest" => Ok(Round::Nearest),
        other => Err(format!("{} round_mode '{other}' is not up, down or nearest", n.op_type)),
    }
}
