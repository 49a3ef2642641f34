//! Dead steps: a step whose output no later step reads and the fused node does not
//! return is dropped, and so, in turn, are the steps that fed only it.
//!
//! Lowering gives each present output of a node its own step. Exporters name every
//! output of a recurrent layer (torch's LSTM: `Y`, `Y_h`, `Y_c`) whether the graph reads
//! it or not, and ORT returns from the fused node only the values read outside it: the
//! project's lstm_tiny ran each of its two bidirectional LSTMs three times, once for the
//! read `Y` and twice for nothing (3.1x ORT's time).

use crate::error::Result;
use crate::graph::GraphDesc;
use crate::plan::Plan;

pub fn run(plan: &mut Plan, graph: &GraphDesc) -> Result<()> {
    let mut live = vec![false; plan.values.len()];
    for &v in &plan.outputs {
        live[v] = true;
    }
    // Backwards: a step is needed when its output is; what it reads is then needed too.
    let mut removed = vec![false; plan.steps.len()];
    for (i, step) in plan.steps.iter().enumerate().rev() {
        if live[step.output] {
            step.reads().for_each(|v| live[v] = true);
        } else {
            removed[i] = true;
        }
    }
    if !removed.contains(&true) {
        return Ok(());
    }
    // Errors about an input name its first reader and the position of the input in that
    // reader's node, as lowering records them: the first step that remains whose node
    // takes the value (by name: a step's inputs skip a node's absent ones).
    for value in plan.values.iter_mut() {
        if value.first_reader.is_some_and(|(s, _)| removed[s]) {
            value.first_reader = plan.steps.iter().enumerate().filter(|&(s, _)| !removed[s]).find_map(|(s, step)| {
                let inputs = &graph.nodes.get(step.node)?.inputs;
                inputs.iter().position(|i| i.as_ref().is_some_and(|i| i.name == value.name)).map(|pos| (s, pos))
            });
        }
    }
    let absorbed_into: Vec<usize> = (0..plan.steps.len()).collect();
    super::drop_steps(plan, &removed, &absorbed_into);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Dim, GraphDesc};
    use crate::plan::passes::test_graphs::{lowered_then, node, relu_chain, v};

    /// A branch nothing reads (`a -> b`) goes, with the step that fed only it; the chain
    /// to the output stays, in order.
    #[test]
    fn a_branch_no_step_reads_and_no_output_returns_is_dropped() {
        let d = [Dim::Fixed(4)];
        let mut g = relu_chain(2, &d);
        g.nodes.push(node("dead_a", "Relu", 14, &[v("v1", &d)], v("a", &d)));
        g.nodes.push(node("dead_b", "Relu", 14, &[v("a", &d)], v("b", &d)));
        let plan = lowered_then(&g, run);
        let names: Vec<&str> = plan.steps.iter().map(|s| s.node_name.as_str()).collect();
        assert_eq!(names, ["r0", "r1"]);
    }

    /// When a value's first reader is dropped, errors about it name the next reader and
    /// the value's position among that node's inputs, as lowering records it (Clip's max
    /// is input 2 with min absent, though it is the step's second input). (Found by review:
    /// the step's input index was taken.)
    #[test]
    fn an_inputs_first_reader_moves_to_the_next_with_its_node_position() {
        let d = [Dim::Fixed(4)];
        let (x, hi) = (v("x", &d), v("hi", &[]));
        let mut clip = node("clip", "Clip", 13, &[x.clone(), hi.clone()], v("y", &d));
        clip.inputs.insert(1, None);
        let g = GraphDesc {
            nodes: vec![node("dead", "Neg", 13, std::slice::from_ref(&hi), v("z", &[])), clip],
            inputs: vec![x, hi],
            constant_inputs: vec![],
            outputs: vec![v("y", &d)],
            constants: vec![],
        };
        let plan = lowered_then(&g, run);
        let hi = plan.values.iter().find(|v| v.name == "hi").expect("hi");
        assert_eq!(hi.first_reader, Some((0, 2)));
        assert_eq!(plan.steps[0].node_name, "clip");
    }

    /// Every step of a plan whose values are all read or returned stays.
    #[test]
    fn a_plan_without_dead_steps_is_unchanged() {
        let g = relu_chain(3, &[Dim::Fixed(4)]);
        let plan = lowered_then(&g, run);
        assert_eq!(plan.steps.len(), 3);
    }

    /// A value returned by the fused node keeps its step though no step reads it.
    #[test]
    fn a_returned_value_keeps_its_step() {
        let d = [Dim::Fixed(4)];
        let mut g = relu_chain(2, &d);
        g.nodes.push(node("side", "Relu", 14, &[v("v1", &d)], v("s", &d)));
        g.outputs.push(v("s", &d));
        let plan = lowered_then(&g, run);
        assert_eq!(plan.steps.len(), 3);
    }
}
