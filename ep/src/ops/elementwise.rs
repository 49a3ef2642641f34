//! What the broadcasting elementwise families of the typed path share (the comparisons,
//! the boolean logic, the bitwise ops, Where): their claim's arity and output checks, the
//! output shape of inputs broadcast together, and the rank-8 limit of their loops.

use rivet_kernels::Broadcast;

use super::op::util::bad_types;
use super::{RunIn, ShapeError};
use crate::graph::{NodeDesc, Shape};

/// Fails unless the node has exactly `n` inputs, all present, and one output.
pub fn check_arity(node: &NodeDesc, n: usize) -> Result<(), String> {
    let present = node.inputs.iter().filter(|v| v.is_some()).count();
    if node.inputs.len() != n || present != n {
        return Err(format!("{} needs exactly {n} inputs", node.op_type));
    }
    check_one_output(node)
}

/// Fails unless the node has its one output.
pub fn check_one_output(node: &NodeDesc) -> Result<(), String> {
    if node.outputs.first().is_none_or(Option::is_none) {
        return Err(format!("{} needs its output", node.op_type));
    }
    if node.outputs.len() != 1 {
        return Err(format!("{} needs exactly one output", node.op_type));
    }
    Ok(())
}

/// The error for element types the family does not run.
pub fn other_types(node: &NodeDesc) -> String {
    bad_types(node, "other element types")
}

/// The shape of every input broadcast together (numpy rules).
pub fn broadcast_shape(shapes: &[&[usize]]) -> Result<Shape, ShapeError> {
    let mut out = Shape::from_slice(shapes[0]);
    for (k, s) in shapes.iter().enumerate().skip(1) {
        let b = Broadcast::new(&out, s)
            .map_err(|e| ShapeError::Invalid(format!("input {k} does not broadcast with the others: {e}")))?;
        out = Shape::from_slice(b.out_shape());
    }
    Ok(out)
}

/// The typed loops keep an index per axis on the stack, up to rank 8: a higher rank at
/// Run is an error naming the input (or the output), not a panic.
pub fn up_to_rank_8(x: &RunIn<'_, '_>) -> Result<(), String> {
    let ranks = x.shapes.iter().map(|s| s.len()).enumerate().map(|(k, r)| (Some(k), r));
    for (k, rank) in ranks.chain(std::iter::once((None, x.out_shape.len()))) {
        if rank > 8 {
            return Err(match k {
                Some(k) => format!("input {k}: rank {rank}; Rivet runs this op up to rank 8"),
                None => format!("the output: rank {rank}; Rivet runs this op up to rank 8"),
            });
        }
    }
    Ok(())
}
