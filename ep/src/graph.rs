//! An owned, ORT-free description of a graph: what the ABI layer reads out of an
//! `OrtGraph`, and what capability and planning work on.

use smallvec::SmallVec;

pub use crate::data::dtype;

/// One dimension as declared in the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    Fixed(usize),
    /// Symbolic (`N`) or unknown (empty name).
    Symbolic(String),
}

pub type Shape = SmallVec<[usize; 8]>;
pub type DeclaredShape = SmallVec<[Dim; 8]>;

/// A value's declared type: `None` dims means the rank is unknown.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ValueDesc {
    pub name: String,
    /// ONNX element type, or 0 when the value is not a tensor.
    pub elem_type: i32,
    pub dims: Option<DeclaredShape>,
    /// The data of a small constant initializer (at most `SMALL_CONSTANT` elements):
    /// shapes, axes and bounds that ops read at Compile.
    pub constant: Option<Constant>,
    /// For int64 values: whether it reaches a fused node at Run (a graph input, or a value
    /// computed by a node ORT runs: Rivet computes no int64 values). Values of an enclosing
    /// graph do not.
    pub at_run_ok: bool,
}

/// Largest constant initializer whose data is read with the graph.
pub const SMALL_CONSTANT: usize = 64;

#[derive(Clone, Debug, PartialEq)]
pub enum Constant {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum AttrValue {
    Int(i64),
    Float(f32),
    String(String),
    Ints(Vec<i64>),
    Floats(Vec<f32>),
    Strings(Vec<String>),
    /// A tensor attribute of a type Rivet holds: its shape and data.
    Tensor(Shape, crate::data::Buf),
    /// Kinds Rivet never accepts (graphs, tensors of other types).
    Other,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodeDesc {
    pub name: String,
    pub op_type: String,
    pub domain: String,
    pub since_version: i32,
    /// `None` for an omitted optional input.
    pub inputs: Vec<Option<ValueDesc>>,
    pub outputs: Vec<Option<ValueDesc>>,
    pub attrs: Vec<(String, AttrValue)>,
}

impl NodeDesc {
    pub fn attr(&self, name: &str) -> Option<&AttrValue> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

/// A constant tensor the plan keeps (an initializer ORT did not pass as an input).
#[derive(Clone, Debug, PartialEq)]
pub struct ConstDesc {
    pub name: String,
    pub shape: Shape,
    pub data: crate::data::Buf,
}

/// A graph as Rivet sees it. Nodes are in the order ORT listed them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GraphDesc {
    pub nodes: Vec<NodeDesc>,
    /// Graph inputs (for a fused subgraph: the fused node's inputs, in order).
    pub inputs: Vec<ValueDesc>,
    /// Per input: whether it is a constant initializer (the same data every Run). Empty:
    /// none is.
    pub constant_inputs: Vec<bool>,
    /// Graph outputs (for a fused subgraph: the fused node's outputs, in order).
    pub outputs: Vec<ValueDesc>,
    /// Constant initializers not among `inputs`.
    pub constants: Vec<ConstDesc>,
}

/// An axis in `-rank..rank` (`-rank..=rank` when `inclusive`, as Flatten's) as an index.
/// A scalar accepts axis 0 and -1.
pub fn normalize_axis(axis: i64, rank: usize, inclusive: bool) -> Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    let ok = if inclusive { (0..=r).contains(&a) } else { (0..r).contains(&a) };
    if ok {
        Ok(a as usize)
    } else if rank == 0 && !inclusive && (axis == 0 || axis == -1) {
        Ok(0)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}

/// A shape as (outer, n, inner) around `axis` (an out-of-range axis as 0); `legacy`
/// (the opset < 13 Softmax family) folds every axis from `axis` on into n.
pub fn axis_split(s: &[usize], axis: i64, legacy: bool) -> (usize, usize, usize) {
    let a = normalize_axis(axis, s.len(), false).unwrap_or(0);
    if s.is_empty() {
        (1, 1, 1)
    } else if legacy {
        (s[..a].iter().product(), s[a..].iter().product(), 1)
    } else {
        (s[..a].iter().product(), s[a], s[a + 1..].iter().product())
    }
}

/// A shape as text, for messages.
pub struct ShapeText<'a>(pub &'a [usize]);
impl std::fmt::Display for ShapeText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}
