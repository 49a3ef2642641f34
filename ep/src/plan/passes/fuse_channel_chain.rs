//! Per-channel chain fusion: an op that takes one (`Op::with_channel_chain`: inference
//! BatchNormalization) folds the float32 nodes that only post-process its `[N, C, ...]`
//! output channel by channel, in this order: a Mul and an Add by operands of one value per
//! channel (or one value), then an activation (any unary op, or Clip). DenseNet's
//! pre-activation BatchNormalization -> Mul -> Add -> Relu before each convolution, over
//! each growing concatenation, is then one pass over memory instead of four.
//!
//! A node is folded only when the output before it is read by that node alone (and is not
//! an output of the fused subgraph), the operand is computed before the op and declared
//! with fixed dims that broadcast as one value per channel (`[C, 1, ...]`, `[1, C, 1,
//! ...]`, of the output's rank or less, or all ones), and the op's output is declared with
//! a fixed channel count. The fused step computes each node's rounding in turn (the same
//! bits as the unfused steps).

use super::{ready_before, sole_reader};
use crate::error::Result;
use crate::graph::{Dim, GraphDesc};
use crate::ops::ChannelChain;
use crate::plan::{Epilogue, Plan, Slot, Step, ValueId};
use crate::registry::Kernel;
use rivet_kernels::nn::Activation;
use rivet_kernels::BinaryOp;

pub fn run(plan: &mut Plan, _graph: &GraphDesc) -> Result<()> {
    let mut removed = vec![false; plan.steps.len()];
    let mut absorbed_into: Vec<usize> = (0..plan.steps.len()).collect();
    for p in 0..plan.steps.len() {
        let step = &plan.steps[p];
        let Some(op) = step.op.clone() else { continue };
        if removed[p] || !matches!(step.kernel, Kernel::Op) || step.epilogue.is_some() {
            continue;
        }
        let Some(channels) = channels(plan, step.output) else { continue };
        // The chain's steps in order, with the operands of its Mul and Add.
        let mut chain = ChannelChain { mul: false, add: false, act: None };
        let (mut folded, mut operands) = (Vec::new(), Vec::new());
        let mut v = step.output;
        while chain.act.is_none() && matches!(plan.values[v].slot, Slot::Buffer(_)) {
            let Some(t) = sole_reader(plan, &removed, p, v) else { break };
            let s = &plan.steps[t];
            if !plain(s) || plan.values[s.output].elem_type != plan.values[v].elem_type {
                break;
            }
            match s.kernel {
                Kernel::Binary(op @ (BinaryOp::Mul | BinaryOp::Add)) if s.inputs.len() == 2 => {
                    let other = if s.inputs[0] == v { s.inputs[1] } else { s.inputs[0] };
                    let mul = op == BinaryOp::Mul;
                    let allowed = if mul { !chain.mul && !chain.add } else { !chain.add };
                    if !allowed || other == v || !ready_before(plan, &removed, other, p) {
                        break;
                    }
                    if !per_channel(plan, other, v, channels) {
                        break;
                    }
                    if mul {
                        chain.mul = true;
                    } else {
                        chain.add = true;
                    }
                    operands.push(other);
                }
                Kernel::Unary(u) if s.inputs[..] == [v] => chain.act = Some(Activation::Unary(u)),
                // (From opset 11 Clip's bounds are inputs, constants the kernel already holds.)
                Kernel::Clip { min, max } if s.inputs[0] == v && !s.inputs[1..].contains(&v) => {
                    chain.act = Some(Activation::Clip { min, max })
                }
                _ => break,
            }
            folded.push(t);
            v = s.output;
        }
        if folded.is_empty() {
            continue;
        }
        let names: smallvec::SmallVec<[(String, String); 3]> =
            folded.iter().map(|&t| (plan.steps[t].node_name.clone(), plan.steps[t].op_type.clone())).collect();
        let Some(fused) = op.with_channel_chain(chain, &names) else { continue };
        let step = &mut plan.steps[p];
        step.op = Some(fused);
        step.inputs.extend(operands);
        step.output = v;
        step.epilogue = Some(Box::new(Epilogue { folded: names, ..Default::default() }));
        for t in folded {
            removed[t] = true;
            absorbed_into[t] = p;
        }
    }
    super::drop_steps(plan, &removed, &absorbed_into);
    Ok(())
}

/// A float32 step with no parameters and no work folded into it (it may carry the names
/// of nodes folded before).
fn plain(s: &Step) -> bool {
    !s.typed && s.params.is_empty() && s.epilogue.as_ref().is_none_or(|e| e.is_names_only())
}

/// The fixed channel count of `v` (declared `[N, C, ...]`, float32).
fn channels(plan: &Plan, v: ValueId) -> Option<usize> {
    let value = &plan.values[v];
    if value.elem_type != crate::graph::dtype::FLOAT {
        return None;
    }
    match value.declared.as_deref()? {
        [_, Dim::Fixed(c), ..] => Some(*c),
        _ => None,
    }
}

/// Whether `b` is declared with fixed dims that broadcast onto `v` (of `channels` on axis
/// 1) as one value per channel, or all ones.
fn per_channel(plan: &Plan, b: ValueId, v: ValueId, channels: usize) -> bool {
    let (Some(bd), Some(vd)) = (&plan.values[b].declared, &plan.values[v].declared) else { return false };
    let Some(at) = vd.len().checked_sub(bd.len()) else { return false };
    plan.values[b].elem_type == crate::graph::dtype::FLOAT
        && bd.iter().enumerate().all(|(i, d)| *d == Dim::Fixed(1) || (at + i == 1 && *d == Dim::Fixed(channels)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{GraphDesc, NodeDesc};
    use crate::plan::passes::test_graphs::{f32_scalar, graph, lowered_then, node, v};

    fn f(n: usize) -> Dim {
        Dim::Fixed(n)
    }

    /// x[2, 8, 5, 5] -> BatchNormalization -> the `chain` ops in order (`Mul`, `Add`
    /// by an operand declared `dims`, or an activation) -> output, with `extra` nodes.
    fn bn_then(chain: &[(&str, &[Dim])], extra: Vec<NodeDesc>, outputs: &[&str]) -> GraphDesc {
        let y = |name: &str| v(name, &[f(2), f(8), f(5), f(5)]);
        let c = |name: &str| v(name, &[f(8)]);
        let bn_in = [y("x"), c("s"), c("b"), c("m"), c("var")];
        let mut all = vec![node("bn", "BatchNormalization", 15, &bn_in, y("y0"))];
        let mut inputs = bn_in.to_vec();
        for (i, &(op, dims)) in chain.iter().enumerate() {
            let (last, out) = (format!("y{i}"), format!("y{}", i + 1));
            let n = match op {
                "Mul" | "Add" => {
                    let operand = v(&format!("k{i}"), dims);
                    inputs.push(operand.clone());
                    node(&format!("n{i}"), op, 14, &[operand, y(&last)], y(&out))
                }
                _ => node(&format!("n{i}"), op, 13, &[y(&last)], y(&out)),
            };
            all.push(n);
        }
        all.extend(extra);
        graph(all, inputs, outputs.iter().map(|o| y(o)).collect())
    }

    fn fused(g: &GraphDesc) -> Plan {
        lowered_then(g, run)
    }

    #[test]
    fn a_mul_an_add_and_an_activation_by_channel_fold_into_the_batch_norm() {
        let (per_c, per_c4, one) = ([f(8), f(1), f(1)], [f(1), f(8), f(1), f(1)], [f(1)]);
        for (mul, add) in [(&per_c[..], &per_c4[..]), (&one[..], &per_c[..]), (&per_c4[..], &[][..])] {
            let g = bn_then(&[("Mul", mul), ("Add", add), ("Relu", &[])], vec![], &["y3"]);
            let plan = fused(&g);
            assert_eq!(plan.steps.len(), 1, "{mul:?} {add:?}");
            let step = &plan.steps[0];
            let e = step.epilogue.as_deref().expect("the folded names");
            assert!(e.is_names_only());
            let names: Vec<&str> = e.folded.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names, ["n0", "n1", "n2"]);
            assert_eq!(step.inputs.len(), 7);
            assert_eq!(plan.values[step.output].name, "y3");
        }
        // Only an activation, or only an Add and a Clip.
        let plan = fused(&bn_then(&[("Relu", &[])], vec![], &["y1"]));
        assert_eq!((plan.steps.len(), plan.steps[0].inputs.len()), (1, 5));
        let plan = fused(&bn_then(&[("Add", &[f(8), f(1), f(1)]), ("Sigmoid", &[])], vec![], &["y2"]));
        assert_eq!((plan.steps.len(), plan.steps[0].inputs.len()), (1, 6));
        // A Clip of opset 13, its bounds constant inputs (found by review: only opset 6's
        // attribute bounds folded).
        let y = |name: &str| v(name, &[f(2), f(8), f(5), f(5)]);
        let ins = [y("y0"), f32_scalar("lo", -1.0), f32_scalar("hi", 2.0)];
        let mut g = bn_then(&[], vec![node("clip", "Clip", 13, &ins, y("z"))], &["z"]);
        g.inputs.extend(ins[1..].iter().cloned());
        let plan = fused(&g);
        assert_eq!(plan.steps.len(), 1);
        assert_eq!(plan.values[plan.steps[0].output].name, "z");
    }

    #[test]
    fn what_is_not_one_value_a_channel_or_is_read_elsewhere_stays_a_step() {
        let steps = |chain: &[(&str, &[Dim])], extra: Vec<NodeDesc>, outputs: &[&str]| {
            let plan = fused(&bn_then(chain, extra, outputs));
            let folded = plan.steps[0].epilogue.as_ref().map_or(0, |e| e.folded.len());
            (plan.steps.len(), folded)
        };
        // An operand of the spatial dims, of all of X's shape, of another channel count,
        // of a higher rank: nothing folds.
        for dims in [&[f(5), f(5)][..], &[f(2), f(8), f(5), f(5)], &[f(4), f(1), f(1)], &[f(1), f(1), f(8), f(1), f(1)]]
        {
            assert_eq!(steps(&[("Mul", dims), ("Relu", &[])], vec![], &["y2"]), (3, 0), "{dims:?}");
        }
        // A symbolic channel count.
        assert_eq!(steps(&[("Mul", &[Dim::Symbolic("c".into()), f(1), f(1)])], vec![], &["y1"]), (2, 0));
        // A Mul after the Add stays (only the Add folds); an activation ends the chain.
        let per_c = [f(8), f(1), f(1)];
        assert_eq!(steps(&[("Add", &per_c), ("Mul", &per_c)], vec![], &["y2"]), (2, 1));
        assert_eq!(steps(&[("Relu", &[]), ("Add", &per_c)], vec![], &["y2"]), (2, 1));
        // The normalized output read by two nodes, or an output of the subgraph.
        let other = node("other", "Neg", 13, &[v("y0", &[f(2), f(8), f(5), f(5)])], v("z", &[f(2), f(8), f(5), f(5)]));
        assert_eq!(steps(&[("Relu", &[])], vec![other], &["y1", "z"]), (3, 0));
        assert_eq!(steps(&[("Relu", &[])], vec![], &["y1", "y0"]), (2, 0));
        let e = fused(&bn_then(&[("Relu", &[])], vec![], &["y1"])).steps[0].epilogue.clone();
        assert_eq!(e.map(|e| e.folded[0].1.clone()), Some("Relu".to_string()));
    }
}
