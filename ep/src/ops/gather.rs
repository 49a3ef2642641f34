//! Gather, GatherElements and GatherND: elements of a tensor of any type picked by int32
//! or int64 indices (GatherND: int64 index tuples). A negative index counts back; one out
//! of range is an error naming input 1.

use std::sync::Arc;

use rivet_kernels::typed;

use super::int_input::{one_output, up_to_rank_8};
use super::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, by_storage, Data, DataMut, Storage};
use crate::graph::{dtype, normalize_axis, NodeDesc, Shape, ShapeText};
use crate::node_attrs::int_attr;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Gather along `axis`.
    Gather {
        axis: i64,
    },
    GatherElements {
        axis: i64,
    },
    /// GatherND with int64 index tuples.
    GatherNd {
        batch_dims: usize,
    },
}

#[derive(Debug)]
struct Gathers(Kind);

fn compile(node: &NodeDesc, kind: Kind) -> Result<Arc<dyn Op>, String> {
    let t = output_type(node, 0);
    let index_ok = match kind {
        Kind::GatherNd { .. } => input_type(node, 1) == dtype::INT64,
        _ => matches!(input_type(node, 1), dtype::INT32 | dtype::INT64),
    };
    if !(data::supported(t) && input_type(node, 0) == t && index_ok) {
        return Err(bad_types(node, "other element types"));
    }
    Ok(Arc::new(Gathers(kind)))
}

fn claim(node: &NodeDesc, attrs: &[&str]) -> Result<(), String> {
    check_inputs(node, 2, 2)?;
    one_output(node)?;
    check_attrs(node, attrs)
}

pub fn gather(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    claim(node, &["axis"])?;
    compile(node, Kind::Gather { axis: int_attr(node, "axis", 0)? })
}

pub fn gather_elements(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    claim(node, &["axis"])?;
    compile(node, Kind::GatherElements { axis: int_attr(node, "axis", 0)? })
}

pub fn gather_nd(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    claim(node, &["batch_dims"])?;
    let b = int_attr(node, "batch_dims", 0)?;
    compile(node, Kind::GatherNd { batch_dims: usize::try_from(b).map_err(|_| format!("batch_dims {b}"))? })
}

impl Op for Gathers {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (s, i) = (x.shapes[0], x.shapes[1]);
        Ok(match self.0 {
            Kind::Gather { axis } => {
                if s.is_empty() {
                    return Err("Gather needs data of rank 1 or more".into());
                }
                let a = normalize_axis(axis, s.len(), false)?;
                s[..a].iter().chain(i).chain(&s[a + 1..]).copied().collect()
            }
            Kind::GatherElements { axis } => {
                up_to_rank_8(s, 0)?;
                up_to_rank_8(i, 1)?;
                let a = normalize_axis(axis, s.len(), false)?;
                if s.is_empty() || i.len() != s.len() {
                    return Err(format!("indices of shape {} must have the data's rank", ShapeText(i)).into());
                }
                if (0..s.len()).any(|d| d != a && i[d] > s[d]) {
                    return Err(format!("indices of shape {} exceed the data off the axis", ShapeText(i)).into());
                }
                Shape::from_slice(i)
            }
            Kind::GatherNd { batch_dims: b } => {
                let last = i.last().copied().unwrap_or(usize::MAX);
                if i.is_empty() || b >= i.len() || b + last > s.len() || s[..b] != i[..b] {
                    return Err(format!("indices of shape {} with batch_dims {b}", ShapeText(i)).into());
                }
                i[..i.len() - 1].iter().chain(&s[b + last..]).copied().collect()
            }
        })
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        by_storage!(out, gather_typed(self.0, &x))
    }
}

fn gather_typed<T: Storage>(kind: Kind, x: &RunIn<'_, '_>, y: &mut [T]) -> Result<(), String> {
    let (s, si) = (x.shapes[0], x.shapes[1]);
    let data = T::get(x.ins[0]).ok_or("element types differ from the plan's")?;
    let out_of_range =
        |bad: i64, a: usize| format!("input 1: index {bad} is out of range for axis {a} of size {}", s[a]);
    match kind {
        Kind::Gather { axis } => {
            let a = normalize_axis(axis, s.len(), false).unwrap_or(0);
            let (outer, inner) = (s[..a].iter().product(), s[a + 1..].iter().product());
            let result = match x.ins[1] {
                Data::I64(idx) => typed::gather(data, outer, s[a], inner, idx, y),
                Data::I32(idx) => typed::gather(data, outer, s[a], inner, idx, y),
                _ => return Err("element types differ from the plan's".into()),
            };
            result.map_err(|bad| out_of_range(bad, a))
        }
        Kind::GatherElements { axis } => {
            let a = normalize_axis(axis, s.len(), false).unwrap_or(0);
            let result = match x.ins[1] {
                Data::I64(idx) => typed::gather_elements(data, s, idx, si, a, y),
                Data::I32(idx) => typed::gather_elements(data, s, idx, si, a, y),
                _ => return Err("element types differ from the plan's".into()),
            };
            result.map_err(|bad| out_of_range(bad, a))
        }
        Kind::GatherNd { batch_dims: b } => {
            let Data::I64(idx) = x.ins[1] else { return Err("element types differ from the plan's".into()) };
            let last = si[si.len() - 1];
            let inner: usize = s[b + last..].iter().product();
            let per_batch: usize = s[b..].iter().product();
            let tuples_per_batch: usize = si[b..si.len() - 1].iter().product();
            for (t, (tuple, dst)) in idx.chunks(last.max(1)).zip(y.chunks_mut(inner.max(1))).enumerate() {
                let mut at = (t / tuples_per_batch.max(1)) * per_batch;
                let mut stride = per_batch;
                for (k, &raw) in tuple.iter().enumerate().take(last) {
                    let n = s[b + k];
                    stride /= n.max(1);
                    let i = if raw < 0 { raw + n as i64 } else { raw };
                    if i < 0 || i >= n as i64 {
                        return Err(out_of_range(raw, b + k));
                    }
                    at += i as usize * stride;
                }
                dst.copy_from_slice(&data[at..at + inner]);
            }
            Ok(())
        }
    }
}
