//! `OrtEpProfilerImpl` (ORT 1.25+): Rivet's inner nodes in ORT's own profile. ORT
//! calls `StartProfiling` when its profiler starts and `EndProfiling` when it writes the
//! trace; in between, each fused node's Compute records its nodes (`node_events`), and
//! `EndProfiling` hands them over as KERNEL events named after the nodes.

use std::ffi::{c_char, CString};
use std::sync::Arc;

use ort_sys::OrtStatus;

use super::api::Api;
use super::guard;
use super::structs::{OrtEpProfilerImpl, OrtProfilingEvent, OrtProfilingEventsContainer, EP_PROFILING_VERSION};
use crate::error::Result;
use crate::node_events::{NodeEvents, ProfileEvent};

#[repr(C)]
pub(super) struct Profiler {
    base: OrtEpProfilerImpl,
    api: Api,
    events: Arc<NodeEvents>,
}

impl Profiler {
    /// A profiler for ORT to own (it calls `release`).
    pub(super) fn into_raw(api: Api, events: Arc<NodeEvents>) -> *mut OrtEpProfilerImpl {
        let p = Box::new(Profiler {
            base: OrtEpProfilerImpl {
                ort_version_supported: EP_PROFILING_VERSION,
                release,
                start_profiling,
                start_event: None,
                stop_event: None,
                end_profiling,
            },
            api,
            events,
        });
        Box::into_raw(p).cast()
    }
}

fn profiler<'a>(this: *mut OrtEpProfilerImpl) -> &'a Profiler {
    // SAFETY: ORT passes back the pointer made in `into_raw`; `base` is the first field.
    unsafe { &*this.cast::<Profiler>() }
}

unsafe extern "system" fn release(this: *mut OrtEpProfilerImpl) {
    if !this.is_null() {
        // SAFETY: made by Box::into_raw in `into_raw`, released once by ORT.
        let p = unsafe { Box::from_raw(this.cast::<Profiler>()) };
        p.events.finish();
    }
}

unsafe extern "system" fn start_profiling(this: *mut OrtEpProfilerImpl, offset_ns: i64) -> *mut OrtStatus {
    let p = profiler(this);
    guard(&p.api, "StartProfiling", || {
        p.events.start(offset_ns);
        Ok(())
    })
}

unsafe extern "system" fn end_profiling(
    this: *mut OrtEpProfilerImpl,
    container: *mut OrtProfilingEventsContainer,
) -> *mut OrtStatus {
    let p = profiler(this);
    guard(&p.api, "EndProfiling", || {
        let events = p.events.finish();
        let mut made: Vec<*mut OrtProfilingEvent> = Vec::with_capacity(events.len());
        let result = hand_over(&p.api, container, &events, &mut made);
        for e in made {
            p.api.release_profiling_event(e);
        }
        result
    })
}

fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

/// Makes one ORT event per node event (kept in `made` for the caller to release) and
/// adds them to ORT's container.
fn hand_over(
    api: &Api,
    container: *mut OrtProfilingEventsContainer,
    events: &[ProfileEvent],
    made: &mut Vec<*mut OrtProfilingEvent>,
) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let keys: [CString; 5] = ["op_name", "fused_node", "parent_name", "dur_ns", "provider"].map(c_string);
    let key_ptrs: [*const c_char; 5] = std::array::from_fn(|k| keys[k].as_ptr());
    for e in events {
        let values: [CString; 5] = [
            c_string(&e.op_type),
            c_string(&e.fused_node),
            c_string(&format!("{}_kernel_time", e.fused_node)),
            c_string(&e.dur_ns.to_string()),
            c_string("Rivet"),
        ];
        let value_ptrs: [*const c_char; 5] = std::array::from_fn(|k| values[k].as_ptr());
        let name = c_string(&e.name);
        made.push(api.create_profiling_event(e.thread as i32, &name, e.ts_us, e.dur_us, &key_ptrs, &value_ptrs)?);
    }
    api.add_profiling_events(container, made)
}
