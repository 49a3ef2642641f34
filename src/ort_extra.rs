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
