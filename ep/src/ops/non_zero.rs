//! NonZero: the int64 indices `[rank, count]` of the non-zero elements of any tensor; the
//! count comes from the data.

use std::sync::Arc;

use super::int_input::{one_output, up_to_rank_8};
use super::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};

#[derive(Debug)]
struct NonZero;

pub fn non_zero(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    one_output(node)?;
    check_attrs(node, &[])?;
    if !(data::supported(input_type(node, 0)) && output_type(node, 0) == dtype::INT64) {
        return Err(bad_types(node, "other element types"));
    }
    Ok(Arc::new(NonZero))
}

/// How many elements of a tensor are not zero (for float16 / bfloat16, -0 is zero).
pub fn count_nonzero(d: Data<'_>) -> usize {
    match d {
        Data::F32(v) => v.iter().filter(|&&x| x != 0.0).count(),
        Data::F64(v) => v.iter().filter(|&&x| x != 0.0).count(),
        Data::I8(v) | Data::I4(v) | Data::I2(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::I16(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::I32(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::I64(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::U8(v) | Data::Bool(v) | Data::U4(v) | Data::U2(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::F4E2M1(v) => v.iter().filter(|&&x| x & 0x7 != 0).count(),
        // No zero among its values.
        Data::E8M0(v) => v.len(),
        Data::U16(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::U32(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::U64(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::F16(v) | Data::BF16(v) => v.iter().filter(|&&x| x & 0x7fff != 0).count(),
        Data::F8E4M3FN(v) | Data::F8E5M2(v) => v.iter().filter(|&&x| x & 0x7f != 0).count(),
        Data::F8E4M3FNUZ(v) | Data::F8E5M2FNUZ(v) => v.iter().filter(|&&x| x != 0).count(),
    }
}

impl Op for NonZero {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        up_to_rank_8(s, 0)?;
        Ok(Shape::from_slice(&[s.len().max(1), count_nonzero(x.data(0)?)]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let DataMut::I64(y) = out else { return Err("element types differ from the plan's".into()) };
        let s = x.shapes[0];
        let count = y.len() / s.len().max(1);
        let mut strides = [1usize; 8];
        for a in (0..s.len().saturating_sub(1)).rev() {
            strides[a] = strides[a + 1] * s[a + 1];
        }
        let total: usize = s.iter().product();
        let mut found = 0;
        for k in 0..total {
            let nonzero = match x.ins[0] {
                Data::F32(v) => v[k] != 0.0,
                Data::F64(v) => v[k] != 0.0,
                Data::I8(v) | Data::I4(v) | Data::I2(v) => v[k] != 0,
                Data::I16(v) => v[k] != 0,
                Data::I32(v) => v[k] != 0,
                Data::I64(v) => v[k] != 0,
                Data::U8(v) | Data::Bool(v) | Data::U4(v) | Data::U2(v) => v[k] != 0,
                Data::F4E2M1(v) => v[k] & 0x7 != 0,
                Data::E8M0(_) => true,
                Data::U16(v) => v[k] != 0,
                Data::U32(v) => v[k] != 0,
                Data::U64(v) => v[k] != 0,
                Data::F16(v) | Data::BF16(v) => v[k] & 0x7fff != 0,
                Data::F8E4M3FN(v) | Data::F8E5M2(v) => v[k] & 0x7f != 0,
                Data::F8E4M3FNUZ(v) | Data::F8E5M2FNUZ(v) => v[k] != 0,
            };
            if nonzero {
                // A scalar reports as one axis of index 0.
                for a in 0..s.len().max(1) {
                    y[a * count + found] = if s.is_empty() { 0 } else { ((k / strides[a]) % s[a]) as i64 };
                }
                found += 1;
            }
        }
        Ok(())
    }
}
