//! What the index and shape families share with the older table's claim rules: an int64
//! input that is a constant read at Compile or data read at Run, and the one-output rule.

use smallvec::SmallVec;

use super::params::{Axes, ReduceAxes};
use super::ShapeError;
use crate::data::Data;
use crate::graph::NodeDesc;
use crate::node_attrs::{const_i64, runtime_i64};

/// An int64 input at position `pos`: a constant, or read at Run (empty when omitted).
pub fn ints_input(node: &NodeDesc, pos: usize, what: &str) -> Result<ReduceAxes, String> {
    if runtime_i64(node, pos) {
        return Ok(ReduceAxes::AtRun);
    }
    Ok(ReduceAxes::Const(Axes::new(&const_i64(node, pos, what)?.unwrap_or_default())?))
}

/// The values of such an input: the constant, or `data` (int64 or int32) read at Run.
pub fn ints_of<'d>(list: &ReduceAxes, data: impl FnOnce() -> Result<Data<'d>, ShapeError>) -> Result<Ints, ShapeError> {
    match list {
        ReduceAxes::Const(a) => Ok(SmallVec::from_slice(a.as_slice())),
        ReduceAxes::AtRun => match data()? {
            Data::I64(v) => Ok(SmallVec::from_slice(v)),
            Data::I32(v) => Ok(v.iter().map(|&x| i64::from(x)).collect()),
            _ => Err("the int64 input is missing".into()),
        },
    }
}

/// A short list of ints (inline up to rank 8).
pub type Ints = SmallVec<[i64; 8]>;

/// The older table's rule: output 0 present, and no other output.
pub fn one_output(node: &NodeDesc) -> Result<(), String> {
    if node.outputs.first().is_none_or(Option::is_none) {
        return Err(format!("{} needs its output", node.op_type));
    }
    if node.outputs.len() != 1 {
        return Err(format!("{} needs exactly one output", node.op_type));
    }
    Ok(())
}

/// Fails past rank 8 (the kernels keep an index per axis on the stack).
pub fn up_to_rank_8(shape: &[usize], input: usize) -> Result<(), ShapeError> {
    if shape.len() > 8 {
        return Err(format!("input {input}: rank {}; Rivet runs this op up to rank 8", shape.len()).into());
    }
    Ok(())
}
