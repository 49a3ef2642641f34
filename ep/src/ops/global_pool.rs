//! GlobalAveragePool and GlobalMaxPool: the mean or the maximum of each [N, C] plane,
//! on float32 of any rank from 2 (the spatial axes become 1).

use std::sync::Arc;

use rivet_kernels::nn;

use super::claim::{exact_inputs, float32_types, outputs};
use super::op::util::check_attrs;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::DataMut;
use crate::graph::{NodeDesc, Shape};

#[derive(Debug)]
struct GlobalPool {
    max: bool,
}

pub fn global_average_pool(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, false)
}

pub fn global_max_pool(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, true)
}

fn compile(node: &NodeDesc, max: bool) -> Result<Arc<dyn Op>, String> {
    exact_inputs(node, 1)?;
    outputs(node, false)?;
    check_attrs(node, &[])?;
    float32_types(node)?;
    Ok(Arc::new(GlobalPool { max }))
}

impl Op for GlobalPool {
    fn halves_in_f32(&self) -> bool {
        true
    }

    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let x = x.shapes[0];
        if x.len() < 2 {
            return Err("needs [N, C, ...]".into());
        }
        let mut s = Shape::from_slice(x);
        s[2..].iter_mut().for_each(|d| *d = 1);
        Ok(s)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (Some(input), Some(y)) = (x.ins[0].f32(), out.f32()) else {
            return Err("element types differ from the plan's".into());
        };
        let s = x.shapes[0];
        let plane: usize = s[2..].iter().product();
        if plane == 0 && !y.is_empty() {
            // No element to take the mean or the maximum of (ORT refuses it too).
            return Err(format!("input 0: an empty spatial extent {s:?}"));
        }
        nn::global_pool(input, s[0] * s[1], plane, self.max, y);
        Ok(())
    }
}
