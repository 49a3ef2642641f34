//! ArgMax and ArgMin: int64 indices of the largest (smallest) element along an axis, the
//! first or (`select_last_index`) the last on ties; numbers, and the halves in float32.

use std::sync::Arc;

use rivet_kernels::typed::arg_reduce;

use super::halves::{computed, is_half, widen_all};
use super::int_input::one_output;
use super::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, by_number, Data, DataMut, Storage};
use crate::graph::{dtype, normalize_axis, NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Debug)]
struct ArgReduce {
    axis: i64,
    keepdims: bool,
    max: bool,
    last: bool,
    /// float16 / bfloat16 input, compared in float32.
    half: bool,
}

pub fn arg_max(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, true)
}

pub fn arg_min(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, false)
}

fn compile(node: &NodeDesc, max: bool) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    one_output(node)?;
    check_attrs(node, &["axis", "keepdims", "select_last_index"])?;
    let op = ArgReduce {
        axis: int_attr(node, "axis", 0)?,
        keepdims: int_attr(node, "keepdims", 1)? != 0,
        max,
        last: int_attr(node, "select_last_index", 0)? != 0,
        half: is_half(input_type(node, 0)),
    };
    if !(data::is_number(computed(input_type(node, 0))) && output_type(node, 0) == dtype::INT64) {
        return Err(bad_types(node, "other element types"));
    }
    Ok(Arc::new(op))
}

impl Op for ArgReduce {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        if s.is_empty() {
            return Err("ArgMax / ArgMin need rank 1 or more".into());
        }
        let a = normalize_axis(self.axis, s.len(), false)?;
        if s[a] == 0 {
            return Err("ArgMax / ArgMin over an empty axis".into());
        }
        let mut out = Shape::from_slice(s);
        if self.keepdims {
            out[a] = 1;
        } else {
            out.remove(a);
        }
        Ok(out)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let DataMut::I64(y) = out else { return Err("element types differ from the plan's".into()) };
        let s = x.shapes[0];
        let a = normalize_axis(self.axis, s.len(), false).unwrap_or(0);
        let (outer, inner) = (s[..a].iter().product(), s[a + 1..].iter().product());
        let input = if self.half { widen_all(&x.ins[..1], &mut x.scratch.f32, 0).0[0] } else { x.ins[0] };
        fn arg<T: Storage + PartialOrd>(
            op: &ArgReduce,
            x: Data<'_>,
            (outer, n, inner): (usize, usize, usize),
            y: &mut [i64],
        ) -> Result<(), String> {
            arg_reduce(T::get(x).ok_or("element types differ from the plan's")?, outer, n, inner, op.max, op.last, y);
            Ok(())
        }
        by_number!(input, Err("element types differ from the plan's".into()), arg(self, input, (outer, s[a], inner), y))
    }
}
