//! The signal generators of opset 17: HannWindow, HammingWindow, BlackmanWindow (a
//! window of the length its scalar input gives, periodic or symmetric) and
//! MelWeightMatrix (triangular mel filters over the bins of a DFT). Computed in float64,
//! written as the float32 or float64 that `output_datatype` names. Their output shapes
//! come from their inputs' data: known at Compile when those are constants.

use std::f64::consts::PI;
use std::sync::Arc;

use super::op::util::{check_attrs, check_inputs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Hann,
    Hamming,
    Blackman,
}

#[derive(Debug)]
struct Window {
    kind: Kind,
    periodic: bool,
}

/// Largest window or matrix side Rivet makes (a size from data past it is an error).
const MAX_LEN: i64 = 1 << 24;

fn output_datatype(node: &NodeDesc) -> Result<i32, String> {
    let t = int_attr(node, "output_datatype", dtype::FLOAT as i64)? as i32;
    if !matches!(t, dtype::FLOAT | dtype::DOUBLE) || output_type(node, 0) != t {
        return Err(super::op::util::bad_types(node, "float32 or float64 outputs"));
    }
    Ok(t)
}

fn window(node: &NodeDesc, kind: Kind) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    check_attrs(node, &["periodic", "output_datatype"])?;
    if !matches!(input_type(node, 0), dtype::INT32 | dtype::INT64) {
        return Err(super::op::util::bad_types(node, "an int32 or int64 size"));
    }
    output_datatype(node)?;
    let periodic = match int_attr(node, "periodic", 1)? {
        0 => false,
        1 => true,
        p => return Err(format!("{} periodic {p} is not 0 or 1", node.op_type)),
    };
    Ok(Arc::new(Window { kind, periodic }))
}

pub fn hann(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    window(node, Kind::Hann)
}

pub fn hamming(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    window(node, Kind::Hamming)
}

pub fn blackman(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    window(node, Kind::Blackman)
}

/// A scalar (or one-element) integer input's value.
fn int_scalar(d: Data<'_>, what: &str) -> Result<i64, String> {
    let v = match d {
        Data::I64([v]) => *v,
        Data::I32([v]) => *v as i64,
        _ => return Err(format!("{what} is not one int32 or int64 value")),
    };
    if !(0..=MAX_LEN).contains(&v) {
        return Err(format!("{what} {v} is not in 0..={MAX_LEN}"));
    }
    Ok(v)
}

/// A scalar float input's value.
fn float_scalar(d: Data<'_>, what: &str) -> Result<f64, String> {
    match d {
        Data::F32([v]) => Ok(*v as f64),
        Data::F64([v]) => Ok(*v),
        _ => Err(format!("{what} is not one float32 or float64 value")),
    }
}

/// Writes `f(i)` for every element of a float output.
fn fill(out: &mut DataMut<'_>, f: impl Fn(usize) -> f64) -> Result<(), String> {
    match out {
        DataMut::F32(y) => y.iter_mut().enumerate().for_each(|(i, o)| *o = f(i) as f32),
        DataMut::F64(y) => y.iter_mut().enumerate().for_each(|(i, o)| *o = f(i)),
        _ => return Err("the output is not float32 or float64".into()),
    }
    Ok(())
}

impl Op for Window {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(Shape::from_slice(&[int_scalar(x.data(0)?, "size")? as usize]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let size = int_scalar(x.ins[0], "size")?;
        let n = if self.periodic { size } else { size - 1 } as f64;
        let (a0, a1, a2) = match self.kind {
            Kind::Hann => (0.5, 0.5, 0.0),
            Kind::Hamming => (25.0 / 46.0, 21.0 / 46.0, 0.0),
            Kind::Blackman => (0.42, 0.5, 0.08),
        };
        fill(out, |i| {
            let t = 2.0 * PI * i as f64 / n;
            a0 - a1 * t.cos() + a2 * (2.0 * t).cos()
        })
    }
}

#[derive(Debug)]
struct Mel;

pub fn mel_weight_matrix(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 5, 5)?;
    check_attrs(node, &["output_datatype"])?;
    let ints = (0..3).all(|k| matches!(input_type(node, k), dtype::INT32 | dtype::INT64));
    let floats = (3..5).all(|k| matches!(input_type(node, k), dtype::FLOAT | dtype::DOUBLE));
    if !ints || !floats {
        return Err(super::op::util::bad_types(node, "int32/int64 sizes and float32/float64 edges"));
    }
    output_datatype(node)?;
    Ok(Arc::new(Mel))
}

/// The filters' (left, center, right) bin edges: `num_mel_bins + 2` bins.
fn mel_bins(bins: usize, dft: i64, rate: i64, lo: f64, hi: f64, k: usize) -> i64 {
    let mel = |hz: f64| 2595.0 * (1.0 + hz / 700.0).log10();
    let (lo_mel, hi_mel) = (mel(lo), mel(hi));
    let step = (hi_mel - lo_mel) / (bins + 2) as f64;
    let hz = 700.0 * (10f64.powf((k as f64 * step + lo_mel) / 2595.0) - 1.0);
    (((dft + 1) as f64 * hz) / rate as f64).floor() as i64
}

impl Op for Mel {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let bins = int_scalar(x.data(0)?, "num_mel_bins")? as usize;
        let dft = int_scalar(x.data(1)?, "dft_length")? as usize;
        Ok(Shape::from_slice(&[dft / 2 + 1, bins]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let bins = int_scalar(x.ins[0], "num_mel_bins")? as usize;
        let dft = int_scalar(x.ins[1], "dft_length")?;
        let rate = int_scalar(x.ins[2], "sample_rate")?;
        let (lo, hi) = (float_scalar(x.ins[3], "lower_edge_hertz")?, float_scalar(x.ins[4], "upper_edge_hertz")?);
        if rate == 0 {
            return Err("sample_rate is 0".into());
        }
        let rows = dft as usize / 2 + 1;
        let edges = &mut x.scratch.i64;
        edges.clear();
        for k in 0..bins + 2 {
            let e = mel_bins(bins, dft, rate, lo, hi, k);
            if e < 0 || e as usize >= rows {
                return Err(format!("mel bin edge {e} is outside the {rows} spectrogram bins"));
            }
            edges.push(e);
        }
        let edge = |k: usize| edges[k];
        // Row j, column i: the rising edge of filter i from left to center (1 at a
        // center equal to its left), then its falling edge from center to right.
        let weight = |at: usize| -> f64 {
            let (j, i) = ((at / bins.max(1)) as i64, at % bins.max(1));
            let (l, c, r) = (edge(i), edge(i + 1), edge(i + 2));
            let mut w = 0.0;
            if c == l {
                if j == c {
                    w = 1.0;
                }
            } else if (l..=c).contains(&j) {
                w = (j - l) as f64 / (c - l) as f64;
            }
            if r > c && (c..r).contains(&j) {
                w = (r - j) as f64 / (r - c) as f64;
            }
            w
        };
        fill(out, weight)
    }
}
