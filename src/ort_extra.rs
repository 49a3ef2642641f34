//! The few ORT C API calls the `ort` crate does not wrap: graph assignment info and
//! unregistering an EP library. The harness's only `unsafe`.

use std::ffi::{CStr, CString};
use std::ptr;

use ort::AsPointer;

fn check(status: ort_sys::OrtStatusPtr) -> Result<(), String> {
    if status.0.is_null() {
        return Ok(());
    }
    let api = ort::api();
    // SAFETY: a non-null status from ORT; read its message, then release it once.
    let msg = unsafe { CStr::from_ptr((api.GetErrorMessage)(status.0)) }.to_string_lossy().into_owned();
    // SAFETY: as above.
    unsafe { (api.ReleaseStatus)(status.0) };
    Err(msg)
}

fn string(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: ORT returns NUL-terminated strings owned by the session.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// (EP name, node name, op type) for every node, from ORT's graph assignment info. The
/// session must have been created with `session.record_ep_graph_assignment_info=1`.
pub fn graph_assignment(session: &ort::session::Session) -> Result<Vec<(String, String, String)>, String> {
    let api = ort::api();
    let mut subgraphs: *const *const ort_sys::OrtEpAssignedSubgraph = ptr::null();
    let mut n = 0usize;
    // SAFETY: a live session; ORT fills an array it owns.
    check(unsafe { (api.Session_GetEpGraphAssignmentInfo)(session.ptr(), &mut subgraphs, &mut n) })?;
    let mut out = Vec::new();
    for i in 0..n {
        // SAFETY: ORT returned `n` subgraph pointers.
        let sg = unsafe { *subgraphs.add(i) };
        let mut ep = ptr::null();
        // SAFETY: valid subgraph.
        check(unsafe { (api.EpAssignedSubgraph_GetEpName)(sg, &mut ep) })?;
        let ep = string(ep);
        let mut nodes: *const *const ort_sys::OrtEpAssignedNode = ptr::null();
        let mut m = 0usize;
        // SAFETY: valid subgraph.
        check(unsafe { (api.EpAssignedSubgraph_GetNodes)(sg, &mut nodes, &mut m) })?;
        for j in 0..m {
            // SAFETY: ORT returned `m` node pointers.
            let node = unsafe { *nodes.add(j) };
            let (mut name, mut op) = (ptr::null(), ptr::null());
            // SAFETY: valid node.
            check(unsafe { (api.EpAssignedNode_GetName)(node, &mut name) })?;
            // SAFETY: valid node.
            check(unsafe { (api.EpAssignedNode_GetOperatorType)(node, &mut op) })?;
            out.push((ep.clone(), string(name), string(op)));
        }
    }
    Ok(out)
}

/// Unregisters an EP library registered with `Environment::register_ep_library`.
pub fn unregister_ep_library(env: &ort::environment::Environment, name: &str) -> Result<(), String> {
    let name = CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: a live environment and a NUL-terminated name.
    check(unsafe { (ort::api().UnregisterExecutionProviderLibrary)(env.ptr().cast_mut(), name.as_ptr()) })
}

/// A float32 output copied out of ORT.
#[derive(Clone, Debug, PartialEq)]
pub struct RawOutput {
    pub shape: Vec<i64>,
    pub data: Vec<f32>,
}

/// Runs a session through the C API with `&Session`, so several threads can run one
/// session at once (ORT allows concurrent Run calls; the `ort` crate's `run` takes
/// `&mut`). Outputs must be float32.
pub fn run_shared(
    session: &ort::session::Session,
    inputs: &[(&str, &ort::value::DynValue)],
    outputs: &[&str],
) -> Result<Vec<RawOutput>, String> {
    let api = ort::api();
    let in_names: Vec<CString> =
        inputs.iter().map(|(n, _)| CString::new(*n).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    let out_names: Vec<CString> =
        outputs.iter().map(|n| CString::new(*n).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    let in_name_ptrs: Vec<*const std::ffi::c_char> = in_names.iter().map(|c| c.as_ptr()).collect();
    let out_name_ptrs: Vec<*const std::ffi::c_char> = out_names.iter().map(|c| c.as_ptr()).collect();
    let in_values: Vec<*const ort_sys::OrtValue> = inputs.iter().map(|(_, v)| v.ptr()).collect();
    let mut out_values: Vec<*mut ort_sys::OrtValue> = vec![ptr::null_mut(); outputs.len()];
    // SAFETY: a live session; name and value arrays of the given lengths that outlive the call.
    check(unsafe {
        (api.Run)(
            session.ptr().cast_mut(),
            ptr::null(),
            in_name_ptrs.as_ptr(),
            in_values.as_ptr(),
            in_values.len(),
            out_name_ptrs.as_ptr(),
            out_name_ptrs.len(),
            out_values.as_mut_ptr(),
        )
    })?;
    let mut result = Vec::with_capacity(outputs.len());
    let mut failure = None;
    for &v in &out_values {
        if failure.is_none() {
            match read_f32(v) {
                Ok(o) => result.push(o),
                Err(e) => failure = Some(e),
            }
        }
        // SAFETY: ORT created each output value for us; released once.
        unsafe { (api.ReleaseValue)(v) };
    }
    failure.map_or(Ok(result), Err)
}

fn read_f32(v: *mut ort_sys::OrtValue) -> Result<RawOutput, String> {
    let api = ort::api();
    let mut elem = ort_sys::ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    let (mut dims, mut count): (*const i64, usize) = (ptr::null(), 0);
    // SAFETY: an output tensor ORT returned.
    check(unsafe { (api.GetTensorElementTypeAndShapeDataReference)(v, &mut elem, &mut dims, &mut count) })?;
    if elem != ort_sys::ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT {
        return Err(format!("output is {elem:?}, not float32"));
    }
    // SAFETY: `count` dims owned by the value (none for a scalar, whose pointer may be null).
    let shape = if count == 0 { Vec::new() } else { unsafe { std::slice::from_raw_parts(dims, count) }.to_vec() };
    let len: i64 = shape.iter().product();
    let mut data = ptr::null_mut();
    // SAFETY: as above.
    check(unsafe { (api.GetTensorMutableData)(v, &mut data) })?;
    // SAFETY: a float32 tensor of `len` elements.
    let data = if len == 0 {
        Vec::new()
    } else {
        unsafe { std::slice::from_raw_parts(data.cast::<f32>(), len as usize) }.to_vec()
    };
    Ok(RawOutput { shape, data })
}
