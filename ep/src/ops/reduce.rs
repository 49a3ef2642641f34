//! The reductions (ReduceSum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp,
//! SumSquare) over the axes of an attribute, a constant, or int64 data read at Run:
//! float32 on the vectorised kernel, float64 in f64, integers exactly (L2 and the logs
//! through f64), Max / Min on bool, and the half types in float32 between conversions.

use std::sync::Arc;

use rivet_kernels::nn::ReduceOp;

use super::moves::{bad_types_of, check_data_then_constants, ints, types_of};
use super::op::util::check_attrs;
use super::params::{Axes, ReduceAxes};
use super::reduce_typed::{reduce_f64, reduce_ints, Work};
use super::shape_rules::reduced_axes;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, by_number, dtype, Data, DataMut};
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::{const_i64, int_attr, ints_attr, runtime_i64};

#[derive(Debug)]
struct Reduce {
    op: ReduceOp,
    axes: ReduceAxes,
    keepdims: bool,
    noop_empty: bool,
    /// float16 or bfloat16: the values of that type go through float32.
    half: Option<i32>,
}

/// The family of one reduction: its op and the opset its axes became an input.
macro_rules! reductions {
    ($($f:ident: $op:ident from $input_since:literal),*) => {$(
        pub fn $f(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
            compile(node, ReduceOp::$op, $input_since)
        }
    )*};
}
reductions!(
    sum: Sum from 13,
    mean: Mean from 18,
    max: Max from 18,
    min: Min from 18,
    prod: Prod from 18,
    l1: L1 from 18,
    l2: L2 from 18,
    log_sum: LogSum from 18,
    log_sum_exp: LogSumExp from 18,
    sum_square: SumSquare from 18
);

/// A reduction: axes from the attribute (before `input_since`) or the second input.
fn compile(node: &NodeDesc, op: ReduceOp, input_since: i32) -> Result<Arc<dyn Op>, String> {
    check_data_then_constants(node, 2, false)?;
    check_attrs(node, &["axes", "keepdims", "noop_with_empty_axes"])?;
    let axes = if node.since_version < input_since {
        ReduceAxes::Const(Axes::new(&ints_attr(node, "axes")?.unwrap_or_default())?)
    } else if runtime_i64(node, 1) {
        ReduceAxes::AtRun
    } else {
        ReduceAxes::Const(Axes::new(&const_i64(node, 1, "axes")?.unwrap_or_default())?)
    };
    let keepdims = int_attr(node, "keepdims", 1)? != 0;
    let noop_empty = int_attr(node, "noop_with_empty_axes", 0)? != 0;
    let half = check_types(node, op)?;
    Ok(Arc::new(Reduce { op, axes, keepdims, noop_empty, half }))
}

/// float32, float64, the integers (every op) and bool (Max, Min); or a half type, then
/// `Some` of it (computed in float32).
fn check_types(node: &NodeDesc, op: ReduceOp) -> Result<Option<i32>, String> {
    let (types, out) = types_of(node, &[0]);
    let check = |t: i32, out: i32| -> Result<(), &'static str> {
        let int = data::is_number(out) && !matches!(out, dtype::FLOAT | dtype::DOUBLE);
        let ok = if out == dtype::DOUBLE {
            t == dtype::DOUBLE
        } else if int || out == dtype::BOOL {
            (out != dtype::BOOL || matches!(op, ReduceOp::Max | ReduceOp::Min)) && t == out
        } else if t == dtype::FLOAT && out == dtype::FLOAT {
            true
        } else {
            return Err("float32 only");
        };
        if ok {
            Ok(())
        } else {
            Err("other element types")
        }
    };
    let Err(what) = check(types[0], out) else { return Ok(None) };
    let why = bad_types_of(node, &[0], what);
    let half =
        [out, types[0]].into_iter().find(|t| matches!(*t, dtype::FLOAT16 | dtype::BFLOAT16)).ok_or(why.clone())?;
    let wide = |t: i32| if t == half { dtype::FLOAT } else { t };
    check(wide(types[0]), wide(out)).map_err(|_| why)?;
    Ok(Some(half))
}

impl Reduce {
    /// Which of the input's axes are reduced, from the axes known now.
    fn mask<'d>(
        &self,
        rank: usize,
        axes: impl FnOnce() -> Result<Data<'d>, ShapeError>,
    ) -> Result<[bool; 8], ShapeError> {
        let read;
        let params: &[&[i64]] = match self.axes {
            ReduceAxes::Const(_) => &[],
            ReduceAxes::AtRun => {
                read = ints(axes()?)?;
                &[&read]
            }
        };
        Ok(reduced_axes(rank, self.axes, self.noop_empty, params)?)
    }
}

impl Op for Reduce {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        let mask = self.mask(s.len(), || x.data(1))?;
        Ok((0..s.len())
            .filter_map(|a| {
                if !mask[a] {
                    Some(s[a])
                } else if self.keepdims {
                    Some(1)
                } else {
                    None
                }
            })
            .collect())
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let mask = self.mask(s.len(), || Ok(x.ins[1])).map_err(|e| match e {
            ShapeError::Invalid(why) => why,
            ShapeError::NeedsData => "its axes are not known".into(),
        })?;
        let reduced = &mask[..s.len()];
        if self.half.is_some() {
            return self.reduce_half(x, reduced, out);
        }
        match (out, x.ins[0]) {
            (DataMut::F32(y), Data::F32(v)) => reduce_f32(v, s, reduced, self.op, y),
            (DataMut::F64(y), Data::F64(v)) => {
                if !reduced.iter().any(|&m| m) {
                    y.copy_from_slice(v);
                    return Ok(());
                }
                reduce_f64(v, s, reduced, self.op, y, x.scratch.state::<Work>());
            }
            (DataMut::Bool(y), Data::Bool(v)) => {
                reduce_ints::<u8>(v, s, reduced, self.op, y, true, x.scratch.state::<Work>())?
            }
            (out, v) => {
                let work = x.scratch.state::<Work>();
                by_number!(v, Err(MISMATCH.into()), integers(v, s, reduced, self.op, out, work))?
            }
        }
        Ok(())
    }
}

const MISMATCH: &str = "element types differ from the plan's";

fn integers<T: data::Storage + rivet_kernels::typed::Number>(
    v: Data<'_>,
    s: &[usize],
    reduced: &[bool],
    op: ReduceOp,
    out: &mut DataMut<'_>,
    work: &mut Work,
) -> Result<(), String> {
    let (x, y) = (T::get(v).ok_or(MISMATCH)?, T::get_mut(out).ok_or(MISMATCH)?);
    reduce_ints(x, s, reduced, op, y, false, work)
}

/// The float32 kernel; no reduced axis (noop_with_empty_axes) leaves the input as it is.
fn reduce_f32(x: &[f32], s: &[usize], reduced: &[bool], op: ReduceOp, y: &mut [f32]) {
    if reduced.iter().any(|&m| m) {
        rivet_kernels::nn::reduce(x, s, reduced, op, y);
    } else {
        y.copy_from_slice(x);
    }
}

impl Reduce {
    /// A half input widened to float32 and a half output rounded from it, in the scratch
    /// (grown once, then reused), around the float32 kernel.
    fn reduce_half(&self, x: RunIn<'_, '_>, reduced: &[bool], out: &mut DataMut<'_>) -> Result<(), String> {
        let n_out = if matches!(out, DataMut::F32(_)) { 0 } else { out.len() };
        let (ins, result) = super::halves::widen_all(&x.ins[..1], &mut x.scratch.f32, n_out);
        let Data::F32(v) = ins[0] else { return Err(MISMATCH.into()) };
        match out {
            DataMut::F32(y) => reduce_f32(v, x.shapes[0], reduced, self.op, y),
            _ => {
                reduce_f32(v, x.shapes[0], reduced, self.op, result);
                super::halves::narrow(result, out)?;
            }
        }
        Ok(())
    }
}
