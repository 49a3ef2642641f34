//! The `ai.onnx.ml` domain (tree ensembles, linear and SVM models, the feature
//! transforms, LabelEncoder): tensor in, tensor out. Ops whose output is a string tensor
//! or a sequence of maps (string class labels, ZipMap) are never claimed: Rivet holds
//! numeric tensors only.
//!
//! The numerics follow ONNX Runtime's CPU kernels, which is what a model converted for ORT
//! expects: a float32 input evaluates trees with float32 thresholds and sums in float32,
//! a float64 input in float64; the post transforms are computed in float32 with ORT's
//! approximations (PROBIT's inverse error function).

pub mod encode;
pub mod features;
pub mod linear;
pub mod post;
pub mod svm;
pub mod tree;
mod tree_build;

use crate::data::Data;
use crate::graph::{dtype, AttrValue, NodeDesc};

/// An input element the ml ops read: its value as float32 / float64, and whether it is
/// NaN (never for integers).
pub trait Elem: Copy + Send + Sync {
    fn f32(self) -> f32;
    fn f64(self) -> f64;
    fn nan(self) -> bool;
}

impl Elem for f32 {
    fn f32(self) -> f32 {
        self
    }
    fn f64(self) -> f64 {
        self as f64
    }
    fn nan(self) -> bool {
        self.is_nan()
    }
}
impl Elem for f64 {
    fn f32(self) -> f32 {
        self as f32
    }
    fn f64(self) -> f64 {
        self
    }
    fn nan(self) -> bool {
        self.is_nan()
    }
}
impl Elem for i64 {
    fn f32(self) -> f32 {
        self as f32
    }
    fn f64(self) -> f64 {
        self as f64
    }
    fn nan(self) -> bool {
        false
    }
}
impl Elem for i32 {
    fn f32(self) -> f32 {
        self as f32
    }
    fn f64(self) -> f64 {
        self as f64
    }
    fn nan(self) -> bool {
        false
    }
}

/// Calls `$body` with `$x` bound to the input's elements (float32, float64, int64 or
/// int32), or evaluates `$other` for any other type.
macro_rules! with_elems {
    ($data:expr, $x:ident => $body:expr, $other:expr) => {
        match $data {
            $crate::data::Data::F32($x) => $body,
            $crate::data::Data::F64($x) => $body,
            $crate::data::Data::I64($x) => $body,
            $crate::data::Data::I32($x) => $body,
            _ => $other,
        }
    };
}
pub(crate) use with_elems;

/// The numeric input types the ml ops take.
pub fn numeric_input(t: i32) -> bool {
    matches!(t, dtype::FLOAT | dtype::DOUBLE | dtype::INT64 | dtype::INT32)
}

/// `[N, C]` of an ml input: a 1-D input is one row.
pub fn rows(shape: &[usize]) -> Result<(usize, usize), String> {
    match shape {
        [c] => Ok((1, *c)),
        [n, c] => Ok((*n, *c)),
        _ => Err(format!("the input must be 1-D or 2-D [N, C], got rank {}", shape.len())),
    }
}

pub fn floats_attr(node: &NodeDesc, name: &str) -> Result<Option<Vec<f32>>, String> {
    match node.attr(name) {
        None => Ok(None),
        Some(AttrValue::Floats(v)) => Ok(Some(v.clone())),
        Some(AttrValue::Float(v)) => Ok(Some(vec![*v])),
        Some(other) => Err(format!("attribute '{name}' should be floats, is {other:?}")),
    }
}

pub fn ints_attr(node: &NodeDesc, name: &str) -> Result<Option<Vec<i64>>, String> {
    match node.attr(name) {
        None => Ok(None),
        Some(AttrValue::Ints(v)) => Ok(Some(v.clone())),
        Some(AttrValue::Int(v)) => Ok(Some(vec![*v])),
        Some(other) => Err(format!("attribute '{name}' should be ints, is {other:?}")),
    }
}

pub fn strings_attr(node: &NodeDesc, name: &str) -> Result<Option<Vec<String>>, String> {
    match node.attr(name) {
        None => Ok(None),
        Some(AttrValue::Strings(v)) => Ok(Some(v.clone())),
        Some(AttrValue::String(v)) => Ok(Some(vec![v.clone()])),
        Some(other) => Err(format!("attribute '{name}' should be strings, is {other:?}")),
    }
}

/// A tensor attribute's data, with its element type.
pub fn tensor_attr<'a>(node: &'a NodeDesc, name: &str) -> Result<Option<Data<'a>>, String> {
    match node.attr(name) {
        None => Ok(None),
        Some(AttrValue::Tensor(_, buf)) => Ok(Some(buf.view())),
        Some(other) => Err(format!("attribute '{name}' should be a numeric tensor, is {other:?}")),
    }
}

/// Fails when the node has a string attribute list Rivet cannot use (string labels).
pub fn refuse_strings(node: &NodeDesc, names: &[&str]) -> Result<(), String> {
    for n in names {
        if node.attr(n).is_some() {
            return Err(format!(
                "{} attribute '{n}': string labels make a string tensor, which Rivet does not produce",
                node.op_type
            ));
        }
    }
    Ok(())
}

/// The index of an attribute's non-negative integer as usize, or an error naming it.
pub fn index(v: i64, what: &str, limit: usize) -> Result<usize, String> {
    usize::try_from(v).ok().filter(|&i| i < limit).ok_or_else(|| format!("{what} {v} is outside 0..{limit}"))
}
