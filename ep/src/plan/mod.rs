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
    /// Where the value lives inside its buffer when it is a part of a larger value (an
    /// input of a Concat written in place: see `passes::share_buffers`); `None` for a
    /// value that is its buffer's first elements.
    pub part: Option<Part>,
}

/// A value written in place inside a larger one: its elements are `at..at + len` of a
/// buffer that holds `whole` elements (the outermost value's), in a static plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    pub at: usize,
    pub len: usize,
    pub whole: usize,
}

#[derive(Clone, Debug)]
pub struct Step {
    pub node_name: String,
    /// The index of the model node (in the fused subgraph) it was lowered from: names
    /// may be empty or repeat, so steps are grouped into nodes by this.
    pub node: usize,
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
    /// For `Kernel::Op`: bit `k` is set when step input `k` (below 32) is the same data
    /// every Run (set by `mark_constant_weights`; see `ops::RunIn::constant`).
    pub constant_inputs: u32,
    /// A MatMul or Gemm whose constant B runs on bfloat16 products with float32 sums (the
    /// `bf16` precision; set by [`Plan::use_bf16`]).
    pub bf16: bool,
    /// Whether the step runs on the typed path (`exec::apply_typed`): a kernel over other
    /// element types than float32. The float32 path is the tuned one.
    pub typed: bool,
    /// Work fused onto the step's output (a bias, an activation, a residual Add), applied
    /// by the kernel as it writes (set by `passes::fuse_epilogues`).
    pub epilogue: Option<Box<Epilogue>>,
    /// For `Kernel::Op`: the op of a family in `ops::FAMILIES` that the step runs.
    pub op: Option<crate::ops::OpRef>,
    /// The output is the input's data under another shape, in the input's own slot (set by
    /// `passes::share_buffers` for Reshape, Flatten, Squeeze, Unsqueeze and Identity), or
    /// a Concat whose inputs were written in place in its output (`Part`): a Run only sets
    /// the output's shape, copying nothing.
    pub view: bool,
}

/// The nodes a fusion pass folded into a product step (Conv, MatMul, Gemm), applied in
/// this order to each output element: `after(act(scale(y) + bias) + residual)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Epilogue {
    /// A Mul or Div of a MatMul's output by a constant scalar (`fold_matmul_operands`).
    pub scale: Option<rivet_kernels::nn::Scale>,
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
    /// Whether it only names folded nodes (a step that absorbed others and still does its
    /// own work alone, like a Gelu made of its erf chain).
    pub fn is_names_only(&self) -> bool {
        self.scale.is_none()
            && self.bias.is_none()
            && self.act.is_none()
            && self.residual.is_none()
            && self.after.is_none()
    }

    /// The values it reads, besides the step's own inputs.
    pub fn operands(&self) -> impl Iterator<Item = ValueId> + '_ {
        self.bias.iter().chain(&self.residual).copied()
    }
}

impl Step {
    /// Whether the step may be a view of its input (see `view`): an op that only
    /// re-labels the shape, with no fused work and the same element type out as in.
    pub fn may_view(&self, values: &[PlanValue]) -> bool {
        matches!(self.kernel, Kernel::Identity | Kernel::Reshape(_))
            && self.epilogue.is_none()
            && self.inputs.len() == 1
            && values[self.inputs[0]].elem_type == values[self.output].elem_type
    }

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
    /// The model's nodes as the steps run them (set by `Plan::build` after the passes;
    /// empty in a plan built otherwise): what per-node timing and attribution report.
    pub units: Vec<NodeUnit>,
}

/// One node of the model as a Run executes it: the consecutive steps lowered from it (a
/// node may lower to several, e.g. half-precision casts around a float32 kernel), with a
/// label naming the nodes a fused epilogue folded in: `conv1 (+relu1)`.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeUnit {
    pub steps: std::ops::Range<usize>,
    pub label: String,
    pub op_type: String,
    /// The probe's handle for this node (zero-sized without the probe).
    pub probe: crate::probe::NodeId,
}

impl NodeUnit {
    /// The units of `steps`: each run of consecutive steps of one node.
    pub fn of_steps(steps: &[Step]) -> Vec<NodeUnit> {
        let mut units: Vec<NodeUnit> = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            if let Some(last) = units.last_mut() {
                if steps[last.steps.start].node == step.node {
                    last.steps.end = i + 1;
                    continue;
                }
            }
            let label = if step.node_name.is_empty() {
                format!("(unnamed {} #{})", step.op_type, step.node)
            } else {
                step.node_name.clone()
            };
            units.push(NodeUnit {
                steps: i..i + 1,
                label,
                op_type: step.op_type.clone(),
                probe: crate::probe::NodeId::NONE,
            });
        }
        for unit in &mut units {
            let folded: Vec<&str> = steps[unit.steps.clone()]
                .iter()
                .filter_map(|s| s.epilogue.as_ref())
                .flat_map(|e| e.folded.iter().map(|(name, _)| name.as_str()))
                .collect();
            if !folded.is_empty() {
                unit.label = format!("{} (+{})", unit.label, folded.join(", +"));
            }
        }
        units
    }
}

/// Shapes known at Compile.
#[derive(Clone, Debug)]
pub struct FixedShapes {
    pub shapes: Vec<Shape>,
    pub broadcasts: Vec<Option<Broadcast>>,
}
