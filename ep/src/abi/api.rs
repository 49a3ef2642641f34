//! The one choke point for ORT calls: every `OrtApi` / `OrtEpApi` member Rivet uses is
//! called from exactly one small method here, so counting and coverage are structural.
//! Each method calls exactly one member; statuses are turned into `Error`s by `check`.

use std::ffi::{c_char, c_void, CStr, CString};
use std::ptr;

use ort_sys::{
    ONNXTensorElementDataType, ONNXType, OrtApi, OrtApiBase, OrtErrorCode, OrtGraph, OrtHardwareDevice,
    OrtHardwareDeviceType, OrtKernelContext, OrtNode, OrtOpAttr, OrtOpAttrType, OrtSessionOptions, OrtStatus,
    OrtTensorTypeAndShapeInfo, OrtTypeInfo, OrtValue, OrtValueInfo,
};

use super::structs::{
    KernelCreateFn, OrtDataType, OrtEpApi, OrtEpApiProfiling, OrtEpDevice, OrtEpFactory, OrtEpGraphSupportInfo,
    OrtKernelDef, OrtKernelDefBuilder, OrtKernelImpl, OrtKernelRegistry, OrtLoopKernelHelper, OrtNodeComputeContext,
    OrtNodeFusionOptions, OrtProfilingEvent, OrtProfilingEventsContainer, OrtScanKernelHelper, EP_API_PROFILING_INDEX,
    PROFILING_CATEGORY_KERNEL,
};
use crate::error::{Error, ErrorKind, Result};
use crate::probe;
use rivet_macros::ort_ffi;

mod kernels;

/// The `OrtApi` version Rivet asks for first: 24 adds
/// `GetTensorElementTypeAndShapeDataReference` (type and shape in one call).
pub const ORT_API_VERSION: u32 = 24;
/// The oldest version Rivet runs on (the plugin EP API of 1.23), reading input
/// metadata through the older five-call route.
pub const ORT_API_VERSION_MIN: u32 = 23;

/// ORT's function tables, valid for the life of the library.
#[derive(Clone, Copy)]
pub struct Api {
    /// For a version-23 table, only the members of version 23 are ever read.
    ort: &'static OrtApi,
    ep: &'static OrtEpApi,
    version: u32,
    /// `OrtEpApi`'s profiling entries, when the runtime is 1.25 or newer.
    profiling: Option<&'static OrtEpApiProfiling>,
}

/// The `OrtApi` version whose runtime has the plugin-EP profiling API.
const PROFILING_API_VERSION: u32 = 25;

// SAFETY: the tables are immutable function-pointer tables owned by ORT for the process.
unsafe impl Send for Api {}
// SAFETY: as above; nothing in them is mutated.
unsafe impl Sync for Api {}

fn cstr_to_string(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: ORT returns NUL-terminated strings that live at least for this call.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

#[ort_ffi]
fn get_api(base: *const OrtApiBase, version: u32) -> *const OrtApi {
    // SAFETY: ORT passes a valid OrtApiBase to CreateEpFactories.
    unsafe { ((*base).GetApi)(version) }
}

#[ort_ffi]
fn get_ep_api(ort: &OrtApi) -> *const ort_sys::OrtEpApi {
    // SAFETY: a valid OrtApi table of version >= 22.
    unsafe { (ort.GetEpApi)() }
}

impl Api {
    /// Gets the tables from the base ORT hands to `CreateEpFactories`.
    pub(crate) fn from_base(base: *const OrtApiBase) -> Result<Api> {
        if base.is_null() {
            return Err(Error::ep("OrtApiBase is null"));
        }
        let mut found = None;
        for version in [ORT_API_VERSION, ORT_API_VERSION_MIN] {
            // SAFETY: GetApi returns null or a table that lives as long as the library.
            if let Some(table) = unsafe { get_api(base, version).as_ref() } {
                found = Some((table, version));
                break;
            }
        }
        let (ort, version) = found.ok_or_else(|| {
            Error::ep(format_args!(
                "this ONNX Runtime provides neither OrtApi version {ORT_API_VERSION} nor {ORT_API_VERSION_MIN}: Rivet needs ONNX Runtime 1.23 or newer"
            ))
        })?;
        let ep_table = get_ep_api(ort);
        // SAFETY: GetEpApi returns ORT's static OrtEpApi table (API >= 22).
        let ep = unsafe { ep_table.cast::<OrtEpApi>().as_ref() }
            .ok_or_else(|| Error::ep("OrtApi::GetEpApi returned null"))?;
        // A runtime that answers GetApi(25) is 1.25 or newer: its OrtEpApi holds the
        // profiling entries from index 65 on.
        let profiling = if get_api(base, PROFILING_API_VERSION).is_null() {
            None
        } else {
            // SAFETY: the table of a 1.25+ runtime has more than 72 entries (78 in 1.32),
            // function pointers in order; entries 65..=72 are the profiling ones.
            unsafe { ep_table.cast::<*const c_void>().add(EP_API_PROFILING_INDEX).cast::<OrtEpApiProfiling>().as_ref() }
        };
        Ok(Api { ort, ep, version, profiling })
    }

    /// Wraps tables directly: for tests with a fake `OrtApi`.
    pub fn from_tables(ort: &'static OrtApi, ep: &'static OrtEpApi) -> Api {
        Api { ort, ep, version: ORT_API_VERSION, profiling: None }
    }

    /// As `from_tables`, claiming an older `OrtApi` version (tests of the fallbacks).
    pub fn from_tables_version(ort: &'static OrtApi, ep: &'static OrtEpApi, version: u32) -> Api {
        Api { ort, ep, version, profiling: None }
    }

    /// Whether the runtime lets an EP add events to its profile (ORT 1.25+).
    pub fn has_profiling(&self) -> bool {
        self.profiling.is_some()
    }

    fn profiling_table(&self) -> Result<&'static OrtEpApiProfiling> {
        self.profiling.ok_or_else(|| Error::ep("this ONNX Runtime has no plugin-EP profiling API (1.25+)"))
    }

    /// An event for ORT's profile (category KERNEL), with string arguments.
    #[ort_ffi]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create_profiling_event(
        &self,
        thread: i32,
        name: &CStr,
        ts_us: i64,
        dur_us: i64,
        keys: &[*const c_char],
        values: &[*const c_char],
    ) -> Result<*mut OrtProfilingEvent> {
        let ep = self.profiling_table()?;
        let n = keys.len().min(values.len());
        let pid = std::process::id() as i32;
        let mut out = ptr::null_mut();
        // SAFETY: name and every key and value are NUL-terminated strings alive for the
        // call (ORT copies them); `n` entries of each array are valid.
        let status = unsafe {
            (ep.create_profiling_event)(
                PROFILING_CATEGORY_KERNEL,
                pid,
                thread,
                name.as_ptr(),
                ts_us,
                dur_us,
                keys.as_ptr(),
                values.as_ptr(),
                n,
                &mut out,
            )
        };
        self.check(ort_sys::OrtStatusPtr(status))?;
        Ok(out)
    }

    #[ort_ffi]
    pub(crate) fn release_profiling_event(&self, event: *mut OrtProfilingEvent) {
        let Ok(ep) = self.profiling_table() else { return };
        // SAFETY: an event made by create_profiling_event, released once.
        unsafe { (ep.release_profiling_event)(event) }
    }

    /// Hands events to ORT's container (it copies them).
    #[ort_ffi]
    pub(crate) fn add_profiling_events(
        &self,
        container: *mut OrtProfilingEventsContainer,
        events: &[*mut OrtProfilingEvent],
    ) -> Result<()> {
        let ep = self.profiling_table()?;
        // SAFETY: the container ORT passed to EndProfiling; live events.
        let status =
            unsafe { (ep.profiling_events_container_add_events)(container, events.as_ptr().cast(), events.len()) };
        self.check(ort_sys::OrtStatusPtr(status))
    }

    /// Whether `GetTensorElementTypeAndShapeDataReference` exists (API 24).
    pub fn has_shape_reference(&self) -> bool {
        self.version >= 24
    }

    /// True when both come from the same ORT instance.
    pub fn same_as(&self, other: &Api) -> bool {
        std::ptr::eq(self.ort, other.ort)
    }

    // ---- statuses ----

    /// Creates a status to hand to ORT (which releases it).
    #[ort_ffi]
    pub(crate) fn create_status(&self, err: &Error) -> *mut OrtStatus {
        let code = match err.kind {
            ErrorKind::InvalidArgument => OrtErrorCode::ORT_INVALID_ARGUMENT,
            ErrorKind::EpFail | ErrorKind::Ort => OrtErrorCode::ORT_EP_FAIL,
        };
        probe::record_status();
        let msg = CString::new(err.message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: msg is a valid C string; ORT copies it.
        unsafe { (self.ort.CreateStatus)(code, msg.as_ptr()) }.0
    }

    #[ort_ffi]
    fn error_message(&self, status: *mut OrtStatus) -> String {
        // SAFETY: status is a non-null status returned by ORT.
        cstr_to_string(unsafe { (self.ort.GetErrorMessage)(status) })
    }

    /// Every status ORT hands Rivet is released here, once: counting it here counts
    /// them all.
    #[ort_ffi]
    fn release_status(&self, status: *mut OrtStatus) {
        probe::record_status();
        // SAFETY: status is non-null, owned by us, released once.
        unsafe { (self.ort.ReleaseStatus)(status) }
    }

    /// Turns a status ORT returned into a `Result`, releasing it.
    fn check(&self, status: ort_sys::OrtStatusPtr) -> Result<()> {
        if status.0.is_null() {
            return Ok(());
        }
        let msg = self.error_message(status.0);
        self.release_status(status.0);
        Err(Error::ort(msg))
    }

    // ---- devices and fusion ----

    #[ort_ffi]
    pub(crate) fn hardware_device_is_cpu(&self, device: *const OrtHardwareDevice) -> bool {
        // SAFETY: ORT passes valid devices.
        let t = unsafe { (self.ort.HardwareDevice_Type)(device) };
        t == OrtHardwareDeviceType::OrtHardwareDeviceType_CPU
    }

    #[ort_ffi]
    pub(crate) fn create_ep_device(
        &self,
        factory: *mut OrtEpFactory,
        hw: *const OrtHardwareDevice,
    ) -> Result<*mut OrtEpDevice> {
        let mut out = ptr::null_mut();
        // SAFETY: factory and hw are valid; null metadata/options are allowed.
        let status = unsafe { (self.ep.create_ep_device)(factory, hw, ptr::null(), ptr::null(), &mut out) };
        self.check(ort_sys::OrtStatusPtr(status))?;
        Ok(out)
    }

    #[ort_ffi]
    pub(crate) fn add_nodes_to_fuse(&self, info: *mut OrtEpGraphSupportInfo, nodes: &[*const OrtNode]) -> Result<()> {
        let options = OrtNodeFusionOptions {
            ort_version_supported: super::structs::EP_STRUCT_VERSION,
            drop_constant_initializers: true,
        };
        // SAFETY: nodes are valid for this GetCapability call; options outlive the call.
        let status =
            unsafe { (self.ep.ep_graph_support_info_add_nodes_to_fuse)(info, nodes.as_ptr(), nodes.len(), &options) };
        self.check(ort_sys::OrtStatusPtr(status))
    }

    #[ort_ffi]
    pub(crate) fn add_single_node(&self, info: *mut OrtEpGraphSupportInfo, node: *const OrtNode) -> Result<()> {
        // SAFETY: info and node are valid for this GetCapability call.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.ep_graph_support_info_add_single_node)(info, node) }))
    }

    #[ort_ffi]
    pub(crate) fn node_compute_context_node_name(&self, ctx: *const OrtNodeComputeContext) -> String {
        // SAFETY: ctx is valid during CreateState.
        cstr_to_string(unsafe { (self.ep.node_compute_context_node_name)(ctx) })
    }

    // ---- session options ----

    /// Reads a session config entry, `None` when unset.
    #[ort_ffi]
    pub(crate) fn session_config_entry(&self, options: *const OrtSessionOptions, key: &CStr) -> Result<Option<String>> {
        let mut has = 0;
        // SAFETY: options valid for CreateEp; key is NUL-terminated.
        self.check(unsafe { (self.ort.HasSessionConfigEntry)(options, key.as_ptr(), &mut has) })?;
        if has == 0 {
            return Ok(None);
        }
        self.session_config_value(options, key).map(Some)
    }

    /// Writes `message` to ORT's log as a warning (a null logger writes nothing).
    #[ort_ffi]
    pub(crate) fn log_warning(&self, logger: *const ort_sys::OrtLogger, message: &str) -> Result<()> {
        if logger.is_null() {
            return Ok(());
        }
        let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: `logger` is the one ORT passed to CreateEp, valid for that call; the
        // strings are NUL-terminated and outlive it.
        self.check(unsafe {
            (self.ort.Logger_LogMessage)(
                logger,
                ort_sys::OrtLoggingLevel::ORT_LOGGING_LEVEL_WARNING,
                text.as_ptr(),
                c"rivet".as_ptr(),
                0,
                c"CreateEp".as_ptr(),
            )
        })
    }

    #[ort_ffi]
    fn session_config_value(&self, options: *const OrtSessionOptions, key: &CStr) -> Result<String> {
        let mut buf = vec![0u8; 256];
        loop {
            let mut size = buf.len();
            // SAFETY: buf has `size` writable bytes; ORT writes the NUL-terminated value or sets the needed size.
            let status =
                unsafe { (self.ort.GetSessionConfigEntry)(options, key.as_ptr(), buf.as_mut_ptr().cast(), &mut size) };
            if status.0.is_null() {
                buf.truncate(size.saturating_sub(1));
                return Ok(String::from_utf8_lossy(&buf).into_owned());
            }
            self.release_status(status.0);
            if size <= buf.len() {
                return Err(Error::ort(format_args!("GetSessionConfigEntry failed for {key:?}")));
            }
            buf.resize(size, 0);
        }
    }

    // ---- graphs ----

    #[ort_ffi]
    pub(crate) fn graph_num_nodes(&self, g: *const OrtGraph) -> Result<usize> {
        let mut n = 0;
        // SAFETY: g is valid for the callback.
        self.check(unsafe { (self.ort.Graph_GetNumNodes)(g, &mut n) })?;
        Ok(n)
    }
    #[ort_ffi]
    pub(crate) fn graph_nodes(&self, g: *const OrtGraph, out: &mut [*const OrtNode]) -> Result<()> {
        // SAFETY: out has out.len() slots.
        self.check(unsafe { (self.ort.Graph_GetNodes)(g, out.as_mut_ptr(), out.len()) })
    }
    #[ort_ffi]
    pub(crate) fn graph_num_initializers(&self, g: *const OrtGraph) -> Result<usize> {
        let mut n = 0;
        // SAFETY: g is valid for the callback.
        self.check(unsafe { (self.ort.Graph_GetNumInitializers)(g, &mut n) })?;
        Ok(n)
    }
    #[ort_ffi]
    pub(crate) fn graph_initializers(&self, g: *const OrtGraph, out: &mut [*const OrtValueInfo]) -> Result<()> {
        // SAFETY: out has out.len() slots.
        self.check(unsafe { (self.ort.Graph_GetInitializers)(g, out.as_mut_ptr(), out.len()) })
    }

    // ---- nodes ----

    #[ort_ffi]
    pub(crate) fn node_name(&self, n: *const OrtNode) -> Result<String> {
        let mut p = ptr::null();
        // SAFETY: n is valid for the callback.
        self.check(unsafe { (self.ort.Node_GetName)(n, &mut p) })?;
        Ok(cstr_to_string(p))
    }
    #[ort_ffi]
    pub(crate) fn node_op_type(&self, n: *const OrtNode) -> Result<String> {
        let mut p = ptr::null();
        // SAFETY: n is valid for the callback.
        self.check(unsafe { (self.ort.Node_GetOperatorType)(n, &mut p) })?;
        Ok(cstr_to_string(p))
    }
    #[ort_ffi]
    pub(crate) fn node_domain(&self, n: *const OrtNode) -> Result<String> {
        let mut p = ptr::null();
        // SAFETY: n is valid for the callback.
        self.check(unsafe { (self.ort.Node_GetDomain)(n, &mut p) })?;
        Ok(cstr_to_string(p))
    }
    #[ort_ffi]
    pub(crate) fn node_since_version(&self, n: *const OrtNode) -> Result<i32> {
        let mut v = 0;
        // SAFETY: n is valid for the callback.
        self.check(unsafe { (self.ort.Node_GetSinceVersion)(n, &mut v) })?;
        Ok(v)
    }
    /// The EP a node is already assigned to ("" when none).
    #[ort_ffi]
    pub(crate) fn node_ep_name(&self, n: *const OrtNode) -> Result<String> {
        let mut p = ptr::null();
        // SAFETY: n is valid for the callback.
        self.check(unsafe { (self.ort.Node_GetEpName)(n, &mut p) })?;
        Ok(cstr_to_string(p))
    }
    #[ort_ffi]
    pub(crate) fn node_num_inputs(&self, n: *const OrtNode) -> Result<usize> {
        let mut c = 0;
        // SAFETY: n is valid for the callback.
        self.check(unsafe { (self.ort.Node_GetNumInputs)(n, &mut c) })?;
        Ok(c)
    }
    #[ort_ffi]
    pub(crate) fn node_inputs(&self, n: *const OrtNode, out: &mut [*const OrtValueInfo]) -> Result<()> {
        // SAFETY: out has out.len() slots.
        self.check(unsafe { (self.ort.Node_GetInputs)(n, out.as_mut_ptr(), out.len()) })
    }
    #[ort_ffi]
    pub(crate) fn node_num_subgraphs(&self, n: *const OrtNode) -> Result<usize> {
        let mut c = 0;
        // SAFETY: n is valid for the callback.
        self.check(unsafe { (self.ort.Node_GetNumSubgraphs)(n, &mut c) })?;
        Ok(c)
    }
    #[ort_ffi]
    pub(crate) fn node_num_implicit_inputs(&self, n: *const OrtNode) -> Result<usize> {
        let mut c = 0;
        // SAFETY: n is valid for the callback.
        self.check(unsafe { (self.ort.Node_GetNumImplicitInputs)(n, &mut c) })?;
        Ok(c)
    }
    /// The values of enclosing graphs that the node's subgraphs read (its implicit inputs:
    /// an If branch reading a value the outer graph computes).
    #[ort_ffi]
    pub(crate) fn node_implicit_inputs(&self, n: *const OrtNode, out: &mut [*const OrtValueInfo]) -> Result<()> {
        // SAFETY: out has out.len() slots.
        self.check(unsafe { (self.ort.Node_GetImplicitInputs)(n, out.as_mut_ptr(), out.len()) })
    }
    /// The node's subgraphs and the names of the attributes holding them.
    #[ort_ffi]
    pub(crate) fn node_subgraphs(
        &self,
        n: *const OrtNode,
        graphs: &mut [*const OrtGraph],
        names: &mut [*const c_char],
    ) -> Result<()> {
        if graphs.len() != names.len() {
            return Err(Error::ep("node_subgraphs: mismatched slices"));
        }
        // SAFETY: both slices have graphs.len() slots.
        self.check(unsafe { (self.ort.Node_GetSubgraphs)(n, graphs.as_mut_ptr(), graphs.len(), names.as_mut_ptr()) })
    }
    #[ort_ffi]
    pub(crate) fn node_num_outputs(&self, n: *const OrtNode) -> Result<usize> {
        let mut c = 0;
        // SAFETY: n is valid for the callback.
        self.check(unsafe { (self.ort.Node_GetNumOutputs)(n, &mut c) })?;
        Ok(c)
    }
    #[ort_ffi]
    pub(crate) fn node_outputs(&self, n: *const OrtNode, out: &mut [*const OrtValueInfo]) -> Result<()> {
        // SAFETY: out has out.len() slots.
        self.check(unsafe { (self.ort.Node_GetOutputs)(n, out.as_mut_ptr(), out.len()) })
    }
    #[ort_ffi]
    pub(crate) fn node_num_attributes(&self, n: *const OrtNode) -> Result<usize> {
        let mut c = 0;
        // SAFETY: n is valid for the callback.
        self.check(unsafe { (self.ort.Node_GetNumAttributes)(n, &mut c) })?;
        Ok(c)
    }
    #[ort_ffi]
    pub(crate) fn node_attributes(&self, n: *const OrtNode, out: &mut [*const OrtOpAttr]) -> Result<()> {
        // SAFETY: out has out.len() slots.
        self.check(unsafe { (self.ort.Node_GetAttributes)(n, out.as_mut_ptr(), out.len()) })
    }
    #[ort_ffi]
    pub(crate) fn op_attr_name(&self, a: *const OrtOpAttr) -> Result<String> {
        let mut p = ptr::null();
        // SAFETY: a is valid for the callback.
        self.check(unsafe { (self.ort.OpAttr_GetName)(a, &mut p) })?;
        Ok(cstr_to_string(p))
    }
    #[ort_ffi]
    pub(crate) fn op_attr_type(&self, a: *const OrtOpAttr) -> Result<OrtOpAttrType> {
        let mut t = OrtOpAttrType::ORT_OP_ATTR_UNDEFINED;
        // SAFETY: a is valid for the callback.
        self.check(unsafe { (self.ort.OpAttr_GetType)(a, &mut t) })?;
        Ok(t)
    }
    /// A tensor attribute as an OrtValue the caller releases with `release_value`.
    #[ort_ffi]
    pub(crate) fn op_attr_tensor(&self, a: *const OrtOpAttr) -> Result<*mut OrtValue> {
        let mut v = ptr::null_mut();
        // SAFETY: a is valid for the callback; ORT creates a value we own.
        self.check(unsafe { (self.ort.OpAttr_GetTensorAttributeAsOrtValue)(a, &mut v) })?;
        Ok(v)
    }
    #[ort_ffi]
    pub(crate) fn release_value(&self, v: *mut OrtValue) {
        if !v.is_null() {
            // SAFETY: a value ORT created for us (op_attr_tensor), released once.
            unsafe { (self.ort.ReleaseValue)(v) }
        }
    }
    /// Reads an attribute's bytes. Returns the size ORT reports; when it exceeds
    /// `buf.len()` nothing was written and the caller retries with a larger buffer.
    #[ort_ffi]
    pub(crate) fn read_op_attr(&self, a: *const OrtOpAttr, t: OrtOpAttrType, buf: &mut [u8]) -> Result<usize> {
        let mut size = 0;
        // SAFETY: buf has buf.len() writable bytes.
        let status = unsafe { (self.ort.ReadOpAttr)(a, t, buf.as_mut_ptr().cast(), buf.len(), &mut size) };
        if !status.0.is_null() && size > buf.len() {
            self.release_status(status.0);
            return Ok(size);
        }
        self.check(status)?;
        Ok(size)
    }

    // ---- value infos ----

    #[ort_ffi]
    pub(crate) fn value_info_name(&self, v: *const OrtValueInfo) -> Result<String> {
        let mut p = ptr::null();
        // SAFETY: v is valid for the callback.
        self.check(unsafe { (self.ort.GetValueInfoName)(v, &mut p) })?;
        Ok(cstr_to_string(p))
    }
    #[ort_ffi]
    pub(crate) fn value_info_type_info(&self, v: *const OrtValueInfo) -> Result<*const OrtTypeInfo> {
        let mut p = ptr::null();
        // SAFETY: v is valid; the type info is owned by the value info.
        self.check(unsafe { (self.ort.GetValueInfoTypeInfo)(v, &mut p) })?;
        Ok(p)
    }
    #[ort_ffi]
    pub(crate) fn type_info_onnx_type(&self, t: *const OrtTypeInfo) -> Result<ONNXType> {
        let mut o = ONNXType::ONNX_TYPE_UNKNOWN;
        // SAFETY: t is valid.
        self.check(unsafe { (self.ort.GetOnnxTypeFromTypeInfo)(t, &mut o) })?;
        Ok(o)
    }
    #[ort_ffi]
    pub(crate) fn type_info_tensor_info(&self, t: *const OrtTypeInfo) -> Result<*const OrtTensorTypeAndShapeInfo> {
        let mut p = ptr::null();
        // SAFETY: t is a tensor type info; the result is owned by it.
        self.check(unsafe { (self.ort.CastTypeInfoToTensorInfo)(t, &mut p) })?;
        Ok(p)
    }
    #[ort_ffi]
    pub(crate) fn tensor_info_element_type(&self, t: *const OrtTensorTypeAndShapeInfo) -> Result<i32> {
        let mut e = ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
        // SAFETY: t is valid.
        self.check(unsafe { (self.ort.GetTensorElementType)(t, &mut e) })?;
        Ok(e as i32)
    }
    /// False when the model gives no shape at all (unknown rank). API 24; on 23 every
    /// rank-0 answer is taken as a scalar.
    #[ort_ffi]
    pub(crate) fn tensor_info_has_shape(&self, t: *const OrtTensorTypeAndShapeInfo) -> bool {
        if !self.has_shape_reference() {
            return true;
        }
        // SAFETY: t is valid; the member exists from API 24 on (checked above).
        unsafe { (self.ort.TensorTypeAndShape_HasShape)(t) }
    }

    #[ort_ffi]
    pub(crate) fn tensor_info_rank(&self, t: *const OrtTensorTypeAndShapeInfo) -> Result<usize> {
        let mut n = 0;
        // SAFETY: t is valid.
        self.check(unsafe { (self.ort.GetDimensionsCount)(t, &mut n) })?;
        Ok(n)
    }
    #[ort_ffi]
    pub(crate) fn tensor_info_dims(&self, t: *const OrtTensorTypeAndShapeInfo, out: &mut [i64]) -> Result<()> {
        // SAFETY: out has out.len() slots.
        self.check(unsafe { (self.ort.GetDimensions)(t, out.as_mut_ptr(), out.len()) })
    }
    #[ort_ffi]
    pub(crate) fn tensor_info_symbolic_dims(
        &self,
        t: *const OrtTensorTypeAndShapeInfo,
        out: &mut [*const c_char],
    ) -> Result<()> {
        // SAFETY: out has out.len() slots.
        self.check(unsafe { (self.ort.GetSymbolicDimensions)(t, out.as_mut_ptr(), out.len()) })
    }
    #[ort_ffi]
    pub(crate) fn value_info_is_constant_initializer(&self, v: *const OrtValueInfo) -> Result<bool> {
        let mut b = false;
        // SAFETY: v is valid.
        self.check(unsafe { (self.ort.ValueInfo_IsConstantInitializer)(v, &mut b) })?;
        Ok(b)
    }
    #[ort_ffi]
    pub(crate) fn value_info_is_from_outer_scope(&self, v: *const OrtValueInfo) -> Result<bool> {
        let mut b = false;
        // SAFETY: v is valid.
        self.check(unsafe { (self.ort.ValueInfo_IsFromOuterScope)(v, &mut b) })?;
        Ok(b)
    }
    #[ort_ffi]
    pub(crate) fn value_info_initializer_value(&self, v: *const OrtValueInfo) -> Result<*const OrtValue> {
        let mut p = ptr::null();
        // SAFETY: v is valid; the value is owned by the graph.
        self.check(unsafe { (self.ort.ValueInfo_GetInitializerValue)(v, &mut p) })?;
        Ok(p)
    }

    // ---- tensors ----

    /// Element type and a borrowed shape in one call (API 24). A scalar's shape comes
    /// back as a null pointer with count 0, which maps to an empty slice.
    #[ort_ffi]
    pub(crate) fn tensor_type_and_shape_ref<'a>(&self, v: *const OrtValue) -> Result<(i32, &'a [i64])> {
        let mut e = ONNXTensorElementDataType::ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
        let mut dims: *const i64 = ptr::null();
        let mut count = 0usize;
        // SAFETY: v is a valid tensor value for this Compute.
        self.check(unsafe { (self.ort.GetTensorElementTypeAndShapeDataReference)(v, &mut e, &mut dims, &mut count) })?;
        let shape = if dims.is_null() || count == 0 {
            &[][..]
        } else {
            // SAFETY: ORT returns `count` dims that live as long as the value.
            unsafe { std::slice::from_raw_parts(dims, count) }
        };
        Ok((e as i32, shape))
    }
    // The five-call route of API 23: a type-and-shape object per input.

    #[ort_ffi]
    pub(crate) fn tensor_type_and_shape(&self, v: *const OrtValue) -> Result<*mut OrtTensorTypeAndShapeInfo> {
        let mut p = ptr::null_mut();
        // SAFETY: v is a valid tensor value; the info is released by `release_tensor_info`.
        self.check(unsafe { (self.ort.GetTensorTypeAndShape)(v, &mut p) })?;
        Ok(p)
    }

    #[ort_ffi]
    pub(crate) fn release_tensor_info(&self, info: *mut OrtTensorTypeAndShapeInfo) {
        // SAFETY: made by GetTensorTypeAndShape, released once.
        unsafe { (self.ort.ReleaseTensorTypeAndShapeInfo)(info) }
    }

    #[ort_ffi]
    pub(crate) fn tensor_data(&self, v: *const OrtValue) -> Result<*const c_void> {
        let mut p = ptr::null();
        // SAFETY: v is a valid tensor value.
        self.check(unsafe { (self.ort.GetTensorData)(v, &mut p) })?;
        Ok(p)
    }
    #[ort_ffi]
    pub(crate) fn tensor_mutable_data(&self, v: *mut OrtValue) -> Result<*mut c_void> {
        let mut p = ptr::null_mut();
        // SAFETY: v is a valid output tensor.
        self.check(unsafe { (self.ort.GetTensorMutableData)(v, &mut p) })?;
        Ok(p)
    }

    // ---- kernel context ----

    #[ort_ffi]
    pub(crate) fn kernel_input(&self, ctx: *const OrtKernelContext, i: usize) -> Result<*const OrtValue> {
        let mut p = ptr::null();
        // SAFETY: ctx valid for this Compute.
        self.check(unsafe { (self.ort.KernelContext_GetInput)(ctx, i, &mut p) })?;
        Ok(p)
    }
    #[ort_ffi]
    pub(crate) fn kernel_output(&self, ctx: *mut OrtKernelContext, i: usize, dims: &[i64]) -> Result<*mut OrtValue> {
        let mut p = ptr::null_mut();
        // SAFETY: ctx valid for this Compute; dims has dims.len() entries.
        self.check(unsafe { (self.ort.KernelContext_GetOutput)(ctx, i, dims.as_ptr(), dims.len(), &mut p) })?;
        Ok(p)
    }
    #[ort_ffi]
    pub(crate) fn parallel_for(
        &self,
        ctx: *const OrtKernelContext,
        f: unsafe extern "C" fn(*mut c_void, usize),
        total: usize,
        data: *mut c_void,
    ) -> Result<()> {
        // SAFETY: f and data stay valid until ParallelFor returns (it is synchronous).
        self.check(unsafe { (self.ort.KernelContext_ParallelFor)(ctx, f, total, 0, data) })
    }
}
