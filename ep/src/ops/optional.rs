//! OptionalGetElement on a plain tensor (opset 18 accepts one and returns it unchanged).
//! Optional-typed values are not tensors: a node reading or producing one is never
//! claimed (Rivet holds tensors only).

use std::sync::Arc;

use super::op::util::{bad_types, check_attrs, check_inputs, input_type, move_any, output_type, Move};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, DataMut};
use crate::graph::{NodeDesc, Shape};

#[derive(Debug)]
struct GetElement;

pub fn optional_get_element(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &[])?;
    check_inputs(node, 1, 1)?;
    let t = input_type(node, 0);
    // An optional (or sequence) input reads as element type 0: not a tensor Rivet holds.
    if !data::supported(t) || output_type(node, 0) != t {
        return Err(bad_types(node, "a plain tensor of any element type (optional and sequence values are not held)"));
    }
    Ok(Arc::new(GetElement))
}

impl Op for GetElement {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        move_any(x.ins[0], out, &Same)
    }
}

struct Same;

impl Move for Same {
    fn apply<T: Copy + Default + PartialEq + Send + Sync>(&self, x: &[T], y: &mut [T]) {
        y.copy_from_slice(x);
    }
}
