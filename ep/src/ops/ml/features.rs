//! The elementwise and per-row feature transforms: Scaler, Normalizer, Binarizer,
//! Imputer, ArrayFeatureExtractor and OneHotEncoder (integer categories).

use std::sync::Arc;

use super::{floats_attr, ints_attr, numeric_input, with_elems, Elem};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::{float_attr, int_attr, string_attr};
use crate::ops::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use crate::ops::{Op, RunIn, ShapeError, ShapeIn};

/// The elements of `d` per row of `dims[1]` (ORT's "stride": the first dimension of a
/// 1-D input, else the second).
fn stride(dims: &[usize]) -> Result<usize, ShapeError> {
    match dims {
        [] => Err("the input must have at least one dimension".to_string().into()),
        [c] => Ok(*c),
        [_, c, ..] => Ok(*c),
    }
}

fn wrong_output() -> String {
    "the output's element type differs from the plan's".into()
}

#[derive(Debug)]
struct Scaler {
    offset: Vec<f32>,
    scale: Vec<f32>,
}

pub fn scaler(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["offset", "scale"])?;
    check_inputs(node, 1, 1)?;
    if !numeric_input(input_type(node, 0)) || output_type(node, 0) != dtype::FLOAT {
        return Err(bad_types(node, "float32, float64, int64 or int32 in, float32 out"));
    }
    let scale = floats_attr(node, "scale")?.unwrap_or_default();
    let offset = floats_attr(node, "offset")?.unwrap_or_default();
    if scale.is_empty() || scale.len() != offset.len() {
        return Err(format!("Scaler needs scale and offset of one length, got {} and {}", scale.len(), offset.len()));
    }
    Ok(Arc::new(Scaler { offset, scale }))
}

impl Op for Scaler {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let c = stride(x.shapes[0])?;
        if self.scale.len() != 1 && self.scale.len() != c {
            return Err(
                format!("scale and offset have {} values for {c} features (need 1 or {c})", self.scale.len()).into()
            );
        }
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let DataMut::F32(y) = out else { return Err(wrong_output()) };
        let per = if self.scale.len() == 1 { usize::MAX } else { self.scale.len() };
        let k = |i: usize| if per == usize::MAX { 0 } else { i % per };
        match x.ins[0] {
            // ORT computes in the input's type: float64 stays float64 until the output.
            Data::F64(v) => {
                for (i, (o, &a)) in y.iter_mut().zip(v).enumerate() {
                    *o = ((a - self.offset[k(i)] as f64) * self.scale[k(i)] as f64) as f32;
                }
            }
            d => with_elems!(d, v => {
                for (i, (o, &a)) in y.iter_mut().zip(v).enumerate() {
                    *o = (a.f32() - self.offset[k(i)]) * self.scale[k(i)];
                }
            }, return Err("Scaler input must be numeric".into())),
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Norm {
    Max,
    L1,
    L2,
}

#[derive(Debug)]
struct Normalizer {
    norm: Norm,
}

pub fn normalizer(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["norm"])?;
    check_inputs(node, 1, 1)?;
    if !numeric_input(input_type(node, 0)) || output_type(node, 0) != dtype::FLOAT {
        return Err(bad_types(node, "float32, float64, int64 or int32 in, float32 out"));
    }
    let norm = match string_attr(node, "norm", "MAX")? {
        "MAX" => Norm::Max,
        "L1" => Norm::L1,
        "L2" => Norm::L2,
        n => return Err(format!("Normalizer norm '{n}' is not MAX, L1 or L2")),
    };
    Ok(Arc::new(Normalizer { norm }))
}

/// |x| and x*x in the input's own type, as ORT computes them.
trait Magnitude: Elem {
    fn abs_f32(self) -> f32;
    fn sq_f32(self) -> f32;
    fn negative(self) -> bool;
}
macro_rules! magnitude {
    ($($t:ty),*) => {$(
        impl Magnitude for $t {
            fn abs_f32(self) -> f32 {
                self.abs_like() as f32
            }
            fn sq_f32(self) -> f32 {
                self.wrapping_mul_like(self) as f32
            }
            fn negative(self) -> bool {
                self < (0 as $t)
            }
        }
    )*};
}
/// `x * y` and `|x|` in the type itself, integers wrapping as C++'s do in practice.
trait WrappingMulLike: Sized {
    fn wrapping_mul_like(self, o: Self) -> Self;
    fn abs_like(self) -> Self;
}
macro_rules! wrapping {
    (float: $($t:ty),*; int: $($i:ty),*) => {
        $(impl WrappingMulLike for $t {
            fn wrapping_mul_like(self, o: Self) -> Self {
                self * o
            }
            fn abs_like(self) -> Self {
                self.abs()
            }
        })*
        $(impl WrappingMulLike for $i {
            fn wrapping_mul_like(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn abs_like(self) -> Self {
                self.wrapping_abs()
            }
        })*
    };
}
wrapping!(float: f32, f64; int: i64, i32);
magnitude!(f32, f64, i64, i32);

impl Normalizer {
    /// Normalizes the `len` elements `offset, offset + step, ...` (one vector along axis 1).
    fn vector<T: Magnitude>(&self, x: &[T], y: &mut [f32], offset: usize, len: usize, step: usize) {
        let idx = (0..len).map(|s| offset + s * step);
        let z = match self.norm {
            Norm::Max => idx.clone().fold(f32::MIN, |m, i| m.max(x[i].f32())),
            Norm::L1 => idx.clone().fold(0.0f32, |s, i| s + x[i].abs_f32()),
            Norm::L2 => idx.clone().fold(0.0f32, |s, i| s + x[i].sq_f32()),
        };
        for i in idx {
            y[i] = if z == 0.0 {
                x[i].f32()
            } else if self.norm == Norm::L2 {
                let r = (x[i].sq_f32() / z).sqrt();
                if x[i].negative() {
                    -r
                } else {
                    r
                }
            } else {
                x[i].f32() / z
            };
        }
    }
}

impl Op for Normalizer {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        // ORT's kernel takes rank 1 and 2 only.
        if x.shapes[0].len() > 2 {
            return Err(format!("the input must be 1-D or 2-D, got rank {}", x.shapes[0].len()).into());
        }
        stride(x.shapes[0])?;
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let DataMut::F32(y) = out else { return Err(wrong_output()) };
        let dims = x.shapes[0];
        let len = stride(dims).map_err(|_| "the input has no dimensions".to_string())?;
        // Along axis 1: vectors `step` apart, `step` of them per block of `len * step`.
        let step: usize = if dims.len() > 1 { dims[2..].iter().product() } else { 1 };
        if len == 0 || step == 0 {
            return Ok(());
        }
        let loops = y.len() / len;
        with_elems!(x.ins[0], v => {
            for n in 0..loops {
                let offset = n % step + (n / step) * len * step;
                self.vector(v, y, offset, len, step);
            }
        }, return Err("Normalizer input must be numeric".into()));
        Ok(())
    }
}

#[derive(Debug)]
struct Binarizer {
    threshold: f32,
}

pub fn binarizer(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["threshold"])?;
    check_inputs(node, 1, 1)?;
    // ORT's CPU kernel is float32 only.
    if input_type(node, 0) != dtype::FLOAT || output_type(node, 0) != dtype::FLOAT {
        return Err(bad_types(node, "float32"));
    }
    Ok(Arc::new(Binarizer { threshold: float_attr(node, "threshold", 1.0)? }))
}

impl Op for Binarizer {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (Data::F32(v), DataMut::F32(y)) = (x.ins[0], out) else { return Err(wrong_output()) };
        if let Some(i) = v.iter().position(|a| a.is_nan()) {
            return Err(format!("input element {i} is NaN"));
        }
        for (o, &a) in y.iter_mut().zip(v) {
            *o = if a > self.threshold { 1.0 } else { 0.0 };
        }
        Ok(())
    }
}

#[derive(Debug)]
enum Imputed {
    F32 { replaced: f32, values: Vec<f32> },
    I64 { replaced: i64, values: Vec<i64> },
}

#[derive(Debug)]
struct Imputer {
    imputed: Imputed,
}

pub fn imputer(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(
        node,
        &["imputed_value_floats", "replaced_value_float", "imputed_value_int64s", "replaced_value_int64"],
    )?;
    check_inputs(node, 1, 1)?;
    let t = input_type(node, 0);
    if !matches!(t, dtype::FLOAT | dtype::INT64) || output_type(node, 0) != t {
        return Err(bad_types(node, "float32 or int64, output of the input's"));
    }
    let floats = floats_attr(node, "imputed_value_floats")?.unwrap_or_default();
    let ints = ints_attr(node, "imputed_value_int64s")?.unwrap_or_default();
    if floats.is_empty() == ints.is_empty() {
        return Err("Imputer needs exactly one of imputed_value_floats and imputed_value_int64s".into());
    }
    let imputed = if t == dtype::FLOAT {
        if floats.is_empty() || node.attr("replaced_value_float").is_none() {
            return Err("a float32 Imputer needs imputed_value_floats and replaced_value_float".into());
        }
        Imputed::F32 { replaced: float_attr(node, "replaced_value_float", 0.0)?, values: floats }
    } else {
        if ints.is_empty() || node.attr("replaced_value_int64").is_none() {
            return Err("an int64 Imputer needs imputed_value_int64s and replaced_value_int64".into());
        }
        Imputed::I64 { replaced: int_attr(node, "replaced_value_int64", 0)?, values: ints }
    };
    Ok(Arc::new(Imputer { imputed }))
}

/// `y = x` with the replaced value (NaN matching NaN) swapped for the imputed value of
/// its column (or the single one).
fn impute<T: Copy + PartialEq>(x: &[T], y: &mut [T], values: &[T], stride: usize, is_replaced: impl Fn(T) -> bool) {
    let per_column = values.len() == stride;
    for (i, (o, &a)) in y.iter_mut().zip(x).enumerate() {
        *o = if is_replaced(a) { values[if per_column { i % stride } else { 0 }] } else { a };
    }
}

impl Op for Imputer {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        stride(x.shapes[0])?;
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let c = stride(x.shapes[0]).map_err(|_| "the input has no dimensions".to_string())?;
        match (&self.imputed, x.ins[0], out) {
            (Imputed::F32 { replaced, values }, Data::F32(v), DataMut::F32(y)) => {
                let r = *replaced;
                impute(v, y, values, c, |a| (a.is_nan() && r.is_nan()) || a == r)
            }
            (Imputed::I64 { replaced, values }, Data::I64(v), DataMut::I64(y)) => {
                impute(v, y, values, c, |a| a == *replaced)
            }
            _ => return Err(wrong_output()),
        }
        Ok(())
    }
}

#[derive(Debug)]
struct ArrayFeatureExtractor;

pub fn array_feature_extractor(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &[])?;
    check_inputs(node, 2, 2)?;
    let t = input_type(node, 0);
    if !numeric_input(t) || output_type(node, 0) != t || input_type(node, 1) != dtype::INT64 {
        return Err(bad_types(node, "float32, float64, int64 or int32 data with int64 indices"));
    }
    Ok(Arc::new(ArrayFeatureExtractor))
}

impl Op for ArrayFeatureExtractor {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        let k: usize = x.shapes[1].iter().product();
        if s.is_empty() {
            return Err("X must have at least one dimension".to_string().into());
        }
        if k == 0 {
            return Err("the indices are empty".to_string().into());
        }
        let mut out = Shape::from_slice(s);
        if s.len() == 1 {
            out = Shape::from_slice(&[1, k]);
        } else {
            *out.last_mut().expect("rank >= 2") = k;
        }
        Ok(out)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let stride = *s.last().ok_or("X has no dimensions")?;
        let Data::I64(idx) = x.ins[1] else { return Err("the indices must be int64".into()) };
        if idx.is_empty() {
            return Err("the indices are empty".into());
        }
        if let Some((i, &v)) = idx.iter().enumerate().find(|(_, &v)| v < 0 || v as u64 >= stride as u64) {
            return Err(format!("index Y[{i}] = {v} is outside 0..{stride}"));
        }
        fn gather<T: Copy>(x: &[T], y: &mut [T], idx: &[i64], stride: usize) {
            for (row, out) in x.chunks_exact(stride).zip(y.chunks_exact_mut(idx.len())) {
                for (o, &j) in out.iter_mut().zip(idx) {
                    *o = row[j as usize];
                }
            }
        }
        match (x.ins[0], out) {
            (Data::F32(v), DataMut::F32(y)) => gather(v, y, idx, stride),
            (Data::F64(v), DataMut::F64(y)) => gather(v, y, idx, stride),
            (Data::I64(v), DataMut::I64(y)) => gather(v, y, idx, stride),
            (Data::I32(v), DataMut::I32(y)) => gather(v, y, idx, stride),
            _ => return Err(wrong_output()),
        }
        Ok(())
    }
}

#[derive(Debug)]
struct OneHotEncoder {
    /// (category, its position), sorted by category; a repeated category keeps its last
    /// position, as ORT's map does.
    cats: Vec<(i64, usize)>,
    count: usize,
    zeros: bool,
}

pub fn one_hot_encoder(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["cats_int64s", "zeros"])?;
    check_inputs(node, 1, 1)?;
    if !matches!(input_type(node, 0), dtype::FLOAT | dtype::DOUBLE | dtype::INT64)
        || output_type(node, 0) != dtype::FLOAT
    {
        return Err(bad_types(node, "float32, float64 or int64 in, float32 out"));
    }
    let list = ints_attr(node, "cats_int64s")?.unwrap_or_default();
    if list.is_empty() {
        return Err("OneHotEncoder needs cats_int64s (string categories are not supported)".into());
    }
    let mut cats: Vec<(i64, usize)> = Vec::with_capacity(list.len());
    for (i, &c) in list.iter().enumerate() {
        match cats.iter_mut().find(|(v, _)| *v == c) {
            Some(e) => e.1 = i,
            None => cats.push((c, i)),
        }
    }
    cats.sort_unstable();
    Ok(Arc::new(OneHotEncoder { cats, count: list.len(), zeros: int_attr(node, "zeros", 1)? != 0 }))
}

/// A float as C++ `static_cast<int64_t>` gives it on x86 (NaN and out of range become
/// the minimum).
fn to_i64(v: f64) -> i64 {
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if v.is_nan() || !(-LIMIT..LIMIT).contains(&v) {
        i64::MIN
    } else {
        v as i64
    }
}

impl Op for OneHotEncoder {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let mut s = Shape::from_slice(x.shapes[0]);
        s.push(self.count);
        Ok(s)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let DataMut::F32(y) = out else { return Err(wrong_output()) };
        y.fill(0.0);
        let n = self.count;
        let mut put = |i: usize, v: i64| -> Result<(), String> {
            match self.cats.binary_search_by_key(&v, |&(c, _)| c) {
                Ok(k) => y[i * n + self.cats[k].1] = 1.0,
                Err(_) if !self.zeros => return Err(format!("element {i} ({v}) is no category and zeros = 0")),
                Err(_) => {}
            }
            Ok(())
        };
        match x.ins[0] {
            Data::I64(v) => v.iter().enumerate().try_for_each(|(i, &a)| put(i, a)),
            Data::F32(v) => v.iter().enumerate().try_for_each(|(i, &a)| put(i, to_i64(a as f64))),
            Data::F64(v) => v.iter().enumerate().try_for_each(|(i, &a)| put(i, to_i64(a))),
            _ => Err("OneHotEncoder input must be float32, float64 or int64".into()),
        }
    }
}
