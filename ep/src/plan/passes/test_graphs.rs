//! Small graphs for the passes' tests.

use crate::error::Result;
use crate::graph::{dtype, Dim, GraphDesc, NodeDesc, ValueDesc};
use crate::plan::Plan;

/// `g` lowered to steps, then `pass` run on the plan: a pass's test in one call.
pub fn lowered_then(g: &GraphDesc, pass: fn(&mut Plan, &GraphDesc) -> Result<()>) -> Plan {
    let mut plan = super::lower::run("p", g).unwrap();
    pass(&mut plan, g).unwrap();
    plan
}

/// The plan of `g` with every pass but `skip` (a fusion's tests compare the plans built
/// with and without it).
pub fn build_without(g: &GraphDesc, skip: &str) -> Plan {
    let mut plan = super::lower::run("p", g).unwrap();
    for pass in super::PASSES.iter().filter(|p| p.name != skip) {
        (pass.run)(&mut plan, g).unwrap();
    }
    plan.units = crate::plan::NodeUnit::of_steps(&plan.steps);
    plan
}

pub fn v(name: &str, dims: &[Dim]) -> ValueDesc {
    ValueDesc {
        name: name.into(),
        elem_type: dtype::FLOAT,
        dims: Some(dims.iter().cloned().collect()),
        constant: None,
        at_run_ok: false,
    }
}

pub fn node(name: &str, op_type: &str, since_version: i32, inputs: &[ValueDesc], output: ValueDesc) -> NodeDesc {
    NodeDesc {
        name: name.into(),
        op_type: op_type.into(),
        domain: String::new(),
        since_version,
        inputs: inputs.iter().cloned().map(Some).collect(),
        outputs: vec![Some(output)],
        attrs: vec![],
    }
}

/// A float32 scalar constant whose data Compile sees (a scale, Gelu's 0.5).
pub fn f32_scalar(name: &str, x: f32) -> ValueDesc {
    ValueDesc {
        name: name.into(),
        elem_type: dtype::FLOAT,
        dims: Some(Default::default()),
        constant: Some(crate::graph::Constant::F32(vec![x])),
        at_run_ok: false,
    }
}

/// A small int64 constant of shape `[vals.len()]` (a Reshape's shape), as ORT hands one
/// to Compile.
pub fn i64_const(name: &str, vals: &[i64]) -> ValueDesc {
    ValueDesc {
        name: name.into(),
        elem_type: dtype::INT64,
        dims: Some([Dim::Fixed(vals.len())].into_iter().collect()),
        constant: Some(crate::graph::Constant::I64(vals.to_vec())),
        at_run_ok: false,
    }
}

/// A graph of `nodes` with fused inputs `inputs` and outputs `outputs`, no constants.
pub fn graph(nodes: Vec<NodeDesc>, inputs: Vec<ValueDesc>, outputs: Vec<ValueDesc>) -> GraphDesc {
    GraphDesc { nodes, inputs, constant_inputs: vec![], outputs, constants: vec![] }
}

/// `n` Relus in a chain, `v0 -> v1 -> ... -> vn`.
pub fn relu_chain(n: usize, dims: &[Dim]) -> GraphDesc {
    let nodes = (0..n)
        .map(|i| node(&format!("r{i}"), "Relu", 14, &[v(&format!("v{i}"), dims)], v(&format!("v{}", i + 1), dims)))
        .collect();
    graph(nodes, vec![v("v0", dims)], vec![v(&format!("v{n}"), dims)])
}

/// Conv(x, w) with `w` a fused input, constant or not.
pub fn conv(constant_w: bool) -> GraphDesc {
    let f = |n: usize| Dim::Fixed(n);
    let (x, w) = (v("x", &[f(1), f(2), f(5), f(5)]), v("w", &[f(3), f(2), f(3), f(3)]));
    GraphDesc {
        nodes: vec![node("conv", "Conv", 11, &[x.clone(), w.clone()], v("y", &[f(1), f(3), f(3), f(3)]))],
        inputs: vec![x, w],
        constant_inputs: vec![false, constant_w],
        outputs: vec![v("y", &[f(1), f(3), f(3), f(3)])],
        constants: vec![],
    }
}

/// One Run of `plan` on `inputs` on the calling thread: its one float32 output.
pub fn run_one(plan: &Plan, inputs: &[crate::exec::TensorIn<'_>]) -> Result<Vec<f32>> {
    let mut y = Vec::new();
    let mut state = crate::exec::RunState::new(plan);
    crate::exec::execute(plan, &mut state, inputs, &mut OneOutput(Some(&mut y)), &crate::exec::Serial::default())?;
    Ok(y)
}

/// A Run's one float32 output, into the vector it holds (sized at the Run).
pub struct OneOutput<'a>(pub Option<&'a mut Vec<f32>>);

impl<'a> crate::exec::Outputs<'a> for OneOutput<'a> {
    fn alloc(&mut self, _index: usize, shape: &[usize], _elem_type: i32) -> Result<crate::data::DataMut<'a>> {
        let v = self.0.take().expect("one output");
        v.resize(shape.iter().product(), 0.0);
        Ok(crate::data::DataMut::F32(&mut v[..]))
    }
}
