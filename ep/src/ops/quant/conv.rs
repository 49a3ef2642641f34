//! ConvInteger (`y = conv(x - zx, w - zw)` in int32) and QLinearConv (that convolution
//! plus an int32 bias, requantized per output channel: `y = round((sx · sw[m] / sy) ·
//! acc) + zy`), over 1 to 3 spatial axes with strides, dilations, pads or `auto_pad`, and
//! groups. Each group is one integer GEMM: the weights (minus their zero points, one or
//! one per output channel) times the input's im2col (minus its zero point, padding 0).
//! uint8 and int8; scales float32.

use std::ops::Range;
use std::sync::{Arc, Mutex};

use rivet_kernels::conv::Window3d;
use rivet_kernels::qgemm::depthwise::{DwRequants, QDepthwise, QDwPlanes};
use rivet_kernels::qgemm::{self, qgemm, ConvPlanes, ProductScratch, QOut, QPackedA, Requant};

use super::super::op::util::{bad_types, check_attrs, check_inputs, input, input_type, output_type};
use super::super::{Op, OpRef, RunIn, ShapeError, ShapeIn};
use super::{data_key, float_at, int_at, is_q8, numel, per_channel, scalar_float, scalar_int, sub, Packs};
use crate::data::{Data, DataMut};
use crate::graph::dtype::{FLOAT, INT32};
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::{int_attr, ints_attr, string_attr};
use crate::parallel::lock;

mod channels_last;
pub(super) use channels_last::Bytes;
use channels_last::{channels_last, channels_last_native, channels_last_wins};

#[derive(Clone, Copy, Debug, PartialEq)]
enum AutoPad {
    NotSet,
    Valid,
    SameUpper,
    SameLower,
}

#[derive(Clone, Debug)]
struct QConv {
    /// QLinearConv (else ConvInteger).
    qlinear: bool,
    /// The input and the output stored channels last (`passes::channels_last_int8`).
    cl_input: bool,
    cl_output: bool,
    auto_pad: AutoPad,
    group: usize,
    kernel_shape: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
    dilations: Option<Vec<i64>>,
    pads: Option<Vec<i64>>,
}

const ATTRS: [&str; 6] = ["auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"];

pub fn conv_integer(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &ATTRS)?;
    check_inputs(node, 2, 4)?;
    let (x, w) = (input_type(node, 0), input_type(node, 1));
    let zps_ok = (input(node, 2).is_none() || input_type(node, 2) == x)
        && (input(node, 3).is_none() || input_type(node, 3) == w);
    if !is_q8(x) || !is_q8(w) || !zps_ok || output_type(node, 0) != INT32 {
        return Err(bad_types(node, "uint8 or int8 input and weights (zero points of their types) to int32"));
    }
    compile(node, false)
}

pub fn qlinear_conv(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &ATTRS)?;
    check_inputs(node, 8, 9)?;
    let t = |k| input_type(node, k);
    let y = output_type(node, 0);
    let ok = is_q8(t(0))
        && is_q8(t(3))
        && is_q8(y)
        && t(2) == t(0)
        && t(5) == t(3)
        && t(7) == y
        && [1, 4, 6].into_iter().all(|k| t(k) == FLOAT)
        && (input(node, 8).is_none() || t(8) == INT32);
    if !ok {
        return Err(bad_types(node, "uint8 or int8 with float32 scales, zero points of each's type and an int32 bias"));
    }
    compile(node, true)
}

fn compile(node: &NodeDesc, qlinear: bool) -> Result<Arc<dyn Op>, String> {
    let auto_pad = match string_attr(node, "auto_pad", "NOTSET")? {
        "NOTSET" => AutoPad::NotSet,
        "VALID" => AutoPad::Valid,
        "SAME_UPPER" => AutoPad::SameUpper,
        "SAME_LOWER" => AutoPad::SameLower,
        p => return Err(format!("{} auto_pad '{p}' is not supported", node.op_type)),
    };
    let group = int_attr(node, "group", 1)?;
    if !(1..=1 << 20).contains(&group) {
        return Err(format!("{} group {group} is not positive", node.op_type));
    }
    let positive = |name: &str| -> Result<Option<Vec<i64>>, String> {
        let v = ints_attr(node, name)?;
        if v.as_ref().is_some_and(|v| v.iter().any(|&e| !(1..=1 << 20).contains(&e))) {
            return Err(format!("{} {name} must be positive", node.op_type));
        }
        Ok(v)
    };
    let pads = ints_attr(node, "pads")?;
    if pads.as_ref().is_some_and(|p| p.iter().any(|&e| !(0..=1 << 20).contains(&e))) {
        return Err(format!("{} pads must not be negative", node.op_type));
    }
    Ok(Arc::new(QConv {
        qlinear,
        cl_input: false,
        cl_output: false,
        auto_pad,
        group: group as usize,
        kernel_shape: positive("kernel_shape")?,
        strides: positive("strides")?,
        dilations: positive("dilations")?,
        pads,
    }))
}

impl QConv {
    /// Input positions of x, its zero point, w and its zero point.
    fn slots(&self) -> [usize; 4] {
        if self.qlinear {
            [0, 2, 3, 5]
        } else {
            [0, 2, 1, 3]
        }
    }

    /// The window geometry and the output shape for input `x` and weights `w`.
    fn geometry(&self, x: &[usize], w: &[usize]) -> Result<(Window3d, Shape), String> {
        let r = x.len();
        if !(3..=5).contains(&r) || w.len() != r {
            return Err(format!("input {x:?} and weights {w:?} must both be [N, C, 1 to 3 spatial axes]"));
        }
        let s = r - 2;
        let (c, m, g) = (x[1], w[0], self.group);
        if w[1] * g != c || m % g != 0 {
            return Err(format!("{c} input channels and weights {w:?} do not make {g} groups"));
        }
        let kernel = &w[2..];
        // Fixed arrays, not Vecs: this runs on every Run.
        let attr = |v: &Option<Vec<i64>>, name: &str, len: usize, default: usize| -> Result<[usize; 6], String> {
            let mut out = [default; 6];
            match v {
                None => {}
                Some(v) if v.len() == len => out.iter_mut().zip(v).for_each(|(o, &e)| *o = e as usize),
                Some(v) => return Err(format!("{name} {v:?} should have {len} values")),
            }
            Ok(out)
        };
        if let Some(ks) = &self.kernel_shape {
            if ks.len() != s || ks.iter().zip(kernel).any(|(&a, &b)| a as usize != b) {
                return Err(format!("kernel_shape {ks:?} differs from the weights' {kernel:?}"));
            }
        }
        let strides = attr(&self.strides, "strides", s, 1)?;
        let dilations = attr(&self.dilations, "dilations", s, 1)?;
        let pads = attr(&self.pads, "pads", 2 * s, 0)?;
        let mut geo = Window3d {
            input: [1; 3],
            out: [1; 3],
            kernel: [1; 3],
            stride: [1; 3],
            dilation: [1; 3],
            pad_begin: [0; 3],
        };
        let mut out = Shape::from_slice(&[x[0], m]);
        for a in 0..s {
            let (len, k, st, dil) = (x[2 + a], kernel[a], strides[a], dilations[a]);
            let span = dil * (k.max(1) - 1) + 1;
            let (begin, end) = match self.auto_pad {
                AutoPad::NotSet => (pads[a], pads[s + a]),
                AutoPad::Valid => (0, 0),
                AutoPad::SameUpper | AutoPad::SameLower => {
                    let o = len.div_ceil(st);
                    let total = ((o.max(1) - 1) * st + span).saturating_sub(len);
                    if self.auto_pad == AutoPad::SameUpper {
                        (total / 2, total - total / 2)
                    } else {
                        (total - total / 2, total / 2)
                    }
                }
            };
            if k == 0 || len + begin + end < span {
                return Err(format!(
                    "a kernel of {k} (dilation {dil}) does not fit axis {} of {x:?} with its padding",
                    a + 2
                ));
            }
            let o = (len + begin + end - span) / st + 1;
            let at = 3 - s + a;
            geo.input[at] = len;
            geo.out[at] = o;
            geo.kernel[at] = k;
            geo.stride[at] = st;
            geo.dilation[at] = dil;
            geo.pad_begin[at] = begin;
            out.push(o);
        }
        Ok((geo, out))
    }
}

impl Op for QConv {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let [ix, _, iw, _] = self.slots();
        Ok(self.geometry(x.shapes[ix], x.shapes[iw])?.1)
    }

    fn channels_last_use(&self, shapes: &[&[usize]], _out: &[usize]) -> Option<bool> {
        let [ix, _, iw, _] = self.slots();
        let (xs, ws) = (*shapes.get(ix)?, *shapes.get(iw)?);
        if !self.qlinear || self.group != 1 || xs.len() != 4 {
            return None;
        }
        let (geo, _) = self.geometry(xs, ws).ok()?;
        channels_last_native(&geo, xs[1], ws[0]).then_some(true)
    }

    fn channels_last_inputs(&self) -> u32 {
        1 << self.slots()[0]
    }

    fn with_channels_last(&self, inputs: u32, output: bool) -> Option<OpRef> {
        let cl_input = inputs & (1 << self.slots()[0]) != 0;
        Some(OpRef(Arc::new(QConv { cl_input, cl_output: output, ..self.clone() })))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        self.run_as(x, out, (self.cl_input, self.cl_output))
    }
}

impl QConv {
    /// [`Op::run`] with the input and output stored as `(cl_input, cl_output)` say.
    fn run_as(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>, layout: (bool, bool)) -> Result<(), String> {
        let [ix, izx, iw, izw] = self.slots();
        let (xs, ws) = (x.shapes[ix], x.shapes[iw]);
        let (geo, _) = self.geometry(xs, ws)?;
        let marked = layout.0 || layout.1;
        if marked && !(self.qlinear && self.group == 1 && channels_last_native(&geo, xs[1], ws[0])) {
            return self.run_relaid(x, out);
        }
        let (batch, c, m, g) = (xs[0], xs[1], ws[0], self.group);
        let (cg, mg) = (c / g, m / g);
        let taps: usize = geo.kernel.iter().product();
        let (k, p, plane) = (cg * taps, geo.positions(), geo.plane());
        let zx = scalar_int(x.ins.get(izx).copied(), x.shapes.get(izx).copied(), "the input's zero point")?;
        let zw_data = x.ins.get(izw).copied();
        let zw_per = match x.shapes.get(izw) {
            Some(s) => per_channel(s, m, "the weights' zero point")?,
            None => false,
        };
        if numel(ws) != m * k {
            return Err("the weights have fewer elements than their shape".into());
        }
        let (mut zy, mut bias, mut sx, mut sy) = (0, None, 0.0, 0.0);
        if self.qlinear {
            sx = scalar_float(x.ins[1], x.shapes[1], "the input's scale")?;
            sy = scalar_float(x.ins[6], x.shapes[6], "the output's scale")?;
            zy = scalar_int(Some(x.ins[7]), Some(x.shapes[7]), "the output's zero point")?;
            if let Some(&b) = x.ins.get(8) {
                let Data::I32(b) = b else { return Err("the bias is not int32".into()) };
                if b.len() != m || x.shapes[8].len() != 1 {
                    return Err(format!("the bias must be 1-D of {m} values, has shape {:?}", x.shapes[8]));
                }
                bias = Some(b);
            }
        }
        // The weights (and their zero points) the same data every Run: packed once.
        let constant = |i: usize| i >= x.ins.len() || x.constant & (1 << i) != 0;
        // One input and one output channel a group: the float depthwise kernel on the
        // differences from the zero points. Every partial sum is an integer below
        // taps · 255², exact in float32 (and read back exactly) while that is below 2^22:
        // up to 64 taps.
        let depthwise = cg == 1 && mg == 1 && taps * 255 * 255 < 1 << 22 && plane > 0;
        // The channels-last product (its weights packed as B below); not a depthwise one.
        let cl_path = !depthwise && self.qlinear && g == 1 && (marked || channels_last_wins(&geo, c, m));
        // (The path is part of the key: the other path's weights are not packed.)
        let w_key =
            data_key(x.ins[iw]).filter(|_| constant(iw) && constant(izw)).map(|(at, len)| (at, len, cl_path as usize));
        let packs = x.scratch.state::<Packs>();
        if w_key.is_none() || packs.key != w_key {
            // Each group's output channels' weights, one A a group.
            packs.zero.clear();
            for row in 0..if zw_per { m } else { 1 } {
                packs.zero.push(zw_data.and_then(|z| int_at(z, row)).unwrap_or(0));
            }
            packs.key = None;
            if depthwise {
                // The weights' differences from their zero points, as floats.
                packs.wf.clear();
                for ch in 0..m {
                    let z = packs.zero[if zw_per { ch } else { 0 }];
                    for t in 0..taps {
                        let w = int_at(x.ins[iw], ch * taps + t).ok_or("the weights are short")?;
                        packs.wf.push((w - z) as f32);
                    }
                }
                // The integer kernel's copy; refused (a difference outside int8, a kernel
                // wider than it takes), it keeps no channel and the float route runs.
                let wf = &packs.wf;
                packs.qdw.pack(m, &geo, |ch, t| wf[ch * taps + t] as i32);
            }
            packs.groups.resize_with(if depthwise || cl_path { 0 } else { g }, QPackedA::new);
            for (grp, a) in packs.groups.iter_mut().enumerate() {
                let zero = if zw_per { &packs.zero[grp * mg..(grp + 1) * mg] } else { &packs.zero[..] };
                match sub(x.ins[iw], grp * mg * k, mg * k)? {
                    Data::U8(w) => a.pack_conv_weights(w, mg, cg, taps, zero),
                    Data::I8(w) => a.pack_conv_weights(w, mg, cg, taps, zero),
                    _ => return Err("the weights are not uint8 or int8".into()),
                }
            }
            packs.key = w_key;
        }
        if self.qlinear {
            let sw_per = per_channel(x.shapes[4], m, "the weights' scale")?;
            packs.scales.clear();
            for row in 0..m {
                let sw = float_at(x.ins[4], if sw_per { row } else { 0 }).ok_or("the weights' scale is short")?;
                packs.scales.push(sx * sw / sy);
            }
        }
        if depthwise {
            return run_depthwise(packs, x.ins[ix], (batch, c, plane, p), &geo, zx, (bias, zy), out, x.par);
        }
        if cl_path {
            let w = x.ins[iw];
            let key = w_key;
            if key.is_none() || packs.nhwc_key != key {
                packs.nhwc_key = None;
                match w {
                    Data::U8(w) => packs.nhwc.pack_nhwc_weights(w, m, c, taps, &packs.zero),
                    Data::I8(w) => packs.nhwc.pack_nhwc_weights(w, m, c, taps, &packs.zero),
                    _ => return Err("the weights are not uint8 or int8".into()),
                }
                packs.nhwc_key = key;
            }
            return channels_last(packs, x.ins[ix], (batch, c, plane, p), &geo, zx, (bias, zy), out, x.par, layout);
        }
        let Packs { groups, b, planes, scales, tasks: task_scratch, .. } = packs;
        // One depth plane: the product straight from the input's phase planes.
        let implicit = ConvPlanes::fits(&geo) && cg > 0;
        for n in 0..batch {
            for (grp, a) in groups.iter().enumerate() {
                let at = (n * c + grp * cg) * plane;
                match (sub(x.ins[ix], at, cg * plane)?, implicit) {
                    (Data::U8(v), true) => planes.pack(v, cg, &geo, zx),
                    (Data::I8(v), true) => planes.pack(v, cg, &geo, zx),
                    (Data::U8(v), false) => b.pack_conv_input(v, cg, &geo, zx),
                    (Data::I8(v), false) => b.pack_conv_input(v, cg, &geo, zx),
                    _ => return Err("the input is not uint8 or int8".into()),
                }
                let rows = (n * m + grp * mg) * p..(n * m + (grp + 1) * mg) * p;
                let channels = grp * mg..(grp + 1) * mg;
                let scale = if scales.is_empty() { &[][..] } else { &scales[channels.clone()] };
                let rq = Requant { scale, per_row: true, bias: bias.map(|b| &b[channels]), zy };
                let y = match out {
                    DataMut::I32(y) if !self.qlinear => QOut::I32(&mut y[rows]),
                    DataMut::U8(y) if self.qlinear => QOut::U8(&mut y[rows], rq),
                    DataMut::I8(y) if self.qlinear => QOut::I8(&mut y[rows], rq),
                    _ => return Err("the output element type differs from the plan's".into()),
                };
                if implicit {
                    product_in_tasks(planes, a, y, (p, k), x.par, task_scratch);
                } else {
                    qgemm(a, b, 0..p, y, p);
                }
            }
        }
        Ok(())
    }
}

/// The most tasks a quantized convolution splits into.
const MAX_CONV_TASKS: usize = 8;
/// The least multiply-adds a task of a split convolution gets.
const TASK_MIN_MACS: usize = 1 << 22;

/// `y` = `a` × the planes' im2col (`positions` outputs of depth `k` an output channel),
/// split over the pool when each task gets at least [`TASK_MIN_MACS`]. With at least four
/// strips of A a task, by output channels: the tasks share the planes and the packed
/// weights and write their own rows in place, each copying B's panels for itself (about
/// 2% of a 64-channel convolution's time, paid again when the tasks run in turn on one
/// thread). With fewer (ResNet's 64 channels are five strips, which split 3:2), by grid
/// columns, evenly: each task writes its columns of every row into its own scratch and
/// the calling thread puts them in place, as the product alone does when the grid is
/// wider than the output (a 1x1 convolution's output is copied once more).
fn product_in_tasks(
    planes: &ConvPlanes,
    a: &QPackedA,
    mut y: QOut<'_>,
    (positions, k): (usize, usize),
    par: &dyn crate::parallel::Parallel,
    scratch: &mut Vec<Mutex<ProductScratch>>,
) {
    let m = a.rows();
    let tasks = crate::parallel::cores().min(m * positions * k / TASK_MIN_MACS).min(MAX_CONV_TASKS);
    if scratch.len() < tasks.max(1) {
        scratch.resize_with(tasks.max(1), Default::default);
    }
    let scratch = &scratch[..];
    if tasks < 2 {
        return planes.product_rows(a, 0..m, y, &mut lock(&scratch[0]));
    }
    if m < 4 * qgemm::MR * tasks {
        let kind = &y;
        par.for_each_index(tasks, &|i, _| {
            planes.product_part(a, planes.grid_part(i, tasks), kind, &mut lock(&scratch[i]));
        });
        for (i, s) in scratch.iter().enumerate().take(tasks) {
            planes.place_part(planes.grid_part(i, tasks), &lock(s), &mut y);
        }
        return;
    }
    let per = m.div_ceil(tasks).next_multiple_of(qgemm::MR);
    let parts: [RowPart<'_>; MAX_CONV_TASKS] = std::array::from_fn(|_| Mutex::new(None));
    let (mut rest, mut r0, mut count) = (Some(y), 0, 0);
    while r0 < m {
        let r1 = (r0 + per).min(m);
        let (part, tail) = split_rows(rest.take().expect("rows left"), (r1 - r0) * positions);
        *lock(&parts[count]) = Some((r0..r1, part));
        (rest, r0, count) = (Some(tail), r1, count + 1);
    }
    par.for_each_index(count, &|i, _| {
        if let Some((rows, out)) = lock(&parts[i]).take() {
            planes.product_rows(a, rows, out, &mut lock(&scratch[i]));
        }
    });
}

/// One task's rows of a split convolution and their part of the output, taken by the task.
type RowPart<'a> = Mutex<Option<(Range<usize>, QOut<'a>)>>;

/// `out` split after its first `at` elements.
fn split_rows(out: QOut<'_>, at: usize) -> (QOut<'_>, QOut<'_>) {
    match out {
        QOut::I32(y) => {
            let (a, b) = y.split_at_mut(at);
            (QOut::I32(a), QOut::I32(b))
        }
        QOut::U8(y, rq) => {
            let (a, b) = y.split_at_mut(at);
            (QOut::U8(a, rq), QOut::U8(b, rq))
        }
        QOut::I8(y, rq) => {
            let (a, b) = y.split_at_mut(at);
            (QOut::I8(a, rq), QOut::I8(b, rq))
        }
    }
}

/// A depthwise QLinearConv or ConvInteger (see `depthwise` in `run`), a few planes at a
/// time: their differences from the input's zero point as floats, the float depthwise
/// kernel, then the exact integer sums requantized (or written). The planes of a chunk
/// (about 64 KB of floats, whole blocks of 16 where the channels-last kernel takes them)
/// stay in cache from one step to the next: done image by image, MobileNetV2's 96
/// channels of 112x112 went through 4.8 MB of floats and back. With an input of at least
/// `PARALLEL_MIN_LEN` elements the planes split over the pool, each task with its own
/// floats (the same bits: each plane is computed alone).
#[allow(clippy::too_many_arguments)]
fn run_depthwise(
    packs: &mut Packs,
    input: Data<'_>,
    (batch, c, plane, p): (usize, usize, usize, usize),
    geo: &Window3d,
    zx: i32,
    (bias, zy): (Option<&[i32]>, i32),
    out: &mut DataMut<'_>,
    par: &dyn crate::parallel::Parallel,
) -> Result<(), String> {
    let Packs { wf, dw_tasks, scales, qdw, .. } = packs;
    let qdw = (qdw.channels() == c && QDepthwise::fits(geo)).then_some(&*qdw);
    let grain = rivet_kernels::depthwise::split_planes(geo, c);
    let planes = batch * c;
    // Split as the float depthwise convolution is (`products::convolution`): by the
    // input's size, its work being mostly memory.
    let big = planes * plane >= crate::parallel::PARALLEL_MIN_LEN;
    let tasks = if big { crate::parallel::cores().min(planes / grain.max(1)).min(MAX_CONV_TASKS) } else { 1 };
    if dw_tasks.len() < tasks.max(1) {
        dw_tasks.resize_with(tasks.max(1), Default::default);
    }
    let job = Depthwise { input, c, plane, p, grain, geo, zx, bias, zy, wf, scales, qdw };
    let out = reborrow(out)?;
    if tasks < 2 {
        let mut part = out;
        return job.planes(0..planes, &mut part, &mut lock(&dw_tasks[0]));
    }
    let per = planes.div_ceil(tasks).next_multiple_of(grain);
    let parts: [PlanePart<'_>; MAX_CONV_TASKS] = std::array::from_fn(|_| Mutex::new(None));
    let (mut rest, mut p0, mut count) = (Some(out), 0, 0);
    while p0 < planes {
        let p1 = (p0 + per).min(planes);
        let (part, tail) = split_data(rest.take().expect("planes left"), (p1 - p0) * p)?;
        *lock(&parts[count]) = Some((p0..p1, part));
        (rest, p0, count) = (Some(tail), p1, count + 1);
    }
    let errors: Mutex<Option<String>> = Mutex::new(None);
    let scratch = &dw_tasks[..];
    par.for_each_index(count, &|i, _| {
        if let Some((range, mut part)) = lock(&parts[i]).take() {
            if let Err(e) = job.planes(range, &mut part, &mut lock(&scratch[i])) {
                *lock(&errors) = Some(e);
            }
        }
    });
    let error = lock(&errors).take();
    error.map_or(Ok(()), Err)
}

/// One task's planes of a split depthwise convolution and their part of the output.
type PlanePart<'a> = Mutex<Option<(Range<usize>, DataMut<'a>)>>;

/// A depthwise convolution's task's floats: a chunk of input and output planes and the
/// kernel's scratch.
#[derive(Default)]
pub(super) struct DepthwiseScratch {
    xf: Vec<f32>,
    yf: Vec<f32>,
    kernel: Vec<f32>,
    /// The integer kernel's padded plane.
    padded: Vec<u8>,
}

/// What every task of a depthwise convolution reads.
struct Depthwise<'a> {
    input: Data<'a>,
    c: usize,
    plane: usize,
    p: usize,
    grain: usize,
    geo: &'a Window3d,
    zx: i32,
    bias: Option<&'a [i32]>,
    zy: i32,
    /// The weights' differences from their zero points, as floats.
    wf: &'a [f32],
    /// The output channels' scales (none for ConvInteger).
    scales: &'a [f32],
    /// The weights for the integer kernel, when it takes this window.
    qdw: Option<&'a QDepthwise>,
}

impl Depthwise<'_> {
    /// The planes `planes` (of the whole batch) into `out`, which holds their outputs
    /// from its start, a cache-sized chunk at a time.
    fn planes(&self, planes: Range<usize>, out: &mut DataMut<'_>, s: &mut DepthwiseScratch) -> Result<(), String> {
        let Depthwise { input, c, plane, p, grain, geo, zx, bias, zy, wf, scales, qdw } = *self;
        if let Some(qdw) = qdw {
            return self.integer_planes(qdw, planes, out, s);
        }
        let chunk = (CHUNK_FLOATS / plane.max(p).max(1)).max(1).next_multiple_of(grain);
        s.xf.resize(chunk * plane, 0.0);
        s.yf.resize(chunk * p, 0.0);
        let first = planes.start;
        let mut p0 = planes.start;
        while p0 < planes.end {
            let p1 = (p0 + chunk).min(planes.end);
            let (xs, ys) = (&mut s.xf[..(p1 - p0) * plane], &mut s.yf[..(p1 - p0) * p]);
            match sub(input, p0 * plane, (p1 - p0) * plane)? {
                Data::U8(v) => qgemm::dequantize(v, 1.0, zx, xs),
                Data::I8(v) => qgemm::dequantize(v, 1.0, zx, xs),
                _ => return Err("the input is not uint8 or int8".into()),
            }
            let none = rivet_kernels::Epilogue::default();
            rivet_kernels::depthwise::depthwise_planes(xs, wf, None, p0..p1, c, geo, ys, &none, &mut s.kernel);
            let rows = (p0 - first) * p..(p1 - first) * p;
            match out {
                DataMut::I32(y) if scales.is_empty() => qgemm::float_sums_to_i32(ys, &mut y[rows]),
                DataMut::U8(y) => requantize_float_rows(ys, p, p0..p1, c, bias, scales, zy, &mut y[rows]),
                DataMut::I8(y) => requantize_float_rows(ys, p, p0..p1, c, bias, scales, zy, &mut y[rows]),
                _ => return Err("the output element type differs from the plan's".into()),
            }
            p0 = p1;
        }
        Ok(())
    }
}

impl Depthwise<'_> {
    /// [`planes`](Self::planes) on the integer kernel.
    fn integer_planes(
        &self,
        qdw: &QDepthwise,
        planes: Range<usize>,
        out: &mut DataMut<'_>,
        s: &mut DepthwiseScratch,
    ) -> Result<(), String> {
        let Depthwise { input, c, plane, p, geo, zx, bias, zy, scales, .. } = *self;
        let n = planes.len();
        let rq = DwRequants { bias, scales, zy };
        let short = || "the output has fewer elements than its shape".to_string();
        let y = match out {
            DataMut::I32(y) if scales.is_empty() => QDwPlanes::I32(y.get_mut(..n * p).ok_or_else(short)?),
            DataMut::U8(y) => QDwPlanes::U8(y.get_mut(..n * p).ok_or_else(short)?, rq),
            DataMut::I8(y) => QDwPlanes::I8(y.get_mut(..n * p).ok_or_else(short)?, rq),
            _ => return Err("the output element type differs from the plan's".into()),
        };
        match sub(input, planes.start * plane, n * plane)? {
            Data::U8(v) => qdw.planes(v, zx, planes, c, geo, y, &mut s.padded),
            Data::I8(v) => qdw.planes(v, zx, planes, c, geo, y, &mut s.padded),
            _ => return Err("the input is not uint8 or int8".into()),
        }
        Ok(())
    }
}

/// A quantized convolution's output, borrowed again (to be split).
fn reborrow<'b>(out: &'b mut DataMut<'_>) -> Result<DataMut<'b>, String> {
    Ok(match out {
        DataMut::I32(y) => DataMut::I32(y),
        DataMut::U8(y) => DataMut::U8(y),
        DataMut::I8(y) => DataMut::I8(y),
        _ => return Err("the output element type differs from the plan's".into()),
    })
}

/// A quantized convolution's output split after its first `at` elements.
fn split_data(out: DataMut<'_>, at: usize) -> Result<(DataMut<'_>, DataMut<'_>), String> {
    Ok(match out {
        DataMut::I32(y) => {
            let (a, b) = y.split_at_mut(at);
            (DataMut::I32(a), DataMut::I32(b))
        }
        DataMut::U8(y) => {
            let (a, b) = y.split_at_mut(at);
            (DataMut::U8(a), DataMut::U8(b))
        }
        DataMut::I8(y) => {
            let (a, b) = y.split_at_mut(at);
            (DataMut::I8(a), DataMut::I8(b))
        }
        _ => return Err("the output element type differs from the plan's".into()),
    })
}

/// Floats of input (or output) planes a depthwise chunk holds.
const CHUNK_FLOATS: usize = 16 << 10;

/// Each plane's row of integer sums (`planes`, of `c` channels an image) plus its
/// channel's bias, requantized with its channel's scale.
#[allow(clippy::too_many_arguments)]
fn requantize_float_rows<T: qgemm::QInt>(
    sums: &[f32],
    p: usize,
    planes: std::ops::Range<usize>,
    c: usize,
    bias: Option<&[i32]>,
    scales: &[f32],
    zy: i32,
    y: &mut [T],
) {
    for (plane, (srow, yrow)) in planes.zip(sums.chunks_exact(p).zip(y.chunks_exact_mut(p))) {
        let ch = plane % c;
        qgemm::requantize_float_sums(srow, bias.map_or(0, |b| b[ch]), scales[ch], zy, yrow);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(auto_pad: AutoPad, strides: Option<Vec<i64>>, pads: Option<Vec<i64>>) -> QConv {
        QConv {
            qlinear: false,
            cl_input: false,
            cl_output: false,
            auto_pad,
            group: 1,
            kernel_shape: None,
            strides,
            dilations: None,
            pads,
        }
    }

    #[test]
    fn output_sizes_follow_pads_strides_and_auto_pad() {
        let (_, s) = op(AutoPad::NotSet, None, Some(vec![1, 1, 1, 1])).geometry(&[1, 2, 5, 5], &[3, 2, 3, 3]).unwrap();
        assert_eq!(s.as_slice(), [1, 3, 5, 5]);
        let (g, s) = op(AutoPad::SameLower, Some(vec![2, 2]), None).geometry(&[1, 2, 6, 6], &[3, 2, 3, 3]).unwrap();
        assert_eq!((s.as_slice(), g.pad_begin), (&[1, 3, 3, 3][..], [0, 1, 1]));
        let (_, s) = op(AutoPad::Valid, None, None).geometry(&[2, 1, 9], &[4, 1, 4]).unwrap();
        assert_eq!(s.as_slice(), [2, 4, 6]);
        assert!(op(AutoPad::NotSet, None, None).geometry(&[1, 3, 5, 5], &[3, 2, 3, 3]).is_err());
        assert!(op(AutoPad::NotSet, None, None).geometry(&[1, 2, 2, 2], &[3, 2, 3, 3]).is_err());
    }
}
