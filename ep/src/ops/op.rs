//! The seam an op family implements to live in one module: its claim (opsets, types,
//! attributes), its compiled parameters, its shape rule and its run, with no arm in the
//! central `Kernel` matches. A family registers one line in [`super::FAMILIES`].
//!
//! At `GetCapability` the registry calls the family's `compile` once per output of the
//! node: an `Err` leaves the node unclaimed (with the reason). At Compile, lowering calls
//! it again and each step holds its [`Op`] (shared by concurrent Runs: `run` takes `&self`
//! and keeps its per-Run state in the [`OpScratch`] it is given).

use std::fmt;
use std::sync::Arc;

use crate::data::{Data, DataMut};
use crate::graph::{NodeDesc, Shape};
use crate::parallel::Parallel;

/// Builds the op computing output `output` of `node`, or says why Rivet cannot.
pub type Compile = fn(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String>;

/// One registration line: an op type of a domain over a range of `since_version`s.
pub struct Family {
    /// `""` for the default ONNX domain, else e.g. `"ai.onnx.ml"`, `"com.microsoft"`.
    pub domain: &'static str,
    pub op_type: &'static str,
    /// Inclusive range of schema `since_version`s whose semantics the family implements.
    pub since: (i32, i32),
    /// The element types it is claimed for (the README's table).
    pub types: &'static str,
    pub compile: Compile,
}

/// A step's input shapes and, where known, data: at Compile only constants' data is
/// known; at Run every input's is.
pub struct ShapeIn<'a> {
    pub shapes: &'a [&'a [usize]],
    pub data: &'a [Option<Data<'a>>],
}

impl<'a> ShapeIn<'a> {
    /// Input `k`'s data, or `Err(NeedsData)` when only the Run will know it.
    pub fn data(&self, k: usize) -> Result<Data<'a>, ShapeError> {
        self.data.get(k).copied().flatten().ok_or(ShapeError::NeedsData)
    }
}

/// Why a shape could not be given.
#[derive(Debug)]
pub enum ShapeError {
    /// The shape depends on data not known yet (at Compile): ask again at Run.
    NeedsData,
    /// The inputs are wrong for the op; the message names what (the caller adds the node).
    Invalid(String),
}

impl From<String> for ShapeError {
    fn from(s: String) -> Self {
        ShapeError::Invalid(s)
    }
}

impl From<&str> for ShapeError {
    fn from(s: &str) -> Self {
        ShapeError::Invalid(s.to_string())
    }
}

/// Per-Run working memory of one step, kept in the Run's state and reused, so a
/// steady-state Run allocates nothing.
#[derive(Debug, Default)]
pub struct OpScratch {
    pub f32: Vec<f32>,
    pub f64: Vec<f64>,
    pub i64: Vec<i64>,
    pub usize: Vec<usize>,
    /// Packed integer operands (the quantized products).
    pub i16: Vec<i16>,
    pub i32: Vec<i32>,
    /// A family's own working memory (a kernel's scratch struct), made on the first Run.
    pub state: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl OpScratch {
    /// The family's state of type `T`, made (once) if it is not there yet.
    pub fn state<T: Default + Send + Sync + 'static>(&mut self) -> &mut T {
        if !self.state.as_ref().is_some_and(|s| s.is::<T>()) {
            self.state = Some(Box::new(T::default()));
        }
        self.state.as_mut().and_then(|s| s.downcast_mut::<T>()).expect("made above")
    }
}

/// What a step's run gets.
pub struct RunIn<'a, 'd> {
    pub ins: &'a [Data<'d>],
    pub shapes: &'a [&'a [usize]],
    pub out_shape: &'a [usize],
    /// Bit `k` set: input `k` is a constant (an initializer ORT hands in every Run, or one
    /// the plan holds): the same data at the same address every Run, so an op may keep
    /// work derived from it (packed weights) keyed by that address.
    pub constant: u32,
    pub par: &'a dyn Parallel,
    pub scratch: &'a mut OpScratch,
}

/// A compiled op: parameters resolved from the node's attributes (and constant inputs).
pub trait Op: Send + Sync + fmt::Debug {
    /// The output's shape (checked against the model's declaration by the caller).
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError>;
    /// Writes the output (of the element type the node declares). An error about one
    /// input may start `input {k}: ` (the node's label then precedes it without a colon).
    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String>;
    /// Whether a float16 / bfloat16 node runs this float32 op between casts the plan
    /// adds (its family's compile is then given the node with the half type as float32).
    fn halves_in_f32(&self) -> bool {
        false
    }
    /// A step that computes every output of the node at once (an RNN's recurrence, whose
    /// Y, Y_h and Y_c each ran it whole), for a node two or more of whose outputs are
    /// read. Lowering then runs it once, on the node's inputs, into a value of its own,
    /// and each output's step gets that value as one more input, last: the op must then
    /// take its output from it.
    fn shared(&self) -> Option<OpRef> {
        None
    }
    /// This op with a per-channel `chain` folded onto its output (`passes::fuse_channel_chain`),
    /// if it takes one: its inputs are then its own, the Mul's operand and the Add's
    /// operand (those the chain has), in that order. `folded`: the folded nodes (name, op
    /// type) in order, for its errors.
    fn with_channel_chain(&self, chain: ChannelChain, folded: &[(String, String)]) -> Option<OpRef> {
        let _ = (chain, folded);
        None
    }
    /// Whether this op can read and write 8-bit `[N, C, H, W]` data stored channels last
    /// (`passes::channels_last_int8`), given its inputs' and output's fixed shapes:
    /// `None` it cannot; `Some(faster)` it takes either layout on the inputs
    /// [`channels_last_inputs`](Self::channels_last_inputs) marks and on its output
    /// (converting what its kernel does not take), `faster` when its kernel runs faster
    /// on channels-last data.
    fn channels_last_use(&self, shapes: &[&[usize]], out: &[usize]) -> Option<bool> {
        let _ = (shapes, out);
        None
    }
    /// The inputs (bit `k`: input `k`) that may be stored channels last.
    fn channels_last_inputs(&self) -> u32 {
        0
    }
    /// This op with the inputs `inputs` marks (bit `k`: input `k`) and, when `output`,
    /// its output stored channels last.
    fn with_channels_last(&self, inputs: u32, output: bool) -> Option<OpRef> {
        let _ = (inputs, output);
        None
    }
}

/// A per-channel chain on an op's `[N, C, ...]` output: a Mul and an Add by operands of
/// one value per channel (or one value), then an activation, each optional.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChannelChain {
    pub mul: bool,
    pub add: bool,
    pub act: Option<rivet_kernels::nn::Activation>,
}

/// An [`Op`] held by a step or a claim (compared by identity).
#[derive(Clone)]
pub struct OpRef(pub Arc<dyn Op>);

impl PartialEq for OpRef {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for OpRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::ops::Deref for OpRef {
    type Target = dyn Op;
    fn deref(&self) -> &(dyn Op + 'static) {
        &*self.0
    }
}

/// The family registered for `domain` / `op_type`, if any.
pub fn lookup(domain: &str, op_type: &str) -> Option<&'static Family> {
    let domain = if domain == "ai.onnx" { "" } else { domain };
    super::FAMILIES.iter().find(|f| f.domain == domain && f.op_type == op_type)
}

/// Claims `node` through its family: every present output compiles, or the node is not
/// claimed. Returns the ops by output position (`None` for an absent output).
pub fn claim(family: &Family, node: &NodeDesc) -> Result<Vec<Option<OpRef>>, String> {
    let (lo, hi) = family.since;
    if node.since_version < lo || node.since_version > hi {
        return Err(format!(
            "{} opset version {} is outside the supported {lo}..={hi}",
            node.op_type, node.since_version
        ));
    }
    if node.outputs.iter().all(Option::is_none) {
        return Err(format!("{} needs an output", node.op_type));
    }
    (0..node.outputs.len())
        .map(|k| match node.outputs[k] {
            None => Ok(None),
            Some(_) => (family.compile)(node, k).map(|op| Some(OpRef(op))),
        })
        .collect()
}

/// Helpers for family modules.
pub mod util {
    use crate::data::{Data, DataMut};
    use crate::graph::{dtype, NodeDesc, ValueDesc};

    /// Input `k` of the node, if present.
    pub fn input(node: &NodeDesc, k: usize) -> Option<&ValueDesc> {
        node.inputs.get(k).and_then(Option::as_ref)
    }

    /// Input `k`'s element type (0 when absent).
    pub fn input_type(node: &NodeDesc, k: usize) -> i32 {
        input(node, k).map_or(0, |v| v.elem_type)
    }

    /// Output `k`'s element type (0 when absent).
    pub fn output_type(node: &NodeDesc, k: usize) -> i32 {
        node.outputs.get(k).and_then(Option::as_ref).map_or(0, |v| v.elem_type)
    }

    /// Fails unless every attribute of the node is in `allowed`.
    pub fn check_attrs(node: &NodeDesc, allowed: &[&str]) -> Result<(), String> {
        match node.attrs.iter().find(|(n, _)| !allowed.contains(&n.as_str())) {
            Some((name, _)) => Err(format!("{} attribute '{name}' is not supported", node.op_type)),
            None => Ok(()),
        }
    }

    /// Fails unless the node has between `min` and `max` inputs.
    pub fn check_inputs(node: &NodeDesc, min: usize, max: usize) -> Result<(), String> {
        let n = node.inputs.len();
        if n < min || n > max || node.inputs[..min].iter().any(Option::is_none) {
            return Err(format!("{} needs its first {min} inputs and at most {max}", node.op_type));
        }
        Ok(())
    }

    /// An error text naming the types a node has, for a type it cannot take.
    pub fn bad_types(node: &NodeDesc, runs: &str) -> String {
        let list: Vec<String> = node
            .inputs
            .iter()
            .flatten()
            .map(|v| format!("'{}' {}", v.name, dtype::name(v.elem_type)))
            .chain(node.outputs.iter().flatten().map(|v| format!("output '{}' {}", v.name, dtype::name(v.elem_type))))
            .collect();
        format!("{} runs {runs}; got {}", node.op_type, list.join(", "))
    }

    /// Data movement of any element type: `apply::<T>` gets the input's and the output's
    /// elements of the same storage type (bool as `u8`, the half floats as `u16`).
    pub trait Move {
        fn apply<T: Copy + Default + PartialEq + Send + Sync>(&self, x: &[T], y: &mut [T]);
    }

    /// Calls `m.apply` with input `x` and output `y`, which must have one element type.
    pub fn move_any(x: Data<'_>, y: &mut DataMut<'_>, m: &impl Move) -> Result<(), String> {
        match (x, y) {
            (Data::F32(x), DataMut::F32(y)) => m.apply(x, y),
            (Data::F64(x), DataMut::F64(y)) => m.apply(x, y),
            (Data::I8(x), DataMut::I8(y)) => m.apply(x, y),
            (Data::I16(x), DataMut::I16(y)) => m.apply(x, y),
            (Data::I32(x), DataMut::I32(y)) => m.apply(x, y),
            (Data::I64(x), DataMut::I64(y)) => m.apply(x, y),
            (Data::U8(x), DataMut::U8(y)) | (Data::Bool(x), DataMut::Bool(y)) => m.apply(x, y),
            (Data::U16(x), DataMut::U16(y)) | (Data::F16(x), DataMut::F16(y)) | (Data::BF16(x), DataMut::BF16(y)) => {
                m.apply(x, y)
            }
            (Data::U32(x), DataMut::U32(y)) => m.apply(x, y),
            (Data::U64(x), DataMut::U64(y)) => m.apply(x, y),
            _ => return Err("input and output element types differ from the plan's".into()),
        }
        Ok(())
    }

    /// The values of an integer tensor (int64 or int32) as i64.
    pub fn ints(d: Data<'_>) -> Option<Vec<i64>> {
        match d {
            Data::I64(v) => Some(v.to_vec()),
            Data::I32(v) => Some(v.iter().map(|&x| x as i64).collect()),
            _ => None,
        }
    }

    /// The values of a float tensor (float32 or float64) as f64.
    pub fn floats(d: Data<'_>) -> Option<Vec<f64>> {
        match d {
            Data::F32(v) => Some(v.iter().map(|&x| x as f64).collect()),
            Data::F64(v) => Some(v.to_vec()),
            _ => None,
        }
    }
}
