//! Shape, Size and ConstantOfShape: a tensor's dims or element count as int64, and a
//! tensor of a given shape filled with one value.

use std::sync::Arc;

use super::int_input::{ints_input, ints_of, one_output};
use super::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use super::params::ReduceAxes;
use super::shape_rules::shape_range;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, DataMut};
use crate::graph::{dtype, AttrValue, NodeDesc, Shape};
use crate::node_attrs::int_attr;

/// Shape: the input's dims `start..end` (clamped, negative counting back) as int64.
#[derive(Debug)]
struct ShapeOf {
    start: i64,
    end: Option<i64>,
}

/// Size: the input's element count as an int64 scalar.
#[derive(Debug)]
struct SizeOf;

/// ConstantOfShape: the output (of the value's type) filled with the value, whose native
/// bytes are kept here.
#[derive(Debug)]
struct ConstantOfShape {
    shape: ReduceAxes,
    value: [u8; 8],
}

/// One input of any type, an int64 output.
fn claim_to_int64(node: &NodeDesc, attrs: &[&str]) -> Result<(), String> {
    check_inputs(node, 1, 1)?;
    one_output(node)?;
    check_attrs(node, attrs)?;
    if !(data::supported(input_type(node, 0)) && output_type(node, 0) == dtype::INT64) {
        return Err(bad_types(node, "other element types"));
    }
    Ok(())
}

pub fn shape(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    claim_to_int64(node, &["start", "end"])?;
    let end = match node.attr("end") {
        Some(AttrValue::Int(e)) => Some(*e),
        Some(_) => return Err("Shape end must be an int".into()),
        None => None,
    };
    Ok(Arc::new(ShapeOf { start: int_attr(node, "start", 0)?, end }))
}

pub fn size(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    claim_to_int64(node, &[])?;
    Ok(Arc::new(SizeOf))
}

pub fn constant_of_shape(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    one_output(node)?;
    check_attrs(node, &["value"])?;
    let mut value = [0u8; 8];
    match node.attr("value") {
        None => {}
        Some(AttrValue::Tensor(shape, buf)) if shape.iter().product::<usize>() == 1 => {
            if buf.elem_type() != output_type(node, 0) {
                return Err("ConstantOfShape's value and output types differ".into());
            }
            let bytes = buf.to_ne_bytes();
            value[..bytes.len()].copy_from_slice(&bytes);
        }
        Some(_) => return Err("ConstantOfShape's value must be a one-element tensor Rivet holds".into()),
    }
    let shape = ints_input(node, 0, "the shape")?;
    if !(input_type(node, 0) == dtype::INT64 && data::supported(output_type(node, 0))) {
        return Err(bad_types(node, "other element types"));
    }
    Ok(Arc::new(ConstantOfShape { shape, value }))
}

impl Op for ShapeOf {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (a, b) = shape_range(x.shapes[0].len(), self.start, self.end);
        Ok(Shape::from_slice(&[b - a]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let DataMut::I64(y) = out else { return Err("element types differ from the plan's".into()) };
        let s = x.shapes[0];
        let (a, b) = shape_range(s.len(), self.start, self.end);
        y.iter_mut().zip(&s[a..b]).for_each(|(o, &d)| *o = d as i64);
        Ok(())
    }
}

impl Op for SizeOf {
    fn shape(&self, _x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(Shape::new())
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let DataMut::I64(y) = out else { return Err("element types differ from the plan's".into()) };
        y[0] = x.shapes[0].iter().product::<usize>() as i64;
        Ok(())
    }
}

impl Op for ConstantOfShape {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let dims = ints_of(&self.shape, || x.data(0))?;
        if dims.iter().any(|&d| d < 0) || x.shapes[0].len() != 1 {
            return Err(format!("shape {dims:?} must be 1-D and non-negative").into());
        }
        Ok(dims.iter().map(|&d| d as usize).collect())
    }

    fn run(&self, _x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let value = self.value;
        macro_rules! fill {
            ($y:expr, $t:ty) => {{
                const N: usize = std::mem::size_of::<$t>();
                let v = <$t>::from_ne_bytes(value[..N].try_into().expect("N bytes"));
                $y.iter_mut().for_each(|o| *o = v);
            }};
        }
        match out {
            DataMut::F32(y) => fill!(y, f32),
            DataMut::F64(y) => fill!(y, f64),
            DataMut::I8(y) => fill!(y, i8),
            DataMut::I16(y) => fill!(y, i16),
            DataMut::I32(y) => fill!(y, i32),
            DataMut::I64(y) => fill!(y, i64),
            DataMut::U8(y)
            | DataMut::Bool(y)
            | DataMut::F8E4M3FN(y)
            | DataMut::F8E4M3FNUZ(y)
            | DataMut::F8E5M2(y)
            | DataMut::F8E5M2FNUZ(y)
            | DataMut::E8M0(y) => fill!(y, u8),
            DataMut::U16(y) | DataMut::F16(y) | DataMut::BF16(y) => fill!(y, u16),
            DataMut::U32(y) => fill!(y, u32),
            DataMut::U64(y) => fill!(y, u64),
            // The 4-bit value in the low half of its byte.
            DataMut::U4(y) => y.fill(rivet_kernels::nibbles::wrap_unsigned(i64::from(value[0]), 4)),
            DataMut::I4(y) => y.fill(rivet_kernels::nibbles::wrap_signed(i64::from(value[0]), 4)),
            DataMut::F4E2M1(y) => y.fill(value[0] & 0xf),
            DataMut::U2(y) => y.fill(rivet_kernels::nibbles::wrap_unsigned(i64::from(value[0]), 2)),
            DataMut::I2(y) => y.fill(rivet_kernels::nibbles::wrap_signed(i64::from(value[0]), 2)),
        }
        Ok(())
    }
}
