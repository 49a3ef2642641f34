//! Control flow (If, Loop, Scan) through ORT's kernel-registry path (OrtEpApi of 1.24).
//!
//! A compiled (fused) node cannot hold ORT-partitioned subgraphs: ORT partitions the
//! bodies of If/Loop/Scan before the enclosing graph, so by the time Rivet sees the
//! control-flow node its bodies are already Rivet's fused nodes, opaque to Rivet. What
//! the plugin API offers instead is `OrtEpApi::CreateIfKernel` / `CreateLoopKernel` /
//! `CreateScanKernel`: ORT's own control-flow logic as a kernel of the EP's registry, which
//! runs each body through its session state (where Rivet's fused nodes run the compute).
//! Rivet registers those three kernels and claims a control-flow node (as a single node)
//! only when every node of every body is already Rivet's.

use std::ffi::{c_void, CStr};
use std::ptr;

use ort_sys::{OrtGraph, OrtKernelInfo, OrtNode, OrtStatus, OrtValue};
use smallvec::SmallVec;

use super::api::Api;
use super::structs::{
    OrtEpGraphSupportInfo, OrtKernelImpl, OrtKernelRegistry, OrtLoopKernelHelper, OrtScanKernelHelper,
    EP_TABLE_VERSION_24,
};
use super::{factory::EP_NAME, guard, read};
use crate::error::{Error, Result};
use crate::graph::NodeDesc;

/// One registered control-flow op: op type, the opsets its schema changed in (one kernel
/// def per range: ORT matches a def ending at `i32::MAX` only to a node of exactly its
/// first opset), which inputs ORT reads on the host (the condition, the trip count), and
/// the schema's type parameters.
struct Registration {
    op: &'static CStr,
    versions: &'static [i32],
    host_inputs: &'static [usize],
    types: &'static [(&'static CStr, Types)],
    create: super::structs::KernelCreateFn,
}

#[derive(Clone, Copy)]
enum Types {
    Bool,
    Int64,
    /// Every tensor type Rivet holds (the bodies' values).
    Held,
}

use ort_sys::ONNXTensorElementDataType as E;

/// The tensor types Rivet holds (a body's values are Rivet's fused nodes' inputs and outputs).
const HELD: &[E] = &[
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FNUZ,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2,
    E::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2FNUZ,
];

const REGISTRATIONS: &[Registration] = &[
    Registration {
        op: c"If",
        versions: &[1, 11, 13, 16, 19, 21, 23, 24, 25],
        host_inputs: &[0],
        types: &[(c"B", Types::Bool), (c"V", Types::Held)],
        create: create_if,
    },
    Registration {
        op: c"Loop",
        versions: &[1, 11, 13, 16, 19, 21, 23, 24, 25],
        host_inputs: &[0, 1],
        types: &[(c"I", Types::Int64), (c"B", Types::Bool), (c"V", Types::Held)],
        create: create_loop,
    },
    // Scan-8 (batch axis, sequence_lens) is another op: ORT's plugin Scan kernel is opset 9+.
    Registration {
        op: c"Scan",
        versions: &[9, 11, 16, 19, 21, 23, 24, 25],
        host_inputs: &[],
        types: &[(c"V", Types::Held)],
        create: create_scan,
    },
];

/// Rivet's kernel registry: ORT's control-flow kernels under Rivet's name.
pub(super) struct ControlFlowKernels {
    registry: *mut OrtKernelRegistry,
    /// The create functions' state: a stable address for as long as the registry.
    api: Box<Api>,
}

impl ControlFlowKernels {
    /// The registry, or `None` on a runtime older than 1.24 (no kernel-registry API).
    pub(super) fn create(api: Api) -> Result<Option<ControlFlowKernels>> {
        if api.version() < EP_TABLE_VERSION_24 {
            return Ok(None);
        }
        let api = Box::new(api);
        let registry = api.create_kernel_registry()?;
        let kernels = ControlFlowKernels { registry, api };
        for r in REGISTRATIONS {
            for (k, &start) in r.versions.iter().enumerate() {
                let end = r.versions.get(k + 1).map_or(i32::MAX, |next| next - 1);
                kernels.register(r, start, end)?;
            }
        }
        Ok(Some(kernels))
    }

    fn register(&self, r: &Registration, start: i32, end: i32) -> Result<()> {
        let api = &*self.api;
        let b = api.create_kernel_def_builder()?;
        let built = (|| {
            api.kernel_def_builder_set_operator_type(b, r.op)?;
            api.kernel_def_builder_set_domain(b, c"")?;
            api.kernel_def_builder_set_since_version(b, start, end)?;
            api.kernel_def_builder_set_execution_provider(b, EP_NAME)?;
            for &(name, types) in r.types {
                let elems: &[E] = match types {
                    Types::Bool => &[E::ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL],
                    Types::Int64 => &[E::ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64],
                    Types::Held => HELD,
                };
                let list = elems.iter().map(|&e| api.tensor_data_type(e)).collect::<Result<Vec<_>>>()?;
                api.kernel_def_builder_add_type_constraint(b, name, &list)?;
            }
            for &i in r.host_inputs {
                api.kernel_def_builder_set_input_mem_type(b, i, ort_sys::OrtMemType::OrtMemTypeCPUInput)?;
            }
            api.kernel_def_builder_build(b)
        })();
        api.release_kernel_def_builder(b);
        let def = built?;
        // The table's layout, checked against the running library: the def reads back
        // what was built (entries 21..=37 of OrtEpApi).
        let read_back = (
            api.kernel_def_operator_type(def).unwrap_or_default(),
            api.kernel_def_execution_provider(def).unwrap_or_default(),
        );
        let versions = api.kernel_def_since_version(def);
        let want = (r.op.to_string_lossy().into_owned(), EP_NAME.to_string_lossy().into_owned());
        if read_back != want || !matches!(versions, Ok(v) if v == (start, end)) {
            api.release_kernel_def(def);
            return Err(Error::ep(format_args!(
                "OrtEpApi layout mismatch: kernel def for {:?} reads back as {read_back:?} {versions:?}",
                r.op
            )));
        }
        let state = (&*self.api as *const Api).cast_mut().cast::<c_void>();
        let added = api.kernel_registry_add_kernel(self.registry, def, r.create, state);
        api.release_kernel_def(def);
        added
    }

    pub(super) fn registry(&self) -> *const OrtKernelRegistry {
        self.registry
    }
}

impl Drop for ControlFlowKernels {
    fn drop(&mut self) {
        self.api.release_kernel_registry(self.registry);
    }
}

/// Whether Rivet claims this control-flow node: ORT's kernel for it is in Rivet's
/// registry, its inputs and outputs are tensors, and every node of every body already
/// runs on Rivet (so the node's compute is Rivet's; ORT's kernel only sequences it).
/// `Err` says why not.
pub(super) fn claimable(
    api: &Api,
    info: *mut OrtEpGraphSupportInfo,
    node: *const OrtNode,
    desc: &NodeDesc,
) -> std::result::Result<(), String> {
    let check = || -> Result<std::result::Result<(), String>> {
        if !REGISTRATIONS.iter().any(|r| r.op.to_bytes() == desc.op_type.as_bytes()) || !desc.domain.is_empty() {
            return Ok(Err("not a control-flow op".into()));
        }
        if api.look_up_kernel(info, node)?.is_null() {
            return Ok(Err(format!("no kernel of opset {} in Rivet's registry", desc.since_version)));
        }
        if let Some(v) = desc.inputs.iter().chain(&desc.outputs).flatten().find(|v| v.elem_type == 0) {
            return Ok(Err(format!("'{}' is not a tensor (sequences and optionals are not held)", v.name)));
        }
        let mut graphs = vec![ptr::null(); api.node_num_subgraphs(node)?];
        let mut names = vec![ptr::null(); graphs.len()];
        api.node_subgraphs(node, &mut graphs, &mut names)?;
        for &g in &graphs {
            if let Some(why) = body_not_on_rivet(api, g)? {
                return Ok(Err(why));
            }
        }
        Ok(Ok(()))
    };
    check().unwrap_or_else(|e| Err(e.message))
}

fn body_not_on_rivet(api: &Api, g: *const OrtGraph) -> Result<Option<String>> {
    let (ptrs, nodes) = read::nodes(api, g)?;
    for (&p, n) in ptrs.iter().zip(&nodes) {
        let owner = api.node_ep_name(p)?;
        if owner != "Rivet" {
            let on = if owner.is_empty() { "no EP".to_string() } else { owner };
            return Ok(Some(format!("its body's node '{}' ({}) runs on {on}, not Rivet", n.name, n.op_type)));
        }
    }
    Ok(None)
}

fn api_of<'a>(state: *mut c_void) -> &'a Api {
    // SAFETY: the state registered with every kernel is the registry's boxed `Api`, alive
    // as long as the registry (ORT creates kernels only while the EP lives).
    unsafe { &*state.cast::<Api>() }
}

unsafe extern "system" fn create_if(
    state: *mut c_void,
    info: *const OrtKernelInfo,
    out: *mut *mut OrtKernelImpl,
) -> *mut OrtStatus {
    let api = api_of(state);
    guard(api, "CreateIfKernel", || {
        let k = api.create_if_kernel(info)?;
        // SAFETY: ORT passes a valid out slot.
        unsafe { *out = k };
        Ok(())
    })
}

unsafe extern "system" fn create_loop(
    state: *mut c_void,
    info: *const OrtKernelInfo,
    out: *mut *mut OrtKernelImpl,
) -> *mut OrtStatus {
    let api = api_of(state);
    guard(api, "CreateLoopKernel", || {
        let helper = Box::into_raw(Box::new(LoopHelper {
            base: OrtLoopKernelHelper {
                ort_version_supported: EP_TABLE_VERSION_24,
                release: loop_release,
                concat_output,
            },
            api: *api,
        }));
        match api.create_loop_kernel(info, helper.cast()) {
            Ok(k) => {
                // SAFETY: ORT passes a valid out slot.
                unsafe { *out = k };
                Ok(())
            }
            Err(e) => {
                // SAFETY: not taken by ORT on an error: still ours.
                drop(unsafe { Box::from_raw(helper) });
                Err(e)
            }
        }
    })
}

unsafe extern "system" fn create_scan(
    state: *mut c_void,
    info: *const OrtKernelInfo,
    out: *mut *mut OrtKernelImpl,
) -> *mut OrtStatus {
    let api = api_of(state);
    guard(api, "CreateScanKernel", || {
        let helper = Box::into_raw(Box::new(ScanHelper {
            base: OrtScanKernelHelper { ort_version_supported: EP_TABLE_VERSION_24, release: scan_release, transpose },
            api: *api,
        }));
        match api.create_scan_kernel(info, helper.cast()) {
            Ok(k) => {
                // SAFETY: ORT passes a valid out slot.
                unsafe { *out = k };
                Ok(())
            }
            Err(e) => {
                // SAFETY: not taken by ORT on an error: still ours.
                drop(unsafe { Box::from_raw(helper) });
                Err(e)
            }
        }
    })
}

#[repr(C)]
struct LoopHelper {
    base: OrtLoopKernelHelper,
    api: Api,
}

#[repr(C)]
struct ScanHelper {
    base: OrtScanKernelHelper,
    api: Api,
}

unsafe extern "system" fn loop_release(this: *mut OrtLoopKernelHelper) {
    if !this.is_null() {
        // SAFETY: made by Box::into_raw in `create_loop`; `base` is the first field.
        drop(unsafe { Box::from_raw(this.cast::<LoopHelper>()) });
    }
}

unsafe extern "system" fn scan_release(this: *mut OrtScanKernelHelper) {
    if !this.is_null() {
        // SAFETY: made by Box::into_raw in `create_scan`; `base` is the first field.
        drop(unsafe { Box::from_raw(this.cast::<ScanHelper>()) });
    }
}

/// Axes on the stack: the helpers run every iteration and allocate nothing (up to rank 8).
type Axes = SmallVec<[usize; 8]>;

/// A tensor's bytes, borrowed for the callback.
fn tensor_bytes<'a>(api: &Api, v: *const OrtValue) -> Result<(&'a [u8], Axes, usize)> {
    let (elem, dims) = api.tensor_type_and_shape_ref(v)?;
    let size = crate::data::elem_size(elem).ok_or_else(|| Error::ep("a tensor of a type Rivet does not hold"))?;
    let shape: Axes = dims.iter().map(|&d| d.max(0) as usize).collect();
    let len = shape.iter().try_fold(size, |a, &d| a.checked_mul(d)).ok_or_else(|| Error::ep("tensor too large"))?;
    if len == 0 {
        return Ok((&[], shape, size));
    }
    let p = api.tensor_data(v)?.cast::<u8>();
    // SAFETY: a tensor of `len` bytes that ORT keeps alive for this callback.
    Ok((unsafe { std::slice::from_raw_parts(p, len) }, shape, size))
}

/// Loop's scan outputs: the per-iteration tensors, one after another, into `output`.
unsafe extern "system" fn concat_output(
    this: *mut OrtLoopKernelHelper,
    _stream: *mut c_void,
    per_iteration: *const *const OrtValue,
    count: usize,
    output: *mut c_void,
    output_bytes: usize,
) -> *mut OrtStatus {
    // SAFETY: ORT passes back the helper made in `create_loop`.
    let api = unsafe { &(*this.cast::<LoopHelper>()).api };
    guard(api, "Loop ConcatOutput", || {
        if output_bytes == 0 {
            return Ok(());
        }
        if output.is_null() || (count > 0 && per_iteration.is_null()) {
            return Err(Error::ep("Loop ConcatOutput: null buffers"));
        }
        // SAFETY: ORT passes `count` values and an output of `output_bytes` bytes.
        let (values, out) = unsafe {
            (
                std::slice::from_raw_parts(per_iteration, count),
                std::slice::from_raw_parts_mut(output.cast::<u8>(), output_bytes),
            )
        };
        let mut at = 0usize;
        for &v in values {
            let (bytes, _, _) = tensor_bytes(api, v)?;
            let end = at.checked_add(bytes.len()).filter(|&e| e <= out.len());
            let end = end.ok_or_else(|| Error::ep("Loop ConcatOutput: the iterations exceed the output"))?;
            out[at..end].copy_from_slice(bytes);
            at = end;
        }
        if at != out.len() {
            return Err(Error::ep("Loop ConcatOutput: the iterations do not fill the output"));
        }
        Ok(())
    })
}

/// Scan's transposes (a scan axis other than 0): output = input with axes permuted.
unsafe extern "system" fn transpose(
    this: *mut OrtScanKernelHelper,
    perm: *const usize,
    perm_len: usize,
    input: *const OrtValue,
    _stream: *mut c_void,
    output: *mut OrtValue,
) -> *mut OrtStatus {
    // SAFETY: ORT passes back the helper made in `create_scan`.
    let api = unsafe { &(*this.cast::<ScanHelper>()).api };
    guard(api, "Scan Transpose", || {
        if perm.is_null() && perm_len > 0 {
            return Err(Error::ep("Scan Transpose: null permutation"));
        }
        // SAFETY: ORT passes `perm_len` axes.
        let perm: &[usize] = if perm_len == 0 { &[] } else { unsafe { std::slice::from_raw_parts(perm, perm_len) } };
        let (src, dims, size) = tensor_bytes(api, input)?;
        let (_, out_dims, out_size) = tensor_bytes(api, output)?;
        if out_size != size {
            return Err(Error::ep("Scan Transpose: input and output types differ"));
        }
        if src.is_empty() {
            return Ok(());
        }
        let p = api.tensor_mutable_data(output)?.cast::<u8>();
        // SAFETY: the output holds as many elements as the input (checked in `transpose_bytes`
        // through its shape), of the same size; ORT keeps it alive for this callback.
        let dst = unsafe { std::slice::from_raw_parts_mut(p, src.len()) };
        transpose_bytes(src, &dims, perm, size, &out_dims, dst)
    })
}

/// `dst` (shape `out_dims`) = `src` (shape `dims`, elements of `size` bytes) with its
/// axes permuted: output axis k is input axis `perm[k]`.
pub(crate) fn transpose_bytes(
    src: &[u8],
    dims: &[usize],
    perm: &[usize],
    size: usize,
    out_dims: &[usize],
    dst: &mut [u8],
) -> Result<()> {
    let rank = dims.len();
    let mut seen: SmallVec<[bool; 8]> = smallvec::smallvec![false; rank];
    for &a in perm {
        if a >= rank || std::mem::replace(&mut seen[a], true) {
            return Err(Error::ep(format_args!("Scan Transpose: {perm:?} is no permutation of {rank} axes")));
        }
    }
    if perm.len() != rank || out_dims.len() != rank || perm.iter().enumerate().any(|(k, &a)| out_dims[k] != dims[a]) {
        return Err(Error::ep(format_args!(
            "Scan Transpose: output {out_dims:?} is not {dims:?} permuted by {perm:?}"
        )));
    }
    if src.len() != dst.len() || dims.iter().product::<usize>() * size != src.len() {
        return Err(Error::ep("Scan Transpose: buffer sizes do not match the shapes"));
    }
    // Input strides (in elements), read in output order.
    let mut in_strides: Axes = smallvec::smallvec![1usize; rank];
    for a in (0..rank.saturating_sub(1)).rev() {
        in_strides[a] = in_strides[a + 1] * dims[a + 1];
    }
    let strides: Axes = perm.iter().map(|&a| in_strides[a]).collect();
    let mut index: Axes = smallvec::smallvec![0usize; rank];
    for chunk in dst.chunks_exact_mut(size) {
        let from = index.iter().zip(&strides).map(|(i, s)| i * s).sum::<usize>() * size;
        chunk.copy_from_slice(&src[from..from + size]);
        for k in (0..rank).rev() {
            index[k] += 1;
            if index[k] < out_dims[k] {
                break;
            }
            index[k] = 0;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::transpose_bytes;

    #[test]
    fn transpose_bytes_permutes_axes() {
        // [2, 3] -> [3, 2] of u16 elements.
        let src: Vec<u8> = (0u16..6).flat_map(|v| v.to_le_bytes()).collect();
        let mut dst = vec![0u8; 12];
        transpose_bytes(&src, &[2, 3], &[1, 0], 2, &[3, 2], &mut dst).unwrap();
        let got: Vec<u16> = dst.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
        assert_eq!(got, [0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn transpose_bytes_rejects_a_bad_permutation_or_shape() {
        let src = vec![0u8; 6];
        let mut dst = vec![0u8; 6];
        assert!(transpose_bytes(&src, &[2, 3], &[0, 0], 1, &[2, 3], &mut dst).is_err());
        assert!(transpose_bytes(&src, &[2, 3], &[1, 0], 1, &[2, 3], &mut dst).is_err());
        assert!(transpose_bytes(&src, &[2, 3], &[1], 1, &[3], &mut dst).is_err());
    }
}
