//! Registry unit tests.
use super::*;
use crate::graph::AttrValue;
use crate::graph::ValueDesc;
use rivet_kernels::UnaryOp;

fn node(op: &str, version: i32, n_in: usize, attrs: Vec<(String, AttrValue)>) -> NodeDesc {
    let v = |name: &str| {
        Some(ValueDesc { name: name.into(), elem_type: dtype::FLOAT, dims: None, constant: None, at_run_ok: false })
    };
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
    let k = |n: &NodeDesc| kernel_for(n).map(|c| c.kernel);
    assert_eq!(k(&node("LeakyRelu", 16, 1, vec![])), Ok(Kernel::Unary(UnaryOp::LeakyRelu { alpha: 0.01 })));
    assert_eq!(
        k(&node("HardSigmoid", 6, 1, vec![])),
        Ok(Kernel::Unary(UnaryOp::HardSigmoid { alpha: 0.2, beta: 0.5 }))
    );
    let tanh = vec![("approximate".into(), AttrValue::String("tanh".into()))];
    assert_eq!(k(&node("Gelu", 20, 1, tanh)), Ok(Kernel::Unary(UnaryOp::GeluTanh)));
    // A family's op, by its parsed attributes.
    let op = |n: &NodeDesc| kernel_for(n).map(|c| format!("{:?}", c.ops[0].as_ref().expect("output 0")));
    assert_eq!(op(&node("Softmax", 11, 1, vec![])).as_deref(), Ok("Softmax { axis: 1, log: false, legacy: true }"));
    assert_eq!(op(&node("LogSoftmax", 13, 1, vec![])).as_deref(), Ok("Softmax { axis: -1, log: true, legacy: false }"));
    let gemm = k(&node("Gemm", 13, 2, vec![])).unwrap();
    assert_eq!(gemm, Kernel::Gemm { alpha: 1.0, beta: 1.0, trans_a: false, trans_b: false });
}

#[test]
fn unsupported_nodes_say_why() {
    assert!(kernel_for(&node("Relu", 1, 1, vec![])).unwrap_err().contains("opset version 1"));
    assert!(kernel_for(&node("StringSplit", 20, 1, vec![])).unwrap_err().contains("not implemented"));
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
            Arity::Unary | Arity::DataThenConstants { .. } => 1,
            Arity::Binary => 2,
            Arity::Variadic { min, .. } => min.max(3),
            Arity::Data { min, .. } | Arity::Optional { min, .. } => min,
        };
        let needs_constants = [
            "Reshape",
            "Unsqueeze",
            "Concat",
            "Conv",
            "MaxPool",
            "AveragePool",
            "LRN",
            "Pad",
            "CumSum",
            "Slice",
            "Tile",
            "OneHot",
            "TopK",
            "ConvTranspose",
            "ConstantOfShape",
        ];
        if needs_constants.contains(&s.op_type) {
            continue; // checked with their constants in the e2e tests
        }
        for v in [s.since.0, s.since.1] {
            let n = typed(node(s.op_type, v, n_in, vec![]));
            assert!(kernel_for(&n).is_ok(), "{} v{v}: {:?}", s.op_type, kernel_for(&n));
        }
    }
    assert_eq!(OPS.len(), 60);
    // The families moved out of `OPS` onto `ops::Op`, checked the same way (CumSum, Tile,
    // OneHot, TopK and ConstantOfShape need their constants, as above).
    let moved = [
        "Trilu",
        "Gather",
        "GatherElements",
        "EyeLike",
        "GatherND",
        "Shape",
        "Size",
        "Range",
        "NonZero",
        "ScatterElements",
        "Scatter",
        "ScatterND",
        "Einsum",
        "ArgMax",
        "ArgMin",
    ];
    for f in crate::ops::FAMILIES.iter().filter(|f| moved.contains(&f.op_type)) {
        let n_in = match f.op_type {
            "Range" | "ScatterElements" | "Scatter" | "ScatterND" | "Einsum" => 3,
            "Gather" | "GatherElements" | "GatherND" => 2,
            _ => 1,
        };
        for v in [f.since.0, f.since.1] {
            let n = typed(node(f.op_type, v, n_in, vec![]));
            assert!(kernel_for(&n).is_ok(), "{} v{v}: {:?}", f.op_type, kernel_for(&n));
        }
    }
    // The families moved out of the table, likewise (LRN needs its size).
    let moved = [
        ("Softmax", 1),
        ("LogSoftmax", 1),
        ("Hardmax", 1),
        ("LayerNormalization", 2),
        ("RMSNormalization", 2),
        ("BatchNormalization", 5),
        ("InstanceNormalization", 3),
        ("GroupNormalization", 3),
        ("NegativeLogLikelihoodLoss", 2),
        ("SoftmaxCrossEntropyLoss", 2),
    ];
    for (op, n_in) in moved {
        let f = crate::ops::op::lookup("", op).expect("a family");
        for v in [f.since.0, f.since.1] {
            let n = typed(node(op, v, n_in, vec![]));
            assert!(kernel_for(&n).is_ok(), "{op} v{v}: {:?}", kernel_for(&n));
        }
    }
    // The ops whose families moved out of `OPS` onto `ops::Op` (issue 14) resolve at both
    // ends of their range as they did, with the same typed nodes.
    let moved: &[(&str, usize)] = &[
        ("Equal", 2),
        ("Less", 2),
        ("LessOrEqual", 2),
        ("Greater", 2),
        ("GreaterOrEqual", 2),
        ("And", 2),
        ("Or", 2),
        ("Xor", 2),
        ("Not", 1),
        ("Where", 3),
        ("IsNaN", 1),
        ("IsInf", 1),
        ("BitShift", 2),
        ("BitwiseAnd", 2),
        ("BitwiseOr", 2),
        ("BitwiseXor", 2),
        ("BitwiseNot", 1),
        ("Expand", 1),
        ("Split", 1),
        ("ReduceSum", 1),
        ("ReduceMean", 1),
        ("ReduceMax", 1),
        ("ReduceMin", 1),
        ("ReduceProd", 1),
        ("ReduceL1", 1),
        ("ReduceL2", 1),
        ("ReduceLogSum", 1),
        ("ReduceLogSumExp", 1),
        ("ReduceSumSquare", 1),
    ];
    // Checked with their constants in the e2e tests.
    let moved_needing_constants = ["Concat", "Pad", "Slice"];
    for &(op, n_in) in moved {
        let f = crate::ops::FAMILIES.iter().find(|f| f.op_type == op).expect("registered");
        for v in [f.since.0, f.since.1] {
            let n = typed(node(op, v, n_in, vec![]));
            assert!(kernel_for(&n).is_ok(), "{op} v{v}: {:?}", kernel_for(&n));
        }
    }
    assert_eq!(moved.len() + moved_needing_constants.len(), 32);
}

/// Gives the typed ops' inputs, outputs and attributes the types they take.
fn typed(mut n: NodeDesc) -> NodeDesc {
    let set = |v: &mut Option<ValueDesc>, t: i32| v.as_mut().unwrap().elem_type = t;
    match n.op_type.as_str() {
        "Cast" => n.attrs.push(("to".into(), AttrValue::Int(dtype::INT64 as i64))),
        "CastLike" => n.inputs.push(n.inputs[0].clone()),
        "Equal" | "Less" | "LessOrEqual" | "Greater" | "GreaterOrEqual" => set(&mut n.outputs[0], dtype::BOOL),
        "And" | "Or" | "Xor" | "Not" => n.inputs.iter_mut().chain(&mut n.outputs).for_each(|v| set(v, dtype::BOOL)),
        "Where" => set(&mut n.inputs[0], dtype::BOOL),
        "Mod" => n.attrs.push(("fmod".into(), AttrValue::Int(1))),
        "Einsum" => n.attrs.push(("equation".into(), AttrValue::String("i,i,i->i".into()))),
        "GroupNormalization" => n.attrs.push(("num_groups".into(), AttrValue::Int(2))),
        "ArgMax" | "ArgMin" => set(&mut n.outputs[0], dtype::INT64),
        "Gather"
        | "GatherElements"
        | "NegativeLogLikelihoodLoss"
        | "SoftmaxCrossEntropyLoss"
        | "GatherND"
        | "ScatterElements"
        | "Scatter"
        | "ScatterND" => set(&mut n.inputs[1], dtype::INT64),
        "IsNaN" | "IsInf" => set(&mut n.outputs[0], dtype::BOOL),
        "NonZero" | "Shape" | "Size" => set(&mut n.outputs[0], dtype::INT64),
        "BitShift" | "BitwiseAnd" | "BitwiseOr" | "BitwiseXor" | "BitwiseNot" => {
            n.inputs.iter_mut().chain(&mut n.outputs).for_each(|v| set(v, dtype::UINT8));
            if n.op_type == "BitShift" {
                n.attrs.push(("direction".into(), AttrValue::String("LEFT".into())));
            }
        }
        _ => {}
    }
    if n.op_type == "Cast" {
        set(&mut n.outputs[0], dtype::INT64);
    }
    n
}
