//! Compress: the slices of the input along `axis` (or the elements of the flattened
//! input) whose entry in a bool condition is true, for any element type. The output's
//! length comes from the condition's data: known at Compile only when it is constant.

use std::sync::Arc;

use super::op::util::{check_attrs, check_inputs, input, input_type, move_any, output_type, Move};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Debug)]
struct Compress {
    axis: Option<i64>,
}

pub fn compile(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 2, 2)?;
    check_attrs(node, &["axis"])?;
    let t = input_type(node, 0);
    if !data::supported(t) || output_type(node, 0) != t || input_type(node, 1) != dtype::BOOL {
        return Err(super::op::util::bad_types(node, "any element type with a bool condition"));
    }
    let axis = match node.attr("axis") {
        None => None,
        Some(_) => Some(int_attr(node, "axis", 0)?),
    };
    if let (Some(a), Some(dims)) = (axis, input(node, 0).and_then(|v| v.dims.as_ref())) {
        let r = dims.len() as i64;
        if a < -r || a >= r {
            return Err(format!("Compress axis {a} is out of range for rank {r}"));
        }
    }
    Ok(Arc::new(Compress { axis }))
}

impl Compress {
    /// The input as `[outer, n, inner]` along the axis, and the axis (None: flattened).
    fn view(&self, s: &[usize]) -> Result<([usize; 3], Option<usize>), String> {
        let Some(a) = self.axis else { return Ok(([1, s.iter().product(), 1], None)) };
        let r = s.len() as i64;
        if a < -r || a >= r {
            return Err(format!("axis {a} is out of range for rank {r}"));
        }
        let a = if a < 0 { a + r } else { a } as usize;
        Ok(([s[..a].iter().product(), s[a], s[a + 1..].iter().product()], Some(a)))
    }
}

/// The condition's entries, checked against the axis length `n`.
fn condition<'a>(d: Data<'a>, n: usize) -> Result<&'a [u8], String> {
    let Data::Bool(c) = d else { return Err("the condition is not bool".into()) };
    if c.len() > n {
        return Err(format!("the condition has {} entries for an axis of {n}", c.len()));
    }
    Ok(c)
}

impl Op for Compress {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        if x.shapes[1].len() != 1 {
            return Err(format!("the condition must be 1-D, got rank {}", x.shapes[1].len()).into());
        }
        let ([_, n, _], axis) = self.view(x.shapes[0])?;
        let kept = condition(x.data(1)?, n)?.iter().filter(|&&c| c != 0).count();
        Ok(match axis {
            None => Shape::from_slice(&[kept]),
            Some(a) => x.shapes[0].iter().enumerate().map(|(k, &d)| if k == a { kept } else { d }).collect(),
        })
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (view, _) = self.view(x.shapes[0])?;
        let cond = condition(x.ins[1], view[1])?;
        move_any(x.ins[0], out, &Pick { view, cond })
    }
}

/// Copies the slices whose condition entry is true, outer block by outer block.
struct Pick<'a> {
    view: [usize; 3],
    cond: &'a [u8],
}

impl Move for Pick<'_> {
    fn apply<T: Copy + Default + PartialEq + Send + Sync>(&self, x: &[T], y: &mut [T]) {
        let [outer, n, inner] = self.view;
        let mut at = 0;
        for o in 0..outer {
            for (i, _) in self.cond.iter().enumerate().filter(|(_, &c)| c != 0) {
                y[at..at + inner].copy_from_slice(&x[(o * n + i) * inner..][..inner]);
                at += inner;
            }
        }
    }
}
