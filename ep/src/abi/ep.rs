//! The `OrtEp` callbacks: claim nodes (GetCapability) and compile them into plans.

use std::ffi::c_char;

use ort_sys::{OrtGraph, OrtLogger, OrtNode, OrtSessionOptions, OrtStatus};

use super::api::Api;
use super::compute::ComputeInfo;
use super::control::{self, ControlFlowKernels};
use super::factory::EP_NAME;
use super::structs::{
    OrtEp, OrtEpGraphSupportInfo, OrtEpProfilerImpl, OrtKernelRegistry, OrtNodeComputeInfo, EP_PROFILING_VERSION,
    EP_STRUCT_VERSION, EP_TABLE_VERSION_24,
};
use super::{guard, read};
use crate::capability::{in_quantized_group, partition};
use crate::error::{Error, Result};
use crate::node_events::NodeEvents;
use crate::plan::Plan;
use crate::registry::kernel_for;

/// Session option (set as a provider option `inject_panic`) naming a node whose fused
/// Compute panics on purpose: the test that a panic becomes an error, not an abort.
/// ORT stores provider options under `ep.<lowercased EP name>.`.
const INJECT_PANIC_KEY: &std::ffi::CStr = c"ep.rivet.inject_panic";
const NO_FALLBACK_KEY: &std::ffi::CStr = c"session.disable_cpu_ep_fallback";
/// Provider option `precision`: `fp32` (the default) or `bf16` (see [`Precision`]).
const PRECISION_KEY: &std::ffi::CStr = c"ep.rivet.precision";

/// The arithmetic of the session's matrix products.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Precision {
    /// Float32 throughout: every result as without the option.
    Fp32,
    /// MatMul and Gemm by a constant B multiply bfloat16 operands (rounded to nearest
    /// even) and sum in float32, on AVX-512 BF16; everything else stays float32.
    Bf16,
}

impl Precision {
    /// The option's value (`None`: unset); a bad value is an error naming the good ones.
    pub(crate) fn parse(value: Option<&str>) -> Result<Precision> {
        match value.map(str::trim) {
            None | Some("fp32") => Ok(Precision::Fp32),
            Some("bf16") => Ok(Precision::Bf16),
            Some(other) => {
                Err(Error::ep(format_args!("Rivet: provider option precision = '{other}' is not one of fp32, bf16")))
            }
        }
    }
}

#[repr(C)]
pub(super) struct Ep {
    base: OrtEp,
    api: Api,
    inject_panic: Option<String>,
    /// The products' arithmetic: bf16 only where the CPU has AVX-512 BF16.
    precision: Precision,
    /// `session.disable_cpu_ep_fallback=1`: a node Rivet cannot run fails the session in
    /// Compile, with the node and the reason, instead of ORT's generic message.
    no_fallback: bool,
    /// ORT's If/Loop/Scan kernels under Rivet's name (runtime 1.24+), for control-flow
    /// nodes whose bodies run on Rivet.
    kernels: Option<ControlFlowKernels>,
    /// The session's recording for ORT's profiler, shared with its fused nodes.
    events: std::sync::Arc<NodeEvents>,
}

fn ep<'a>(this: *const OrtEp) -> &'a Ep {
    // SAFETY: ORT passes back the pointer made in `Ep::create`; `base` is the first field.
    unsafe { &*this.cast::<Ep>() }
}

impl Ep {
    pub(super) fn create(api: Api, options: *const OrtSessionOptions, logger: *const OrtLogger) -> Result<*mut OrtEp> {
        let inject_panic = api.session_config_entry(options, INJECT_PANIC_KEY)?;
        let mut precision = Precision::parse(api.session_config_entry(options, PRECISION_KEY)?.as_deref())?;
        if precision == Precision::Bf16 && !rivet_kernels::nn::bf16_supported() {
            api.log_warning(logger, "Rivet: precision bf16 needs AVX-512 BF16, which this CPU lacks: running fp32")?;
            precision = Precision::Fp32;
        }
        let no_fallback = api.session_config_entry(options, NO_FALLBACK_KEY)?.is_some_and(|v| v.trim() == "1");
        let kernels = ControlFlowKernels::create(api)?;
        // The 1.24 table (with GetKernelRegistry) only for a runtime that reads it;
        // `CreateProfiler` (slot 16) from a struct declaring 25, on a 1.25+ runtime.
        let (version, create_profiler) = if api.has_profiling() && kernels.is_some() {
            (EP_PROFILING_VERSION, Some(create_profiler as ProfilerFn))
        } else if kernels.is_some() {
            (EP_TABLE_VERSION_24, None)
        } else {
            (EP_STRUCT_VERSION, None)
        };
        let ep = Box::new(Ep {
            base: OrtEp {
                ort_version_supported: version,
                get_name,
                get_capability,
                compile,
                release_node_compute_infos,
                get_preferred_data_layout: None,
                should_convert_data_layout_for_op: None,
                set_dynamic_options: None,
                on_run_start: None,
                on_run_end: None,
                create_allocator: None,
                create_sync_stream_for_device: None,
                get_compiled_model_compatibility_info: None,
                get_kernel_registry: Some(get_kernel_registry),
                is_concurrent_run_supported: None,
                sync: None,
                create_profiler,
            },
            api,
            inject_panic,
            precision,
            no_fallback,
            kernels,
            events: Default::default(),
        });
        Ok(Box::into_raw(ep).cast())
    }

    pub(super) fn release(this: *mut OrtEp) {
        if !this.is_null() {
            // SAFETY: made by Box::into_raw in `create`, released once by ORT.
            drop(unsafe { Box::from_raw(this.cast::<Ep>()) });
        }
    }
}

type ProfilerFn = unsafe extern "system" fn(*mut OrtEp, *mut *mut OrtEpProfilerImpl) -> *mut OrtStatus;

/// ORT asks for the session's profiler (it starts it when profiling is on).
unsafe extern "system" fn create_profiler(this: *mut OrtEp, out: *mut *mut OrtEpProfilerImpl) -> *mut OrtStatus {
    let ep = ep(this);
    guard(&ep.api, "CreateProfiler", || {
        if out.is_null() {
            return Err(Error::ep("CreateProfiler got a null out pointer"));
        }
        let p = super::profiler::Profiler::into_raw(ep.api, ep.events.clone());
        // SAFETY: a valid out pointer; ORT owns the profiler and releases it.
        unsafe { *out = p };
        Ok(())
    })
}

unsafe extern "system" fn get_name(_this: *const OrtEp) -> *const c_char {
    EP_NAME.as_ptr()
}

unsafe extern "system" fn get_capability(
    this: *mut OrtEp,
    graph: *const OrtGraph,
    info: *mut OrtEpGraphSupportInfo,
) -> *mut OrtStatus {
    let ep = ep(this);
    guard(&ep.api, "GetCapability", || {
        let (ptrs, nodes) = read::nodes(&ep.api, graph)?;
        let verdicts: Vec<Result<_, String>> = nodes.iter().map(kernel_for).collect();
        let mut claimable: Vec<bool> = verdicts.iter().map(Result::is_ok).collect();
        // Control-flow nodes whose bodies are Rivet's: ORT's kernel from Rivet's registry.
        let mut single = vec![false; nodes.len()];
        if ep.kernels.is_some() {
            for (i, node) in nodes.iter().enumerate() {
                if verdicts[i].is_err() && control::claimable(&ep.api, info, ptrs[i], node).is_ok() {
                    ep.api.add_single_node(info, ptrs[i])?;
                    single[i] = true;
                }
            }
        }
        let desc = crate::graph::GraphDesc { nodes, ..Default::default() };
        if !ep.no_fallback {
            // ORT fuses these groups into its int8 kernels; taking any node of one splits
            // it. (With fallback off there is no ORT path to keep: Rivet runs them all.)
            for (c, quantized) in claimable.iter_mut().zip(in_quantized_group(&desc)) {
                *c &= !quantized;
            }
        }
        // The values each node's subgraphs read from this graph: edges for the partition.
        let outer_reads = ptrs.iter().map(|&p| implicit_input_names(&ep.api, p)).collect::<Result<Vec<_>>>()?;
        for group in partition(&desc, &claimable, &outer_reads) {
            let group_ptrs: Vec<*const OrtNode> = group.iter().map(|&i| ptrs[i]).collect();
            ep.api.add_nodes_to_fuse(info, &group_ptrs)?;
        }
        if ep.no_fallback {
            // ORT's own message for a node left over with fallback off does not say which
            // node or why. Claim each such node alone (a single node cannot close a cycle)
            // so that Compile fails the session naming it and the reason.
            for (i, verdict) in verdicts.iter().enumerate() {
                if verdict.is_err() && !single[i] {
                    let owner = ep.api.node_ep_name(ptrs[i])?;
                    if owner.is_empty() || owner == "Rivet" {
                        ep.api.add_nodes_to_fuse(info, &[ptrs[i]])?;
                    }
                }
            }
        }
        Ok(())
    })
}

/// The names of the values of enclosing graphs that a node's subgraphs read.
fn implicit_input_names(api: &Api, node: *const OrtNode) -> Result<Vec<String>> {
    if api.node_num_subgraphs(node)? == 0 {
        return Ok(Vec::new());
    }
    let mut infos = vec![std::ptr::null(); api.node_num_implicit_inputs(node)?];
    api.node_implicit_inputs(node, &mut infos)?;
    infos.into_iter().filter(|v| !v.is_null()).map(|v| api.value_info_name(v)).collect()
}

unsafe extern "system" fn get_kernel_registry(this: *mut OrtEp, out: *mut *const OrtKernelRegistry) -> *mut OrtStatus {
    let ep = ep(this);
    guard(&ep.api, "GetKernelRegistry", || {
        if out.is_null() {
            return Err(Error::ep("GetKernelRegistry got a null slot"));
        }
        // SAFETY: ORT passes a valid slot; the registry lives as long as the EP.
        unsafe { *out = ep.kernels.as_ref().map_or(std::ptr::null(), ControlFlowKernels::registry) };
        Ok(())
    })
}

unsafe extern "system" fn compile(
    this: *mut OrtEp,
    graphs: *const *const OrtGraph,
    fused_nodes: *const *const OrtNode,
    count: usize,
    infos: *mut *mut OrtNodeComputeInfo,
    _ep_context_nodes: *mut *mut OrtNode,
) -> *mut OrtStatus {
    let ep = ep(this);
    guard(&ep.api, "Compile", || {
        if count == 0 {
            return Ok(());
        }
        if graphs.is_null() || fused_nodes.is_null() || infos.is_null() {
            return Err(Error::ep("Compile got null arrays"));
        }
        // SAFETY: ORT passes `count` graphs, fused nodes and info slots.
        let (graphs, fused, out) = unsafe {
            (
                std::slice::from_raw_parts(graphs, count),
                std::slice::from_raw_parts(fused_nodes, count),
                std::slice::from_raw_parts_mut(infos, count),
            )
        };
        out.iter_mut().for_each(|p| *p = std::ptr::null_mut());
        let mut built = Vec::with_capacity(count);
        for i in 0..count {
            let (name, desc) = read::fused_graph(&ep.api, graphs[i], fused[i])?;
            let mut plan = Plan::build(&name, &desc).map_err(|e| {
                if ep.no_fallback {
                    Error { message: format!("{e}; CPU fallback is disabled (session.disable_cpu_ep_fallback=1)"), ..e }
                } else {
                    e
                }
            })?;
            if ep.precision == Precision::Bf16 {
                plan.use_bf16();
            }
            let panic_here =
                ep.inject_panic.as_deref().is_some_and(|target| desc.nodes.iter().any(|n| n.name == target));
            // Owned until every graph compiled: on an error, the ones built so far drop.
            built.push(ComputeInfo::new(ep.api, plan, panic_here, ep.events.clone()));
        }
        for (slot, info) in out.iter_mut().zip(built) {
            *slot = ComputeInfo::into_raw(info);
        }
        Ok(())
    })
}

unsafe extern "system" fn release_node_compute_infos(_this: *mut OrtEp, infos: *mut *mut OrtNodeComputeInfo, n: usize) {
    if infos.is_null() {
        return;
    }
    // SAFETY: ORT passes back the `n` infos Compile created.
    for &info in unsafe { std::slice::from_raw_parts(infos, n) } {
        ComputeInfo::release(info);
    }
}
