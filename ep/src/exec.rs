//! Runs a plan. Everything here is safe Rust over slices; the ABI layer supplies the
//! input slices, allocates outputs and provides ORT's thread pool.

use rivet_kernels::{binary_f32, nn, Broadcast};
use smallvec::SmallVec;

use crate::data::{Buf, Data, DataMut};
use crate::error::{Error, Result};
use crate::graph::{dtype, Shape};
use crate::plan::{Epilogue, NodeLabel, Plan, Slot, Step};
use crate::probe;
use crate::products;
use crate::registry::Kernel;
use crate::shapes::{self, matches_declared, DeclaredText, ShapeText};
use rivet_macros::dispatch_phase;

/// One input of the fused node, as ORT handed it over.
pub struct TensorIn<'a> {
    pub elem_type: i32,
    pub shape: Shape,
    /// The elements (empty, of some type, when Rivet does not hold `elem_type`: the plan's
    /// type check then rejects the input).
    pub data: Data<'a>,
}

/// Allocates the fused node's outputs (through ORT in production).
pub trait Outputs<'a> {
    fn alloc(&mut self, index: usize, shape: &[usize], elem_type: i32) -> Result<DataMut<'a>>;
}

pub use crate::parallel::{Parallel, Serial, CHUNK_LEN, PARALLEL_MIN_LEN};

/// State reused across Runs: shapes and intermediate buffers. One per concurrent Run.
#[derive(Debug, Default)]
pub struct RunState {
    shapes: Vec<Shape>,
    buffers: Vec<Buf>,
    /// How many elements of each buffer the value it holds now has (a buffer keeps the
    /// length of the largest value it held: see `Buf::grow`).
    buffer_lens: Vec<usize>,
    /// Per step of a symbolic plan: the last broadcast plan and the input shapes it was
    /// made for, reused while the shapes stay the same from Run to Run.
    broadcasts: Vec<Option<CachedBroadcast>>,
    /// Per step: the working memory of a family op (empty for other steps).
    op_scratch: Vec<crate::ops::OpScratch>,
}

#[derive(Debug)]
struct CachedBroadcast {
    a: Shape,
    b: Shape,
    plan: Broadcast,
}

impl RunState {
    pub fn new(plan: &Plan) -> Self {
        let shapes = match &plan.fixed {
            Some(f) => f.shapes.clone(),
            None => {
                let mut shapes = vec![Shape::new(); plan.values.len()];
                for step in &plan.steps {
                    shapes[step.output] = Shape::from_slice(&[shapes::UNSET_DIM]);
                }
                shapes
            }
        };
        let broadcasts = if plan.fixed.is_some() { Vec::new() } else { (0..plan.steps.len()).map(|_| None).collect() };
        let buffers = plan.buffer_types.iter().map(|&t| Buf::new(t).expect("planned types are held")).collect();
        let op_scratch = plan.steps.iter().map(|_| crate::ops::OpScratch::default()).collect();
        let buffer_lens = vec![0; plan.buffer_types.len()];
        Self { shapes, buffers, buffer_lens, broadcasts, op_scratch }
    }
}

/// The fused outputs a Run holds without a heap allocation: a KV-cache model returns a
/// key and a value a layer besides its logits (the project's Llama small 9; 4 here made
/// every Run of the GPT-2 and Llama models allocate).
const MAX_INLINE_OUTPUTS: usize = 32;

fn element_count(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// When one node of a Run (a [`crate::plan::NodeUnit`]) started and ended.
#[derive(Clone, Copy, Debug)]
pub struct NodeTime {
    /// Index into `Plan::units`.
    pub unit: usize,
    pub start: std::time::Instant,
    pub end: std::time::Instant,
}

/// Runs `plan` once.
pub fn execute<'a>(
    plan: &Plan,
    state: &mut RunState,
    inputs: &[TensorIn<'a>],
    outputs: &mut dyn Outputs<'a>,
    par: &dyn Parallel,
) -> Result<()> {
    execute_timed(plan, state, inputs, outputs, par, None)
}

/// Runs `plan` once; with `times`, appends each node's start and end to it (ORT's
/// profiler is on). Without, no clock is read.
pub fn execute_timed<'a>(
    plan: &Plan,
    state: &mut RunState,
    inputs: &[TensorIn<'a>],
    outputs: &mut dyn Outputs<'a>,
    par: &dyn Parallel,
    mut times: Option<&mut Vec<NodeTime>>,
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
        let ok_type = input.elem_type == value.elem_type;
        if !ok_type || !matches_declared(&input.shape, &value.declared) {
            let (step, pos) = value.first_reader.unwrap_or((0, 0));
            let expected = value.declared.as_ref().map(DeclaredText);
            return Err(Error::invalid(format_args!(
                "{} input {pos} '{}': expected {} {}, got {} {}",
                NodeLabel(&plan.steps[step]),
                value.name,
                dtype::name(value.elem_type),
                expected.map_or_else(|| "of any shape".to_string(), |d| d.to_string()),
                dtype::name(input.elem_type),
                ShapeText(&input.shape)
            )));
        }
        if plan.fixed.is_none() {
            shapes::checked_count(&input.shape, format_args!("fused input '{}'", value.name))?;
            state.shapes[plan.inputs[i]].clone_from(&input.shape);
        }
    }
    if plan.fixed.is_none() {
        for (id, shape, _) in &plan.constants {
            state.shapes[*id].clone_from(shape);
        }
    }

    let mut outs: smallvec::SmallVec<[Option<DataMut<'a>>; MAX_INLINE_OUTPUTS]> =
        (0..plan.outputs.len()).map(|_| None).collect();

    if plan.units.is_empty() {
        for (i, step) in plan.steps.iter().enumerate() {
            run_step(plan, i, step, state, inputs, &mut outs, outputs, par)?;
        }
        return Ok(());
    }
    for (u, unit) in plan.units.iter().enumerate() {
        {
            let _node = probe::NodeScope::enter(unit.probe);
            let start = times.is_some().then(std::time::Instant::now);
            for i in unit.steps.clone() {
                run_step(plan, i, &plan.steps[i], state, inputs, &mut outs, outputs, par)?;
            }
            if let (Some(t), Some(start)) = (times.as_deref_mut(), start) {
                t.push(NodeTime { unit: u, start, end: std::time::Instant::now() });
            }
        }
        if let Some(last) = unit.steps.clone().next_back() {
            probe::record_node_shape(unit.probe, &state.shapes[plan.steps[last].output]);
        }
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
    outs: &mut [Option<DataMut<'a>>],
    outputs: &mut dyn Outputs<'a>,
    par: &dyn Parallel,
) -> Result<()> {
    let out_value = &plan.values[step.output];
    let rank_8 = plan.fixed.is_none() && step.kernel.stops_at_rank_8();
    if rank_8 {
        past_rank_8(plan, step, step.inputs.iter().copied(), &state.shapes)?;
    }
    // The step's own buffer, out of the state while the step reads the others (a view
    // writes nothing: its output is its input's data).
    let mut owned = match out_value.slot {
        Slot::Buffer(b) if !step.view => Some(std::mem::take(&mut state.buffers[b])),
        _ => None,
    };
    // A failed shape check puts the buffer back (its element type is the plan's), so the
    // next Run of the session finds it as it was.
    macro_rules! or_restore {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => {
                    if let (Slot::Buffer(b), Some(buf)) = (out_value.slot, owned.take()) {
                        state.buffers[b] = buf;
                    }
                    return Err(e);
                }
            }
        };
    }
    // Output shape: known since Compile for static plans, inferred here otherwise.
    let inferred;
    let broadcast = match &plan.fixed {
        Some(f) => f.broadcasts[index].as_ref(),
        None if step.op.is_some() => {
            let mut data: SmallVec<[Option<Data<'_>>; 16]> = SmallVec::new();
            for &id in &step.inputs {
                data.push(Some(read(plan, id, inputs, &state.buffers, &state.buffer_lens, outs)));
            }
            let shape = shapes::op_shape(&plan.values, step, &state.shapes, &data);
            drop(data);
            let shape = or_restore!(shape.and_then(|s| {
                s.ok_or_else(|| Error::ep(format_args!("{}: no shape with every input known", NodeLabel(step))))
            }));
            or_restore!(shapes::check_declared(&plan.values, step, &shape));
            state.shapes[step.output] = shape;
            None
        }
        None if matches!(step.kernel, Kernel::Binary(_)) => {
            let (a, b) = (&state.shapes[step.inputs[0]], &state.shapes[step.inputs[1]]);
            let cached = matches!(&state.broadcasts[index], Some(c) if c.a == *a && c.b == *b);
            if cached {
                // Same input shapes as last Run: same output shape, already checked.
                let plan_b = &state.broadcasts[index].as_ref().expect("cached").plan;
                let out = &mut state.shapes[step.output];
                out.clear();
                out.extend_from_slice(plan_b.out_shape());
            } else {
                let (a, b) = (Shape::from_slice(a), Shape::from_slice(b));
                let plan_b = or_restore!(shapes::infer_into(&plan.values, step, &mut state.shapes, &[]))
                    .expect("binary steps broadcast");
                state.broadcasts[index] = Some(CachedBroadcast { a, b, plan: plan_b });
            }
            state.broadcasts[index].as_ref().map(|c| &c.plan)
        }
        None => {
            // int64 tensors the step reads at Run (shapes, axes): only in plans that are
            // not static.
            let mut params: SmallVec<[&[i64]; 1]> = SmallVec::new();
            for &id in &step.params {
                params.push(read(plan, id, inputs, &state.buffers, &state.buffer_lens, outs).i64().unwrap_or(&[]));
            }
            let result = shapes::infer_into(&plan.values, step, &mut state.shapes, &params);
            drop(params);
            inferred = or_restore!(result);
            inferred.as_ref()
        }
    };
    if rank_8 {
        or_restore!(past_rank_8(plan, step, std::iter::once(step.output), &state.shapes));
    }
    if step.view {
        probe::record_nodes(1);
        return Ok(());
    }
    let out_shape = &state.shapes[step.output];
    let len = element_count(out_shape);
    let src = Sources { plan, inputs, buffers: &state.buffers, lens: &state.buffer_lens, outs };
    match (out_value.slot, owned.as_mut()) {
        (Slot::Output(o), _) => {
            let mut dst = outputs.alloc(o, out_shape, out_value.elem_type)?;
            check_len(step, dst.len(), len, out_shape)?;
            let scratch = &mut state.op_scratch[index];
            run_kernel(step, &src, &state.shapes, broadcast, &mut dst, par, scratch)?;
            outs[o] = Some(dst);
        }
        (Slot::Buffer(b), Some(buf)) => {
            // A part of a larger value (a Concat's input) is written in place in it.
            let (at, whole) = out_value.part.map_or((0, len), |p| (p.at, p.whole));
            buf.grow(whole);
            let scratch = &mut state.op_scratch[index];
            let mut dst = buf.view_mut_range(at, len);
            let result = run_kernel(step, &src, &state.shapes, broadcast, &mut dst, par, scratch);
            state.buffers[b] = owned.take().expect("taken above");
            state.buffer_lens[b] = whole;
            result?;
        }
        _ => unreachable!("a step writes an output or a buffer"),
    }
    probe::record_nodes(1 + step.epilogue.as_ref().map_or(0, |e| e.folded.len()));
    Ok(())
}

/// An error naming the node and the value when one of `values` has rank over 8 (for the
/// kernels that stop there: `Kernel::stops_at_rank_8`).
fn past_rank_8(plan: &Plan, step: &Step, values: impl Iterator<Item = usize>, shapes: &[Shape]) -> Result<()> {
    for id in values {
        let rank = shapes[id].len();
        if rank > 8 {
            return Err(Error::invalid(format_args!(
                "{} '{}': rank {rank}; Rivet runs this op up to rank 8",
                NodeLabel(step),
                plan.values[id].name
            )));
        }
    }
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

#[inline(always)]
fn read<'s>(
    plan: &'s Plan,
    id: usize,
    inputs: &'s [TensorIn<'_>],
    buffers: &'s [Buf],
    lens: &'s [usize],
    outs: &'s [Option<DataMut<'_>>],
) -> Data<'s> {
    match plan.values[id].slot {
        Slot::Input(i) => inputs[i].data,
        Slot::Const(c) => plan.constants[c].2.view(),
        Slot::Buffer(b) => match plan.values[id].part {
            None => buffers[b].view_prefix(lens[b]),
            Some(p) => buffers[b].view_range(p.at, p.len),
        },
        Slot::Output(o) => outs[o].as_ref().expect("outputs are written before they are read").view(),
    }
}

/// Where a step's inputs are read from during a Run.
struct Sources<'s, 'a> {
    plan: &'s Plan,
    inputs: &'s [TensorIn<'a>],
    buffers: &'s [Buf],
    lens: &'s [usize],
    outs: &'s [Option<DataMut<'a>>],
}

impl<'s> Sources<'s, '_> {
    #[inline(always)]
    fn read(&self, id: usize) -> Data<'s> {
        read(self.plan, id, self.inputs, self.buffers, self.lens, self.outs)
    }
}

/// The typed path of [`run_kernel`], out of line (its frame is larger).
#[dispatch_phase(KernelInvoke)]
#[inline(never)]
fn run_typed(step: &Step, src: &Sources<'_, '_>, shapes: &[Shape], dst: &mut DataMut<'_>) -> Result<()> {
    let mut ins: SmallVec<[Data<'_>; 4]> = SmallVec::new();
    for &id in &step.inputs {
        ins.push(src.read(id));
    }
    crate::exec_typed::apply_typed(step, &ins, shapes, dst)
}

/// A family op's step (see `ops::op`), out of line.
#[dispatch_phase(KernelInvoke)]
#[inline(never)]
fn run_op(
    step: &Step,
    op: &crate::ops::OpRef,
    src: &Sources<'_, '_>,
    shapes: &[Shape],
    dst: &mut DataMut<'_>,
    par: &dyn Parallel,
    scratch: &mut crate::ops::OpScratch,
) -> Result<()> {
    // Sixteen inline: QLinearConv's nine inputs, a Concat's (as many as the float32
    // path held), so no op's Run spills to the heap.
    let mut ins: SmallVec<[Data<'_>; 16]> = SmallVec::new();
    let mut in_shapes: SmallVec<[&[usize]; 16]> = SmallVec::new();
    for &id in &step.inputs {
        ins.push(src.read(id));
        in_shapes.push(&shapes[id]);
    }
    let x = crate::ops::RunIn {
        ins: &ins,
        shapes: &in_shapes,
        out_shape: &shapes[step.output],
        constant: step.constant_inputs,
        par,
        scratch,
    };
    op.run(x, dst).map_err(|why| {
        // "input k: ..." reads on from the node's label, as the older kernels' errors do.
        let names_input = why.strip_prefix("input ").is_some_and(|r| {
            let digits = r.bytes().take_while(u8::is_ascii_digit).count();
            digits > 0 && r[digits..].starts_with(':')
        });
        let sep = if names_input { " " } else { ": " };
        Error::invalid(format_args!("{}{sep}{why}", NodeLabel(step)))
    })
}

/// Runs a step on the float32 path or the typed one.
#[allow(clippy::too_many_arguments)]
fn run_kernel(
    step: &Step,
    src: &Sources<'_, '_>,
    shapes: &[Shape],
    broadcast: Option<&Broadcast>,
    dst: &mut DataMut<'_>,
    par: &dyn Parallel,
    scratch: &mut crate::ops::OpScratch,
) -> Result<()> {
    if let Some(op) = &step.op {
        return run_op(step, op, src, shapes, dst, par, scratch);
    }
    if step.typed {
        return run_typed(step, src, shapes, dst);
    }
    let dst = dst.f32().ok_or_else(|| Error::ep(format_args!("{}: float32 step, other output", NodeLabel(step))))?;
    // Up to four inputs in a plain array: building a SmallVec costs more than the Relu
    // of a small tensor.
    let epilogue = match &step.epilogue {
        Some(e) => epilogue_inputs(step, e, src, shapes)?,
        None => EpilogueIn::default(),
    };
    let n = step.inputs.len();
    if n <= 4 {
        let mut f: [&[f32]; 4] = [&[]; 4];
        for (slot, &id) in f.iter_mut().zip(&step.inputs) {
            *slot = src.read(id).f32().unwrap_or(&[]);
        }
        apply(step, &f[..n], shapes, broadcast, dst, par, epilogue);
    } else {
        let f: SmallVec<[&[f32]; 16]> = step.inputs.iter().map(|&id| src.read(id).f32().unwrap_or(&[])).collect();
        apply(step, &f, shapes, broadcast, dst, par, epilogue);
    }
    Ok(())
}

/// The operands of a step's epilogue, read and checked against its output.
#[derive(Clone, Copy, Default)]
struct EpilogueIn<'s> {
    bias: Option<&'s [f32]>,
    residual: Option<&'s [f32]>,
}

/// Reads an epilogue's operands: a bias must hold one value per output column and a
/// residual have the output's shape (the fusion pass saw them declared so; a Run whose
/// tensors differ fails naming the folded node and its input).
fn epilogue_inputs<'s>(step: &Step, e: &Epilogue, src: &Sources<'s, '_>, shapes: &[Shape]) -> Result<EpilogueIn<'s>> {
    let out = shapes[step.output].as_slice();
    let folded = |k: usize| e.folded.get(k).map_or(("?", "?"), |(n, o)| (n.as_str(), o.as_str()));
    let adds = || e.folded.iter().enumerate().filter(|(_, (_, op))| op == "Add").map(|(k, _)| k);
    let bad = |id: usize, what: &str| {
        // The Add that read it: the bias is the first folded Add, the residual the last.
        let add = if Some(id) == e.bias { adds().next() } else { adds().next_back() };
        let (name, op) = folded(add.unwrap_or(0));
        Error::invalid(format_args!(
            "node '{name}' ({op}) input '{}': {what}, got shape {} for output {}",
            src.plan.values[id].name,
            ShapeText(&shapes[id]),
            ShapeText(out)
        ))
    };
    let mut got = EpilogueIn::default();
    if let Some(b) = e.bias {
        let n = out.last().copied().unwrap_or(1);
        if element_count(&shapes[b]) != n || shapes[b].last() != Some(&n) {
            return Err(bad(b, "expected one value per output column"));
        }
        got.bias = src.read(b).f32();
    }
    if let Some(r) = e.residual {
        if shapes[r].as_slice() != out {
            return Err(bad(r, "expected the shape of the product it is added to"));
        }
        got.residual = src.read(r).f32();
    }
    Ok(got)
}

/// Runs a step's kernel into `dst`, splitting large elementwise outputs over the pool.
#[dispatch_phase(KernelInvoke)]
#[allow(clippy::too_many_arguments)]
fn apply(
    step: &Step,
    ins: &[&[f32]],
    shapes: &[Shape],
    broadcast: Option<&Broadcast>,
    dst: &mut [f32],
    par: &dyn Parallel,
    epilogue: EpilogueIn<'_>,
) {
    // The elementwise kernels here; the others in `apply_other`, whose frame is large
    // (about 30 instructions of prologue that a small Relu would pay on every node).
    let parallel = dst.len() >= PARALLEL_MIN_LEN;
    match step.kernel {
        Kernel::Identity | Kernel::Reshape(_) => dst.copy_from_slice(ins[0]),
        Kernel::Unary(op) => {
            let x = ins[0];
            if parallel {
                par.for_each_chunk(dst, CHUNK_LEN, &|start, chunk| op.apply(&x[start..start + chunk.len()], chunk));
            } else {
                op.apply(x, dst);
            }
        }
        Kernel::Binary(op) => {
            let (x, y, b) = (ins[0], ins[1], broadcast.expect("computed for binary steps"));
            if parallel {
                par.for_each_chunk(dst, CHUNK_LEN, &|start, chunk| binary_f32(op, b, x, y, chunk, start));
            } else {
                binary_f32(op, b, x, y, dst, 0);
            }
        }
        _ => apply_other(step, ins, shapes, dst, par, epilogue),
    }
}

/// [`apply`] for the kernels that are not elementwise.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn apply_other(
    step: &Step,
    ins: &[&[f32]],
    shapes: &[Shape],
    dst: &mut [f32],
    par: &dyn Parallel,
    operands: EpilogueIn<'_>,
) {
    let x = ins[0];
    let shape = |k: usize| shapes[step.inputs[k]].as_slice();
    let epilogue = match &step.epilogue {
        Some(e) => nn::Epilogue {
            scale: e.scale,
            bias: operands.bias.map_or(nn::Bias::None, nn::Bias::Cols),
            act: e.act,
            residual: operands.residual,
            after: e.after,
        },
        None => nn::Epilogue::default(),
    };
    // A constant B packed once (MatMul and Gemm), by the step's output value.
    let weights = |m: usize, n: usize, k: usize, trans_b: bool| {
        let packing = products::Packing { key: step.output, bf16: step.bf16 };
        step.constant_weights.then(|| products::packed_weights(par, packing, (m, n, k), ins[1], trans_b))
    };
    match step.kernel {
        Kernel::Identity | Kernel::Reshape(_) | Kernel::Unary(_) | Kernel::Binary(_) => {
            unreachable!("elementwise kernels run in apply")
        }
        Kernel::Scale(s) => dst.iter_mut().zip(x).for_each(|(o, &v)| *o = v * s),
        Kernel::Clip { min, max } => dst.iter_mut().zip(x).for_each(|(o, &v)| {
            // NaN passes through, as in ORT.
            let v = if v < min { min } else { v };
            *o = if v > max { max } else { v };
        }),
        Kernel::ClipInputs { min, max } => {
            let lo = if min { ins[1][0] } else { f32::NEG_INFINITY };
            let hi = if max { ins[if min { 2 } else { 1 }][0] } else { f32::INFINITY };
            dst.iter_mut().zip(x).for_each(|(o, &v)| {
                let v = if v < lo { lo } else { v };
                *o = if v > hi { hi } else { v };
            });
        }
        Kernel::Transpose(perm) => {
            let s = shape(0);
            let mut p: SmallVec<[usize; 8]> = SmallVec::new();
            if perm.len == 0 {
                p.extend((0..s.len()).rev());
            } else {
                p.extend(perm.as_slice().iter().map(|&a| shapes::normalize_axis(a, s.len(), false).unwrap_or(0)));
            }
            // Split over the pool along the output's outermost merged axis, each task
            // writing its contiguous part (Whisper-small's head transposes, 1.15 M floats
            // each, ran on one core: 3.7 of its 62 ms a Run at two threads).
            let (outer, per) = nn::transpose_outer(s, &p);
            let tasks = crate::parallel::cores().min(outer);
            if dst.len() >= PARALLEL_MIN_LEN && tasks > 1 {
                par.for_each_chunk(dst, outer.div_ceil(tasks) * per, &|start, part| {
                    let first = start / per;
                    nn::transpose_part_f32(x, s, &p, first..first + part.len() / per, part)
                });
            } else {
                nn::transpose_f32(x, s, &p, dst);
            }
        }
        Kernel::MatMul { trans_b } => {
            let (sa, sb) = (shape(0), shape(1));
            let packed = match (sb, trans_b) {
                ([k, n], false) | ([n, k], true) => weights(element_count(sa) / k.max(&1), *n, *k, trans_b),
                _ => None,
            };
            let packed_b = packed.as_ref().map(|cache| &cache[step.output].packed);
            let op = products::MatMul { alpha: 1.0, trans_b };
            products::matmul(ins[0], sa, ins[1], sb, op, products::Extras { packed_b, epilogue }, dst, par);
        }
        Kernel::Gemm { alpha, beta, trans_a, trans_b } => {
            let (a, b) = (shape(0), shape(1));
            let (m, k) = if trans_a { (a[1], a[0]) } else { (a[0], a[1]) };
            let n = if trans_b { b[0] } else { b[1] };
            let beta = match ins.get(2) {
                Some(c) => {
                    // C broadcast into the output, then scaled by beta inside gemm.
                    broadcast_into(c, shape(2), dst.chunks_exact_mut(n.max(1)), m, n);
                    beta
                }
                None => 0.0,
            };
            let p = products::Product { m, n, k, alpha, trans_a, trans_b, beta };
            let packed = weights(m, n, k, trans_b);
            let packed_b = packed.as_ref().map(|cache| &cache[step.output].packed);
            products::product_with(p, ins[0], ins[1], products::Extras { packed_b, epilogue }, dst, par);
        }
        Kernel::Conv { window, group, channels_last } => {
            let (xs, ws) = (shape(0), shape(1));
            let (g, _) = shapes::window_3d(&window, shapes::spatial(xs), shapes::spatial(ws))
                .expect("checked by shape inference");
            let constant = step.constant_weights.then_some(products::Packing { key: step.output, bf16: step.bf16 });
            let bias = ins.get(2).copied();
            if channels_last.any() {
                let conv = crate::channels_last_conv::Conv { x, w: ins[1], bias, xs, out_c: ws[0], group, g: &g };
                crate::channels_last_conv::convolution(&conv, channels_last, dst, par, constant, &epilogue);
            } else {
                products::convolution(x, ins[1], bias, xs, ws[0], group, &g, dst, par, constant, &epilogue);
            }
        }
        Kernel::Math(op) => dst.iter_mut().zip(x).for_each(|(o, &v)| *o = op.apply(v)),
        Kernel::Variadic { .. } => unreachable!("lowered by the plan"),
        // Every other kernel runs on the typed path (`Kernel::is_typed`).
        _ => unreachable!("typed steps run in exec_typed"),
    }
}

/// Writes C (of shape `cs`, broadcastable to [m, n]) into the m×n rows of the output.
fn broadcast_into<'a>(c: &[f32], cs: &[usize], rows: impl Iterator<Item = &'a mut [f32]>, m: usize, n: usize) {
    let (cm, cn) = match cs.len() {
        0 => (1, 1),
        1 => (1, cs[0]),
        _ => (cs[cs.len() - 2], cs[cs.len() - 1]),
    };
    for (i, row) in rows.take(m).enumerate() {
        let ci = if cm == 1 { 0 } else { i };
        for (j, o) in row.iter_mut().enumerate().take(n) {
            *o = c[ci * cn + if cn == 1 { 0 } else { j }];
        }
    }
}
