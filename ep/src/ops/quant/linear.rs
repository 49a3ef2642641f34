//! QuantizeLinear (`y = clamp(round_half_even(x / scale) + zero_point)`), DequantizeLinear
//! (`y = (x - zero_point) · scale`) and DynamicQuantizeLinear (uint8, the scale and zero
//! point from the input's range), per tensor, per axis (`axis`) or per block
//! (`block_size` along `axis`), float32 with 8- and 16-bit integers (and int32 input to
//! DequantizeLinear) and, from opset 19, the 8-bit floats (`y = cast(x / scale)` rounded
//! to nearest even, saturating by `saturate`; `y = x · scale`: their zero point must be
//! zero), from opset 21 int4 and uint4, from opset 23 float4e2m1 (as the 8-bit floats,
//! always saturating), from opset 25 int2 and uint2. From opset 19, float16 data and scales too (QuantizeLinear's
//! input, DequantizeLinear's output), computed in float32. Not claimed: bfloat16 data or
//! scales, `precision` other than float32.

use std::sync::Arc;

use rivet_kernels::float8::e2m1;
use rivet_kernels::qgemm::{self, QInt};
use rivet_kernels::typed::{f16_to_f32, f32_to_f16};

use super::super::op::util::{bad_types, check_attrs, check_inputs, input, input_type, output_type};
use super::super::{Op, RunIn, ShapeError, ShapeIn};
use super::{float_at, int_at, numel};
use crate::data::{float8, Data, DataMut};
use crate::graph::dtype::{FLOAT, FLOAT16, FLOAT4E2M1, INT16, INT2, INT32, INT4, INT8, UINT16, UINT2, UINT4, UINT8};
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Quantize,
    Dequantize,
}

/// QuantizeLinear or DequantizeLinear.
#[derive(Debug)]
struct Linear {
    kind: Kind,
    axis: i64,
    /// 0: per tensor or per axis (by the scale's shape); else blocks of this length.
    block: usize,
    /// Quantizing to an 8-bit float: values beyond its range become its largest value
    /// (else NaN, or infinity for E5M2).
    saturate: bool,
}

/// QuantizeLinear dividing in float16 (`precision` float16, or a float16 scale from opset
/// 23): `x / scale` is taken in float32 from float16-rounded operands and rounded to
/// float16 (float32's quotient of two halves rounds to the correctly rounded half), then
/// quantized by a unit scale through the float32 op.
#[derive(Debug)]
struct HalfQuotient(Linear);

impl Op for HalfQuotient {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        self.0.shape(x)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let linear = &self.0;
        let l = linear.layout(x.shapes[0], x.shapes[1], x.shapes.get(2).copied())?;
        let (scale, zp) = (x.ins[1], x.ins.get(2).copied());
        let half = |v: f32| f16_to_f32(f32_to_f16(v));
        let n = x.shapes[0].iter().product::<usize>();
        let units = x.shapes[1].iter().product::<usize>();
        let wide = &mut x.scratch.f32;
        wide.clear();
        wide.resize(n + units, 1.0);
        let (quotients, ones) = wide.split_at_mut(n);
        let at = |k: usize| match x.ins[0] {
            Data::F16(h) => f16_to_f32(h[k]),
            Data::F32(v) => half(v[k]),
            _ => f32::NAN,
        };
        for_runs(&l, scale, None, |r, s, _| {
            let s = half(s);
            for k in r {
                quotients[k] = half(at(k) / s);
            }
        })?;
        linear.apply(&l, Data::F32(quotients), Data::F32(ones), zp, out)
    }
}

/// How the parameters map onto `x` seen as `[outer, dim, inner]` around the axis.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Per {
    Tensor,
    Axis,
    /// Blocks of this many along the axis: parameter `(o·blocks + d / block)·inner + i`.
    Block(usize),
}

#[derive(Clone, Copy, Debug)]
struct Layout {
    per: Per,
    outer: usize,
    dim: usize,
    inner: usize,
}

pub fn quantize(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["axis", "saturate", "block_size", "output_dtype", "precision"])?;
    check_inputs(node, 2, 3)?;
    let y = output_type(node, 0);
    let int_ok = matches!(y, UINT8 | INT8)
        || (node.since_version >= 21 && matches!(y, UINT16 | INT16 | UINT4 | INT4))
        || (node.since_version >= 19 && float8(y).is_some())
        || (node.since_version >= 23 && y == FLOAT4E2M1)
        || (node.since_version >= 25 && matches!(y, UINT2 | INT2));
    // float16 data and scale from opset 19, computed in float32.
    let x = input_type(node, 0);
    let float_ok = x == FLOAT || (node.since_version >= 19 && x == FLOAT16);
    if !float_ok || input_type(node, 1) != x || !int_ok {
        return Err(bad_types(
            node,
            "float32 or float16 (with a scale of its type) to uint8, int8, uint16, int16, uint4, int4, uint2, int2, an 8-bit float or float4e2m1",
        ));
    }
    if input(node, 2).is_some() && input_type(node, 2) != y {
        return Err(bad_types(node, "a zero point of the output's type"));
    }
    let dtype = int_attr(node, "output_dtype", 0)?;
    if dtype != 0 && crate::graph::dtype::from_onnx(dtype) != y {
        return Err(format!("QuantizeLinear output_dtype {dtype} differs from the output's type"));
    }
    // The division's type: `precision`, else (from opset 23) the scale's; before opset 23
    // float32 (as ORT divides).
    let precision = int_attr(node, "precision", 0)?;
    let half = match precision {
        0 => node.since_version >= 23 && x == FLOAT16,
        p if p == FLOAT as i64 => false,
        p if p == FLOAT16 as i64 => true,
        p => return Err(format!("QuantizeLinear precision {p} is not supported (float32 or float16)")),
    };
    let op = linear(node, Kind::Quantize)?;
    Ok(if half { Arc::new(HalfQuotient(op)) } else { Arc::new(op) })
}

pub fn dequantize(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["axis", "block_size", "output_dtype"])?;
    check_inputs(node, 2, 3)?;
    let x = input_type(node, 0);
    let int_ok = matches!(x, UINT8 | INT8 | INT32)
        || (node.since_version >= 21 && matches!(x, UINT16 | INT16 | UINT4 | INT4))
        || (node.since_version >= 19 && float8(x).is_some())
        || (node.since_version >= 23 && x == FLOAT4E2M1)
        || (node.since_version >= 25 && matches!(x, UINT2 | INT2));
    // A float16 scale (opset 19) gives float16, computed in float32 and rounded once.
    let y = output_type(node, 0);
    let float_ok = y == FLOAT || (node.since_version >= 19 && y == FLOAT16);
    if !int_ok || !float_ok || input_type(node, 1) != y {
        return Err(bad_types(
            node,
            "uint8, int8, uint16, int16, int32, uint4, int4, uint2, int2, an 8-bit float or float4e2m1 to float32 or float16 (the scale's type)",
        ));
    }
    if input(node, 2).is_some() && input_type(node, 2) != x {
        return Err(bad_types(node, "a zero point of the input's type"));
    }
    let dtype = int_attr(node, "output_dtype", 0)?;
    if dtype != 0 && crate::graph::dtype::from_onnx(dtype) != y {
        return Err(format!("DequantizeLinear output_dtype {dtype} differs from the output's type"));
    }
    Ok(Arc::new(linear(node, Kind::Dequantize)?))
}

fn linear(node: &NodeDesc, kind: Kind) -> Result<Linear, String> {
    let axis = int_attr(node, "axis", 1)?;
    let block = int_attr(node, "block_size", 0)?;
    if block < 0 {
        return Err(format!("{} block_size {block} is negative", node.op_type));
    }
    let saturate = int_attr(node, "saturate", 1)? != 0;
    Ok(Linear { kind, axis, block: block as usize, saturate })
}

impl Linear {
    /// Checks the scale's (and zero point's) shape against `x`'s and says how they apply.
    fn layout(&self, x: &[usize], scale: &[usize], zp: Option<&[usize]>) -> Result<Layout, String> {
        // Per tensor, the two may differ in rank: a scalar and a [1] (as ORT takes them).
        let one = |s: &[usize]| s.len() <= 1 && numel(s) == 1;
        if zp.is_some_and(|z| z != scale && !(self.block == 0 && one(z) && one(scale))) {
            return Err(format!("the zero point's shape {:?} differs from the scale's {scale:?}", zp.unwrap_or(&[])));
        }
        let total = numel(x);
        if self.block == 0 && scale.len() <= 1 && numel(scale) == 1 {
            return Ok(Layout { per: Per::Tensor, outer: 1, dim: 1, inner: total });
        }
        let r = x.len() as i64;
        let axis = if self.axis < 0 { self.axis + r } else { self.axis };
        if !(0..r).contains(&axis) {
            return Err(format!("axis {} is out of range for rank {r}", self.axis));
        }
        let a = axis as usize;
        let (outer, dim, inner) = (numel(&x[..a]), x[a], numel(&x[a + 1..]));
        if self.block == 0 {
            if scale.len() != 1 || scale[0] != dim {
                return Err(format!("a per-axis scale must be 1-D of length {dim} (axis {a} of {x:?}), is {scale:?}"));
            }
            return Ok(Layout { per: Per::Axis, outer, dim, inner });
        }
        let blocks = dim.div_ceil(self.block);
        let fits = scale.len() == x.len() && (0..x.len()).all(|d| scale[d] == if d == a { blocks } else { x[d] });
        if !fits {
            return Err(format!(
                "a blocked scale for {x:?} with block_size {} on axis {a} must have shape with {blocks} on the axis, is {scale:?}",
                self.block
            ));
        }
        Ok(Layout { per: Per::Block(self.block), outer, dim, inner })
    }
}

impl Op for Linear {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        self.layout(x.shapes[0], x.shapes[1], x.shapes.get(2).copied())?;
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let l = self.layout(x.shapes[0], x.shapes[1], x.shapes.get(2).copied())?;
        let (scale, zp) = (x.ins[1], x.ins.get(2).copied());
        // float16 data or output: through float32 in the scratch (grown once).
        let wide = &mut x.scratch.f32;
        if let Data::F16(h) = x.ins[0] {
            wide.clear();
            wide.extend(h.iter().map(|&v| f16_to_f32(v)));
            return self.apply(&l, Data::F32(wide), scale, zp, out);
        }
        if let DataMut::F16(y) = out {
            wide.clear();
            wide.resize(y.len(), 0.0);
            self.apply(&l, x.ins[0], scale, zp, &mut DataMut::F32(wide))?;
            y.iter_mut().zip(wide.iter()).for_each(|(o, &v)| *o = f32_to_f16(v));
            return Ok(());
        }
        self.apply(&l, x.ins[0], scale, zp, out)
    }
}

impl Linear {
    /// The float32 computation (the scale float32 or float16).
    fn apply(
        &self,
        l: &Layout,
        x: Data<'_>,
        scale: Data<'_>,
        zp: Option<Data<'_>>,
        out: &mut DataMut<'_>,
    ) -> Result<(), String> {
        let l = *l;
        // Bits of a sub-byte integer output (its range for QuantizeLinear).
        let width = crate::data::packed_width(out.elem_type()).unwrap_or(8) as i32;
        match (self.kind, x, out) {
            (Kind::Quantize, Data::F32(v), DataMut::U8(y)) => quantize_as(v, scale, zp, &l, y),
            (Kind::Quantize, Data::F32(v), DataMut::I8(y)) => quantize_as(v, scale, zp, &l, y),
            (Kind::Quantize, Data::F32(v), DataMut::U16(y)) => quantize_as(v, scale, zp, &l, y),
            (Kind::Quantize, Data::F32(v), DataMut::I16(y)) => quantize_as(v, scale, zp, &l, y),
            // The 4- and 2-bit integers are held a value a byte.
            (Kind::Dequantize, Data::U8(v) | Data::U4(v) | Data::U2(v), DataMut::F32(y)) => {
                dequantize_as(v, scale, zp, &l, y)
            }
            (Kind::Dequantize, Data::I8(v) | Data::I4(v) | Data::I2(v), DataMut::F32(y)) => {
                dequantize_as(v, scale, zp, &l, y)
            }
            (Kind::Dequantize, Data::U16(v), DataMut::F32(y)) => dequantize_as(v, scale, zp, &l, y),
            (Kind::Dequantize, Data::I16(v), DataMut::F32(y)) => dequantize_as(v, scale, zp, &l, y),
            (Kind::Dequantize, Data::I32(v), DataMut::F32(y)) => dequantize_as(v, scale, zp, &l, y),
            (Kind::Quantize, Data::F32(v), DataMut::U4(y) | DataMut::U2(y)) => {
                let top = (1 << width) - 1;
                for_runs(&l, scale, zp, |r, s, z| qgemm::quantize_in(&v[r.clone()], s, z, (0, top), &mut y[r]))
            }
            (Kind::Quantize, Data::F32(v), DataMut::I4(y) | DataMut::I2(y)) => {
                let half = 1 << (width - 1);
                for_runs(&l, scale, zp, |r, s, z| qgemm::quantize_in(&v[r.clone()], s, z, (-half, half - 1), &mut y[r]))
            }
            (Kind::Quantize, Data::F32(v), DataMut::F4E2M1(y)) => {
                float_zero_point(zp, e2m1::to_f32)?;
                for_runs(&l, scale, zp, |r, s, z| {
                    // The reference adds the (±0) zero point: -0 quantizes to +0 unless it is -0.
                    let zero = if z == 0x8 { -0.0 } else { 0.0 };
                    y[r.clone()].iter_mut().zip(&v[r]).for_each(|(o, &x)| *o = e2m1::from_f32(x / s + zero))
                })
            }
            (Kind::Dequantize, Data::F4E2M1(v), DataMut::F32(y)) => {
                float_zero_point(zp, e2m1::to_f32)?;
                for_runs(&l, scale, None, |r, s, _| {
                    y[r.clone()].iter_mut().zip(&v[r]).for_each(|(o, &x)| *o = e2m1::to_f32(x) * s)
                })
            }
            (Kind::Quantize, Data::F32(v), y) => {
                let f = float8(y.elem_type()).ok_or("input and output element types differ from the plan's")?;
                let y = <u8 as crate::data::Storage>::get_mut(y).ok_or("an 8-bit float output")?;
                float_zero_point(zp, |b| f.to_f32(b))?;
                for_runs(&l, scale, None, |r, s, _| {
                    y[r.clone()].iter_mut().zip(&v[r]).for_each(|(o, &x)| *o = f.from_f32(x / s, self.saturate))
                })
            }
            (Kind::Dequantize, x, DataMut::F32(y)) => {
                let f = float8(x.elem_type()).ok_or("input and output element types differ from the plan's")?;
                let v = <u8 as crate::data::Storage>::get(x).ok_or("an 8-bit float input")?;
                float_zero_point(zp, |b| f.to_f32(b))?;
                for_runs(&l, scale, None, |r, s, _| {
                    y[r.clone()].iter_mut().zip(&v[r]).for_each(|(o, &x)| *o = f.to_f32(x) * s)
                })
            }
            _ => Err("input and output element types differ from the plan's".into()),
        }
    }
}

/// A float zero point (an 8-bit float's, float4e2m1's: their codes decoded by `value`)
/// must be zero, ±0 (as ONNX's reference requires).
fn float_zero_point(zp: Option<Data<'_>>, value: impl Fn(u8) -> f32) -> Result<(), String> {
    let codes = zp.and_then(<u8 as crate::data::Storage>::get).unwrap_or(&[]);
    match codes.iter().find(|&&b| value(b) != 0.0) {
        Some(&b) => Err(format!("a float zero point must be zero, is {} ({b:#04x})", value(b))),
        None => Ok(()),
    }
}

/// Calls `f(x range, scale, zero point)` for each run of `x` sharing one parameter pair.
fn for_runs(
    l: &Layout,
    scale: Data<'_>,
    zp: Option<Data<'_>>,
    mut f: impl FnMut(std::ops::Range<usize>, f32, i32),
) -> Result<(), String> {
    let param = |k: usize| -> Result<(f32, i32), String> {
        let s = float_at(scale, k).ok_or("the scale has fewer elements than its shape")?;
        let z = match zp {
            Some(z) => int_at(z, k).ok_or("the zero point has fewer elements than its shape")?,
            None => 0,
        };
        Ok((s, z))
    };
    match l.per {
        Per::Tensor => {
            let (s, z) = param(0)?;
            f(0..l.inner, s, z);
        }
        Per::Axis => {
            for o in 0..l.outer {
                for d in 0..l.dim {
                    let (s, z) = param(d)?;
                    let at = (o * l.dim + d) * l.inner;
                    f(at..at + l.inner, s, z);
                }
            }
        }
        Per::Block(b) => {
            let blocks = l.dim.div_ceil(b);
            for o in 0..l.outer {
                for d in 0..l.dim {
                    let at = (o * l.dim + d) * l.inner;
                    for i in 0..l.inner {
                        let (s, z) = param((o * blocks + d / b) * l.inner + i)?;
                        f(at + i..at + i + 1, s, z);
                    }
                }
            }
        }
    }
    Ok(())
}

fn quantize_as<T: QInt>(
    x: &[f32],
    scale: Data<'_>,
    zp: Option<Data<'_>>,
    l: &Layout,
    y: &mut [T],
) -> Result<(), String> {
    for_runs(l, scale, zp, |r, s, z| qgemm::quantize(&x[r.clone()], s, z, &mut y[r]))
}

fn dequantize_as<T: QInt>(
    x: &[T],
    scale: Data<'_>,
    zp: Option<Data<'_>>,
    l: &Layout,
    y: &mut [f32],
) -> Result<(), String> {
    for_runs(l, scale, zp, |r, s, z| qgemm::dequantize(&x[r.clone()], s, z, &mut y[r]))
}

/// DynamicQuantizeLinear: output 0 is `x` quantized to uint8, 1 the scale, 2 the zero point.
#[derive(Debug)]
struct Dynamic {
    output: usize,
}

pub fn dynamic_quantize(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &[])?;
    check_inputs(node, 1, 1)?;
    let want = [UINT8, FLOAT, UINT8];
    let outs_ok = (0..node.outputs.len().min(3)).all(|k| node.outputs[k].is_none() || output_type(node, k) == want[k]);
    if input_type(node, 0) != FLOAT || !outs_ok || node.outputs.len() > 3 {
        return Err(bad_types(node, "float32 to uint8, a float32 scale and a uint8 zero point"));
    }
    Ok(Arc::new(Dynamic { output }))
}

/// The scale and zero point of `x` as ORT computes them: the range widened to hold 0,
/// `scale = (max - min) / 255` (1 for an all-zero range), `zp = round(clamp(-min / scale))`.
fn dynamic_params(x: &[f32]) -> (f32, i32) {
    let (lo, hi) = qgemm::min_max(x);
    let (lo, hi) = (lo.min(0.0), hi.max(0.0));
    let scale = if hi == lo { 1.0 } else { (hi - lo) / 255.0 };
    let zp = (0.0 - lo / scale).clamp(0.0, 255.0).round_ties_even() as i32;
    (scale, zp)
}

impl Op for Dynamic {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(if self.output == 0 { Shape::from_slice(x.shapes[0]) } else { Shape::new() })
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let Data::F32(v) = x.ins[0] else { return Err("DynamicQuantizeLinear input is not float32".into()) };
        let (scale, zp) = dynamic_params(v);
        match (self.output, out) {
            (0, DataMut::U8(y)) => qgemm::quantize(v, scale, zp, y),
            (1, DataMut::F32(y)) if y.len() == 1 => y[0] = scale,
            (2, DataMut::U8(y)) if y.len() == 1 => y[0] = zp as u8,
            _ => return Err("output element types differ from the plan's".into()),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_follow_the_scale_shape() {
        let op = Linear { kind: Kind::Quantize, axis: 1, block: 0, saturate: true };
        assert_eq!(op.layout(&[2, 3, 4], &[], None).unwrap().per, Per::Tensor);
        let l = op.layout(&[2, 3, 4], &[3], Some(&[3])).unwrap();
        assert_eq!((l.per, l.outer, l.dim, l.inner), (Per::Axis, 2, 3, 4));
        assert!(op.layout(&[2, 3, 4], &[4], None).is_err());
        assert!(op.layout(&[2, 3, 4], &[3], Some(&[])).is_err());
        assert_eq!(op.layout(&[2, 3, 4], &[], Some(&[1])).unwrap().per, Per::Tensor);
        assert!(op.layout(&[2, 3, 4], &[], Some(&[2])).is_err());
        let blocked = Linear { kind: Kind::Quantize, axis: -1, block: 3, saturate: true };
        assert_eq!(blocked.layout(&[2, 3, 4], &[2, 3, 2], None).unwrap().per, Per::Block(3));
        assert!(blocked.layout(&[2, 3, 4], &[2, 3, 1], None).is_err());
    }

    #[test]
    fn blocked_quantize_uses_each_blocks_scale() {
        let op = Linear { kind: Kind::Quantize, axis: 1, block: 2, saturate: true };
        let l = op.layout(&[1, 3], &[1, 2], None).unwrap();
        let mut y = [0u8; 3];
        quantize_as(&[2.0, 4.0, 9.0], Data::F32(&[2.0, 3.0]), None, &l, &mut y).unwrap();
        assert_eq!(y, [1, 2, 3]);
    }

    #[test]
    fn dynamic_parameters_cover_zero() {
        assert_eq!(dynamic_params(&[0.0, 0.0]), (1.0, 0));
        let (s, z) = dynamic_params(&[1.0, 2.0, 2.55]);
        assert_eq!((s, z), (0.01, 0));
        let (s, z) = dynamic_params(&[-2.55, -1.0]);
        assert_eq!((s, z), (0.01, 255));
    }
}
