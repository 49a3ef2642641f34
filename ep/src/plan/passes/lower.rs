//! Lowering: each claimed node becomes one or more steps over plan values.

use std::collections::HashMap;

use smallvec::SmallVec;

use crate::error::{Error, Result};
use crate::graph::{dtype, DeclaredShape, Dim, GraphDesc};
use crate::plan::{Plan, PlanValue, Slot, Step, ValueId};
use crate::registry::{kernel_for, Claim, Kernel};

/// Lowers a fused subgraph to a plan: a step per node (more for Sum/Mean/Max/Min of many
/// inputs, training Dropout, half-float casts and extra outputs), every value in its slot.
/// Intermediate values are left in `Slot::Buffer(usize::MAX)` for `share_buffers`; no
/// shape is fixed yet. Fails if a node is not runnable (it should not have been claimed)
/// or the graph does not hang together.
pub fn run(name: &str, graph: &GraphDesc) -> Result<Plan> {
    let mut values: Vec<PlanValue> = Vec::new();
    let mut by_name: HashMap<String, ValueId> = HashMap::new();
    fn add(
        values: &mut Vec<PlanValue>,
        by_name: &mut HashMap<String, ValueId>,
        name: &str,
        slot: Slot,
        declared: Option<DeclaredShape>,
        elem_type: i32,
    ) -> ValueId {
        let id = own(values, name, slot, declared, elem_type);
        by_name.insert(name.to_string(), id);
        id
    }
    // A value the lowering makes for itself (a widened parameter, a float32 copy, a
    // partial sum, a mask, the shared step's value): named for reading, but not found by
    // name, so that a tensor of the model that happens to bear the same name is never
    // replaced by it.
    fn own(
        values: &mut Vec<PlanValue>,
        name: &str,
        slot: Slot,
        declared: Option<DeclaredShape>,
        elem_type: i32,
    ) -> ValueId {
        values.push(PlanValue { name: name.to_string(), slot, declared, elem_type, first_reader: None, part: None });
        values.len() - 1
    }

    // Nodes first: an unrunnable node is the most useful thing to report.
    let claims = graph
        .nodes
        .iter()
        .map(|node| {
            kernel_for(node).map_err(|why| {
                Error::invalid(format_args!("Rivet cannot run node '{}' ({}): {why}", node.name, node.op_type))
            })
        })
        .collect::<Result<Vec<Claim>>>()?;
    let mut inputs = Vec::with_capacity(graph.inputs.len());
    for (i, v) in graph.inputs.iter().enumerate() {
        let id = add(&mut values, &mut by_name, &v.name, Slot::Input(i), v.dims.clone(), v.elem_type);
        inputs.push(id);
    }
    let mut constants = Vec::new();
    for c in &graph.constants {
        let dims = c.shape.iter().map(|&d| Dim::Fixed(d)).collect();
        let (slot, elem_type) = (Slot::Const(constants.len()), c.data.elem_type());
        let id = add(&mut values, &mut by_name, &c.name, slot, Some(dims), elem_type);
        constants.push((id, c.shape.clone(), c.data.clone()));
    }
    let output_index: HashMap<&str, usize> =
        graph.outputs.iter().enumerate().map(|(i, v)| (v.name.as_str(), i)).collect();
    // The values something reads: a later node, or the fused node's caller.
    let read: std::collections::HashSet<&str> = graph
        .nodes
        .iter()
        .flat_map(|n| n.inputs.iter().flatten().map(|v| v.name.as_str()))
        .chain(graph.outputs.iter().map(|v| v.name.as_str()))
        .collect();

    let mut steps = Vec::with_capacity(graph.nodes.len());
    for (node_index, (node, claim)) in graph.nodes.iter().zip(claims).enumerate() {
        let mut step_inputs: SmallVec<[ValueId; 2]> = SmallVec::new();
        for &pos in &claim.data {
            let input = node.inputs[pos].as_ref().expect("data inputs are present");
            let id = *by_name.get(&input.name).ok_or_else(|| {
                Error::ep(format_args!(
                    "node '{}' ({}) input {pos} '{}' is produced by no earlier node, input or initializer",
                    node.name, node.op_type, input.name
                ))
            })?;
            if values[id].first_reader.is_none() {
                values[id].first_reader = Some((steps.len(), pos));
            }
            step_inputs.push(id);
        }
        // A family op's node may omit its first outputs (an RNN's Y): its first present one
        // is the main step's.
        let first = match claim.kernel {
            Kernel::Op => node.outputs.iter().position(Option::is_some).unwrap_or(0),
            _ => 0,
        };
        let out = node.outputs[first].as_ref().expect("checked by kernel_for");
        let slot = match output_index.get(out.name.as_str()) {
            Some(&o) => Slot::Output(o),
            // Numbered by `assign_buffers` once every step is known.
            None => Slot::Buffer(usize::MAX),
        };
        let mut params: SmallVec<[ValueId; 1]> = SmallVec::new();
        for &pos in &claim.params {
            let input = node.inputs[pos].as_ref().expect("params are present");
            let id = *by_name.get(&input.name).ok_or_else(|| {
                Error::ep(format_args!(
                    "node '{}' ({}) reads '{}' at Run, but it is no input of the fused node",
                    node.name, node.op_type, input.name
                ))
            })?;
            let id = match values[id].elem_type {
                dtype::INT64 => id,
                // An int32 axis or count (CumSum's axis may be either) is widened first.
                dtype::INT32 => {
                    let (name, dims) = (format!("{}/param{pos}/i64", node.name), values[id].declared.clone());
                    let wide = own(&mut values, &name, Slot::Buffer(usize::MAX), dims, dtype::INT64);
                    steps.push(Step {
                        node_name: node.name.clone(),
                        node: node_index,
                        op_type: node.op_type.clone(),
                        typed: true,
                        kernel: Kernel::Cast {
                            to: dtype::INT64,
                            saturate: true,
                            round: rivet_kernels::float8::e8m0::Round::Up,
                        },
                        inputs: SmallVec::from_slice(&[id]),
                        params: SmallVec::new(),
                        output: wide,
                        constant_weights: false,
                        constant_inputs: 0,
                        bf16: false,
                        epilogue: None,
                        op: None,
                        view: false,
                    });
                    wide
                }
                _ => {
                    return Err(Error::ep(format_args!(
                        "node '{}': '{}' is not an int64 or int32 tensor",
                        node.name, input.name
                    )))
                }
            };
            params.push(id);
        }
        let out_type = out.elem_type;
        let step_of = |kernel: Kernel, inputs: SmallVec<[ValueId; 2]>, output, out_type| Step {
            node_name: node.name.clone(),
            node: node_index,
            op_type: node.op_type.clone(),
            typed: kernel.is_typed() || out_type != dtype::FLOAT,
            kernel,
            inputs,
            params: params.clone(),
            output,
            constant_weights: false,
            constant_inputs: 0,
            bf16: false,
            epilogue: None,
            op: None,
            view: false,
        };
        // A float16 / bfloat16 node of a float32 kernel: its half inputs are cast to
        // float32, the kernel runs, its outputs are cast back.
        let cast = |kernel_to: i32, input: ValueId, output: ValueId| Step {
            node_name: node.name.clone(),
            node: node_index,
            op_type: node.op_type.clone(),
            typed: true,
            kernel: Kernel::Cast { to: kernel_to, saturate: true, round: rivet_kernels::float8::e8m0::Round::Up },
            inputs: SmallVec::from_slice(&[input]),
            params: SmallVec::new(),
            output,
            constant_weights: false,
            constant_inputs: 0,
            bf16: false,
            epilogue: None,
            op: None,
            view: false,
        };
        if let Some(h) = claim.half {
            for (k, id) in step_inputs.iter_mut().enumerate() {
                if values[*id].elem_type == h {
                    let (name, dims) = (format!("{}/input{k}/f32", node.name), values[*id].declared.clone());
                    let tmp = own(&mut values, &name, Slot::Buffer(usize::MAX), dims, dtype::FLOAT);
                    steps.push(cast(dtype::FLOAT, *id, tmp));
                    *id = tmp;
                }
            }
        }
        // The first output goes through float32 when it is of the half type (a
        // comparison's bool or ArgMax's int64 output is written directly).
        let out_is_half = claim.half == Some(out_type);
        let (main_name, main_slot, main_type) = if out_is_half {
            (format!("{}/f32", out.name), Slot::Buffer(usize::MAX), dtype::FLOAT)
        } else {
            (out.name.clone(), slot, out_type)
        };
        let main_dims = out.dims.clone();
        // The main value: the node's first output, or its float32 copy (the lowering's own).
        let main = |values: &mut Vec<PlanValue>, by_name: &mut HashMap<String, ValueId>, dims| match out_is_half {
            true => own(values, &main_name, main_slot, dims, main_type),
            false => add(values, by_name, &main_name, main_slot, dims, main_type),
        };
        let step = |kernel, inputs, output| step_of(kernel, inputs, output, main_type);
        match claim.kernel {
            // Sum/Mean/Max/Min of n inputs: n - 1 binary steps (and a scale for Mean)
            // through intermediate values of their own.
            Kernel::Variadic { op, mean } => {
                let n = step_inputs.len();
                let mut acc = step_inputs[0];
                let last_binary = if mean { n } else { n - 1 };
                if n == 1 && !mean {
                    let dims = main_dims.clone();
                    let output = main(&mut values, &mut by_name, dims);
                    steps.push(step(Kernel::Identity, SmallVec::from_slice(&[acc]), output));
                }
                for (k, &next) in step_inputs.iter().enumerate().skip(1) {
                    let output = match k == last_binary {
                        true => main(&mut values, &mut by_name, main_dims.clone()),
                        false => {
                            let name = format!("{}/partial{k}", node.name);
                            own(&mut values, &name, Slot::Buffer(usize::MAX), None, main_type)
                        }
                    };
                    let kernel = if main_type == dtype::FLOAT { Kernel::Binary(op) } else { Kernel::arith(op) };
                    steps.push(step(kernel, SmallVec::from_slice(&[acc, next]), output));
                    acc = output;
                }
                if mean {
                    let output = main(&mut values, &mut by_name, main_dims);
                    steps.push(step(Kernel::Scale(1.0 / n as f32), SmallVec::from_slice(&[acc]), output));
                }
            }
            // Training-mode Dropout: the mask (the node's second output, or a buffer of
            // its own), then the output from x and that mask.
            Kernel::Dropout { seed, ratio } => {
                let mask = match node.outputs.get(1).and_then(Option::as_ref) {
                    Some(m) => {
                        let slot = match output_index.get(m.name.as_str()) {
                            Some(&o) => Slot::Output(o),
                            None => Slot::Buffer(usize::MAX),
                        };
                        add(&mut values, &mut by_name, &m.name, slot, m.dims.clone(), dtype::BOOL)
                    }
                    None => {
                        let (name, dims) = (format!("{}/mask", node.name), main_dims.clone());
                        own(&mut values, &name, Slot::Buffer(usize::MAX), dims, dtype::BOOL)
                    }
                };
                let kernel = Kernel::DropoutMask { seed, ratio };
                steps.push(step_of(kernel, step_inputs.clone(), mask, dtype::BOOL));
                let mut apply = step_inputs.clone();
                apply.insert(1, mask);
                let output = main(&mut values, &mut by_name, main_dims);
                steps.push(step(Kernel::DropoutApply { ratio }, apply, output));
            }
            kernel => {
                // Outputs that share one step: it runs first, into a value every output's
                // step then reads last.
                let main_op = claim.ops.get(first).cloned().flatten();
                let shared = main_op.as_ref().and_then(|op| op.shared()).filter(|_| {
                    let outs = node.outputs.iter().flatten().filter(|v| read.contains(v.name.as_str()));
                    outs.count() >= 2
                });
                if let Some(op) = shared {
                    let name = format!("{}/outputs", node.name);
                    let all = own(&mut values, &name, Slot::Buffer(usize::MAX), None, dtype::FLOAT);
                    let mut s = step_of(Kernel::Op, step_inputs.clone(), all, dtype::FLOAT);
                    s.op = Some(op);
                    steps.push(s);
                    step_inputs.push(all);
                }
                let output = main(&mut values, &mut by_name, main_dims);
                let mut s = step(kernel, step_inputs.clone(), output);
                s.op = main_op;
                steps.push(s);
            }
        }
        if out_is_half {
            let main = steps.last().expect("the node's main step").output;
            let output = add(&mut values, &mut by_name, &out.name, slot, out.dims.clone(), out_type);
            steps.push(cast(out_type, main, output));
        }
        // The other outputs of a family's op: a step each, on the same inputs.
        for (k, op) in claim.ops.iter().enumerate().skip(first + 1) {
            let (Some(op), Some(extra)) = (op, node.outputs[k].as_ref()) else { continue };
            let slot = match output_index.get(extra.name.as_str()) {
                Some(&o) => Slot::Output(o),
                None => Slot::Buffer(usize::MAX),
            };
            let t = extra.elem_type;
            // Of the half type: the op writes float32, cast back after.
            let (name, s, dims, op_type) = match claim.half == Some(t) {
                true => (format!("{}/f32", extra.name), Slot::Buffer(usize::MAX), None, dtype::FLOAT),
                false => (extra.name.clone(), slot, extra.dims.clone(), t),
            };
            let output = match op_type != t {
                true => own(&mut values, &name, s, dims, op_type),
                false => add(&mut values, &mut by_name, &name, s, dims, op_type),
            };
            let mut step = step_of(Kernel::Op, step_inputs.clone(), output, op_type);
            step.op = Some(op.clone());
            steps.push(step);
            if op_type != t {
                let cast_out = add(&mut values, &mut by_name, &extra.name, slot, extra.dims.clone(), t);
                steps.push(cast(t, output, cast_out));
            }
        }
        // The node's other outputs: a step each, on the same inputs.
        for &(k, kernel) in &claim.extra {
            let extra = node.outputs[k].as_ref().expect("extra outputs are present");
            let slot = match output_index.get(extra.name.as_str()) {
                Some(&o) => Slot::Output(o),
                None => Slot::Buffer(usize::MAX),
            };
            let t = extra.elem_type;
            if claim.half == Some(t) {
                let name = format!("{}/f32", extra.name);
                let tmp = own(&mut values, &name, Slot::Buffer(usize::MAX), None, dtype::FLOAT);
                steps.push(step_of(kernel, step_inputs.clone(), tmp, dtype::FLOAT));
                let output = add(&mut values, &mut by_name, &extra.name, slot, extra.dims.clone(), t);
                steps.push(cast(t, tmp, output));
            } else {
                let output = add(&mut values, &mut by_name, &extra.name, slot, extra.dims.clone(), t);
                steps.push(step_of(kernel, step_inputs.clone(), output, t));
            }
        }
    }
    let mut outputs = Vec::with_capacity(graph.outputs.len());
    for v in &graph.outputs {
        match by_name.get(&v.name) {
            Some(&id) if matches!(values[id].slot, Slot::Output(_)) => outputs.push(id),
            _ => {
                return Err(Error::ep(format_args!(
                    "fused output '{}' is not produced by any node of the subgraph",
                    v.name
                )))
            }
        }
    }
    Ok(Plan {
        name: name.to_string(),
        values,
        steps,
        inputs,
        outputs,
        constants,
        buffer_types: Vec::new(),
        fixed: None,
        units: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::passes::test_graphs::{node, relu_chain, v};

    #[test]
    fn a_node_becomes_a_step_and_intermediates_wait_for_their_buffer() {
        let plan = run("p", &relu_chain(2, &[Dim::Fixed(4)])).unwrap();
        assert_eq!(plan.steps.len(), 2);
        let slots: Vec<Slot> = plan.steps.iter().map(|s| plan.values[s.output].slot).collect();
        assert_eq!(slots, [Slot::Buffer(usize::MAX), Slot::Output(0)]);
        assert_eq!(plan.steps[1].inputs.as_slice(), [plan.steps[0].output]);
        assert!(plan.buffer_types.is_empty() && plan.fixed.is_none());
    }

    #[test]
    fn sum_and_mean_of_three_become_chains_of_binary_steps() {
        let d = [Dim::Fixed(4)];
        let ins = [v("a", &d), v("b", &d), v("c", &d)];
        for (op, kernels) in [("Sum", 2), ("Mean", 3)] {
            let g = GraphDesc {
                nodes: vec![node("n", op, 13, &ins, v("y", &d))],
                inputs: ins.to_vec(),
                constant_inputs: vec![],
                outputs: vec![v("y", &d)],
                constants: vec![],
            };
            let plan = run("p", &g).unwrap();
            assert_eq!(plan.steps.len(), kernels, "{op}");
            let writes_output: Vec<bool> =
                plan.steps.iter().map(|s| plan.values[s.output].slot == Slot::Output(0)).collect();
            assert_eq!(writes_output.iter().filter(|&&w| w).count(), 1, "{op}: only the last step writes y");
            assert!(writes_output[kernels - 1], "{op}");
            assert_eq!(matches!(plan.steps[kernels - 1].kernel, Kernel::Scale(_)), op == "Mean");
        }
    }

    /// An LSTM with Y, Y_h and Y_c: `read` of them are graph outputs.
    fn lstm(read: &[&str]) -> GraphDesc {
        let f = |n: usize| Dim::Fixed(n);
        let (x, w, r) = (v("x", &[f(5), f(2), f(3)]), v("w", &[f(1), f(16), f(3)]), v("r", &[f(1), f(16), f(4)]));
        let outs = [v("y", &[f(5), f(1), f(2), f(4)]), v("yh", &[f(1), f(2), f(4)]), v("yc", &[f(1), f(2), f(4)])];
        let mut n = node("lstm", "LSTM", 14, &[x.clone(), w.clone(), r.clone()], outs[0].clone());
        n.outputs = outs.iter().cloned().map(Some).collect();
        n.attrs = vec![("hidden_size".into(), crate::graph::AttrValue::Int(4))];
        GraphDesc {
            nodes: vec![n],
            inputs: vec![x, w, r],
            constant_inputs: vec![false; 3],
            outputs: outs.into_iter().filter(|o| read.contains(&o.name.as_str())).collect(),
            constants: vec![],
        }
    }

    #[test]
    fn an_rnn_whose_outputs_are_read_twice_or_more_runs_its_recurrence_in_one_shared_step() {
        let plan = run("p", &lstm(&["y", "yh", "yc"])).unwrap();
        // The shared step, then one step per output reading its value last.
        assert_eq!(plan.steps.len(), 4);
        let shared = plan.steps[0].output;
        assert_eq!(plan.values[shared].name, "lstm/outputs");
        for s in &plan.steps[1..] {
            assert_eq!(s.inputs.as_slice(), [0, 1, 2, shared], "{}", plan.values[s.output].name);
        }
        let plan = run("p", &lstm(&["yh", "yc"])).unwrap();
        assert_eq!(plan.values[plan.steps[0].output].name, "lstm/outputs");
        // One output read: its step runs the recurrence (the unread ones' steps are
        // dropped later).
        let plan = run("p", &lstm(&["y"])).unwrap();
        assert_eq!(plan.steps.len(), 3);
        assert!(plan.steps.iter().all(|s| s.inputs.len() == 3));
    }

    #[test]
    fn a_model_tensor_named_like_a_value_of_the_lowering_is_still_the_one_read() {
        // A tensor named as the LSTM's shared value will be ("lstm/outputs"), made before
        // the LSTM and read after it: its readers read it, not the shared value.
        let f = |n: usize| Dim::Fixed(n);
        let mut g = lstm(&["y", "yh"]);
        let named = v("lstm/outputs", &[f(5), f(2), f(3)]);
        g.nodes.insert(0, node("pre", "Relu", 14, &[g.inputs[0].clone()], named.clone()));
        g.nodes[1].inputs[0] = Some(named.clone());
        g.nodes.push(node("post", "Relu", 14, &[named], v("z", &[f(5), f(2), f(3)])));
        g.outputs.push(v("z", &[f(5), f(2), f(3)]));
        let plan = run("p", &g).unwrap();
        let relu = plan.steps[0].output;
        assert_eq!(plan.values[relu].name, "lstm/outputs");
        assert_ne!(plan.steps[1].output, relu, "the shared step writes a value of its own");
        assert_eq!(plan.steps.last().unwrap().inputs.as_slice(), [relu]);
        assert_eq!(plan.steps[1].inputs[0], relu, "the LSTM reads the Relu's output");
    }
}
