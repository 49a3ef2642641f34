//! Helpers of the typed-path end-to-end tests (e2e_typed*.rs): ONNX element types, and
//! one-node models.

use ort::value::TensorElementType as E;
use rivet::model::{Attr, ModelBuilder, BOOL, DOUBLE, FLOAT, INT16, INT32, INT64, INT8, UINT16, UINT32, UINT64, UINT8};

pub fn elem(code: i32) -> E {
    match code {
        FLOAT => E::Float32,
        DOUBLE => E::Float64,
        INT8 => E::Int8,
        UINT8 => E::Uint8,
        INT16 => E::Int16,
        UINT16 => E::Uint16,
        INT32 => E::Int32,
        UINT32 => E::Uint32,
        INT64 => E::Int64,
        UINT64 => E::Uint64,
        BOOL => E::Bool,
        _ => unreachable!(),
    }
}

pub fn name(code: i32) -> &'static str {
    ["", "f32", "u8", "i8", "u16", "i16", "i32", "i64", "", "bool", "", "f64", "u32", "u64"][code as usize]
}

pub fn unary_model(op: &str, from: i32, to: i32, attrs: &[(&str, Attr)], opset: i64) -> Vec<u8> {
    ModelBuilder::new(opset)
        .input("x", from, &["N".into()])
        .node_with(op, "op", &["x"], &["y"], attrs)
        .output("y", to, None)
        .build()
}

pub fn binary_model(op: &str, t: i32, out: i32, attrs: &[(&str, Attr)]) -> Vec<u8> {
    ModelBuilder::new(18)
        .input("a", t, &[2.into(), 3.into()])
        .input("b", t, &[3.into()])
        .node_with(op, "op", &["a", "b"], &["y"], attrs)
        .output("y", out, None)
        .build()
}
