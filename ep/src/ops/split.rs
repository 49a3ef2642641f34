//! Split: one step per output, each part `part` of the input along `axis`; the sizes
//! given (the `split` attribute, a constant, or int64 data read at Run) or even parts.
//! Any element type.

use std::sync::Arc;

use super::moves::{check_data_then_constants, check_same_type, ints};
use super::op::util::{check_attrs, input, input_type};
use super::params::Axes;
use super::shape_rules::{normalize_axis, split_part};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{by_storage, Data, DataMut, Storage};
use crate::graph::{dtype, AttrValue, NodeDesc, Shape};
use crate::node_attrs::{const_i64, int_attr, ints_attr, runtime_i64};

/// Part `part` of a Split along `axis`: sizes given, or even parts (`exact`: they must
/// divide the axis; else the last part is smaller).
#[derive(Debug)]
struct SplitPart {
    axis: i64,
    part: u8,
    parts: u8,
    sizes: Option<Axes>,
    exact: bool,
    /// The sizes come from input 1's data at Run.
    sizes_at_run: bool,
}

pub fn split(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    check_data_then_constants(node, 2, true)?;
    check_attrs(node, &["axis", "split", "num_outputs"])?;
    let parts = node.outputs.len();
    if parts > 8 {
        return Err(format!("Split into {parts} parts: Rivet handles 8 at most"));
    }
    let sizes_at_run = node.since_version >= 13 && runtime_i64(node, 1);
    let sizes = if sizes_at_run {
        None
    } else if node.since_version >= 13 {
        if input(node, 1).is_some() && input(node, 1).and_then(|v| v.constant.as_ref()).is_none() {
            return Err("Split's sizes must be an int64 constant or fed at Run".into());
        }
        const_i64(node, 1, "split")?
    } else {
        ints_attr(node, "split")?
    };
    if let Some(n) = node.attr("num_outputs") {
        if *n != AttrValue::Int(parts as i64) {
            return Err("Split num_outputs differs from its output count".into());
        }
    }
    if let Some(s) = &sizes {
        if s.len() != parts || s.iter().any(|&d| d < 0) {
            return Err(format!("Split sizes {s:?} for {parts} outputs"));
        }
    }
    let op = SplitPart {
        axis: int_attr(node, "axis", 0)?,
        part: output as u8,
        parts: parts as u8,
        sizes: sizes.as_deref().map(Axes::new).transpose()?,
        // Before opset 18 the parts must be equal; from 18 the last one may be smaller.
        exact: node.since_version < 18,
        sizes_at_run,
    };
    check_same_type(node, &[0])?;
    if output > 0 {
        let (out, want) = (node.outputs[output].as_ref().expect("a present output"), input_type(node, 0));
        if out.elem_type != want {
            return Err(format!(
                "{} output {output} '{}' is {}, expected {}",
                node.op_type,
                out.name,
                dtype::name(out.elem_type),
                dtype::name(want)
            ));
        }
    }
    Ok(Arc::new(op))
}

impl SplitPart {
    /// Where the part starts along the axis, its length, and the axis.
    fn part<'d>(
        &self,
        x: &[usize],
        sizes_data: impl FnOnce() -> Result<Data<'d>, ShapeError>,
    ) -> Result<(usize, usize, usize), ShapeError> {
        let sizes = if self.sizes_at_run { Some(Axes::new(&ints(sizes_data()?)?)?) } else { self.sizes };
        let a = normalize_axis(self.axis, x.len(), false)?;
        if x.is_empty() {
            return Err("Split needs rank 1 or more".into());
        }
        let (start, size) = split_part(x[a], self.parts as usize, self.part as usize, sizes, self.exact)?;
        Ok((start, size, a))
    }
}

impl Op for SplitPart {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        let (_, size, a) = self.part(s, || x.data(1))?;
        let mut out = Shape::from_slice(s);
        out[a] = size;
        Ok(out)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let (start, size, a) = self.part(s, || Ok(x.ins[1])).map_err(|e| match e {
            ShapeError::Invalid(why) => why,
            ShapeError::NeedsData => "its sizes are not known".into(),
        })?;
        by_storage!(out, copy_part(&x, a, start, size))
    }
}

fn copy_part<T: Storage>(x: &RunIn<'_, '_>, a: usize, start: usize, size: usize, y: &mut [T]) -> Result<(), String> {
    let s = x.shapes[0];
    let v = T::get(x.ins[0]).ok_or("element types differ from the plan's")?;
    let inner: usize = s[a + 1..].iter().product();
    let (row, take) = (s[a] * inner, size * inner);
    if take > 0 {
        for (src, dst) in v.chunks(row).zip(y.chunks_mut(take)) {
            dst.copy_from_slice(&src[start * inner..start * inner + take]);
        }
    }
    Ok(())
}
