//! A compiled subgraph: the steps to run, where each value lives, and what each value is
//! declared to be. Built once at Compile; `exec` runs it at every Run.

use std::collections::HashMap;
use std::fmt;

use smallvec::SmallVec;

use crate::data::Buf;
use crate::error::{Error, Result};
use crate::graph::{dtype, DeclaredShape, Dim, GraphDesc, Shape};
use crate::registry::{kernel_for, Claim, Kernel};
use crate::shapes;
use rivet_kernels::Broadcast;

pub type ValueId = usize;

/// Where a value's data lives during a Run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The fused node's input `i`, owned by ORT.
    Input(usize),
    /// The fused node's output `i`, allocated through ORT at Run.
    Output(usize),
    /// An intermediate buffer of the per-Run state.
    Buffer(usize),
    /// A constant the plan holds.
    Const(usize),
}

#[derive(Clone, Debug)]
pub struct PlanValue {
    pub name: String,
    pub slot: Slot,
    /// Declared dims, when the model gives a rank.
    pub declared: Option<DeclaredShape>,
    /// ONNX element type.
    pub elem_type: i32,
    /// The first step that reads this value, with the input position: errors about a
    /// fused input name the node that consumes it.
    pub first_reader: Option<(usize, usize)>,
}

#[derive(Clone, Debug)]
pub struct Step {
    pub node_name: String,
    pub op_type: String,
    pub kernel: Kernel,
    pub inputs: SmallVec<[ValueId; 2]>,
    /// int64 inputs the kernel reads at Run to find its output shape (a Reshape's shape,
    /// Squeeze/Unsqueeze axes), when the model feeds or computes them instead of holding
    /// constants.
    pub params: SmallVec<[ValueId; 1]>,
    pub output: ValueId,
    /// A Conv whose filters are constant (an initializer ORT hands in every Run, or one
    /// the plan holds): packed once and reused (see `mark_constant_weights`).
    pub constant_weights: bool,
    /// Whether the step runs on the typed path (`exec::apply_typed`): a kernel over other
    /// element types than float32. The float32 path is the tuned one.
    pub typed: bool,
}

/// What an error message says about a node: `node 'relu_0' (Relu)`.
pub struct NodeLabel<'a>(pub &'a Step);

impl fmt::Display for NodeLabel<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node '{}' ({})", self.0.node_name, self.0.op_type)
    }
}

#[derive(Clone, Debug)]
pub struct Plan {
    /// Name of the fused node ORT created for this subgraph.
    pub name: String,
    pub values: Vec<PlanValue>,
    pub steps: Vec<Step>,
    pub inputs: Vec<ValueId>,
    pub outputs: Vec<ValueId>,
    /// Constants: the value they define, their shape and data.
    pub constants: Vec<(ValueId, Shape, Buf)>,
    /// Intermediate buffers (by element type), each shared by values of that type whose
    /// lifetimes do not overlap.
    pub buffer_types: Vec<i32>,
    /// Every value's shape and every binary step's broadcast, when all inputs are static:
    /// computed once here, so a Run only checks its inputs.
    pub fixed: Option<FixedShapes>,
}

/// Shapes known at Compile.
#[derive(Clone, Debug)]
pub struct FixedShapes {
    pub shapes: Vec<Shape>,
    pub broadcasts: Vec<Option<Broadcast>>,
}

impl Plan {
    /// Builds the plan for a fused subgraph. Fails if a node is not runnable (it should
    /// not have been claimed) or the graph does not hang together.
    pub fn build(name: &str, graph: &GraphDesc) -> Result<Plan> {
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
            values.push(PlanValue { name: name.to_string(), slot, declared, elem_type, first_reader: None });
            by_name.insert(name.to_string(), values.len() - 1);
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

        let mut steps = Vec::with_capacity(graph.nodes.len());
        for (node, claim) in graph.nodes.iter().zip(claims) {
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
            let out = node.outputs[0].as_ref().expect("checked by kernel_for");
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
                        let wide = add(&mut values, &mut by_name, &name, Slot::Buffer(usize::MAX), dims, dtype::INT64);
                        steps.push(Step {
                            node_name: node.name.clone(),
                            op_type: node.op_type.clone(),
                            typed: true,
                            kernel: Kernel::Cast { to: dtype::INT64 },
                            inputs: SmallVec::from_slice(&[id]),
                            params: SmallVec::new(),
                            output: wide,
                            constant_weights: false,
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
                op_type: node.op_type.clone(),
                typed: kernel.is_typed() || out_type != dtype::FLOAT,
                kernel,
                inputs,
                params: params.clone(),
                output,
                constant_weights: false,
            };
            // A float16 / bfloat16 node of a float32 kernel: its half inputs are cast to
            // float32, the kernel runs, its outputs are cast back.
            let cast = |kernel_to: i32, input: ValueId, output: ValueId| Step {
                node_name: node.name.clone(),
                op_type: node.op_type.clone(),
                typed: true,
                kernel: Kernel::Cast { to: kernel_to },
                inputs: SmallVec::from_slice(&[input]),
                params: SmallVec::new(),
                output,
                constant_weights: false,
            };
            if let Some(h) = claim.half {
                for (k, id) in step_inputs.iter_mut().enumerate() {
                    if values[*id].elem_type == h {
                        let (name, dims) = (format!("{}/input{k}/f32", node.name), values[*id].declared.clone());
                        let tmp = add(&mut values, &mut by_name, &name, Slot::Buffer(usize::MAX), dims, dtype::FLOAT);
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
                        let output = add(&mut values, &mut by_name, &main_name, main_slot, dims, main_type);
                        steps.push(step(Kernel::Identity, SmallVec::from_slice(&[acc]), output));
                    }
                    for (k, &next) in step_inputs.iter().enumerate().skip(1) {
                        let (name, s, dims) = if k == last_binary {
                            (main_name.clone(), main_slot, main_dims.clone())
                        } else {
                            (format!("{}/partial{k}", node.name), Slot::Buffer(usize::MAX), None)
                        };
                        let output = add(&mut values, &mut by_name, &name, s, dims, main_type);
                        let kernel = if main_type == dtype::FLOAT { Kernel::Binary(op) } else { Kernel::arith(op) };
                        steps.push(step(kernel, SmallVec::from_slice(&[acc, next]), output));
                        acc = output;
                    }
                    if mean {
                        let output = add(&mut values, &mut by_name, &main_name, main_slot, main_dims, main_type);
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
                            add(&mut values, &mut by_name, &name, Slot::Buffer(usize::MAX), dims, dtype::BOOL)
                        }
                    };
                    let kernel = Kernel::DropoutMask { seed, ratio };
                    steps.push(step_of(kernel, step_inputs.clone(), mask, dtype::BOOL));
                    let mut apply = step_inputs.clone();
                    apply.insert(1, mask);
                    let output = add(&mut values, &mut by_name, &main_name, main_slot, main_dims, main_type);
                    steps.push(step(Kernel::DropoutApply { ratio }, apply, output));
                }
                kernel => {
                    let output = add(&mut values, &mut by_name, &main_name, main_slot, main_dims, main_type);
                    steps.push(step(kernel, step_inputs.clone(), output));
                }
            }
            if out_is_half {
                let main = by_name[&main_name];
                let output = add(&mut values, &mut by_name, &out.name, slot, out.dims.clone(), out_type);
                steps.push(cast(out_type, main, output));
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
                    let tmp = add(&mut values, &mut by_name, &name, Slot::Buffer(usize::MAX), None, dtype::FLOAT);
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
        let buffer_types = assign_buffers(&mut values, &steps);
        let mut plan =
            Plan { name: name.to_string(), values, steps, inputs, outputs, constants, buffer_types, fixed: None };
        plan.fixed = plan.fixed_shapes()?;
        plan.mark_constant_weights(&graph.constant_inputs);
        Ok(plan)
    }

    /// The pre-packing pass: marks the Conv steps whose filters never change (a fused
    /// input that is a constant initializer, or a constant the plan holds), so a Run packs
    /// them once for the GEMM and reuses them instead of packing them again each Run.
    fn mark_constant_weights(&mut self, constant_inputs: &[bool]) {
        for step in &mut self.steps {
            if matches!(step.kernel, Kernel::Conv { .. }) && !step.typed {
                step.constant_weights = match self.values[step.inputs[1]].slot {
                    Slot::Const(_) => true,
                    Slot::Input(i) => constant_inputs.get(i).copied().unwrap_or(false),
                    Slot::Output(_) | Slot::Buffer(_) => false,
                };
            }
        }
    }

    /// Infers every shape at Compile when the inputs are fully static. An error here is a
    /// model whose declared shapes contradict each other.
    fn fixed_shapes(&self) -> Result<Option<FixedShapes>> {
        let mut shapes = vec![Shape::new(); self.values.len()];
        for &id in &self.inputs {
            match shapes::fixed(&self.values[id].declared) {
                Some(s) => shapes[id] = s,
                None => return Ok(None),
            }
        }
        for (id, shape, _) in &self.constants {
            shapes[*id].clone_from(shape);
        }
        if self.steps.iter().any(|s| !s.params.is_empty() || s.kernel.shape_from_data()) {
            return Ok(None); // shapes that depend on data known only at Run
        }
        let mut broadcasts = Vec::with_capacity(self.steps.len());
        for step in &self.steps {
            let (shape, b) = shapes::infer_shape(&self.values, step, &shapes, &[])?;
            if shapes::check_declared(&self.values, step, &shape).is_err() {
                // The model's own shape inference gives another rank (it happens in the
                // untaken branch of an If, say): infer at Run, where a Run that reaches
                // this node fails naming it.
                return Ok(None);
            }
            shapes[step.output] = shape;
            broadcasts.push(b);
        }
        Ok(Some(FixedShapes { shapes, broadcasts }))
    }
}

/// Gives each intermediate value a buffer, reusing the buffers of values of the same
/// element type that no later step reads (a chain of N nodes needs two buffers, not N - 1).
/// Returns each buffer's element type.
fn assign_buffers(values: &mut [PlanValue], steps: &[Step]) -> Vec<i32> {
    let mut last_read = vec![None; values.len()];
    for (i, s) in steps.iter().enumerate() {
        for &v in s.inputs.iter().chain(&s.params) {
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
        for &v in s.inputs.iter().chain(&s.params).chain(std::iter::once(&s.output)) {
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
    use crate::graph::{NodeDesc, ValueDesc};

    fn v(name: &str, dims: &[Dim]) -> ValueDesc {
        ValueDesc {
            name: name.into(),
            elem_type: dtype::FLOAT,
            dims: Some(dims.iter().cloned().collect()),
            constant: None,
            at_run_ok: false,
        }
    }

    fn relu_chain(n: usize, dims: &[Dim]) -> GraphDesc {
        let nodes = (0..n)
            .map(|i| NodeDesc {
                name: format!("r{i}"),
                op_type: "Relu".into(),
                domain: String::new(),
                since_version: 14,
                inputs: vec![Some(v(&format!("v{i}"), dims))],
                outputs: vec![Some(v(&format!("v{}", i + 1), dims))],
                attrs: vec![],
            })
            .collect();
        GraphDesc {
            nodes,
            inputs: vec![v("v0", dims)],
            constant_inputs: vec![],
            outputs: vec![v(&format!("v{n}"), dims)],
            constants: vec![],
        }
    }

    /// Conv(x, w) with `w` a fused input, constant or not.
    fn conv(constant_w: bool) -> GraphDesc {
        let f = |n: usize| Dim::Fixed(n);
        let node = NodeDesc {
            name: "conv".into(),
            op_type: "Conv".into(),
            domain: String::new(),
            since_version: 11,
            inputs: vec![Some(v("x", &[f(1), f(2), f(5), f(5)])), Some(v("w", &[f(3), f(2), f(3), f(3)]))],
            outputs: vec![Some(v("y", &[f(1), f(3), f(3), f(3)]))],
            attrs: vec![],
        };
        GraphDesc {
            nodes: vec![node],
            inputs: vec![v("x", &[f(1), f(2), f(5), f(5)]), v("w", &[f(3), f(2), f(3), f(3)])],
            constant_inputs: vec![false, constant_w],
            outputs: vec![v("y", &[f(1), f(3), f(3), f(3)])],
            constants: vec![],
        }
    }

    #[test]
    fn conv_filters_from_a_constant_initializer_are_marked_for_packing_once() {
        for constant in [true, false] {
            let plan = Plan::build("p", &conv(constant)).unwrap();
            assert_eq!(plan.steps.len(), 1);
            assert_eq!(plan.steps[0].constant_weights, constant);
        }
    }

    #[test]
    fn a_chain_reuses_two_buffers() {
        let plan = Plan::build("p", &relu_chain(100, &[Dim::Fixed(8)])).unwrap();
        assert_eq!(plan.buffer_types.len(), 2);
        assert_eq!(Plan::build("p", &relu_chain(2, &[Dim::Fixed(8)])).unwrap().buffer_types.len(), 1);
        assert_eq!(Plan::build("p", &relu_chain(1, &[Dim::Fixed(8)])).unwrap().buffer_types.len(), 0);
    }

    #[test]
    fn static_inputs_fix_every_shape_at_compile_and_symbolic_ones_do_not() {
        let plan = Plan::build("p", &relu_chain(3, &[Dim::Fixed(2), Dim::Fixed(4)])).unwrap();
        let fixed = plan.fixed.expect("static");
        assert!(fixed.shapes.iter().all(|s| s.as_slice() == [2, 4]));
        let sym = Plan::build("p", &relu_chain(3, &[Dim::Symbolic("N".into()), Dim::Fixed(4)])).unwrap();
        assert!(sym.fixed.is_none());
    }

    /// A static declaration of another size than the op computes is not an error (ORT runs
    /// with the kernel's shape too); one of another rank is left to Run, where a Run that
    /// reaches the node fails naming it: the model's own shape inference can disagree with
    /// the op in a branch that never runs, and that must not fail the session.
    #[test]
    fn contradictory_static_declarations_are_checked_at_run_naming_the_node() {
        let mut g = relu_chain(2, &[Dim::Fixed(4)]);
        g.nodes[1].outputs[0].as_mut().unwrap().dims = Some([Dim::Fixed(5)].into_iter().collect());
        let plan = Plan::build("p", &g).unwrap();
        assert!(plan.fixed.expect("sizes may differ").shapes.iter().all(|s| s.as_slice() == [4]));
        g.nodes[1].outputs[0].as_mut().unwrap().dims = Some([Dim::Fixed(4), Dim::Fixed(1)].into_iter().collect());
        let plan = Plan::build("p", &g).unwrap();
        assert!(plan.fixed.is_none());
        let mut shapes = vec![Shape::new(); plan.values.len()];
        shapes[plan.inputs[0]] = Shape::from_slice(&[4]);
        let (s, _) = shapes::infer(&plan.values, &plan.steps[0], &shapes, &[]).unwrap();
        shapes[plan.steps[0].output] = s;
        let err = shapes::infer(&plan.values, &plan.steps[1], &shapes, &[]).unwrap_err();
        assert_eq!(err.message, "node 'r1' (Relu) output 'v2': computed shape [4] but the model declares [4, 1]");
    }

    /// A symbolic Run keeps a same-shape step's output shape from the Run before and skips
    /// copying and checking it while the input's shape stays the same. A Run that fails
    /// the check must leave nothing behind that a later Run would take as checked: the
    /// same bad shape fails every time, and good shapes keep running.
    #[test]
    fn symbolic_same_shape_steps_check_again_after_a_failed_run() {
        use crate::data::{Data, DataMut};
        use crate::exec::{execute, Outputs, RunState, Serial, TensorIn};
        struct Out<'a>(Option<&'a mut Vec<f32>>);
        impl<'a> Outputs<'a> for Out<'a> {
            fn alloc(&mut self, _index: usize, shape: &[usize], _elem_type: i32) -> Result<DataMut<'a>> {
                let v = self.0.take().expect("one output");
                v.resize(shape.iter().product(), 0.0);
                Ok(DataMut::F32(&mut v[..]))
            }
        }
        // No declared shapes but the last output's: rank 2.
        let mut g = relu_chain(2, &[]);
        for value in g
            .inputs
            .iter_mut()
            .chain(g.nodes.iter_mut().flat_map(|n| n.inputs.iter_mut().chain(&mut n.outputs)).flatten())
        {
            value.dims = None;
        }
        let rank2 = Some([Dim::Symbolic("M".into()), Dim::Fixed(1)].into_iter().collect());
        g.nodes[1].outputs[0].as_mut().unwrap().dims = rank2.clone();
        g.outputs[0].dims = rank2;
        let plan = Plan::build("p", &g).unwrap();
        assert!(plan.fixed.is_none());
        let mut state = RunState::new(&plan);
        let x = [-1.0f32, 2.0, -3.0, 4.0];
        let mut run = |shape: &[usize]| {
            let data = Data::F32(&x[..shape.iter().product::<usize>()]);
            let inputs = [TensorIn { elem_type: dtype::FLOAT, shape: shape.iter().copied().collect(), data }];
            let mut y = Vec::new();
            execute(&plan, &mut state, &inputs, &mut Out(Some(&mut y)), &Serial::default()).map_err(|e| e.message)
        };
        // A scalar first: the output shapes of a new state must not pass for `[]`.
        let scalar = "node 'r1' (Relu) output 'v2': computed shape [] but the model declares [M, 1]";
        assert_eq!(run(&[]), Err(scalar.to_string()));
        let bad = "node 'r1' (Relu) output 'v2': computed shape [4] but the model declares [M, 1]".to_string();
        assert_eq!(run(&[4, 1]), Ok(()));
        assert_eq!(run(&[4]), Err(bad.clone()));
        assert_eq!(run(&[4]), Err(bad));
        assert_eq!(run(&[4, 1]), Ok(()));
        assert_eq!(run(&[2, 1]), Ok(()));
    }
}
