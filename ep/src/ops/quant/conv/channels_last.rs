//! QLinearConv on the channels-last product (`qgemm::nhwc`): when a convolution takes
//! it (`channels_last_native`, `channels_last_wins`), its input and output as the plan
//! stores them (`passes::channels_last_int8`) or transposed around it, and the relaid run
//! of a marked convolution whose kernel does not take that layout.

use std::ops::Range;
use std::sync::Mutex;

use rivet_kernels::conv::Window3d;
use rivet_kernels::qgemm::{self, ConvTaps, QOut, Requant};

use super::super::super::RunIn;
use super::super::Packs;
use super::{QConv, MAX_CONV_TASKS, TASK_MIN_MACS};
use crate::data::{Data, DataMut};
use crate::parallel::lock;

/// Whether a QLinearConv of `c` to `m` channels on `geo` (one group, 2-D), its input and
/// output stored channels first, runs faster on the channels-last product with both
/// transposed around it (0.09 ns a byte each way) than on the phase planes: where the
/// product is native there (`channels_last_native`) and its window wider than 1x1 (a 1x1
/// product is too shallow for its transposes). Kernel only, one thread, AMD Zen 4
/// (`--example qconv_bench`), us, phase planes with their pack / channels last with its
/// transposes: 64 -> 64 3x3 on 56x56 648 / 584, 128 -> 128 on 28x28 624 / 557, 256 ->
/// 256 on 14x14 609 / 517, 512 -> 512 on 7x7 680 / 540, 32 -> 64 on 112x112 1371 / 1305;
/// 1x1: 256 -> 64 on 56x56 339 / 381.
pub(super) fn channels_last_wins(geo: &Window3d, c: usize, m: usize) -> bool {
    let taps: usize = geo.kernel.iter().product();
    taps > 1 && channels_last_native(geo, c, m)
}

/// Whether a QLinearConv of one group, `c` to `m` channels on the 2-D window `geo`, runs
/// faster on the channels-last product than on the phase planes when its input and output
/// are already stored channels last (no transposes): the product has 64 output channels
/// or more (fewer leave most of each tile's 32 columns empty), 16 input channels or more
/// and a depth (channels × taps) of 128 or more (a shallower one spends its time in the
/// stores). Kernel only, one thread, AMD Zen 4, us, phase planes with their pack /
/// channels last: 64 -> 64 3x3 on 56x56 648 / 548, 128 -> 128 on 28x28 624 / 521, 256 ->
/// 256 on 14x14 609 / 507, 512 -> 512 on 7x7 680 / 532, 64 -> 128 stride 2 on 56x56 345
/// / 274, 1x1: 1024 -> 256 on 14x14 285 / 235, 256 -> 64 on 56x56 339 / 273; left on the
/// planes: 64 -> 256 1x1 on 56x56 408 / 416, 16 -> 96 1x1 on 112x112 357 / 385. A strided
/// 1x1 convolution takes it at any depth: the planes gather its inputs into a pack first
/// (ResNet's downsampling 64 -> 128 at stride 2 on 56x56: pack 17 + product 52 us, the
/// taps 52); then the additions around it keep their inputs' layout and relay nothing.
pub(super) fn channels_last_native(geo: &Window3d, c: usize, m: usize) -> bool {
    let taps: usize = geo.kernel.iter().product();
    let strided_pointwise = taps == 1 && geo.stride.iter().any(|&s| s > 1);
    geo.kernel[0] == 1
        && m >= 64
        && c >= 16
        && (c * taps >= 128 || strided_pointwise)
        && rivet_kernels::qgemm::vnni_supported()
}

impl QConv {
    /// A run marked channels last whose convolution does not take that layout (not one
    /// the plan marks; kept for any that would be): the input made channels first, the
    /// convolution as unmarked, its output made channels last.
    /// (The unmarked run is `run_as` with both layouts channels first: a copy of the op
    /// would clone its attributes on every Run, found by review.)
    pub(super) fn run_relaid(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let [ix, ..] = self.slots();
        let xs = x.shapes[ix];
        let (batch, c, plane) = (xs[0], xs[1], xs[2..].iter().product::<usize>());
        let (m, p) = (x.out_shape[1], x.out_shape[2..].iter().product::<usize>());
        let packs = x.scratch.state::<Packs>();
        let (mut xin, mut yout) = (std::mem::take(&mut packs.relaid_x), std::mem::take(&mut packs.relaid_y));
        let mut ins = [Data::U8(&[]); 9];
        ins[..x.ins.len()].copy_from_slice(x.ins);
        let each = |f: &mut dyn FnMut(Range<usize>, Range<usize>)| {
            for n in 0..batch {
                f(n * c * plane..(n + 1) * c * plane, n * m * p..(n + 1) * m * p);
            }
        };
        if self.cl_input {
            ins[ix] = match x.ins[ix] {
                Data::U8(v) => {
                    let t = xin.u8(v.len());
                    each(&mut |i, _| qgemm::from_channels_last(&v[i.clone()], c, plane, &mut t[i]));
                    Data::U8(t)
                }
                Data::I8(v) => {
                    let t = xin.i8(v.len());
                    each(&mut |i, _| qgemm::from_channels_last(&v[i.clone()], c, plane, &mut t[i]));
                    Data::I8(t)
                }
                _ => return Err("the input is not uint8 or int8".into()),
            };
        }
        let inner = RunIn {
            ins: &ins[..x.ins.len()],
            shapes: x.shapes,
            out_shape: x.out_shape,
            constant: x.constant,
            par: x.par,
            scratch: &mut *x.scratch,
        };
        let result = if self.cl_output {
            let mut y = match out {
                DataMut::U8(y) => DataMut::U8(yout.u8(y.len())),
                DataMut::I8(y) => DataMut::I8(yout.i8(y.len())),
                _ => return Err("the output is not uint8 or int8".into()),
            };
            let result = self.run_as(inner, &mut y, (false, false));
            match (&y, out) {
                (DataMut::U8(t), DataMut::U8(y)) => {
                    each(&mut |_, o| qgemm::to_channels_last(&t[o.clone()], m, p, &mut y[o]))
                }
                (DataMut::I8(t), DataMut::I8(y)) => {
                    each(&mut |_, o| qgemm::to_channels_last(&t[o.clone()], m, p, &mut y[o]))
                }
                _ => {}
            }
            result
        } else {
            self.run_as(inner, out, (false, false))
        };
        let packs = x.scratch.state::<Packs>();
        (packs.relaid_x, packs.relaid_y) = (xin, yout);
        result
    }
}

/// Output planes up to this many positions take the channels-last product on an im2col
/// (its blocks reused by every panel of many output channels: 512 -> 512 3x3 on 7x7 530
/// us, through the taps 576); larger ones read through their taps where they can.
const IM2COL_MAX_POSITIONS: usize = 64;

/// An 8-bit image made channels last, or a channels-last output, as its element type.
#[derive(Debug, Default)]
pub(in crate::ops::quant) enum Bytes {
    #[default]
    None,
    U8(Vec<u8>),
    I8(Vec<i8>),
}

impl Bytes {
    fn u8(&mut self, len: usize) -> &mut [u8] {
        if !matches!(self, Bytes::U8(_)) {
            *self = Bytes::U8(Vec::new());
        }
        let Bytes::U8(v) = self else { unreachable!("made above") };
        v.resize(len, 0);
        v
    }

    fn i8(&mut self, len: usize) -> &mut [i8] {
        if !matches!(self, Bytes::I8(_)) {
            *self = Bytes::I8(Vec::new());
        }
        let Bytes::I8(v) = self else { unreachable!("made above") };
        v.resize(len, 0);
        v
    }
}

/// A QLinearConv of one group on the channels-last product: each image's input made
/// channels last, the product's positions split over the pool by whole strips (each task
/// with its own im2col), and the output made channels first again.
#[allow(clippy::too_many_arguments)]
pub(super) fn channels_last(
    packs: &mut Packs,
    input: Data<'_>,
    (batch, c, plane, p): (usize, usize, usize, usize),
    geo: &Window3d,
    zx: i32,
    (bias, zy): (Option<&[i32]>, i32),
    out: &mut DataMut<'_>,
    par: &dyn crate::parallel::Parallel,
    (cl_in, cl_out): (bool, bool),
) -> Result<(), String> {
    let Packs { nhwc, xt, yt, nhwc_tasks, scales, taps, .. } = packs;
    let through_taps =
        p > IM2COL_MAX_POSITIONS && matches!(input, Data::U8(_)) && ConvTaps::fits(geo, c) && nhwc.zero_points_zero();
    if through_taps {
        taps.prepare(geo, c);
    }
    let taps = &*taps;
    let m = nhwc.cols();
    let strips = p.div_ceil(qgemm::MR);
    let k = nhwc.k_depth();
    let tasks = crate::parallel::cores().min(m * p * k / TASK_MIN_MACS).min(strips).clamp(1, MAX_CONV_TASKS);
    if nhwc_tasks.len() < tasks {
        nhwc_tasks.resize_with(tasks, Default::default);
    }
    let per = strips.div_ceil(tasks) * qgemm::MR;
    let rq = Requant { scale: scales, per_row: false, bias, zy };
    for n in 0..batch {
        macro_rules! image {
            ($x:expr, $xt:expr, $y:expr, $yt:expr, $kind:ident, $bytes:expr) => {{
                let x = &$x[n * c * plane..(n + 1) * c * plane];
                let xt = if cl_in {
                    x
                } else {
                    let t = $xt;
                    rivet_kernels::qgemm::to_channels_last(x, c, plane, t);
                    &*t
                };
                let y = &mut $y[n * m * p..(n + 1) * m * p];
                // The product into the channels-last output: `y` itself, or the scratch
                // then made channels first into `y`.
                let (target, back) = if cl_out { (y, None) } else { ($yt, Some(y)) };
                let parts: [Mutex<Option<(Range<usize>, QOut<'_>)>>; MAX_CONV_TASKS] =
                    std::array::from_fn(|_| Mutex::new(None));
                let (mut rest, mut r0, mut count) = (&mut target[..], 0, 0);
                while r0 < p {
                    let r1 = (r0 + per).min(p);
                    let (part, tail) = std::mem::take(&mut rest).split_at_mut((r1 - r0) * m);
                    *lock(&parts[count]) = Some((r0..r1, QOut::$kind(part, rq)));
                    (rest, r0, count) = (tail, r1, count + 1);
                }
                let scratch = &nhwc_tasks[..];
                let run = |i: usize| {
                    if let Some((rows, part)) = lock(&parts[i]).take() {
                        let scratch = &mut lock(&scratch[i]);
                        match $bytes(xt) {
                            Some(x) if through_taps => qgemm::conv_taps(x, zx, taps, nhwc, rows, part, scratch),
                            _ => qgemm::conv_nhwc(xt, c, geo, zx, nhwc, rows, part, scratch),
                        }
                    }
                };
                if count < 2 {
                    run(0);
                } else {
                    par.for_each_index(count, &|i, _| run(i));
                }
                if let Some(y) = back {
                    rivet_kernels::qgemm::from_channels_last(&*target, m, p, y);
                }
            }};
        }
        match (input, &mut *out) {
            (Data::U8(x), DataMut::U8(y)) => image!(x, xt.u8(c * plane), y, yt.u8(m * p), U8, Some),
            (Data::U8(x), DataMut::I8(y)) => image!(x, xt.u8(c * plane), y, yt.i8(m * p), I8, Some),
            (Data::I8(x), DataMut::U8(y)) => image!(x, xt.i8(c * plane), y, yt.u8(m * p), U8, no_bytes),
            (Data::I8(x), DataMut::I8(y)) => image!(x, xt.i8(c * plane), y, yt.i8(m * p), I8, no_bytes),
            _ => return Err("the input or output is not uint8 or int8".into()),
        }
    }
    Ok(())
}

/// No uint8 view of an int8 image (it runs on the im2col).
fn no_bytes(_: &[i8]) -> Option<&[u8]> {
    None
}
