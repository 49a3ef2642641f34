//! Range: `start`, `start + delta`, ... below `limit`; its length comes from the data.

use std::sync::Arc;

use rivet_kernels::typed::Number;

use super::int_input::one_output;
use super::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut, Storage};
use crate::graph::{dtype, NodeDesc, Shape};

#[derive(Debug)]
struct Range;

pub fn range(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 3, 3)?;
    one_output(node)?;
    check_attrs(node, &[])?;
    let t = output_type(node, 0);
    let ok = matches!(t, dtype::FLOAT | dtype::DOUBLE | dtype::INT16 | dtype::INT32 | dtype::INT64)
        && (0..3).all(|k| input_type(node, k) == t);
    if !ok {
        return Err(bad_types(node, "other element types"));
    }
    Ok(Arc::new(Range))
}

impl Op for Range {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        // A scalar or a one-element vector, as ORT's CPU EP takes them.
        if x.shapes[..3].iter().any(|s| !(s.is_empty() || s[..] == [1])) {
            return Err("start, limit and delta must be scalars (or of shape [1])".into());
        }
        let at = |k: usize| -> Result<f64, ShapeError> {
            Ok(match x.data(k)? {
                Data::F32(v) => v[0] as f64,
                Data::F64(v) => v[0],
                Data::I16(v) => v[0] as f64,
                Data::I32(v) => v[0] as f64,
                Data::I64(v) => v[0] as f64,
                _ => f64::NAN,
            })
        };
        let (start, limit, delta) = (at(0)?, at(1)?, at(2)?);
        if delta == 0.0 || !(start.is_finite() && limit.is_finite() && delta.is_finite()) {
            return Err(format!("Range({start}, {limit}, {delta}) has no length").into());
        }
        let n = ((limit - start) / delta).ceil().max(0.0);
        if n > (1u64 << 40) as f64 {
            return Err(format!("Range({start}, {limit}, {delta}) is too long").into());
        }
        Ok(Shape::from_slice(&[n as usize]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        fn fill<T: Storage + Number>(ins: &[Data<'_>], y: &mut [T]) -> Result<(), String> {
            let at = |k: usize| T::get(ins[k]).and_then(|v| v.first().copied()).ok_or("element types differ");
            // Accumulated, as ORT does: value += delta (wrapping for integers).
            let (mut v, delta) = (at(0)?, at(2)?);
            for o in y.iter_mut() {
                *o = v;
                v = Number::add(v, delta);
            }
            Ok(())
        }
        match out {
            DataMut::F32(y) => fill(x.ins, y),
            DataMut::F64(y) => fill(x.ins, y),
            DataMut::I16(y) => fill(x.ins, y),
            DataMut::I32(y) => fill(x.ins, y),
            DataMut::I64(y) => fill(x.ins, y),
            _ => Err("element types differ from the plan's".into()),
        }
    }
}
