//! The EP-side structs of ORT's plugin ABI, written by hand (ort-sys declares `OrtEpApi`
//! as opaque and has none of the others). Layouts follow
//! `onnxruntime_ep_c_api.h`; `tests/abi_layout.rs` checks them against the running 1.32
//! library. We declare version 23 on every struct we fill and fill every 1.23 slot.

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

/// `OrtEp` as of 1.23 (12 slots after the version). 1.24 appended `GetKernelRegistry`,
/// which ORT does not read from a struct that declares 23.
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

/// The first entries of `OrtEpApi`, the only ones Rivet calls. ORT owns the table (78
/// entries in 1.32); we only ever read through a pointer to it.
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    const PTR: usize = size_of::<usize>();

    #[test]
    fn slot_offsets_match_the_header_order() {
        // version (padded to a pointer) + N slots
        assert_eq!(size_of::<OrtEp>(), PTR * 13);
        assert_eq!(offset_of!(OrtEp, compile), PTR * 3);
        assert_eq!(offset_of!(OrtEp, get_compiled_model_compatibility_info), PTR * 12);
        assert_eq!(size_of::<OrtEpFactory>(), PTR * 14);
        assert_eq!(offset_of!(OrtEpFactory, create_ep), PTR * 4);
        assert_eq!(offset_of!(OrtEpFactory, create_data_transfer), PTR * 11);
        assert_eq!(offset_of!(OrtEpFactory, is_stream_aware), PTR * 12);
        assert_eq!(size_of::<OrtNodeComputeInfo>(), PTR * 4);
        assert_eq!(offset_of!(OrtEpApi, node_compute_context_node_name), PTR * 4);
        assert_eq!(size_of::<OrtNodeFusionOptions>(), 8);
    }
}
