//! Reading attributes and constant inputs of a node, and the builders of the ops whose
//! kernels take more than a default.

use super::kernel::{Axes, Kernel};
use crate::graph::{AttrValue, NodeDesc};
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

pub(super) fn squeeze_axes(node: &NodeDesc) -> Result<Axes, String> {
    let axes = if node.since_version < 13 { ints_attr(node, "axes")? } else { const_i64(node, 1, "axes")? };
    Axes::new(&axes.unwrap_or_default())
}
