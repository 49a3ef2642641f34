//! DeformConv (opsets 19 and 22): a 2-D convolution whose taps sample the input at
//! learned offsets (bilinear, zero outside), optionally masked, on float32. The math is
//! `rivet_kernels::deform`.

use std::sync::Arc;

use rivet_kernels::deform::{deform_conv, DeformGeometry};

use super::op::util::{check_attrs, check_inputs, input, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::{int_attr, ints_attr};

#[derive(Debug)]
struct DeformConv {
    kernel: Option<[usize; 2]>,
    stride: [usize; 2],
    dilation: [usize; 2],
    /// Begin (h, w), then end (h, w).
    pads: [usize; 4],
    group: usize,
    offset_group: usize,
    has_bias: bool,
    has_mask: bool,
}

pub fn compile(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 3, 5)?;
    check_attrs(node, &["strides", "pads", "offset_group", "kernel_shape", "group", "dilations"])?;
    let floats = (0..node.inputs.len()).all(|k| input(node, k).is_none_or(|v| v.elem_type == dtype::FLOAT));
    if !floats || input_type(node, 0) != dtype::FLOAT || output_type(node, 0) != dtype::FLOAT {
        return Err(super::op::util::bad_types(node, "float32"));
    }
    if let Some(d) = input(node, 0).and_then(|v| v.dims.as_ref()) {
        if d.len() != 4 {
            return Err(format!("DeformConv on rank {} (Rivet runs 2-D: [N, C, H, W])", d.len()));
        }
    }
    let pair = |name: &str, default: usize, positive: bool| -> Result<[usize; 2], String> {
        match ints_attr(node, name)? {
            None => Ok([default; 2]),
            Some(v) if v.len() == 2 && v.iter().all(|&d| d > 0 || (!positive && d == 0)) => {
                Ok([v[0] as usize, v[1] as usize])
            }
            Some(v) => Err(format!(
                "DeformConv {name} {v:?} is not two {} values",
                if positive { "positive" } else { "non-negative" }
            )),
        }
    };
    let kernel = match ints_attr(node, "kernel_shape")? {
        None => None,
        Some(_) => Some(pair("kernel_shape", 1, true)?),
    };
    let pads = match ints_attr(node, "pads")? {
        None => [0; 4],
        Some(p) if p.len() == 4 && p.iter().all(|&d| d >= 0) => {
            [p[0] as usize, p[1] as usize, p[2] as usize, p[3] as usize]
        }
        Some(p) => return Err(format!("DeformConv pads {p:?} is not four non-negative values")),
    };
    let count = |name: &str| -> Result<usize, String> {
        let v = int_attr(node, name, 1)?;
        if !(1..=1 << 20).contains(&v) {
            return Err(format!("DeformConv {name} {v} is not positive"));
        }
        Ok(v as usize)
    };
    Ok(Arc::new(DeformConv {
        kernel,
        stride: pair("strides", 1, true)?,
        dilation: pair("dilations", 1, true)?,
        pads,
        group: count("group")?,
        offset_group: count("offset_group")?,
        has_bias: input(node, 3).is_some(),
        has_mask: input(node, 4).is_some(),
    }))
}

impl DeformConv {
    /// The geometry from the inputs' shapes (X, W, offset, then B and mask if present).
    fn geometry(&self, s: &[&[usize]]) -> Result<(DeformGeometry, usize), String> {
        let (x, w, off) = (s[0], s[1], s[2]);
        if x.len() != 4 || w.len() != 4 || off.len() != 4 {
            return Err("X, W and offset must be 4-D".into());
        }
        let (n, c, in_h, in_w) = (x[0], x[1], x[2], x[3]);
        let kernel = [w[2], w[3]];
        if self.kernel.is_some_and(|k| k != kernel) {
            return Err(format!("kernel_shape {:?} differs from W's {kernel:?}", self.kernel));
        }
        let (oc, group, og) = (w[0], self.group, self.offset_group);
        if w[1] * group != c || oc % group != 0 || c % og != 0 {
            return Err(format!("{c} channels, W {w:?}, group {group} and offset_group {og} do not agree"));
        }
        let out = |a: usize, len: usize| -> Result<usize, String> {
            let span = self.dilation[a] * (kernel[a].max(1) - 1) + 1;
            let padded = len + self.pads[a] + self.pads[a + 2];
            if padded < span {
                return Err(format!("the kernel span {span} is larger than the padded input {padded}"));
            }
            Ok((padded - span) / self.stride[a] + 1)
        };
        let (out_h, out_w) = (out(0, in_h)?, out(1, in_w)?);
        let taps = kernel[0] * kernel[1];
        if off != [n, og * taps * 2, out_h, out_w] {
            return Err(format!("offset {off:?} is not [{n}, {}, {out_h}, {out_w}]", og * taps * 2));
        }
        let mut k = 3;
        if self.has_bias {
            if s[k] != [oc] {
                return Err(format!("B {:?} is not [{oc}]", s[k]));
            }
            k += 1;
        }
        if self.has_mask && s[k] != [n, og * taps, out_h, out_w] {
            return Err(format!("mask {:?} is not [{n}, {}, {out_h}, {out_w}]", s[k], og * taps));
        }
        let g = DeformGeometry {
            channels: c,
            in_h,
            in_w,
            out_channels: oc,
            out_h,
            out_w,
            kernel,
            stride: self.stride,
            dilation: self.dilation,
            pad: [self.pads[0], self.pads[1]],
            group,
            offset_group: og,
        };
        Ok((g, n))
    }
}

impl Op for DeformConv {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (g, n) = self.geometry(x.shapes)?;
        Ok(Shape::from_slice(&[n, g.out_channels, g.out_h, g.out_w]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (g, n) = self.geometry(x.shapes)?;
        let f = |k: usize| x.ins.get(k).and_then(|d: &Data<'_>| d.f32());
        let (Some(xs), Some(w), Some(off)) = (f(0), f(1), f(2)) else { return Err("DeformConv runs float32".into()) };
        let bias = if self.has_bias { f(3) } else { None };
        let mask = if self.has_mask { f(if self.has_bias { 4 } else { 3 }) } else { None };
        let y = out.f32().ok_or("DeformConv runs float32")?;
        let positions = g.out_h * g.out_w;
        let taps = g.kernel[0] * g.kernel[1];
        let (xi, oi, mi, yi) = (
            g.channels * g.in_h * g.in_w,
            g.offset_group * taps * 2 * positions,
            g.offset_group * taps * positions,
            g.out_channels * positions,
        );
        for b in 0..n {
            let m = mask.map(|m| &m[b * mi..(b + 1) * mi]);
            deform_conv(
                &xs[b * xi..(b + 1) * xi],
                w,
                &off[b * oi..(b + 1) * oi],
                m,
                bias,
                &g,
                &mut x.scratch.f32,
                &mut y[b * yi..(b + 1) * yi],
            );
        }
        Ok(())
    }
}
