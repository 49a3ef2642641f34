//! Activations with a parameter: PRelu (`x < 0 ? slope * x : x`, the slope broadcast
//! one way to x's shape), Swish and com.microsoft QuickGelu (`x * sigmoid(alpha * x)`), on
//! float32.

use std::sync::Arc;

use smallvec::SmallVec;

use super::op::util::{check_attrs, check_inputs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::DataMut;
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::float_attr;

#[derive(Debug)]
struct PRelu;

pub fn prelu(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 2, 2)?;
    check_attrs(node, &[])?;
    if (0..2).any(|k| input_type(node, k) != dtype::FLOAT) || output_type(node, 0) != dtype::FLOAT {
        return Err(super::op::util::bad_types(node, "float32"));
    }
    Ok(Arc::new(PRelu))
}

/// The slope's strides over x's axes (0 where it broadcasts), or why it cannot.
fn slope_strides(x: &[usize], s: &[usize]) -> Result<SmallVec<[usize; 8]>, String> {
    if s.len() > x.len() {
        return Err(format!("slope {s:?} has a higher rank than x {x:?}"));
    }
    let lead = x.len() - s.len();
    let mut strides: SmallVec<[usize; 8]> = SmallVec::from_elem(0, x.len());
    let mut acc = 1;
    for a in (0..s.len()).rev() {
        let (d, xd) = (s[a], x[lead + a]);
        if d != xd && d != 1 {
            return Err(format!("slope {s:?} does not broadcast to x {x:?}"));
        }
        strides[lead + a] = if d == 1 { 0 } else { acc };
        acc *= d;
    }
    Ok(strides)
}

impl Op for PRelu {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        slope_strides(x.shapes[0], x.shapes[1])?;
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (xs, ss) = (x.shapes[0], x.shapes[1]);
        let strides = slope_strides(xs, ss)?;
        let (Some(v), Some(slope), Some(y)) = (x.ins[0].f32(), x.ins[1].f32(), out.f32()) else {
            return Err("PRelu runs float32".into());
        };
        let r = xs.len();
        if r == 0 || slope.len() == 1 {
            let a = slope.first().copied().unwrap_or(0.0);
            y.iter_mut().zip(v).for_each(|(o, &t)| *o = if t < 0.0 { a * t } else { t });
            return Ok(());
        }
        // Row by row of the last axis, an odometer over the others for the slope offset.
        let row = xs[r - 1];
        if row == 0 {
            return Ok(());
        }
        let mut idx: SmallVec<[usize; 8]> = SmallVec::from_elem(0, r);
        for (ys, vs) in y.chunks_exact_mut(row).zip(v.chunks_exact(row)) {
            let base: usize = (0..r - 1).map(|a| idx[a] * strides[a]).sum();
            let step = strides[r - 1];
            for (k, (o, &t)) in ys.iter_mut().zip(vs).enumerate() {
                *o = if t < 0.0 { slope[base + k * step] * t } else { t };
            }
            for a in (0..r - 1).rev() {
                idx[a] += 1;
                if idx[a] < xs[a] {
                    break;
                }
                idx[a] = 0;
            }
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Swish {
    alpha: f32,
}

pub fn swish(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    check_attrs(node, &["alpha"])?;
    if input_type(node, 0) != dtype::FLOAT || output_type(node, 0) != dtype::FLOAT {
        return Err(super::op::util::bad_types(node, "float32"));
    }
    Ok(Arc::new(Swish { alpha: float_attr(node, "alpha", 1.0)? }))
}

/// com.microsoft QuickGelu: `x * sigmoid(alpha * x)`, alpha 1.702 unless given (the
/// sigmoid approximation of Gelu that CLIP-style models use): Swish with another default.
pub fn quick_gelu(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    check_attrs(node, &["alpha"])?;
    if input_type(node, 0) != dtype::FLOAT || output_type(node, 0) != dtype::FLOAT {
        return Err(super::op::util::bad_types(node, "float32"));
    }
    Ok(Arc::new(Swish { alpha: float_attr(node, "alpha", 1.702)? }))
}

impl Op for Swish {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (Some(v), Some(y)) = (x.ins[0].f32(), out.f32()) else { return Err("Swish runs float32".into()) };
        // Through Rivet's vectorized Sigmoid.
        let a = self.alpha;
        y.iter_mut().zip(v).for_each(|(o, &t)| *o = a * t);
        rivet_kernels::UnaryOp::Sigmoid.apply_inplace(y);
        y.iter_mut().zip(v).for_each(|(o, &t)| *o *= t);
        Ok(())
    }
}
