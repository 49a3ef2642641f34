//! IsNaN and IsInf: which elements of a float tensor (float32, float64 or a half type)
//! are NaN, or infinite (of the signs IsInf's attributes select), as bool.

use std::sync::Arc;

use rivet_kernels::typed::{bf16_to_f32, f16_to_f32};

use super::elementwise::{check_arity, other_types};
use super::op::util::{check_attrs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{dtype, Data, DataMut};
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Debug)]
enum FloatClass {
    IsNaN,
    IsInf { negative: bool, positive: bool },
}

pub fn is_nan(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_arity(node, 1)?;
    check_attrs(node, &[])?;
    compile(node, FloatClass::IsNaN)
}

pub fn is_inf(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_arity(node, 1)?;
    check_attrs(node, &["detect_negative", "detect_positive"])?;
    let negative = int_attr(node, "detect_negative", 1)? != 0;
    let positive = int_attr(node, "detect_positive", 1)? != 0;
    compile(node, FloatClass::IsInf { negative, positive })
}

fn compile(node: &NodeDesc, class: FloatClass) -> Result<Arc<dyn Op>, String> {
    let float = matches!(input_type(node, 0), dtype::FLOAT | dtype::DOUBLE | dtype::FLOAT16 | dtype::BFLOAT16);
    if !(float && output_type(node, 0) == dtype::BOOL) {
        return Err(other_types(node));
    }
    Ok(Arc::new(class))
}

impl Op for FloatClass {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let DataMut::Bool(y) = out else { return Err("element types differ from the plan's".into()) };
        let test = |v: f64| match *self {
            FloatClass::IsInf { negative, positive } => {
                (v == f64::INFINITY && positive) || (v == f64::NEG_INFINITY && negative)
            }
            FloatClass::IsNaN => v.is_nan(),
        };
        match x.ins[0] {
            Data::F32(x) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = test(v as f64) as u8),
            Data::F64(x) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = test(v) as u8),
            Data::F16(x) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = test(f16_to_f32(v) as f64) as u8),
            Data::BF16(x) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = test(bf16_to_f32(v) as f64) as u8),
            _ => return Err("element types differ from the plan's".into()),
        }
        Ok(())
    }
}
