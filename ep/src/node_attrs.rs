//! Reading a node's attributes and constant inputs, with ONNX defaults: shared by every
//! op family's builder. Errors say which attribute or input is wrong.

use crate::graph::{AttrValue, Constant, NodeDesc, ValueDesc};

pub(crate) fn int_attr(node: &NodeDesc, name: &str, default: i64) -> Result<i64, String> {
    match node.attr(name) {
        None => Ok(default),
        Some(AttrValue::Int(v)) => Ok(*v),
        Some(other) => Err(format!("attribute '{name}' should be an int, is {other:?}")),
    }
}

pub(crate) fn ints_attr(node: &NodeDesc, name: &str) -> Result<Option<Vec<i64>>, String> {
    match node.attr(name) {
        None => Ok(None),
        Some(AttrValue::Ints(v)) => Ok(Some(v.clone())),
        Some(other) => Err(format!("attribute '{name}' should be ints, is {other:?}")),
    }
}

/// Input `pos` when present: `None` when omitted.
pub(crate) fn input(node: &NodeDesc, pos: usize) -> Option<&ValueDesc> {
    node.inputs.get(pos).and_then(Option::as_ref)
}

pub(crate) fn const_i64(node: &NodeDesc, pos: usize, what: &str) -> Result<Option<Vec<i64>>, String> {
    match input(node, pos) {
        None => Ok(None),
        Some(v) => match &v.constant {
            Some(Constant::I64(d)) => Ok(Some(d.clone())),
            _ => Err(format!("{what} '{}' must be a constant int64 initializer", v.name)),
        },
    }
}

pub(crate) fn const_f32_scalar(node: &NodeDesc, pos: usize, what: &str) -> Result<Option<f32>, String> {
    match input(node, pos) {
        None => Ok(None),
        Some(v) => match &v.constant {
            Some(Constant::F32(d)) if d.len() == 1 => Ok(Some(d[0])),
            _ => Err(format!("{what} '{}' must be a constant float32 scalar", v.name)),
        },
    }
}

/// True when input `pos` is an int64 tensor that reaches the fused node at Run (a graph
/// input or a value ORT computes; not one of an enclosing graph).
pub(crate) fn runtime_i64(node: &NodeDesc, pos: usize) -> bool {
    use crate::graph::dtype::{INT32, INT64};
    input(node, pos).is_some_and(|v| v.constant.is_none() && v.at_run_ok && matches!(v.elem_type, INT32 | INT64))
}

pub(crate) fn float_attr(node: &NodeDesc, name: &str, default: f32) -> Result<f32, String> {
    match node.attr(name) {
        None => Ok(default),
        Some(AttrValue::Float(v)) => Ok(*v),
        Some(other) => Err(format!("attribute '{name}' should be a float, is {other:?}")),
    }
}

pub(crate) fn string_attr<'a>(node: &'a NodeDesc, name: &str, default: &'a str) -> Result<&'a str, String> {
    match node.attr(name) {
        None => Ok(default),
        Some(AttrValue::String(v)) => Ok(v),
        Some(other) => Err(format!("attribute '{name}' should be a string, is {other:?}")),
    }
}
