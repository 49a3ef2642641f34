//! Runs a plan. Everything here is safe Rust over slices; the ABI layer supplies the
//! input slices, allocates outputs and provides ORT's thread pool.

use rivet_kernels::{binary_f32, Broadcast};

use crate::error::{Error, Result};
use crate::graph::{dtype, Shape};
use crate::plan::{NodeLabel, Plan, Slot, Step};
use crate::probe;
use crate::registry::Kernel;
use crate::shapes::{self, matches_declared, DeclaredText, ShapeText};
use rivet_macros::dispatch_phase;

/// One input of the fused node, as ORT handed it over.
pub struct TensorIn<'a> {
    pub elem_type: i32,
    pub shape: Shape,
    /// The elements when `elem_type` is float32, else empty.
    pub data: &'a [f32],
}

/// Allocates the fused node's outputs (through ORT in production).
pub trait Outputs<'a> {
    fn alloc(&mut self, index: usize, shape: &[usize]) -> Result<&'a mut [f32]>;
}

/// Runs `f` over disjoint chunks of `out` that together cover it, possibly in parallel.
/// `f` receives the chunk's offset into `out`.
pub trait Parallel {
    fn for_each_chunk(&self, out: &mut [f32], chunk_len: usize, f: &(dyn Fn(usize, &mut [f32]) + Sync));
}

/// Runs every chunk on the calling thread.
pub struct Serial;

impl Parallel for Serial {
    fn for_each_chunk(&self, out: &mut [f32], chunk_len: usize, f: &(dyn Fn(usize, &mut [f32]) + Sync)) {
        for (i, chunk) in out.chunks_mut(chunk_len.max(1)).enumerate() {
            f(i * chunk_len, chunk);
        }
    }
}

/// Below this many elements a node runs on one thread.
pub const PARALLEL_MIN_LEN: usize = 1 << 16;
/// Elements per parallel task.
pub const CHUNK_LEN: usize = 1 << 14;

/// State reused across Runs: shapes and intermediate buffers. One per concurrent Run.
#[derive(Debug, Default)]
pub struct RunState {
    shapes: Vec<Shape>,
    buffers: Vec<Vec<f32>>,
}

impl RunState {
    pub fn new(plan: &Plan) -> Self {
        let shapes = match &plan.fixed {
            Some(f) => f.shapes.clone(),
            None => vec![Shape::new(); plan.values.len()],
        };
        Self { shapes, buffers: vec![Vec::new(); plan.num_buffers] }
    }
}

fn element_count(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Runs `plan` once.
pub fn execute<'a>(
    plan: &Plan,
    state: &mut RunState,
    inputs: &[TensorIn<'a>],
    outputs: &mut dyn Outputs<'a>,
    par: &dyn Parallel,
) -> Result<()> {
    if inputs.len() != plan.inputs.len() {
        return Err(Error::ep(format_args!(
            "fused node '{}' got {} inputs, its plan has {}",
            plan.name,
            inputs.len(),
            plan.inputs.len()
        )));
    }
    // Check the inputs against what the model declares.
    for (i, input) in inputs.iter().enumerate() {
        let value = &plan.values[plan.inputs[i]];
        let ok_type = input.elem_type == dtype::FLOAT;
        if !ok_type || !matches_declared(&input.shape, &value.declared) {
            let (step, pos) = value.first_reader.unwrap_or((0, 0));
            let expected = value.declared.as_ref().map(DeclaredText);
            return Err(Error::invalid(format_args!(
                "{} input {pos} '{}': expected float32 {}, got {} {}",
                NodeLabel(&plan.steps[step]),
                value.name,
                expected.map_or_else(|| "of any shape".to_string(), |d| d.to_string()),
                dtype::name(input.elem_type),
                ShapeText(&input.shape)
            )));
        }
        if plan.fixed.is_none() {
            state.shapes[plan.inputs[i]].clone_from(&input.shape);
        }
    }
    if plan.fixed.is_none() {
        for (id, shape, _) in &plan.constants {
            state.shapes[*id].clone_from(shape);
        }
    }

    let mut outs: smallvec::SmallVec<[Option<&'a mut [f32]>; 4]> = (0..plan.outputs.len()).map(|_| None).collect();

    for (i, step) in plan.steps.iter().enumerate() {
        run_step(plan, i, step, state, inputs, &mut outs, outputs, par)?;
    }
    Ok(())
}

#[dispatch_phase(DispatchLookup)]
#[allow(clippy::too_many_arguments)]
fn run_step<'a>(
    plan: &Plan,
    index: usize,
    step: &Step,
    state: &mut RunState,
    inputs: &[TensorIn<'a>],
    outs: &mut [Option<&'a mut [f32]>],
    outputs: &mut dyn Outputs<'a>,
    par: &dyn Parallel,
) -> Result<()> {
    // Output shape: known since Compile for static plans, inferred here otherwise.
    let inferred;
    let broadcast = match &plan.fixed {
        Some(f) => f.broadcasts[index].as_ref(),
        None => {
            let (shape, b) = shapes::infer(&plan.values, step, &state.shapes)?;
            state.shapes[step.output] = shape;
            inferred = b;
            inferred.as_ref()
        }
    };
    let out_value = &plan.values[step.output];
    let out_shape = &state.shapes[step.output];
    let len = element_count(out_shape);
    match out_value.slot {
        Slot::Output(o) => {
            let dst = outputs.alloc(o, out_shape)?;
            check_len(step, dst.len(), len, out_shape)?;
            let x = read(plan, step.inputs[0], inputs, &state.buffers, outs);
            let y = step.inputs.get(1).map(|&id| read(plan, id, inputs, &state.buffers, outs));
            apply(step, x, y, broadcast, dst, par);
            outs[o] = Some(dst);
        }
        Slot::Buffer(b) => {
            let mut owned = std::mem::take(&mut state.buffers[b]);
            owned.resize(len, 0.0);
            let x = read(plan, step.inputs[0], inputs, &state.buffers, outs);
            let y = step.inputs.get(1).map(|&id| read(plan, id, inputs, &state.buffers, outs));
            apply(step, x, y, broadcast, &mut owned, par);
            state.buffers[b] = owned;
        }
        Slot::Input(_) | Slot::Const(_) => unreachable!("a step never writes an input or constant"),
    }
    probe::record_nodes(1);
    Ok(())
}

fn check_len(step: &Step, have: usize, len: usize, shape: &[usize]) -> Result<()> {
    if have == len {
        return Ok(());
    }
    Err(Error::ep(format_args!(
        "{}: output buffer holds {have} elements, shape {} needs {len}",
        NodeLabel(step),
        ShapeText(shape)
    )))
}

fn read<'s>(
    plan: &'s Plan,
    id: usize,
    inputs: &'s [TensorIn<'_>],
    buffers: &'s [Vec<f32>],
    outs: &'s [Option<&mut [f32]>],
) -> &'s [f32] {
    match plan.values[id].slot {
        Slot::Input(i) => inputs[i].data,
        Slot::Const(c) => &plan.constants[c].2,
        Slot::Buffer(b) => &buffers[b],
        Slot::Output(o) => outs[o].as_deref().expect("outputs are written before they are read"),
    }
}

/// Runs a step's kernel into `dst`, splitting large outputs over the thread pool.
#[dispatch_phase(KernelInvoke)]
fn apply(
    step: &Step,
    x: &[f32],
    y: Option<&[f32]>,
    broadcast: Option<&Broadcast>,
    dst: &mut [f32],
    par: &dyn Parallel,
) {
    let parallel = dst.len() >= PARALLEL_MIN_LEN;
    match step.kernel {
        Kernel::Identity => dst.copy_from_slice(x),
        Kernel::Unary(op) => {
            if parallel {
                par.for_each_chunk(dst, CHUNK_LEN, &|start, chunk| op.apply(&x[start..start + chunk.len()], chunk));
            } else {
                op.apply(x, dst);
            }
        }
        Kernel::Binary(op) => {
            let (y, b) = (y.expect("binary steps have two inputs"), broadcast.expect("computed for binary steps"));
            if parallel {
                par.for_each_chunk(dst, CHUNK_LEN, &|start, chunk| binary_f32(op, b, x, y, chunk, start));
            } else {
                binary_f32(op, b, x, y, dst, 0);
            }
        }
    }
}
