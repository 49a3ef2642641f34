//! `OrtNodeComputeInfo`: runs a compiled plan in ORT's Compute callback.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, TryLockError};

use ort_sys::{OrtKernelContext, OrtStatus};
use smallvec::SmallVec;

use super::api::Api;
use super::guard;
use super::structs::{OrtNodeComputeContext, OrtNodeComputeInfo, EP_STRUCT_VERSION};
use crate::data::{Buf, Data, DataMut};
use crate::error::{Error, Result};
use crate::exec::{execute_timed, NodeTime, Outputs, Parallel, RunState, TensorIn};
use crate::graph::Shape;
use crate::node_events::{FusedNodes, NodeEvents};
use crate::parallel::{run_in_turn, RunScratch};
use crate::plan::Plan;
use crate::probe;
use rivet_macros::dispatch_phase;

#[repr(C)]
pub(super) struct ComputeInfo {
    base: OrtNodeComputeInfo,
    api: Api,
    plan: Plan,
    /// The state a Run uses when no other Run holds it: one uncontended lock per Run.
    primary: Mutex<State>,
    /// States for Runs that overlap on this fused node, reused.
    pool: Mutex<Vec<State>>,
    inject_panic: bool,
    /// The session's recording for ORT's profiler, and this fused node's names in it.
    events: std::sync::Arc<NodeEvents>,
    names: std::sync::Arc<FusedNodes>,
}

/// What one Run works in: the plan's shapes and buffers, and the scratch of its split
/// kernels (kept apart so the pool's tasks can borrow it while the plan runs).
struct State {
    run: RunState,
    scratch: RunScratch,
    /// Node times of the Run, while ORT's profiler records (else empty, untouched).
    times: Vec<NodeTime>,
    packed: Packed,
}

impl State {
    fn new(plan: &Plan) -> State {
        State { run: RunState::new(plan), scratch: RunScratch::default(), times: Vec::new(), packed: Packed::new(plan) }
    }
}

/// The fused node's 4-bit inputs and outputs, one a byte: ORT's tensors hold two a byte
/// (`data::packed`), so they are unpacked here on the way in and packed from here on the
/// way out. Empty for a plan without any (every other type is bound in place).
#[derive(Default)]
pub struct Packed {
    /// Per fused input: its unpacked values, for a 4-bit input.
    inputs: Vec<Option<Buf>>,
    /// (output index, its unpacked values) for each 4-bit output.
    outputs: Vec<(usize, Buf)>,
}

impl Packed {
    fn new(plan: &Plan) -> Packed {
        let type_of = |id: usize| plan.values[id].elem_type;
        let held = |t: i32| if crate::data::packed(t) { Buf::new(t) } else { None };
        let inputs = if plan.inputs.iter().any(|&id| crate::data::packed(type_of(id))) {
            plan.inputs.iter().map(|&id| held(type_of(id))).collect()
        } else {
            Vec::new()
        };
        let outputs = plan.outputs.iter().enumerate().filter_map(|(o, &id)| Some((o, held(type_of(id))?))).collect();
        Packed { inputs, outputs }
    }
}

impl ComputeInfo {
    pub(super) fn new(
        api: Api,
        mut plan: Plan,
        inject_panic: bool,
        events: std::sync::Arc<NodeEvents>,
    ) -> Box<ComputeInfo> {
        for unit in &mut plan.units {
            unit.probe = probe::register_node(&plan.name, &unit.label, &unit.op_type);
        }
        let names = FusedNodes::of(&plan);
        let state = State::new(&plan);
        Box::new(ComputeInfo {
            base: OrtNodeComputeInfo { ort_version_supported: EP_STRUCT_VERSION, create_state, compute, release_state },
            api,
            plan,
            primary: Mutex::new(state),
            pool: Mutex::new(Vec::new()),
            inject_panic,
            events,
            names,
        })
    }

    /// Hands the info to ORT, which gives it back to `release`.
    pub(super) fn into_raw(info: Box<ComputeInfo>) -> *mut OrtNodeComputeInfo {
        Box::into_raw(info).cast()
    }

    pub(super) fn release(this: *mut OrtNodeComputeInfo) {
        if !this.is_null() {
            // SAFETY: made by Box::into_raw in `into_raw`, released once.
            drop(unsafe { Box::from_raw(this.cast::<ComputeInfo>()) });
        }
    }
}

fn info<'a>(this: *const OrtNodeComputeInfo) -> &'a ComputeInfo {
    // SAFETY: ORT passes back the pointer made in `create`; `base` is the first field.
    unsafe { &*this.cast::<ComputeInfo>() }
}

unsafe extern "system" fn create_state(
    this: *mut OrtNodeComputeInfo,
    ctx: *mut OrtNodeComputeContext,
    state: *mut *mut c_void,
) -> *mut OrtStatus {
    let info = info(this);
    guard(&info.api, "CreateState", || {
        // The fused node's name, as ORT reports it, must be the one we compiled: this
        // also checks that OrtEpApi's fifth slot is where we think it is.
        let name = info.api.node_compute_context_node_name(ctx);
        if name != info.plan.name {
            return Err(Error::ep(format_args!("CreateState for '{name}' reached the plan of '{}'", info.plan.name)));
        }
        // The state is the info itself: per-Run scratch comes from its pool.
        // SAFETY: valid out pointer.
        unsafe { *state = this.cast() };
        Ok(())
    })
}

unsafe extern "system" fn release_state(_this: *mut OrtNodeComputeInfo, _state: *mut c_void) {}

unsafe extern "system" fn compute(
    this: *mut OrtNodeComputeInfo,
    _state: *mut c_void,
    ctx: *mut OrtKernelContext,
) -> *mut OrtStatus {
    let info = info(this);
    guard(&info.api, "Compute", || run(info, ctx))
}

fn run(info: &ComputeInfo, ctx: *mut OrtKernelContext) -> Result<()> {
    if info.inject_panic {
        panic!("injected panic in fused node '{}' (inject_panic)", info.plan.name);
    }
    let plan = &info.plan;
    // A state left by a Run that panicked is still sound: every Run resizes its buffers
    // and static shapes never change.
    let primary = match info.primary.try_lock() {
        Ok(guard) => Some(guard),
        Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(TryLockError::WouldBlock) => None,
    };
    if let Some(mut state) = primary {
        // SAFETY: ORT's context for this Compute, with the inputs of the fused node we compiled.
        return unsafe { run_state(info, &mut state, ctx) };
    }
    let mut state = info.pool.lock().unwrap_or_else(|p| p.into_inner()).pop().unwrap_or_else(|| State::new(plan));
    // SAFETY: as above.
    let result = unsafe { run_state(info, &mut state, ctx) };
    info.pool.lock().unwrap_or_else(|p| p.into_inner()).push(state);
    result
}

/// One Run in `state`; while ORT's profiler records, with the nodes timed and recorded.
///
/// # Safety
/// As [`run_plan`].
unsafe fn run_state(info: &ComputeInfo, state: &mut State, ctx: *mut OrtKernelContext) -> Result<()> {
    let State { run, scratch, times, packed } = state;
    if !info.events.active() {
        // SAFETY: the caller's guarantees.
        return unsafe { run_plan_with(&info.api, &info.plan, run, scratch, packed, ctx, None) };
    }
    times.clear();
    // SAFETY: the caller's guarantees.
    let result = unsafe { run_plan_with(&info.api, &info.plan, run, scratch, packed, ctx, Some(&mut *times)) };
    info.events.record(&info.names, times);
    result
}

/// One Run of `plan` against a kernel context: bind inputs, execute, allocate outputs
/// through ORT. Public so tests can drive it with a fake `OrtApi`.
///
/// # Safety
/// `ctx` must be a kernel context that `api`'s kernel-context members accept, valid for
/// the whole call, whose inputs match `plan`.
pub unsafe fn run_plan(api: &Api, plan: &Plan, state: &mut RunState, ctx: *mut OrtKernelContext) -> Result<()> {
    // SAFETY: the caller's guarantees.
    unsafe { run_plan_with(api, plan, state, &RunScratch::default(), &mut Packed::new(plan), ctx, None) }
}

/// [`run_plan`] with the scratch of the Run's split kernels.
///
/// # Safety
/// As [`run_plan`].
unsafe fn run_plan_with(
    api: &Api,
    plan: &Plan,
    state: &mut RunState,
    scratch: &RunScratch,
    packed: &mut Packed,
    ctx: *mut OrtKernelContext,
    times: Option<&mut Vec<NodeTime>>,
) -> Result<()> {
    unpack_inputs(api, ctx, &mut packed.inputs)?;
    let inputs = bind_inputs(api, ctx, plan.inputs.len(), &packed.inputs)?;
    let held = packed.outputs.iter_mut().map(|(o, b)| (*o, Some(b))).collect();
    let mut outputs = OrtOutputs { api, ctx, held, to_pack: SmallVec::new() };
    let par = OrtParallel { api, ctx, scratch };
    execute_timed(plan, state, &inputs, &mut outputs, &par, times)?;
    let to_pack = std::mem::take(&mut outputs.to_pack);
    drop(outputs);
    for (o, dst) in to_pack {
        let (_, values) = packed.outputs.iter().find(|(k, _)| *k == o).expect("a held 4-bit output");
        let size = crate::data::ort_bytes(values.elem_type(), dst.1).ok_or_else(|| Error::ep("not packed"))?;
        // SAFETY: ORT allocated output `o` of a packed type with `dst.1` elements for this
        // Compute: `size` bytes at `dst.0`, not otherwise borrowed.
        let bytes = unsafe { std::slice::from_raw_parts_mut(dst.0, size) };
        if !values.view_prefix(dst.1).pack(bytes) {
            return Err(Error::ep(format_args!("output {o} is not a packed type")));
        }
    }
    probe::record_run();
    Ok(())
}

/// Unpacks the fused node's 4-bit inputs into their buffers (none for most plans).
fn unpack_inputs(api: &Api, ctx: *mut OrtKernelContext, held: &mut [Option<Buf>]) -> Result<()> {
    for (i, buf) in held.iter_mut().enumerate() {
        let Some(buf) = buf else { continue };
        let v = api.kernel_input(ctx, i)?;
        let (elem_type, shape) = input_metadata(api, v, i)?;
        let len: usize = shape.iter().product();
        if elem_type != buf.elem_type() || len == 0 {
            buf.resize(0);
            continue;
        }
        let p = api.tensor_data(v)?.cast::<u8>();
        let size =
            crate::data::ort_bytes(elem_type, len).ok_or_else(|| Error::ep(format_args!("input {i} is not packed")))?;
        // SAFETY: a tensor of `len` packed elements (`size` bytes) that ORT keeps alive for
        // this Compute.
        let bytes = unsafe { std::slice::from_raw_parts(p, size) };
        if !buf.unpack(bytes, len) {
            return Err(Error::ep(format_args!("input {i} is not a packed type")));
        }
    }
    Ok(())
}

/// The fused inputs a Run binds without a heap allocation: a KV-cache decode step takes
/// a key and a value a layer besides its ids (the project's Llama small 10; 8 here made
/// every Run of it allocate).
const MAX_INLINE_INPUTS: usize = 32;

/// Reads the fused node's inputs: value, element type and shape, data (up to
/// [`MAX_INLINE_INPUTS`] without a heap allocation).
#[dispatch_phase(TensorBind)]
fn bind_inputs<'c>(
    api: &Api,
    ctx: *mut OrtKernelContext,
    count: usize,
    unpacked: &'c [Option<Buf>],
) -> Result<SmallVec<[TensorIn<'c>; MAX_INLINE_INPUTS]>> {
    let mut inputs: SmallVec<[TensorIn<'c>; MAX_INLINE_INPUTS]> = SmallVec::new();
    for i in 0..count {
        let v = api.kernel_input(ctx, i)?;
        let (elem_type, shape) = input_metadata(api, v, i)?;
        let len: usize = shape.iter().product();
        let held = unpacked.get(i).and_then(Option::as_ref).filter(|b| b.elem_type() == elem_type);
        let data = match crate::data::elem_size(elem_type) {
            _ if crate::data::packed(elem_type) => match held {
                Some(b) => b.view_prefix(len),
                None => Data::empty(elem_type).unwrap_or(Data::F32(&[])),
            },
            Some(_) if len > 0 => {
                let p = api.tensor_data(v)?.cast::<u8>();
                // SAFETY: a tensor of `len` elements of `elem_type` that ORT keeps alive for
                // this Compute; ORT's allocations are aligned for any element type.
                unsafe { typed_slice(elem_type, p, len) }
            }
            _ => Data::empty(elem_type).unwrap_or(Data::F32(&[])),
        };
        inputs.push(TensorIn { elem_type, shape, data });
    }
    Ok(inputs)
}

/// Element type and shape of an input: one call on API 24, five on API 23.
#[dispatch_phase(MetadataQuery)]
fn input_metadata(api: &Api, v: *const ort_sys::OrtValue, i: usize) -> Result<(i32, Shape)> {
    let to_usize = |d: i64| usize::try_from(d).map_err(|_| Error::ep(format_args!("input {i} has negative dim {d}")));
    let mut shape = Shape::new();
    if api.has_shape_reference() {
        let (elem_type, dims) = api.tensor_type_and_shape_ref(v)?;
        for &d in dims {
            shape.push(to_usize(d)?);
        }
        return Ok((elem_type, shape));
    }
    let info = api.tensor_type_and_shape(v)?;
    let read = || -> Result<(i32, Shape)> {
        let elem_type = api.tensor_info_element_type(info)?;
        let mut dims: SmallVec<[i64; 8]> = SmallVec::from_elem(0, api.tensor_info_rank(info)?);
        api.tensor_info_dims(info, &mut dims)?;
        for d in dims {
            shape.push(to_usize(d)?);
        }
        Ok((elem_type, shape))
    };
    let result = read();
    api.release_tensor_info(info);
    result
}

struct OrtOutputs<'c> {
    api: &'c Api,
    ctx: *mut OrtKernelContext,
    /// The buffers of the 4-bit outputs (by output index), handed out by `alloc` (up to
    /// [`MAX_INLINE_INPUTS`] without a heap allocation a Run, as the inputs).
    held: SmallVec<[(usize, Option<&'c mut Buf>); MAX_INLINE_INPUTS]>,
    /// The 4-bit outputs written: index, ORT's data and element count, packed after the Run.
    to_pack: SmallVec<[(usize, (*mut u8, usize)); MAX_INLINE_INPUTS]>,
}

impl<'c> Outputs<'c> for OrtOutputs<'c> {
    #[dispatch_phase(Allocate)]
    fn alloc(&mut self, index: usize, shape: &[usize], elem_type: i32) -> Result<DataMut<'c>> {
        let dims: SmallVec<[i64; 8]> = shape.iter().map(|&d| d as i64).collect();
        let v = self.api.kernel_output(self.ctx, index, &dims)?;
        let len: usize = shape.iter().product();
        let p = if len == 0 {
            // Zero elements: any aligned pointer will do (ORT may give none).
            std::ptr::NonNull::<u64>::dangling().as_ptr().cast::<u8>()
        } else {
            self.api.tensor_mutable_data(v)?.cast::<u8>()
        };
        if crate::data::packed(elem_type) {
            let slot = self.held.iter_mut().find(|(o, _)| *o == index).and_then(|(_, b)| b.take());
            let buf = slot.ok_or_else(|| Error::ep(format_args!("4-bit output {index} has no buffer")))?;
            buf.resize(len);
            self.to_pack.push((index, (p, len)));
            return Ok(buf.view_mut());
        }
        // SAFETY: ORT allocated an output of the fused node's declared type (`elem_type`, the
        // plan's) with `len` elements for this Compute; each output index is allocated once
        // per Run, so no two slices alias.
        unsafe { typed_slice_mut(elem_type, p, len) }.ok_or_else(|| {
            Error::ep(format_args!("output {index} has element type {elem_type}, which Rivet does not hold"))
        })
    }
}

/// Calls `$arm!(Variant)` for the variant of `Buf` that holds `$elem_type`.
macro_rules! by_variant {
    ($elem_type:expr, $arm:ident, $none:expr) => {
        match Buf::new($elem_type) {
            Some(Buf::F32(_)) => $arm!(F32),
            Some(Buf::F64(_)) => $arm!(F64),
            Some(Buf::I8(_)) => $arm!(I8),
            Some(Buf::I16(_)) => $arm!(I16),
            Some(Buf::I32(_)) => $arm!(I32),
            Some(Buf::I64(_)) => $arm!(I64),
            Some(Buf::U8(_)) => $arm!(U8),
            Some(Buf::U16(_)) => $arm!(U16),
            Some(Buf::U32(_)) => $arm!(U32),
            Some(Buf::U64(_)) => $arm!(U64),
            Some(Buf::Bool(_)) => $arm!(Bool),
            Some(Buf::F16(_)) => $arm!(F16),
            Some(Buf::BF16(_)) => $arm!(BF16),
            Some(Buf::E8M0(_)) => $arm!(E8M0),
            // Bound through `Packed`, never in place.
            Some(Buf::U4(_) | Buf::I4(_) | Buf::F4E2M1(_) | Buf::U2(_) | Buf::I2(_)) => $none,
            Some(Buf::F8E4M3FN(_)) => $arm!(F8E4M3FN),
            Some(Buf::F8E4M3FNUZ(_)) => $arm!(F8E4M3FNUZ),
            Some(Buf::F8E5M2(_)) => $arm!(F8E5M2),
            Some(Buf::F8E5M2FNUZ(_)) => $arm!(F8E5M2FNUZ),
            None => $none,
        }
    };
}

/// A typed view of `len` elements of `elem_type` at `p` (empty float32 for a type Rivet
/// does not hold).
///
/// # Safety
/// `p` points to `len` elements of `elem_type`, aligned, alive and unwritten for `'c`.
unsafe fn typed_slice<'c>(elem_type: i32, p: *const u8, len: usize) -> Data<'c> {
    macro_rules! view {
        ($v:ident) => {
            // SAFETY: the caller's contract.
            Data::$v(unsafe { std::slice::from_raw_parts(p.cast(), len) })
        };
    }
    by_variant!(elem_type, view, Data::F32(&[]))
}

/// A typed, writable view of `len` elements of `elem_type` at `p`.
///
/// # Safety
/// `p` points to `len` elements of `elem_type`, aligned, alive for `'c` and not accessed
/// through any other pointer meanwhile.
unsafe fn typed_slice_mut<'c>(elem_type: i32, p: *mut u8, len: usize) -> Option<DataMut<'c>> {
    macro_rules! view {
        ($v:ident) => {
            // SAFETY: the caller's contract.
            Some(DataMut::$v(unsafe { std::slice::from_raw_parts_mut(p.cast(), len) }))
        };
    }
    by_variant!(elem_type, view, None)
}

struct OrtParallel<'c> {
    api: &'c Api,
    ctx: *mut OrtKernelContext,
    scratch: &'c RunScratch,
}

struct Job<'f> {
    out: *mut f32,
    len: usize,
    chunk_len: usize,
    f: &'f (dyn Fn(usize, &mut [f32]) + Sync),
    panicked: AtomicBool,
    /// Whether any task started: a ParallelFor that fails after some did cannot be run
    /// again here (a product accumulating into C in place is not idempotent).
    started: AtomicBool,
    /// The node whose task this is: a worker's allocations and calls are charged to it.
    node: probe::NodeId,
}

/// A task on ORT's pool: its own kernel_invoke phase on the worker that runs it, so a
/// worker's allocations are attributed and its work shows on the timeline.
#[dispatch_phase(KernelInvoke)]
unsafe extern "C" fn run_chunk(data: *mut c_void, index: usize) {
    // SAFETY: `data` is the Job that for_each_chunk keeps alive across ParallelFor.
    let job = unsafe { &*data.cast::<Job<'_>>() };
    job.started.store(true, Ordering::Relaxed);
    let _node = probe::NodeScope::attach(job.node);
    let start = index * job.chunk_len;
    if start >= job.len {
        return;
    }
    let end = (start + job.chunk_len).min(job.len);
    // SAFETY: chunks [start, end) for distinct indices are disjoint parts of `out`.
    let chunk = unsafe { std::slice::from_raw_parts_mut(job.out.add(start), end - start) };
    if catch_unwind(AssertUnwindSafe(|| (job.f)(start, chunk))).is_err() {
        job.panicked.store(true, Ordering::Relaxed);
    }
}

impl Parallel for OrtParallel<'_> {
    fn for_each_chunk(&self, out: &mut [f32], chunk_len: usize, f: &(dyn Fn(usize, &mut [f32]) + Sync)) {
        let chunk_len = chunk_len.max(1);
        let tasks = out.len().div_ceil(chunk_len);
        if tasks <= 1 {
            return run_in_turn(out, chunk_len, f);
        }
        let job = Job {
            out: out.as_mut_ptr(),
            len: out.len(),
            chunk_len,
            f,
            panicked: AtomicBool::new(false),
            started: AtomicBool::new(false),
            node: probe::current_node(),
        };
        let data = (&job as *const Job<'_>).cast_mut().cast::<c_void>();
        if self.api.parallel_for(self.ctx, run_chunk, tasks, data).is_err() {
            // ORT could not schedule: run the chunks here, unless some ran already.
            if job.started.load(Ordering::Relaxed) {
                panic!("ORT's ParallelFor failed after running some of a kernel's tasks");
            }
            return run_in_turn(out, chunk_len, f);
        }
        if job.panicked.load(Ordering::Relaxed) {
            panic!("a kernel panicked on ORT's thread pool");
        }
    }

    fn scratch(&self) -> &RunScratch {
        self.scratch
    }
}
