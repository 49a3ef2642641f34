//! Buffer sharing: numbers the intermediate buffers, reusing one as soon as no later step
//! reads the value in it; a step that only re-labels its input's shape (Reshape, Flatten,
//! Squeeze, Unsqueeze, Identity) becomes a view, its output in its input's slot.

use smallvec::SmallVec;

use crate::error::Result;
use crate::graph::GraphDesc;
use crate::plan::{Plan, PlanValue, Slot, Step};

pub fn run(plan: &mut Plan, _graph: &GraphDesc) -> Result<()> {
    plan.buffer_types = assign_buffers(&mut plan.values, &mut plan.steps);
    Ok(())
}

/// Gives each intermediate value a buffer, reusing the buffers of values of the same
/// element type that no later step reads (a chain of N nodes needs two buffers, not N - 1).
/// A view's output (`Step::may_view`, written to a buffer, its input not a fused output)
/// takes its input's slot, and that buffer stays taken until the last read of any value
/// in it. Returns each buffer's element type.
fn assign_buffers(values: &mut [PlanValue], steps: &mut [Step]) -> Vec<i32> {
    // Each value's root: the value whose slot it shares (itself, unless it is a view's).
    let mut root: Vec<usize> = (0..values.len()).collect();
    for s in steps.iter_mut() {
        let input_slot = s.inputs.first().map(|&v| values[v].slot);
        s.view = s.may_view(values)
            && matches!(values[s.output].slot, Slot::Buffer(_))
            && matches!(input_slot, Some(Slot::Buffer(_) | Slot::Input(_) | Slot::Const(_)));
        if s.view {
            root[s.output] = root[s.inputs[0]];
        }
    }
    // The last step that reads any value of each root.
    let mut last_read = vec![None; values.len()];
    for (i, s) in steps.iter().enumerate() {
        for v in s.reads() {
            last_read[root[v]] = Some(i);
        }
    }
    let mut free: Vec<usize> = Vec::new();
    let mut types: Vec<i32> = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        if s.view {
            values[s.output].slot = values[s.inputs[0]].slot;
        } else if let Slot::Buffer(_) = values[s.output].slot {
            let t = values[s.output].elem_type;
            let b = match free.iter().rposition(|&b| types[b] == t) {
                Some(k) => free.remove(k),
                None => {
                    types.push(t);
                    types.len() - 1
                }
            };
            values[s.output].slot = Slot::Buffer(b);
        }
        let mut released: SmallVec<[usize; 2]> = SmallVec::new();
        for v in s.reads().chain(std::iter::once(s.output)) {
            let r = root[v];
            if let (Slot::Buffer(b), true) = (values[r].slot, last_read[r].is_none_or(|l| l == i)) {
                if !released.contains(&b) {
                    released.push(b);
                    free.push(b);
                }
            }
        }
    }
    types
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{dtype, Dim};
    use crate::plan::passes::lower;
    use crate::plan::passes::test_graphs::relu_chain;

    fn shared(graph: &GraphDesc) -> Plan {
        let mut plan = lower::run("p", graph).unwrap();
        run(&mut plan, graph).unwrap();
        plan
    }

    #[test]
    fn a_chain_alternates_between_two_buffers() {
        let plan = shared(&relu_chain(5, &[Dim::Fixed(8)]));
        let slots: Vec<Slot> = plan.steps.iter().map(|s| plan.values[s.output].slot).collect();
        let b = Slot::Buffer;
        assert_eq!(slots, [b(0), b(1), b(0), b(1), Slot::Output(0)]);
        assert_eq!(plan.buffer_types, [dtype::FLOAT, dtype::FLOAT]);
    }

    #[test]
    fn a_value_read_later_keeps_its_buffer() {
        // r0: v0 -> v1, r1: v1 -> v2, then Add(v1, v2): v1 must not be overwritten by r1.
        use crate::plan::passes::test_graphs::{node, v};
        let d = [Dim::Fixed(8)];
        let mut g = relu_chain(2, &d);
        g.nodes.push(node("add", "Add", 14, &[v("v1", &d), v("v2", &d)], v("y", &d)));
        g.outputs = vec![v("y", &d)];
        let plan = shared(&g);
        let slot = |name: &str| plan.values.iter().find(|x| x.name == name).unwrap().slot;
        assert_ne!(slot("v1"), slot("v2"));
        assert_eq!(plan.buffer_types.len(), 2);
    }

    /// relu -> Reshape -> relu -> Reshape -> Add(first relu, second reshape): each
    /// Reshape's output is a view in its input's buffer, which stays taken until the last
    /// read of the input or of its view, so later steps write elsewhere. A Reshape of the fused input views the input; one that is a fused
    /// output is written.
    #[test]
    fn a_reshape_is_a_view_and_keeps_its_input_buffer_alive() {
        use crate::plan::passes::test_graphs::{i64_const, node, v};
        let (d, flat) = ([Dim::Fixed(2), Dim::Fixed(4)], [Dim::Fixed(8)]);
        let mut g = relu_chain(1, &d);
        g.nodes.push(node("flat", "Reshape", 14, &[v("v1", &d), i64_const("shape", &[8])], v("f", &flat)));
        g.nodes.push(node("r2", "Relu", 14, &[v("f", &flat)], v("g", &flat)));
        g.nodes.push(node("unflat", "Reshape", 14, &[v("g", &flat), i64_const("shape2", &[2, 4])], v("h", &d)));
        // A buffer taken while the view h of g is still to be read.
        g.nodes.push(node("r3", "Relu", 14, &[v("v0", &d)], v("p", &d)));
        g.nodes.push(node("add", "Add", 14, &[v("v1", &d), v("h", &d)], v("y", &d)));
        g.nodes.push(node("pp", "Mul", 14, &[v("p", &d), v("p", &d)], v("p2", &d)));
        g.nodes.push(node("in_view", "Reshape", 14, &[v("v0", &d), i64_const("shape", &[8])], v("x8", &flat)));
        g.nodes.push(node("out_copy", "Reshape", 14, &[v("v1", &d), i64_const("shape", &[8])], v("z", &flat)));
        g.outputs = vec![v("y", &d), v("z", &flat), v("x8", &flat), v("p2", &d)];
        let plan = shared(&g);
        let value = |name: &str| plan.values.iter().position(|x| x.name == name).unwrap();
        let slot = |name: &str| plan.values[value(name)].slot;
        let step = |name: &str| plan.steps.iter().find(|s| s.node_name == name).unwrap();
        assert!(step("flat").view && step("unflat").view);
        assert_eq!(slot("f"), slot("v1"));
        assert_eq!(slot("h"), slot("g"));
        assert_ne!(slot("g"), slot("v1"), "v1 is read by the Add after r2 writes g");
        assert!(![slot("g"), slot("v1")].contains(&slot("p")), "h (g's view) and v1 are read after r3 writes p");
        assert!(!step("out_copy").view && !step("in_view").view, "fused outputs are written");
        assert!(matches!(slot("z"), Slot::Output(_)));
        assert_eq!(plan.buffer_types.len(), 3);
    }
}
