//! The EP-side structs of ORT's plugin ABI, written by hand (ort-sys declares `OrtEpApi`
//! as opaque and has none of the others). Layouts follow
//! `onnxruntime_ep_c_api.h`; `tests/abi_layout.rs` checks them against the running 1.32
//! library. We declare version 23 on every struct we fill and fill every 1.23 slot;
//! `OrtEp` declares 25 when the runtime has the profiling API of 1.25 (its slots 13-15
//! null, which ORT checks before each call: seen in the 1.32 library's code), and the
//! profiler declares 25 as ORT requires.

use std::ffi::{c_char, c_void};

use ort_sys::{
    OrtGraph, OrtHardwareDevice, OrtKernelContext, OrtKeyValuePairs, OrtLogger, OrtMemoryInfo, OrtNode, OrtRunOptions,
    OrtSessionOptions, OrtStatus,
};

/// The version every struct we fill declares: all of its slots are filled.
pub const EP_STRUCT_VERSION: u32 = 23;

/// Opaque ORT types that ort-sys does not declare.
#[repr(C)]
pub struct OrtEpDevice {
    _p: [u8; 0],
}
#[repr(C)]
pub struct OrtEpGraphSupportInfo {
    _p: [u8; 0],
}
#[repr(C)]
pub struct OrtNodeComputeContext {
    _p: [u8; 0],
}
#[repr(C)]
pub struct OrtMemoryDevice {
    _p: [u8; 0],
}
#[repr(C)]
pub struct OrtProfilingEvent {
    _p: [u8; 0],
}
#[repr(C)]
pub struct OrtProfilingEventsContainer {
    _p: [u8; 0],
}

/// The `OrtEp` version with `CreateProfiler`, and the one ORT requires of a profiler.
pub const EP_PROFILING_VERSION: u32 = 25;
/// `OrtProfilingEventCategory_KERNEL`.
pub const PROFILING_CATEGORY_KERNEL: i32 = 2;

type Status = *mut OrtStatus;

#[repr(C)]
pub struct OrtNodeFusionOptions {
    pub ort_version_supported: u32,
    pub drop_constant_initializers: bool,
}

#[repr(C)]
pub struct OrtNodeComputeInfo {
    pub ort_version_supported: u32,
    pub create_state: unsafe extern "system" fn(
        this: *mut OrtNodeComputeInfo,
        ctx: *mut OrtNodeComputeContext,
        state: *mut *mut c_void,
    ) -> Status,
    pub compute: unsafe extern "system" fn(
        this: *mut OrtNodeComputeInfo,
        state: *mut c_void,
        ctx: *mut OrtKernelContext,
    ) -> Status,
    pub release_state: unsafe extern "system" fn(this: *mut OrtNodeComputeInfo, state: *mut c_void),
}

/// `OrtEp` up to `CreateProfiler` (slot 16, 1.25): 1.24 appended `GetKernelRegistry` and
/// `IsConcurrentRunSupported` (slots 13-14), 1.25 `Sync` and `CreateProfiler` (15-16).
/// ORT reads slots 13-14 only from a struct that declares 24 or more and 15-16 from one
/// that declares 25 or more, each after a null check.
#[repr(C)]
pub struct OrtEp {
    pub ort_version_supported: u32,
    pub get_name: unsafe extern "system" fn(this: *const OrtEp) -> *const c_char,
    pub get_capability:
        unsafe extern "system" fn(this: *mut OrtEp, graph: *const OrtGraph, info: *mut OrtEpGraphSupportInfo) -> Status,
    pub compile: unsafe extern "system" fn(
        this: *mut OrtEp,
        graphs: *const *const OrtGraph,
        fused_nodes: *const *const OrtNode,
        count: usize,
        infos: *mut *mut OrtNodeComputeInfo,
        ep_context_nodes: *mut *mut OrtNode,
    ) -> Status,
    pub release_node_compute_infos:
        unsafe extern "system" fn(this: *mut OrtEp, infos: *mut *mut OrtNodeComputeInfo, n: usize),
    pub get_preferred_data_layout: Option<unsafe extern "system" fn()>,
    pub should_convert_data_layout_for_op: Option<unsafe extern "system" fn()>,
    pub set_dynamic_options: Option<unsafe extern "system" fn()>,
    pub on_run_start: Option<unsafe extern "system" fn(this: *mut OrtEp, opts: *const OrtRunOptions) -> Status>,
    pub on_run_end:
        Option<unsafe extern "system" fn(this: *mut OrtEp, opts: *const OrtRunOptions, sync: bool) -> Status>,
    pub create_allocator: Option<
        unsafe extern "system" fn(
            this: *mut OrtEp,
            info: *const OrtMemoryInfo,
            out: *mut *mut ort_sys::OrtAllocator,
        ) -> Status,
    >,
    pub create_sync_stream_for_device: Option<unsafe extern "system" fn()>,
    pub get_compiled_model_compatibility_info:
        Option<unsafe extern "system" fn(this: *mut OrtEp, graph: *const OrtGraph) -> *const c_char>,
    /// 1.24: the EP's kernels (Rivet's: the control-flow kernels ORT implements).
    pub get_kernel_registry:
        Option<unsafe extern "system" fn(this: *mut OrtEp, out: *mut *const OrtKernelRegistry) -> Status>,
    /// 1.24, optional: NULL means concurrent runs are supported.
    pub is_concurrent_run_supported: Option<unsafe extern "system" fn()>,
    pub sync: Option<unsafe extern "system" fn()>,
    pub create_profiler:
        Option<unsafe extern "system" fn(this: *mut OrtEp, profiler: *mut *mut OrtEpProfilerImpl) -> Status>,
}

/// The version of the `OrtEp` table Rivet fills when the runtime is 1.24 or newer.
pub const EP_TABLE_VERSION_24: u32 = 24;

#[repr(C)]
pub struct OrtKernelRegistry {
    _p: [u8; 0],
}
#[repr(C)]
pub struct OrtKernelDefBuilder {
    _p: [u8; 0],
}
#[repr(C)]
pub struct OrtKernelDef {
    _p: [u8; 0],
}
#[repr(C)]
pub struct OrtDataType {
    _p: [u8; 0],
}
#[repr(C)]
pub struct OrtKernelImpl {
    _p: [u8; 0],
}

/// `OrtKernelCreateFunc`: ORT calls it to make the kernel for one node.
pub type KernelCreateFn = unsafe extern "system" fn(
    state: *mut c_void,
    info: *const ort_sys::OrtKernelInfo,
    out: *mut *mut OrtKernelImpl,
) -> Status;

/// `OrtLoopKernelHelper` (1.24): the EP's half of ORT's Loop kernel, which concatenates
/// the per-iteration scan outputs into the final output.
#[repr(C)]
pub struct OrtLoopKernelHelper {
    pub ort_version_supported: u32,
    pub release: unsafe extern "system" fn(this: *mut OrtLoopKernelHelper),
    pub concat_output: unsafe extern "system" fn(
        this: *mut OrtLoopKernelHelper,
        stream: *mut c_void,
        per_iteration: *const *const ort_sys::OrtValue,
        count: usize,
        output: *mut c_void,
        output_bytes: usize,
    ) -> Status,
}

/// `OrtScanKernelHelper` (1.24): the EP's half of ORT's Scan kernel, a transpose for
/// scan axes other than 0.
#[repr(C)]
pub struct OrtScanKernelHelper {
    pub ort_version_supported: u32,
    pub release: unsafe extern "system" fn(this: *mut OrtScanKernelHelper),
    pub transpose: unsafe extern "system" fn(
        this: *mut OrtScanKernelHelper,
        perm: *const usize,
        perm_len: usize,
        input: *const ort_sys::OrtValue,
        stream: *mut c_void,
        output: *mut ort_sys::OrtValue,
    ) -> Status,
}

/// `OrtEpProfilerImpl` (1.25). The layout and the calls were checked against the 1.32
/// library's code: `StartProfiling(this, offset_ns)` is slot 2, `EndProfiling(this,
/// container)` slot 5, and ORT skips the optional event callbacks when null.
#[repr(C)]
pub struct OrtEpProfilerImpl {
    pub ort_version_supported: u32,
    pub release: unsafe extern "system" fn(this: *mut OrtEpProfilerImpl),
    /// `offset_ns`: how long ago ORT's profiling started, on ORT's clock.
    pub start_profiling: unsafe extern "system" fn(this: *mut OrtEpProfilerImpl, offset_ns: i64) -> Status,
    pub start_event: Option<unsafe extern "system" fn(this: *mut OrtEpProfilerImpl, correlation_id: u64) -> Status>,
    pub stop_event: Option<
        unsafe extern "system" fn(
            this: *mut OrtEpProfilerImpl,
            correlation_id: u64,
            event: *const OrtProfilingEvent,
        ) -> Status,
    >,
    pub end_profiling:
        unsafe extern "system" fn(this: *mut OrtEpProfilerImpl, container: *mut OrtProfilingEventsContainer) -> Status,
}

/// `OrtEpFactory` as of 1.23 (13 slots after the version).
#[repr(C)]
pub struct OrtEpFactory {
    pub ort_version_supported: u32,
    pub get_name: unsafe extern "system" fn(this: *const OrtEpFactory) -> *const c_char,
    pub get_vendor: unsafe extern "system" fn(this: *const OrtEpFactory) -> *const c_char,
    pub get_supported_devices: unsafe extern "system" fn(
        this: *mut OrtEpFactory,
        devices: *const *const OrtHardwareDevice,
        num_devices: usize,
        ep_devices: *mut *mut OrtEpDevice,
        max_ep_devices: usize,
        num_ep_devices: *mut usize,
    ) -> Status,
    pub create_ep: unsafe extern "system" fn(
        this: *mut OrtEpFactory,
        devices: *const *const OrtHardwareDevice,
        metadata: *const *const OrtKeyValuePairs,
        num_devices: usize,
        session_options: *const OrtSessionOptions,
        logger: *const OrtLogger,
        ep: *mut *mut OrtEp,
    ) -> Status,
    pub release_ep: unsafe extern "system" fn(this: *mut OrtEpFactory, ep: *mut OrtEp),
    pub get_vendor_id: unsafe extern "system" fn(this: *const OrtEpFactory) -> u32,
    pub get_version: unsafe extern "system" fn(this: *const OrtEpFactory) -> *const c_char,
    pub validate_compiled_model_compatibility_info: Option<unsafe extern "system" fn()>,
    pub create_allocator: unsafe extern "system" fn(
        this: *mut OrtEpFactory,
        info: *const OrtMemoryInfo,
        options: *const OrtKeyValuePairs,
        out: *mut *mut ort_sys::OrtAllocator,
    ) -> Status,
    pub release_allocator: unsafe extern "system" fn(this: *mut OrtEpFactory, alloc: *mut ort_sys::OrtAllocator),
    pub create_data_transfer: unsafe extern "system" fn(this: *mut OrtEpFactory, out: *mut *mut c_void) -> Status,
    pub is_stream_aware: unsafe extern "system" fn(this: *const OrtEpFactory) -> bool,
    pub create_sync_stream_for_device: Option<unsafe extern "system" fn()>,
}

/// The first 49 entries of `OrtEpApi` (through `ReleaseKernelImpl`, 1.24): the ones Rivet
/// calls, typed, and the
/// others as placeholders. ORT owns the table (78 entries in 1.32);
/// we only ever read through a pointer to it, and read entries past the fifth only from a
/// runtime of 1.24 or newer.
#[repr(C)]
pub struct OrtEpApi {
    pub create_ep_device: unsafe extern "system" fn(
        factory: *mut OrtEpFactory,
        hw: *const OrtHardwareDevice,
        metadata: *const OrtKeyValuePairs,
        options: *const OrtKeyValuePairs,
        out: *mut *mut OrtEpDevice,
    ) -> Status,
    pub release_ep_device: unsafe extern "system" fn(dev: *mut OrtEpDevice),
    pub ep_graph_support_info_add_nodes_to_fuse: unsafe extern "system" fn(
        info: *mut OrtEpGraphSupportInfo,
        nodes: *const *const OrtNode,
        num_nodes: usize,
        options: *const OrtNodeFusionOptions,
    ) -> Status,
    pub ep_graph_support_info_add_single_node:
        unsafe extern "system" fn(info: *mut OrtEpGraphSupportInfo, node: *const OrtNode) -> Status,
    pub node_compute_context_node_name: unsafe extern "system" fn(ctx: *const OrtNodeComputeContext) -> *const c_char,
    /// Entries 5..=17: allocator info, memory devices, sync streams, hardware devices.
    pub _unused_5_17: [Option<unsafe extern "system" fn()>; 13],
    pub create_kernel_registry: unsafe extern "system" fn(out: *mut *mut OrtKernelRegistry) -> Status,
    pub release_kernel_registry: unsafe extern "system" fn(r: *mut OrtKernelRegistry),
    pub kernel_registry_add_kernel: unsafe extern "system" fn(
        r: *mut OrtKernelRegistry,
        def: *const OrtKernelDef,
        create: KernelCreateFn,
        state: *mut c_void,
    ) -> Status,
    pub create_kernel_def_builder: unsafe extern "system" fn(out: *mut *mut OrtKernelDefBuilder) -> Status,
    pub release_kernel_def_builder: unsafe extern "system" fn(b: *mut OrtKernelDefBuilder),
    pub kernel_def_builder_set_operator_type:
        unsafe extern "system" fn(b: *mut OrtKernelDefBuilder, op_type: *const c_char) -> Status,
    pub kernel_def_builder_set_domain:
        unsafe extern "system" fn(b: *mut OrtKernelDefBuilder, domain: *const c_char) -> Status,
    pub kernel_def_builder_set_since_version:
        unsafe extern "system" fn(b: *mut OrtKernelDefBuilder, start: i32, end: i32) -> Status,
    pub kernel_def_builder_set_execution_provider:
        unsafe extern "system" fn(b: *mut OrtKernelDefBuilder, ep: *const c_char) -> Status,
    pub kernel_def_builder_set_input_mem_type:
        unsafe extern "system" fn(b: *mut OrtKernelDefBuilder, index: usize, mem: ort_sys::OrtMemType) -> Status,
    pub _unused_28: Option<unsafe extern "system" fn()>,
    pub kernel_def_builder_add_type_constraint: unsafe extern "system" fn(
        b: *mut OrtKernelDefBuilder,
        arg: *const c_char,
        types: *const *const OrtDataType,
        n: usize,
    ) -> Status,
    /// Entries 30..=31: input/output aliases.
    pub _unused_30_31: [Option<unsafe extern "system" fn()>; 2],
    pub kernel_def_builder_build:
        unsafe extern "system" fn(b: *mut OrtKernelDefBuilder, out: *mut *mut OrtKernelDef) -> Status,
    pub release_kernel_def: unsafe extern "system" fn(d: *mut OrtKernelDef),
    pub kernel_def_get_operator_type: unsafe extern "system" fn(d: *const OrtKernelDef) -> *const c_char,
    pub kernel_def_get_domain: unsafe extern "system" fn(d: *const OrtKernelDef) -> *const c_char,
    pub kernel_def_get_since_version:
        unsafe extern "system" fn(d: *const OrtKernelDef, start: *mut i32, end: *mut i32) -> Status,
    pub kernel_def_get_execution_provider: unsafe extern "system" fn(d: *const OrtKernelDef) -> *const c_char,
    /// Entries 38..=39: kernel-def mem types.
    pub _unused_38_39: [Option<unsafe extern "system" fn()>; 2],
    pub get_tensor_data_type:
        unsafe extern "system" fn(elem: ort_sys::ONNXTensorElementDataType, out: *mut *const OrtDataType) -> Status,
    pub ep_graph_support_info_look_up_kernel: unsafe extern "system" fn(
        info: *mut OrtEpGraphSupportInfo,
        node: *const OrtNode,
        out: *mut *const OrtKernelDef,
    ) -> Status,
    /// Entries 42..=44: pre-packed weight cache, KernelInfo_GetEp, incompatibility details.
    pub _unused_42_44: [Option<unsafe extern "system" fn()>; 3],
    pub create_if_kernel:
        unsafe extern "system" fn(info: *const ort_sys::OrtKernelInfo, out: *mut *mut OrtKernelImpl) -> Status,
    pub create_loop_kernel: unsafe extern "system" fn(
        info: *const ort_sys::OrtKernelInfo,
        helper: *mut OrtLoopKernelHelper,
        out: *mut *mut OrtKernelImpl,
    ) -> Status,
    pub create_scan_kernel: unsafe extern "system" fn(
        info: *const ort_sys::OrtKernelInfo,
        helper: *mut OrtScanKernelHelper,
        out: *mut *mut OrtKernelImpl,
    ) -> Status,
    pub release_kernel_impl: unsafe extern "system" fn(k: *mut OrtKernelImpl),
}

/// Where the profiling entries start in `OrtEpApi` (appended in 1.25).
pub const EP_API_PROFILING_INDEX: usize = 65;

/// Entries 65 to 72 of `OrtEpApi` (1.25+), read only when `GetApi(25)` answers: the
/// profiling events. ORT copies an event into the container, so the EP releases its own.
#[repr(C)]
pub struct OrtEpApiProfiling {
    pub create_profiling_event: unsafe extern "system" fn(
        category: i32,
        process_id: i32,
        thread_id: i32,
        name: *const c_char,
        timestamp_us: i64,
        duration_us: i64,
        arg_keys: *const *const c_char,
        arg_values: *const *const c_char,
        num_args: usize,
        out: *mut *mut OrtProfilingEvent,
    ) -> Status,
    pub release_profiling_event: unsafe extern "system" fn(event: *mut OrtProfilingEvent),
    pub profiling_event_get_category: Option<unsafe extern "system" fn()>,
    pub profiling_event_get_name: Option<unsafe extern "system" fn()>,
    pub profiling_event_get_timestamp_us: Option<unsafe extern "system" fn()>,
    pub profiling_event_get_duration_us: Option<unsafe extern "system" fn()>,
    pub profiling_event_get_arg_value: Option<unsafe extern "system" fn()>,
    pub profiling_events_container_add_events: unsafe extern "system" fn(
        container: *mut OrtProfilingEventsContainer,
        events: *const *const OrtProfilingEvent,
        num_events: usize,
    ) -> Status,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    const PTR: usize = size_of::<usize>();

    #[test]
    fn slot_offsets_match_the_header_order() {
        // version (padded to a pointer) + N slots
        assert_eq!(size_of::<OrtEp>(), PTR * 17);
        assert_eq!(offset_of!(OrtEp, get_kernel_registry), PTR * 13);
        assert_eq!(offset_of!(OrtEp, compile), PTR * 3);
        assert_eq!(offset_of!(OrtEp, get_compiled_model_compatibility_info), PTR * 12);
        // 0x80 in the 1.32 library's GetProfiler.
        assert_eq!(offset_of!(OrtEp, create_profiler), 0x80);
        // 0x10 and 0x28 in its StartProfiling and EndProfiling.
        assert_eq!(offset_of!(OrtEpProfilerImpl, start_profiling), 0x10);
        assert_eq!(offset_of!(OrtEpProfilerImpl, end_profiling), 0x28);
        assert_eq!(size_of::<OrtEpApiProfiling>(), PTR * 8);
        assert_eq!(offset_of!(OrtEpApiProfiling, profiling_events_container_add_events), PTR * (72 - 65));
        assert_eq!(size_of::<OrtEpFactory>(), PTR * 14);
        assert_eq!(offset_of!(OrtEpFactory, create_ep), PTR * 4);
        assert_eq!(offset_of!(OrtEpFactory, create_data_transfer), PTR * 11);
        assert_eq!(offset_of!(OrtEpFactory, is_stream_aware), PTR * 12);
        assert_eq!(size_of::<OrtNodeComputeInfo>(), PTR * 4);
        assert_eq!(offset_of!(OrtEpApi, node_compute_context_node_name), PTR * 4);
        assert_eq!(offset_of!(OrtEpApi, create_kernel_registry), PTR * 18);
        assert_eq!(offset_of!(OrtEpApi, kernel_def_builder_set_input_mem_type), PTR * 27);
        assert_eq!(offset_of!(OrtEpApi, kernel_def_builder_add_type_constraint), PTR * 29);
        assert_eq!(offset_of!(OrtEpApi, kernel_def_builder_build), PTR * 32);
        assert_eq!(offset_of!(OrtEpApi, get_tensor_data_type), PTR * 40);
        assert_eq!(offset_of!(OrtEpApi, kernel_def_get_execution_provider), PTR * 37);
        assert_eq!(offset_of!(OrtEpApi, ep_graph_support_info_look_up_kernel), PTR * 41);
        assert_eq!(offset_of!(OrtEpApi, create_if_kernel), PTR * 45);
        assert_eq!(size_of::<OrtEpApi>(), PTR * 49);
        assert_eq!(size_of::<OrtLoopKernelHelper>(), PTR * 3);
        assert_eq!(size_of::<OrtNodeFusionOptions>(), 8);
    }
}
