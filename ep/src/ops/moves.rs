//! What the data-movement families share (Concat, Expand, Slice, Split, Pad, and the
//! reductions' claim): their claim's input and type checks, and int64 / int32 inputs read
//! as i64 without a heap allocation.

use smallvec::SmallVec;

use crate::data::{self, Data};
use crate::graph::{dtype, NodeDesc};

/// Fails unless input 0 is present and the node has at most `max` inputs, and it has its
/// first output (and, unless `parts`, only that one).
pub fn check_data_then_constants(node: &NodeDesc, max: usize, parts: bool) -> Result<(), String> {
    if node.inputs.first().is_none_or(Option::is_none) || node.inputs.len() > max {
        return Err(format!("{} needs its data input and at most {max} inputs", node.op_type));
    }
    if node.outputs.first().is_none_or(Option::is_none) {
        return Err(format!("{} needs its output", node.op_type));
    }
    if !parts && node.outputs.len() != 1 {
        return Err(format!("{} needs exactly one output", node.op_type));
    }
    Ok(())
}

/// An error text naming the element types of the node's data inputs (`data`, by input
/// position) and its first output, for a type it cannot take.
pub fn bad_types_of(node: &NodeDesc, data: &[usize], runs: &str) -> String {
    let value = |i: usize| node.inputs[i].as_ref().expect("data inputs are present");
    let out = node.outputs[0].as_ref().expect("checked");
    let list: Vec<String> = data
        .iter()
        .map(|&i| format!("'{}' {}", value(i).name, dtype::name(value(i).elem_type)))
        .chain(std::iter::once(format!("output '{}' {}", out.name, dtype::name(out.elem_type))))
        .collect();
    format!("{} runs {runs}; got {}", node.op_type, list.join(", "))
}

/// The element types of the data inputs `data` and of the first output.
pub fn types_of(node: &NodeDesc, data: &[usize]) -> (SmallVec<[i32; 4]>, i32) {
    let types = data.iter().map(|&i| node.inputs[i].as_ref().map_or(0, |v| v.elem_type)).collect();
    (types, node.outputs[0].as_ref().map_or(0, |v| v.elem_type))
}

/// Data movement: one element type, any Rivet holds, for the data inputs and the output.
pub fn check_same_type(node: &NodeDesc, data: &[usize]) -> Result<(), String> {
    let (types, out) = types_of(node, data);
    if !(data::supported(out) && types.iter().all(|&t| t == out)) {
        return Err(bad_types_of(
            node,
            data,
            "one element type for data and output, any but strings and sub-byte types",
        ));
    }
    Ok(())
}

/// The step input that node input `pos` is (the present inputs, in order).
pub fn step_input(node: &NodeDesc, pos: usize) -> Option<usize> {
    node.inputs.get(pos)?.as_ref()?;
    Some(node.inputs[..pos].iter().filter(|v| v.is_some()).count())
}

/// An int list read at Run, on the stack (up to 16 values).
pub type Ints = SmallVec<[i64; 16]>;

/// The values of an int64 or int32 tensor as i64.
pub fn ints(d: Data<'_>) -> Result<Ints, String> {
    match d {
        Data::I64(v) => Ok(Ints::from_slice(v)),
        Data::I32(v) => Ok(v.iter().map(|&x| x as i64).collect()),
        _ => Err("an int list input is not int64 or int32".into()),
    }
}
