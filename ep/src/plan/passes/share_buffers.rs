//! Buffer sharing: numbers the intermediate buffers, reusing one as soon as no later step
//! reads the value in it.

use smallvec::SmallVec;

use crate::error::Result;
use crate::graph::GraphDesc;
use crate::plan::{Plan, PlanValue, Slot, Step};

pub fn run(plan: &mut Plan, _graph: &GraphDesc) -> Result<()> {
    plan.buffer_types = assign_buffers(&mut plan.values, &plan.steps);
    Ok(())
}

/// Gives each intermediate value a buffer, reusing the buffers of values of the same
/// element type that no later step reads (a chain of N nodes needs two buffers, not N - 1).
/// Returns each buffer's element type.
fn assign_buffers(values: &mut [PlanValue], steps: &[Step]) -> Vec<i32> {
    let mut last_read = vec![None; values.len()];
    for (i, s) in steps.iter().enumerate() {
        for v in s.reads() {
            last_read[v] = Some(i);
        }
    }
    let mut free: Vec<usize> = Vec::new();
    let mut types: Vec<i32> = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        if let Slot::Buffer(_) = values[s.output].slot {
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
            if let (Slot::Buffer(b), true) = (values[v].slot, last_read[v].is_none_or(|l| l == i)) {
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
}
