//! EyeLike: ones on diagonal `k` of a 2-D output shaped like the input, of any type.

use std::sync::Arc;

use super::int_input::one_output;
use super::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, DataMut};
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Debug)]
struct EyeLike {
    k: i64,
}

pub fn eye_like(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    one_output(node)?;
    check_attrs(node, &["dtype", "k"])?;
    let k = int_attr(node, "k", 0)?;
    if !(data::supported(input_type(node, 0)) && data::supported(output_type(node, 0))) {
        return Err(bad_types(node, "other element types"));
    }
    Ok(Arc::new(EyeLike { k }))
}

impl Op for EyeLike {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        if s.len() != 2 {
            return Err("EyeLike needs a 2-D input".into());
        }
        Ok(Shape::from_slice(s))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let k = self.k;
        let cols = x.out_shape.last().copied().unwrap_or(1);
        macro_rules! eye {
            ($y:expr, $one:expr) => {{
                $y.iter_mut().for_each(|v| *v = Default::default());
                for (r, row) in $y.chunks_mut(cols.max(1)).enumerate() {
                    let c = r as i64 + k;
                    if (0..cols as i64).contains(&c) {
                        row[c as usize] = $one;
                    }
                }
            }};
        }
        crate::data::with_one!(out, eye);
        Ok(())
    }
}
