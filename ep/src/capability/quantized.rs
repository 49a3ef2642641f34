//! The nodes of ORT's int8 fusions, left unclaimed with CPU fallback on: ORT's fused
//! int8 kernels beat anything Rivet can do once the group is split.
//!
//! ORT fuses a quantized model's groups into int8 kernels (QLinearConv, QGemm,
//! QLinearAdd, MatMulIntegerToFloat, ...) after partitioning, and only among the nodes
//! its CPU EP was given. A float Conv between DequantizeLinear and QuantizeLinear that
//! Rivet claims runs in float32 and leaves ORT's DequantizeLinear and QuantizeLinear
//! running alone around it: such models ran 3-8x slower with Rivet registered than on
//! ORT alone. So, with CPU fallback on, Rivet does not claim:
//! - a node one of whose inputs comes from a quantization op (DequantizeLinear,
//!   DynamicQuantizeLinear, MatMulInteger, ConvInteger, the QLinear ops), or
//! - a node one of whose outputs feeds a QuantizeLinear (the `DQ -> op -> Q` pattern,
//!   as it is after ORT has duplicated shared DequantizeLinear nodes and spread Q/DQ
//!   pairs across Reshape, Transpose and the like), or
//! - the rest of an integer product's float tail, `MatMulInteger -> Cast -> Mul (-> Add)`,
//!   which ORT fuses into MatMulIntegerToFloat, or
//! - a quantization op itself (QuantizeLinear, DequantizeLinear, the integer and QLinear
//!   products, which Rivet runs) one of whose neighbours (the producer of an input or a
//!   reader of an output) is another quantization op or a node marked above: any such
//!   node may be part of a group ORT fuses (`DQ -> op -> Q`, `Q -> DQ` pairs, a
//!   DynamicQuantizeLinear feeding MatMulInteger, a QOperator chain). Only standalone
//!   ones stay claimable: a QuantizeLinear of a graph input read by float nodes outside
//!   every group, a DequantizeLinear whose output is only a graph output.
//!
//! QuantizeLinear and DequantizeLinear of an 8-bit float are none of these: ORT's CPU EP
//! has no fused kernels for them, so Rivet claims their groups as any float nodes.

use std::collections::HashMap;

use crate::graph::{GraphDesc, NodeDesc};

fn onnx_domain(node: &NodeDesc) -> bool {
    matches!(node.domain.as_str(), "" | "ai.onnx")
}

/// A QuantizeLinear or DequantizeLinear of an 8-bit float (no ORT fusion takes it).
fn is_float8_qdq(node: &NodeDesc) -> bool {
    let value = match node.op_type.as_str() {
        "DequantizeLinear" => node.inputs.first(),
        "QuantizeLinear" => node.outputs.first(),
        _ => return false,
    };
    value.and_then(Option::as_ref).is_some_and(|v| crate::data::float8(v.elem_type).is_some())
}

/// Ops whose outputs are quantized values, or the scales of dynamic quantization.
fn is_quantization_op(node: &NodeDesc) -> bool {
    if is_float8_qdq(node) {
        return false;
    }
    let op = node.op_type.as_str();
    let listed = if onnx_domain(node) {
        matches!(op, "DequantizeLinear" | "DynamicQuantizeLinear" | "MatMulInteger" | "ConvInteger")
    } else if node.domain == "com.microsoft" {
        matches!(op, "DequantizeLinear" | "DynamicQuantizeMatMul" | "MatMulIntegerToFloat" | "QGemm")
    } else {
        return false;
    };
    listed || op.starts_with("QLinear")
}

fn is_quantize(node: &NodeDesc) -> bool {
    node.op_type == "QuantizeLinear" && (onnx_domain(node) || node.domain == "com.microsoft") && !is_float8_qdq(node)
}

fn is_integer_product(node: &NodeDesc) -> bool {
    matches!(node.op_type.as_str(), "MatMulInteger" | "ConvInteger") && onnx_domain(node)
}

/// Per node of `graph`: true when it is a node of a quantized group ORT can fuse (see the
/// module docs).
pub fn in_quantized_group(graph: &GraphDesc) -> Vec<bool> {
    let nodes = &graph.nodes;
    let mut producer: HashMap<&str, usize> = HashMap::new();
    let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, node) in nodes.iter().enumerate() {
        for out in node.outputs.iter().flatten() {
            producer.insert(out.name.as_str(), i);
        }
        for input in node.inputs.iter().flatten() {
            consumers.entry(input.name.as_str()).or_default().push(i);
        }
    }
    let reads_from = |node: &NodeDesc, pred: fn(&NodeDesc) -> bool| {
        node.inputs.iter().flatten().any(|v| producer.get(v.name.as_str()).is_some_and(|&p| pred(&nodes[p])))
    };
    let readers = |node: &NodeDesc| -> Vec<usize> {
        node.outputs.iter().flatten().flat_map(|v| consumers.get(v.name.as_str())).flatten().copied().collect()
    };
    let mut marked: Vec<bool> = nodes
        .iter()
        .map(|node| {
            !is_quantization_op(node)
                && !is_quantize(node)
                && (reads_from(node, is_quantization_op) || readers(node).iter().any(|&c| is_quantize(&nodes[c])))
        })
        .collect();
    // MatMulInteger -> Cast -> Mul -> Add: the Cast is marked above; follow it.
    for node in nodes {
        if node.op_type != "Cast" || !reads_from(node, is_integer_product) {
            continue;
        }
        let mut at = node;
        for next_op in ["Mul", "Add"] {
            match readers(at).into_iter().find(|&c| nodes[c].op_type == next_op) {
                Some(c) => {
                    marked[c] = true;
                    at = &nodes[c];
                }
                None => break,
            }
        }
    }
    // The quantization ops next to another one or to a marked float node.
    let is_quant = |n: &NodeDesc| is_quantization_op(n) || is_quantize(n);
    let float_marks = marked.clone();
    for (i, node) in nodes.iter().enumerate() {
        if !is_quant(node) {
            continue;
        }
        let producers = node.inputs.iter().flatten().filter_map(|v| producer.get(v.name.as_str()).copied());
        let mut neighbours = producers.chain(readers(node));
        marked[i] = neighbours.any(|j| float_marks[j] || is_quant(&nodes[j]));
    }
    marked
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{dtype, ValueDesc};

    fn v(name: &str) -> Option<ValueDesc> {
        Some(ValueDesc { name: name.into(), elem_type: dtype::FLOAT, dims: None, constant: None, at_run_ok: false })
    }
    fn node(op: &str, inputs: &[&str], output: &str) -> NodeDesc {
        NodeDesc {
            name: output.into(),
            op_type: op.into(),
            domain: String::new(),
            since_version: 21,
            inputs: inputs.iter().map(|i| v(i)).collect(),
            outputs: vec![v(output)],
            attrs: vec![],
        }
    }
    /// The names of the marked nodes.
    fn marked(nodes: Vec<NodeDesc>) -> Vec<String> {
        let g = GraphDesc { nodes, ..Default::default() };
        let m = in_quantized_group(&g);
        g.nodes.iter().zip(m).filter(|(_, m)| *m).map(|(n, _)| n.name.clone()).collect()
    }

    #[test]
    fn a_qdq_conv_group_is_left_to_ort_and_float_nodes_outside_it_are_not() {
        let m = marked(vec![
            node("Relu", &["x"], "pre"),
            node("QuantizeLinear", &["pre", "s", "z"], "xq"),
            node("DequantizeLinear", &["xq", "s", "z"], "xd"),
            node("DequantizeLinear", &["wq", "ws", "wz"], "wd"),
            node("Conv", &["xd", "wd"], "conv"),
            node("QuantizeLinear", &["conv", "s", "z"], "yq"),
            node("DequantizeLinear", &["yq", "s", "z"], "yd"),
            node("Softmax", &["yd"], "soft"),
            node("Tanh", &["soft"], "out"),
        ]);
        // `pre` feeds a QuantizeLinear and `soft` reads a DequantizeLinear; `out` is float.
        // Every Q and DQ touches the group.
        assert_eq!(m, ["pre", "xq", "xd", "wd", "conv", "yq", "yd", "soft"]);
    }

    #[test]
    fn an_8_bit_float_group_is_not_left_to_ort() {
        let f8 = |mut n: NodeDesc, k: usize, output: bool| {
            let v = if output { &mut n.outputs[k] } else { &mut n.inputs[k] };
            v.as_mut().expect("present").elem_type = dtype::FLOAT8E4M3FN;
            n
        };
        let m = marked(vec![
            f8(node("QuantizeLinear", &["x", "s", "z"], "xq"), 0, true),
            f8(node("DequantizeLinear", &["xq", "s", "z"], "xd"), 0, false),
            f8(node("DequantizeLinear", &["wq", "ws"], "wd"), 0, false),
            node("MatMul", &["xd", "wd"], "y"),
        ]);
        assert!(m.is_empty(), "{m:?}");
    }

    #[test]
    fn an_integer_products_float_tail_is_left_to_ort() {
        let m = marked(vec![
            node("DynamicQuantizeLinear", &["x"], "xq"),
            node("MatMulInteger", &["xq", "w"], "acc"),
            node("Cast", &["acc"], "accf"),
            node("Mul", &["accf", "scale"], "scaled"),
            node("Add", &["scaled", "bias"], "biased"),
            node("Gelu", &["biased"], "out"),
        ]);
        assert_eq!(m, ["xq", "acc", "accf", "scaled", "biased"]);
    }

    #[test]
    fn standalone_quantization_ops_stay_claimable() {
        let m = marked(vec![
            node("QuantizeLinear", &["x", "s", "z"], "xq"),
            node("Cast", &["xq"], "xf"),
            node("Tanh", &["xf"], "t"),
            node("DequantizeLinear", &["w", "s", "z"], "wd"),
            node("MatMulInteger", &["a", "b"], "ab"),
        ]);
        assert!(m.is_empty(), "{m:?}");
        // A DequantizeLinear read by a float node: the float node is left to ORT, so is it.
        let m = marked(vec![node("DequantizeLinear", &["w", "s", "z"], "wd"), node("MatMul", &["x", "wd"], "y")]);
        assert_eq!(m, ["wd", "y"]);
    }

    #[test]
    fn a_float_model_is_claimed_whole() {
        let m = marked(vec![node("Conv", &["x", "w"], "c"), node("Cast", &["c"], "d"), node("Mul", &["d", "s"], "e")]);
        assert!(m.is_empty(), "{m:?}");
    }
}
