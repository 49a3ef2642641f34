//! A fake `OrtApi` for driving Rivet's Compute path without ORT: ort-sys's stub table
//! with the kernel-context, tensor and status members replaced by functions over
//! `FakeCtx`. Each replaced function counts its own calls, per thread ([`fake_calls`]),
//! so tests can hold the probe's per-member counts against what the "ORT" side saw.
#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, c_void};

use ort_sys::{ONNXTensorElementDataType, OrtApi, OrtKernelContext, OrtStatusPtr, OrtTensorTypeAndShapeInfo, OrtValue};
use rivet_ep::abi::api::Api;
use rivet_ep::abi::structs::*;
use rivet_ep::exec::RunState;
use rivet_ep::graph::{dtype, Dim, GraphDesc, NodeDesc, ValueDesc};
use rivet_ep::plan::Plan;

pub struct FakeTensor {
    pub shape: Vec<i64>,
    pub data: Vec<f32>,
}

/// What the fake `OrtKernelContext*` points to.
pub struct FakeCtx {
    pub inputs: Vec<FakeTensor>,
    pub outputs: RefCell<Vec<FakeTensor>>,
}

/// The members this fake implements; every other member is ort-sys's stub.
pub const MEMBERS: [&str; 14] = [
    "KernelContext_GetInput",
    "GetTensorElementTypeAndShapeDataReference",
    "GetTensorData",
    "KernelContext_GetOutput",
    "GetTensorMutableData",
    "KernelContext_ParallelFor",
    "GetTensorTypeAndShape",
    "GetTensorElementType",
    "GetDimensionsCount",
    "GetDimensions",
    "ReleaseTensorTypeAndShapeInfo",
    "GetErrorMessage",
    "ReleaseStatus",
    "CreateStatus",
];

thread_local! {
    /// Calls per member of `MEMBERS`, on this thread. `const`, no allocation: counting
    /// inside a measured Run does not disturb its allocation count.
    static CALLS: [Cell<u64>; MEMBERS.len()] = const { [const { Cell::new(0) }; MEMBERS.len()] };
    /// When set, `KernelContext_GetOutput` fails with a status (and counts the status it made).
    static FAIL_OUTPUT: Cell<bool> = const { Cell::new(false) };
    static STATUSES_MADE: Cell<u64> = const { Cell::new(0) };
}

fn tally(member: &str) {
    let i = MEMBERS.iter().position(|m| *m == member).expect("a member of MEMBERS");
    CALLS.with(|c| c[i].set(c[i].get() + 1));
}

/// (member, calls) on this thread since it started, members never called left out.
pub fn fake_calls() -> Vec<(&'static str, u64)> {
    let mut out: Vec<(&'static str, u64)> =
        CALLS.with(|c| MEMBERS.iter().zip(c).map(|(m, n)| (*m, n.get())).filter(|(_, n)| *n > 0).collect());
    out.sort();
    out
}

/// Error statuses the fake handed to Rivet on this thread.
pub fn fake_statuses_made() -> u64 {
    STATUSES_MADE.with(Cell::get)
}

/// Makes this thread's `KernelContext_GetOutput` calls fail (or succeed again).
pub fn fail_outputs(fail: bool) {
    FAIL_OUTPUT.with(|f| f.set(fail));
}

/// `after - before` of two `fake_calls` / `ffi_sites` readings, zeros left out.
pub fn delta(after: &[(&'static str, u64)], before: &[(&'static str, u64)]) -> Vec<(&'static str, u64)> {
    after
        .iter()
        .map(|(m, n)| (*m, n - before.iter().find(|(b, _)| b == m).map_or(0, |(_, k)| *k)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

static STUB: OrtApi = ort_sys::stub::api();

unsafe extern "system" fn error_message(status: *const ort_sys::OrtStatus) -> *const c_char {
    tally("GetErrorMessage");
    // SAFETY: statuses reaching Rivet are the stub's (made by `get_output` below).
    unsafe { (STUB.GetErrorMessage)(status) }
}

unsafe extern "system" fn release_status(status: *mut ort_sys::OrtStatus) {
    tally("ReleaseStatus");
    // SAFETY: as above, released once by Rivet.
    unsafe { (STUB.ReleaseStatus)(status) }
}

unsafe extern "system" fn create_status(code: ort_sys::OrtErrorCode, msg: *const c_char) -> OrtStatusPtr {
    tally("CreateStatus");
    // SAFETY: Rivet passes a NUL-terminated message.
    unsafe { (STUB.CreateStatus)(code, msg) }
}

fn ctx_ref<'a>(ctx: *const OrtKernelContext) -> &'a FakeCtx {
    // SAFETY: every context handed to Rivet in these tests is a `FakeCtx`.
    unsafe { &*ctx.cast::<FakeCtx>() }
}

unsafe extern "system" fn get_input(ctx: *const OrtKernelContext, i: usize, out: *mut *const OrtValue) -> OrtStatusPtr {
    tally("KernelContext_GetInput");
    // SAFETY: `out` is Rivet's out pointer.
    unsafe { *out = (&ctx_ref(ctx).inputs[i] as *const FakeTensor).cast() };
    OrtStatusPtr::default()
}

unsafe extern "system" fn type_and_shape(
    v: *const OrtValue,
    elem: *mut ONNXTensorElementDataType,
    dims: *mut *const i64,
    count: *mut usize,
) -> OrtStatusPtr {
    tally("GetTensorElementTypeAndShapeDataReference");
    // SAFETY: values are FakeTensors; the out pointers are Rivet's.
    unsafe {
        let t = &*v.cast::<FakeTensor>();
        *elem = ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
        // A scalar's shape is a null pointer, as in ORT.
        *dims = if t.shape.is_empty() { std::ptr::null() } else { t.shape.as_ptr() };
        *count = t.shape.len();
    }
    OrtStatusPtr::default()
}

unsafe extern "system" fn tensor_data(v: *const OrtValue, out: *mut *const c_void) -> OrtStatusPtr {
    tally("GetTensorData");
    // SAFETY: as above.
    unsafe { *out = (*v.cast::<FakeTensor>()).data.as_ptr().cast() };
    OrtStatusPtr::default()
}

unsafe extern "system" fn get_output(
    ctx: *mut OrtKernelContext,
    i: usize,
    dims: *const i64,
    n: usize,
    out: *mut *mut OrtValue,
) -> OrtStatusPtr {
    tally("KernelContext_GetOutput");
    if FAIL_OUTPUT.with(Cell::get) {
        STATUSES_MADE.with(|n| n.set(n.get() + 1));
        return ort_sys::stub::Error::new_sys(ort_sys::OrtErrorCode::ORT_FAIL, "fake: no output today");
    }
    let c = ctx_ref(ctx);
    // SAFETY: Rivet passes `n` dims; the output tensors were made before the Run, so
    // resizing them here does not touch the heap counted by the test (capacity suffices).
    unsafe {
        let dims = if n == 0 { &[][..] } else { std::slice::from_raw_parts(dims, n) };
        let mut outs = c.outputs.borrow_mut();
        let t = &mut outs[i];
        t.shape.clear();
        t.shape.extend_from_slice(dims);
        let len: i64 = dims.iter().product();
        t.data.resize(len as usize, 0.0);
        *out = (t as *mut FakeTensor).cast();
    }
    OrtStatusPtr::default()
}

unsafe extern "system" fn mutable_data(v: *mut OrtValue, out: *mut *mut c_void) -> OrtStatusPtr {
    tally("GetTensorMutableData");
    // SAFETY: as above.
    unsafe { *out = (*v.cast::<FakeTensor>()).data.as_mut_ptr().cast() };
    OrtStatusPtr::default()
}

// The API 23 route: a type-and-shape object per input. The fake object is the tensor.
unsafe extern "system" fn type_and_shape_info(
    v: *const OrtValue,
    out: *mut *mut OrtTensorTypeAndShapeInfo,
) -> OrtStatusPtr {
    tally("GetTensorTypeAndShape");
    // SAFETY: Rivet's out pointer.
    unsafe { *out = v.cast_mut().cast() };
    OrtStatusPtr::default()
}
unsafe extern "system" fn info_elem(
    _: *const OrtTensorTypeAndShapeInfo,
    out: *mut ONNXTensorElementDataType,
) -> OrtStatusPtr {
    tally("GetTensorElementType");
    // SAFETY: Rivet's out pointer.
    unsafe { *out = ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT };
    OrtStatusPtr::default()
}
unsafe extern "system" fn info_rank(info: *const OrtTensorTypeAndShapeInfo, out: *mut usize) -> OrtStatusPtr {
    tally("GetDimensionsCount");
    // SAFETY: the info is a FakeTensor (see type_and_shape_info).
    unsafe { *out = (*info.cast::<FakeTensor>()).shape.len() };
    OrtStatusPtr::default()
}
unsafe extern "system" fn info_dims(info: *const OrtTensorTypeAndShapeInfo, out: *mut i64, n: usize) -> OrtStatusPtr {
    tally("GetDimensions");
    // SAFETY: as above; Rivet passes room for `n` dims.
    unsafe {
        let shape = &(*info.cast::<FakeTensor>()).shape;
        std::ptr::copy_nonoverlapping(shape.as_ptr(), out, n.min(shape.len()));
    }
    OrtStatusPtr::default()
}
unsafe extern "system" fn info_release(_: *mut OrtTensorTypeAndShapeInfo) {
    tally("ReleaseTensorTypeAndShapeInfo");
}

/// Runs every task on the calling thread, like ORT's pool with one thread.
unsafe extern "system" fn parallel_for(
    _ctx: *const OrtKernelContext,
    f: unsafe extern "C" fn(*mut c_void, usize),
    total: usize,
    _batch: usize,
    data: *mut c_void,
) -> OrtStatusPtr {
    tally("KernelContext_ParallelFor");
    for i in 0..total {
        // SAFETY: Rivet's task function with its own data, as ORT would call it.
        unsafe { f(data, i) };
    }
    OrtStatusPtr::default()
}

pub static FAKE_ORT: OrtApi = {
    let mut api = ort_sys::stub::api();
    api.KernelContext_GetInput = get_input;
    api.GetTensorElementTypeAndShapeDataReference = type_and_shape;
    api.GetTensorData = tensor_data;
    api.KernelContext_GetOutput = get_output;
    api.GetTensorMutableData = mutable_data;
    api.KernelContext_ParallelFor = parallel_for;
    api.GetTensorTypeAndShape = type_and_shape_info;
    api.GetTensorElementType = info_elem;
    api.GetDimensionsCount = info_rank;
    api.GetDimensions = info_dims;
    api.ReleaseTensorTypeAndShapeInfo = info_release;
    api.GetErrorMessage = error_message;
    api.ReleaseStatus = release_status;
    api.CreateStatus = create_status;
    api
};

unsafe extern "system" fn no_device(
    _: *mut OrtEpFactory,
    _: *const ort_sys::OrtHardwareDevice,
    _: *const ort_sys::OrtKeyValuePairs,
    _: *const ort_sys::OrtKeyValuePairs,
    _: *mut *mut OrtEpDevice,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn no_release(_: *mut OrtEpDevice) {}
unsafe extern "system" fn no_fuse(
    _: *mut OrtEpGraphSupportInfo,
    _: *const *const ort_sys::OrtNode,
    _: usize,
    _: *const OrtNodeFusionOptions,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn no_single(
    _: *mut OrtEpGraphSupportInfo,
    _: *const ort_sys::OrtNode,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn no_name(_: *const OrtNodeComputeContext) -> *const c_char {
    c"fake".as_ptr()
}
unsafe extern "system" fn stub_create_kernel_registry(_: *mut *mut OrtKernelRegistry) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_release_kernel_registry(_: *mut OrtKernelRegistry) {}
unsafe extern "system" fn stub_kernel_registry_add_kernel(
    _: *mut OrtKernelRegistry,
    _: *const OrtKernelDef,
    _: KernelCreateFn,
    _: *mut c_void,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_create_kernel_def_builder(_: *mut *mut OrtKernelDefBuilder) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_release_kernel_def_builder(_: *mut OrtKernelDefBuilder) {}
unsafe extern "system" fn stub_kernel_def_builder_set_operator_type(
    _: *mut OrtKernelDefBuilder,
    _: *const c_char,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_kernel_def_builder_set_domain(
    _: *mut OrtKernelDefBuilder,
    _: *const c_char,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_kernel_def_builder_set_since_version(
    _: *mut OrtKernelDefBuilder,
    _: i32,
    _: i32,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_kernel_def_builder_set_execution_provider(
    _: *mut OrtKernelDefBuilder,
    _: *const c_char,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_kernel_def_builder_set_input_mem_type(
    _: *mut OrtKernelDefBuilder,
    _: usize,
    _: ort_sys::OrtMemType,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_kernel_def_builder_add_type_constraint(
    _: *mut OrtKernelDefBuilder,
    _: *const c_char,
    _: *const *const OrtDataType,
    _: usize,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_kernel_def_builder_build(
    _: *mut OrtKernelDefBuilder,
    _: *mut *mut OrtKernelDef,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_release_kernel_def(_: *mut OrtKernelDef) {}
unsafe extern "system" fn stub_kernel_def_get_operator_type(_: *const OrtKernelDef) -> *const c_char {
    c"".as_ptr()
}
unsafe extern "system" fn stub_kernel_def_get_domain(_: *const OrtKernelDef) -> *const c_char {
    c"".as_ptr()
}
unsafe extern "system" fn stub_kernel_def_get_since_version(
    _: *const OrtKernelDef,
    _: *mut i32,
    _: *mut i32,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_kernel_def_get_execution_provider(_: *const OrtKernelDef) -> *const c_char {
    c"".as_ptr()
}
unsafe extern "system" fn stub_get_tensor_data_type(
    _: ort_sys::ONNXTensorElementDataType,
    _: *mut *const OrtDataType,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_ep_graph_support_info_look_up_kernel(
    _: *mut OrtEpGraphSupportInfo,
    _: *const ort_sys::OrtNode,
    _: *mut *const OrtKernelDef,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_create_if_kernel(
    _: *const ort_sys::OrtKernelInfo,
    _: *mut *mut OrtKernelImpl,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_create_loop_kernel(
    _: *const ort_sys::OrtKernelInfo,
    _: *mut OrtLoopKernelHelper,
    _: *mut *mut OrtKernelImpl,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_create_scan_kernel(
    _: *const ort_sys::OrtKernelInfo,
    _: *mut OrtScanKernelHelper,
    _: *mut *mut OrtKernelImpl,
) -> *mut ort_sys::OrtStatus {
    std::ptr::null_mut()
}
unsafe extern "system" fn stub_release_kernel_impl(_: *mut OrtKernelImpl) {}
pub static FAKE_EP: OrtEpApi = OrtEpApi {
    create_ep_device: no_device,
    release_ep_device: no_release,
    ep_graph_support_info_add_nodes_to_fuse: no_fuse,
    ep_graph_support_info_add_single_node: no_single,
    node_compute_context_node_name: no_name,
    _unused_5_17: [None; 13],
    create_kernel_registry: stub_create_kernel_registry,
    release_kernel_registry: stub_release_kernel_registry,
    kernel_registry_add_kernel: stub_kernel_registry_add_kernel,
    create_kernel_def_builder: stub_create_kernel_def_builder,
    release_kernel_def_builder: stub_release_kernel_def_builder,
    kernel_def_builder_set_operator_type: stub_kernel_def_builder_set_operator_type,
    kernel_def_builder_set_domain: stub_kernel_def_builder_set_domain,
    kernel_def_builder_set_since_version: stub_kernel_def_builder_set_since_version,
    kernel_def_builder_set_execution_provider: stub_kernel_def_builder_set_execution_provider,
    kernel_def_builder_set_input_mem_type: stub_kernel_def_builder_set_input_mem_type,
    _unused_28: None,
    kernel_def_builder_add_type_constraint: stub_kernel_def_builder_add_type_constraint,
    _unused_30_31: [None; 2],
    kernel_def_builder_build: stub_kernel_def_builder_build,
    release_kernel_def: stub_release_kernel_def,
    kernel_def_get_operator_type: stub_kernel_def_get_operator_type,
    kernel_def_get_domain: stub_kernel_def_get_domain,
    kernel_def_get_since_version: stub_kernel_def_get_since_version,
    kernel_def_get_execution_provider: stub_kernel_def_get_execution_provider,
    _unused_38_39: [None; 2],
    get_tensor_data_type: stub_get_tensor_data_type,
    ep_graph_support_info_look_up_kernel: stub_ep_graph_support_info_look_up_kernel,
    _unused_42_44: [None; 3],
    create_if_kernel: stub_create_if_kernel,
    create_loop_kernel: stub_create_loop_kernel,
    create_scan_kernel: stub_create_scan_kernel,
    release_kernel_impl: stub_release_kernel_impl,
};

pub fn api() -> Api {
    Api::from_tables(&FAKE_ORT, &FAKE_EP)
}

pub fn value(name: &str, dims: &[usize]) -> ValueDesc {
    ValueDesc {
        name: name.into(),
        elem_type: dtype::FLOAT,
        dims: Some(dims.iter().map(|&d| Dim::Fixed(d)).collect()),
        constant: None,
        at_run_ok: false,
    }
}

pub fn node(op: &str, name: &str, inputs: &[&str], output: &str, dims: &[usize]) -> NodeDesc {
    NodeDesc {
        name: name.into(),
        op_type: op.into(),
        domain: String::new(),
        since_version: 14,
        inputs: inputs.iter().map(|i| Some(value(i, dims))).collect(),
        outputs: vec![Some(value(output, dims))],
        attrs: vec![],
    }
}

/// `n_inputs` inputs summed by a chain of Adds, then `extra_unary` Relus.
pub fn plan(n_inputs: usize, extra_unary: usize, dims: &[usize]) -> Plan {
    let mut nodes = Vec::new();
    let names: Vec<String> = (0..n_inputs).map(|i| format!("x{i}")).collect();
    let mut last = names[0].clone();
    for (i, n) in names.iter().enumerate().skip(1) {
        let out = format!("s{i}");
        nodes.push(node("Add", &format!("add{i}"), &[&last, n], &out, dims));
        last = out;
    }
    for k in 0..extra_unary {
        let out = format!("r{k}");
        nodes.push(node("Relu", &format!("relu{k}"), &[&last], &out, dims));
        last = out;
    }
    nodes.last_mut().unwrap().outputs[0].as_mut().unwrap().name = "y".into();
    let graph = GraphDesc {
        constant_inputs: Vec::new(),
        nodes,
        inputs: names.iter().map(|n| value(n, dims)).collect(),
        outputs: vec![value("y", dims)],
        constants: vec![],
    };
    Plan::build("fused", &graph).expect("plan")
}

pub fn ctx(n_inputs: usize, dims: &[usize]) -> FakeCtx {
    let len: usize = dims.iter().product();
    let shape: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    FakeCtx {
        inputs: (0..n_inputs).map(|i| FakeTensor { shape: shape.clone(), data: vec![i as f32 - 1.0; len] }).collect(),
        outputs: RefCell::new(vec![FakeTensor { shape: Vec::with_capacity(8), data: Vec::with_capacity(len) }]),
    }
}

pub fn run(api: &Api, p: &Plan, state: &mut RunState, ctx: *mut OrtKernelContext) -> rivet_ep::error::Result<()> {
    // SAFETY: every context in these tests is a live FakeCtx with the plan's inputs.
    unsafe { rivet_ep::abi::run_plan(api, p, state, ctx) }
}

/// Two inputs feeding two outputs: `y = x0 + x1` and `z = relu(y)`.
pub fn two_output_plan() -> Plan {
    let dims = [4];
    let graph = GraphDesc {
        constant_inputs: Vec::new(),
        nodes: vec![node("Add", "add", &["x0", "x1"], "y", &dims), node("Relu", "relu", &["y"], "z", &dims)],
        inputs: vec![value("x0", &dims), value("x1", &dims)],
        outputs: vec![value("y", &dims), value("z", &dims)],
        constants: vec![],
    };
    Plan::build("fused", &graph).expect("plan")
}
