//! Expand: the input broadcast to a shape (a constant, or int64 data read at Run), for
//! any element type (float32 on the same kernel as the others).

use std::sync::Arc;

use rivet_kernels::Broadcast;
use smallvec::SmallVec;

use super::elementwise::up_to_rank_8;
use super::moves::{check_data_then_constants, check_same_type, ints};
use super::op::util::check_attrs;
use super::params::{Axes, ReduceAxes};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{by_storage, DataMut, Storage};
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::{const_i64, runtime_i64};

#[derive(Debug)]
struct Expand {
    shape: ReduceAxes,
}

pub fn expand(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_data_then_constants(node, 2, false)?;
    check_attrs(node, &[])?;
    let shape = if runtime_i64(node, 1) {
        ReduceAxes::AtRun
    } else {
        ReduceAxes::Const(Axes::new(&const_i64(node, 1, "the shape")?.unwrap_or_default())?)
    };
    check_same_type(node, &[0])?;
    Ok(Arc::new(Expand { shape }))
}

impl Op for Expand {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let read;
        let dims: &[i64] = match &self.shape {
            ReduceAxes::Const(a) => a.as_slice(),
            ReduceAxes::AtRun => {
                read = ints(x.data(1)?)?;
                &read
            }
        };
        if dims.iter().any(|&d| d < 0) {
            return Err(format!("Expand to {dims:?}").into());
        }
        let target: SmallVec<[usize; 8]> = dims.iter().map(|&d| d as usize).collect();
        let b = Broadcast::new(x.shapes[0], &target).map_err(|e| e.to_string())?;
        Ok(Shape::from_slice(b.out_shape()))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        up_to_rank_8(&x)?;
        by_storage!(out, broadcast(&x))
    }
}

fn broadcast<T: Storage>(x: &RunIn<'_, '_>, y: &mut [T]) -> Result<(), String> {
    let v = T::get(x.ins[0]).ok_or("element types differ from the plan's")?;
    rivet_kernels::nn::expand(v, x.shapes[0], x.out_shape, y);
    Ok(())
}
