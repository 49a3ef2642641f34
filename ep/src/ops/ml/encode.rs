//! LabelEncoder (ml opsets 2 to 4) for numeric keys and values: int64 and float32 in
//! either role, float64 to float64 (opset 4), keys and values from the list attributes or
//! opset 4's tensors. String keys or values are not claimed.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;

use super::{floats_attr, ints_attr, refuse_strings, tensor_attr};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::ops::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use crate::ops::{Op, RunIn, ShapeError, ShapeIn};

/// A key or value type: how it is looked up (NaN matches NaN, -0 matches 0, as ORT's
/// map does) and read from attributes.
trait Elem: Copy + Debug + Send + Sync + 'static {
    const CODE: i32;
    fn key(self) -> u64;
    /// The list attribute of this type (`keys_int64s`, `values_floats`, ...), if any.
    fn list(node: &NodeDesc, name: &str) -> Result<Option<Vec<Self>>, String>;
    fn of_data(d: Data<'_>) -> Option<Vec<Self>>;
    fn slice<'a>(d: Data<'a>) -> Option<&'a [Self]>;
    fn slice_mut<'a, 'b>(d: &'b mut DataMut<'a>) -> Option<&'b mut [Self]>;
}

impl Elem for i64 {
    const CODE: i32 = dtype::INT64;
    fn key(self) -> u64 {
        self as u64
    }
    fn list(node: &NodeDesc, name: &str) -> Result<Option<Vec<i64>>, String> {
        ints_attr(node, &format!("{name}_int64s"))
    }
    fn of_data(d: Data<'_>) -> Option<Vec<i64>> {
        d.i64().map(<[i64]>::to_vec)
    }
    fn slice<'a>(d: Data<'a>) -> Option<&'a [i64]> {
        d.i64()
    }
    fn slice_mut<'a, 'b>(d: &'b mut DataMut<'a>) -> Option<&'b mut [i64]> {
        match d {
            DataMut::I64(v) => Some(v),
            _ => None,
        }
    }
}

impl Elem for f32 {
    const CODE: i32 = dtype::FLOAT;
    fn key(self) -> u64 {
        (self as f64).key()
    }
    fn list(node: &NodeDesc, name: &str) -> Result<Option<Vec<f32>>, String> {
        floats_attr(node, &format!("{name}_floats"))
    }
    fn of_data(d: Data<'_>) -> Option<Vec<f32>> {
        d.f32().map(<[f32]>::to_vec)
    }
    fn slice<'a>(d: Data<'a>) -> Option<&'a [f32]> {
        d.f32()
    }
    fn slice_mut<'a, 'b>(d: &'b mut DataMut<'a>) -> Option<&'b mut [f32]> {
        d.f32()
    }
}

impl Elem for f64 {
    const CODE: i32 = dtype::DOUBLE;
    fn key(self) -> u64 {
        if self.is_nan() {
            u64::MAX
        } else if self == 0.0 {
            0
        } else {
            self.to_bits()
        }
    }
    fn list(_node: &NodeDesc, _name: &str) -> Result<Option<Vec<f64>>, String> {
        Ok(None)
    }
    fn of_data(d: Data<'_>) -> Option<Vec<f64>> {
        match d {
            Data::F64(v) => Some(v.to_vec()),
            _ => None,
        }
    }
    fn slice<'a>(d: Data<'a>) -> Option<&'a [f64]> {
        match d {
            Data::F64(v) => Some(v),
            _ => None,
        }
    }
    fn slice_mut<'a, 'b>(d: &'b mut DataMut<'a>) -> Option<&'b mut [f64]> {
        match d {
            DataMut::F64(v) => Some(v),
            _ => None,
        }
    }
}

#[derive(Debug)]
struct LabelEncoder<K, V> {
    map: HashMap<u64, V>,
    default: V,
    _key: std::marker::PhantomData<K>,
}

/// The keys or values: the list attribute, else (opset 4) the tensor.
fn entries<T: Elem>(node: &NodeDesc, name: &str) -> Result<Vec<T>, String> {
    if let Some(v) = T::list(node, name)? {
        return Ok(v);
    }
    if node.since_version >= 4 {
        if let Some(d) = tensor_attr(node, &format!("{name}_tensor"))? {
            return T::of_data(d).ok_or_else(|| format!("'{name}_tensor' has the wrong element type"));
        }
    }
    Err(format!("LabelEncoder has no {name} of its {} type", dtype::name(T::CODE)))
}

fn make<K: Elem, V: Elem>(node: &NodeDesc, default: V) -> Result<Arc<dyn Op>, String> {
    let keys = entries::<K>(node, "keys")?;
    let values = entries::<V>(node, "values")?;
    if keys.len() != values.len() {
        return Err(format!("{} keys and {} values", keys.len(), values.len()));
    }
    let mut map = HashMap::with_capacity(keys.len());
    for (k, v) in keys.into_iter().zip(values) {
        // The first of repeated keys wins.
        map.entry(k.key()).or_insert(v);
    }
    Ok(Arc::new(LabelEncoder::<K, V> { map, default, _key: std::marker::PhantomData }))
}

pub fn label_encoder(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    // ORT fills in default_string (unused by numeric maps).
    refuse_strings(node, &["keys_strings", "values_strings", "classes_strings"])?;
    check_attrs(
        node,
        &[
            "keys_int64s",
            "keys_floats",
            "keys_tensor",
            "values_int64s",
            "values_floats",
            "values_tensor",
            "default_int64",
            "default_float",
            "default_string",
            "default_tensor",
        ],
    )?;
    check_inputs(node, 1, 1)?;
    let v4 = node.since_version >= 4;
    let (kt, vt) = (input_type(node, 0), output_type(node, 0));
    // Opset 4's default_tensor, when it holds one value of the output's type.
    let default_tensor = match tensor_attr(node, "default_tensor")? {
        Some(d) if v4 => {
            if d.len() != 1 || d.elem_type() != vt {
                return Err("default_tensor must hold one value of the output's type".into());
            }
            Some(d)
        }
        _ => None,
    };
    let def_i64 = || -> Result<i64, String> {
        match default_tensor {
            Some(d) => Ok(d.i64().map_or(-1, |v| v[0])),
            None => crate::node_attrs::int_attr(node, "default_int64", -1),
        }
    };
    // ORT's fallback for int64 -> float32 at opset 4 is +0, elsewhere -0.
    let float_fallback = if v4 && kt == dtype::INT64 { 0.0 } else { -0.0 };
    let def_f32 = || -> Result<f32, String> {
        match default_tensor {
            Some(d) => Ok(d.f32().map_or(float_fallback, |v| v[0])),
            None => crate::node_attrs::float_attr(node, "default_float", float_fallback),
        }
    };
    match (kt, vt) {
        (dtype::INT64, dtype::INT64) => make::<i64, i64>(node, def_i64()?),
        (dtype::INT64, dtype::FLOAT) => make::<i64, f32>(node, def_f32()?),
        (dtype::FLOAT, dtype::INT64) => make::<f32, i64>(node, def_i64()?),
        (dtype::FLOAT, dtype::FLOAT) => make::<f32, f32>(node, def_f32()?),
        (dtype::DOUBLE, dtype::DOUBLE) if v4 => {
            let d = match default_tensor {
                Some(Data::F64(v)) => v[0],
                _ => crate::node_attrs::float_attr(node, "default_float", -0.0)? as f64,
            };
            make::<f64, f64>(node, d)
        }
        _ => Err(bad_types(node, "int64 or float32 keys and values (float64 to float64 at opset 4)")),
    }
}

impl<K: Elem, V: Elem> Op for LabelEncoder<K, V> {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let keys = K::slice(x.ins[0]).ok_or("the input's element type differs from the plan's")?;
        let y = V::slice_mut(out).ok_or("the output's element type differs from the plan's")?;
        for (o, &k) in y.iter_mut().zip(keys) {
            *o = self.map.get(&k.key()).copied().unwrap_or(self.default);
        }
        Ok(())
    }
}
