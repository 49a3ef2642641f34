//! What Rivet can run: one table of ops, their opset ranges and how their attributes map
//! to a kernel. Capability asks it whether a node is claimable; the plan asks it for the
//! kernel. The README's op table is generated from `OPS`.

use rivet_kernels::{BinaryOp, UnaryOp};

use crate::graph::{dtype, AttrValue, NodeDesc};

/// The kernel a plan step runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kernel {
    Unary(UnaryOp),
    Binary(BinaryOp),
    Identity,
}

/// How many inputs an op takes.
#[derive(Clone, Copy, Debug)]
pub enum Arity {
    Unary,
    Binary,
}

type Build = fn(&NodeDesc) -> Result<Kernel, String>;

/// One supported op.
pub struct OpSpec {
    pub op_type: &'static str,
    /// Inclusive range of `since_version`s (of the ONNX schema the node resolved to)
    /// whose semantics Rivet implements.
    pub since: (i32, i32),
    pub arity: Arity,
    /// Attributes the op reads; any other attribute makes the node unclaimable.
    pub attrs: &'static [&'static str],
    pub build: Build,
}

macro_rules! unary {
    ($name:literal, $lo:literal..=$hi:literal, $op:expr) => {
        OpSpec { op_type: $name, since: ($lo, $hi), arity: Arity::Unary, attrs: &[], build: |_| Ok(Kernel::Unary($op)) }
    };
}

macro_rules! binary {
    ($name:literal, $lo:literal..=$hi:literal, $op:expr) => {
        OpSpec {
            op_type: $name,
            since: ($lo, $hi),
            arity: Arity::Binary,
            attrs: &[],
            build: |_| Ok(Kernel::Binary($op)),
        }
    };
}

fn float_attr(node: &NodeDesc, name: &str, default: f32) -> Result<f32, String> {
    match node.attr(name) {
        None => Ok(default),
        Some(AttrValue::Float(v)) => Ok(*v),
        Some(other) => Err(format!("attribute '{name}' should be a float, is {other:?}")),
    }
}

fn string_attr<'a>(node: &'a NodeDesc, name: &str, default: &'a str) -> Result<&'a str, String> {
    match node.attr(name) {
        None => Ok(default),
        Some(AttrValue::String(v)) => Ok(v),
        Some(other) => Err(format!("attribute '{name}' should be a string, is {other:?}")),
    }
}

/// Every op Rivet claims (domain `ai.onnx`, element type float32).
pub static OPS: &[OpSpec] = &[
    unary!("Relu", 6..=14, UnaryOp::Relu),
    unary!("Sigmoid", 6..=13, UnaryOp::Sigmoid),
    unary!("Tanh", 6..=13, UnaryOp::Tanh),
    unary!("Erf", 9..=13, UnaryOp::Erf),
    unary!("Exp", 6..=13, UnaryOp::Exp),
    unary!("Log", 6..=13, UnaryOp::Log),
    unary!("Sqrt", 6..=13, UnaryOp::Sqrt),
    unary!("Abs", 6..=13, UnaryOp::Abs),
    unary!("Neg", 6..=13, UnaryOp::Neg),
    unary!("Reciprocal", 6..=13, UnaryOp::Reciprocal),
    unary!("Floor", 6..=13, UnaryOp::Floor),
    unary!("Ceil", 6..=13, UnaryOp::Ceil),
    unary!("Softplus", 1..=22, UnaryOp::Softplus),
    unary!("Softsign", 1..=22, UnaryOp::Softsign),
    OpSpec {
        op_type: "HardSigmoid",
        since: (6, 22),
        arity: Arity::Unary,
        attrs: &["alpha", "beta"],
        build: |n| {
            Ok(Kernel::Unary(UnaryOp::HardSigmoid {
                alpha: float_attr(n, "alpha", 0.2)?,
                beta: float_attr(n, "beta", 0.5)?,
            }))
        },
    },
    unary!("HardSwish", 14..=22, UnaryOp::HardSwish),
    OpSpec {
        op_type: "LeakyRelu",
        since: (6, 16),
        arity: Arity::Unary,
        attrs: &["alpha"],
        build: |n| Ok(Kernel::Unary(UnaryOp::LeakyRelu { alpha: float_attr(n, "alpha", 0.01)? })),
    },
    OpSpec {
        op_type: "Elu",
        since: (6, 22),
        arity: Arity::Unary,
        attrs: &["alpha"],
        build: |n| Ok(Kernel::Unary(UnaryOp::Elu { alpha: float_attr(n, "alpha", 1.0)? })),
    },
    OpSpec {
        op_type: "Selu",
        since: (6, 22),
        arity: Arity::Unary,
        attrs: &["alpha", "gamma"],
        build: |n| {
            Ok(Kernel::Unary(UnaryOp::Selu {
                alpha: float_attr(n, "alpha", 1.673_263_2)?,
                gamma: float_attr(n, "gamma", 1.050_701)?,
            }))
        },
    },
    OpSpec {
        op_type: "Celu",
        since: (12, 12),
        arity: Arity::Unary,
        attrs: &["alpha"],
        build: |n| {
            let alpha = float_attr(n, "alpha", 1.0)?;
            if alpha == 0.0 {
                return Err("Celu alpha must not be 0".into());
            }
            Ok(Kernel::Unary(UnaryOp::Celu { alpha }))
        },
    },
    OpSpec {
        op_type: "ThresholdedRelu",
        since: (10, 22),
        arity: Arity::Unary,
        attrs: &["alpha"],
        build: |n| Ok(Kernel::Unary(UnaryOp::ThresholdedRelu { alpha: float_attr(n, "alpha", 1.0)? })),
    },
    unary!("Mish", 18..=22, UnaryOp::Mish),
    OpSpec {
        op_type: "Gelu",
        since: (20, 20),
        arity: Arity::Unary,
        attrs: &["approximate"],
        build: |n| match string_attr(n, "approximate", "none")? {
            "none" => Ok(Kernel::Unary(UnaryOp::Gelu)),
            "tanh" => Ok(Kernel::Unary(UnaryOp::GeluTanh)),
            other => Err(format!("Gelu approximate='{other}' is not 'none' or 'tanh'")),
        },
    },
    binary!("Add", 7..=14, BinaryOp::Add),
    binary!("Sub", 7..=14, BinaryOp::Sub),
    binary!("Mul", 7..=14, BinaryOp::Mul),
    binary!("Div", 7..=14, BinaryOp::Div),
    binary!("Pow", 7..=15, BinaryOp::Pow),
    binary!("Max", 8..=13, BinaryOp::Max),
    binary!("Min", 8..=13, BinaryOp::Min),
    OpSpec { op_type: "Identity", since: (1, 25), arity: Arity::Unary, attrs: &[], build: |_| Ok(Kernel::Identity) },
];

/// Finds the spec for an op type in the default domain.
pub fn lookup(domain: &str, op_type: &str) -> Option<&'static OpSpec> {
    if !(domain.is_empty() || domain == "ai.onnx") {
        return None;
    }
    OPS.iter().find(|s| s.op_type == op_type)
}

/// Decides whether Rivet can run `node`, and with which kernel. The `Err` says why not.
pub fn kernel_for(node: &NodeDesc) -> Result<Kernel, String> {
    let spec = lookup(&node.domain, &node.op_type)
        .ok_or_else(|| format!("op {}:{} is not implemented", node.domain, node.op_type))?;
    let (lo, hi) = spec.since;
    if node.since_version < lo || node.since_version > hi {
        return Err(format!(
            "{} opset version {} is outside the supported {lo}..={hi}",
            node.op_type, node.since_version
        ));
    }
    let want_inputs = match spec.arity {
        Arity::Unary => 1,
        Arity::Binary => 2,
    };
    if node.inputs.len() != want_inputs || node.inputs.iter().any(Option::is_none) {
        return Err(format!("{} needs exactly {want_inputs} inputs", node.op_type));
    }
    if node.outputs.len() != 1 || node.outputs[0].is_none() {
        return Err(format!("{} needs exactly one output", node.op_type));
    }
    for v in node.inputs.iter().chain(node.outputs.iter()).flatten() {
        if v.elem_type != dtype::FLOAT {
            return Err(format!(
                "value '{}' has element type {}, Rivet runs float32 only",
                v.name,
                dtype::name(v.elem_type)
            ));
        }
    }
    if let Some((name, _)) = node.attrs.iter().find(|(n, _)| !spec.attrs.contains(&n.as_str())) {
        return Err(format!("{} attribute '{name}' is not supported", node.op_type));
    }
    (spec.build)(node)
}

/// The README's table of supported ops, generated from `OPS`.
pub fn markdown_table() -> String {
    let mut out = String::from("| op | opset (since_version) | attributes | types |\n|---|---|---|---|\n");
    for s in OPS {
        let attrs = if s.attrs.is_empty() { "-".to_string() } else { s.attrs.join(", ") };
        out.push_str(&format!("| {} | {}..={} | {} | float32 |\n", s.op_type, s.since.0, s.since.1, attrs));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::ValueDesc;

    fn node(op: &str, version: i32, n_in: usize, attrs: Vec<(String, AttrValue)>) -> NodeDesc {
        let v = |name: &str| Some(ValueDesc { name: name.into(), elem_type: dtype::FLOAT, dims: None });
        NodeDesc {
            name: "n".into(),
            op_type: op.into(),
            domain: String::new(),
            since_version: version,
            inputs: (0..n_in).map(|i| v(&format!("i{i}"))).collect(),
            outputs: vec![v("y")],
            attrs,
        }
    }

    #[test]
    fn defaults_follow_the_onnx_spec() {
        assert_eq!(
            kernel_for(&node("LeakyRelu", 16, 1, vec![])),
            Ok(Kernel::Unary(UnaryOp::LeakyRelu { alpha: 0.01 }))
        );
        assert_eq!(
            kernel_for(&node("HardSigmoid", 6, 1, vec![])),
            Ok(Kernel::Unary(UnaryOp::HardSigmoid { alpha: 0.2, beta: 0.5 }))
        );
        assert_eq!(
            kernel_for(&node("Gelu", 20, 1, vec![("approximate".into(), AttrValue::String("tanh".into()))])),
            Ok(Kernel::Unary(UnaryOp::GeluTanh))
        );
    }

    #[test]
    fn unsupported_nodes_say_why() {
        assert!(kernel_for(&node("Relu", 1, 1, vec![])).unwrap_err().contains("opset version 1"));
        assert!(kernel_for(&node("Conv", 11, 1, vec![])).unwrap_err().contains("not implemented"));
        assert!(kernel_for(&node("Add", 14, 1, vec![])).unwrap_err().contains("exactly 2 inputs"));
        let bad = vec![("approximate".into(), AttrValue::String("erf".into()))];
        assert!(kernel_for(&node("Gelu", 20, 1, bad)).unwrap_err().contains("approximate='erf'"));
        let extra = vec![("beta".into(), AttrValue::Float(1.0))];
        assert!(kernel_for(&node("LeakyRelu", 16, 1, extra)).unwrap_err().contains("'beta'"));
        let mut int_node = node("Relu", 14, 1, vec![]);
        int_node.inputs[0].as_mut().unwrap().elem_type = dtype::INT64;
        assert!(kernel_for(&int_node).unwrap_err().contains("int64"));
    }

    #[test]
    fn every_listed_op_resolves_at_its_lowest_and_highest_version() {
        for s in OPS {
            let n_in = match s.arity {
                Arity::Unary => 1,
                Arity::Binary => 2,
            };
            for v in [s.since.0, s.since.1] {
                assert!(kernel_for(&node(s.op_type, v, n_in, vec![])).is_ok(), "{} v{v}", s.op_type);
            }
        }
        assert_eq!(OPS.len(), 31);
    }
}
