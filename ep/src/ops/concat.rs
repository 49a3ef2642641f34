//! Concat: the inputs joined along `axis`, for any element type (float32 on the same
//! kernel as the others).

use std::sync::Arc;

use smallvec::SmallVec;

use super::moves::check_same_type;
use super::op::util::check_attrs;
use super::shape_rules::{concatenated, normalize_axis};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{by_storage, DataMut, Storage};
use crate::graph::{AttrValue, NodeDesc, Shape};
use crate::parallel::{CHUNK_LEN, PARALLEL_MIN_LEN};
use rivet_kernels::nn::concat_range;

#[derive(Debug)]
struct Concat {
    axis: i64,
}

pub fn concat(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    let n = node.inputs.len();
    if node.inputs.iter().any(Option::is_none) || n < 1 {
        return Err(format!("{} has {n} inputs", node.op_type));
    }
    if node.outputs.first().is_none_or(Option::is_none) {
        return Err(format!("{} needs its output", node.op_type));
    }
    if node.outputs.len() != 1 {
        return Err(format!("{} needs exactly one output", node.op_type));
    }
    check_attrs(node, &["axis"])?;
    let axis = match node.attr("axis") {
        Some(AttrValue::Int(axis)) => *axis,
        _ => return Err("Concat needs an int axis".into()),
    };
    let data: SmallVec<[usize; 16]> = (0..n).collect();
    check_same_type(node, &data)?;
    Ok(Arc::new(Concat { axis }))
}

impl Op for Concat {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(concatenated(x.shapes, self.axis)?)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        if let Some(y) = out.f32().filter(|y| y.len() >= PARALLEL_MIN_LEN) {
            // A large float32 output: copied in chunks over the pool.
            let (parts, widths) = pieces::<f32>(self.axis, &x)?;
            x.par.for_each_chunk(y, CHUNK_LEN, &|start, chunk| concat_range(&parts, &widths, start, chunk));
            return Ok(());
        }
        by_storage!(out, join(self.axis, &x))
    }
}

/// The inputs' data (sixteen inline, as the float32 path's inputs were: no heap for a
/// Run) and each one's elements per row of the axis.
type Pieces<'d, T> = (SmallVec<[&'d [T]; 16]>, SmallVec<[usize; 16]>);

fn pieces<'d, T: Storage>(axis: i64, x: &RunIn<'_, 'd>) -> Result<Pieces<'d, T>, String> {
    let a = normalize_axis(axis, x.shapes[0].len(), false).unwrap_or(0);
    let mut parts: SmallVec<[&[T]; 16]> = SmallVec::new();
    for &d in x.ins {
        parts.push(T::get(d).ok_or("element types differ from the plan's")?);
    }
    Ok((parts, x.shapes.iter().map(|s| s[a..].iter().product()).collect()))
}

fn join<T: Storage>(axis: i64, x: &RunIn<'_, '_>, y: &mut [T]) -> Result<(), String> {
    let (parts, widths) = pieces::<T>(axis, x)?;
    concat_range(&parts, &widths, 0, y);
    Ok(())
}
