//! The comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual): two inputs of one
//! numeric type (or bool for Equal), broadcast, to a bool output. float16 and bfloat16
//! inputs are widened to float32 first (exactly), and compared there.

use std::sync::Arc;

use rivet_kernels::typed::{bf16_to_f32, f16_to_f32, map2, Compare};

use super::elementwise::{broadcast_shape, check_arity, up_to_rank_8};
use super::op::util::{bad_types, check_attrs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, by_number, dtype, Data, DataMut, Storage};
use crate::graph::{NodeDesc, Shape};

#[derive(Debug)]
struct CompareOp {
    op: Compare,
    /// float16 or bfloat16: inputs of this type are widened to float32 at Run.
    half: Option<i32>,
}

pub fn equal(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, Compare::Equal)
}

pub fn less(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, Compare::Less)
}

pub fn less_or_equal(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, Compare::LessOrEqual)
}

pub fn greater(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, Compare::Greater)
}

pub fn greater_or_equal(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, Compare::GreaterOrEqual)
}

fn types_ok(op: Compare, t0: i32, t1: i32, out: i32) -> bool {
    let bool_ok = op == Compare::Equal && t0 == dtype::BOOL;
    (data::is_number(t0) || bool_ok) && t0 == t1 && out == dtype::BOOL
}

fn compile(node: &NodeDesc, op: Compare) -> Result<Arc<dyn Op>, String> {
    check_arity(node, 2)?;
    check_attrs(node, &[])?;
    let (t0, t1, out) = (input_type(node, 0), input_type(node, 1), output_type(node, 0));
    if types_ok(op, t0, t1, out) {
        return Ok(Arc::new(CompareOp { op, half: None }));
    }
    let why = bad_types(node, "two inputs of one numeric type (or bool for Equal) and a bool output");
    // Exact in float32: a half type (the first one the output or the inputs have) is
    // compared as float32.
    let half = [out, t0, t1].into_iter().find(|t| matches!(*t, dtype::FLOAT16 | dtype::BFLOAT16)).ok_or(why.clone())?;
    let wide = |t: i32| if t == half { dtype::FLOAT } else { t };
    if !types_ok(op, wide(t0), wide(t1), wide(out)) {
        return Err(why);
    }
    Ok(Arc::new(CompareOp { op, half: Some(half) }))
}

impl Op for CompareOp {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        broadcast_shape(x.shapes)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        up_to_rank_8(&x)?;
        let DataMut::Bool(y) = out else { return Err(MISMATCH.into()) };
        let (sa, sb, so) = (x.shapes[0], x.shapes[1], x.out_shape);
        let op = self.op;
        if self.half.is_none() {
            return by_number!(x.ins[0], compare::<u8>(op, x.ins, sa, sb, so, y), compare(op, x.ins, sa, sb, so, y));
        }
        // The half inputs widened into the scratch (grown once, then reused).
        let (n0, n1) = (x.ins[0].len(), x.ins[1].len());
        let scratch = &mut x.scratch.f32;
        if scratch.len() < n0 + n1 {
            scratch.resize(n0 + n1, 0.0);
        }
        let (wa, wb) = scratch.split_at_mut(n0);
        let (a, b) = (widen(x.ins[0], wa)?, widen(x.ins[1], &mut wb[..n1])?);
        map2(a, sa, b, sb, so, y, |a, b| op.apply(a, b));
        Ok(())
    }
}

const MISMATCH: &str = "element types differ from the plan's";

fn compare<T: Storage + PartialOrd>(
    op: Compare,
    ins: &[Data<'_>],
    sa: &[usize],
    sb: &[usize],
    so: &[usize],
    y: &mut [u8],
) -> Result<(), String> {
    let (a, b) = (T::get(ins[0]).ok_or(MISMATCH)?, T::get(ins[1]).ok_or(MISMATCH)?);
    map2(a, sa, b, sb, so, y, |a, b| op.apply(a, b));
    Ok(())
}

/// A float32 input as it is, or a half one widened into `buf`.
fn widen<'a>(d: Data<'a>, buf: &'a mut [f32]) -> Result<&'a [f32], String> {
    match d {
        Data::F32(v) => Ok(v),
        Data::F16(v) => {
            buf.iter_mut().zip(v).for_each(|(o, &h)| *o = f16_to_f32(h));
            Ok(buf)
        }
        Data::BF16(v) => {
            buf.iter_mut().zip(v).for_each(|(o, &h)| *o = bf16_to_f32(h));
            Ok(buf)
        }
        _ => Err(MISMATCH.into()),
    }
}
