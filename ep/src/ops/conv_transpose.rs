//! ConvTranspose on float32 inputs of 1 to 3 spatial axes (fewer run with leading axes
//! of size 1): groups, strides, dilations, pads or auto_pad, output_padding and
//! output_shape.

use std::sync::Arc;

use rivet_kernels::conv;

use super::claim::{data_inputs, float32_types, outputs};
use super::geometry::{spatial, windowed, within_limit};
use super::op::util::check_attrs;
use super::params::{pads_attr, per_axis, spatial_axes, AutoPad};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::DataMut;
use crate::graph::{NodeDesc, Shape, ShapeText};
use crate::node_attrs::{int_attr, ints_attr, string_attr};

const ATTRS: &[&str] =
    &["auto_pad", "dilations", "group", "kernel_shape", "output_padding", "output_shape", "pads", "strides"];

/// ConvTranspose's attributes, per (depth, height, width): nodes of fewer spatial axes
/// have leading axes of size 1.
#[derive(Debug)]
struct ConvTranspose {
    group: usize,
    /// Per (depth, height, width), as `Window`'s.
    strides: [usize; 3],
    dilations: [usize; 3],
    /// Before each axis, then after each axis.
    pads: [usize; 6],
    output_padding: [usize; 3],
    /// `output_shape`'s spatial dims (0: not given).
    output_shape: [usize; 3],
    auto_pad: AutoPad,
}

/// ConvTranspose: the attributes, widened to three spatial axes.
pub fn conv_transpose(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    data_inputs(node, 2, 3)?;
    outputs(node, false)?;
    check_attrs(node, ATTRS)?;
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
    let op = ConvTranspose {
        group: usize::try_from(group).ok().filter(|&g| g > 0).ok_or(format!("group {group}"))?,
        strides,
        dilations,
        pads,
        output_padding,
        output_shape,
        auto_pad,
    };
    float32_types(node)?;
    Ok(Arc::new(op))
}

/// ConvTranspose's sizes, per (depth, height, width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Geometry {
    input: [usize; 3],
    kernel: [usize; 3],
    out: [usize; 3],
    /// Negative: the output starts before the first input's footprint.
    pad_begin: [i64; 3],
    out_channels: usize,
}

/// Output size and padding of a ConvTranspose of `x` ([N, C, ...] with 1 to 3 spatial
/// axes) by weights `w` ([C, M / group, ...]), per the ONNX rules for output_shape and
/// auto_pad.
fn geometry(spec: &ConvTranspose, x: &[usize], w: &[usize]) -> Result<Geometry, String> {
    if w.len() != x.len() || !(3..=5).contains(&x.len()) || w[0] != x[1] || !x[1].is_multiple_of(spec.group) {
        return Err(format!("weights {w:?} do not match the input and group {}", spec.group));
    }
    let (input, kernel) = (spatial(x), spatial(w));
    let mut out = [0usize; 3];
    let mut pad_begin = [0i64; 3];
    for a in 0..3 {
        let span = (kernel[a] - 1) * spec.dilations[a] + 1;
        let full = spec.strides[a] * (input[a].max(1) - 1) + spec.output_padding[a] + span;
        let want = if spec.output_shape[a] > 0 {
            Some(spec.output_shape[a])
        } else if matches!(spec.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) {
            Some(input[a] * spec.strides[a])
        } else {
            None
        };
        match want {
            Some(o) => {
                // May be negative (an output_shape larger than the full result): floor
                // division, as the ONNX definition's.
                let total = full as i64 - o as i64;
                let half = total.div_euclid(2);
                // SAME_UPPER puts the larger half at the end; otherwise at the begin.
                pad_begin[a] = if spec.auto_pad == AutoPad::SameUpper { half } else { total - half };
                out[a] = o;
            }
            None => {
                let (b, e) = if spec.auto_pad == AutoPad::Valid { (0, 0) } else { (spec.pads[a], spec.pads[a + 3]) };
                out[a] = full.checked_sub(b + e).ok_or("pads larger than the output")?;
                pad_begin[a] = b as i64;
            }
        }
    }
    Ok(Geometry { input, kernel, out, pad_begin, out_channels: w[1] * spec.group })
}

/// The product's columns and the GEMM's packing buffers, kept by the step between Runs.
#[derive(Default)]
struct Scratch {
    cols: Vec<f32>,
    gemm: rivet_kernels::nn::GemmScratch,
}

impl Op for ConvTranspose {
    fn halves_in_f32(&self) -> bool {
        true
    }

    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (xs, ws) = (x.shapes[0], x.shapes[1]);
        let g = geometry(self, xs, ws)?;
        if let Some(&b) = x.shapes.get(2) {
            if b != [g.out_channels] {
                return Err(format!("bias of shape {} is not [{}]", ShapeText(b), g.out_channels).into());
            }
        }
        Ok(within_limit(windowed(xs, g.out_channels, g.out))?)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let mismatch = || "element types differ from the plan's".to_string();
        let (xs, ws) = (x.shapes[0], x.shapes[1]);
        let g = geometry(self, xs, ws)?;
        let (input, w, y) = (x.ins[0].f32(), x.ins[1].f32(), out.f32());
        let (Some(input), Some(w), Some(y)) = (input, w, y) else { return Err(mismatch()) };
        let bias = match x.ins.get(2) {
            Some(b) => Some(b.f32().ok_or_else(mismatch)?),
            None => None,
        };
        let scratch = x.scratch.state::<Scratch>();
        conv::conv_transpose(
            input,
            w,
            bias,
            xs[0],
            xs[1],
            self.group,
            conv::ConvTransposeDims {
                input: g.input,
                kernel: g.kernel,
                out: g.out,
                pad_begin: g.pad_begin,
                strides: self.strides,
                dilations: self.dilations,
                out_channels: g.out_channels,
            },
            y,
            &mut scratch.cols,
            &mut scratch.gemm,
        );
        Ok(())
    }
}
