//! Slice (opset 10 on): starts, ends and the optional axes and steps are int64 or int32
//! inputs (constants, or data read at Run), for any element type (float32 on the same
//! kernel as the others).

use std::sync::Arc;

use smallvec::SmallVec;

use super::moves::{check_data_then_constants, check_same_type, ints, Ints};
use super::op::util::check_attrs;
use super::shape_rules::{slice_plan, SlicePlan};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{by_storage, Data, DataMut, Storage};
use crate::graph::{dtype, NodeDesc, Shape};

#[derive(Debug)]
struct Slice {
    has_axes: bool,
    has_steps: bool,
}

pub fn slice(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_data_then_constants(node, 5, false)?;
    check_attrs(node, &[])?;
    let present = |i: usize| node.inputs.get(i).is_some_and(Option::is_some);
    if !present(1) || !present(2) {
        return Err("Slice needs starts and ends".into());
    }
    for v in node.inputs.iter().skip(1).flatten() {
        let index = matches!(v.elem_type, dtype::INT64 | dtype::INT32);
        if !index || !(v.constant.is_some() || v.at_run_ok) {
            return Err(format!("Slice parameter '{}' is not an int64 or int32 tensor of this graph", v.name));
        }
    }
    check_same_type(node, &[0])?;
    Ok(Arc::new(Slice { has_axes: present(3), has_steps: present(4) }))
}

impl Slice {
    /// The plan from the parameters' data (the present inputs after the first).
    fn plan<'d>(
        &self,
        x: &[usize],
        data: impl Iterator<Item = Result<Data<'d>, ShapeError>>,
    ) -> Result<SlicePlan, ShapeError> {
        let mut lists: SmallVec<[Ints; 4]> = SmallVec::new();
        for d in data {
            lists.push(ints(d?)?);
        }
        let params: SmallVec<[&[i64]; 4]> = lists.iter().map(|l| l.as_slice()).collect();
        Ok(slice_plan(x, &params, self.has_axes, self.has_steps)?)
    }
}

impl Op for Slice {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let plan = self.plan(x.shapes[0], (1..x.shapes.len()).map(|k| x.data(k)))?;
        Ok(plan.iter().map(|&(_, _, n)| n).collect())
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let plan = self.plan(x.shapes[0], x.ins[1..].iter().map(|&d| Ok(d))).map_err(|e| match e {
            ShapeError::Invalid(why) => why,
            ShapeError::NeedsData => "its parameters are not known".into(),
        })?;
        by_storage!(out, take(&x, &plan))
    }
}

fn take<T: Storage>(x: &RunIn<'_, '_>, plan: &SlicePlan, y: &mut [T]) -> Result<(), String> {
    let v = T::get(x.ins[0]).ok_or("element types differ from the plan's")?;
    rivet_kernels::typed::slice(v, x.shapes[0], plan, y);
    Ok(())
}
