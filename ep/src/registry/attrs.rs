//! Reading attributes and constant inputs of a node, and the builders of the ops whose
//! kernels take more than a default.

use super::kernel::{Axes, Kernel, PadSpec};
use crate::graph::{AttrValue, Constant, NodeDesc};
pub(super) use crate::node_attrs::*;
pub(super) use crate::ops::params::window;

pub(super) fn clip(node: &NodeDesc) -> Result<Kernel, String> {
    if node.since_version < 11 {
        return Ok(Kernel::Clip {
            min: float_attr(node, "min", f32::NEG_INFINITY)?,
            max: float_attr(node, "max", f32::INFINITY)?,
        });
    }
    let float = input(node, 0).is_some_and(|v| v.elem_type == crate::graph::dtype::FLOAT);
    let (min, max) = (const_f32_scalar(node, 1, "Clip min"), const_f32_scalar(node, 2, "Clip max"));
    match (min, max) {
        // Other types than float32 read their bounds at Run, in their own type.
        _ if !float => Ok(Kernel::ClipInputs { min: input(node, 1).is_some(), max: input(node, 2).is_some() }),
        (Ok(min), Ok(max)) => {
            Ok(Kernel::Clip { min: min.unwrap_or(f32::NEG_INFINITY), max: max.unwrap_or(f32::INFINITY) })
        }
        // Bounds that are not constants are read at Run.
        _ => Ok(Kernel::ClipInputs { min: input(node, 1).is_some(), max: input(node, 2).is_some() }),
    }
}

/// Dropout: the identity without a `training_mode` input; with one, read at Run.
pub(super) fn dropout(node: &NodeDesc) -> Result<Kernel, String> {
    if input(node, 2).is_none() {
        return Ok(Kernel::Identity);
    }
    let seed = match node.attr("seed") {
        None => None,
        Some(AttrValue::Int(s)) if (0..=i64::from(u32::MAX)).contains(s) => Some(*s),
        Some(other) => return Err(format!("Dropout seed {other:?} is not a 32-bit unsigned int")),
    };
    Ok(Kernel::Dropout { seed, ratio: input(node, 1).is_some() })
}

pub(super) fn pad(node: &NodeDesc) -> Result<Kernel, String> {
    let (mut at_run, mut value_at_run) = (false, false);
    let (pads, value) = if node.since_version < 11 {
        (ints_attr(node, "pads")?.ok_or("Pad needs pads")?, float_attr(node, "value", 0.0)?)
    } else {
        let pads = if runtime_i64(node, 1) {
            at_run = true;
            Vec::new()
        } else {
            const_i64(node, 1, "pads")?.ok_or("Pad needs pads")?
        };
        // A float32 constant fill is kept in the kernel; any other (another type, or fed
        // at Run) is read at Run as a data input of the data's type.
        let value = match input(node, 2) {
            None => 0.0,
            Some(v) => match &v.constant {
                Some(Constant::F32(d)) if d.len() == 1 => d[0],
                _ => {
                    value_at_run = true;
                    0.0
                }
            },
        };
        (pads, value)
    };
    let axes_at_run = runtime_i64(node, 3);
    let axes = if input(node, 3).is_some() && !axes_at_run {
        const_i64(node, 3, "axes")?.ok_or("Pad's axes must be a constant")?
    } else {
        Vec::new()
    };
    if pads.len() > 16 || pads.iter().any(|&p| p < 0) {
        return Err(format!("pads {pads:?}: Rivet pads rank <= 8 by non-negative amounts"));
    }
    let mode = match string_attr(node, "mode", "constant")? {
        "constant" => rivet_kernels::nn::PadMode::Constant(value),
        "reflect" => rivet_kernels::nn::PadMode::Reflect,
        "edge" => rivet_kernels::nn::PadMode::Edge,
        "wrap" if node.since_version >= 19 => rivet_kernels::nn::PadMode::Wrap,
        other => return Err(format!("Pad mode '{other}'")),
    };
    let mut arr = [0usize; 16];
    pads.iter().enumerate().for_each(|(i, &p)| arr[i] = p as usize);
    Ok(Kernel::Pad(PadSpec {
        len: pads.len() as u8,
        pads: arr,
        mode,
        at_run,
        axes: Axes::new(&axes)?,
        axes_at_run,
        value_at_run,
    }))
}

pub(super) fn squeeze_axes(node: &NodeDesc) -> Result<Axes, String> {
    let axes = if node.since_version < 13 { ints_attr(node, "axes")? } else { const_i64(node, 1, "axes")? };
    Axes::new(&axes.unwrap_or_default())
}

/// A reduction: axes from the attribute (before `input_since`) or the second input.
pub(super) fn reduce(node: &NodeDesc, op: rivet_kernels::nn::ReduceOp, input_since: i32) -> Result<Kernel, String> {
    let axes = if node.since_version < input_since {
        super::kernel::ReduceAxes::Const(Axes::new(&ints_attr(node, "axes")?.unwrap_or_default())?)
    } else if runtime_i64(node, 1) {
        super::kernel::ReduceAxes::AtRun
    } else {
        super::kernel::ReduceAxes::Const(Axes::new(&const_i64(node, 1, "axes")?.unwrap_or_default())?)
    };
    Ok(Kernel::Reduce {
        op,
        axes,
        keepdims: int_attr(node, "keepdims", 1)? != 0,
        noop_empty: int_attr(node, "noop_with_empty_axes", 0)? != 0,
    })
}

/// An int64 input at position `pos`: a constant, or read at Run (empty when omitted).
pub(super) use crate::ops::int_input::ints_input;

/// Split: part 0's kernel (the plan adds the others from `Claim::extra`), with the sizes
/// from the `split` input or attribute, or even parts.
pub(super) fn split(node: &NodeDesc) -> Result<Kernel, String> {
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
        if *n != crate::graph::AttrValue::Int(parts as i64) {
            return Err("Split num_outputs differs from its output count".into());
        }
    }
    if let Some(s) = &sizes {
        if s.len() != parts || s.iter().any(|&d| d < 0) {
            return Err(format!("Split sizes {s:?} for {parts} outputs"));
        }
    }
    Ok(Kernel::SplitPart {
        axis: int_attr(node, "axis", 0)?,
        part: 0,
        parts: parts as u8,
        sizes: sizes.as_deref().map(Axes::new).transpose()?,
        // Before opset 18 the parts must be equal; from 18 the last one may be smaller.
        exact: node.since_version < 18,
        sizes_at_run,
    })
}
