//! Attention's decomposed form as one step: `MatMul(Q, K)` (with its scale and K's
//! Transpose folded in by `fold_matmul_operands`), an optional `Add` of a mask,
//! `Softmax` along the last axis and `MatMul(·, V)` become an `attention_chain` step
//! with inputs Q, K, V and the mask. It computes strips of query rows whose scores stay
//! in the caches, with the unfused nodes' bits (see `rivet_kernels::attention::chain`).
//!
//! The exporters write this for BERT, ViT, Whisper, T5 and GPT-2 (torch's
//! `scaled_dot_product_attention` and hand-written attention alike). Each intermediate
//! (the scores, the masked scores, the probabilities) must be a buffer that only the next
//! node reads, all of float32; the fused step takes the second MatMul's place, where Q,
//! K, V and the mask all exist. Runs after `fold_matmul_operands` and before
//! `fuse_epilogues` (which would fold the mask's Add into the first MatMul).

use std::sync::Arc;

use super::{drop_steps, float_buffer, sole_reader};
use crate::attention_chain::AttentionChain;
use crate::error::Result;
use crate::graph::{dtype, GraphDesc};
use crate::node_attrs::int_attr;
use crate::ops::OpRef;
use crate::plan::{Epilogue, Plan, ValueId};
use crate::registry::Kernel;
use rivet_kernels::BinaryOp;

pub fn run(plan: &mut Plan, graph: &GraphDesc) -> Result<()> {
    let mut removed = vec![false; plan.steps.len()];
    let mut absorbed_into: Vec<usize> = (0..plan.steps.len()).collect();
    for m1 in 0..plan.steps.len() {
        let Some(found) = find(plan, graph, &removed, m1) else { continue };
        let Found { add, softmax, m2, mask, rank } = found;
        let first = &plan.steps[m1];
        let Kernel::MatMul { trans_b: trans_k } = first.kernel else { unreachable!("checked by find") };
        let Kernel::MatMul { trans_b: trans_v } = plan.steps[m2].kernel else { unreachable!("checked by find") };
        let scale = first.epilogue.as_ref().and_then(|e| e.scale);
        let (q, k) = (first.inputs[0], first.inputs[1]);
        let v = plan.steps[m2].inputs[1];
        // The folded nodes, in order: the first MatMul's, the Add, Softmax, the second
        // MatMul and its own.
        let mut folded = first.epilogue.as_ref().map(|e| e.folded.clone()).unwrap_or_default();
        for s in add.into_iter().chain([softmax, m2]) {
            let st = &plan.steps[s];
            folded.push((st.node_name.clone(), st.op_type.clone()));
            if let Some(e) = &st.epilogue {
                folded.extend(e.folded.iter().cloned());
            }
        }
        let (node_name, node, op_type) = (first.node_name.clone(), first.node, first.op_type.clone());
        let op = AttentionChain { trans_k, trans_v, scale, mask: mask.is_some(), rank };
        let step = &mut plan.steps[m2];
        step.kernel = Kernel::Op;
        step.op = Some(OpRef(Arc::new(op)));
        step.typed = true;
        step.inputs = [q, k, v].into_iter().chain(mask).collect();
        step.node_name = node_name;
        step.node = node;
        step.op_type = op_type;
        step.epilogue = Some(Box::new(Epilogue { folded, ..Epilogue::default() }));
        for s in [Some(m1), add, Some(softmax)].into_iter().flatten() {
            removed[s] = true;
            absorbed_into[s] = m2;
        }
    }
    drop_steps(plan, &removed, &absorbed_into);
    Ok(())
}

/// The rest of a chain that starts at MatMul step `m1`.
struct Found {
    add: Option<usize>,
    softmax: usize,
    m2: usize,
    mask: Option<ValueId>,
    rank: Option<usize>,
}

fn find(plan: &Plan, graph: &GraphDesc, removed: &[bool], m1: usize) -> Option<Found> {
    let first = &plan.steps[m1];
    if removed[m1] || first.typed || !matches!(first.kernel, Kernel::MatMul { .. }) {
        return None;
    }
    // Only a scale may have been fused into it.
    let scale_only = |e: &Epilogue| e.bias.is_none() && e.act.is_none() && e.residual.is_none() && e.after.is_none();
    if !first.epilogue.as_deref().is_none_or(scale_only) || !float_buffer(plan, first.output) {
        return None;
    }
    let mut at = sole_reader(plan, removed, m1, first.output)?;
    let (mut add, mut mask) = (None, None);
    let step = &plan.steps[at];
    if step.kernel == Kernel::Binary(BinaryOp::Add) {
        let scores = first.output;
        if step.typed || step.epilogue.is_some() || !step.params.is_empty() || step.inputs.len() != 2 {
            return None;
        }
        let other = if step.inputs[0] == scores { step.inputs[1] } else { step.inputs[0] };
        if other == scores || plan.values[other].elem_type != dtype::FLOAT || !float_buffer(plan, step.output) {
            return None;
        }
        (add, mask) = (Some(at), Some(other));
        at = sole_reader(plan, removed, at, step.output)?;
    }
    let softmax = at;
    let sm = &plan.steps[softmax];
    let input = plan.steps[add.unwrap_or(m1)].output;
    if sm.op_type != "Softmax" || sm.kernel != Kernel::Op || sm.inputs.as_slice() != [input] {
        return None;
    }
    if !float_buffer(plan, sm.output) || sm.epilogue.is_some() || !sm.params.is_empty() {
        return None;
    }
    // Along the last axis: -1, or the last of the declared rank.
    let node = graph.nodes.get(sm.node)?;
    if node.op_type != "Softmax" || !(node.domain.is_empty() || node.domain == "ai.onnx") {
        return None;
    }
    let legacy = node.since_version < 13;
    let axis = int_attr(node, "axis", if legacy { 1 } else { -1 }).ok()?;
    let rank = match axis {
        -1 => None,
        a => {
            let r = plan.values[input].declared.as_ref()?.len() as i64;
            let a = if a < 0 { a + r } else { a };
            Some((a == r - 1).then_some(r as usize)?)
        }
    };
    let m2 = sole_reader(plan, removed, softmax, sm.output)?;
    let second = &plan.steps[m2];
    let fresh = second.epilogue.as_deref().is_none_or(Epilogue::is_names_only);
    if second.typed || !matches!(second.kernel, Kernel::MatMul { .. }) || !fresh {
        return None;
    }
    if second.inputs[0] != sm.output || second.inputs[1] == sm.output {
        return None;
    }
    Some(Found { add, softmax, m2, mask, rank })
}

#[cfg(test)]
#[path = "fuse_attention_tests.rs"]
mod tests;
