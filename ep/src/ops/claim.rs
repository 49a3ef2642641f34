//! The claim rules of families that came from the registry's table of ops: its arity,
//! output and element-type checks, with its wording, so that the same nodes are claimed
//! and refused for the same reasons.

use super::op::util::{input, output_type};
use crate::graph::{dtype, NodeDesc};

/// Exactly `n` inputs, all present.
pub fn exact_inputs(node: &NodeDesc, n: usize) -> Result<(), String> {
    if node.inputs.len() != n || node.inputs.iter().any(Option::is_none) {
        return Err(format!("{} needs exactly {n} inputs", node.op_type));
    }
    Ok(())
}

/// Between `min` and `max` inputs, all present.
pub fn data_inputs(node: &NodeDesc, min: usize, max: usize) -> Result<(), String> {
    let n = node.inputs.len();
    if n < min || n > max || node.inputs.iter().any(Option::is_none) {
        return Err(format!("{} needs {min} to {max} inputs", node.op_type));
    }
    Ok(())
}

/// Output 0 present and, unless `extra`, no other output.
pub fn outputs(node: &NodeDesc, extra: bool) -> Result<(), String> {
    if node.outputs.first().is_none_or(Option::is_none) {
        return Err(format!("{} needs its output", node.op_type));
    }
    if !extra && node.outputs.len() != 1 {
        return Err(format!("{} needs exactly one output", node.op_type));
    }
    Ok(())
}

/// The types of the (present) inputs.
fn input_types(node: &NodeDesc) -> impl Iterator<Item = i32> + '_ {
    node.inputs.iter().flatten().map(|v| v.elem_type)
}

/// Why the node's types are refused: what the op runs, then the inputs' and output 0's
/// types.
pub fn bad_types(node: &NodeDesc, what: &str) -> String {
    let mut list: Vec<String> =
        node.inputs.iter().flatten().map(|v| format!("'{}' {}", v.name, dtype::name(v.elem_type))).collect();
    if let Some(out) = node.outputs.first().and_then(Option::as_ref) {
        list.push(format!("output '{}' {}", out.name, dtype::name(out.elem_type)));
    }
    format!("{} runs {what}; got {}", node.op_type, list.join(", "))
}

/// The float rule: float32 throughout (halves are float32 by the time this is asked), or
/// float64 throughout.
pub fn float_types(node: &NodeDesc) -> Result<(), String> {
    let out = output_type(node, 0);
    if out == dtype::DOUBLE {
        return match input_types(node).all(|t| t == dtype::DOUBLE) {
            true => Ok(()),
            false => Err(bad_types(node, "other element types")),
        };
    }
    float32_types(node)
}

/// float32 throughout.
pub fn float32_types(node: &NodeDesc) -> Result<(), String> {
    if !(input_types(node).all(|t| t == dtype::FLOAT) && output_type(node, 0) == dtype::FLOAT) {
        return Err(bad_types(node, "float32 only"));
    }
    Ok(())
}

/// Output `k` (after the first) is of type `want`.
pub fn extra_output(node: &NodeDesc, k: usize, want: i32) -> Result<(), String> {
    let Some(out) = node.outputs.get(k).and_then(Option::as_ref) else { return Ok(()) };
    if out.elem_type != want {
        return Err(format!(
            "{} output {k} '{}' is {}, expected {}",
            node.op_type,
            out.name,
            dtype::name(out.elem_type),
            dtype::name(want)
        ));
    }
    Ok(())
}

/// Why output `k` is refused.
pub fn unsupported_output(node: &NodeDesc, k: usize) -> String {
    format!("{}'s output {k} is not supported", node.op_type)
}

/// The names of the node's inputs (for shape errors).
pub fn input_names(node: &NodeDesc) -> Vec<String> {
    (0..node.inputs.len()).map(|k| input(node, k).map_or_else(String::new, |v| v.name.clone())).collect()
}
