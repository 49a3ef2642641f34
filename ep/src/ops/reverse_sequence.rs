//! ReverseSequence (opset 10, any element type): the first `sequence_lens[b]` elements of
//! each batch entry reversed along the time axis, the rest copied.

use std::sync::Arc;

use super::op::util::{check_attrs, check_inputs, input_type, move_any, output_type, Move};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Debug)]
struct ReverseSequence {
    /// The time axis is 0 (batch 1), or 1 (batch 0).
    time_first: bool,
}

pub fn reverse_sequence(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["batch_axis", "time_axis"])?;
    check_inputs(node, 2, 2)?;
    let t = input_type(node, 0);
    if !data::supported(t) || output_type(node, 0) != t || input_type(node, 1) != dtype::INT64 {
        return Err(super::op::util::bad_types(node, "any element type, int64 sequence_lens"));
    }
    let (batch, time) = (int_attr(node, "batch_axis", 1)?, int_attr(node, "time_axis", 0)?);
    let time_first = match (batch, time) {
        (1, 0) => true,
        (0, 1) => false,
        _ => return Err(format!("ReverseSequence batch_axis {batch} and time_axis {time} are not 0 and 1")),
    };
    Ok(Arc::new(ReverseSequence { time_first }))
}

impl ReverseSequence {
    /// (batch, time, inner) of input shape `s`.
    fn dims(&self, s: &[usize]) -> Result<(usize, usize, usize), String> {
        if s.len() < 2 {
            return Err(format!("the input must have rank 2 or more, got {}", s.len()));
        }
        let inner = s[2..].iter().product();
        Ok(if self.time_first { (s[1], s[0], inner) } else { (s[0], s[1], inner) })
    }
}

impl Op for ReverseSequence {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (batch, _, _) = self.dims(x.shapes[0])?;
        if x.shapes[1] != [batch] {
            return Err(format!("sequence_lens must be [{batch}], got {:?}", x.shapes[1]).into());
        }
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (batch, time, inner) = self.dims(x.shapes[0])?;
        let lens = x.ins[1].i64().ok_or("sequence_lens is not int64")?;
        if lens.len() != batch {
            return Err(format!("sequence_lens holds {} values for a batch of {batch}", lens.len()));
        }
        if let Some(&l) = lens.iter().find(|&&l| l < 0 || l as usize > time) {
            return Err(format!("sequence_lens value {l} is outside 0..={time}"));
        }
        move_any(x.ins[0], out, &Reverse { lens, batch, time, inner, time_first: self.time_first })
    }
}

struct Reverse<'a> {
    lens: &'a [i64],
    batch: usize,
    time: usize,
    inner: usize,
    time_first: bool,
}

impl Move for Reverse<'_> {
    fn apply<T: Copy + Default + PartialEq + Send + Sync>(&self, x: &[T], y: &mut [T]) {
        let at = |b: usize, t: usize| {
            if self.time_first {
                (t * self.batch + b) * self.inner
            } else {
                (b * self.time + t) * self.inner
            }
        };
        for b in 0..self.batch {
            let len = self.lens[b] as usize;
            for t in 0..self.time {
                let from = if t < len { len - 1 - t } else { t };
                y[at(b, t)..][..self.inner].copy_from_slice(&x[at(b, from)..][..self.inner]);
            }
        }
    }
}
