//! The `OrtEpApi` members of 1.24's kernel registry: kernel definitions and ORT's own
//! If/Loop/Scan kernels, which `abi::control` registers under Rivet's name. Callers check
//! `Api::version() >= 24`. Same rule as the rest of `Api`: one member per method.

use super::*;

impl Api {
    // ---- kernel registry (OrtEpApi of 1.24; callers check `version() >= 24`) ----

    pub(crate) fn version(&self) -> u32 {
        self.version
    }
    #[ort_ffi]
    pub(crate) fn create_kernel_registry(&self) -> Result<*mut OrtKernelRegistry> {
        let mut r = ptr::null_mut();
        // SAFETY: a 1.24 OrtEpApi table (checked by the caller); out is a valid slot.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.create_kernel_registry)(&mut r) }))?;
        Ok(r)
    }
    #[ort_ffi]
    pub(crate) fn release_kernel_registry(&self, r: *mut OrtKernelRegistry) {
        // SAFETY: made by create_kernel_registry, released once.
        unsafe { (self.ep.release_kernel_registry)(r) }
    }
    #[ort_ffi]
    pub(crate) fn kernel_registry_add_kernel(
        &self,
        r: *mut OrtKernelRegistry,
        def: *const OrtKernelDef,
        create: KernelCreateFn,
        state: *mut c_void,
    ) -> Result<()> {
        // SAFETY: a live registry and kernel def; `state` outlives the registry.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.kernel_registry_add_kernel)(r, def, create, state) }))
    }
    #[ort_ffi]
    pub(crate) fn create_kernel_def_builder(&self) -> Result<*mut OrtKernelDefBuilder> {
        let mut b = ptr::null_mut();
        // SAFETY: a 1.24 OrtEpApi table; out is a valid slot.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.create_kernel_def_builder)(&mut b) }))?;
        Ok(b)
    }
    #[ort_ffi]
    pub(crate) fn release_kernel_def_builder(&self, b: *mut OrtKernelDefBuilder) {
        // SAFETY: made by create_kernel_def_builder, released once.
        unsafe { (self.ep.release_kernel_def_builder)(b) }
    }
    #[ort_ffi]
    pub(crate) fn kernel_def_builder_set_operator_type(&self, b: *mut OrtKernelDefBuilder, op: &CStr) -> Result<()> {
        // SAFETY: a live builder; op is NUL-terminated.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.kernel_def_builder_set_operator_type)(b, op.as_ptr()) }))
    }
    #[ort_ffi]
    pub(crate) fn kernel_def_builder_set_domain(&self, b: *mut OrtKernelDefBuilder, domain: &CStr) -> Result<()> {
        // SAFETY: a live builder; domain is NUL-terminated.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.kernel_def_builder_set_domain)(b, domain.as_ptr()) }))
    }
    #[ort_ffi]
    pub(crate) fn kernel_def_builder_set_since_version(
        &self,
        b: *mut OrtKernelDefBuilder,
        start: i32,
        end: i32,
    ) -> Result<()> {
        // SAFETY: a live builder.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.kernel_def_builder_set_since_version)(b, start, end) }))
    }
    #[ort_ffi]
    pub(crate) fn kernel_def_builder_set_execution_provider(
        &self,
        b: *mut OrtKernelDefBuilder,
        ep: &CStr,
    ) -> Result<()> {
        // SAFETY: a live builder; ep is NUL-terminated.
        self.check(ort_sys::OrtStatusPtr(unsafe {
            (self.ep.kernel_def_builder_set_execution_provider)(b, ep.as_ptr())
        }))
    }
    #[ort_ffi]
    pub(crate) fn kernel_def_builder_set_input_mem_type(
        &self,
        b: *mut OrtKernelDefBuilder,
        index: usize,
        mem: ort_sys::OrtMemType,
    ) -> Result<()> {
        // SAFETY: a live builder.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.kernel_def_builder_set_input_mem_type)(b, index, mem) }))
    }
    #[ort_ffi]
    pub(crate) fn kernel_def_builder_add_type_constraint(
        &self,
        b: *mut OrtKernelDefBuilder,
        arg: &CStr,
        types: &[*const OrtDataType],
    ) -> Result<()> {
        // SAFETY: a live builder; arg is NUL-terminated; types has types.len() entries.
        self.check(ort_sys::OrtStatusPtr(unsafe {
            (self.ep.kernel_def_builder_add_type_constraint)(b, arg.as_ptr(), types.as_ptr(), types.len())
        }))
    }
    /// ORT's data type for a tensor of `elem`; ORT owns it.
    #[ort_ffi]
    pub(crate) fn tensor_data_type(&self, elem: ONNXTensorElementDataType) -> Result<*const OrtDataType> {
        let mut t = ptr::null();
        // SAFETY: a 1.24 OrtEpApi table; out is a valid slot.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.get_tensor_data_type)(elem, &mut t) }))?;
        Ok(t)
    }
    #[ort_ffi]
    pub(crate) fn kernel_def_builder_build(&self, b: *mut OrtKernelDefBuilder) -> Result<*mut OrtKernelDef> {
        let mut d = ptr::null_mut();
        // SAFETY: a live builder; out is a valid slot.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.kernel_def_builder_build)(b, &mut d) }))?;
        Ok(d)
    }
    #[ort_ffi]
    pub(crate) fn release_kernel_def(&self, d: *mut OrtKernelDef) {
        // SAFETY: made by kernel_def_builder_build, released once.
        unsafe { (self.ep.release_kernel_def)(d) }
    }
    #[ort_ffi]
    pub(crate) fn kernel_def_operator_type(&self, d: *const OrtKernelDef) -> Result<String> {
        // SAFETY: a live kernel def.
        Ok(cstr_to_string(unsafe { (self.ep.kernel_def_get_operator_type)(d) }))
    }
    #[ort_ffi]
    pub(crate) fn kernel_def_execution_provider(&self, d: *const OrtKernelDef) -> Result<String> {
        // SAFETY: a live kernel def.
        Ok(cstr_to_string(unsafe { (self.ep.kernel_def_get_execution_provider)(d) }))
    }
    #[ort_ffi]
    pub(crate) fn kernel_def_since_version(&self, d: *const OrtKernelDef) -> Result<(i32, i32)> {
        let (mut a, mut b) = (0, 0);
        // SAFETY: a live kernel def; out slots are valid.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.kernel_def_get_since_version)(d, &mut a, &mut b) }))?;
        Ok((a, b))
    }
    /// The kernel of this EP's registry that ORT would pick for `node`, or null.
    #[ort_ffi]
    pub(crate) fn look_up_kernel(
        &self,
        info: *mut OrtEpGraphSupportInfo,
        node: *const OrtNode,
    ) -> Result<*const OrtKernelDef> {
        let mut d = ptr::null();
        // SAFETY: info and node are valid for this GetCapability call.
        self.check(ort_sys::OrtStatusPtr(unsafe {
            (self.ep.ep_graph_support_info_look_up_kernel)(info, node, &mut d)
        }))?;
        Ok(d)
    }
    #[ort_ffi]
    pub(crate) fn create_if_kernel(&self, info: *const ort_sys::OrtKernelInfo) -> Result<*mut OrtKernelImpl> {
        let mut k = ptr::null_mut();
        // SAFETY: info is the kernel info ORT passed to the create function.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.create_if_kernel)(info, &mut k) }))?;
        Ok(k)
    }
    /// ORT takes `helper` on success; on an error it stays the caller's.
    #[ort_ffi]
    pub(crate) fn create_loop_kernel(
        &self,
        info: *const ort_sys::OrtKernelInfo,
        helper: *mut OrtLoopKernelHelper,
    ) -> Result<*mut OrtKernelImpl> {
        let mut k = ptr::null_mut();
        // SAFETY: info is the kernel info ORT passed to the create function; helper is live.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.create_loop_kernel)(info, helper, &mut k) }))?;
        Ok(k)
    }
    /// ORT takes `helper` on success; on an error it stays the caller's.
    #[ort_ffi]
    pub(crate) fn create_scan_kernel(
        &self,
        info: *const ort_sys::OrtKernelInfo,
        helper: *mut OrtScanKernelHelper,
    ) -> Result<*mut OrtKernelImpl> {
        let mut k = ptr::null_mut();
        // SAFETY: info is the kernel info ORT passed to the create function; helper is live.
        self.check(ort_sys::OrtStatusPtr(unsafe { (self.ep.create_scan_kernel)(info, helper, &mut k) }))?;
        Ok(k)
    }
}
