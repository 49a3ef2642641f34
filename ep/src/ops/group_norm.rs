//! GroupNormalization and InstanceNormalization of X `[N, C, ...]`, on float32 (the
//! halves between casts) and float64. GroupNormalization normalizes each group of
//! `C / num_groups` channels over its channels and positions, then scales and shifts per
//! group (opset 18) or per channel (opset 21); InstanceNormalization is the same with a
//! group per channel (float64 runs it as such; float32 has its own kernel).

use std::sync::Arc;

use rivet_kernels::nn;

use super::batch_norm::per_channel;
use super::claim;
use super::op::util::check_attrs;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::{float_attr, int_attr};

/// `per_channel`: scale and bias hold one value per channel (opset 21) rather than per
/// group (opset 18).
#[derive(Debug)]
struct GroupNorm {
    groups: usize,
    epsilon: f32,
    per_channel: bool,
}

#[derive(Debug)]
struct InstanceNorm {
    epsilon: f32,
    names: Vec<String>,
}

pub fn group_normalization(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    claim::data_inputs(node, 3, 3)?;
    claim::outputs(node, false)?;
    check_attrs(node, &["num_groups", "epsilon", "stash_type"])?;
    if int_attr(node, "stash_type", 1)? != 1 {
        return Err("stash_type other than float".into());
    }
    let g = int_attr(node, "num_groups", 0)?;
    let groups = usize::try_from(g).ok().filter(|&g| g > 0).ok_or(format!("num_groups {g}"))?;
    let epsilon = float_attr(node, "epsilon", 1e-5)?;
    claim::float_types(node)?;
    Ok(Arc::new(GroupNorm { groups, epsilon, per_channel: node.since_version >= 21 }))
}

pub fn instance_normalization(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    claim::data_inputs(node, 3, 3)?;
    claim::outputs(node, false)?;
    check_attrs(node, &["epsilon"])?;
    let epsilon = float_attr(node, "epsilon", 1e-5)?;
    claim::float_types(node)?;
    Ok(Arc::new(InstanceNorm { epsilon, names: claim::input_names(node) }))
}

const MISMATCH: &str = "input and output element types differ from the plan's";

impl Op for GroupNorm {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (s, groups) = (x.shapes[0], self.groups);
        let want = if self.per_channel { s.get(1).copied().unwrap_or(0) } else { groups };
        let ok = s.len() >= 2 && s[1].is_multiple_of(groups) && x.shapes[1..].iter().all(|p| *p == [want]);
        if !ok {
            return Err(format!("{groups} groups, scale and bias of [{want}]").into());
        }
        Ok(Shape::from_slice(s))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let spatial = s[2..].iter().product();
        let (g, e, pc) = (self.groups, self.epsilon, self.per_channel);
        match (x.ins, out) {
            ([Data::F32(v), Data::F32(scale), Data::F32(bias)], DataMut::F32(y)) => {
                nn::group_norm(v, scale, bias, s[0], s[1], spatial, g, e, pc, y);
            }
            ([Data::F64(v), Data::F64(scale), Data::F64(bias)], DataMut::F64(y)) => {
                nn::group_norm(v, scale, bias, s[0], s[1], spatial, g, e, pc, y);
            }
            _ => return Err(MISMATCH.into()),
        }
        Ok(())
    }

    fn halves_in_f32(&self) -> bool {
        true
    }
}

impl Op for InstanceNorm {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        per_channel(x, &self.names, 3)?;
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let spatial = s[2..].iter().product();
        match (x.ins, out) {
            ([Data::F32(v), Data::F32(scale), Data::F32(bias)], DataMut::F32(y)) => {
                let (e, channels, planes) = (self.epsilon, s[1], s[0] * s[1]);
                crate::parallel::by_planes(v, y, planes, (spatial, spatial), x.par, &|p, xs, ys| {
                    let len = p.len() * spatial;
                    nn::instance_norm(&xs[..len], scale, bias, e, channels, spatial, p.start, &mut ys[..len]);
                });
            }
            // A group per channel.
            ([Data::F64(v), Data::F64(scale), Data::F64(bias)], DataMut::F64(y)) => {
                nn::group_norm(v, scale, bias, s[0], s[1], spatial, s[1], self.epsilon, true, y);
            }
            _ => return Err(MISMATCH.into()),
        }
        Ok(())
    }

    fn halves_in_f32(&self) -> bool {
        true
    }
}
