//! DFT (opsets 17 and 20) and STFT (opset 17) in float32 or float64: real or complex
//! signals (a last axis of 1 or 2), the transform along any axis but the last, a
//! `dft_length` that zero-pads or truncates, inverse (normalised by 1/n), one-sided
//! output; STFT's frames, window and frame length. Computed in float64 by
//! `rivet_kernels::spectral` (radix-2 or Bluestein, `O(n log n)` for every length).
//! Lengths and axes that come as inputs are read at Run (and at Compile when constant).

use std::sync::Arc;

use rivet_kernels::spectral::Dft as Plan;

use super::op::util::{check_attrs, check_inputs, input, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::int_attr;

/// The longest transform Rivet makes (a length from data past it is an error).
const MAX_LEN: i64 = 1 << 24;

/// A step's working memory: the plan for the last length and one signal's points.
#[derive(Debug, Default)]
struct Scratch {
    plan: Plan,
    points: Vec<(f64, f64)>,
}

fn float_types(node: &NodeDesc, float_inputs: &[usize]) -> Result<i32, String> {
    let t = input_type(node, 0);
    let ok = matches!(t, dtype::FLOAT | dtype::DOUBLE)
        && output_type(node, 0) == t
        && float_inputs.iter().all(|&k| input(node, k).is_none() || input_type(node, k) == t);
    if !ok {
        return Err(super::op::util::bad_types(node, "float32 or float64 signals"));
    }
    Ok(t)
}

fn int_input_ok(node: &NodeDesc, k: usize) -> bool {
    input(node, k).is_none() || matches!(input_type(node, k), dtype::INT32 | dtype::INT64)
}

/// A scalar (or one-element) integer input's value.
fn int_scalar(d: Data<'_>, what: &str) -> Result<i64, String> {
    match d {
        Data::I64([v]) => Ok(*v),
        Data::I32([v]) => Ok(*v as i64),
        _ => Err(format!("{what} is not one int32 or int64 value")),
    }
}

/// A length input's value: in 1..=MAX_LEN.
fn positive(d: Data<'_>, what: &str) -> Result<usize, String> {
    let v = int_scalar(d, what)?;
    if !(1..=MAX_LEN).contains(&v) {
        return Err(format!("{what} {v} is not in 1..={MAX_LEN}"));
    }
    Ok(v as usize)
}

fn flag(node: &NodeDesc, name: &str, default: i64) -> Result<bool, String> {
    match int_attr(node, name, default)? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(format!("{} {name} {v} is not 0 or 1", node.op_type)),
    }
}

/// The signal's points `j < n` of one transform: `at(j)` gives the (real, imaginary)
/// index of point j of the input (`None` past its end: zero).
fn gather(points: &mut [(f64, f64)], x: &[f64], complex: bool, at: impl Fn(usize) -> Option<usize>) {
    for (j, p) in points.iter_mut().enumerate() {
        *p = match at(j) {
            Some(i) if complex => (x[i], x[i + 1]),
            Some(i) => (x[i], 0.0),
            None => (0.0, 0.0),
        };
    }
}

/// The input as float64 (a float32 one widened into `buf`).
fn widen<'a>(d: Data<'a>, buf: &'a mut Vec<f64>) -> Result<&'a [f64], String> {
    match d {
        Data::F64(x) => Ok(x),
        Data::F32(x) => {
            buf.clear();
            buf.extend(x.iter().map(|&v| v as f64));
            Ok(buf)
        }
        _ => Err("element types differ from the plan's".into()),
    }
}

/// Writes `bins` (times `scale`) as complex pairs: bin k at pair `first + k * stride`.
fn put(out: &mut DataMut<'_>, bins: &[(f64, f64)], first: usize, stride: usize, scale: f64) -> Result<(), String> {
    let at = |k: usize| (first + k * stride) * 2;
    match out {
        DataMut::F32(y) => bins.iter().enumerate().for_each(|(k, p)| {
            y[at(k)] = (p.0 * scale) as f32;
            y[at(k) + 1] = (p.1 * scale) as f32;
        }),
        DataMut::F64(y) => bins.iter().enumerate().for_each(|(k, p)| {
            y[at(k)] = p.0 * scale;
            y[at(k) + 1] = p.1 * scale;
        }),
        _ => return Err("element types differ from the plan's".into()),
    }
    Ok(())
}

/// Fails unless the output holds `want` values (the shape the plan gave it).
fn check_len(out: &DataMut<'_>, want: usize) -> Result<(), String> {
    let have = match out {
        DataMut::F32(y) => y.len(),
        DataMut::F64(y) => y.len(),
        _ => return Err("element types differ from the plan's".into()),
    };
    if have != want {
        return Err(format!("the output holds {have} values, the transform makes {want}"));
    }
    Ok(())
}

#[derive(Debug)]
struct DftOp {
    inverse: bool,
    onesided: bool,
    /// Opset 17's attribute; opset 20's input (default -2) when `None`.
    axis: Option<i64>,
    has_length: bool,
    has_axis: bool,
}

pub fn dft(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    let v17 = node.since_version < 20;
    check_inputs(node, 1, if v17 { 2 } else { 3 })?;
    check_attrs(node, if v17 { &["inverse", "onesided", "axis"] } else { &["inverse", "onesided"] })?;
    float_types(node, &[])?;
    if !int_input_ok(node, 1) || !(input(node, 2).is_none() || input_type(node, 2) == dtype::INT64) {
        return Err(super::op::util::bad_types(node, "an int32/int64 dft_length and an int64 axis"));
    }
    let (inverse, onesided) = (flag(node, "inverse", 0)?, flag(node, "onesided", 0)?);
    let axis = if v17 { Some(int_attr(node, "axis", 1)?) } else { None };
    Ok(Arc::new(DftOp {
        inverse,
        onesided,
        axis,
        has_length: input(node, 1).is_some(),
        has_axis: input(node, 2).is_some(),
    }))
}

/// The transform's geometry for an input of `shape`: axis, points, bins kept.
struct Geometry {
    axis: usize,
    n: usize,
    bins: usize,
}

impl DftOp {
    fn geometry(&self, shape: &[usize], length: Option<Data<'_>>, axis: Option<Data<'_>>) -> Result<Geometry, String> {
        let r = shape.len();
        if r < 2 || !matches!(shape[r - 1], 1 | 2) {
            return Err(format!("the signal's last axis must be 1 (real) or 2 (complex), shape {shape:?}"));
        }
        let a = match (self.axis, axis) {
            (Some(a), _) => a,
            (None, Some(d)) => int_scalar(d, "axis")?,
            (None, None) => -2,
        };
        let rank = r as i64;
        let axis = if a < 0 { a + rank } else { a };
        if !(0..rank - 1).contains(&axis) {
            return Err(format!("axis {a} is not a signal axis of rank {r} (the last is the complex one)"));
        }
        let axis = axis as usize;
        if self.onesided && shape[r - 1] == 2 {
            return Err("a one-sided DFT takes a real signal (a last axis of 1)".into());
        }
        let n = match length {
            Some(d) => positive(d, "dft_length")?,
            None => shape[axis],
        };
        if n == 0 {
            return Err("the transform has no points (an empty axis and no dft_length)".into());
        }
        Ok(Geometry { axis, n, bins: if self.onesided { n / 2 + 1 } else { n } })
    }

    /// The positions of `dft_length` and `axis` among the present inputs.
    fn inputs<'a>(&self, get: impl Fn(usize) -> Option<Data<'a>>) -> (Option<Data<'a>>, Option<Data<'a>>) {
        let length = if self.has_length { get(1) } else { None };
        let axis = if self.has_axis { get(1 + self.has_length as usize) } else { None };
        (length, axis)
    }
}

impl Op for DftOp {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let need = |k: usize| x.data(k);
        let length = if self.has_length { Some(need(1)?) } else { None };
        let axis = if self.has_axis { Some(need(1 + self.has_length as usize)?) } else { None };
        let s = x.shapes[0];
        let g = self.geometry(s, length, axis)?;
        let mut out: Shape = s.iter().copied().collect();
        out[g.axis] = g.bins;
        let last = out.len() - 1;
        out[last] = 2;
        Ok(out)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (length, axis) = self.inputs(|k| x.ins.get(k).copied());
        let shape = x.shapes[0];
        let g = self.geometry(shape, length, axis)?;
        let (r, complex) = (shape.len(), shape[shape.len() - 1] == 2);
        let c = shape[r - 1];
        let outer: usize = shape[..g.axis].iter().product();
        let inner: usize = shape[g.axis + 1..r - 1].iter().product();
        let len = shape[g.axis];
        let (f64s, state) = (&mut x.scratch.f64, x.scratch.state.get_or_insert_with(|| Box::new(Scratch::default())));
        let Scratch { plan, points } = state.downcast_mut::<Scratch>().ok_or("a DFT step's state is its own")?;
        let xs = widen(x.ins[0], f64s)?;
        plan.prepare(g.n);
        points.resize(g.n, (0.0, 0.0));
        let scale = if self.inverse { 1.0 / g.n as f64 } else { 1.0 };
        // Output element (o, k, i, part) at ((o * bins + k) * inner + i) * 2 + part.
        let bins = g.bins;
        check_len(out, outer * bins * inner * 2)?;
        for o in 0..outer {
            for i in 0..inner {
                gather(points, xs, complex, |j| (j < len).then(|| ((o * len + j) * inner + i) * c));
                plan.run(points, self.inverse);
                put(out, &points[..bins], o * bins * inner + i, inner, scale)?;
            }
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Stft {
    onesided: bool,
    has_window: bool,
    has_length: bool,
}

pub fn stft(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 2, 4)?;
    check_attrs(node, &["onesided"])?;
    float_types(node, &[2])?;
    if !int_input_ok(node, 1) || !int_input_ok(node, 3) {
        return Err(super::op::util::bad_types(node, "an int32/int64 frame_step and frame_length"));
    }
    Ok(Arc::new(Stft {
        onesided: flag(node, "onesided", 1)?,
        has_window: input(node, 2).is_some(),
        has_length: input(node, 3).is_some(),
    }))
}

/// STFT's geometry: batch, signal length, frame length and step, frames, bins.
struct Frames {
    batch: usize,
    len: usize,
    frame: usize,
    step: usize,
    frames: usize,
    bins: usize,
}

impl Stft {
    fn frames(
        &self,
        shape: &[usize],
        step: Data<'_>,
        window: Option<&[usize]>,
        length: Option<Data<'_>>,
    ) -> Result<Frames, String> {
        if shape.len() != 3 || !matches!(shape[2], 1 | 2) {
            return Err(format!("the signal must be [batch, length, 1 or 2], shape {shape:?}"));
        }
        let (batch, len) = (shape[0], shape[1]);
        let step = positive(step, "frame_step")?;
        let frame = match (length, window) {
            (Some(d), _) => positive(d, "frame_length")?,
            (None, Some(w)) if w.len() == 1 => w[0],
            (None, Some(w)) => return Err(format!("the window must be 1-D, shape {w:?}")),
            (None, None) => len,
        };
        if let Some(w) = window {
            if w != [frame] {
                return Err(format!("the window's shape {w:?} is not the frame length {frame}"));
            }
        }
        if frame == 0 || frame > len {
            return Err(format!("frame length {frame} does not fit the signal's {len} points"));
        }
        let frames = 1 + (len - frame) / step;
        Ok(Frames { batch, len, frame, step, frames, bins: if self.onesided { frame / 2 + 1 } else { frame } })
    }

    /// frame_step, the window's index and frame_length's among the present inputs.
    fn positions(&self) -> (usize, Option<usize>, Option<usize>) {
        let window = self.has_window.then_some(2);
        let length = self.has_length.then_some(2 + self.has_window as usize);
        (1, window, length)
    }
}

impl Op for Stft {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (step, window, length) = self.positions();
        let length = match length {
            Some(k) => Some(x.data(k)?),
            None => None,
        };
        let f = self.frames(x.shapes[0], x.data(step)?, window.map(|k| x.shapes[k]), length)?;
        Ok(Shape::from_slice(&[f.batch, f.frames, f.bins, 2]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (step, window, length) = self.positions();
        let f = self.frames(x.shapes[0], x.ins[step], window.map(|k| x.shapes[k]), length.map(|k| x.ins[k]))?;
        let complex = x.shapes[0][2] == 2;
        let c = x.shapes[0][2];
        let (f64s, state) = (&mut x.scratch.f64, x.scratch.state.get_or_insert_with(|| Box::new(Scratch::default())));
        let Scratch { plan, points } = state.downcast_mut::<Scratch>().ok_or("an STFT step's state is its own")?;
        // The signal, then the window, as float64.
        let signal_len = f.batch * f.len * c;
        let (xs, ws): (&[f64], Option<&[f64]>) = {
            f64s.clear();
            for d in std::iter::once(x.ins[0]).chain(window.map(|k| x.ins[k])) {
                match d {
                    Data::F32(v) => f64s.extend(v.iter().map(|&e| e as f64)),
                    Data::F64(v) => f64s.extend_from_slice(v),
                    _ => return Err("element types differ from the plan's".into()),
                }
            }
            let (s, w) = f64s.split_at(signal_len);
            (s, window.map(|_| w))
        };
        let bins = f.bins;
        check_len(out, f.batch * f.frames * bins * 2)?;
        plan.prepare(f.frame);
        points.resize(f.frame, (0.0, 0.0));
        for b in 0..f.batch {
            for t in 0..f.frames {
                let start = t * f.step;
                gather(points, xs, complex, |j| Some(((b * f.len) + start + j) * c));
                if let Some(w) = ws {
                    points.iter_mut().zip(w).for_each(|(p, &wv)| *p = (p.0 * wv, p.1 * wv));
                }
                plan.run(points, false);
                put(out, &points[..bins], (b * f.frames + t) * bins, 1, 1.0)?;
            }
        }
        Ok(())
    }
}
