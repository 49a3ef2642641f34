//! The ABI layer: the only place with `unsafe`. ORT's structs, the wrapper through which
//! every ORT call goes, and the `extern "system"` callbacks, each of which catches
//! panics and turns errors into an `OrtStatus`.

pub mod api;
mod compute;
mod control;
mod ep;
mod factory;
pub mod pages;
#[cfg(feature = "probe")]
mod probe_exports;
mod profiler;
mod read;
pub mod structs;

use std::panic::{catch_unwind, AssertUnwindSafe};

use ort_sys::OrtStatus;

use crate::error::{Error, Result};
use api::Api;
use rivet_macros::{dispatch_phase, staging_log};

pub use compute::run_plan;
pub use factory::{CreateEpFactories, ReleaseEpFactory};

/// Runs a callback body: `Ok` becomes a null status, an `Err` or a panic becomes a status
/// ORT owns. Nothing unwinds across the ABI.
#[dispatch_phase(CallbackEntry)]
fn guard(api: &Api, what: &str, body: impl FnOnce() -> Result<()>) -> *mut OrtStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(e)) => status_crossing(api, &e),
        Err(panic) => {
            status_crossing(api, &Error::ep(format_args!("Rivet panicked in {what}: {}", panic_message(&panic))))
        }
    }
}

#[dispatch_phase(StatusCrossing)]
#[cold]
fn status_crossing(api: &Api, e: &Error) -> *mut OrtStatus {
    staging_log!("returning an error status: {}", e);
    api.create_status(e)
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
