//! Softmax, LogSoftmax and Hardmax along one axis, on float32 (the halves between casts)
//! and float64. Before opset 13 the input is coerced to 2-D at the axis (every axis from
//! it on is one); from 13 the op runs along that one axis. float32 Softmax runs whole rows
//! split over the pool; float64 is computed in plain f64 loops.

use std::sync::Arc;

use rivet_kernels::nn;

use super::claim;
use super::op::util::check_attrs;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{axis_split, normalize_axis, NodeDesc, Shape};
use crate::node_attrs::int_attr;
use crate::parallel::{Parallel, CHUNK_LEN, PARALLEL_MIN_LEN};

/// Softmax (or LogSoftmax when `log`) along `axis`; `legacy`: opset < 13.
#[derive(Debug)]
pub struct Softmax {
    axis: i64,
    log: bool,
    legacy: bool,
}

/// One-hot of the maximum along `axis` (first one on ties); `legacy`: opset < 13.
#[derive(Debug)]
struct Hardmax {
    axis: i64,
    legacy: bool,
}

pub fn softmax(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    let (axis, legacy) = compile(node)?;
    Ok(Arc::new(Softmax { axis, log: false, legacy }))
}

pub fn log_softmax(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    let (axis, legacy) = compile(node)?;
    Ok(Arc::new(Softmax { axis, log: true, legacy }))
}

pub fn hardmax(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    let (axis, legacy) = compile(node)?;
    Ok(Arc::new(Hardmax { axis, legacy }))
}

/// The log-softmax over axis 1 (SoftmaxCrossEntropyLoss's `log_prob` output).
pub fn log_softmax_axis_1() -> Arc<dyn Op> {
    Arc::new(Softmax { axis: 1, log: true, legacy: false })
}

/// The claim of all three: one input, one output, the axis (1 before opset 13, else -1).
fn compile(node: &NodeDesc) -> Result<(i64, bool), String> {
    claim::exact_inputs(node, 1)?;
    claim::outputs(node, false)?;
    check_attrs(node, &["axis"])?;
    let legacy = node.since_version < 13;
    let axis = int_attr(node, "axis", if legacy { 1 } else { -1 })?;
    claim::float_types(node)?;
    Ok((axis, legacy))
}

/// The input's shape, once the axis is in range.
fn same_shape(axis: i64, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
    normalize_axis(axis, x.shapes[0].len(), false)?;
    Ok(Shape::from_slice(x.shapes[0]))
}

const MISMATCH: &str = "input and output element types differ from the plan's";

impl Op for Softmax {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        same_shape(self.axis, x)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (outer, n, inner) = axis_split(x.shapes[0], self.axis, self.legacy);
        match (x.ins[0], out) {
            (Data::F32(v), DataMut::F32(y)) => {
                let row = n * inner;
                by_rows(x.par, y, row, &|start, part| {
                    nn::softmax(&v[start..start + part.len()], part, part.len() / row.max(1), n, inner, self.log)
                });
            }
            (Data::F64(v), DataMut::F64(y)) => softmax_f64(v, (outer, n, inner), self.log, y),
            _ => return Err(MISMATCH.into()),
        }
        Ok(())
    }

    fn halves_in_f32(&self) -> bool {
        true
    }
}

impl Op for Hardmax {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        same_shape(self.axis, x)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (outer, n, inner) = axis_split(x.shapes[0], self.axis, self.legacy);
        match (x.ins[0], out) {
            (Data::F32(v), DataMut::F32(y)) => nn::hardmax(v, outer, n, inner, y),
            (Data::F64(v), DataMut::F64(y)) => hardmax_f64(v, (outer, n, inner), y),
            _ => return Err(MISMATCH.into()),
        }
        Ok(())
    }

    fn halves_in_f32(&self) -> bool {
        true
    }
}

/// float64 Softmax / LogSoftmax of `x` viewed as `[outer, n, inner]`, along n.
fn softmax_f64(x: &[f64], (outer, n, inner): (usize, usize, usize), log: bool, y: &mut [f64]) {
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * n + k) * inner + i;
            let max = (0..n).map(|k| x[at(k)]).fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = (0..n).map(|k| (x[at(k)] - max).exp()).sum();
            for k in 0..n {
                let d = x[at(k)] - max;
                y[at(k)] = if log { d - sum.ln() } else { d.exp() / sum };
            }
        }
    }
}

/// float64 Hardmax of `x` viewed as `[outer, n, inner]`, along n.
fn hardmax_f64(x: &[f64], (outer, n, inner): (usize, usize, usize), y: &mut [f64]) {
    y.iter_mut().for_each(|v| *v = 0.0);
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| (o * n + k) * inner + i;
            let best = (1..n).fold(0, |b, k| if x[at(k)] > x[at(b)] { k } else { b });
            if n > 0 {
                y[at(best)] = 1.0;
            }
        }
    }
}

/// Runs `f(start, part)` over whole rows of `row` elements of `dst`: split over the pool
/// in parts of about `CHUNK_LEN` elements when `dst` is large (the rows are independent,
/// so a part computes them as the whole would, and in turn the parts cost nothing more),
/// else in one call.
pub(super) fn by_rows(par: &dyn Parallel, dst: &mut [f32], row: usize, f: &(dyn Fn(usize, &mut [f32]) + Sync)) {
    let rows = dst.len() / row.max(1);
    if dst.len() < PARALLEL_MIN_LEN || rows < 2 {
        return f(0, dst);
    }
    let per_part = CHUNK_LEN.div_ceil(row).clamp(1, rows);
    par.for_each_chunk(dst, per_part * row, f);
}
