//! LayerNormalization and RMSNormalization over the axes from `axis` on, on float32 (the
//! halves between casts) and float64, and LayerNormalization's float32 mean and inverse
//! standard deviation outputs. float32 runs whole rows split over the pool; float64 is
//! computed in plain f64 loops. Scale and bias hold one value per normalized element
//! (the normalized shape, maybe with leading 1s): broadcasting a smaller one is refused.

use std::sync::Arc;

use rivet_kernels::nn;

use super::claim;
use super::op::util::{check_attrs, input_type};
use super::softmax::by_rows;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, normalize_axis, NodeDesc, Shape, ShapeText};
use crate::node_attrs::{float_attr, int_attr};

/// LayerNormalization (RMSNormalization when `rms`).
#[derive(Debug)]
struct Norm {
    axis: i64,
    epsilon: f32,
    rms: bool,
    /// The inputs' names, for shape errors.
    names: Vec<String>,
}

/// LayerNormalization's mean (or inverse standard deviation) per normalized row.
#[derive(Debug)]
struct NormStat {
    axis: i64,
    epsilon: f32,
    inverse_std: bool,
}

pub fn layer_norm(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, output, false)
}

pub fn rms_norm(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, output, true)
}

/// RMSNormalization over the last axis with `epsilon`, inputs x and the scale (named
/// `names` in shape errors): the step `passes::fuse_rms_norm` makes of the decomposed form.
pub(crate) fn rms_norm_last_axis(epsilon: f32, names: Vec<String>) -> Arc<dyn Op> {
    Arc::new(Norm { axis: -1, epsilon, rms: true, names })
}

fn compile(node: &NodeDesc, output: usize, rms: bool) -> Result<Arc<dyn Op>, String> {
    claim::data_inputs(node, 2, if rms { 2 } else { 3 })?;
    claim::outputs(node, true)?;
    check_attrs(node, &["axis", "epsilon", "stash_type"])?;
    if int_attr(node, "stash_type", 1)? != 1 {
        return Err("stash_type other than float".into());
    }
    let (axis, epsilon) = (int_attr(node, "axis", -1)?, float_attr(node, "epsilon", 1e-5)?);
    claim::float_types(node)?;
    if output == 0 {
        return Ok(Arc::new(Norm { axis, epsilon, rms, names: claim::input_names(node) }));
    }
    // The statistics outputs: float32 LayerNormalization only.
    if rms || input_type(node, 0) != dtype::FLOAT {
        return Err(claim::unsupported_output(node, output));
    }
    claim::extra_output(node, output, dtype::FLOAT)?;
    Ok(Arc::new(NormStat { axis, epsilon, inverse_std: output == 2 }))
}

impl Op for Norm {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        let a = normalize_axis(self.axis, s.len(), false)?;
        for (k, p) in x.shapes.iter().enumerate().skip(1) {
            if p.iter().product::<usize>() != s[a..].iter().product::<usize>() {
                return Err(format!(
                    "parameter '{}' of shape {} does not match {}",
                    self.names.get(k).map_or("", String::as_str),
                    ShapeText(p),
                    ShapeText(&s[a..])
                )
                .into());
            }
        }
        Ok(Shape::from_slice(s))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let a = normalize_axis(self.axis, s.len(), false).unwrap_or(0);
        let row: usize = s[a..].iter().product();
        let (epsilon, rms) = (self.epsilon, self.rms);
        match (x.ins, out) {
            ([Data::F32(v), Data::F32(scale), rest @ ..], DataMut::F32(y)) => {
                let bias = match rest {
                    [] => None,
                    [Data::F32(b)] => Some(*b),
                    _ => return Err(MISMATCH.into()),
                };
                by_rows(x.par, y, row, &|start, part| {
                    nn::layer_norm(&v[start..start + part.len()], scale, bias, row, epsilon, rms, part)
                });
            }
            ([Data::F64(v), Data::F64(scale), rest @ ..], DataMut::F64(y)) => {
                let bias = match rest {
                    [] => None,
                    [Data::F64(b)] => Some(*b),
                    _ => return Err(MISMATCH.into()),
                };
                norm_f64(v, scale, bias, row, epsilon, rms, y);
            }
            _ => return Err(MISMATCH.into()),
        }
        Ok(())
    }

    fn halves_in_f32(&self) -> bool {
        true
    }
}

impl Op for NormStat {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let a = normalize_axis(self.axis, x.shapes[0].len(), false)?;
        let mut s = Shape::from_slice(x.shapes[0]);
        s[a..].iter_mut().for_each(|d| *d = 1);
        Ok(s)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let a = normalize_axis(self.axis, s.len(), false).unwrap_or(0);
        let (Data::F32(v), DataMut::F32(y)) = (x.ins[0], out) else { return Err(MISMATCH.into()) };
        nn::norm_stats(v, s[a..].iter().product(), self.epsilon, self.inverse_std, y);
        Ok(())
    }

    fn halves_in_f32(&self) -> bool {
        true
    }
}

const MISMATCH: &str = "input and output element types differ from the plan's";

/// float64 LayerNormalization (RMSNormalization when `rms`) of rows of `inner` elements.
fn norm_f64(x: &[f64], scale: &[f64], bias: Option<&[f64]>, inner: usize, epsilon: f32, rms: bool, y: &mut [f64]) {
    for (xs, ys) in x.chunks(inner.max(1)).zip(y.chunks_mut(inner.max(1))) {
        let mean = if rms { 0.0 } else { xs.iter().sum::<f64>() / inner as f64 };
        let var = xs.iter().map(|&v| (v - mean).powi(2)).sum::<f64>() / inner as f64;
        let inv = 1.0 / (var + f64::from(epsilon)).sqrt();
        for (j, (o, &v)) in ys.iter_mut().zip(xs).enumerate() {
            *o = (v - mean) * inv * scale[j] + bias.map_or(0.0, |b| b[j]);
        }
    }
}
