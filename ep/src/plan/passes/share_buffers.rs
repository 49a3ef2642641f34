//! Buffer sharing: numbers the intermediate buffers, reusing one as soon as no later step
//! reads the value in it; a step that only re-labels its input's shape (Reshape, Flatten,
//! Squeeze, Unsqueeze, Identity) becomes a view, its output in its input's slot; and in a
//! static plan, a Concat whose output is its inputs one after another (nothing before the
//! axis but ones) becomes a view too, each input written in place in the output by the
//! step that makes it.

use smallvec::SmallVec;

use crate::error::Result;
use crate::graph::{dtype, normalize_axis, AttrValue, GraphDesc};
use crate::plan::{Part, Plan, PlanValue, Slot, Step, ValueId};
use crate::registry::Kernel;

pub fn run(plan: &mut Plan, graph: &GraphDesc) -> Result<()> {
    mark_views(&plan.values, &mut plan.steps);
    let joins = match &plan.fixed {
        Some(fixed) => in_place_joins(&plan.values, &plan.steps, &fixed.shapes, graph),
        None => Vec::new(),
    };
    let root = roots(&plan.values, &plan.steps, &joins);
    if let Some(fixed) = &plan.fixed {
        place_parts(&mut plan.values, &mut plan.steps, &joins, &root, &fixed.shapes);
    }
    plan.buffer_types = assign_buffers(&mut plan.values, &plan.steps, &root);
    Ok(())
}

/// Marks the steps whose output is a view of their input (`Step::may_view`, written to a
/// buffer, the input a buffer, a fused input or a constant).
fn mark_views(values: &[PlanValue], steps: &mut [Step]) {
    for s in steps.iter_mut() {
        let input_slot = s.inputs.first().map(|&v| values[v].slot);
        s.view = s.may_view(values)
            && matches!(values[s.output].slot, Slot::Buffer(_))
            && matches!(input_slot, Some(Slot::Buffer(_) | Slot::Input(_) | Slot::Const(_)));
    }
}

/// A Concat step whose inputs are written in place in its output: the step, and each
/// input with its first element's offset in the output.
struct Join {
    step: usize,
    parts: SmallVec<[(ValueId, usize); 4]>,
}

/// The float32 Concat steps of a static plan that can become views: the output is its
/// inputs one after another (every dim before the axis is 1) in a buffer, and each input
/// is a buffer of its own, made by an earlier step that is not a re-labelling view, read
/// by no such view, and given once to this Concat and to no other joined one. Then, as
/// long as a step that writes a part reads another value of the same outermost output
/// (whose buffer it is writing), the Concat it joins is dropped (nested Concats, as
/// DenseNet's blocks grow, share one buffer).
fn in_place_joins(
    values: &[PlanValue],
    steps: &[Step],
    shapes: &[crate::graph::Shape],
    graph: &GraphDesc,
) -> Vec<Join> {
    let mut producer = vec![None; values.len()];
    for (i, s) in steps.iter().enumerate() {
        producer[s.output] = Some(i);
    }
    let mut viewed = vec![false; values.len()];
    for s in steps.iter().filter(|s| s.view) {
        viewed[s.inputs[0]] = true;
    }
    let mut joined = vec![false; values.len()];
    let mut joins: Vec<Join> = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        let node = graph.nodes.get(s.node).filter(|n| n.name == s.node_name && n.op_type == "Concat");
        let axis = match node.and_then(|n| n.attr("axis")) {
            Some(AttrValue::Int(axis)) => *axis,
            _ => continue,
        };
        let out = &values[s.output];
        let concat = matches!(s.kernel, Kernel::Op) && s.op.is_some() && s.epilogue.is_none() && s.params.is_empty();
        if !concat || out.elem_type != dtype::FLOAT || !matches!(out.slot, Slot::Buffer(_)) {
            continue;
        }
        let shape = &shapes[s.output];
        let Ok(a) = normalize_axis(axis, shape.len(), false) else { continue };
        if shape[..a].iter().any(|&d| d != 1) {
            continue;
        }
        let mut parts: SmallVec<[(ValueId, usize); 4]> = SmallVec::new();
        let mut at = 0;
        let fits = s.inputs.iter().enumerate().all(|(k, &v)| {
            // (A joined Concat is not a view yet: it passes as the step that makes its output.)
            let made = producer[v].is_some_and(|p| p < i && !steps[p].view);
            let ok = made
                && matches!(values[v].slot, Slot::Buffer(_))
                && values[v].elem_type == dtype::FLOAT
                && !viewed[v]
                && !joined[v]
                && !s.inputs[..k].contains(&v);
            parts.push((v, at));
            at += shapes[v].iter().product::<usize>();
            ok
        });
        if fits && at == shape.iter().product::<usize>() {
            for &(v, _) in &parts {
                joined[v] = true;
            }
            joins.push(Join { step: i, parts });
        }
    }
    // Drop the joins whose parts' steps read their own outermost output, until none does.
    loop {
        let top = roots(values, steps, &joins);
        let bad = joins.iter().position(|j| {
            j.parts.iter().any(|&(v, _)| {
                let p = producer[v].expect("a part is made by a step");
                joins.iter().all(|o| o.step != p) && steps[p].reads().any(|r| top[r] == top[v])
            })
        });
        match bad {
            Some(k) => {
                joins.remove(k);
            }
            None => return joins,
        }
    }
}

/// Each value's root, the value whose buffer holds it: a part's outermost joined output,
/// a re-labelling view's input's root, else itself.
fn roots(values: &[PlanValue], steps: &[Step], joins: &[Join]) -> Vec<ValueId> {
    let mut parent: Vec<Option<ValueId>> = vec![None; values.len()];
    for j in joins {
        for &(v, _) in &j.parts {
            parent[v] = Some(steps[j.step].output);
        }
    }
    let mut root: Vec<ValueId> = (0..values.len())
        .map(|mut v| {
            while let Some(p) = parent[v] {
                v = p;
            }
            v
        })
        .collect();
    for s in steps.iter().filter(|s| s.view && s.may_view(values)) {
        root[s.output] = root[s.inputs[0]];
    }
    root
}

/// Marks the joined Concats as views and gives every part its place in its outermost
/// output (`root`, from [`roots`]).
fn place_parts(
    values: &mut [PlanValue],
    steps: &mut [Step],
    joins: &[Join],
    root: &[ValueId],
    shapes: &[crate::graph::Shape],
) {
    let count = |v: ValueId| shapes[v].iter().product::<usize>();
    // Outer joins first (a later step), so a part's parent has its offset.
    let mut at = vec![0usize; values.len()];
    for j in joins.iter().rev() {
        let out = steps[j.step].output;
        for &(v, off) in &j.parts {
            at[v] = at[out] + off;
            values[v].part = Some(Part { at: at[v], len: count(v), whole: count(root[v]) });
        }
        steps[j.step].view = true;
    }
}

/// Gives each intermediate value a buffer, reusing the buffers of values of the same
/// element type that no later step reads (a chain of N nodes needs two buffers, not N - 1).
/// A view's output takes its input's slot, a joined Concat's parts and output their
/// outermost output's (`root`, from [`roots`]), and that buffer stays taken until the
/// last read of any value in it. Returns each buffer's element type.
fn assign_buffers(values: &mut [PlanValue], steps: &[Step], root: &[ValueId]) -> Vec<i32> {
    // The last step that reads any value of each root.
    let mut last_read = vec![None; values.len()];
    for (i, s) in steps.iter().enumerate() {
        for v in s.reads() {
            last_read[root[v]] = Some(i);
        }
    }
    let mut free: Vec<usize> = Vec::new();
    let mut types: Vec<i32> = Vec::new();
    let mut held: Vec<Option<usize>> = vec![None; values.len()];
    for (i, s) in steps.iter().enumerate() {
        let r = root[s.output];
        if s.view && s.may_view(values) {
            values[s.output].slot = values[s.inputs[0]].slot;
        } else if let Slot::Buffer(_) = values[s.output].slot {
            let b = match held[r] {
                Some(b) => b,
                None => {
                    let t = values[s.output].elem_type;
                    let b = match free.iter().rposition(|&b| types[b] == t) {
                        Some(k) => free.remove(k),
                        None => {
                            types.push(t);
                            types.len() - 1
                        }
                    };
                    held[r] = Some(b);
                    b
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
    use crate::graph::{dtype, AttrValue, Dim, NodeDesc};
    use crate::plan::passes::test_graphs::{node, relu_chain, v};
    use crate::plan::passes::{fix_shapes, lower};

    fn shared(graph: &GraphDesc) -> Plan {
        let mut plan = lower::run("p", graph).unwrap();
        fix_shapes::run(&mut plan, graph).unwrap();
        run(&mut plan, graph).unwrap();
        plan
    }

    fn concat(name: &str, inputs: &[crate::graph::ValueDesc], out: crate::graph::ValueDesc, axis: i64) -> NodeDesc {
        let mut n = node(name, "Concat", 13, inputs, out);
        n.attrs.push(("axis".into(), AttrValue::Int(axis)));
        n
    }

    fn fixed(dims: &[usize]) -> Vec<Dim> {
        dims.iter().map(|&d| Dim::Fixed(d)).collect()
    }

    /// Relus of the input (`[batch, 2, 3]`, one of them of it twice) joined along the
    /// channels into c, c between two more joined into d (a block growing both ways),
    /// d read by a last Relu.
    fn fire(batch: usize) -> GraphDesc {
        let (x, y) = (fixed(&[batch, 2, 3]), fixed(&[batch, 4, 3]));
        let (c, d) = (fixed(&[batch, 6, 3]), fixed(&[batch, 10, 3]));
        let axis = 1;
        let mut g = relu_chain(0, &x);
        g.nodes = vec![
            node("ra", "Relu", 14, &[v("v0", &x)], v("a", &x)),
            concat("dup", &[v("v0", &x), v("v0", &x)], v("t", &y), 1),
            node("rb", "Relu", 14, &[v("t", &y)], v("b", &y)),
            concat("c1", &[v("a", &x), v("b", &y)], v("c", &c), axis),
            node("re", "Relu", 14, &[v("v0", &x)], v("e", &x)),
            concat("c2", &[v("e", &x), v("c", &c), v("e2", &x)], v("d", &d), axis),
            node("re2", "Sigmoid", 13, &[v("v0", &x)], v("e2", &x)),
            node("rd", "Relu", 14, &[v("d", &d)], v("y", &d)),
        ];
        // Topological: e2 before c2.
        g.nodes.swap(5, 6);
        g.outputs = vec![v("y", &d)];
        g
    }

    /// Nested Concats of a batch of one along the channels become views: each input is
    /// written in place, at its offset in the outermost output, all of them in one buffer.
    #[test]
    fn nested_concats_write_their_inputs_in_place() {
        let plan = shared(&fire(1));
        let value = |name: &str| plan.values.iter().position(|x| x.name == name).unwrap();
        let step = |name: &str| plan.steps.iter().find(|s| s.node_name == name).unwrap();
        assert!(step("c1").view && step("c2").view && !step("dup").view, "the fused input twice is copied");
        let part = |name: &str| plan.values[value(name)].part.map(|p| (p.at, p.len, p.whole));
        assert_eq!(part("e"), Some((0, 6, 30)));
        assert_eq!(part("c"), Some((6, 18, 30)));
        assert_eq!(part("a"), Some((6, 6, 30)));
        assert_eq!(part("b"), Some((12, 12, 30)));
        assert_eq!(part("e2"), Some((24, 6, 30)));
        assert_eq!(part("d"), None);
        let slot = |name: &str| plan.values[value(name)].slot;
        for name in ["a", "b", "c", "e", "e2"] {
            assert_eq!(slot(name), slot("d"), "{name}");
        }
        assert_ne!(slot("y"), slot("d"));
    }

    /// No join where the inputs are not one after another in the output (a batch of 2
    /// along the channels), and none where the shapes are known only at Run.
    #[test]
    fn concats_that_interleave_or_are_not_static_copy() {
        for g in [fire(2), {
            let mut g = fire(1);
            g.inputs[0].dims = Some([Dim::Symbolic("N".into()), Dim::Fixed(2), Dim::Fixed(3)].into_iter().collect());
            g
        }] {
            let plan = shared(&g);
            assert!(plan.steps.iter().all(|s| !s.view), "no step is a view");
            assert!(plan.values.iter().all(|v| v.part.is_none()));
        }
        // Along the last axis of a batch of one the inputs interleave too.
        let (x, y) = (fixed(&[1, 2, 3]), fixed(&[1, 2, 6]));
        let mut g = relu_chain(0, &x);
        g.nodes = vec![
            node("ra", "Relu", 14, &[v("v0", &x)], v("a", &x)),
            node("rb", "Sigmoid", 13, &[v("v0", &x)], v("b", &x)),
            concat("c", &[v("a", &x), v("b", &x)], v("y", &y), 2),
            node("rc", "Relu", 14, &[v("y", &y)], v("z", &y)),
        ];
        g.outputs = vec![v("z", &y)];
        assert!(shared(&g).steps.iter().all(|s| !s.view));
    }

    /// A step that makes a part reads another value of the same output (its buffer is
    /// the one being written): that Concat copies. Here e = Relu(a) joins the output a is
    /// in, so the outer Concat copies and the inner one still joins.
    #[test]
    fn a_part_made_from_its_own_outputs_values_copies() {
        let x = fixed(&[1, 2, 3]);
        let (c, d) = (fixed(&[1, 4, 3]), fixed(&[1, 6, 3]));
        let mut g = relu_chain(0, &x);
        g.nodes = vec![
            node("ra", "Relu", 14, &[v("v0", &x)], v("a", &x)),
            node("rb", "Sigmoid", 13, &[v("v0", &x)], v("b", &x)),
            concat("c1", &[v("a", &x), v("b", &x)], v("c", &c), 1),
            node("re", "Relu", 14, &[v("a", &x)], v("e", &x)),
            concat("c2", &[v("c", &c), v("e", &x)], v("d", &d), 1),
            node("rd", "Relu", 14, &[v("d", &d)], v("y", &d)),
        ];
        g.outputs = vec![v("y", &d)];
        let plan = shared(&g);
        let step = |name: &str| plan.steps.iter().find(|s| s.node_name == name).unwrap();
        assert!(step("c1").view, "the inner join stands alone");
        assert!(!step("c2").view, "re reads a, in d's buffer");
        // A value twice in one Concat, a fused input, a fused output: copied.
        let mut g2 = relu_chain(1, &x);
        g2.nodes.push(concat("twice", &[v("v1", &x), v("v1", &x)], v("t", &c), 1));
        g2.nodes.push(concat("mixed", &[v("v0", &x), v("t", &c)], v("m", &d), 1));
        g2.nodes.push(concat("out", &[v("v1", &x), v("m", &d)], v("o", &fixed(&[1, 8, 3])), 1));
        g2.outputs = vec![v("o", &fixed(&[1, 8, 3]))];
        let plan = shared(&g2);
        assert!(plan.steps.iter().all(|s| !s.view));
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
