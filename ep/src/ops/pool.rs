//! MaxPool and AveragePool on 1-D, 2-D and 3-D inputs: float32 (split over the pool by
//! planes when large), MaxPool also on integers, and MaxPool's Indices output (int64,
//! flattened over the whole input; `storage_order` 1 counts down columns first).

use std::sync::Arc;

use rivet_kernels::conv::{self, Window3d};

use super::claim_rules::{bad_types, one_input, output_is, outputs};
use super::geometry::{spatial, window_3d, windowed, within_limit};
use super::op::util::check_attrs;
use super::params::{window, Window};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, Data, DataMut, Storage};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::int_attr;
use crate::parallel::{by_planes, Parallel};

const MAX_ATTRS: &[&str] = &["auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"];
const AVERAGE_ATTRS: &[&str] =
    &["auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"];

/// MaxPool's or AveragePool's output.
#[derive(Debug)]
struct Pool {
    window: Window,
    max: bool,
    count_pad: bool,
}

/// MaxPool's Indices output.
#[derive(Debug)]
struct PoolIndices {
    window: Window,
    /// `storage_order` 1: indices within a plane count down columns first.
    column_major: bool,
}

pub fn max_pool(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    one_input(node)?;
    outputs(node, true)?;
    check_attrs(node, MAX_ATTRS)?;
    let window = window(node, true)?;
    let (t, out) = (elem_type(node, true, 0), elem_type(node, false, 0));
    let ok = if is_int(out) {
        t == out
    } else if t == dtype::FLOAT && out == dtype::FLOAT {
        true
    } else {
        return Err(bad_types(node, "float32 only"));
    };
    if !ok {
        return Err(bad_types(node, "other element types"));
    }
    if output == 0 {
        return Ok(Arc::new(Pool { window, max: true, count_pad: false }));
    }
    if t != dtype::FLOAT {
        return Err(format!("{}'s output {output} is not supported", node.op_type));
    }
    output_is(node, output, dtype::INT64)?;
    let column_major = int_attr(node, "storage_order", 0)? == 1;
    Ok(Arc::new(PoolIndices { window, column_major }))
}

pub fn average_pool(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    one_input(node)?;
    outputs(node, false)?;
    check_attrs(node, AVERAGE_ATTRS)?;
    let count_pad = int_attr(node, "count_include_pad", 0)? != 0;
    let window = window(node, true)?;
    if !(elem_type(node, true, 0) == dtype::FLOAT && elem_type(node, false, 0) == dtype::FLOAT) {
        return Err(bad_types(node, "float32 only"));
    }
    Ok(Arc::new(Pool { window, max: false, count_pad }))
}

/// Input `k`'s (or output `k`'s) element type.
fn elem_type(node: &NodeDesc, input: bool, k: usize) -> i32 {
    let values = if input { &node.inputs } else { &node.outputs };
    values.get(k).and_then(Option::as_ref).map_or(0, |v| v.elem_type)
}

fn is_int(t: i32) -> bool {
    data::is_number(t) && !matches!(t, dtype::FLOAT | dtype::DOUBLE)
}

/// The window's geometry on input `s` and the padding after each axis.
fn geometry(window: &Window, s: &[usize]) -> Result<(Window3d, [usize; 3]), String> {
    if !(3..=5).contains(&s.len()) {
        return Err("needs [N, C] and 1 to 3 spatial axes".into());
    }
    window_3d(window, spatial(s), window.kernel)
}

fn shape(window: &Window, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
    let s = x.shapes[0];
    let (g, _) = geometry(window, s)?;
    Ok(within_limit(windowed(s, s[1], g.out))?)
}

impl Op for Pool {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        shape(&self.window, x)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let (g, pad_end) = geometry(&self.window, s)?;
        let planes = s[0] * s[1];
        match (x.ins[0], out) {
            (Data::F32(input), DataMut::F32(y)) => {
                let mode = if self.max { conv::Pool::Max } else { conv::Pool::Average { count_pad: self.count_pad } };
                pool(input, planes, &g, mode, pad_end, y, x.par);
                Ok(())
            }
            (input, DataMut::I8(y)) => integers(input, planes, &g, y),
            (input, DataMut::I16(y)) => integers(input, planes, &g, y),
            (input, DataMut::I32(y)) => integers(input, planes, &g, y),
            (input, DataMut::I64(y)) => integers(input, planes, &g, y),
            (input, DataMut::U8(y)) => integers(input, planes, &g, y),
            (input, DataMut::U16(y)) => integers(input, planes, &g, y),
            (input, DataMut::U32(y)) => integers(input, planes, &g, y),
            (input, DataMut::U64(y)) => integers(input, planes, &g, y),
            _ => Err("element types differ from the plan's".into()),
        }
    }
}

/// Pools `planes` planes, split over the pool by planes when the input is large.
fn pool(
    x: &[f32],
    planes: usize,
    g: &Window3d,
    mode: conv::Pool,
    pad_end: [usize; 3],
    y: &mut [f32],
    par: &dyn Parallel,
) {
    by_planes(x, y, planes, (g.plane(), g.positions()), par, &|mine, x, y| {
        conv::pool(x, mine.len(), g, mode, pad_end, y);
    });
}

/// MaxPool on integers (the output's type; the input's must be the same).
fn integers<T: Storage + PartialOrd>(x: Data<'_>, planes: usize, g: &Window3d, y: &mut [T]) -> Result<(), String> {
    let x = T::get(x).ok_or("element types differ from the plan's")?;
    conv::max_pool(x, planes, g, y);
    Ok(())
}

impl Op for PoolIndices {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        shape(&self.window, x)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (DataMut::I64(y), Data::F32(input)) = (out, x.ins[0]) else {
            return Err("element types differ from the plan's".into());
        };
        let s = x.shapes[0];
        let (g, _) = geometry(&self.window, s)?;
        conv::max_pool_indices(input, s[0] * s[1], &g, self.column_major, y);
        Ok(())
    }
}
