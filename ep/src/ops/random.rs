//! The random generators: RandomUniform, RandomNormal (shaped by an attribute),
//! RandomUniformLike, RandomNormalLike (shaped like the input) and Bernoulli (one draw per
//! probability of the input).
//!
//! A seeded node draws what the ONNX reference implementation draws: numpy's legacy
//! `RandomState(int(seed))`, made afresh for each Run (so every Run gives the same
//! tensor, as the reference gives for every call; ORT's CPU EP keeps one generator per
//! session, whose draws go on from Run to Run and are its own). The uniform values are
//! `random_sample()` rounded to the output type, times `high - low` (rounded to it), plus
//! `low`; the normal ones `standard_normal()` rounded, times `scale`, plus `mean`, each
//! step rounded as numpy's float32 arithmetic rounds it; Bernoulli's are
//! `binomial(1, p)`. An unseeded node (or a NaN seed, which the reference takes as none)
//! draws from a new seed every Run.

use std::sync::Arc;

use rivet_kernels::random::{fresh_seed, LegacyRandom};

use super::int_input::one_output;
use super::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, with_one, Data, DataMut};
use crate::graph::dtype::{DOUBLE, FLOAT};
use crate::graph::{AttrValue, NodeDesc, Shape};
use crate::node_attrs::{float_attr, ints_attr};

/// What a generator draws.
#[derive(Clone, Copy, Debug)]
enum Draw {
    /// `low + (high - low) * u`, u uniform in [0, 1).
    Uniform { low: f32, high: f32 },
    /// `mean + scale * g`, g standard normal.
    Normal { mean: f32, scale: f32 },
}

#[derive(Debug)]
struct Generator {
    draw: Draw,
    seed: Option<u32>,
    /// The `shape` attribute's dims (RandomUniform, RandomNormal), else the input's.
    shape: Option<Shape>,
}

#[derive(Debug)]
struct Bernoulli {
    seed: Option<u32>,
}

/// The `seed` attribute as the reference gives it to `RandomState` (`int(seed)`), `None`
/// when absent or NaN.
fn seed(node: &NodeDesc) -> Result<Option<u32>, String> {
    match node.attr("seed") {
        None => Ok(None),
        Some(AttrValue::Float(s)) if s.is_nan() => Ok(None),
        // int(seed): toward zero, so a seed in (-1, 0) is 0.
        Some(AttrValue::Float(s)) if *s > -1.0 && *s < 4_294_967_296.0 => Ok(Some(s.max(0.0) as u32)),
        Some(other) => Err(format!("{} seed {other:?} is not in [0, 2^32)", node.op_type)),
    }
}

/// RandomUniform, RandomNormal, RandomUniformLike and RandomNormalLike.
pub fn generator(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    one_output(node)?;
    let like = node.op_type.ends_with("Like");
    let uniform = node.op_type.starts_with("RandomUniform");
    // Both pairs default to 0 and 1.
    let (a, b) = if uniform { ("low", "high") } else { ("mean", "scale") };
    let shape = if like {
        check_inputs(node, 1, 1)?;
        check_attrs(node, &["dtype", a, b, "seed"])?;
        if !data::supported(input_type(node, 0)) {
            return Err(bad_types(node, "inputs of the types Rivet holds"));
        }
        None
    } else {
        check_inputs(node, 0, 0)?;
        check_attrs(node, &["dtype", a, b, "seed", "shape"])?;
        let dims = ints_attr(node, "shape")?.ok_or_else(|| format!("{} needs its shape", node.op_type))?;
        let dims: Option<Shape> = dims.iter().map(|&d| usize::try_from(d).ok()).collect();
        Some(dims.ok_or_else(|| format!("{} shape has a negative dim", node.op_type))?)
    };
    if !matches!(output_type(node, 0), FLOAT | DOUBLE) {
        return Err(bad_types(node, "float32 and float64 outputs"));
    }
    let (x, y) = (float_attr(node, a, 0.0)?, float_attr(node, b, 1.0)?);
    let draw = if uniform { Draw::Uniform { low: x, high: y } } else { Draw::Normal { mean: x, scale: y } };
    Ok(Arc::new(Generator { draw, seed: seed(node)?, shape }))
}

/// Bernoulli: one draw per probability of a float32 or float64 input.
pub fn bernoulli(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    one_output(node)?;
    check_attrs(node, &["dtype", "seed"])?;
    if !(matches!(input_type(node, 0), FLOAT | DOUBLE) && data::supported(output_type(node, 0))) {
        return Err(bad_types(node, "float32 and float64 probabilities"));
    }
    Ok(Arc::new(Bernoulli { seed: seed(node)? }))
}

impl Op for Generator {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(self.shape.clone().unwrap_or_else(|| Shape::from_slice(x.shapes[0])))
    }

    fn run(&self, _x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let mut r = LegacyRandom::new(self.seed.unwrap_or_else(fresh_seed));
        match (self.draw, out) {
            // As the reference computes: its attributes are float32 numbers, so `high -
            // low` is a float32 subtraction; a float32 output rounds the draw and then
            // each step, a float64 one takes the float32 range and `low` exactly.
            (Draw::Uniform { low, high }, DataMut::F32(y)) => {
                let range = high - low;
                y.iter_mut().for_each(|v| *v = r.uniform() as f32 * range + low);
            }
            (Draw::Uniform { low, high }, DataMut::F64(y)) => {
                let (low, range) = (f64::from(low), f64::from(high - low));
                y.iter_mut().for_each(|v| *v = r.uniform() * range + low);
            }
            (Draw::Normal { mean, scale }, DataMut::F32(y)) => {
                y.iter_mut().for_each(|v| *v = r.gauss() as f32 * scale + mean);
            }
            (Draw::Normal { mean, scale }, DataMut::F64(y)) => {
                let (mean, scale) = (f64::from(mean), f64::from(scale));
                y.iter_mut().for_each(|v| *v = r.gauss() * scale + mean);
            }
            _ => return Err("the output is not float32 or float64".into()),
        }
        Ok(())
    }
}

impl Op for Bernoulli {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let p = |k: usize| match x.ins[0] {
            Data::F32(p) => f64::from(p[k]),
            Data::F64(p) => p[k],
            _ => f64::NAN,
        };
        let len = x.out_shape.iter().product::<usize>();
        if let Some(k) = (0..len).find(|&k| !(0.0..=1.0).contains(&p(k))) {
            return Err(format!("input 0: probability {:e} at {k} is outside [0, 1]", p(k)));
        }
        let mut r = LegacyRandom::new(self.seed.unwrap_or_else(fresh_seed));
        macro_rules! draws {
            ($y:expr, $one:expr) => {{
                for (k, v) in $y.iter_mut().enumerate() {
                    *v = if r.bernoulli(p(k)) { $one } else { Default::default() };
                }
            }};
        }
        with_one!(out, draws);
        Ok(())
    }
}
