//! TensorScatter (opset 24): a KV-cache update. `update`'s sequence (along `axis`) is
//! written into a copy of `past_cache` at each batch entry's `write_indices` position
//! (0 when absent); `circular` wraps past the end, `linear` must fit. Any element type.

use std::sync::Arc;

use super::op::util::{check_attrs, check_inputs, input, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, by_storage, Data, DataMut, Storage};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::{int_attr, string_attr};

#[derive(Debug)]
struct TensorScatter {
    axis: i64,
    circular: bool,
}

pub fn compile(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 2, 3)?;
    check_attrs(node, &["mode", "axis"])?;
    let t = input_type(node, 0);
    let indices_ok = input(node, 2).is_none_or(|v| v.elem_type == dtype::INT64);
    if !data::supported(t) || input_type(node, 1) != t || output_type(node, 0) != t || !indices_ok {
        return Err(super::op::util::bad_types(node, "any element type with int64 write_indices"));
    }
    let circular = match string_attr(node, "mode", "linear")? {
        "linear" => false,
        "circular" => true,
        m => return Err(format!("TensorScatter mode '{m}' is not linear or circular")),
    };
    Ok(Arc::new(TensorScatter { axis: int_attr(node, "axis", -2)?, circular }))
}

/// past `[outer, max_len, inner]`, update `[outer, len, inner]`, outer blocks per batch entry.
#[derive(Clone, Copy)]
struct View {
    outer: usize,
    per_batch: usize,
    max_len: usize,
    len: usize,
    inner: usize,
}

impl TensorScatter {
    fn view(&self, past: &[usize], update: &[usize]) -> Result<View, String> {
        let r = past.len() as i64;
        if self.axis < -r || self.axis >= r {
            return Err(format!("axis {} is out of range for rank {r}", self.axis));
        }
        let a = (if self.axis < 0 { self.axis + r } else { self.axis }) as usize;
        if a == 0 {
            return Err("the sequence axis cannot be the batch axis 0".into());
        }
        if update.len() != past.len() || (0..past.len()).any(|k| k != a && update[k] != past[k]) {
            return Err(format!("update {update:?} does not match past_cache {past:?} off the axis {a}"));
        }
        if update[a] > past[a] {
            return Err(format!("update's {} entries do not fit the cache's {}", update[a], past[a]));
        }
        Ok(View {
            outer: past[..a].iter().product(),
            per_batch: past[1..a].iter().product(),
            max_len: past[a],
            len: update[a],
            inner: past[a + 1..].iter().product(),
        })
    }

    /// The write position of batch entry `b`, checked.
    fn start(&self, v: View, indices: Option<&[i64]>, b: usize) -> Result<usize, String> {
        let Some(w) = indices else { return Ok(0) };
        let i = *w.get(b).ok_or_else(|| format!("write_indices has {} entries for batch {}", w.len(), b + 1))?;
        if self.circular {
            return Ok(if v.max_len == 0 { 0 } else { i.rem_euclid(v.max_len as i64) as usize });
        }
        if i < 0 || i as u64 + v.len as u64 > v.max_len as u64 {
            return Err(format!("write index {i} + {} entries is past the cache's {}", v.len, v.max_len));
        }
        Ok(i as usize)
    }
}

fn scatter<T: Copy>(past: &[T], update: &[T], y: &mut [T], v: View, starts: impl Fn(usize) -> usize) {
    y.copy_from_slice(past);
    for o in 0..v.outer {
        let start = starts(o / v.per_batch.max(1));
        for s in 0..v.len {
            let at = (start + s) % v.max_len.max(1);
            y[(o * v.max_len + at) * v.inner..][..v.inner]
                .copy_from_slice(&update[(o * v.len + s) * v.inner..][..v.inner]);
        }
    }
}

impl Op for TensorScatter {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        self.view(x.shapes[0], x.shapes[1])?;
        if let Some(w) = x.shapes.get(2) {
            if *w != [x.shapes[0][0]] {
                return Err(format!("write_indices {w:?} is not [batch {}]", x.shapes[0][0]).into());
            }
        }
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let v = self.view(x.shapes[0], x.shapes[1])?;
        let indices = match x.ins.get(2) {
            Some(d) => Some(d.i64().ok_or("write_indices is not int64")?),
            None => None,
        };
        let batch = x.shapes[0][0];
        for b in 0..batch {
            self.start(v, indices, b)?;
        }
        let starts = |b: usize| self.start(v, indices, b).unwrap_or(0);
        // Every type Rivet holds, by its storage (the claim checked the three agree).
        fn typed<T: Storage>(
            ins: &[Data<'_>],
            v: View,
            starts: impl Fn(usize) -> usize,
            y: &mut [T],
        ) -> Result<(), String> {
            match (T::get(ins[0]), T::get(ins[1])) {
                (Some(p), Some(u)) => {
                    scatter(p, u, y, v, starts);
                    Ok(())
                }
                _ => Err("past_cache, update and the output differ in type".into()),
            }
        }
        by_storage!(out, typed(x.ins, v, starts))?;
        Ok(())
    }
}
