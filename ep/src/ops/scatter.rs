//! ScatterElements (and the deprecated Scatter) along an axis, and ScatterND: a copy of
//! the data with the updates written (or, with a reduction, combined) at the indices; any
//! type, numbers with a reduction (the halves in float32). A negative index counts back;
//! one out of range is an error naming input 1.

use std::sync::Arc;

use rivet_kernels::typed::Number;

use super::halves::{computed, is_half, narrow, widen_all};
use super::int_input::{one_output, up_to_rank_8};
use super::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use super::params::ScatterReduction;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, by_number, by_storage, Data, DataMut, Storage};
use crate::graph::{dtype, normalize_axis, NodeDesc, Shape, ShapeText};
use crate::node_attrs::{int_attr, string_attr};

/// ScatterElements along `axis`, or ScatterND when `axis` is None.
#[derive(Debug)]
struct Scatter {
    axis: Option<i64>,
    reduction: ScatterReduction,
    /// float16 / bfloat16 with a reduction, combined in float32.
    half: bool,
}

pub fn scatter_elements(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, &["axis", "reduction"], true)
}

/// The deprecated Scatter (opsets 9 and 10): ScatterElements without a reduction.
pub fn scatter(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, &["axis"], true)
}

pub fn scatter_nd(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, &["reduction"], false)
}

fn compile(node: &NodeDesc, attrs: &[&str], elements: bool) -> Result<Arc<dyn Op>, String> {
    use ScatterReduction as R;
    check_inputs(node, 3, 3)?;
    one_output(node)?;
    check_attrs(node, attrs)?;
    let reduction = match string_attr(node, "reduction", "none")? {
        "none" => R::None,
        "add" => R::Add,
        "mul" => R::Mul,
        "max" => R::Max,
        "min" => R::Min,
        other => return Err(format!("reduction '{other}'")),
    };
    let axis = if elements { Some(int_attr(node, "axis", 0)?) } else { None };
    let t = output_type(node, 0);
    let index_ok = matches!((axis, input_type(node, 1)), (Some(_), dtype::INT32) | (_, dtype::INT64));
    let type_ok = if reduction == R::None { data::supported(t) } else { data::is_number(computed(t)) };
    if !(type_ok && index_ok && input_type(node, 0) == t && input_type(node, 2) == t) {
        return Err(bad_types(node, "other element types"));
    }
    Ok(Arc::new(Scatter { axis, reduction, half: reduction != R::None && is_half(t) }))
}

impl Op for Scatter {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (s, i, u) = (x.shapes[0], x.shapes[1], x.shapes[2]);
        for (k, shape) in [s, i, u].into_iter().enumerate() {
            up_to_rank_8(shape, k)?;
        }
        let ok = match self.axis {
            Some(axis) => {
                let a = normalize_axis(axis, s.len(), false)?;
                i == u && i.len() == s.len() && (0..s.len()).all(|d| d == a || i[d] <= s[d])
            }
            None => {
                let last = i.last().copied().unwrap_or(usize::MAX);
                !i.is_empty()
                    && last <= s.len()
                    && u.len() == i.len() - 1 + s.len() - last
                    && u[..i.len() - 1] == i[..i.len() - 1]
                    && u[i.len() - 1..] == s[last..]
            }
        };
        if !ok {
            return Err(format!("indices {} and updates {} do not fit", ShapeText(i), ShapeText(u)).into());
        }
        Ok(Shape::from_slice(s))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        if self.reduction == ScatterReduction::None {
            return by_storage!(out, replace(self, &x));
        }
        if self.half {
            let (ins, y) = widen_all(x.ins, &mut x.scratch.f32, out.len());
            reduce::<f32>(self, &ins, x.shapes, &mut DataMut::F32(&mut *y))?;
            return narrow(y, out);
        }
        by_number!(x.ins[0], Err("element types differ from the plan's".into()), reduce(self, x.ins, x.shapes, out))
    }
}

fn replace<T: Storage>(op: &Scatter, x: &RunIn<'_, '_>, y: &mut [T]) -> Result<(), String> {
    let mismatch = "element types differ from the plan's";
    y.copy_from_slice(T::get(x.ins[0]).ok_or(mismatch)?);
    let u = T::get(x.ins[2]).ok_or(mismatch)?;
    targets(op.axis, x.ins, x.shapes, |k, at| y[at] = u[k])
}

fn reduce<T: Storage + Number>(
    op: &Scatter,
    ins: &[Data<'_>],
    shapes: &[&[usize]],
    out: &mut DataMut<'_>,
) -> Result<(), String> {
    let mismatch = "element types differ from the plan's";
    let y = T::get_mut(out).ok_or(mismatch)?;
    y.copy_from_slice(T::get(ins[0]).ok_or(mismatch)?);
    let u = T::get(ins[2]).ok_or(mismatch)?;
    let f: &dyn Fn(T, T) -> T = match op.reduction {
        ScatterReduction::Add => &|a, b| a.add(b),
        ScatterReduction::Mul => &|a, b| a.mul(b),
        ScatterReduction::Max => &|a, b| if b > a { b } else { a },
        ScatterReduction::Min => &|a, b| if b < a { b } else { a },
        ScatterReduction::None => &|_, b| b,
    };
    targets(op.axis, ins, shapes, |k, at| y[at] = f(y[at], u[k]))
}

/// Element offsets in `data` of each update of a ScatterElements (along `axis`) or
/// ScatterND, in the updates' order; `Err` names a bad index.
fn targets(
    axis: Option<i64>,
    ins: &[Data<'_>],
    shapes: &[&[usize]],
    mut each: impl FnMut(usize, usize),
) -> Result<(), String> {
    let (s, si) = (shapes[0], shapes[1]);
    let index = |k: usize| match ins[1] {
        Data::I64(v) => v[k],
        Data::I32(v) => i64::from(v[k]),
        _ => 0,
    };
    let bad =
        |raw: i64, axis: usize| format!("input 1: index {raw} is out of range for axis {axis} of size {}", s[axis]);
    let mut strides = [0usize; 8];
    let mut acc = 1;
    for a in (0..s.len()).rev() {
        strides[a] = acc;
        acc *= s[a];
    }
    match axis {
        Some(axis) => {
            let a = normalize_axis(axis, s.len(), false).unwrap_or(0);
            let count: usize = si.iter().product();
            let mut pos = [0usize; 8];
            for k in 0..count {
                let raw = index(k);
                let i = if raw < 0 { raw + s[a] as i64 } else { raw };
                if i < 0 || i >= s[a] as i64 {
                    return Err(bad(raw, a));
                }
                let at: usize = (0..s.len()).map(|d| strides[d] * if d == a { i as usize } else { pos[d] }).sum();
                each(k, at);
                for d in (0..si.len()).rev() {
                    pos[d] += 1;
                    if pos[d] < si[d] {
                        break;
                    }
                    pos[d] = 0;
                }
            }
        }
        None => {
            let last = si[si.len() - 1];
            let inner: usize = s[last..].iter().product();
            let tuples: usize = si[..si.len() - 1].iter().product();
            for t in 0..tuples {
                let mut at = 0;
                for d in 0..last {
                    let raw = index(t * last + d);
                    let i = if raw < 0 { raw + s[d] as i64 } else { raw };
                    if i < 0 || i >= s[d] as i64 {
                        return Err(bad(raw, d));
                    }
                    at += i as usize * strides[d];
                }
                for e in 0..inner {
                    each(t * inner + e, at + e);
                }
            }
        }
    }
    Ok(())
}
