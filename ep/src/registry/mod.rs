//! What Rivet can run: one table of ops, their opset ranges and how their attributes map
//! to a kernel. Capability asks it whether a node is claimable; the plan asks it for the
//! kernel. The README's op table is generated from `OPS`.

use smallvec::SmallVec;

use crate::data;
use crate::graph::{dtype, NodeDesc};
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
        let (ops, half) = claim_family(family, node)?;
        let data = (0..node.inputs.len()).filter(|&i| node.inputs[i].is_some()).collect();
        return Ok(Claim { kernel: Kernel::Op, data, params: SmallVec::new(), extra: SmallVec::new(), half, ops });
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
    let extra_outputs_ok = matches!(node.op_type.as_str(), "Dropout");
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
            // Exact in float32 (comparisons, Mod), or rounded once at the end.
            let computes_in_f32 = !kernel.is_typed()
                || matches!(
                    kernel,
                    Kernel::Arith(rivet_kernels::typed::Arith::Mod { fmod: true }) | Kernel::Dropout { .. }
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
        _ => SmallVec::new(),
    };
    let extra = extra_outputs(node, &kernel)?;
    Ok(Claim { kernel, data, params, extra, half, ops: Vec::new() })
}

/// Claims `node` through its family. A float16 / bfloat16 node its family refuses is
/// claimed as float32 between casts when every op it compiles for the node seen as
/// float32 says it runs halves so (`Op::halves_in_f32`). When the first output's op does
/// but another output is refused, that refusal is the reason; else the first one.
fn claim_family(
    family: &crate::ops::Family,
    node: &NodeDesc,
) -> Result<(Vec<Option<crate::ops::OpRef>>, Option<i32>), String> {
    let why = match crate::ops::op::claim(family, node) {
        Ok(ops) => return Ok((ops, None)),
        Err(why) => why,
    };
    // The half type: the first present output's, or the inputs'.
    let is_half = |t: &i32| matches!(*t, dtype::FLOAT16 | dtype::BFLOAT16);
    let out_type = node.outputs.iter().flatten().next().map_or(0, |v| v.elem_type);
    let t = std::iter::once(out_type).chain(node.inputs.iter().flatten().map(|v| v.elem_type)).find(is_half);
    let Some(t) = t else { return Err(why) };
    let as_f32 = with_type_as_f32(node, t);
    match crate::ops::op::claim(family, &as_f32) {
        Ok(ops) if ops.iter().flatten().all(|op| op.halves_in_f32()) => Ok((ops, Some(t))),
        Ok(_) => Err(why),
        Err(other) => {
            let first = node.outputs.iter().position(Option::is_some).unwrap_or(0);
            match (family.compile)(&as_f32, first) {
                Ok(op) if op.halves_in_f32() => Err(other),
                _ => Err(why),
            }
        }
    }
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
    if let Kernel::Dropout { .. } = kernel {
        // The plan makes the mask itself (before the output, which reads it).
        return match present(1) {
            Some(m) if m.elem_type != dtype::BOOL => Err(format!("Dropout mask '{}' is not bool", m.name)),
            _ => Ok(extra),
        };
    }
    for k in 1..node.outputs.len() {
        if present(k).is_none() {
            continue;
        }
        let (kernel, want) = match (*kernel, node.op_type.as_str()) {
            (Kernel::Identity, "Dropout") => (Kernel::Ones, dtype::BOOL),
            _ => return Err(format!("{}'s output {k} is not supported", node.op_type)),
        };
        crate::ops::claim::extra_output(node, k, want)?;
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
        Kernel::Identity | Kernel::Reshape(_) | Kernel::Transpose(_) => {
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
        Kernel::Cast { to, .. } => data::supported(types[0]) && data::supported(to) && out.elem_type == to,
        Kernel::Dropout { ratio, .. } => {
            let float = |t: i32| matches!(t, dtype::FLOAT | dtype::DOUBLE | dtype::FLOAT16 | dtype::BFLOAT16);
            matches!(out.elem_type, dtype::FLOAT | dtype::DOUBLE)
                && types[0] == out.elem_type
                && (!ratio || float(types[1]))
                && types.last() == Some(&dtype::BOOL)
        }
        // float64 computed in float64: the elementwise math.
        Kernel::Unary(_) | Kernel::Math(_) | Kernel::MatMul { .. } | Kernel::Gemm { .. }
            if out.elem_type == dtype::DOUBLE =>
        {
            all(&types, dtype::DOUBLE)
        }
        Kernel::PowTyped => data::is_number(types[0]) && data::is_number(types[1]) && out.elem_type == types[0],
        Kernel::ClipInputs { .. } if out.elem_type != dtype::FLOAT => {
            data::is_number(out.elem_type) && all(&types, out.elem_type)
        }
        // Integers: Abs, Neg, Relu, Sign and the exact reductions; bool Max / Min.
        Kernel::Unary(UnaryOp::Abs | UnaryOp::Neg | UnaryOp::Relu) | Kernel::Math(MathOp::Sign)
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
        "\n*any*: float32, float64, float16, bfloat16, the 8-bit floats (float8e4m3fn, float8e4m3fnuz, \
         float8e5m2, float8e5m2fnuz: cast, moved, quantized and dequantized; float8e8m0: cast, with \
         `round_mode`, and moved), int4, uint4, float4e2m1, int2 and uint2 (the same; \
         unpacked where they enter a fused node, packed where they leave it), int8/16/32/64, \
         uint8/16/32/64 and bool; *numbers*: float32, float64 and the integers; *halves*: float16 and \
         bfloat16, computed in float32 between casts.\n",
    );
    out
}

fn is_int(t: i32) -> bool {
    data::is_number(t) && !matches!(t, dtype::FLOAT | dtype::DOUBLE)
}

/// Whether an op's kernel also runs float64 (the elementwise math, reductions).
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
    elementwise
}

/// The element types an op is claimed for, for the README's table (`check_types` decides).
fn types(op_type: &str) -> &'static str {
    match op_type {
        "Identity" | "Transpose" | "Flatten" | "Reshape" | "Squeeze" | "Unsqueeze" => "any",
        "Dropout" => "float32, float64, halves",
        "Add" | "Sub" | "Mul" | "Div" | "Max" | "Min" | "Sum" => "numbers, halves",
        "Mod" => "numbers, halves (floats with fmod=1)",
        "Pow" => "numbers (base and exponent types may differ), halves",
        "Cast" | "CastLike" => "any to any",
        "Abs" | "Neg" | "Relu" | "Sign" | "Clip" => "numbers, halves",
        "MatMul" | "Gemm" => "float32, float64, halves",
        _ if crate::registry::OPS.iter().any(|s| s.op_type == op_type && f64_op(s)) => "float32, float64, halves",
        _ => "float32, halves",
    }
}
