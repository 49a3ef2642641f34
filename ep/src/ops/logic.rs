//! Boolean logic: And, Or, Xor (broadcast) and Not, on bool tensors.

use std::sync::Arc;

use rivet_kernels::typed::{map2, Logic};

use super::elementwise::{broadcast_shape, check_arity, other_types, up_to_rank_8};
use super::op::util::{check_attrs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{dtype, Data, DataMut};
use crate::graph::{NodeDesc, Shape};

/// And, Or or Xor; `None`: Not.
#[derive(Debug)]
struct LogicOp(Option<Logic>);

pub fn and(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, Some(Logic::And))
}

pub fn or(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, Some(Logic::Or))
}

pub fn xor(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, Some(Logic::Xor))
}

pub fn not(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, None)
}

fn compile(node: &NodeDesc, op: Option<Logic>) -> Result<Arc<dyn Op>, String> {
    let n = if op.is_some() { 2 } else { 1 };
    check_arity(node, n)?;
    check_attrs(node, &[])?;
    if !((0..n).all(|k| input_type(node, k) == dtype::BOOL) && output_type(node, 0) == dtype::BOOL) {
        return Err(other_types(node));
    }
    Ok(Arc::new(LogicOp(op)))
}

const MISMATCH: &str = "element types differ from the plan's";

impl Op for LogicOp {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        broadcast_shape(x.shapes)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        match self.0 {
            Some(op) => {
                up_to_rank_8(&x)?;
                let (DataMut::Bool(y), Data::Bool(a), Data::Bool(b)) = (out, x.ins[0], x.ins[1]) else {
                    return Err(MISMATCH.into());
                };
                map2(a, x.shapes[0], b, x.shapes[1], x.out_shape, y, |a, b| op.apply(a, b));
            }
            None => {
                let (DataMut::Bool(y), Data::Bool(a)) = (out, x.ins[0]) else { return Err(MISMATCH.into()) };
                y.iter_mut().zip(a).for_each(|(o, &v)| *o = (v == 0) as u8);
            }
        }
        Ok(())
    }
}
