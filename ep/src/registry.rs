//! What Rivet can run: one table of ops, their opset ranges and how their attributes map
//! to a kernel. Capability asks it whether a node is claimable; the plan asks it for the
//! kernel. The README's op table is generated from `OPS`.

use rivet_kernels::{BinaryOp, UnaryOp};
use smallvec::SmallVec;

use crate::graph::{dtype, AttrValue, Constant, NodeDesc};

/// Up to 8 axes (rank ≤ 8), kept inline so `Kernel` stays `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Axes {
    pub len: u8,
    pub axes: [i64; 8],
}

impl Axes {
    pub fn new(v: &[i64]) -> Result<Axes, String> {
        if v.len() > 8 {
            return Err(format!("{} axes: Rivet handles rank 8 at most", v.len()));
        }
        let mut axes = [0; 8];
        axes[..v.len()].copy_from_slice(v);
        Ok(Axes { len: v.len() as u8, axes })
    }
    pub fn as_slice(&self) -> &[i64] {
        &self.axes[..self.len as usize]
    }
}

/// How a shape-only op computes its output shape (the data is copied unchanged).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReshapeRule {
    /// ONNX Reshape: 0 copies the input dim (unless `allowzero`), -1 is inferred.
    To {
        dims: Axes,
        allowzero: bool,
    },
    Flatten {
        axis: i64,
    },
    /// Removes the listed axes (all size-1 axes when none are listed).
    Squeeze {
        axes: Axes,
    },
    Unsqueeze {
        axes: Axes,
    },
}

/// How a window op pads (ONNX `auto_pad`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoPad {
    NotSet,
    Valid,
    SameUpper,
    SameLower,
}

/// Attributes of a 2-D window op (Conv, MaxPool, AveragePool); a zero kernel size means
/// "from the weights".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub kernel: [usize; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    /// top, left, bottom, right
    pub pads: [usize; 4],
    pub auto_pad: AutoPad,
    pub ceil_mode: bool,
}

/// Pad's amounts (begin for every axis, then end) and fill mode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PadSpec {
    pub len: u8,
    pub pads: [usize; 16],
    pub mode: rivet_kernels::nn::PadMode,
}

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
    /// `legacy`: opset < 13, the input is coerced to 2-D at `axis`.
    Softmax {
        axis: i64,
        log: bool,
        legacy: bool,
    },
    /// Empty `perm`: reverse the axes.
    Transpose(Axes),
    Reshape(ReshapeRule),
    Concat {
        axis: i64,
    },
    MatMul,
    Gemm {
        alpha: f32,
        beta: f32,
        trans_a: bool,
        trans_b: bool,
    },
    BatchNorm {
        epsilon: f32,
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
    Pad(PadSpec),
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
}

/// A claimed node: its kernel and which of its inputs carry runtime f32 data (the others
/// are constants the kernel already holds, or omitted optional inputs).
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    pub kernel: Kernel,
    pub data: SmallVec<[usize; 4]>,
}

/// How many inputs an op takes, and which are data.
#[derive(Clone, Copy, Debug)]
pub enum Arity {
    Unary,
    Binary,
    /// Between `min` and `max` inputs, all of them f32 data.
    Variadic {
        min: usize,
        max: usize,
    },
    /// Input 0 is data; inputs 1.. (up to `max`) are constants or omitted.
    DataThenConstants {
        max: usize,
    },
    /// Exactly the first `n` present inputs are data, up to `max` inputs.
    Data {
        min: usize,
        max: usize,
    },
}

type Build = fn(&NodeDesc) -> Result<Kernel, String>;

/// One supported op.
pub struct OpSpec {
    pub op_type: &'static str,
    /// Inclusive range of `since_version`s (of the ONNX schema the node resolved to)
    /// whose semantics Rivet implements.
    pub since: (i32, i32),
    pub arity: Arity,
    /// Attributes the op reads; any other attribute makes the node unclaimable.
    pub attrs: &'static [&'static str],
    pub build: Build,
}

macro_rules! unary {
    ($name:literal, $lo:literal..=$hi:literal, $op:expr) => {
        OpSpec { op_type: $name, since: ($lo, $hi), arity: Arity::Unary, attrs: &[], build: |_| Ok(Kernel::Unary($op)) }
    };
}

macro_rules! binary {
    ($name:literal, $lo:literal..=$hi:literal, $op:expr) => {
        OpSpec {
            op_type: $name,
            since: ($lo, $hi),
            arity: Arity::Binary,
            attrs: &[],
            build: |_| Ok(Kernel::Binary($op)),
        }
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

fn int_attr(node: &NodeDesc, name: &str, default: i64) -> Result<i64, String> {
    match node.attr(name) {
        None => Ok(default),
        Some(AttrValue::Int(v)) => Ok(*v),
        Some(other) => Err(format!("attribute '{name}' should be an int, is {other:?}")),
    }
}

fn ints_attr(node: &NodeDesc, name: &str) -> Result<Option<Vec<i64>>, String> {
    match node.attr(name) {
        None => Ok(None),
        Some(AttrValue::Ints(v)) => Ok(Some(v.clone())),
        Some(other) => Err(format!("attribute '{name}' should be ints, is {other:?}")),
    }
}

/// Input `pos` when present: `None` when omitted.
fn input(node: &NodeDesc, pos: usize) -> Option<&crate::graph::ValueDesc> {
    node.inputs.get(pos).and_then(Option::as_ref)
}

fn const_i64(node: &NodeDesc, pos: usize, what: &str) -> Result<Option<Vec<i64>>, String> {
    match input(node, pos) {
        None => Ok(None),
        Some(v) => match &v.constant {
            Some(Constant::I64(d)) => Ok(Some(d.clone())),
            _ => Err(format!("{what} '{}' must be a constant int64 initializer", v.name)),
        },
    }
}

fn const_f32_scalar(node: &NodeDesc, pos: usize, what: &str) -> Result<Option<f32>, String> {
    match input(node, pos) {
        None => Ok(None),
        Some(v) => match &v.constant {
            Some(Constant::F32(d)) if d.len() == 1 => Ok(Some(d[0])),
            _ => Err(format!("{what} '{}' must be a constant float32 scalar", v.name)),
        },
    }
}

fn softmax(node: &NodeDesc, log: bool) -> Result<Kernel, String> {
    let legacy = node.since_version < 13;
    let axis = int_attr(node, "axis", if legacy { 1 } else { -1 })?;
    Ok(Kernel::Softmax { axis, log, legacy })
}

fn clip(node: &NodeDesc) -> Result<Kernel, String> {
    if node.since_version < 11 {
        return Ok(Kernel::Clip {
            min: float_attr(node, "min", f32::NEG_INFINITY)?,
            max: float_attr(node, "max", f32::INFINITY)?,
        });
    }
    Ok(Kernel::Clip {
        min: const_f32_scalar(node, 1, "Clip min")?.unwrap_or(f32::NEG_INFINITY),
        max: const_f32_scalar(node, 2, "Clip max")?.unwrap_or(f32::INFINITY),
    })
}

fn dropout(node: &NodeDesc) -> Result<Kernel, String> {
    if node.outputs.get(1).is_some_and(Option::is_some) {
        return Err("Dropout's mask output is not supported".into());
    }
    if let Some(v) = input(node, 2) {
        match &v.constant {
            Some(Constant::I64(_)) | None => return Err("Dropout training_mode must be a constant false".into()),
            Some(Constant::F32(_)) => return Err("Dropout training_mode must be bool".into()),
        }
    }
    Ok(Kernel::Identity)
}

/// Reads a 2-D window op's attributes; other ranks are not claimed.
fn window(node: &NodeDesc, kernel_required: bool) -> Result<Window, String> {
    if let Some(dims) = input(node, 0).and_then(|v| v.dims.as_ref()) {
        if dims.len() != 4 {
            return Err(format!("{} on rank {} (Rivet runs 2-D, NCHW)", node.op_type, dims.len()));
        }
    } else {
        return Err(format!("{} input of unknown rank", node.op_type));
    }
    let pair = |name: &str, default: usize| -> Result<[usize; 2], String> {
        match ints_attr(node, name)? {
            None => Ok([default; 2]),
            Some(v) if v.len() == 2 && v.iter().all(|&d| d >= 1) => Ok([v[0] as usize, v[1] as usize]),
            Some(v) => Err(format!("{name} {v:?} is not two positive values")),
        }
    };
    let kernel = match ints_attr(node, "kernel_shape")? {
        None if !kernel_required => [0, 0],
        None => return Err("kernel_shape is required".into()),
        Some(v) if v.len() == 2 && v.iter().all(|&d| d >= 1) => [v[0] as usize, v[1] as usize],
        Some(v) => Err(format!("kernel_shape {v:?} is not two positive values"))?,
    };
    let pads = match ints_attr(node, "pads")? {
        None => [0; 4],
        Some(v) if v.len() == 4 && v.iter().all(|&d| d >= 0) => {
            [v[0] as usize, v[1] as usize, v[2] as usize, v[3] as usize]
        }
        Some(v) => return Err(format!("pads {v:?} is not four non-negative values")),
    };
    let auto_pad = match node.attr("auto_pad") {
        None => AutoPad::NotSet,
        Some(AttrValue::String(s)) => match s.as_str() {
            "NOTSET" => AutoPad::NotSet,
            "VALID" => AutoPad::Valid,
            "SAME_UPPER" => AutoPad::SameUpper,
            "SAME_LOWER" => AutoPad::SameLower,
            other => return Err(format!("auto_pad '{other}'")),
        },
        Some(other) => return Err(format!("auto_pad {other:?}")),
    };
    if int_attr(node, "storage_order", 0)? != 0 {
        return Err("storage_order 1 is not supported".into());
    }
    Ok(Window {
        kernel,
        strides: pair("strides", 1)?,
        dilations: pair("dilations", 1)?,
        pads,
        auto_pad,
        ceil_mode: int_attr(node, "ceil_mode", 0)? != 0,
    })
}

fn norm(node: &NodeDesc, rms: bool) -> Result<Kernel, String> {
    if node.outputs.iter().skip(1).any(Option::is_some) {
        return Err(format!("{}'s mean / inverse deviation outputs are not supported", node.op_type));
    }
    if int_attr(node, "stash_type", 1)? != 1 {
        return Err("stash_type other than float".into());
    }
    Ok(Kernel::Norm { axis: int_attr(node, "axis", -1)?, epsilon: float_attr(node, "epsilon", 1e-5)?, rms })
}

fn pad(node: &NodeDesc) -> Result<Kernel, String> {
    let (pads, value) = if node.since_version < 11 {
        (ints_attr(node, "pads")?.ok_or("Pad needs pads")?, float_attr(node, "value", 0.0)?)
    } else {
        if input(node, 3).is_some() {
            return Err("Pad's axes input is not supported".into());
        }
        let pads = const_i64(node, 1, "pads")?.ok_or("Pad needs pads")?;
        (pads, const_f32_scalar(node, 2, "constant_value")?.unwrap_or(0.0))
    };
    if pads.len() > 16 || pads.iter().any(|&p| p < 0) {
        return Err(format!("pads {pads:?}: Rivet pads rank <= 8 by non-negative amounts"));
    }
    let mode = match string_attr(node, "mode", "constant")? {
        "constant" => rivet_kernels::nn::PadMode::Constant(value),
        "reflect" => rivet_kernels::nn::PadMode::Reflect,
        "edge" => rivet_kernels::nn::PadMode::Edge,
        other => return Err(format!("Pad mode '{other}'")),
    };
    let mut arr = [0usize; 16];
    pads.iter().enumerate().for_each(|(i, &p)| arr[i] = p as usize);
    Ok(Kernel::Pad(PadSpec { len: pads.len() as u8, pads: arr, mode }))
}

fn squeeze_axes(node: &NodeDesc) -> Result<Axes, String> {
    let axes = if node.since_version < 13 { ints_attr(node, "axes")? } else { const_i64(node, 1, "axes")? };
    Axes::new(&axes.unwrap_or_default())
}

fn float_attr(node: &NodeDesc, name: &str, default: f32) -> Result<f32, String> {
    match node.attr(name) {
        None => Ok(default),
        Some(AttrValue::Float(v)) => Ok(*v),
        Some(other) => Err(format!("attribute '{name}' should be a float, is {other:?}")),
    }
}

fn string_attr<'a>(node: &'a NodeDesc, name: &str, default: &'a str) -> Result<&'a str, String> {
    match node.attr(name) {
        None => Ok(default),
        Some(AttrValue::String(v)) => Ok(v),
        Some(other) => Err(format!("attribute '{name}' should be a string, is {other:?}")),
    }
}

/// Every op Rivet claims (domain `ai.onnx`, element type float32).
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
        arity: Arity::DataThenConstants { max: 3 },
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
        since: (1, 21),
        arity: Arity::Unary,
        attrs: &["perm"],
        build: |n| Ok(Kernel::Transpose(Axes::new(&ints_attr(n, "perm")?.unwrap_or_default())?)),
    },
    OpSpec {
        op_type: "Flatten",
        since: (1, 21),
        arity: Arity::Unary,
        attrs: &["axis"],
        build: |n| Ok(Kernel::Reshape(ReshapeRule::Flatten { axis: int_attr(n, "axis", 1)? })),
    },
    OpSpec {
        op_type: "Reshape",
        since: (5, 21),
        arity: Arity::DataThenConstants { max: 2 },
        attrs: &["allowzero"],
        build: |n| {
            let dims = const_i64(n, 1, "the shape")?.ok_or("Reshape needs its shape input")?;
            Ok(Kernel::Reshape(ReshapeRule::To {
                dims: Axes::new(&dims)?,
                allowzero: int_attr(n, "allowzero", 0)? != 0,
            }))
        },
    },
    OpSpec {
        op_type: "Squeeze",
        since: (1, 21),
        arity: Arity::DataThenConstants { max: 2 },
        attrs: &["axes"],
        build: |n| Ok(Kernel::Reshape(ReshapeRule::Squeeze { axes: squeeze_axes(n)? })),
    },
    OpSpec {
        op_type: "Unsqueeze",
        since: (1, 21),
        arity: Arity::DataThenConstants { max: 2 },
        attrs: &["axes"],
        build: |n| {
            let axes = squeeze_axes(n)?;
            if axes.len == 0 {
                return Err("Unsqueeze needs axes".into());
            }
            Ok(Kernel::Reshape(ReshapeRule::Unsqueeze { axes }))
        },
    },
    OpSpec {
        op_type: "Concat",
        since: (4, 13),
        arity: Arity::Variadic { min: 1, max: usize::MAX },
        attrs: &["axis"],
        build: |n| match n.attr("axis") {
            Some(AttrValue::Int(axis)) => Ok(Kernel::Concat { axis: *axis }),
            _ => Err("Concat needs an int axis".into()),
        },
    },
    OpSpec { op_type: "MatMul", since: (1, 13), arity: Arity::Binary, attrs: &[], build: |_| Ok(Kernel::MatMul) },
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
            if int_attr(n, "training_mode", 0)? != 0 || int_attr(n, "spatial", 1)? != 1 {
                return Err("only inference-mode, spatial BatchNormalization is supported".into());
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
        op_type: "Pad",
        since: (2, 21),
        arity: Arity::DataThenConstants { max: 4 },
        attrs: &["mode", "pads", "value"],
        build: pad,
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
];

/// Finds the spec for an op type in the default domain.
pub fn lookup(domain: &str, op_type: &str) -> Option<&'static OpSpec> {
    if !(domain.is_empty() || domain == "ai.onnx") {
        return None;
    }
    OPS.iter().find(|s| s.op_type == op_type)
}

/// Decides whether Rivet can run `node`, and with which kernel. The `Err` says why not.
pub fn kernel_for(node: &NodeDesc) -> Result<Claim, String> {
    let spec = lookup(&node.domain, &node.op_type)
        .ok_or_else(|| format!("op {}:{} is not implemented", node.domain, node.op_type))?;
    let (lo, hi) = spec.since;
    if node.since_version < lo || node.since_version > hi {
        return Err(format!(
            "{} opset version {} is outside the supported {lo}..={hi}",
            node.op_type, node.since_version
        ));
    }
    let present: SmallVec<[usize; 4]> = (0..node.inputs.len()).filter(|&i| node.inputs[i].is_some()).collect();
    let n = node.inputs.len();
    let data: SmallVec<[usize; 4]> = match spec.arity {
        Arity::Unary | Arity::Binary => {
            let want = if matches!(spec.arity, Arity::Unary) { 1 } else { 2 };
            if n != want || present.len() != want {
                return Err(format!("{} needs exactly {want} inputs", node.op_type));
            }
            present
        }
        Arity::Variadic { min, max } => {
            if present.len() != n || n < min || n > max {
                return Err(format!("{} has {n} inputs", node.op_type));
            }
            present
        }
        Arity::DataThenConstants { max } => {
            if node.inputs.first().is_none_or(Option::is_none) || n > max {
                return Err(format!("{} needs its data input and at most {max} inputs", node.op_type));
            }
            SmallVec::from_slice(&[0])
        }
        Arity::Data { min, max } => {
            if n < min || n > max || present.len() != n {
                return Err(format!("{} needs {min} to {max} inputs", node.op_type));
            }
            present
        }
    };
    if node.outputs.first().is_none_or(Option::is_none) {
        return Err(format!("{} needs its output", node.op_type));
    }
    let extra_outputs_ok = matches!(
        node.op_type.as_str(),
        "Dropout" | "BatchNormalization" | "MaxPool" | "LayerNormalization" | "RMSNormalization"
    );
    if node.op_type == "MaxPool" && node.outputs.get(1).is_some_and(Option::is_some) {
        return Err("MaxPool's Indices output is not supported".into());
    }
    if !extra_outputs_ok && node.outputs.len() != 1 {
        return Err(format!("{} needs exactly one output", node.op_type));
    }
    for v in data.iter().map(|&i| node.inputs[i].as_ref().expect("present")).chain(node.outputs[..1].iter().flatten()) {
        if v.elem_type != dtype::FLOAT {
            return Err(format!(
                "value '{}' has element type {}, Rivet runs float32 only",
                v.name,
                dtype::name(v.elem_type)
            ));
        }
    }
    if let Some((name, _)) = node.attrs.iter().find(|(n, _)| !spec.attrs.contains(&n.as_str())) {
        return Err(format!("{} attribute '{name}' is not supported", node.op_type));
    }
    Ok(Claim { kernel: (spec.build)(node)?, data })
}

/// The README's table of supported ops, generated from `OPS`.
pub fn markdown_table() -> String {
    let mut out = String::from("| op | opset (since_version) | attributes | types |\n|---|---|---|---|\n");
    for s in OPS {
        let attrs = if s.attrs.is_empty() { "-".to_string() } else { s.attrs.join(", ") };
        out.push_str(&format!("| {} | {}..={} | {} | float32 |\n", s.op_type, s.since.0, s.since.1, attrs));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::ValueDesc;

    fn node(op: &str, version: i32, n_in: usize, attrs: Vec<(String, AttrValue)>) -> NodeDesc {
        let v = |name: &str| Some(ValueDesc { name: name.into(), elem_type: dtype::FLOAT, dims: None, constant: None });
        NodeDesc {
            name: "n".into(),
            op_type: op.into(),
            domain: String::new(),
            since_version: version,
            inputs: (0..n_in).map(|i| v(&format!("i{i}"))).collect(),
            outputs: vec![v("y")],
            attrs,
        }
    }

    #[test]
    fn defaults_follow_the_onnx_spec() {
        let k = |n: &NodeDesc| kernel_for(n).map(|c| c.kernel);
        assert_eq!(k(&node("LeakyRelu", 16, 1, vec![])), Ok(Kernel::Unary(UnaryOp::LeakyRelu { alpha: 0.01 })));
        assert_eq!(
            k(&node("HardSigmoid", 6, 1, vec![])),
            Ok(Kernel::Unary(UnaryOp::HardSigmoid { alpha: 0.2, beta: 0.5 }))
        );
        let tanh = vec![("approximate".into(), AttrValue::String("tanh".into()))];
        assert_eq!(k(&node("Gelu", 20, 1, tanh)), Ok(Kernel::Unary(UnaryOp::GeluTanh)));
        assert_eq!(k(&node("Softmax", 11, 1, vec![])), Ok(Kernel::Softmax { axis: 1, log: false, legacy: true }));
        assert_eq!(k(&node("LogSoftmax", 13, 1, vec![])), Ok(Kernel::Softmax { axis: -1, log: true, legacy: false }));
        let gemm = k(&node("Gemm", 13, 2, vec![])).unwrap();
        assert_eq!(gemm, Kernel::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false });
    }

    #[test]
    fn unsupported_nodes_say_why() {
        assert!(kernel_for(&node("Relu", 1, 1, vec![])).unwrap_err().contains("opset version 1"));
        assert!(kernel_for(&node("Hardmax", 13, 1, vec![])).unwrap_err().contains("not implemented"));
        assert!(kernel_for(&node("Add", 14, 1, vec![])).unwrap_err().contains("exactly 2 inputs"));
        let bad = vec![("approximate".into(), AttrValue::String("erf".into()))];
        assert!(kernel_for(&node("Gelu", 20, 1, bad)).unwrap_err().contains("approximate='erf'"));
        let extra = vec![("beta".into(), AttrValue::Float(1.0))];
        assert!(kernel_for(&node("LeakyRelu", 16, 1, extra)).unwrap_err().contains("'beta'"));
        let mut int_node = node("Relu", 14, 1, vec![]);
        int_node.inputs[0].as_mut().unwrap().elem_type = dtype::INT64;
        assert!(kernel_for(&int_node).unwrap_err().contains("int64"));
    }

    #[test]
    fn every_listed_op_resolves_at_its_lowest_and_highest_version() {
        for s in OPS {
            let n_in = match s.arity {
                Arity::Unary | Arity::DataThenConstants { .. } => 1,
                Arity::Binary => 2,
                Arity::Variadic { min, .. } => min.max(3),
                Arity::Data { min, .. } => min,
            };
            let needs_constants = ["Reshape", "Unsqueeze", "Concat", "Conv", "MaxPool", "AveragePool", "LRN", "Pad"];
            if needs_constants.contains(&s.op_type) {
                continue; // checked with their constants in the e2e tests
            }
            for v in [s.since.0, s.since.1] {
                assert!(kernel_for(&node(s.op_type, v, n_in, vec![])).is_ok(), "{} v{v}", s.op_type);
            }
        }
        assert_eq!(OPS.len(), 69);
    }
}
