//! Exact counts with a fake `OrtApi` (ort-sys's stub table with the kernel-context and
//! tensor members replaced): FFI calls, statuses and heap allocations per Run, pinned.
//! Runs only with the probe (`cargo test -p rivet-ep --features probe`), where the test
//! binary's global allocator is Rivet's `CountingAllocator`.
#![cfg(feature = "probe")]

use std::cell::RefCell;
use std::ffi::{c_char, c_void};

use ort_sys::{ONNXTensorElementDataType, OrtApi, OrtKernelContext, OrtStatusPtr, OrtTensorTypeAndShapeInfo, OrtValue};
use rivet_ep::abi::api::Api;
use rivet_ep::abi::structs::*;
use rivet_ep::exec::RunState;
use rivet_ep::graph::{dtype, Dim, GraphDesc, NodeDesc, ValueDesc};
use rivet_ep::plan::Plan;
use rivet_ep::probe::{self, Counters, Phase};

struct FakeTensor {
    shape: Vec<i64>,
    data: Vec<f32>,
}

/// What the fake `OrtKernelContext*` points to.
struct FakeCtx {
    inputs: Vec<FakeTensor>,
    outputs: RefCell<Vec<FakeTensor>>,
}

fn ctx_ref<'a>(ctx: *const OrtKernelContext) -> &'a FakeCtx {
    // SAFETY: every context handed to Rivet in these tests is a `FakeCtx`.
    unsafe { &*ctx.cast::<FakeCtx>() }
}

unsafe extern "system" fn get_input(ctx: *const OrtKernelContext, i: usize, out: *mut *const OrtValue) -> OrtStatusPtr {
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
    // SAFETY: as above.
    unsafe { *out = (*v.cast::<FakeTensor>()).data.as_mut_ptr().cast() };
    OrtStatusPtr::default()
}

// The API 23 route: a type-and-shape object per input. The fake object is the tensor.
unsafe extern "system" fn type_and_shape_info(
    v: *const OrtValue,
    out: *mut *mut OrtTensorTypeAndShapeInfo,
) -> OrtStatusPtr {
    // SAFETY: Rivet's out pointer.
    unsafe { *out = v.cast_mut().cast() };
    OrtStatusPtr::default()
}
unsafe extern "system" fn info_elem(
    _: *const OrtTensorTypeAndShapeInfo,
    out: *mut ONNXTensorElementDataType,
) -> OrtStatusPtr {
    // SAFETY: Rivet's out pointer.
    unsafe { *out = ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT };
    OrtStatusPtr::default()
}
unsafe extern "system" fn info_rank(info: *const OrtTensorTypeAndShapeInfo, out: *mut usize) -> OrtStatusPtr {
    // SAFETY: the info is a FakeTensor (see type_and_shape_info).
    unsafe { *out = (*info.cast::<FakeTensor>()).shape.len() };
    OrtStatusPtr::default()
}
unsafe extern "system" fn info_dims(info: *const OrtTensorTypeAndShapeInfo, out: *mut i64, n: usize) -> OrtStatusPtr {
    // SAFETY: as above; Rivet passes room for `n` dims.
    unsafe {
        let shape = &(*info.cast::<FakeTensor>()).shape;
        std::ptr::copy_nonoverlapping(shape.as_ptr(), out, n.min(shape.len()));
    }
    OrtStatusPtr::default()
}
unsafe extern "system" fn info_release(_: *mut OrtTensorTypeAndShapeInfo) {}

static FAKE_ORT: OrtApi = {
    let mut api = ort_sys::stub::api();
    api.KernelContext_GetInput = get_input;
    api.GetTensorElementTypeAndShapeDataReference = type_and_shape;
    api.GetTensorData = tensor_data;
    api.KernelContext_GetOutput = get_output;
    api.GetTensorMutableData = mutable_data;
    api.GetTensorTypeAndShape = type_and_shape_info;
    api.GetTensorElementType = info_elem;
    api.GetDimensionsCount = info_rank;
    api.GetDimensions = info_dims;
    api.ReleaseTensorTypeAndShapeInfo = info_release;
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
static FAKE_EP: OrtEpApi = OrtEpApi {
    create_ep_device: no_device,
    release_ep_device: no_release,
    ep_graph_support_info_add_nodes_to_fuse: no_fuse,
    ep_graph_support_info_add_single_node: no_single,
    node_compute_context_node_name: no_name,
};

fn api() -> Api {
    Api::from_tables(&FAKE_ORT, &FAKE_EP)
}

fn value(name: &str, dims: &[usize]) -> ValueDesc {
    ValueDesc { name: name.into(), elem_type: dtype::FLOAT, dims: Some(dims.iter().map(|&d| Dim::Fixed(d)).collect()) }
}

fn node(op: &str, name: &str, inputs: &[&str], output: &str, dims: &[usize]) -> NodeDesc {
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
fn plan(n_inputs: usize, extra_unary: usize, dims: &[usize]) -> Plan {
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
        nodes,
        inputs: names.iter().map(|n| value(n, dims)).collect(),
        outputs: vec![value("y", dims)],
        constants: vec![],
    };
    Plan::build("fused", &graph).expect("plan")
}

fn ctx(n_inputs: usize, dims: &[usize]) -> FakeCtx {
    let len: usize = dims.iter().product();
    let shape: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    FakeCtx {
        inputs: (0..n_inputs).map(|i| FakeTensor { shape: shape.clone(), data: vec![i as f32 - 1.0; len] }).collect(),
        outputs: RefCell::new(vec![FakeTensor { shape: Vec::with_capacity(8), data: Vec::with_capacity(len) }]),
    }
}

fn run(api: &Api, p: &Plan, state: &mut RunState, ctx: *mut OrtKernelContext) -> rivet_ep::error::Result<()> {
    // SAFETY: every context in these tests is a live FakeCtx with the plan's inputs.
    unsafe { rivet_ep::abi::run_plan(api, p, state, ctx) }
}

/// Runs once to warm up, then measures one steady-state Run on this thread.
fn measured_run(p: &Plan, c: &FakeCtx) -> Counters {
    let api = api();
    let mut state = RunState::new(p);
    let ptr = (c as *const FakeCtx).cast_mut().cast::<OrtKernelContext>();
    run(&api, p, &mut state, ptr).expect("warm-up run");
    let before = probe::snapshot();
    run(&api, p, &mut state, ptr).expect("run");
    probe::snapshot().since(&before)
}

#[test]
fn one_node_one_input() {
    let p = plan(1, 1, &[2, 3]);
    let c = measured_run(&p, &ctx(1, &[2, 3]));
    // Input: GetInput + TypeAndShape + GetTensorData; output: GetOutput + MutableData.
    assert_eq!(c.total().ffi_calls, 5);
    assert_eq!(c.phase(Phase::TensorBind).ffi_calls, 2);
    assert_eq!(c.phase(Phase::MetadataQuery).ffi_calls, 1);
    assert_eq!(c.phase(Phase::Allocate).ffi_calls, 2);
    assert_eq!(c.total().allocs, 0, "steady state allocates nothing: {c:#?}");
    assert_eq!(c.total().statuses, 0);
    assert_eq!((c.runs, c.nodes_executed), (1, 1));
}

#[test]
fn three_inputs_cost_three_times_the_input_part() {
    let one = measured_run(&plan(1, 1, &[4]), &ctx(1, &[4]));
    let three = measured_run(&plan(3, 0, &[4]), &ctx(3, &[4]));
    // Linear per input: 3 calls each, plus 2 for the one output.
    assert_eq!(three.total().ffi_calls, 3 * 3 + 2);
    assert_eq!(three.phase(Phase::TensorBind).ffi_calls + three.phase(Phase::MetadataQuery).ffi_calls, 9);
    assert_eq!(one.phase(Phase::TensorBind).ffi_calls + one.phase(Phase::MetadataQuery).ffi_calls, 3);
    assert_eq!(three.total().allocs, 0);
    assert_eq!((three.runs, three.nodes_executed), (1, 2));
}

/// Two inputs feeding two outputs: `y = x0 + x1` and `z = relu(y)`.
fn two_output_plan() -> Plan {
    let dims = [4];
    let graph = GraphDesc {
        nodes: vec![node("Add", "add", &["x0", "x1"], "y", &dims), node("Relu", "relu", &["y"], "z", &dims)],
        inputs: vec![value("x0", &dims), value("x1", &dims)],
        outputs: vec![value("y", &dims), value("z", &dims)],
        constants: vec![],
    };
    Plan::build("fused", &graph).expect("plan")
}

#[test]
fn ffi_calls_per_run_are_three_per_input_plus_two_per_output() {
    for (inputs, outputs, counts) in [
        (1, 1, measured_run(&plan(1, 1, &[4]), &ctx(1, &[4]))),
        (3, 1, measured_run(&plan(3, 0, &[4]), &ctx(3, &[4]))),
        (2, 2, {
            let c = ctx(2, &[4]);
            c.outputs.borrow_mut().push(FakeTensor { shape: Vec::with_capacity(8), data: Vec::with_capacity(4) });
            measured_run(&two_output_plan(), &c)
        }),
    ] {
        assert_eq!(counts.total().ffi_calls, 3 * inputs + 2 * outputs, "{inputs} inputs, {outputs} outputs");
        assert_eq!(counts.phase(Phase::Allocate).ffi_calls, 2 * outputs);
        assert_eq!(counts.total().allocs, 0);
    }
}

#[test]
fn a_three_node_plan_allocates_only_on_its_first_run() {
    let p = plan(1, 3, &[16]);
    let c = ctx(1, &[16]);
    let api = api();
    let mut state = RunState::new(&p);
    let ptr = (&c as *const FakeCtx).cast_mut().cast::<OrtKernelContext>();
    let before = probe::snapshot();
    run(&api, &p, &mut state, ptr).expect("first run");
    let first = probe::snapshot().since(&before);
    // Two intermediate buffers are sized on the first Run, in dispatch_lookup.
    assert_eq!(first.total().allocs, 2, "{first:#?}");
    assert_eq!(first.phase(Phase::DispatchLookup).allocs, 2);
    let steady = measured_run(&p, &c);
    assert_eq!(steady.total().ffi_calls, 5);
    assert_eq!(steady.total().allocs, 0);
    assert_eq!(steady.nodes_executed, 3);
    assert_eq!(steady.phase(Phase::KernelInvoke).calls, 3);
    assert_eq!(steady.phase(Phase::DispatchLookup).calls, 3);
}

#[test]
fn a_scalar_input_with_a_null_shape_pointer_works() {
    let p = plan(1, 1, &[]);
    let c = ctx(1, &[]);
    let counts = measured_run(&p, &c);
    assert_eq!(counts.total().ffi_calls, 5);
    assert_eq!(c.outputs.borrow()[0].data, vec![0.0]); // relu(-1)
}

#[test]
fn a_failing_run_counts_its_status_and_names_the_node() {
    // Declared [4], given [5]: the input check fails before any kernel runs.
    let p = plan(1, 1, &[4]);
    let c = ctx(1, &[5]);
    let api = api();
    let mut state = RunState::new(&p);
    let ptr = (&c as *const FakeCtx).cast_mut().cast::<OrtKernelContext>();
    let err = run(&api, &p, &mut state, ptr).expect_err("shape mismatch");
    assert_eq!(err.message, "node 'relu0' (Relu) input 0 'x0': expected float32 [4], got float32 [5]");
}

#[test]
fn on_api_23_input_metadata_takes_the_five_call_route() {
    let old = Api::from_tables_version(&FAKE_ORT, &FAKE_EP, 23);
    assert!(!old.has_shape_reference());
    for (n, shape) in [(1usize, vec![2usize, 3]), (3, vec![4]), (1, vec![])] {
        let p = plan(n, 1, &shape);
        let c = ctx(n, &shape);
        let mut state = RunState::new(&p);
        let ptr = (&c as *const FakeCtx).cast_mut().cast::<OrtKernelContext>();
        run(&old, &p, &mut state, ptr).expect("warm-up");
        let before = probe::snapshot();
        run(&old, &p, &mut state, ptr).expect("run");
        let d = probe::snapshot().since(&before);
        // GetInput + (TypeAndShape, ElementType, DimensionsCount, Dimensions, Release) + GetTensorData.
        assert_eq!(d.total().ffi_calls as usize, 7 * n + 2, "{n} inputs of shape {shape:?}");
        assert_eq!(d.phase(Phase::MetadataQuery).ffi_calls as usize, 5 * n);
        assert_eq!(d.total().allocs, 0);
        let expect: Vec<f32> = vec![(0..n).map(|i| i as f32 - 1.0).sum::<f32>().max(0.0); shape.iter().product()];
        assert_eq!(c.outputs.borrow()[0].data, expect);
    }
}
