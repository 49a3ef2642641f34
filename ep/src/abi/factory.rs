//! `CreateEpFactories` / `ReleaseEpFactory` and the `OrtEpFactory` callbacks.

use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use ort_sys::{
    OrtApiBase, OrtHardwareDevice, OrtKeyValuePairs, OrtLogger, OrtMemoryInfo, OrtSessionOptions, OrtStatus,
};

use super::api::Api;
use super::ep::Ep;
use super::guard;
use super::structs::{OrtEp, OrtEpDevice, OrtEpFactory, EP_STRUCT_VERSION};
use crate::error::Error;

/// The EP name: part of Rivet's public interface.
pub const EP_NAME: &std::ffi::CStr = c"Rivet";
const VENDOR: &std::ffi::CStr = c"Rivet";
const VERSION: &std::ffi::CStr =
    match std::ffi::CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(s) => s,
        Err(_) => panic!("version"),
    };

#[repr(C)]
pub(super) struct Factory {
    base: OrtEpFactory,
    pub(super) api: Api,
}

fn factory<'a>(this: *const OrtEpFactory) -> &'a Factory {
    // SAFETY: ORT passes back the pointer we created in CreateEpFactories; `base` is the
    // first field of the #[repr(C)] Factory.
    unsafe { &*this.cast::<Factory>() }
}

/// Entry point ORT looks up in the library.
///
/// # Safety
/// Called by ORT with valid pointers as documented in `onnxruntime_ep_c_api.h`.
#[no_mangle]
pub unsafe extern "system" fn CreateEpFactories(
    _registered_name: *const c_char,
    api_base: *const OrtApiBase,
    _logger: *const OrtLogger,
    factories: *mut *mut OrtEpFactory,
    max_factories: usize,
    num_factories: *mut usize,
) -> *mut OrtStatus {
    let result = catch_unwind(AssertUnwindSafe(|| Api::from_base(api_base)));
    let api = match result {
        Ok(Ok(api)) => api,
        // Without an OrtApi there is no way to create a status: say why on stderr and
        // report no factories.
        other => {
            let why = match other {
                Ok(Err(e)) => e.message,
                _ => "a panic while reading the OrtApi".to_string(),
            };
            eprintln!("Rivet: not loading: {why}");
            if !num_factories.is_null() {
                // SAFETY: ORT passes a valid out pointer.
                unsafe { *num_factories = 0 };
            }
            return ptr::null_mut();
        }
    };
    guard(&api, "CreateEpFactories", || {
        if max_factories < 1 || factories.is_null() || num_factories.is_null() {
            return Err(Error::ep("CreateEpFactories: no room for a factory"));
        }
        // One factory per ORT instance, kept for the life of the process: ORT may still
        // call a session's EP through it after the library was unregistered.
        let mut made = FACTORIES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(existing) = made.iter().find(|f| f.api.same_as(&api)) {
            // SAFETY: ORT gives room for max_factories >= 1 entries.
            unsafe {
                *factories = existing.as_ptr();
                *num_factories = 1;
            }
            return Ok(());
        }
        let f = Box::new(Factory {
            base: OrtEpFactory {
                ort_version_supported: EP_STRUCT_VERSION,
                get_name,
                get_vendor,
                get_supported_devices,
                create_ep,
                release_ep,
                get_vendor_id,
                get_version,
                validate_compiled_model_compatibility_info: None,
                create_allocator,
                release_allocator,
                create_data_transfer,
                is_stream_aware,
                create_sync_stream_for_device: None,
            },
            api,
        });
        let f: &'static Factory = Box::leak(f);
        made.push(StaticFactory(f));
        // SAFETY: ORT gives room for max_factories >= 1 entries.
        unsafe {
            *factories = f.as_ptr();
            *num_factories = 1;
        }
        Ok(())
    })
}

/// Releases a factory made by `CreateEpFactories`. Factories are kept (one per ORT
/// instance, a few hundred bytes) because sessions created through them may outlive the
/// registration; the next registration reuses it.
///
/// # Safety
/// `factory` must come from `CreateEpFactories`.
#[no_mangle]
pub unsafe extern "system" fn ReleaseEpFactory(_factory: *mut OrtEpFactory) -> *mut OrtStatus {
    ptr::null_mut()
}

struct StaticFactory(&'static Factory);
// SAFETY: a Factory is immutable after creation: a table of fn pointers and the Api.
unsafe impl Send for StaticFactory {}

impl std::ops::Deref for StaticFactory {
    type Target = Factory;
    fn deref(&self) -> &Factory {
        self.0
    }
}

static FACTORIES: std::sync::Mutex<Vec<StaticFactory>> = std::sync::Mutex::new(Vec::new());

impl Factory {
    fn as_ptr(&self) -> *mut OrtEpFactory {
        (self as *const Factory).cast_mut().cast()
    }
}

unsafe extern "system" fn get_name(_this: *const OrtEpFactory) -> *const c_char {
    EP_NAME.as_ptr()
}
unsafe extern "system" fn get_vendor(_this: *const OrtEpFactory) -> *const c_char {
    VENDOR.as_ptr()
}
unsafe extern "system" fn get_vendor_id(_this: *const OrtEpFactory) -> u32 {
    0
}
unsafe extern "system" fn get_version(_this: *const OrtEpFactory) -> *const c_char {
    VERSION.as_ptr()
}

unsafe extern "system" fn get_supported_devices(
    this: *mut OrtEpFactory,
    devices: *const *const OrtHardwareDevice,
    num_devices: usize,
    ep_devices: *mut *mut OrtEpDevice,
    max_ep_devices: usize,
    num_ep_devices: *mut usize,
) -> *mut OrtStatus {
    let f = factory(this);
    guard(&f.api, "GetSupportedDevices", || {
        // SAFETY: ORT passes `num_devices` valid device pointers.
        let devices =
            if devices.is_null() { &[][..] } else { unsafe { std::slice::from_raw_parts(devices, num_devices) } };
        let mut n = 0;
        for &d in devices {
            if n < max_ep_devices && f.api.hardware_device_is_cpu(d) {
                let dev = f.api.create_ep_device(this, d)?;
                // SAFETY: ep_devices has room for max_ep_devices entries.
                unsafe { *ep_devices.add(n) = dev };
                n += 1;
                break; // one EP device for the CPU
            }
        }
        // SAFETY: valid out pointer.
        unsafe { *num_ep_devices = n };
        Ok(())
    })
}

unsafe extern "system" fn create_ep(
    this: *mut OrtEpFactory,
    _devices: *const *const OrtHardwareDevice,
    _metadata: *const *const OrtKeyValuePairs,
    _num_devices: usize,
    session_options: *const OrtSessionOptions,
    logger: *const OrtLogger,
    ep: *mut *mut OrtEp,
) -> *mut OrtStatus {
    let f = factory(this);
    guard(&f.api, "CreateEp", || {
        let created = Ep::create(f.api, session_options, logger)?;
        // SAFETY: valid out pointer.
        unsafe { *ep = created };
        Ok(())
    })
}

unsafe extern "system" fn release_ep(_this: *mut OrtEpFactory, ep: *mut OrtEp) {
    Ep::release(ep);
}

unsafe extern "system" fn create_allocator(
    _this: *mut OrtEpFactory,
    _info: *const OrtMemoryInfo,
    _options: *const OrtKeyValuePairs,
    out: *mut *mut ort_sys::OrtAllocator,
) -> *mut OrtStatus {
    // Rivet uses ORT's default CPU allocator.
    if !out.is_null() {
        // SAFETY: valid out pointer.
        unsafe { *out = ptr::null_mut() };
    }
    ptr::null_mut()
}

unsafe extern "system" fn release_allocator(_this: *mut OrtEpFactory, _alloc: *mut ort_sys::OrtAllocator) {}

unsafe extern "system" fn create_data_transfer(_this: *mut OrtEpFactory, out: *mut *mut c_void) -> *mut OrtStatus {
    // CPU memory only: ORT needs no copies to or from Rivet.
    if !out.is_null() {
        // SAFETY: valid out pointer.
        unsafe { *out = ptr::null_mut() };
    }
    ptr::null_mut()
}

unsafe extern "system" fn is_stream_aware(_this: *const OrtEpFactory) -> bool {
    false
}
