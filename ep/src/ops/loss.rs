//! NegativeLogLikelihoodLoss (of log-probabilities) and SoftmaxCrossEntropyLoss (of
//! scores: the log-softmax over axis 1 first), over X viewed as `[N, C, D]` and int32 or
//! int64 targets `[N, D]`, accumulated in f64, on float32 (the halves between casts) and
//! float64. SoftmaxCrossEntropyLoss's `log_prob` output (float32 only) is a LogSoftmax
//! over axis 1.

use std::sync::Arc;

use rivet_kernels::typed::Number;

use super::claim;
use super::op::util::{check_attrs, input_type, output_type};
use super::params::Reduction;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut, Storage};
use crate::graph::{dtype, AttrValue, NodeDesc, Shape, ShapeText};
use crate::node_attrs::string_attr;

/// The loss; `softmax`: of scores (SoftmaxCrossEntropyLoss).
#[derive(Debug)]
struct Loss {
    reduction: Reduction,
    ignore_index: Option<i64>,
    softmax: bool,
}

pub fn negative_log_likelihood(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, output, false)
}

pub fn softmax_cross_entropy(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, output, true)
}

fn compile(node: &NodeDesc, output: usize, softmax: bool) -> Result<Arc<dyn Op>, String> {
    claim::data_inputs(node, 2, 3)?;
    claim::outputs(node, softmax)?;
    check_attrs(node, &["reduction", "ignore_index"])?;
    let reduction = match string_attr(node, "reduction", "mean")? {
        "none" => Reduction::None,
        "sum" => Reduction::Sum,
        "mean" => Reduction::Mean,
        other => return Err(format!("reduction '{other}' is not none, sum or mean")),
    };
    let ignore_index = match node.attr("ignore_index") {
        Some(AttrValue::Int(i)) => Some(*i),
        Some(_) => return Err("ignore_index must be an int".into()),
        None => None,
    };
    let t = input_type(node, 0);
    let ok = matches!(t, dtype::FLOAT | dtype::DOUBLE)
        && matches!(input_type(node, 1), dtype::INT32 | dtype::INT64)
        && node.inputs.get(2).is_none_or(|w| w.as_ref().is_some_and(|w| w.elem_type == t))
        && output_type(node, 0) == t;
    if !ok {
        return Err(claim::bad_types(node, "other element types"));
    }
    if output == 0 {
        return Ok(Arc::new(Loss { reduction, ignore_index, softmax }));
    }
    if !(softmax && t == dtype::FLOAT) {
        return Err(claim::unsupported_output(node, output));
    }
    claim::extra_output(node, output, dtype::FLOAT)?;
    Ok(super::softmax::log_softmax_axis_1())
}

impl Op for Loss {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (s, t) = (x.shapes[0], x.shapes[1]);
        let ok = s.len() >= 2 && t.len() == s.len() - 1 && t[0] == s[0] && t[1..] == s[2..];
        if !ok {
            return Err(format!("target of shape {} does not match [N, d1, ...]", ShapeText(t)).into());
        }
        if let Some(w) = x.shapes.get(2) {
            if *w != [s[1]] {
                return Err(format!("weight of shape {} is not [C]", ShapeText(w)).into());
            }
        }
        Ok(match self.reduction {
            Reduction::None => Shape::from_slice(t),
            _ => Shape::new(),
        })
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        match out {
            DataMut::F32(y) => loss::<f32>(self, &x, y),
            DataMut::F64(y) => loss::<f64>(self, &x, y),
            _ => Err(MISMATCH.into()),
        }
    }

    fn halves_in_f32(&self) -> bool {
        true
    }
}

const MISMATCH: &str = "input and output element types differ from the plan's";

/// The loss of scores or log-probabilities `x` viewed as `[N, C, D]`, accumulated in f64.
fn loss<T: Number + Storage>(op: &Loss, x: &RunIn<'_, '_>, y: &mut [T]) -> Result<(), String> {
    let s = x.shapes[0];
    let (n, c, d) = (s[0], s[1], s[2..].iter().product::<usize>());
    let (reduction, softmax) = (op.reduction, op.softmax);
    let scores = T::get(x.ins[0]).ok_or(MISMATCH)?;
    let weight = match x.ins.get(2) {
        Some(&w) => Some(T::get(w).ok_or(MISMATCH)?),
        None => None,
    };
    let target = |i: usize| match x.ins[1] {
        Data::I64(t) => t[i],
        Data::I32(t) => i64::from(t[i]),
        _ => 0,
    };
    if !matches!(x.ins[1], Data::I64(_) | Data::I32(_)) {
        return Err(MISMATCH.into());
    }
    let (mut total, mut weights) = (0.0f64, 0.0f64);
    for b in 0..n {
        for k in 0..d {
            let i = b * d + k;
            let t = target(i);
            if Some(t) == op.ignore_index {
                if reduction == Reduction::None {
                    y[i] = T::from_f64(0.0);
                }
                continue;
            }
            if t < 0 || t >= c as i64 {
                return Err(format!("input 1: target {t} is out of range for {c} classes"));
            }
            let at = |class: usize| scores[(b * c + class) * d + k].to_f64();
            let log_p = if softmax {
                let max = (0..c).map(at).fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = (0..c).map(|j| (at(j) - max).exp()).sum();
                at(t as usize) - max - sum.ln()
            } else {
                at(t as usize)
            };
            let w = weight.map_or(1.0, |w| w[t as usize].to_f64());
            let l = -log_p * w;
            if reduction == Reduction::None {
                y[i] = T::from_f64(l);
            } else {
                total += l;
                weights += w;
            }
        }
    }
    match reduction {
        Reduction::None => {}
        Reduction::Sum => y[0] = T::from_f64(total),
        Reduction::Mean => y[0] = T::from_f64(total / weights),
    }
    Ok(())
}
