//! Builds ONNX models in memory: a small protobuf writer for the handful of ONNX messages
//! a test or the built-in model needs (ModelProto, GraphProto, NodeProto, ...).

/// ONNX element type codes used by the builder.
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

/// A declared dimension.
#[derive(Clone, Debug)]
pub enum Dim {
    Fixed(i64),
    Sym(String),
}

impl From<i64> for Dim {
    fn from(v: i64) -> Self {
        Dim::Fixed(v)
    }
}
impl From<&str> for Dim {
    fn from(s: &str) -> Self {
        Dim::Sym(s.to_string())
    }
}

/// An attribute value.
#[derive(Clone, Debug)]
pub enum Attr {
    Float(f32),
    Int(i64),
    Str(String),
    Floats(Vec<f32>),
    Ints(Vec<i64>),
    Strs(Vec<String>),
    /// A tensor attribute: element type, dims and little-endian data.
    Tensor(i32, Vec<i64>, Vec<u8>),
    /// A graph attribute (an If branch, a Loop or Scan body): a serialized GraphProto,
    /// from [`ModelBuilder::graph`].
    Graph(Vec<u8>),
}

#[derive(Default)]
struct Buf(Vec<u8>);

impl Buf {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn key(&mut self, field: u32, wire: u32) {
        self.varint(((field << 3) | wire) as u64);
    }
    fn int(&mut self, field: u32, v: i64) {
        self.key(field, 0);
        self.varint(v as u64);
    }
    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }
    fn string(&mut self, field: u32, s: &str) {
        self.bytes(field, s.as_bytes());
    }
    fn message(&mut self, field: u32, m: Buf) {
        self.bytes(field, &m.0);
    }
    fn float(&mut self, field: u32, v: f32) {
        self.key(field, 5);
        self.0.extend_from_slice(&v.to_le_bytes());
    }
}

struct Node {
    op_type: String,
    name: String,
    domain: String,
    inputs: Vec<String>,
    outputs: Vec<String>,
    attrs: Vec<(String, Attr)>,
}

struct ValueInfo {
    name: String,
    elem_type: i32,
    dims: Option<Vec<Dim>>,
}

struct Initializer {
    name: String,
    dims: Vec<i64>,
    data: InitData,
}

enum InitData {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

/// A model under construction. `build` returns the serialized ModelProto.
pub struct ModelBuilder {
    opset: i64,
    nodes: Vec<Node>,
    inputs: Vec<ValueInfo>,
    outputs: Vec<ValueInfo>,
    initializers: Vec<Initializer>,
    value_infos: Vec<ValueInfo>,
    /// Opset versions of custom domains (default 1).
    domain_opsets: Vec<(String, i64)>,
}

impl ModelBuilder {
    /// A model importing the default ONNX domain at `opset`.
    pub fn new(opset: i64) -> Self {
        Self {
            opset,
            nodes: vec![],
            inputs: vec![],
            outputs: vec![],
            initializers: vec![],
            value_infos: vec![],
            domain_opsets: vec![],
        }
    }

    pub fn input(mut self, name: &str, elem_type: i32, dims: &[Dim]) -> Self {
        self.inputs.push(ValueInfo { name: name.into(), elem_type, dims: Some(dims.to_vec()) });
        self
    }

    /// An input with no shape at all (unknown rank).
    pub fn input_unshaped(mut self, name: &str, elem_type: i32) -> Self {
        self.inputs.push(ValueInfo { name: name.into(), elem_type, dims: None });
        self
    }

    /// An output; `dims: None` leaves the shape to ORT's inference.
    pub fn output(mut self, name: &str, elem_type: i32, dims: Option<&[Dim]>) -> Self {
        self.outputs.push(ValueInfo { name: name.into(), elem_type, dims: dims.map(<[Dim]>::to_vec) });
        self
    }

    /// Declares an intermediate value's type (GraphProto.value_info).
    pub fn value_info(mut self, name: &str, elem_type: i32, dims: &[Dim]) -> Self {
        self.value_infos.push(ValueInfo { name: name.into(), elem_type, dims: Some(dims.to_vec()) });
        self
    }

    pub fn initializer(mut self, name: &str, dims: &[i64], data: Vec<f32>) -> Self {
        self.initializers.push(Initializer { name: name.into(), dims: dims.to_vec(), data: InitData::F32(data) });
        self
    }

    /// An int64 initializer (shapes, axes).
    pub fn initializer_i64(mut self, name: &str, dims: &[i64], data: Vec<i64>) -> Self {
        self.initializers.push(Initializer { name: name.into(), dims: dims.to_vec(), data: InitData::I64(data) });
        self
    }

    pub fn node(self, op_type: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> Self {
        self.node_with(op_type, name, inputs, outputs, &[])
    }

    pub fn node_with(
        mut self,
        op_type: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: &[(&str, Attr)],
    ) -> Self {
        self.nodes.push(Node {
            op_type: op_type.into(),
            name: name.into(),
            domain: String::new(),
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
            attrs: attrs.iter().map(|(n, a)| (n.to_string(), a.clone())).collect(),
        });
        self
    }

    /// Like `node_with` in a custom domain (for ops no EP implements).
    pub fn node_in_domain(
        mut self,
        domain: &str,
        op_type: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
    ) -> Self {
        self = self.node(op_type, name, inputs, outputs);
        self.nodes.last_mut().expect("just added").domain = domain.into();
        self
    }

    /// The serialized GraphProto alone, named `name`: a subgraph for [`Attr::Graph`]
    /// (the opset is the enclosing model's). A subgraph's inputs and outputs are the
    /// builder's; names it reads but does not define come from the enclosing graph.
    pub fn graph(&self, name: &str) -> Vec<u8> {
        let mut graph = Buf::default();
        for n in &self.nodes {
            graph.message(1, encode_node(n));
        }
        graph.string(2, name);
        for i in &self.initializers {
            let mut t = Buf::default();
            for &d in &i.dims {
                t.int(1, d);
            }
            let (elem, raw): (i32, Vec<u8>) = match &i.data {
                InitData::F32(d) => (FLOAT, d.iter().flat_map(|v| v.to_le_bytes()).collect()),
                InitData::I64(d) => (INT64, d.iter().flat_map(|v| v.to_le_bytes()).collect()),
            };
            t.int(2, elem as i64);
            t.string(8, &i.name);
            t.bytes(9, &raw);
            graph.message(5, t);
        }
        for v in &self.inputs {
            graph.message(11, encode_value_info(v));
        }
        for v in &self.outputs {
            graph.message(12, encode_value_info(v));
        }
        for v in &self.value_infos {
            graph.message(13, encode_value_info(v));
        }
        graph.0
    }

    /// The serialized ModelProto.
    /// Imports `domain` at `version` (custom domains default to 1).
    pub fn domain_opset(mut self, domain: &str, version: i64) -> Self {
        self.domain_opsets.push((domain.into(), version));
        self
    }

    /// Like `node_with` in another domain.
    pub fn node_in_domain_with(
        mut self,
        domain: &str,
        op_type: &str,
        name: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: &[(&str, Attr)],
    ) -> Self {
        self = self.node_with(op_type, name, inputs, outputs, attrs);
        self.nodes.last_mut().expect("just added").domain = domain.into();
        self
    }

    pub fn build(&self) -> Vec<u8> {
        let graph = Buf(self.graph("rivet_graph"));
        let mut model = Buf::default();
        model.int(1, 10); // ir_version
        model.string(2, "rivet");
        model.message(7, graph);
        let mut opset = Buf::default();
        opset.string(1, "");
        opset.int(2, self.opset);
        model.message(8, opset);
        // The domains of the graph's nodes, and any imported explicitly (for subgraphs'
        // nodes, which the builder of the outer graph does not see).
        let mut custom = self
            .nodes
            .iter()
            .filter(|n| !n.domain.is_empty())
            .map(|n| n.domain.clone())
            .chain(self.domain_opsets.iter().map(|(d, _)| d.clone()))
            .collect::<Vec<_>>();
        custom.sort();
        custom.dedup();
        for d in custom {
            let mut o = Buf::default();
            let version = self.domain_opsets.iter().find(|(n, _)| *n == d).map_or(1, |(_, v)| *v);
            o.string(1, &d);
            o.int(2, version);
            model.message(8, o);
        }
        model.0
    }
}

fn encode_node(n: &Node) -> Buf {
    let mut b = Buf::default();
    for i in &n.inputs {
        b.string(1, i);
    }
    for o in &n.outputs {
        b.string(2, o);
    }
    b.string(3, &n.name);
    b.string(4, &n.op_type);
    for (name, a) in &n.attrs {
        let mut m = Buf::default();
        m.string(1, name);
        match a {
            Attr::Float(v) => {
                m.float(2, *v);
                m.int(20, 1);
            }
            Attr::Int(v) => {
                m.int(3, *v);
                m.int(20, 2);
            }
            Attr::Str(s) => {
                m.string(4, s);
                m.int(20, 3);
            }
            Attr::Floats(vs) => {
                for v in vs {
                    m.float(7, *v);
                }
                m.int(20, 6);
            }
            Attr::Ints(vs) => {
                for v in vs {
                    m.int(8, *v);
                }
                m.int(20, 7);
            }
            Attr::Strs(vs) => {
                for v in vs {
                    m.string(9, v);
                }
                m.int(20, 8);
            }
            Attr::Tensor(elem, dims, raw) => {
                let mut t = Buf::default();
                for &d in dims {
                    t.int(1, d);
                }
                t.int(2, *elem as i64);
                t.bytes(9, raw);
                m.message(5, t);
                m.int(20, 4);
            }
            Attr::Graph(g) => {
                m.bytes(6, g);
                m.int(20, 5);
            }
        }
        b.message(5, m);
    }
    if !n.domain.is_empty() {
        b.string(7, &n.domain);
    }
    b
}

fn encode_value_info(v: &ValueInfo) -> Buf {
    let mut tensor = Buf::default();
    tensor.int(1, v.elem_type as i64);
    if let Some(dims) = &v.dims {
        let mut shape = Buf::default();
        for d in dims {
            let mut dim = Buf::default();
            match d {
                Dim::Fixed(n) => dim.int(1, *n),
                Dim::Sym(s) => dim.string(2, s),
            }
            shape.message(1, dim);
        }
        tensor.message(2, shape);
    }
    let mut ty = Buf::default();
    ty.message(1, tensor);
    let mut b = Buf::default();
    b.string(1, &v.name);
    b.message(2, ty);
    b
}
