//! BatchNormalization (spatial only). At inference, X normalized with the running mean
//! and variance, on float32 (the halves between casts) and float64. In training mode
//! (`training_mode` 1, opset 14+), normalized with the batch's own mean and population
//! variance, statistics in f64; its outputs 1 and 2 are the running mean and variance
//! moved toward the batch's as `running * momentum + batch * (1 - momentum)`.

use std::sync::Arc;

use rivet_kernels::nn;
use rivet_kernels::typed::Number;

use super::claim;
use super::op::util::{check_attrs, input_type, output_type};
use super::{ChannelChain, Op, OpRef, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut, Storage};
use crate::graph::{dtype, NodeDesc, Shape, ShapeText};
use crate::node_attrs::{float_attr, int_attr};
use crate::parallel::{cores, PARALLEL_MIN_LEN};

#[derive(Debug)]
struct BatchNorm {
    epsilon: f32,
    names: Vec<String>,
}

/// Training mode: `out` 0 is Y, 1 and 2 the running mean and variance.
#[derive(Debug)]
struct BatchNormTrain {
    epsilon: f32,
    momentum: f32,
    out: u8,
    names: Vec<String>,
}

pub fn batch_normalization(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    claim::data_inputs(node, 5, 5)?;
    claim::outputs(node, true)?;
    check_attrs(node, &["epsilon", "momentum", "spatial", "training_mode"])?;
    if int_attr(node, "spatial", 1)? != 1 {
        return Err("only spatial BatchNormalization is supported".into());
    }
    let names = claim::input_names(node);
    if int_attr(node, "training_mode", 0)? != 0 {
        // Opset 14+: Y, then the updated running mean and variance.
        let (epsilon, momentum) = (float_attr(node, "epsilon", 1e-5)?, float_attr(node, "momentum", 0.9)?);
        let out = output_type(node, 0);
        let same = node.inputs.iter().flatten().all(|v| v.elem_type == out);
        if !(matches!(out, dtype::FLOAT | dtype::DOUBLE) && same) {
            return Err(claim::bad_types(node, "other element types"));
        }
        match output {
            0 => {}
            1 | 2 => claim::extra_output(node, output, input_type(node, 0))?,
            _ => return Err(claim::unsupported_output(node, output)),
        }
        return Ok(Arc::new(BatchNormTrain { epsilon, momentum, out: output as u8, names }));
    }
    if node.outputs.iter().skip(1).any(Option::is_some) {
        return Err("BatchNormalization's running statistics outputs are not supported".into());
    }
    let epsilon = float_attr(node, "epsilon", 1e-5)?;
    claim::float_types(node)?;
    Ok(Arc::new(BatchNorm { epsilon, names }))
}

/// The channel count of X (`[N, C, ...]` of rank `min_rank` or more) when every other
/// input is `[C]`.
pub(super) fn per_channel(x: &ShapeIn<'_>, names: &[String], min_rank: usize) -> Result<usize, ShapeError> {
    let s = x.shapes[0];
    let c = *s.get(1).filter(|_| s.len() >= min_rank).ok_or("needs [N, C, ...]")?;
    if let Some((k, p)) = x.shapes.iter().enumerate().skip(1).find(|(_, p)| **p != [c]) {
        let name = names.get(k).map_or("", String::as_str);
        return Err(format!("parameter '{name}' has shape {}, not [{c}]", ShapeText(p)).into());
    }
    Ok(c)
}

const MISMATCH: &str = "input and output element types differ from the plan's";

impl Op for BatchNorm {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        per_channel(x, &self.names, 2)?;
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let spatial: usize = s[2..].iter().product();
        match (x.ins, out) {
            ([Data::F32(v), Data::F32(scale), Data::F32(bias), Data::F32(mean), Data::F32(var)], DataMut::F32(y)) => {
                nn::batch_norm(v, scale, bias, mean, var, self.epsilon, s[1], spatial, y);
            }
            ([Data::F64(v), Data::F64(scale), Data::F64(bias), Data::F64(mean), Data::F64(var)], DataMut::F64(y)) => {
                for (block, (xs, ys)) in v.chunks(spatial.max(1)).zip(y.chunks_mut(spatial.max(1))).enumerate() {
                    let c = block % s[1].max(1);
                    let g = scale[c] / (var[c] + f64::from(self.epsilon)).sqrt();
                    let shift = bias[c] - mean[c] * g;
                    ys.iter_mut().zip(xs).for_each(|(o, &v)| *o = v * g + shift);
                }
            }
            _ => return Err(MISMATCH.into()),
        }
        Ok(())
    }

    fn halves_in_f32(&self) -> bool {
        true
    }

    fn with_channel_chain(&self, chain: ChannelChain, folded: &[(String, String)]) -> Option<OpRef> {
        let names = self.names.clone();
        // The folded Mul and Add, for errors about their operands.
        let folded = folded.iter().filter(|(_, op)| op == "Mul" || op == "Add").map(|(n, _)| n.clone()).collect();
        Some(OpRef(Arc::new(BatchNormChain { epsilon: self.epsilon, names, folded, chain })))
    }
}

/// Inference BatchNormalization with a per-channel chain folded onto it (float32 only):
/// inputs X, scale, B, mean, var, then the Mul's and the Add's operands the chain has,
/// each `[C]` broadcast on X's axis 1 (declared `[C, 1, ...]` or `[1, C, 1, ...]`, of
/// X's rank or less) or one value. DenseNet's BatchNormalization, Mul, Add and Relu over
/// each concatenation become one pass over it instead of four.
#[derive(Debug)]
struct BatchNormChain {
    epsilon: f32,
    names: Vec<String>,
    /// The names of the folded Mul and Add (those the chain has, in order).
    folded: Vec<String>,
    chain: ChannelChain,
}

/// The per-channel terms of a [`BatchNormChain`] made at each Run (one value a channel).
#[derive(Default)]
struct ChainTerms {
    g: Vec<f32>,
    s: Vec<f32>,
    m: Vec<f32>,
    a: Vec<f32>,
}

impl BatchNormChain {
    /// The operands of the chain after X's five, by their place among the inputs.
    fn operands(&self) -> impl Iterator<Item = usize> {
        let count = self.chain.mul as usize + self.chain.add as usize;
        5..5 + count
    }
}

/// Whether `p` broadcasts onto `x` (`[N, C, ...]`) as one value a channel or one value.
fn channel_operand(x: &[usize], p: &[usize]) -> bool {
    let Some(at) = x.len().checked_sub(p.len()) else { return false };
    p.iter().enumerate().all(|(i, &d)| d == 1 || (at + i == 1 && d == x[1]))
}

impl Op for BatchNormChain {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let own = ShapeIn { shapes: &x.shapes[..5], ..*x };
        per_channel(&own, &self.names, 2)?;
        for k in self.operands() {
            if !channel_operand(x.shapes[0], x.shapes[k]) {
                let op = if k == 5 && self.chain.mul { "Mul" } else { "Add" };
                let node = self.folded.get(k - 5).map_or("", String::as_str);
                return Err(format!(
                    "the folded node '{node}' ({op}): its operand has shape {}, not one value per channel of {}",
                    ShapeText(x.shapes[k]),
                    ShapeText(x.shapes[0])
                )
                .into());
            }
        }
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let (c, spatial) = (s[1], s[2..].iter().product::<usize>());
        let (
            DataMut::F32(y),
            [Data::F32(v), Data::F32(scale), Data::F32(bias), Data::F32(mean), Data::F32(var), rest @ ..],
        ) = (out, x.ins)
        else {
            return Err(MISMATCH.into());
        };
        let terms = x.scratch.state::<ChainTerms>();
        // As the unfused BatchNormalization makes them.
        terms.g.clear();
        terms.s.clear();
        for ch in 0..c {
            let (g, s) = nn::batch_norm_terms(scale, bias, mean, var, self.epsilon, ch);
            terms.g.push(g);
            terms.s.push(s);
        }
        // Each operand one value a channel (a single value repeated).
        let mut operands = rest.iter();
        let mut per_channel = |on: bool, dst: &mut Vec<f32>| -> Result<bool, String> {
            if !on {
                return Ok(false);
            }
            let Some(Data::F32(p)) = operands.next() else { return Err(MISMATCH.into()) };
            dst.clear();
            dst.extend((0..c).map(|ch| if p.len() == 1 { p[0] } else { p[ch] }));
            Ok(true)
        };
        let has_m = per_channel(self.chain.mul, &mut terms.m)?;
        let has_a = per_channel(self.chain.add, &mut terms.a)?;
        if spatial == 0 || y.is_empty() {
            return Ok(());
        }
        let (m, a) = (has_m.then_some(&terms.m[..]), has_a.then_some(&terms.a[..]));
        let (gs, act) = ((&terms.g[..], &terms.s[..]), self.chain.act);
        let planes = y.len() / spatial;
        let tasks = if y.len() >= PARALLEL_MIN_LEN { cores().min(planes) } else { 1 };
        if tasks < 2 {
            nn::channel_chain(v, c, spatial, gs, (m, a), act, 0, y);
            return Ok(());
        }
        let chunk = planes.div_ceil(tasks) * spatial;
        x.par.for_each_chunk(y, chunk, &|start, part| {
            let xs = &v[start..start + part.len()];
            nn::channel_chain(xs, c, spatial, gs, (m, a), act, start / spatial, part);
        });
        Ok(())
    }
}

impl Op for BatchNormTrain {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let c = per_channel(x, &self.names, 2)?;
        Ok(match self.out {
            0 => Shape::from_slice(x.shapes[0]),
            _ => Shape::from_slice(&[c]),
        })
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        match out {
            DataMut::F32(y) => train::<f32>(self, &x, y),
            DataMut::F64(y) => train::<f64>(self, &x, y),
            _ => Err(MISMATCH.into()),
        }
    }

    fn halves_in_f32(&self) -> bool {
        true
    }
}

/// BatchNormalization in training mode, statistics in f64: Y from the batch's mean and
/// population variance per channel (`out` 0), or the running mean (1) / variance (2)
/// moved toward them by `1 - momentum`.
fn train<T: Storage + Number>(op: &BatchNormTrain, x: &RunIn<'_, '_>, y: &mut [T]) -> Result<(), String> {
    let s = x.shapes[0];
    let (batch, channels, spatial) = (s[0], s[1], s[2..].iter().product::<usize>());
    let p = |k: usize| T::get(x.ins[k]).ok_or(MISMATCH);
    let (xs, scale, bias, mean, var) = (p(0)?, p(1)?, p(2)?, p(3)?, p(4)?);
    let count = (batch * spatial).max(1) as f64;
    let momentum = f64::from(op.momentum);
    for c in 0..channels {
        let planes = || (0..batch).flat_map(move |b| xs[(b * channels + c) * spatial..][..spatial].iter());
        let m = planes().map(|v| v.to_f64()).sum::<f64>() / count;
        let v = planes().map(|v| (v.to_f64() - m).powi(2)).sum::<f64>() / count;
        match op.out {
            0 => {
                let g = scale[c].to_f64() / (v + f64::from(op.epsilon)).sqrt();
                let shift = bias[c].to_f64() - m * g;
                for b in 0..batch {
                    let at = (b * channels + c) * spatial;
                    for (o, xv) in y[at..at + spatial].iter_mut().zip(&xs[at..at + spatial]) {
                        *o = T::from_f64(xv.to_f64() * g + shift);
                    }
                }
            }
            1 => y[c] = T::from_f64(mean[c].to_f64() * momentum + m * (1.0 - momentum)),
            _ => y[c] = T::from_f64(var[c].to_f64() * momentum + v * (1.0 - momentum)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_operand_not_per_channel_is_an_error_naming_the_folded_node() {
        let chain = ChannelChain { mul: true, add: true, act: None };
        let names: Vec<String> = ["x", "s", "b", "m", "v", "k", "a"].map(String::from).to_vec();
        let folded = [("mul_k", "Mul"), ("add_a", "Add")].map(|(n, o)| (n.to_string(), o.to_string()));
        let op = BatchNorm { epsilon: 1e-5, names }.with_channel_chain(chain, &folded).expect("a chain");
        let (x, c): (&[usize], &[usize]) = (&[2, 8, 5, 8], &[8]);
        let shape = |mul: &[usize], add: &[usize]| {
            let shapes = [x, c, c, c, c, mul, add];
            op.shape(&ShapeIn { shapes: &shapes, data: &[] }).map(|s| s.to_vec())
        };
        assert_eq!(shape(&[8, 1, 1], &[1, 8, 1, 1]).ok(), Some(vec![2, 8, 5, 8]));
        assert_eq!(shape(&[1], &[]).ok(), Some(vec![2, 8, 5, 8]));
        // One value per width column (8 of them, as many as the channels), and a higher rank.
        for (mul, add, node) in [(&[1, 1, 8][..], &[8, 1, 1][..], "mul_k"), (&[8, 1, 1], &[1, 1, 8, 1, 1], "add_a")] {
            let err = format!("{:?}", shape(mul, add).expect_err("not per channel"));
            assert!(err.contains(&format!("'{node}'")), "{err}");
        }
    }
}
