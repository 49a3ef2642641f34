//! What Rivet can run: one table of ops, their opset ranges and how their attributes map
//! to a kernel. Capability asks it whether a node is claimable; the plan asks it for the
//! kernel. The README's op table is generated from `OPS`.

use smallvec::SmallVec;

use crate::data;
use crate::graph::{dtype, NodeDesc};
use rivet_kernels::attention::AttnOut;
use rivet_kernels::UnaryOp;

mod attrs;
mod kernel;
mod ops;
#[cfg(test)]
mod tests;

pub use kernel::*;
pub use ops::OPS;

/// A claimed node: its kernel and which of its inputs carry runtime f32 data (the others
/// are constants the kernel already holds, or omitted optional inputs).
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    pub kernel: Kernel,
    pub data: SmallVec<[usize; 4]>,
    /// Positions of int64 inputs read at Run (see `ReshapeRule::reads_param`).
    pub params: SmallVec<[usize; 1]>,
    /// Kernels for the node's other outputs (by output position), each run as a step of
    /// its own on the same inputs: LayerNormalization's mean and inverse
    /// standard deviation, Dropout's mask.
    pub extra: SmallVec<[(usize, Kernel); 2]>,
    /// float16 or bfloat16, for a node of a float32 kernel on that type: the plan casts
    /// its half inputs to float32 and its outputs back.
    pub half: Option<i32>,
    /// For `Kernel::Op`: the compiled op of each output (by position; `None` if absent).
    pub ops: Vec<Option<crate::ops::OpRef>>,
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
    /// The first `min` inputs are data and present; the others, up to `max`, are data when
    /// present (the kernel knows which).
    Optional {
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

/// Finds the spec for an op type in the default domain.
pub fn lookup(domain: &str, op_type: &str) -> Option<&'static OpSpec> {
    if !(domain.is_empty() || domain == "ai.onnx") {
        return None;
    }
    OPS.iter().find(|s| s.op_type == op_type)
}

/// Decides whether Rivet can run `node`, and with which kernel. The `Err` says why not.
pub fn kernel_for(node: &NodeDesc) -> Result<Claim, String> {
    if let Some(family) = crate::ops::op::lookup(&node.domain, &node.op_type) {
        let ops = crate::ops::op::claim(family, node)?;
        let data = (0..node.inputs.len()).filter(|&i| node.inputs[i].is_some()).collect();
        return Ok(Claim {
            kernel: Kernel::Op,
            data,
            params: SmallVec::new(),
            extra: SmallVec::new(),
            half: None,
            ops,
        });
    }
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
        Arity::Optional { min, max } => {
            if n < min || n > max || present.iter().copied().take(min).ne(0..min) {
                return Err(format!("{} needs its first {min} inputs and at most {max}", node.op_type));
            }
            present
        }
    };
    if node.outputs.first().is_none_or(Option::is_none) {
        return Err(format!("{} needs its output", node.op_type));
    }
    let extra_outputs_ok = matches!(
        node.op_type.as_str(),
        "Dropout"
            | "BatchNormalization"
            | "MaxPool"
            | "LayerNormalization"
            | "RMSNormalization"
            | "SoftmaxCrossEntropyLoss"
            | "Attention"
            | "TopK"
    );
    if !extra_outputs_ok && node.outputs.len() != 1 {
        return Err(format!("{} needs exactly one output", node.op_type));
    }
    if let Some((name, _)) = node.attrs.iter().find(|(n, _)| !spec.attrs.contains(&n.as_str())) {
        return Err(format!("{} attribute '{name}' is not supported", node.op_type));
    }
    let kernel = (spec.build)(node)?;
    let mut data = data;
    if let Kernel::Dropout { .. } = kernel {
        // ratio and training_mode are read at Run.
        data = (0..node.inputs.len()).filter(|&i| node.inputs[i].is_some()).collect();
    }
    // A float32 kernel runs float16 and bfloat16 nodes in float32, between casts.
    let as_f32;
    let mut half = None;
    let node = match check_types(node, &kernel, &data) {
        Ok(()) => node,
        Err(why) => {
            // The half type: the output's, or the data inputs' for a node whose output is
            // bool or an index (comparisons, ArgMax, ...).
            let is_half = |t: &i32| matches!(*t, dtype::FLOAT16 | dtype::BFLOAT16);
            let out_type = node.outputs[0].as_ref().map_or(0, |v| v.elem_type);
            let t = std::iter::once(out_type)
                .chain(data.iter().filter_map(|&i| node.inputs[i].as_ref().map(|v| v.elem_type)))
                .find(is_half)
                .unwrap_or(out_type);
            // Exact in float32 (comparisons, ArgMax, TopK, Mod), or rounded once at the end.
            let computes_in_f32 = !kernel.is_typed()
                || matches!(
                    kernel,
                    Kernel::Attention(_)
                        | Kernel::Loss { .. }
                        | Kernel::Rotary { .. }
                        | Kernel::Einsum { .. }
                        | Kernel::ArgReduce { .. }
                        | Kernel::TopK { .. }
                        | Kernel::Arith(rivet_kernels::typed::Arith::Mod { fmod: true })
                        | Kernel::Dropout { .. }
                        | Kernel::BatchNormTrain { .. }
                        | Kernel::Scatter { .. }
                );
            if !(computes_in_f32 && is_half(&t)) {
                return Err(why);
            }
            as_f32 = with_type_as_f32(node, t);
            check_types(&as_f32, &kernel, &data).map_err(|_| why)?;
            half = Some(t);
            &as_f32
        }
    };
    let params = match kernel {
        Kernel::Reshape(rule) if rule.reads_param() => SmallVec::from_slice(&[1]),
        Kernel::Tile { repeats: ReduceAxes::AtRun }
        | Kernel::TopK { k: ReduceAxes::AtRun, .. }
        | Kernel::CumSum { axis: ReduceAxes::AtRun, .. }
        | Kernel::Trilu { k: ReduceAxes::AtRun, .. } => SmallVec::from_slice(&[1]),
        Kernel::ConstantOfShape { shape: ReduceAxes::AtRun, .. } => SmallVec::from_slice(&[0]),
        _ => SmallVec::new(),
    };
    let extra = extra_outputs(node, &kernel)?;
    Ok(Claim { kernel, data, params, extra, half, ops: Vec::new() })
}

/// `node` with its values of element type `t` seen as float32.
fn with_type_as_f32(node: &NodeDesc, t: i32) -> NodeDesc {
    let mut n = node.clone();
    for v in n.inputs.iter_mut().chain(n.outputs.iter_mut()).flatten() {
        if v.elem_type == t {
            v.elem_type = dtype::FLOAT;
        }
    }
    n
}

/// The steps that compute a node's outputs after the first, with their types checked.
fn extra_outputs(node: &NodeDesc, kernel: &Kernel) -> Result<SmallVec<[(usize, Kernel); 2]>, String> {
    let mut extra: SmallVec<[(usize, Kernel); 2]> = SmallVec::new();
    let present = |k: usize| node.outputs.get(k).and_then(Option::as_ref);
    let input_type = node.inputs[0].as_ref().map_or(0, |v| v.elem_type);
    if let Kernel::Dropout { .. } = kernel {
        // The plan makes the mask itself (before the output, which reads it).
        return match present(1) {
            Some(m) if m.elem_type != dtype::BOOL => Err(format!("Dropout mask '{}' is not bool", m.name)),
            _ => Ok(extra),
        };
    }
    for k in 1..node.outputs.len() {
        let Some(out) = present(k) else { continue };
        let (kernel, want) = match (*kernel, node.op_type.as_str()) {
            (Kernel::Norm { axis, epsilon, rms: false }, _) if input_type == dtype::FLOAT => {
                (Kernel::NormStat { axis, epsilon, inverse_std: k == 2 }, dtype::FLOAT)
            }
            (Kernel::Identity, "Dropout") => (Kernel::Ones, dtype::BOOL),
            (Kernel::BatchNormTrain { epsilon, momentum, .. }, _) if k < 3 => {
                (Kernel::BatchNormTrain { epsilon, momentum, out: k as u8 }, input_type)
            }
            (Kernel::Pool { window, max: true, .. }, _) if input_type == dtype::FLOAT => {
                let column_major = attrs::int_attr(node, "storage_order", 0)? == 1;
                (Kernel::PoolIndices { window, column_major }, dtype::INT64)
            }
            (Kernel::TopK { axis, largest, k: count, .. }, _) => {
                (Kernel::TopK { axis, largest, k: count, indices: true }, dtype::INT64)
            }
            (Kernel::Attention(a), _) => {
                let out = match k {
                    1 => AttnOut::PresentKey,
                    2 => AttnOut::PresentValue,
                    _ => AttnOut::Scores(a.qk_mode),
                };
                if k < 3 && !a.past {
                    return Err("Attention's present key and value need past key and value".into());
                }
                (Kernel::Attention(AttentionSpec { out, ..a }), input_type)
            }
            (Kernel::Loss { softmax: true, .. }, _) if input_type == dtype::FLOAT => {
                (Kernel::Softmax { axis: 1, log: true, legacy: false }, dtype::FLOAT)
            }
            _ => return Err(format!("{}'s output {k} is not supported", node.op_type)),
        };
        if out.elem_type != want {
            return Err(format!(
                "{} output {k} '{}' is {}, expected {}",
                node.op_type,
                out.name,
                dtype::name(out.elem_type),
                dtype::name(want)
            ));
        }
        extra.push((k, kernel));
    }
    Ok(extra)
}

/// Checks the element types of a node's data inputs and first output against what its
/// kernel runs: float32 for the tuned kernels, more for the data-movement, arithmetic,
/// comparison and cast kernels.
fn check_types(node: &NodeDesc, kernel: &Kernel, data: &[usize]) -> Result<(), String> {
    use rivet_kernels::typed::Arith;
    let value = |i: usize| node.inputs[i].as_ref().expect("data inputs are present");
    let out = node.outputs[0].as_ref().expect("checked");
    let types: SmallVec<[i32; 4]> = data.iter().map(|&i| value(i).elem_type).collect();
    let bad = |what: &str| {
        let list: Vec<String> = data
            .iter()
            .map(|&i| format!("'{}' {}", value(i).name, dtype::name(value(i).elem_type)))
            .chain(std::iter::once(format!("output '{}' {}", out.name, dtype::name(out.elem_type))))
            .collect();
        Err(format!("{} runs {what}; got {}", node.op_type, list.join(", ")))
    };
    let all = |t: &[i32], want: i32| t.iter().all(|&x| x == want);
    let ok = match *kernel {
        Kernel::Identity | Kernel::Reshape(_) | Kernel::Transpose(_) | Kernel::Trilu { .. } | Kernel::Tile { .. } => {
            if !(data::supported(out.elem_type) && all(&types, out.elem_type)) {
                return bad("one element type for data and output, any but strings and sub-byte types");
            }
            true
        }
        Kernel::Arith(Arith::Mod { .. }) | Kernel::Arith(_) | Kernel::Variadic { mean: false, .. } => {
            if !(data::is_number(out.elem_type) && all(&types, out.elem_type)) {
                return bad("one numeric element type (float32, float64 or an integer)");
            }
            true
        }
        Kernel::Cast { to } => data::supported(types[0]) && data::supported(to) && out.elem_type == to,
        Kernel::ArgReduce { .. } => data::is_number(types[0]) && out.elem_type == dtype::INT64,
        Kernel::EyeLike { .. } => data::supported(types[0]) && data::supported(out.elem_type),
        Kernel::Attention(a) => {
            // float32 or float64 throughout; the mask bool or any number (added).
            let t = out.elem_type;
            let mut k = 3;
            let mask_ok = !a.mask || {
                k += 1;
                types[k - 1] == dtype::BOOL || data::is_number(types[k - 1])
            };
            let past_ok = !a.past || {
                k += 2;
                all(&types[k - 2..k], t)
            };
            let nonpad_ok = !a.nonpad || types[k] == dtype::INT64;
            matches!(t, dtype::FLOAT | dtype::DOUBLE) && all(&types[..3], t) && mask_ok && past_ok && nonpad_ok
        }
        Kernel::TopK { .. } => data::is_number(types[0]) && out.elem_type == types[0],
        Kernel::BatchNormTrain { .. } => {
            matches!(out.elem_type, dtype::FLOAT | dtype::DOUBLE) && all(&types, out.elem_type)
        }
        Kernel::Dropout { ratio, .. } => {
            let float = |t: i32| matches!(t, dtype::FLOAT | dtype::DOUBLE | dtype::FLOAT16 | dtype::BFLOAT16);
            matches!(out.elem_type, dtype::FLOAT | dtype::DOUBLE)
                && types[0] == out.elem_type
                && (!ratio || float(types[1]))
                && types.last() == Some(&dtype::BOOL)
        }
        Kernel::Einsum { .. } => data::is_number(out.elem_type) && all(&types, out.elem_type),
        Kernel::ShapeOf { .. } | Kernel::SizeOf => data::supported(types[0]) && out.elem_type == dtype::INT64,
        Kernel::ConstantOfShape { .. } => types[0] == dtype::INT64 && data::supported(out.elem_type),
        Kernel::Range => {
            matches!(out.elem_type, dtype::FLOAT | dtype::DOUBLE | dtype::INT16 | dtype::INT32 | dtype::INT64)
                && all(&types, out.elem_type)
        }
        Kernel::NonZero => data::supported(types[0]) && out.elem_type == dtype::INT64,
        Kernel::Rotary { positions, .. } => {
            all(&types[..3], dtype::FLOAT) && (!positions || types[3] == dtype::INT64) && out.elem_type == dtype::FLOAT
        }
        Kernel::GatherNd { .. } => {
            data::supported(out.elem_type) && types[0] == out.elem_type && types[1] == dtype::INT64
        }
        Kernel::Scatter { axis, reduction } => {
            let index_ok = matches!((axis, types[1]), (Some(_), dtype::INT32) | (_, dtype::INT64));
            let type_ok = if reduction == ScatterReduction::None {
                data::supported(out.elem_type)
            } else {
                data::is_number(out.elem_type)
            };
            type_ok && index_ok && types[0] == out.elem_type && types[2] == out.elem_type
        }
        Kernel::OneHot { .. } => {
            let number = |t: i32| data::is_number(t) || matches!(t, dtype::FLOAT16 | dtype::BFLOAT16);
            number(types[0]) && number(types[1]) && data::supported(out.elem_type) && types[2] == out.elem_type
        }
        Kernel::Loss { .. } => {
            matches!(types[0], dtype::FLOAT | dtype::DOUBLE)
                && matches!(types[1], dtype::INT32 | dtype::INT64)
                && types.get(2).is_none_or(|&w| w == types[0])
                && out.elem_type == types[0]
        }
        Kernel::Gather { .. } | Kernel::GatherElements { .. } => {
            data::supported(out.elem_type)
                && types[0] == out.elem_type
                && matches!(types[1], dtype::INT32 | dtype::INT64)
        }
        // float64 computed in float64: the elementwise math, CumSum and the reductions.
        Kernel::Unary(_)
        | Kernel::Math(_)
        | Kernel::CumSum { .. }
        | Kernel::Softmax { .. }
        | Kernel::Norm { .. }
        | Kernel::MatMul { .. }
        | Kernel::Gemm { .. }
        | Kernel::BatchNorm { .. }
        | Kernel::GroupNorm { .. }
        | Kernel::InstanceNorm { .. }
        | Kernel::Hardmax { .. }
            if out.elem_type == dtype::DOUBLE =>
        {
            all(&types, dtype::DOUBLE)
        }
        Kernel::Pool { max: true, .. } if is_int(out.elem_type) => all(&types, out.elem_type),
        Kernel::PowTyped => data::is_number(types[0]) && data::is_number(types[1]) && out.elem_type == types[0],
        Kernel::ClipInputs { .. } if out.elem_type != dtype::FLOAT => {
            data::is_number(out.elem_type) && all(&types, out.elem_type)
        }
        // Integers: Abs, Neg, Relu, Sign, CumSum and the exact reductions; bool Max / Min.
        Kernel::Unary(UnaryOp::Abs | UnaryOp::Neg | UnaryOp::Relu)
        | Kernel::Math(MathOp::Sign)
        | Kernel::CumSum { .. }
            if is_int(out.elem_type) =>
        {
            all(&types, out.elem_type)
        }
        _ => {
            if !(all(&types, dtype::FLOAT) && out.elem_type == dtype::FLOAT) {
                return bad("float32 only");
            }
            true
        }
    };
    if ok {
        Ok(())
    } else {
        bad("other element types")
    }
}

/// The README's table of supported ops, generated from `OPS`.
pub fn markdown_table() -> String {
    let mut out = String::from("| op | opset (since_version) | attributes | types |\n|---|---|---|---|\n");
    for s in OPS {
        let attrs = if s.attrs.is_empty() { "-".to_string() } else { s.attrs.join(", ") };
        out.push_str(&format!(
            "| {} | {}..={} | {} | {} |\n",
            s.op_type,
            s.since.0,
            s.since.1,
            attrs,
            types(s.op_type)
        ));
    }
    for f in crate::ops::FAMILIES {
        let name = if f.domain.is_empty() { f.op_type.to_string() } else { format!("{}:{}", f.domain, f.op_type) };
        out.push_str(&format!("| {name} | {}..={} | (its module) | {} |\n", f.since.0, f.since.1, f.types));
    }
    out.push_str(
        "\n*any*: float32, float64, float16, bfloat16, int8/16/32/64, uint8/16/32/64 and bool; *numbers*: \
         float32, float64 and the integers; *halves*: float16 and bfloat16, computed in float32 between \
         casts.\n",
    );
    out
}

fn is_int(t: i32) -> bool {
    data::is_number(t) && !matches!(t, dtype::FLOAT | dtype::DOUBLE)
}

/// Whether an op's kernel also runs float64 (the elementwise math, CumSum, reductions).
fn f64_op(spec: &OpSpec) -> bool {
    let v =
        |name: &str| Some(crate::graph::ValueDesc { name: name.into(), elem_type: dtype::FLOAT, ..Default::default() });
    let node = NodeDesc {
        name: String::new(),
        op_type: spec.op_type.into(),
        domain: String::new(),
        since_version: spec.since.1,
        inputs: vec![v("x")],
        outputs: vec![v("y")],
        attrs: vec![],
    };
    let elementwise = matches!((spec.build)(&node), Ok(Kernel::Unary(_) | Kernel::Math(_)));
    elementwise || spec.op_type == "CumSum"
}

/// The element types an op is claimed for, for the README's table (`check_types` decides).
fn types(op_type: &str) -> &'static str {
    match op_type {
        "Identity" | "Transpose" | "Flatten" | "Reshape" | "Squeeze" | "Unsqueeze" | "Trilu" | "Tile" | "GatherND" => {
            "any"
        }
        "ScatterElements" | "ScatterND" | "Scatter" => "any (numbers and halves with a reduction)",
        "OneHot" => "numeric indices and depth, any values",
        "TopK" => "numbers, halves (int64 indices)",
        "Range" => "float32, float64, int16, int32, int64",
        "Einsum" => "numbers, halves",
        "Shape" | "Size" => "any, to int64",
        "ConstantOfShape" => "int64 shape, any value",
        "NonZero" => "any, to int64",
        "RotaryEmbedding" => "float32, halves (int64 positions)",
        "Gather" | "GatherElements" => "any (int32 / int64 indices)",
        "EyeLike" => "any",
        "Dropout" => "float32, float64, halves",
        "Attention" => "float32, float64, halves (bool or numeric mask)",
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => "float32, float64, halves (int32 / int64 targets)",
        "Add" | "Sub" | "Mul" | "Div" | "Max" | "Min" | "Sum" => "numbers, halves",
        "Mod" => "numbers, halves (floats with fmod=1)",
        "Pow" => "numbers (base and exponent types may differ), halves",
        "Cast" | "CastLike" => "any to any",
        "ArgMax" | "ArgMin" => "numbers, halves, to int64",
        "Abs" | "Neg" | "Relu" | "Sign" | "CumSum" | "Clip" | "MaxPool" => "numbers, halves",
        "Softmax"
        | "LogSoftmax"
        | "LayerNormalization"
        | "RMSNormalization"
        | "MatMul"
        | "Gemm"
        | "BatchNormalization"
        | "InstanceNormalization"
        | "GroupNormalization"
        | "Hardmax" => "float32, float64, halves",
        _ if crate::registry::OPS.iter().any(|s| s.op_type == op_type && f64_op(s)) => "float32, float64, halves",
        _ => "float32, halves",
    }
}
