//! Reading attributes and constant inputs of a node, and the builders of the ops whose
//! kernels take more than a default.

use super::kernel::{AutoPad, Axes, Kernel, Window};
use crate::graph::{AttrValue, Constant, NodeDesc};
pub(super) use crate::node_attrs::*;

pub(super) fn softmax(node: &NodeDesc, log: bool) -> Result<Kernel, String> {
    let legacy = node.since_version < 13;
    let axis = int_attr(node, "axis", if legacy { 1 } else { -1 })?;
    Ok(Kernel::Softmax { axis, log, legacy })
}

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

/// The spatial axes (1 to 3) of a window op's input, from its declared rank.
fn spatial_axes(node: &NodeDesc) -> Result<usize, String> {
    // A convolution's weight has the input's rank: it fixes an input of unknown rank.
    let weighted = matches!(node.op_type.as_str(), "Conv" | "ConvTranspose");
    let dims = |k: usize| input(node, k).and_then(|v| v.dims.as_ref());
    match dims(0).or_else(|| if weighted { dims(1) } else { None }) {
        Some(dims) if (3..=5).contains(&dims.len()) => Ok(dims.len() - 2),
        Some(dims) => Err(format!("{} on rank {} (Rivet runs 1-D, 2-D and 3-D)", node.op_type, dims.len())),
        None => Err(format!("{} input of unknown rank", node.op_type)),
    }
}

/// An attribute with a value per spatial axis (`n` of them), widened to (depth, height,
/// width) with `neutral` on the leading axes; `default` on every axis when absent.
fn per_axis(node: &NodeDesc, name: &str, n: usize, default: usize, neutral: usize) -> Result<[usize; 3], String> {
    match ints_attr(node, name)? {
        None => Ok([default; 3]),
        Some(v) if v.len() == n && v.iter().all(|&d| d >= 0) => {
            let mut out = [neutral; 3];
            v.iter().enumerate().for_each(|(i, &d)| out[3 - n + i] = d as usize);
            Ok(out)
        }
        Some(v) => Err(format!("{name} {v:?} is not {n} non-negative values")),
    }
}

/// `pads` (begins, then ends, per spatial axis), widened as `per_axis` does.
fn pads_attr(node: &NodeDesc, n: usize) -> Result<[usize; 6], String> {
    match ints_attr(node, "pads")? {
        None => Ok([0; 6]),
        Some(v) if v.len() == 2 * n && v.iter().all(|&d| d >= 0) => {
            let mut out = [0; 6];
            for i in 0..n {
                out[3 - n + i] = v[i] as usize;
                out[6 - n + i] = v[n + i] as usize;
            }
            Ok(out)
        }
        Some(v) => Err(format!("pads {v:?} is not {} non-negative values", 2 * n)),
    }
}

/// Reads a window op's attributes (1 to 3 spatial axes); other ranks are not claimed.
pub(super) fn window(node: &NodeDesc, kernel_required: bool) -> Result<Window, String> {
    let n = spatial_axes(node)?;
    let positive = |name: &str| -> Result<[usize; 3], String> {
        let v = per_axis(node, name, n, 1, 1)?;
        if v.contains(&0) {
            return Err(format!("{name} must be positive"));
        }
        Ok(v)
    };
    let kernel = match ints_attr(node, "kernel_shape")? {
        None if !kernel_required => [0; 3],
        None => return Err("kernel_shape is required".into()),
        Some(_) => positive("kernel_shape")?,
    };
    let pads = pads_attr(node, n)?;
    let auto_pad = match node.attr("auto_pad") {
        None => AutoPad::NotSet,
        Some(AttrValue::String(s)) => match s.as_str() {
            "NOTSET" => AutoPad::NotSet,
            "VALID" => AutoPad::Valid,
            "SAME_UPPER" => AutoPad::SameUpper,
            "SAME_LOWER" => AutoPad::SameLower,
            other => return Err(format!("auto_pad '{other}'")),
        },
        Some(other) => return Err(format!("auto_pad {other:?}")),
    };
    // storage_order only changes MaxPool's Indices output (read with it).
    if !matches!(int_attr(node, "storage_order", 0)?, 0 | 1) {
        return Err("storage_order must be 0 or 1".into());
    }
    Ok(Window {
        kernel,
        strides: positive("strides")?,
        dilations: positive("dilations")?,
        pads,
        auto_pad,
        ceil_mode: int_attr(node, "ceil_mode", 0)? != 0,
    })
}

pub(super) fn norm(node: &NodeDesc, rms: bool) -> Result<Kernel, String> {
    if int_attr(node, "stash_type", 1)? != 1 {
        return Err("stash_type other than float".into());
    }
    Ok(Kernel::Norm { axis: int_attr(node, "axis", -1)?, epsilon: float_attr(node, "epsilon", 1e-5)?, rms })
}

pub(super) fn squeeze_axes(node: &NodeDesc) -> Result<Axes, String> {
    let axes = if node.since_version < 13 { ints_attr(node, "axes")? } else { const_i64(node, 1, "axes")? };
    Axes::new(&axes.unwrap_or_default())
}

/// An int64 input at position `pos`: a constant, or read at Run (empty when omitted).
pub(super) fn ints_input(node: &NodeDesc, pos: usize, what: &str) -> Result<super::kernel::ReduceAxes, String> {
    if runtime_i64(node, pos) {
        return Ok(super::kernel::ReduceAxes::AtRun);
    }
    Ok(super::kernel::ReduceAxes::Const(Axes::new(&const_i64(node, pos, what)?.unwrap_or_default())?))
}

/// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
pub(super) fn loss(node: &NodeDesc, softmax: bool) -> Result<Kernel, String> {
    let reduction = match string_attr(node, "reduction", "mean")? {
        "none" => super::kernel::Reduction::None,
        "sum" => super::kernel::Reduction::Sum,
        "mean" => super::kernel::Reduction::Mean,
        other => return Err(format!("reduction '{other}' is not none, sum or mean")),
    };
    let ignore_index = match node.attr("ignore_index") {
        Some(AttrValue::Int(i)) => Some(*i),
        Some(_) => return Err("ignore_index must be an int".into()),
        None => None,
    };
    Ok(Kernel::Loss { reduction, ignore_index, softmax })
}

/// Attention (opset 23-24).
pub(super) fn attention(node: &NodeDesc) -> Result<Kernel, String> {
    let has = |i: usize| input(node, i).is_some();
    let (mask, past, nonpad) = (has(3), has(4) || has(5), has(6));
    if past && !(has(4) && has(5)) {
        return Err("Attention needs both past key and past value, or neither".into());
    }
    if past && nonpad {
        return Err("Attention with both a cache and nonpad_kv_seqlen".into());
    }
    let qk_mode = int_attr(node, "qk_matmul_output_mode", 0)?;
    if !(0..=3).contains(&qk_mode) {
        return Err(format!("qk_matmul_output_mode {qk_mode}"));
    }
    let heads = |name| -> Result<usize, String> {
        let h = int_attr(node, name, 0)?;
        usize::try_from(h).map_err(|_| format!("{name} {h}"))
    };
    let scale = match node.attr("scale") {
        Some(AttrValue::Float(s)) => Some(*s),
        Some(_) => return Err("scale must be a float".into()),
        None => None,
    };
    Ok(Kernel::Attention(super::kernel::AttentionSpec {
        q_heads: heads("q_num_heads")?,
        kv_heads: heads("kv_num_heads")?,
        scale,
        softcap: float_attr(node, "softcap", 0.0)?,
        causal: int_attr(node, "is_causal", 0)? != 0,
        qk_mode: qk_mode as u8,
        mask,
        past,
        nonpad,
        out: rivet_kernels::attention::AttnOut::Y,
    }))
}

/// ScatterElements (`elements`) and ScatterND.
pub(super) fn scatter(node: &NodeDesc, elements: bool) -> Result<Kernel, String> {
    use super::kernel::ScatterReduction as R;
    let reduction = match string_attr(node, "reduction", "none")? {
        "none" => R::None,
        "add" => R::Add,
        "mul" => R::Mul,
        "max" => R::Max,
        "min" => R::Min,
        other => return Err(format!("reduction '{other}'")),
    };
    let axis = if elements { Some(int_attr(node, "axis", 0)?) } else { None };
    Ok(Kernel::Scatter { axis, reduction })
}

/// OneHot: the depth must be a constant (it sets the output shape).
pub(super) fn one_hot(node: &NodeDesc) -> Result<Kernel, String> {
    let depth = match input(node, 1).and_then(|v| v.constant.as_ref()) {
        Some(Constant::I64(d)) if d.len() == 1 => Some(d[0]),
        Some(Constant::F32(d)) if d.len() == 1 && d[0].fract() == 0.0 => Some(d[0] as i64),
        Some(_) => return Err("OneHot's constant depth must be a float32 or int64 scalar".into()),
        // Fed at Run: read when the output's shape is inferred.
        None => None,
    };
    if let Some(depth) = depth.filter(|&d| d < 1) {
        return Err(format!("OneHot depth {depth}"));
    }
    Ok(Kernel::OneHot { axis: int_attr(node, "axis", -1)?, depth })
}

/// ConvTranspose on 1 to 3 spatial axes: the attributes, widened to three.
pub(super) fn conv_transpose(node: &NodeDesc) -> Result<Kernel, String> {
    let n = spatial_axes(node)?;
    let strides = per_axis(node, "strides", n, 1, 1)?;
    let dilations = per_axis(node, "dilations", n, 1, 1)?;
    let pads = pads_attr(node, n)?;
    let output_padding = per_axis(node, "output_padding", n, 0, 0)?;
    let output_shape = per_axis(node, "output_shape", n, 0, 1)?;
    if ints_attr(node, "output_shape")?.is_some() && output_shape.contains(&0) {
        return Err(format!("output_shape {output_shape:?}"));
    }
    if strides.iter().chain(&dilations).any(|&d| d == 0) {
        return Err("strides and dilations must be positive".into());
    }
    let auto_pad = match string_attr(node, "auto_pad", "NOTSET")? {
        "NOTSET" => AutoPad::NotSet,
        "VALID" => AutoPad::Valid,
        "SAME_UPPER" => AutoPad::SameUpper,
        "SAME_LOWER" => AutoPad::SameLower,
        other => return Err(format!("auto_pad '{other}'")),
    };
    let group = int_attr(node, "group", 1)?;
    Ok(Kernel::ConvTranspose(super::kernel::ConvTransposeSpec {
        group: usize::try_from(group).ok().filter(|&g| g > 0).ok_or(format!("group {group}"))?,
        strides,
        dilations,
        pads,
        output_padding,
        output_shape,
        auto_pad,
    }))
}
