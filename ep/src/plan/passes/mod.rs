//! The plan compiler: lowering, then named passes over the plan, in order.
//!
//! `lower` turns the claimed nodes into steps; each pass of `PASSES` then rewrites or
//! annotates the plan. A new pass (fusion, pre-packing, aliasing, constant folding) is a
//! file here with a `run(&mut Plan, &GraphDesc) -> Result<()>` and its tests, plus one line
//! in `PASSES` at the place its inputs are ready: a pass that adds, removes or merges
//! steps goes before `share_buffers`, which numbers the buffers of the final steps.

use crate::error::Result;
use crate::graph::GraphDesc;
use crate::plan::Plan;
use crate::registry::Kernel;

pub mod channels_last;
pub mod channels_last_int8;
pub mod drop_dead_steps;
pub mod fix_shapes;
pub mod fold_matmul_operands;
pub mod fuse_attention;
pub mod fuse_channel_chain;
pub mod fuse_epilogues;
pub mod fuse_gelu;
pub mod fuse_qdq;
pub mod fuse_rms_norm;
pub mod fuse_rope;
pub mod lower;
pub mod mark_constant_weights;
pub mod share_buffers;
#[cfg(test)]
pub(crate) mod test_graphs;

/// One pass of the plan compiler.
pub struct Pass {
    /// What the pass is called in errors and in `PASSES`.
    pub name: &'static str,
    pub run: fn(&mut Plan, &GraphDesc) -> Result<()>,
}

/// The passes after lowering, in the order they run.
pub const PASSES: &[Pass] = &[
    Pass { name: "drop_dead_steps", run: drop_dead_steps::run },
    Pass { name: "fold_matmul_operands", run: fold_matmul_operands::run },
    Pass { name: "fuse_attention", run: fuse_attention::run },
    Pass { name: "fuse_gelu", run: fuse_gelu::run },
    Pass { name: "fuse_rms_norm", run: fuse_rms_norm::run },
    Pass { name: "fuse_rope", run: fuse_rope::run },
    Pass { name: "fuse_epilogues", run: fuse_epilogues::run },
    Pass { name: "fuse_channel_chain", run: fuse_channel_chain::run },
    // Before the buffers: a Concat's inputs are written in place only in static plans.
    Pass { name: "fix_shapes", run: fix_shapes::run },
    Pass { name: "share_buffers", run: share_buffers::run },
    Pass { name: "mark_constant_weights", run: mark_constant_weights::run },
    // After the shapes are fixed and the constant filters marked; it changes no step or
    // buffer, only how two convolutions store a value between them.
    Pass { name: "channels_last", run: channels_last::run },
    // The same for 8-bit activations between quantized convolutions: only the ops the
    // steps run change.
    Pass { name: "channels_last_int8", run: channels_last_int8::run },
];

/// Removes the steps flagged in `removed` (folded into step `absorbed_into[i]`), pointing
/// the values' first readers, which error messages name, at the steps that remain.
pub(crate) fn drop_steps(plan: &mut Plan, removed: &[bool], absorbed_into: &[usize]) {
    if !removed.contains(&true) {
        return;
    }
    let mut new_index = vec![0; removed.len()];
    let mut next = 0;
    for (i, &gone) in removed.iter().enumerate() {
        new_index[i] = next;
        next += usize::from(!gone);
    }
    for value in &mut plan.values {
        if let Some((step, _)) = &mut value.first_reader {
            *step = new_index[absorbed_into[*step]];
        }
    }
    let mut keep = removed.iter().map(|&gone| !gone);
    plan.steps.retain(|_| keep.next().unwrap_or(true));
}

/// The one step other than `p`, not removed, that reads `v`, reading it once (as an input,
/// a param or an epilogue operand).
pub(crate) fn sole_reader(plan: &Plan, removed: &[bool], p: usize, v: crate::plan::ValueId) -> Option<usize> {
    let mut found = None;
    for (i, s) in plan.steps.iter().enumerate() {
        if removed[i] || i == p {
            continue;
        }
        for read in s.reads() {
            if read == v {
                if found.is_some() {
                    return None;
                }
                found = Some(i);
            }
        }
    }
    found
}

/// Whether `v` is a float32 buffer of the plan's (not an input, a constant or an output
/// of the fused subgraph): an intermediate a fusion may drop.
pub(crate) fn float_buffer(plan: &Plan, v: crate::plan::ValueId) -> bool {
    matches!(plan.values[v].slot, crate::plan::Slot::Buffer(_))
        && plan.values[v].elem_type == crate::graph::dtype::FLOAT
}

/// The input of two-input step `s` that is not `v`, when `v` is read once.
pub(crate) fn other_input(plan: &Plan, s: usize, v: crate::plan::ValueId) -> Option<crate::plan::ValueId> {
    match plan.steps[s].inputs[..] {
        [a, b] if a == v && b != v => Some(b),
        [a, b] if b == v && a != v => Some(a),
        _ => None,
    }
}

/// Whether `v` exists before step `p` runs: an input, a constant, or the output of an
/// earlier step.
pub(crate) fn ready_before(plan: &Plan, removed: &[bool], v: crate::plan::ValueId, p: usize) -> bool {
    use crate::plan::Slot;
    match plan.values[v].slot {
        Slot::Input(_) | Slot::Const(_) => true,
        Slot::Buffer(_) | Slot::Output(_) => {
            plan.steps.iter().enumerate().any(|(i, s)| i < p && !removed[i] && s.output == v)
        }
    }
}

/// The value of `v` when it is a float32 constant of one element: one the plan holds, or a
/// small constant initializer whose data the graph carries.
pub(crate) fn scalar_constant(plan: &Plan, graph: &GraphDesc, v: crate::plan::ValueId) -> Option<f32> {
    if let crate::plan::Slot::Const(c) = plan.values[v].slot {
        return match plan.constants[c].2.view().f32()? {
            [x] => Some(*x),
            _ => None,
        };
    }
    if !matches!(plan.values[v].slot, crate::plan::Slot::Input(_)) {
        return None;
    }
    let name = &plan.values[v].name;
    graph.nodes.iter().flat_map(|n| n.inputs.iter().flatten()).find(|d| d.name == *name).and_then(|d| {
        match &d.constant {
            Some(crate::graph::Constant::F32(x)) if x.len() == 1 => Some(x[0]),
            _ => None,
        }
    })
}

impl Plan {
    /// Builds the plan for a fused subgraph: QDQ fusion on the graph (`fuse_qdq`),
    /// lowering, then every pass of `PASSES`. Fails
    /// if a node is not runnable (it should not have been claimed), the graph does not
    /// hang together, or its declared shapes contradict each other.
    pub fn build(name: &str, graph: &GraphDesc) -> Result<Plan> {
        // Quantized groups fused on the graph first (their nodes become others).
        let fused = fuse_qdq::run(graph);
        let graph = fused.as_ref().unwrap_or(graph);
        let mut plan = lower::run(name, graph)?;
        for pass in PASSES {
            (pass.run)(&mut plan, graph)?;
        }
        plan.units = crate::plan::NodeUnit::of_steps(&plan.steps);
        Ok(plan)
    }

    /// The `bf16` precision: every float MatMul, Gemm and Conv whose weights are constant
    /// (marked by `mark_constant_weights`) runs on bfloat16 products with float32 sums,
    /// its weights packed once as bfloat16 where a bfloat16 kernel takes the product
    /// (`pack_b_bf16`, `direct::fits_bf16`). Other steps are unchanged.
    /// Convolutions stored channels last (`channels_last`) go back to NCHW: which
    /// convolution takes bfloat16 products is the NCHW paths' choice (`products::
    /// convolution`), and those paths keep it (found by review: the channels-last 1x1
    /// products took bfloat16 filters where the NCHW paths had kept float32 ones).
    pub fn use_bf16(&mut self) {
        for step in &mut self.steps {
            step.bf16 = step.constant_weights
                && matches!(step.kernel, Kernel::MatMul { .. } | Kernel::Gemm { .. } | Kernel::Conv { .. });
            if let Kernel::Conv { channels_last, .. } = &mut step.kernel {
                *channels_last = Default::default();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_passes_run_in_their_documented_order() {
        let names: Vec<&str> = PASSES.iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            [
                "drop_dead_steps",
                "fold_matmul_operands",
                "fuse_attention",
                "fuse_gelu",
                "fuse_rms_norm",
                "fuse_rope",
                "fuse_epilogues",
                "fuse_channel_chain",
                "fix_shapes",
                "share_buffers",
                "mark_constant_weights",
                "channels_last",
                "channels_last_int8"
            ]
        );
    }
}
