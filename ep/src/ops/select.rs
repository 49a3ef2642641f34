//! Where: `cond ? x : y`, all three broadcast, for values of any element type.

use std::sync::Arc;

use rivet_kernels::typed::map3;

use super::elementwise::{broadcast_shape, check_one_output, other_types, up_to_rank_8};
use super::op::util::{check_attrs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, by_storage, dtype, Data, DataMut, Storage};
use crate::graph::{NodeDesc, Shape};

#[derive(Debug)]
struct Where;

pub fn where_op(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    if node.inputs.len() != 3 || node.inputs.iter().any(Option::is_none) {
        return Err(format!("{} needs 3 to 3 inputs", node.op_type));
    }
    check_one_output(node)?;
    check_attrs(node, &[])?;
    let out = output_type(node, 0);
    let ok = input_type(node, 0) == dtype::BOOL
        && data::supported(out)
        && input_type(node, 1) == out
        && input_type(node, 2) == out;
    if !ok {
        return Err(other_types(node));
    }
    Ok(Arc::new(Where))
}

const MISMATCH: &str = "element types differ from the plan's";

impl Op for Where {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        broadcast_shape(x.shapes)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        up_to_rank_8(&x)?;
        by_storage!(out, select(&x))
    }
}

fn select<T: Storage>(x: &RunIn<'_, '_>, y: &mut [T]) -> Result<(), String> {
    let Data::Bool(c) = x.ins[0] else { return Err(MISMATCH.into()) };
    let (a, b) = (T::get(x.ins[1]).ok_or(MISMATCH)?, T::get(x.ins[2]).ok_or(MISMATCH)?);
    let s = x.shapes;
    map3(c, s[0], a, s[1], b, s[2], x.out_shape, y, |c, a, b| if c != 0 { a } else { b });
    Ok(())
}
