//! The ABI layer: the only place with `unsafe`. ORT's structs, the wrapper through which
//! every ORT call goes, and the `extern "system"` callbacks, each of which catches
//! panics and turns errors into an `OrtStatus`.

pub mod api;
mod compute;
mod ep;
mod factory;
mod read;
pub mod structs;

use std::panic::{catch_unwind, AssertUnwindSafe};

use ort_sys::OrtStatus;

use crate::error::{Error, Result};
use api::Api;

pub use factory::{CreateEpFactories, ReleaseEpFactory};

/// Runs a callback body: `Ok` becomes a null status, an `Err` or a panic becomes a status
/// ORT owns. Nothing unwinds across the ABI.
fn guard(api: &Api, what: &str, body: impl FnOnce() -> Result<()>) -> *mut OrtStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(e)) => api.create_status(&e),
        Err(panic) => api.create_status(&Error::ep(format_args!("Rivet panicked in {what}: {}", panic_message(&panic)))),
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> &str {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "(no message)"
    }
}
