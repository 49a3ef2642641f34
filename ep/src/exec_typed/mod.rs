//! The typed path: steps over other element types than float32 (casts, integer and f64
//! arithmetic, comparisons, masks, indices, and data movement of any type). Serial,
//! strided loops: these are the index and mask parts of a graph, not its heavy math.

use rivet_kernels::nn;
use rivet_kernels::typed::{self, arg_reduce, bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, map2, Number};
use smallvec::SmallVec;

use crate::data::{by_number, by_storage};
use crate::data::{number_at, Data, DataMut, Storage};
use crate::error::{Error, Result};
use crate::graph::Shape;
use crate::plan::{NodeLabel, Step};
use crate::registry::{AttentionSpec, Kernel, Reduction, ScatterReduction};
use crate::shapes;
use rivet_kernels::attention::{AttnFloat, AttnInputs, AttnParams, AttnScratch};

/// What a typed step needs to know besides its data.
struct Ctx<'a> {
    step: &'a Step,
    shapes: &'a [Shape],
    params: &'a [&'a [i64]],
}

impl Ctx<'_> {
    fn shape(&self, k: usize) -> &[usize] {
        &self.shapes[self.step.inputs[k]]
    }
    fn out_shape(&self) -> &[usize] {
        &self.shapes[self.step.output]
    }
    fn mismatch(&self) -> Error {
        Error::ep(format_args!("{}: element types differ from the plan's", NodeLabel(self.step)))
    }
}

fn input<'d, T: Storage>(cx: &Ctx<'_>, ins: &[Data<'d>], k: usize) -> Result<&'d [T]> {
    T::get(ins[k]).ok_or_else(|| cx.mismatch())
}

/// Runs a typed step into `dst`.
pub(crate) fn apply_typed(
    step: &Step,
    ins: &[Data<'_>],
    shapes: &[Shape],
    params: &[&[i64]],
    dst: &mut DataMut<'_>,
) -> Result<()> {
    let cx = Ctx { step, shapes, params };
    match step.kernel {
        Kernel::Cast { .. } => {
            cast(ins[0], dst);
            Ok(())
        }
        Kernel::Arith(op) => by_number!(ins[0], Err(cx.mismatch()), arith(&cx, op, ins, dst)),
        Kernel::ArgReduce { axis, max, last, .. } => {
            let DataMut::I64(y) = dst else { return Err(cx.mismatch()) };
            by_number!(ins[0], Err(cx.mismatch()), arg(&cx, ins, axis, max, last, y))
        }
        Kernel::Scatter { reduction, .. } if reduction != ScatterReduction::None => {
            by_number!(ins[0], Err(cx.mismatch()), scatter_reduce(&cx, reduction, ins, dst))
        }
        Kernel::OneHot { axis, .. } => by_storage!(dst, one_hot(&cx, ins, axis)),
        Kernel::Pool { window, max: true, .. } => {
            let s = cx.shape(0);
            let (g, _) = shapes::window_3d(&window, shapes::spatial(s), window.kernel).map_err(Error::invalid)?;
            by_int!(dst, max_pool(&cx, ins, &g))
        }
        Kernel::PoolIndices { window, column_major } => {
            let (DataMut::I64(y), Data::F32(x)) = (dst, ins[0]) else { return Err(cx.mismatch()) };
            let s = cx.shape(0);
            let (g, _) = shapes::window_3d(&window, shapes::spatial(s), window.kernel).map_err(Error::invalid)?;
            rivet_kernels::conv::max_pool_indices(x, s[0] * s[1], &g, column_major, y);
            Ok(())
        }
        Kernel::PowTyped => by_number!(ins[0], Err(cx.mismatch()), pow(&cx, ins, dst)),
        Kernel::ClipInputs { .. } => by_number!(ins[0], Err(cx.mismatch()), clip(&cx, ins, dst)),
        Kernel::Softmax { .. }
        | Kernel::Norm { .. }
        | Kernel::MatMul { .. }
        | Kernel::Gemm { .. }
        | Kernel::BatchNorm { .. }
        | Kernel::GroupNorm { .. }
        | Kernel::InstanceNorm { .. }
        | Kernel::Hardmax { .. } => {
            let DataMut::F64(y) = dst else { return Err(cx.mismatch()) };
            float64_nn(&cx, ins, y)
        }
        Kernel::Unary(_) | Kernel::Math(_) | Kernel::CumSum { .. } => match (dst, ins[0]) {
            (DataMut::F64(y), Data::F64(x)) => float64(&cx, x, y),
            (dst, x) => by_number!(x, Err(cx.mismatch()), integers(&cx, ins, dst)),
        },
        Kernel::ShapeOf { start, end } => {
            let DataMut::I64(y) = dst else { return Err(cx.mismatch()) };
            let s = cx.shape(0);
            let (a, b) = shapes::shape_range(s.len(), start, end);
            y.iter_mut().zip(&s[a..b]).for_each(|(o, &d)| *o = d as i64);
            Ok(())
        }
        Kernel::ConstantOfShape { value, .. } => {
            macro_rules! fill {
                ($y:expr, $t:ty) => {{
                    const N: usize = std::mem::size_of::<$t>();
                    let v = <$t>::from_ne_bytes(value[..N].try_into().expect("N bytes"));
                    $y.iter_mut().for_each(|o| *o = v);
                }};
            }
            match dst {
                DataMut::F32(y) => fill!(y, f32),
                DataMut::F64(y) => fill!(y, f64),
                DataMut::I8(y) => fill!(y, i8),
                DataMut::I16(y) => fill!(y, i16),
                DataMut::I32(y) => fill!(y, i32),
                DataMut::I64(y) => fill!(y, i64),
                DataMut::U8(y) | DataMut::Bool(y) => fill!(y, u8),
                DataMut::U16(y) | DataMut::F16(y) | DataMut::BF16(y) => fill!(y, u16),
                DataMut::U32(y) => fill!(y, u32),
                DataMut::U64(y) => fill!(y, u64),
            }
            Ok(())
        }
        Kernel::SizeOf => {
            let DataMut::I64(y) = dst else { return Err(cx.mismatch()) };
            y[0] = cx.shape(0).iter().product::<usize>() as i64;
            Ok(())
        }
        Kernel::Einsum { .. } => by_number!(ins[0], Err(cx.mismatch()), einsum(&cx, ins, dst)),
        Kernel::Range => {
            // Accumulated, as ORT does: value += delta.
            macro_rules! range {
                ($y:expr, $t:ty) => {{
                    let at = |k: usize| input::<$t>(&cx, ins, k).map(|v| v[0]);
                    let (mut v, delta) = (at(0)?, at(2)?);
                    for o in $y.iter_mut() {
                        *o = v;
                        v = Number::add(v, delta); // wrapping for integers
                    }
                }};
            }
            match dst {
                DataMut::F32(y) => range!(y, f32),
                DataMut::F64(y) => range!(y, f64),
                DataMut::I16(y) => range!(y, i16),
                DataMut::I32(y) => range!(y, i32),
                DataMut::I64(y) => range!(y, i64),
                _ => return Err(cx.mismatch()),
            }
            Ok(())
        }
        Kernel::NonZero => {
            let DataMut::I64(y) = dst else { return Err(cx.mismatch()) };
            let s = cx.shape(0);
            let count = y.len() / s.len().max(1);
            let mut strides = [1usize; 8];
            for a in (0..s.len().saturating_sub(1)).rev() {
                strides[a] = strides[a + 1] * s[a + 1];
            }
            let total: usize = s.iter().product();
            let mut found = 0;
            for k in 0..total {
                let nonzero = match ins[0] {
                    Data::F32(v) => v[k] != 0.0,
                    Data::F64(v) => v[k] != 0.0,
                    Data::I8(v) => v[k] != 0,
                    Data::I16(v) => v[k] != 0,
                    Data::I32(v) => v[k] != 0,
                    Data::I64(v) => v[k] != 0,
                    Data::U8(v) | Data::Bool(v) => v[k] != 0,
                    Data::U16(v) => v[k] != 0,
                    Data::U32(v) => v[k] != 0,
                    Data::U64(v) => v[k] != 0,
                    Data::F16(v) | Data::BF16(v) => v[k] & 0x7fff != 0,
                };
                if nonzero {
                    // A scalar reports as one axis of index 0.
                    for a in 0..s.len().max(1) {
                        y[a * count + found] = if s.is_empty() { 0 } else { ((k / strides[a]) % s[a]) as i64 };
                    }
                    found += 1;
                }
            }
            Ok(())
        }
        Kernel::TopK { axis, largest, indices: false, .. } => {
            by_number!(ins[0], Err(cx.mismatch()), top_k(&cx, ins, axis, largest, dst))
        }
        Kernel::TopK { axis, largest, indices: true, .. } => {
            by_number!(ins[0], Err(cx.mismatch()), top_k(&cx, ins, axis, largest, dst))
        }
        Kernel::Rotary { interleaved, positions, .. } => {
            let DataMut::F32(y) = dst else { return Err(cx.mismatch()) };
            let shapes: SmallVec<[&[usize]; 4]> = (0..ins.len()).map(|k| cx.shape(k)).collect();
            let [b, s, h, d, rot] = shapes::rotary_dims(&cx.step.kernel, &shapes).map_err(Error::invalid)?;
            let (x, cos, sin) = (input::<f32>(&cx, ins, 0)?, input::<f32>(&cx, ins, 1)?, input::<f32>(&cx, ins, 2)?);
            let pos = if positions { Some(input::<i64>(&cx, ins, 3)?) } else { None };
            let half = rot / 2;
            let four_d = shapes[0].len() == 4;
            y.copy_from_slice(x);
            for bi in 0..b {
                for si in 0..s {
                    let row = match pos {
                        Some(p) => {
                            let at = p[bi * s + si];
                            let rows = shapes[1][0];
                            if at < 0 || at as usize >= rows {
                                return Err(Error::invalid(format_args!(
                                    "{} input 3: position {at} is outside the {rows}-row cache",
                                    NodeLabel(cx.step)
                                )));
                            }
                            at as usize
                        }
                        None => bi * s + si,
                    };
                    let (c, sn) = (&cos[row * half..][..half], &sin[row * half..][..half]);
                    for hi in 0..h {
                        let at = if four_d { ((bi * h + hi) * s + si) * d } else { ((bi * s + si) * h + hi) * d };
                        let (xs, ys) = (&x[at..at + rot], &mut y[at..at + rot]);
                        for i in 0..half {
                            let (p, q) = if interleaved { (2 * i, 2 * i + 1) } else { (i, i + half) };
                            ys[p] = xs[p] * c[i] - xs[q] * sn[i];
                            ys[q] = xs[q] * c[i] + xs[p] * sn[i];
                        }
                    }
                }
            }
            Ok(())
        }
        Kernel::Attention(a) => match dst {
            DataMut::F32(y) => ATTN.with(|s| attention(&cx, &a, ins, &mut s.borrow_mut(), y)),
            DataMut::F64(y) => ATTN64.with(|s| attention(&cx, &a, ins, &mut s.borrow_mut(), y)),
            _ => Err(cx.mismatch()),
        },
        Kernel::Loss { reduction, ignore_index, softmax } => match dst {
            DataMut::F32(y) => loss::<f32>(&cx, ins, reduction, ignore_index, softmax, y),
            DataMut::F64(y) => loss::<f64>(&cx, ins, reduction, ignore_index, softmax, y),
            _ => Err(cx.mismatch()),
        },
        Kernel::BatchNormTrain { epsilon, momentum, out } => match dst {
            DataMut::F32(y) => batch_norm_train::<f32>(&cx, ins, epsilon, momentum, out, y),
            DataMut::F64(y) => batch_norm_train::<f64>(&cx, ins, epsilon, momentum, out, y),
            _ => Err(cx.mismatch()),
        },
        Kernel::DropoutMask { seed, ratio } => {
            let DataMut::Bool(y) = dst else { return Err(cx.mismatch()) };
            let (r, training) = dropout_params(&cx, ins, ratio.then_some(1))?;
            if !training || r == 0.0 {
                y.fill(1);
            } else {
                let seed = seed.map_or_else(fresh_seed, |s| s as u32);
                let mut draws = rivet_kernels::random::Mt19937::new(seed);
                y.iter_mut().for_each(|o| *o = u8::from(draws.uniform() >= r));
            }
            Ok(())
        }
        Kernel::DropoutApply { ratio } => {
            let (r, training) = dropout_params(&cx, ins, ratio.then_some(2))?;
            let Data::Bool(mask) = ins[1] else { return Err(cx.mismatch()) };
            let scale = if training { 1.0 / (1.0 - r) } else { 1.0 };
            match (dst, ins[0]) {
                (DataMut::F32(y), Data::F32(x)) => {
                    let s = scale as f32;
                    y.iter_mut().zip(x).zip(mask).for_each(|((o, &v), &m)| *o = if m != 0 { v * s } else { 0.0 });
                }
                (DataMut::F64(y), Data::F64(x)) => {
                    y.iter_mut().zip(x).zip(mask).for_each(|((o, &v), &m)| *o = if m != 0 { v * scale } else { 0.0 });
                }
                _ => return Err(cx.mismatch()),
            }
            Ok(())
        }
        Kernel::Ones | Kernel::EyeLike { .. } => {
            let (k, ones) = match cx.step.kernel {
                Kernel::EyeLike { k } => (k, false),
                _ => (0, true),
            };
            let cols = cx.out_shape().last().copied().unwrap_or(1);
            macro_rules! eye {
                ($y:expr, $one:expr) => {{
                    $y.iter_mut().for_each(|v| *v = if ones { $one } else { Default::default() });
                    for (r, row) in $y.chunks_mut(cols.max(1)).enumerate().filter(|_| !ones) {
                        let c = r as i64 + k;
                        if (0..cols as i64).contains(&c) {
                            row[c as usize] = $one;
                        }
                    }
                }};
            }
            match dst {
                DataMut::F32(y) => eye!(y, 1.0),
                DataMut::F64(y) => eye!(y, 1.0),
                DataMut::F16(y) => eye!(y, 0x3c00),
                DataMut::BF16(y) => eye!(y, 0x3f80),
                DataMut::I8(y) => eye!(y, 1),
                DataMut::I16(y) => eye!(y, 1),
                DataMut::I32(y) => eye!(y, 1),
                DataMut::I64(y) => eye!(y, 1),
                DataMut::U8(y) | DataMut::Bool(y) => eye!(y, 1),
                DataMut::U16(y) => eye!(y, 1),
                DataMut::U32(y) => eye!(y, 1),
                DataMut::U64(y) => eye!(y, 1),
            }
            Ok(())
        }
        _ => by_storage!(dst, movement(&cx, ins)),
    }
}

/// Calls `$f::<T>(args.., y)` with the output's integer type.
macro_rules! by_int {
    ($dst:expr, $f:ident($($arg:expr),*)) => {
        match $dst {
            DataMut::I8(y) => $f::<i8>($($arg,)* y),
            DataMut::I16(y) => $f::<i16>($($arg,)* y),
            DataMut::I32(y) => $f::<i32>($($arg,)* y),
            DataMut::I64(y) => $f::<i64>($($arg,)* y),
            DataMut::U8(y) => $f::<u8>($($arg,)* y),
            DataMut::U16(y) => $f::<u16>($($arg,)* y),
            DataMut::U32(y) => $f::<u32>($($arg,)* y),
            DataMut::U64(y) => $f::<u64>($($arg,)* y),
            _ => Err(Error::ep(format_args!("integer step with another output type"))),
        }
    };
}
use by_int;

fn arith<T: Number + Storage>(cx: &Ctx<'_>, op: typed::Arith, ins: &[Data<'_>], dst: &mut DataMut<'_>) -> Result<()> {
    let (a, b) = (input::<T>(cx, ins, 0)?, input::<T>(cx, ins, 1)?);
    let y = T::get_mut(dst).ok_or_else(|| cx.mismatch())?;
    let mut by_zero = false;
    map2(a, cx.shape(0), b, cx.shape(1), cx.out_shape(), y, |a, b| {
        op.apply(a, b).unwrap_or_else(|| {
            by_zero = true;
            T::default()
        })
    });
    if by_zero {
        return Err(Error::invalid(format_args!("{}: integer division by zero", NodeLabel(cx.step))));
    }
    Ok(())
}

fn arg<T: Storage + PartialOrd>(
    cx: &Ctx<'_>,
    ins: &[Data<'_>],
    axis: i64,
    max: bool,
    last: bool,
    y: &mut [i64],
) -> Result<()> {
    let s = cx.shape(0);
    let a = shapes::normalize_axis(axis, s.len(), false).unwrap_or(0);
    let (outer, inner) = (s[..a].iter().product(), s[a + 1..].iter().product());
    arg_reduce(input::<T>(cx, ins, 0)?, outer, s[a], inner, max, last, y);
    Ok(())
}

/// A source element on its way to another type: integers exactly, floats as f64.
#[derive(Clone, Copy)]
enum Num {
    I(i128),
    F(f64),
}

macro_rules! to_int {
    ($n:expr, $t:ty) => {
        match $n {
            Num::I(i) => i as $t, // two's complement truncation, as C++'s static_cast
            Num::F(f) => f as $t, // toward zero, saturating; NaN gives 0
        }
    };
}

fn cast_from<S: Copy>(src: &[S], read: impl Fn(S) -> Num, dst: &mut DataMut<'_>) {
    let f32_of = |n: Num| match n {
        Num::I(i) => i as f32,
        Num::F(f) => f as f32,
    };
    macro_rules! fill {
        ($y:expr, |$n:ident| $e:expr) => {
            $y.iter_mut().zip(src).for_each(|(o, &v)| {
                let $n = read(v);
                *o = $e;
            })
        };
    }
    match dst {
        DataMut::F32(y) => fill!(y, |n| f32_of(n)),
        DataMut::F64(y) => fill!(y, |n| match n {
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }),
        DataMut::F16(y) => fill!(y, |n| f32_to_f16(f32_of(n))),
        DataMut::BF16(y) => fill!(y, |n| f32_to_bf16(f32_of(n))),
        DataMut::Bool(y) => fill!(y, |n| match n {
            Num::I(i) => (i != 0) as u8,
            Num::F(f) => (f != 0.0) as u8,
        }),
        DataMut::I8(y) => fill!(y, |n| to_int!(n, i8)),
        DataMut::I16(y) => fill!(y, |n| to_int!(n, i16)),
        DataMut::I32(y) => fill!(y, |n| to_int!(n, i32)),
        DataMut::I64(y) => fill!(y, |n| to_int!(n, i64)),
        DataMut::U8(y) => fill!(y, |n| to_int!(n, u8)),
        DataMut::U16(y) => fill!(y, |n| to_int!(n, u16)),
        DataMut::U32(y) => fill!(y, |n| to_int!(n, u32)),
        DataMut::U64(y) => fill!(y, |n| to_int!(n, u64)),
    }
}

/// Cast between any two element types Rivet holds; half floats go through f32.
fn cast(x: Data<'_>, dst: &mut DataMut<'_>) {
    match x {
        Data::F32(s) => cast_from(s, |v| Num::F(v as f64), dst),
        Data::F64(s) => cast_from(s, Num::F, dst),
        Data::F16(s) => cast_from(s, |v| Num::F(f16_to_f32(v) as f64), dst),
        Data::BF16(s) => cast_from(s, |v| Num::F(bf16_to_f32(v) as f64), dst),
        Data::Bool(s) => cast_from(s, |v| Num::I((v != 0) as i128), dst),
        Data::I8(s) => cast_from(s, |v| Num::I(v as i128), dst),
        Data::I16(s) => cast_from(s, |v| Num::I(v as i128), dst),
        Data::I32(s) => cast_from(s, |v| Num::I(v as i128), dst),
        Data::I64(s) => cast_from(s, |v| Num::I(v as i128), dst),
        Data::U8(s) => cast_from(s, |v| Num::I(v as i128), dst),
        Data::U16(s) => cast_from(s, |v| Num::I(v as i128), dst),
        Data::U32(s) => cast_from(s, |v| Num::I(v as i128), dst),
        Data::U64(s) => cast_from(s, |v| Num::I(v as i128), dst),
    }
}

thread_local! {
    /// Attention's packed heads and scores, per thread; they grow to the largest, then no
    /// Run allocates.
    static ATTN: std::cell::RefCell<AttnScratch<f32>> = std::cell::RefCell::new(AttnScratch::default());
    static ATTN64: std::cell::RefCell<AttnScratch<f64>> = std::cell::RefCell::new(AttnScratch::default());
}

thread_local! {
    /// TopK's order of one column, per thread.
    static ORDER: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn einsum<T: Storage + Number>(cx: &Ctx<'_>, ins: &[Data<'_>], dst: &mut DataMut<'_>) -> Result<()> {
    let shapes: SmallVec<[&[usize]; 4]> = (0..ins.len()).map(|k| cx.shape(k)).collect();
    let ranks: SmallVec<[usize; 4]> = shapes.iter().map(|s| s.len()).collect();
    let eq = rivet_kernels::einsum::parse(cx.step.kernel.einsum_equation(), &ranks).map_err(Error::invalid)?;
    let mut xs: SmallVec<[&[T]; 4]> = SmallVec::new();
    for k in 0..ins.len() {
        xs.push(input::<T>(cx, ins, k)?);
    }
    let y = T::get_mut(dst).ok_or_else(|| cx.mismatch())?;
    rivet_kernels::einsum::einsum(&eq, &xs, &shapes, y, T::default(), |a, b| a.add(b), |a, b| a.mul(b))
        .map_err(Error::invalid)
}

/// Clip with bounds read at Run in the element type (NaN passes through for floats).
fn clip<T: Storage + Number>(cx: &Ctx<'_>, ins: &[Data<'_>], dst: &mut DataMut<'_>) -> Result<()> {
    let Kernel::ClipInputs { min, max } = cx.step.kernel else { return Err(cx.mismatch()) };
    let x = input::<T>(cx, ins, 0)?;
    let bound = |k: usize| input::<T>(cx, ins, k).map(|v| v.first().copied());
    let lo = if min { bound(1)? } else { None };
    let hi = if max { bound(if min { 2 } else { 1 })? } else { None };
    let y = T::get_mut(dst).ok_or_else(|| cx.mismatch())?;
    for (o, &v) in y.iter_mut().zip(x) {
        let v = match lo {
            Some(l) if v < l => l,
            _ => v,
        };
        *o = match hi {
            Some(h) if v > h => h,
            _ => v,
        };
    }
    Ok(())
}

fn max_pool<T: Storage + PartialOrd>(
    cx: &Ctx<'_>,
    ins: &[Data<'_>],
    g: &rivet_kernels::conv::Window3d,
    y: &mut [T],
) -> Result<()> {
    let s = cx.shape(0);
    rivet_kernels::conv::max_pool(input::<T>(cx, ins, 0)?, s[0] * s[1], g, y);
    Ok(())
}

/// Pow with a base of type T and an exponent of any numeric type, in f64.
fn pow<T: Storage + Number>(cx: &Ctx<'_>, ins: &[Data<'_>], dst: &mut DataMut<'_>) -> Result<()> {
    let a = input::<T>(cx, ins, 0)?;
    let y = T::get_mut(dst).ok_or_else(|| cx.mismatch())?;
    typed::broadcast2(cx.shape(0), cx.shape(1), cx.out_shape(), |k, i, j| {
        y[k] = T::from_f64(a[i].to_f64().powf(number_at(ins[1], j)));
    });
    Ok(())
}

mod float64;
mod index;
mod integers;
mod movement;
mod training;
use float64::*;
use index::*;
use integers::*;
use movement::*;
use training::*;
