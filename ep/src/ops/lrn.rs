//! LRN: local response normalization across the channels of X `[N, C, ...]`, float32
//! only (the halves between casts).

use std::sync::Arc;

use rivet_kernels::nn;

use super::claim;
use super::op::util::check_attrs;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{AttrValue, NodeDesc, Shape};
use crate::node_attrs::float_attr;

#[derive(Debug)]
struct Lrn {
    size: usize,
    alpha: f32,
    beta: f32,
    bias: f32,
}

pub fn lrn(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    claim::exact_inputs(node, 1)?;
    claim::outputs(node, false)?;
    check_attrs(node, &["alpha", "beta", "bias", "size"])?;
    let size = match node.attr("size") {
        Some(AttrValue::Int(s)) if *s >= 1 => *s as usize,
        _ => return Err("LRN needs a positive size".into()),
    };
    let op = Lrn {
        size,
        alpha: float_attr(node, "alpha", 1e-4)?,
        beta: float_attr(node, "beta", 0.75)?,
        bias: float_attr(node, "bias", 1.0)?,
    };
    claim::float32_types(node)?;
    Ok(Arc::new(op))
}

impl Op for Lrn {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        if x.shapes[0].len() < 2 {
            return Err("needs [N, C, ...]".into());
        }
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let (Data::F32(v), DataMut::F32(y)) = (x.ins[0], out) else {
            return Err("input and output element types differ from the plan's".into());
        };
        nn::lrn(v, s[0], s[1], s[2..].iter().product(), self.size, self.alpha, self.beta, self.bias, y);
        Ok(())
    }

    fn halves_in_f32(&self) -> bool {
        true
    }
}
