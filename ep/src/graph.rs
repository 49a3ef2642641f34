//! An owned, ORT-free description of a graph: what the ABI layer reads out of an
//! `OrtGraph`, and what capability and planning work on.

use smallvec::SmallVec;

/// ONNX element type codes (TensorProto.DataType).
pub mod dtype {
    pub const FLOAT: i32 = 1;
    pub const UINT8: i32 = 2;
    pub const INT8: i32 = 3;
    pub const UINT16: i32 = 4;
    pub const INT16: i32 = 5;
    pub const INT32: i32 = 6;
    pub const INT64: i32 = 7;
    pub const BOOL: i32 = 9;
    pub const FLOAT16: i32 = 10;
    pub const DOUBLE: i32 = 11;
    pub const UINT32: i32 = 12;
    pub const UINT64: i32 = 13;
    pub const BFLOAT16: i32 = 16;

    /// Name of an ONNX element type, for messages.
    pub fn name(code: i32) -> &'static str {
        match code {
            1 => "float32",
            2 => "uint8",
            3 => "int8",
            4 => "uint16",
            5 => "int16",
            6 => "int32",
            7 => "int64",
            8 => "string",
            9 => "bool",
            10 => "float16",
            11 => "float64",
            12 => "uint32",
            13 => "uint64",
            16 => "bfloat16",
            _ => "other",
        }
    }
}

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
