//! com.microsoft QLinearGlobalAveragePool, the QOperator format's global average: per
//! image and channel, `acc = sum(x) - zx · size` in int32, then `clamp(round_half_even(acc
//! · scale) + zy)` with `scale = sx / (sy · size)` in float32, as ORT's CPU kernel
//! (`MlasQLinearGlobalAveragePool`) computes it; uint8 or int8, channels first (`[N, C,
//! spatial..]` to `[N, C, 1..]`) or, with `channels_last`, last (`[N, spatial.., C]` to
//! `[N, 1.., C]`). Like ORT's kernel, it refuses a plane of 2^24 elements or more and a
//! scale outside [2^-32, 256) (its sums and rounding are exact only inside them); unlike
//! it, a NaN scale too (ORT's check lets it through).

use std::sync::Arc;

use super::super::op::util::{bad_types, check_attrs, check_inputs, input, input_type, output_type};
use super::super::{Op, OpRef, RunIn, ShapeError, ShapeIn};
use super::{is_q8, scalar_float, scalar_int, slots};
use crate::data::{Data, DataMut};
use crate::graph::dtype::FLOAT;
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::int_attr;
use rivet_kernels::qgemm::QInt;

#[derive(Clone, Debug)]
struct QGlobalAverage {
    channels_last: bool,
    /// A channels-first input (as the attribute says) stored channels last by the plan
    /// (`passes::channels_last_int8`): its data read as the attribute's channels-last form.
    stored_last: bool,
    /// Where x's scale, x's zero point, y's scale and y's zero point are among a Run's
    /// inputs.
    params: [Option<usize>; 4],
}

pub fn qlinear_global_average_pool(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["channels_last"])?;
    check_inputs(node, 4, 5)?;
    let t = input_type(node, 0);
    let zero_ok = |k: usize| input(node, k).is_none() || input_type(node, k) == t;
    let ok = is_q8(t)
        && output_type(node, 0) == t
        && input_type(node, 1) == FLOAT
        && input_type(node, 3) == FLOAT
        && zero_ok(2)
        && zero_ok(4);
    if !ok {
        return Err(bad_types(node, "uint8 or int8 (input, output and zero points of one type), float32 scales"));
    }
    // Any value but 0 is channels last, as in ORT's kernel.
    let channels_last = int_attr(node, "channels_last", 0)? != 0;
    let [_, params @ ..] = slots::<5>(node);
    Ok(Arc::new(QGlobalAverage { channels_last, stored_last: false, params }))
}

impl QGlobalAverage {
    /// Images, channels and positions of an input of shape `s`.
    fn dims(&self, s: &[usize]) -> Result<(usize, usize, usize), String> {
        if s.len() < 3 {
            return Err(format!("the input must have a batch, a channel and spatial axes, has shape {s:?}"));
        }
        let size = if self.channels_last { s[1..s.len() - 1].iter().product() } else { s[2..].iter().product() };
        let channels = if self.channels_last { s[s.len() - 1] } else { s[1] };
        Ok((s[0], channels, size))
    }
}

impl Op for QGlobalAverage {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        self.dims(s).map_err(ShapeError::Invalid)?;
        let keep = |a: usize| if self.channels_last { a == 0 || a == s.len() - 1 } else { a < 2 };
        Ok(s.iter().enumerate().map(|(a, &d)| if keep(a) { d } else { 1 }).collect())
    }

    /// A channels-first 2-D input may be stored channels last, and the op asks for it
    /// (`Some(true)`): its own sum takes about as long so, and the step before it keeps
    /// its layout. ResNet-18 int8, one thread, us: its last addition, which relaid both
    /// channels-last inputs into planes, 19.8 -> 8.0-8.5 (ORT 11-12); this op 6.3 ->
    /// 5.6-6.5. The `[N, C, 1, 1]` output is the same bytes either way.
    fn channels_last_use(&self, shapes: &[&[usize]], _out: &[usize]) -> Option<bool> {
        (!self.channels_last && shapes.first()?.len() == 4).then_some(true)
    }

    fn channels_last_inputs(&self) -> u32 {
        1
    }

    fn with_channels_last(&self, inputs: u32, _output: bool) -> Option<OpRef> {
        Some(OpRef(Arc::new(QGlobalAverage { stored_last: inputs & 1 != 0, ..self.clone() })))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (images, channels, size) = self.dims(x.shapes[0])?;
        let [sx, zx, sy, zy] = self.params;
        let (data, shape) = (|k: Option<usize>| k.map(|k| x.ins[k]), |k: Option<usize>| k.map(|k| x.shapes[k]));
        let scale = |k: Option<usize>, what| scalar_float(data(k).ok_or(what)?, shape(k).unwrap_or(&[]), what);
        let (sx, sy) = (scale(sx, "x's scale")?, scale(sy, "y's scale")?);
        let zx = scalar_int(data(zx), shape(zx), "x's zero point")?;
        let zy = scalar_int(data(zy), shape(zy), "y's zero point")?;
        let scale = sx / (sy * size as f32);
        // (2^-32 is 0x2f80_0000.)
        if size >= 1 << 24 || !(f32::from_bits(0x2f80_0000)..256.0).contains(&scale) {
            return Err(format!(
                "a plane of {size} elements with the scale {scale:e} (x's over y's and the plane's size) is out of \
                 the kernel's range (planes under 2^24, scales in [2^-32, 256))"
            ));
        }
        let bias = (-zx).wrapping_mul(size as i32);
        let channels_last = self.channels_last || self.stored_last;
        let p = Params { images, channels, size, scale, bias, zy, channels_last };
        match (x.ins[0], out) {
            (Data::U8(v), DataMut::U8(y)) => p.run(v, y),
            (Data::I8(v), DataMut::I8(y)) => p.run(v, y),
            _ => Err("the element types differ from the plan's".into()),
        }
    }
}

struct Params {
    images: usize,
    channels: usize,
    size: usize,
    scale: f32,
    bias: i32,
    zy: i32,
    channels_last: bool,
}

impl Params {
    fn run<T: QInt>(&self, x: &[T], y: &mut [T]) -> Result<(), String> {
        let (c, size) = (self.channels, self.size);
        if x.len() < self.images * c * size || y.len() < self.images * c {
            return Err("the input has fewer elements than its shape".into());
        }
        let out = |acc: i32| -> T {
            let q = (acc as f32 * self.scale).round_ties_even() + self.zy as f32;
            T::from_i32(q.clamp(T::MIN as f32, T::MAX as f32) as i32)
        };
        for (image, y) in y.chunks_exact_mut(c.max(1)).take(self.images).enumerate() {
            let x = &x[image * c * size..][..c * size];
            if self.channels_last {
                let mut acc = [0i32; 64];
                for c0 in (0..c).step_by(64) {
                    let w = (c - c0).min(64);
                    acc[..w].fill(self.bias);
                    for at in 0..size {
                        for (a, v) in acc[..w].iter_mut().zip(&x[at * c + c0..][..w]) {
                            *a = a.wrapping_add(v.to_i32());
                        }
                    }
                    for (o, &a) in y[c0..c0 + w].iter_mut().zip(&acc[..w]) {
                        *o = out(a);
                    }
                }
            } else {
                for (o, plane) in y.iter_mut().zip(x.chunks_exact(size.max(1))) {
                    *o = out(plane.iter().fold(self.bias, |a, v| a.wrapping_add(v.to_i32())));
                }
            }
        }
        Ok(())
    }
}
