//! Reads ORT's graph objects into Rivet's owned `GraphDesc`.

use std::collections::HashSet;
use std::ffi::{c_char, CStr};
use std::ptr;

use ort_sys::{ONNXType, OrtGraph, OrtNode, OrtOpAttrType, OrtValueInfo};
use smallvec::SmallVec;

use super::api::Api;
use crate::error::{Error, Result};
use crate::graph::{dtype, AttrValue, ConstDesc, Constant, Dim, GraphDesc, NodeDesc, Shape, ValueDesc, SMALL_CONSTANT};

/// Reads a value's name and declared tensor type; a null value info is an omitted input.
pub fn value(api: &Api, v: *const OrtValueInfo) -> Result<Option<ValueDesc>> {
    value_reading(api, v, Reading::Small)
}

/// Which constants' data a value read brings along.
#[derive(Clone, Copy, PartialEq)]
enum Reading {
    /// float32, int64 and int32 of at most `SMALL_CONSTANT` elements.
    Small,
    /// Also uint8 and int8 (as int64), and up to `QUANT_PARAMS` elements: the scales and
    /// zero points of QuantizeLinear and DequantizeLinear, which QDQ fusion compares.
    QuantParams,
}

/// Most elements of a quantization parameter read with the graph (one per channel).
const QUANT_PARAMS: usize = 1 << 14;

fn value_reading(api: &Api, v: *const OrtValueInfo, reading: Reading) -> Result<Option<ValueDesc>> {
    if v.is_null() {
        return Ok(None);
    }
    let name = api.value_info_name(v)?;
    if name.is_empty() {
        return Ok(None);
    }
    let type_info = api.value_info_type_info(v)?;
    if type_info.is_null() || api.type_info_onnx_type(type_info)? != ONNXType::ONNX_TYPE_TENSOR {
        return Ok(Some(ValueDesc { name, elem_type: 0, dims: None, constant: None, at_run_ok: false }));
    }
    let t = api.type_info_tensor_info(type_info)?;
    let elem_type = api.tensor_info_element_type(t)?;
    if !api.tensor_info_has_shape(t) {
        // Unknown rank: not the same as a scalar (rank 0 with a shape).
        return Ok(Some(ValueDesc { name, elem_type, dims: None, constant: None, at_run_ok: false }));
    }
    let rank = api.tensor_info_rank(t)?;
    let mut dims = vec![0i64; rank];
    api.tensor_info_dims(t, &mut dims)?;
    let mut symbols: Vec<*const c_char> = vec![ptr::null(); rank];
    api.tensor_info_symbolic_dims(t, &mut symbols)?;
    let declared: crate::graph::DeclaredShape = dims
        .iter()
        .zip(&symbols)
        .map(|(&d, &s)| {
            if d >= 0 {
                Dim::Fixed(d as usize)
            } else if s.is_null() {
                Dim::Symbolic(String::new())
            } else {
                // SAFETY: ORT's symbolic dim names are NUL-terminated and live with the type info.
                Dim::Symbolic(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
            }
        })
        .collect();
    let constant = small_constant(api, v, elem_type, &declared, reading)?;
    // Only int64 and int32 values are asked: they may be a shape, axis or count fed at Run.
    let at_run_ok = matches!(elem_type, dtype::INT64 | dtype::INT32) && !api.value_info_is_from_outer_scope(v)?;
    Ok(Some(ValueDesc { name, elem_type, dims: Some(declared), constant, at_run_ok }))
}

/// The data of a small constant initializer of f32, i64 or i32 (read as i64) elements
/// (with `Reading::QuantParams`, also u8 and i8, and larger).
fn small_constant(
    api: &Api,
    v: *const OrtValueInfo,
    elem_type: i32,
    dims: &[Dim],
    reading: Reading,
) -> Result<Option<Constant>> {
    let len = dims.iter().try_fold(1usize, |acc, d| match d {
        Dim::Fixed(n) => acc.checked_mul(*n),
        Dim::Symbolic(_) => None,
    });
    let (most, bytes) = match reading {
        Reading::Small => (SMALL_CONSTANT, false),
        Reading::QuantParams => (QUANT_PARAMS, true),
    };
    let Some(len) = len.filter(|&n| n <= most) else { return Ok(None) };
    let readable = matches!(elem_type, dtype::FLOAT | dtype::INT64 | dtype::INT32)
        || (bytes && matches!(elem_type, dtype::UINT8 | dtype::INT8));
    if !readable || !api.value_info_is_constant_initializer(v)? {
        return Ok(None);
    }
    let value = api.value_info_initializer_value(v)?;
    if value.is_null() {
        return Ok(None);
    }
    if len == 0 {
        return Ok(Some(if elem_type == dtype::FLOAT { Constant::F32(vec![]) } else { Constant::I64(vec![]) }));
    }
    let p = api.tensor_data(value)?;
    // SAFETY: an initializer of `len` elements of the declared type, alive for this call.
    Ok(Some(unsafe {
        match elem_type {
            dtype::FLOAT => Constant::F32(std::slice::from_raw_parts(p.cast::<f32>(), len).to_vec()),
            dtype::INT64 => Constant::I64(std::slice::from_raw_parts(p.cast::<i64>(), len).to_vec()),
            dtype::UINT8 => {
                Constant::I64(std::slice::from_raw_parts(p.cast::<u8>(), len).iter().map(|&v| v as i64).collect())
            }
            dtype::INT8 => {
                Constant::I64(std::slice::from_raw_parts(p.cast::<i8>(), len).iter().map(|&v| v as i64).collect())
            }
            _ => Constant::I64(std::slice::from_raw_parts(p.cast::<i32>(), len).iter().map(|&v| v as i64).collect()),
        }
    }))
}

fn values(api: &Api, infos: &[*const OrtValueInfo]) -> Result<Vec<Option<ValueDesc>>> {
    infos.iter().map(|&v| value(api, v)).collect()
}

fn read_bytes(api: &Api, a: *const ort_sys::OrtOpAttr, t: OrtOpAttrType) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; 64];
    let size = api.read_op_attr(a, t, &mut buf)?;
    if size > buf.len() {
        buf.resize(size, 0);
        api.read_op_attr(a, t, &mut buf)?;
    }
    buf.truncate(size);
    Ok(buf)
}

fn attribute(api: &Api, a: *const ort_sys::OrtOpAttr) -> Result<(String, AttrValue)> {
    let name = api.op_attr_name(a)?;
    let t = api.op_attr_type(a)?;
    let value = match t {
        OrtOpAttrType::ORT_OP_ATTR_INT => {
            let b = read_bytes(api, a, t)?;
            AttrValue::Int(i64::from_ne_bytes(
                b.get(..8).and_then(|s| s.try_into().ok()).ok_or_else(|| Error::ort("short int attribute"))?,
            ))
        }
        OrtOpAttrType::ORT_OP_ATTR_FLOAT => {
            let b = read_bytes(api, a, t)?;
            AttrValue::Float(f32::from_ne_bytes(
                b.get(..4).and_then(|s| s.try_into().ok()).ok_or_else(|| Error::ort("short float attribute"))?,
            ))
        }
        OrtOpAttrType::ORT_OP_ATTR_STRING => {
            let b = read_bytes(api, a, t)?;
            let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
            AttrValue::String(String::from_utf8_lossy(&b[..end]).into_owned())
        }
        OrtOpAttrType::ORT_OP_ATTR_INTS => {
            let b = read_bytes(api, a, t)?;
            AttrValue::Ints(b.chunks_exact(8).map(|c| i64::from_ne_bytes(c.try_into().expect("8 bytes"))).collect())
        }
        OrtOpAttrType::ORT_OP_ATTR_FLOATS => {
            let b = read_bytes(api, a, t)?;
            AttrValue::Floats(b.chunks_exact(4).map(|c| f32::from_ne_bytes(c.try_into().expect("4 bytes"))).collect())
        }
        OrtOpAttrType::ORT_OP_ATTR_TENSOR => {
            let v = api.op_attr_tensor(a)?;
            let read = || -> Result<AttrValue> {
                let (elem, dims) = api.tensor_type_and_shape_ref(v)?;
                let shape: Shape = dims.iter().map(|&d| d.max(0) as usize).collect();
                let len: usize = shape.iter().product();
                let Some(size) = crate::data::ort_bytes(elem, len) else { return Ok(AttrValue::Other) };
                let bytes: &[u8] = if len == 0 {
                    &[]
                } else {
                    let p = api.tensor_data(v)?.cast::<u8>();
                    // SAFETY: the attribute's tensor of `len` elements, `size` bytes, alive
                    // until it is released below.
                    unsafe { std::slice::from_raw_parts(p, size) }
                };
                let buf = crate::data::Buf::from_ort_bytes(elem, bytes, len).expect("a held type");
                Ok(AttrValue::Tensor(shape, buf))
            };
            let value = read();
            api.release_value(v);
            value?
        }
        // NUL-terminated strings one after another; a list ORT cannot hand over is one
        // Rivet does not accept.
        OrtOpAttrType::ORT_OP_ATTR_STRINGS => match read_bytes(api, a, t) {
            Ok(b) => {
                let b = b.strip_suffix(&[0]).unwrap_or(&b);
                let list = if b.is_empty() { Vec::new() } else { b.split(|&c| c == 0).collect() };
                AttrValue::Strings(list.into_iter().map(|s| String::from_utf8_lossy(s).into_owned()).collect())
            }
            Err(_) => AttrValue::Other,
        },
        _ => AttrValue::Other,
    };
    Ok((name, value))
}

/// Reads one node.
pub fn node(api: &Api, n: *const OrtNode) -> Result<NodeDesc> {
    let mut inputs = vec![ptr::null(); api.node_num_inputs(n)?];
    api.node_inputs(n, &mut inputs)?;
    let mut outputs = vec![ptr::null(); api.node_num_outputs(n)?];
    api.node_outputs(n, &mut outputs)?;
    let mut attrs = vec![ptr::null(); api.node_num_attributes(n)?];
    api.node_attributes(n, &mut attrs)?;
    let (op_type, domain) = (api.node_op_type(n)?, api.node_domain(n)?);
    let mut read = values(api, &inputs)?;
    // A QuantizeLinear's or DequantizeLinear's scale and zero point: with their data
    // where they are constant, for QDQ fusion to compare.
    if matches!(op_type.as_str(), "QuantizeLinear" | "DequantizeLinear") && matches!(domain.as_str(), "" | "ai.onnx") {
        for k in 1..inputs.len().min(3) {
            read[k] = value_reading(api, inputs[k], Reading::QuantParams)?;
        }
    }
    Ok(NodeDesc {
        name: api.node_name(n)?,
        op_type,
        domain,
        since_version: api.node_since_version(n)?,
        inputs: read,
        outputs: values(api, &outputs)?,
        attrs: attrs.iter().map(|&a| attribute(api, a)).collect::<Result<_>>()?,
    })
}

/// Reads a graph's nodes, with the `OrtNode` pointers in the same order.
pub fn nodes(api: &Api, g: *const OrtGraph) -> Result<(Vec<*const OrtNode>, Vec<NodeDesc>)> {
    let mut ptrs = vec![ptr::null(); api.graph_num_nodes(g)?];
    api.graph_nodes(g, &mut ptrs)?;
    let descs = ptrs.iter().map(|&n| node(api, n)).collect::<Result<_>>()?;
    Ok((ptrs, descs))
}

/// Reads a fused subgraph: its nodes, the fused node's inputs and outputs in order, and
/// the constant initializers the nodes read that are not among the fused inputs.
///
/// A constant initializer is read from the reading node's own value info, whatever its
/// size: ORT finds its data in this graph or in an enclosing one (an If branch reading the
/// outer graph's weight: `ValueInfo_GetInitializerValue` looks in the outer scope, and with
/// `drop_constant_initializers` such a value is no input of the fused node).
pub fn fused_graph(api: &Api, g: *const OrtGraph, fused: *const OrtNode) -> Result<(String, GraphDesc)> {
    let name = api.node_name(fused)?;
    let (ptrs, nodes) = nodes(api, g)?;
    let fused_desc = node(api, fused)?;
    let inputs: Vec<ValueDesc> = fused_desc.inputs.into_iter().flatten().collect();
    let outputs: Vec<ValueDesc> = fused_desc.outputs.into_iter().flatten().collect();

    let mut known: HashSet<String> = inputs
        .iter()
        .map(|v| v.name.clone())
        .chain(nodes.iter().flat_map(|n| n.outputs.iter().flatten().map(|v| v.name.clone())))
        .collect();
    let mut constants = Vec::new();
    for &n in &ptrs {
        let mut infos = vec![ptr::null(); api.node_num_inputs(n)?];
        api.node_inputs(n, &mut infos)?;
        for vi in infos {
            if vi.is_null() {
                continue;
            }
            let vname = api.value_info_name(vi)?;
            if vname.is_empty() || known.contains(&vname) || !api.value_info_is_constant_initializer(vi)? {
                continue;
            }
            // Any type Rivet holds; nodes reading other types are never claimed.
            if let Some(c) = constant(api, vi, vname.clone())? {
                constants.push(c);
            }
            known.insert(vname);
        }
    }
    // The constant initializers among the fused inputs: the same data every Run.
    let mut constant_names: HashSet<String> = HashSet::new();
    let mut inits = vec![ptr::null(); api.graph_num_initializers(g)?];
    api.graph_initializers(g, &mut inits)?;
    for &vi in &inits {
        if api.value_info_is_constant_initializer(vi)? {
            constant_names.insert(api.value_info_name(vi)?);
        }
    }
    let constant_inputs = inputs.iter().map(|v| constant_names.contains(&v.name)).collect();
    Ok((name, GraphDesc { nodes, inputs, constant_inputs, outputs, constants }))
}

fn constant(api: &Api, vi: *const OrtValueInfo, name: String) -> Result<Option<ConstDesc>> {
    let v = api.value_info_initializer_value(vi)?;
    if v.is_null() {
        return Err(Error::ort(format_args!("constant initializer '{name}' has no value")));
    }
    let (elem, dims) = api.tensor_type_and_shape_ref(v)?;
    let shape: SmallVec<[usize; 8]> = dims.iter().map(|&d| d.max(0) as usize).collect();
    let len: usize = shape.iter().product();
    // Types Rivet does not hold (strings, 2-bit types, 4-bit floats) are never claimed.
    let Some(size) = crate::data::ort_bytes(elem, len) else { return Ok(None) };
    let bytes: &[u8] = if len == 0 {
        &[]
    } else {
        let p = api.tensor_data(v)?.cast::<u8>();
        // SAFETY: an initializer of `len` elements, `size` bytes; ORT keeps it alive for Compile.
        unsafe { std::slice::from_raw_parts(p, size) }
    };
    let data = crate::data::Buf::from_ort_bytes(elem, bytes, len).expect("a supported type");
    Ok(Some(ConstDesc { name, shape, data }))
}
