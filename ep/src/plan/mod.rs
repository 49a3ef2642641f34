//! A compiled subgraph: the steps to run, where each value lives, and what each value is
//! declared to be. Built once at Compile by the passes of `passes` (`Plan::build`); `exec`
//! runs it at every Run. This module holds only the plan's types.

use std::fmt;

use smallvec::SmallVec;

use crate::data::Buf;
use crate::graph::{DeclaredShape, Shape};
use crate::registry::Kernel;
use rivet_kernels::nn::Activation;
use rivet_kernels::Broadcast;

pub mod passes;
#[cfg(test)]
mod tests;

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
    /// Work fused onto the step's output (a bias, an activation, a residual Add), applied
    /// by the kernel as it writes (set by `passes::fuse_epilogues`).
    pub epilogue: Option<Box<Epilogue>>,
    /// For `Kernel::Op`: the op of a family in `ops::FAMILIES` that the step runs.
    pub op: Option<crate::ops::OpRef>,
}

/// The nodes a fusion pass folded into a product step (Conv, MatMul, Gemm), applied in
/// this order to each output element: `after(act(y + bias) + residual)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Epilogue {
    /// An Add of one value per output column (a MatMul's or Gemm's bias, shape `[n]`).
    pub bias: Option<ValueId>,
    pub act: Option<Activation>,
    /// An Add of a tensor of the output's shape (checked at Run).
    pub residual: Option<ValueId>,
    pub after: Option<Activation>,
    /// The folded nodes (name, op type), in order.
    pub folded: SmallVec<[(String, String); 3]>,
}

impl Epilogue {
    /// The values it reads, besides the step's own inputs.
    pub fn operands(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.bias.iter().chain(&self.residual).copied()
    }
}

impl Step {
    /// Every value the step reads: its inputs, its params and its epilogue's operands.
    pub fn reads(&self) -> impl Iterator<Item = ValueId> + '_ {
        let epilogue = self.epilogue.iter().flat_map(|e| e.operands());
        self.inputs.iter().chain(&self.params).copied().chain(epilogue)
    }
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
