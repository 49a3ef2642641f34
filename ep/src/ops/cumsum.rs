//! CumSum: running sums along an axis (a constant or fed at Run), inclusive or exclusive,
//! forward or reversed; float32, float64, the integers (wrapping) and the halves (summed
//! in float32).

use std::sync::Arc;

use rivet_kernels::nn;
use rivet_kernels::typed::Number;

use super::halves::{computed, is_half, narrow, widen_all};
use super::int_input::{ints_input, ints_of, one_output, Ints};
use super::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use super::params::ReduceAxes;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, Data, DataMut, Storage};
use crate::graph::{normalize_axis, NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Debug)]
struct CumSum {
    axis: ReduceAxes,
    exclusive: bool,
    reverse: bool,
    /// float16 / bfloat16, summed in float32.
    half: bool,
}

pub fn cumsum(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 2)?;
    one_output(node)?;
    check_attrs(node, &["exclusive", "reverse"])?;
    let op = CumSum {
        axis: ints_input(node, 1, "axis")?,
        exclusive: int_attr(node, "exclusive", 0)? != 0,
        reverse: int_attr(node, "reverse", 0)? != 0,
        half: is_half(output_type(node, 0)),
    };
    let t = output_type(node, 0);
    if !(data::is_number(computed(t)) && input_type(node, 0) == t) {
        return Err(bad_types(node, "other element types"));
    }
    Ok(Arc::new(op))
}

impl CumSum {
    fn axis<'d>(&self, rank: usize, data: impl FnOnce() -> Result<Data<'d>, ShapeError>) -> Result<usize, ShapeError> {
        let a: Ints = ints_of(&self.axis, data)?;
        if a.len() != 1 {
            return Err(format!("CumSum's axis must be one value, got {a:?}").into());
        }
        Ok(normalize_axis(a[0], rank, false)?)
    }
}

impl Op for CumSum {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        self.axis(s.len(), || x.data(1))?;
        Ok(Shape::from_slice(s))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let a = self.axis(s.len(), || x.ins.get(1).copied().ok_or(ShapeError::NeedsData)).unwrap_or(0);
        let (outer, n, inner) = (s[..a].iter().product(), s[a], s[a + 1..].iter().product());
        let (exclusive, reverse) = (self.exclusive, self.reverse);
        fn ints<T: Storage + Number>(x: Data<'_>, y: &mut [T], run: impl Fn(&[T], &mut [T])) -> Result<(), String> {
            run(T::get(x).ok_or("element types differ from the plan's")?, y);
            Ok(())
        }
        macro_rules! int {
            ($y:expr) => {
                ints(x.ins[0], $y, |v, y| {
                    nn::cumsum(v, outer, n, inner, exclusive, reverse, Default::default(), |p, q| p.add(q), y)
                })
            };
        }
        if self.half {
            let (ins, y) = widen_all(&x.ins[..1], &mut x.scratch.f32, out.len());
            let Data::F32(v) = ins[0] else { return Err("element types differ from the plan's".into()) };
            nn::cumsum(v, outer, n, inner, exclusive, reverse, 0.0, |p, q| p + q, y);
            return narrow(y, out);
        }
        match (x.ins[0], out) {
            (Data::F32(v), DataMut::F32(y)) => nn::cumsum(v, outer, n, inner, exclusive, reverse, 0.0, |p, q| p + q, y),
            (Data::F64(v), DataMut::F64(y)) => nn::cumsum(v, outer, n, inner, exclusive, reverse, 0.0, |p, q| p + q, y),
            (_, DataMut::I8(y)) => int!(y)?,
            (_, DataMut::I16(y)) => int!(y)?,
            (_, DataMut::I32(y)) => int!(y)?,
            (_, DataMut::I64(y)) => int!(y)?,
            (_, DataMut::U8(y)) => int!(y)?,
            (_, DataMut::U16(y)) => int!(y)?,
            (_, DataMut::U32(y)) => int!(y)?,
            (_, DataMut::U64(y)) => int!(y)?,
            _ => return Err("element types differ from the plan's".into()),
        }
        Ok(())
    }
}
