//! Trilu: the upper or lower triangle (from diagonal `k`) of the last two axes, any type;
//! `k` a constant or fed at Run.

use std::sync::Arc;

use rivet_kernels::nn;

use super::int_input::{ints_input, ints_of, one_output};
use super::op::util::{bad_types, check_attrs, check_inputs, input_type, move_any, output_type, Move};
use super::params::ReduceAxes;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, DataMut};
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Debug)]
struct Trilu {
    k: ReduceAxes,
    upper: bool,
}

pub fn trilu(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 2)?;
    one_output(node)?;
    check_attrs(node, &["upper"])?;
    let op = Trilu { k: ints_input(node, 1, "k")?, upper: int_attr(node, "upper", 1)? != 0 };
    let t = output_type(node, 0);
    if !(data::supported(t) && input_type(node, 0) == t) {
        return Err(bad_types(node, "one element type for data and output, any but strings and sub-byte types"));
    }
    Ok(Arc::new(op))
}

impl Op for Trilu {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        if s.len() < 2 || ints_of(&self.k, || x.data(1))?.len() > 1 {
            return Err("Trilu needs a matrix and at most one k".into());
        }
        Ok(Shape::from_slice(s))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let k = ints_of(&self.k, || x.ins.get(1).copied().ok_or(ShapeError::NeedsData));
        let k = k.ok().and_then(|v| v.first().copied()).unwrap_or(0);
        move_any(x.ins[0], out, &Triangle { rows: s[s.len() - 2], cols: s[s.len() - 1], k, upper: self.upper })
    }
}

struct Triangle {
    rows: usize,
    cols: usize,
    k: i64,
    upper: bool,
}

impl Move for Triangle {
    fn apply<T: Copy + Default + PartialEq + Send + Sync>(&self, x: &[T], y: &mut [T]) {
        nn::trilu(x, self.rows, self.cols, self.k, self.upper, y);
    }
}
