//! RMS normalization's decomposed form as one RMSNormalization step (over the last
//! axis). Exporters before opset 23 write Llama's and T5's norms out as six or seven nodes:
//!
//! `Pow(x, 2)` (or `Mul(x, x)`) -> `ReduceMean` over the last axis, keeping it ->
//! `Add(·, eps)` -> `Sqrt` -> `Div(1, ·)` (or `Reciprocal`) -> `Mul(x, ·)` -> `Mul(·, w)`,
//! or `Div(x, ·)` in place of the reciprocal and its Mul.
//!
//! Each of them is a pass over the activation (or a reduction of it); fused, the row is
//! read twice and written once by the vectorised kernel of RMSNormalization
//! (`rivet_kernels::nn::layer_norm`), split over the pool by rows. The chain's
//! intermediates must be float32 buffers each read by the next node alone, `eps` (and the
//! exponent 2, the 1 divided) a float32 constant of one element and no more axes than x,
//! `w` of the normalized axis' length (leading 1s allowed, no more axes than x), that
//! length static in x's declared shape, and the result declared as x is: then the fused
//! step's output is the chain's, shape for shape. The step takes the Pow's place in the profile and names
//! the others as folded. The bits are not the chain's (the kernel multiplies by the
//! reciprocal where `Div(x, ·)` divides, and sums the squares in its own order), both
//! within float32 rounding of the exact value.

use super::{drop_steps, float_buffer, other_input, scalar_constant, sole_reader};
use crate::error::Result;
use crate::graph::{dtype, Dim, GraphDesc};
use crate::node_attrs::{const_i64, int_attr, ints_attr};
use crate::ops::OpRef;
use crate::plan::{Epilogue, Plan, Slot, ValueId};
use crate::registry::Kernel;
use rivet_kernels::{BinaryOp, UnaryOp};

pub fn run(plan: &mut Plan, graph: &GraphDesc) -> Result<()> {
    let mut removed = vec![false; plan.steps.len()];
    let mut absorbed_into: Vec<usize> = (0..plan.steps.len()).collect();
    for first in 0..plan.steps.len() {
        let Some(found) = find(plan, graph, &removed, first) else { continue };
        let Found { x, w, epsilon, rest } = found;
        let last = *rest.last().expect("the chain has a weight Mul");
        let mut folded = smallvec::SmallVec::new();
        for &s in &rest {
            folded.push((plan.steps[s].node_name.clone(), plan.steps[s].op_type.clone()));
        }
        let names = vec![plan.values[x].name.clone(), plan.values[w].name.clone()];
        let head = &plan.steps[first];
        let (node_name, node, op_type) = (head.node_name.clone(), head.node, head.op_type.clone());
        let step = &mut plan.steps[last];
        step.kernel = Kernel::Op;
        step.op = Some(OpRef(crate::ops::layer_norm::rms_norm_last_axis(epsilon, names)));
        step.typed = true;
        step.inputs = smallvec::smallvec![x, w];
        step.params.clear();
        step.node_name = node_name;
        step.node = node;
        step.op_type = op_type;
        step.epilogue = Some(Box::new(Epilogue { folded, ..Epilogue::default() }));
        for s in std::iter::once(first).chain(rest[..rest.len() - 1].iter().copied()) {
            removed[s] = true;
            absorbed_into[s] = last;
        }
    }
    drop_steps(plan, &removed, &absorbed_into);
    Ok(())
}

/// A chain found from its first step (the squares).
struct Found {
    x: ValueId,
    w: ValueId,
    epsilon: f32,
    /// The chain's other steps, in order; the last is the weight's Mul.
    rest: Vec<usize>,
}

/// Whether step `s` is a plain float32 step of `kernel` (nothing fused into it yet).
fn plain(plan: &Plan, s: usize, kernel: Kernel) -> bool {
    let step = &plan.steps[s];
    step.kernel == kernel && !step.typed && step.epilogue.is_none() && step.params.is_empty()
}

/// The one step reading `v` (a float32 buffer) after step `s`, if only one does.
fn next(plan: &Plan, removed: &[bool], s: usize) -> Option<usize> {
    let v = plan.steps[s].output;
    float_buffer(plan, v).then(|| sole_reader(plan, removed, s, v)).flatten()
}

/// The static length of the last axis of `v`'s declared shape.
fn last_dim(plan: &Plan, v: ValueId) -> Option<usize> {
    match plan.values[v].declared.as_ref()?.last()? {
        Dim::Fixed(d) => Some(*d),
        Dim::Symbolic(_) => None,
    }
}

fn find(plan: &Plan, graph: &GraphDesc, removed: &[bool], first: usize) -> Option<Found> {
    if removed[first] {
        return None;
    }
    let step = &plan.steps[first];
    // The squares: Pow(x, 2) or Mul(x, x).
    let x = match step.inputs[..] {
        [x, e] if plain(plan, first, Kernel::Binary(BinaryOp::Pow)) && scalar(plan, graph, e, x) == Some(2.0) => x,
        [x, y] if x == y && plain(plan, first, Kernel::Binary(BinaryOp::Mul)) => x,
        _ => return None,
    };
    if plan.values[x].elem_type != dtype::FLOAT {
        return None;
    }
    let d = last_dim(plan, x)?;
    let rank = plan.values[x].declared.as_ref()?.len();
    // Their mean over the last axis, kept.
    let mean = next(plan, removed, first)?;
    let m = &plan.steps[mean];
    let node = graph.nodes.get(m.node)?;
    if m.op_type != "ReduceMean"
        || node.op_type != "ReduceMean"
        || !(node.domain.is_empty() || node.domain == "ai.onnx")
    {
        return None;
    }
    if m.inputs.first() != Some(&step.output) || m.epilogue.is_some() || int_attr(node, "keepdims", 1).ok()? != 1 {
        return None;
    }
    let axes = match node.since_version {
        v if v < 18 => ints_attr(node, "axes").ok()??,
        _ => const_i64(node, 1, "axes").ok()??,
    };
    if axes.len() != 1 || !(axes[0] == -1 || axes[0] == rank as i64 - 1) {
        return None;
    }
    // + eps, its square root.
    let add = next(plan, removed, mean)?;
    let epsilon = scalar(plan, graph, other_input(plan, add, plan.steps[mean].output)?, x)?;
    if !plain(plan, add, Kernel::Binary(BinaryOp::Add)) {
        return None;
    }
    let sqrt = next(plan, removed, add)?;
    if !plain(plan, sqrt, Kernel::Unary(UnaryOp::Sqrt)) || plan.steps[sqrt].inputs.len() != 1 {
        return None;
    }
    let root = plan.steps[sqrt].output;
    // x divided by it: Div(x, root), or x times Div(1, root) or Reciprocal(root).
    let after = next(plan, removed, sqrt)?;
    let div = Kernel::Binary(BinaryOp::Div);
    let mut rest = vec![mean, add, sqrt, after];
    let normalized = match plan.steps[after].inputs[..] {
        [a, b] if a == x && b == root && plain(plan, after, div) => after,
        [one, b] if b == root && plain(plan, after, div) && scalar(plan, graph, one, x) == Some(1.0) => {
            times_x(plan, removed, after, x, &mut rest)?
        }
        [b] if b == root && plain(plan, after, Kernel::Unary(UnaryOp::Reciprocal)) => {
            times_x(plan, removed, after, x, &mut rest)?
        }
        _ => return None,
    };
    // Times the weight, of the last axis' length.
    let scaled = next(plan, removed, normalized)?;
    let w = other_input(plan, scaled, plan.steps[normalized].output)?;
    if !plain(plan, scaled, Kernel::Binary(BinaryOp::Mul)) || w == x || plan.values[w].elem_type != dtype::FLOAT {
        return None;
    }
    let wd = plan.values[w].declared.as_ref()?;
    let (last, lead) = wd.split_last()?;
    if wd.len() > rank || *last != Dim::Fixed(d) || lead.iter().any(|l| *l != Dim::Fixed(1)) {
        return None;
    }
    // The result has x's declared shape (belt and braces: no constant broadcast it).
    let y = plan.steps[scaled].output;
    if !matches!(plan.values[y].slot, Slot::Buffer(_) | Slot::Output(_))
        || plan.values[y].declared != plan.values[x].declared
    {
        return None;
    }
    rest.push(scaled);
    Some(Found { x, w, epsilon, rest })
}

/// The value of `v`, a float32 constant of one element of no more axes than x (one of
/// more would broadcast the chain's output to a higher rank: found by review, a `[1, 1, 1]`
/// eps on a `[4, 64]` x makes a `[1, 4, 64]` output).
fn scalar(plan: &Plan, graph: &GraphDesc, v: ValueId, x: ValueId) -> Option<f32> {
    let (vd, xd) = (plan.values[v].declared.as_ref()?, plan.values[x].declared.as_ref()?);
    (vd.len() <= xd.len()).then(|| scalar_constant(plan, graph, v)).flatten()
}

/// The Mul of x by the reciprocal step `r`'s output, which reads it alone: its step,
/// added to `rest`.
fn times_x(plan: &Plan, removed: &[bool], r: usize, x: ValueId, rest: &mut Vec<usize>) -> Option<usize> {
    let m = next(plan, removed, r)?;
    if !plain(plan, m, Kernel::Binary(BinaryOp::Mul)) || other_input(plan, m, plan.steps[r].output)? != x {
        return None;
    }
    rest.push(m);
    Some(m)
}

#[cfg(test)]
#[path = "fuse_rms_norm_tests.rs"]
mod tests;
