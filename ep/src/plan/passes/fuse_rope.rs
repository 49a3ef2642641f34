//! Rotary position embedding's decomposed rotate-half form as one step. Llama's
//! exporters write `x · cos + rotate_half(x) · sin` out as six nodes for each of Q and K:
//!
//! `Slice(x, h..)` -> `Neg`, `Slice(x, ..h)`, `Concat(·, ·)` along the last axis,
//! `Mul(x, cos)`, `Mul(·, sin)`, `Add`
//!
//! (h half of x's last axis). Fused, x is read once and the output written once
//! (`ops::rotary::RotateHalf`, `rivet_kernels::nn::rotate_half`) with the nodes' bits:
//! each output is rounded at the same two products and one sum. The chain's values must
//! be float32 buffers each read by the next node alone (x, cos and sin may be read
//! elsewhere), the Slices' parameters constants (steps 1, along the last axis), x's last
//! axis static and even, cos and sin of that last axis' length in their declared shapes,
//! and no rank above 8. The step takes the first Slice's place and names the others as
//! folded. Bits: where both products of an output are NaN, the sum may keep the other
//! NaN's payload than the unfused Add does (the compiler orders an addition's operands
//! as it likes, and x86 keeps the first operand's NaN); every other output is the nodes'.

use std::sync::Arc;

use super::{drop_steps, float_buffer, other_input, sole_reader};
use crate::error::Result;
use crate::graph::{dtype, AttrValue, Dim, GraphDesc};
use crate::node_attrs::const_i64;
use crate::ops::rotary::RotateHalf;
use crate::ops::OpRef;
use crate::plan::{Epilogue, Plan, ValueId};
use crate::registry::Kernel;
use rivet_kernels::{BinaryOp, UnaryOp};

pub fn run(plan: &mut Plan, graph: &GraphDesc) -> Result<()> {
    let mut removed = vec![false; plan.steps.len()];
    let mut absorbed_into: Vec<usize> = (0..plan.steps.len()).collect();
    for concat in 0..plan.steps.len() {
        let Some(found) = find(plan, graph, &removed, concat) else { continue };
        let Found { x, cos, sin, half, steps, add } = found;
        let first = *steps.iter().min().expect("the chain has steps");
        let mut folded = smallvec::SmallVec::new();
        for &s in steps.iter().filter(|&&s| s != first).chain([&add]) {
            folded.push((plan.steps[s].node_name.clone(), plan.steps[s].op_type.clone()));
        }
        let head = &plan.steps[first];
        let (node_name, node, op_type) = (head.node_name.clone(), head.node, head.op_type.clone());
        let step = &mut plan.steps[add];
        step.kernel = Kernel::Op;
        step.op = Some(OpRef(Arc::new(RotateHalf { half })));
        step.typed = true;
        step.inputs = smallvec::smallvec![x, cos, sin];
        step.params.clear();
        step.node_name = node_name;
        step.node = node;
        step.op_type = op_type;
        step.epilogue = Some(Box::new(Epilogue { folded, ..Epilogue::default() }));
        for s in steps {
            removed[s] = true;
            absorbed_into[s] = add;
        }
    }
    drop_steps(plan, &removed, &absorbed_into);
    Ok(())
}

/// The highest rank fused: the step walks its rows with inline arrays of this many axes
/// (rank 9 allocated on every Run, found by review; the unfused Slice refuses it anyway).
const MAX_RANK: usize = 8;

/// A chain found from its Concat.
struct Found {
    x: ValueId,
    cos: ValueId,
    sin: ValueId,
    half: usize,
    /// The Slices, the Neg, the Concat and the two Muls.
    steps: Vec<usize>,
    /// The Add, which becomes the fused step.
    add: usize,
}

/// The step writing `v`, not removed.
fn writer(plan: &Plan, removed: &[bool], v: ValueId) -> Option<usize> {
    plan.steps.iter().enumerate().position(|(i, s)| !removed[i] && s.output == v)
}

/// Whether step `s` is a plain float32 step of `kernel` with `inputs` inputs.
fn plain(plan: &Plan, s: usize, kernel: Kernel, inputs: usize) -> bool {
    let step = &plan.steps[s];
    step.kernel == kernel
        && !step.typed
        && step.epilogue.is_none()
        && step.params.is_empty()
        && step.inputs.len() == inputs
}

/// The input and the element range `(start, end)` of the last axis (of `rank`) that Slice
/// step `s` takes, with constant parameters and step 1; `end` clamped to `d`.
fn slice_of(plan: &Plan, graph: &GraphDesc, s: usize, rank: usize, d: usize) -> Option<(ValueId, usize, usize)> {
    let step = &plan.steps[s];
    let node = graph.nodes.get(step.node)?;
    if step.op_type != "Slice" || node.op_type != "Slice" || node.since_version < 10 || step.epilogue.is_some() {
        return None;
    }
    let one = |pos: usize| -> Option<i64> {
        match const_i64(node, pos, "a Slice parameter").ok()? {
            Some(v) if v.len() == 1 => Some(v[0]),
            _ => None,
        }
    };
    let (start, end) = (one(1)?, one(2)?);
    let axis = if node.inputs.get(3).is_some_and(Option::is_some) { one(3)? } else { 0 };
    let step_1 = !node.inputs.get(4).is_some_and(Option::is_some) || one(4)? == 1;
    if !step_1 || !(axis == -1 || axis == rank as i64 - 1) || start < 0 || end < start {
        return None;
    }
    let clamp = |v: i64| usize::try_from(v).map_or(d, |v| v.min(d));
    Some((*step.inputs.first()?, clamp(start), clamp(end)))
}

fn find(plan: &Plan, graph: &GraphDesc, removed: &[bool], concat: usize) -> Option<Found> {
    let c = &plan.steps[concat];
    if removed[concat] || c.op_type != "Concat" || c.inputs.len() != 2 || c.epilogue.is_some() {
        return None;
    }
    let node = graph.nodes.get(c.node)?;
    let (negated, low) = (c.inputs[0], c.inputs[1]);
    if !float_buffer(plan, negated) || !float_buffer(plan, low) || !float_buffer(plan, c.output) {
        return None;
    }
    // [-x[h..], x[..h]]: the Neg of the upper half's Slice, the lower half's Slice.
    let neg = writer(plan, removed, negated)?;
    if !plain(plan, neg, Kernel::Unary(UnaryOp::Neg), 1) || sole_reader(plan, removed, neg, negated)? != concat {
        return None;
    }
    let upper = plan.steps[neg].inputs[0];
    let (s_hi, s_lo) = (writer(plan, removed, upper)?, writer(plan, removed, low)?);
    if !float_buffer(plan, upper) || sole_reader(plan, removed, s_hi, upper)? != neg {
        return None;
    }
    if sole_reader(plan, removed, s_lo, low)? != concat {
        return None;
    }
    let x = plan.steps[s_hi].inputs.first().copied()?;
    let declared = plan.values[x].declared.as_ref()?;
    let (rank, d) = match declared.last()? {
        Dim::Fixed(d) if d % 2 == 0 && *d > 0 && declared.len() <= MAX_RANK => (declared.len(), *d),
        _ => return None,
    };
    let axis = match node.attr("axis") {
        Some(AttrValue::Int(a)) => *a,
        _ => return None,
    };
    if plan.values[x].elem_type != dtype::FLOAT || !(axis == -1 || axis == rank as i64 - 1) {
        return None;
    }
    let half = d / 2;
    if slice_of(plan, graph, s_hi, rank, d)? != (x, half, d) || slice_of(plan, graph, s_lo, rank, d)? != (x, 0, half) {
        return None;
    }
    // rotated · sin + x · cos.
    let m_sin = sole_reader(plan, removed, concat, c.output)?;
    let sin = other_input(plan, m_sin, c.output)?;
    let mul = Kernel::Binary(BinaryOp::Mul);
    if !plain(plan, m_sin, mul, 2) || !float_buffer(plan, plan.steps[m_sin].output) {
        return None;
    }
    let add = sole_reader(plan, removed, m_sin, plan.steps[m_sin].output)?;
    if !plain(plan, add, Kernel::Binary(BinaryOp::Add), 2) {
        return None;
    }
    let cos_term = other_input(plan, add, plan.steps[m_sin].output)?;
    let m_cos = writer(plan, removed, cos_term)?;
    if !plain(plan, m_cos, mul, 2)
        || !float_buffer(plan, cos_term)
        || sole_reader(plan, removed, m_cos, cos_term)? != add
    {
        return None;
    }
    let cos = other_input(plan, m_cos, x)?;
    // cos and sin of the last axis' length: the products broadcast along the others only.
    let last_is_d = |v: ValueId| {
        let declared = plan.values[v].declared.as_ref();
        plan.values[v].elem_type == dtype::FLOAT
            && declared.and_then(|s| s.last().cloned()) == Some(Dim::Fixed(d))
            && declared.is_some_and(|s| s.len() <= MAX_RANK)
    };
    if !last_is_d(cos) || !last_is_d(sin) || [cos, sin].contains(&x) {
        return None;
    }
    Some(Found { x, cos, sin, half, steps: vec![s_hi, neg, s_lo, concat, m_sin, m_cos], add })
}

#[cfg(test)]
#[path = "fuse_rope_tests.rs"]
mod tests;
