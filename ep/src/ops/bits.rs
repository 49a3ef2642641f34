//! The bitwise ops on integers: BitShift, BitwiseAnd / Or / Xor (broadcast) and
//! BitwiseNot.

use std::sync::Arc;

use rivet_kernels::typed::{map2, BitOp, Bits};

use super::elementwise::{broadcast_shape, check_arity, other_types, up_to_rank_8};
use super::op::util::{check_attrs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, dtype, DataMut, Storage};
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::string_attr;

/// A binary bitwise op; `None`: BitwiseNot.
#[derive(Debug)]
struct BitsOp(Option<BitOp>);

pub fn bit_shift(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_arity(node, 2)?;
    check_attrs(node, &["direction"])?;
    let op = match string_attr(node, "direction", "")? {
        "LEFT" => BitOp::ShiftLeft,
        "RIGHT" => BitOp::ShiftRight,
        other => return Err(format!("BitShift direction '{other}' is not LEFT or RIGHT")),
    };
    compile(node, Some(op))
}

pub fn bitwise_and(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    binary(node, BitOp::And)
}

pub fn bitwise_or(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    binary(node, BitOp::Or)
}

pub fn bitwise_xor(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    binary(node, BitOp::Xor)
}

pub fn bitwise_not(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_arity(node, 1)?;
    check_attrs(node, &[])?;
    compile(node, None)
}

fn binary(node: &NodeDesc, op: BitOp) -> Result<Arc<dyn Op>, String> {
    check_arity(node, 2)?;
    check_attrs(node, &[])?;
    compile(node, Some(op))
}

fn compile(node: &NodeDesc, op: Option<BitOp>) -> Result<Arc<dyn Op>, String> {
    let out = output_type(node, 0);
    let int = data::is_number(out) && !matches!(out, dtype::FLOAT | dtype::DOUBLE);
    let n = if op.is_some() { 2 } else { 1 };
    if !(int && (0..n).all(|k| input_type(node, k) == out)) {
        return Err(other_types(node));
    }
    Ok(Arc::new(BitsOp(op)))
}

impl Op for BitsOp {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        broadcast_shape(x.shapes)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        match self.0 {
            Some(op) => {
                up_to_rank_8(&x)?;
                by_int!(out, bits(op, &x))
            }
            None => by_int!(out, bit_not(&x)),
        }
    }
}

/// Calls `$f::<T>(args.., y)` with the output's integer type.
macro_rules! by_int {
    ($dst:expr, $f:ident($($arg:expr),*)) => {
        match $dst {
            DataMut::I8(y) => $f::<i8>($($arg,)* y),
            DataMut::I16(y) => $f::<i16>($($arg,)* y),
            DataMut::I32(y) => $f::<i32>($($arg,)* y),
            DataMut::I64(y) => $f::<i64>($($arg,)* y),
            DataMut::U8(y) => $f::<u8>($($arg,)* y),
            DataMut::U16(y) => $f::<u16>($($arg,)* y),
            DataMut::U32(y) => $f::<u32>($($arg,)* y),
            DataMut::U64(y) => $f::<u64>($($arg,)* y),
            _ => Err("integer step with another output type".into()),
        }
    };
}
use by_int;

const MISMATCH: &str = "element types differ from the plan's";

fn bits<T: Storage + Bits>(op: BitOp, x: &RunIn<'_, '_>, y: &mut [T]) -> Result<(), String> {
    let (a, b) = (T::get(x.ins[0]).ok_or(MISMATCH)?, T::get(x.ins[1]).ok_or(MISMATCH)?);
    map2(a, x.shapes[0], b, x.shapes[1], x.out_shape, y, |a, b| a.bit(op, b));
    Ok(())
}

fn bit_not<T: Storage + Bits>(x: &RunIn<'_, '_>, y: &mut [T]) -> Result<(), String> {
    y.iter_mut().zip(T::get(x.ins[0]).ok_or(MISMATCH)?).for_each(|(o, &v)| *o = v.not());
    Ok(())
}
