//! The typed path: steps over other element types than float32 (casts, integer and f64
//! arithmetic, comparisons, masks, indices, and data movement of any type). Serial,
//! strided loops: these are the index and mask parts of a graph, not its heavy math.

use rivet_kernels::float8::{e2m1, e8m0, F8};
use rivet_kernels::nibbles;
use rivet_kernels::nn;
use rivet_kernels::typed::{self, bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, map2, Number};
use smallvec::SmallVec;

use crate::data::{by_number, by_storage, with_one};
use crate::data::{number_at, Data, DataMut, Storage};
use crate::error::{Error, Result};
use crate::graph::Shape;
use crate::plan::{NodeLabel, Step};
use crate::registry::Kernel;
use crate::shapes;

/// What a typed step needs to know besides its data.
struct Ctx<'a> {
    step: &'a Step,
    shapes: &'a [Shape],
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
pub(crate) fn apply_typed(step: &Step, ins: &[Data<'_>], shapes: &[Shape], dst: &mut DataMut<'_>) -> Result<()> {
    let cx = Ctx { step, shapes };
    match step.kernel {
        Kernel::Cast { saturate, round, .. } => {
            cast(ins[0], dst, saturate, round);
            Ok(())
        }
        Kernel::Arith(op) => by_number!(ins[0], Err(cx.mismatch()), arith(&cx, op, ins, dst)),
        Kernel::PowTyped => by_number!(ins[0], Err(cx.mismatch()), pow(&cx, ins, dst)),
        Kernel::ClipInputs { .. } => by_number!(ins[0], Err(cx.mismatch()), clip(&cx, ins, dst)),
        Kernel::MatMul { .. } | Kernel::Gemm { .. } => {
            let DataMut::F64(y) = dst else { return Err(cx.mismatch()) };
            float64_nn(&cx, ins, y)
        }
        Kernel::Unary(_) | Kernel::Math(_) => match (dst, ins[0]) {
            (DataMut::F64(y), Data::F64(x)) => float64(&cx, x, y),
            (dst, x) => by_number!(x, Err(cx.mismatch()), integers(&cx, ins, dst)),
        },
        Kernel::DropoutMask { seed, ratio } => {
            let DataMut::Bool(y) = dst else { return Err(cx.mismatch()) };
            let (r, training) = dropout_params(&cx, ins, ratio.then_some(1))?;
            if !training || r == 0.0 {
                y.fill(1);
            } else {
                let seed = seed.map_or_else(rivet_kernels::random::fresh_seed, |s| s as u32);
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
        Kernel::Ones => {
            macro_rules! ones {
                ($y:expr, $one:expr) => {{
                    $y.iter_mut().for_each(|v| *v = $one);
                }};
            }
            with_one!(dst, ones);
            Ok(())
        }
        _ => by_storage!(dst, movement(&cx, ins)),
    }
}

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

/// A source element as an integer to wrap into 4 or 2 bits: integers as they are, floats
/// truncated toward zero through int32 (NaN, the infinities and values outside int32's
/// range give 0), as ONNX's reference (ml_dtypes) and ORT cast to int4 and uint4.
fn to_i64_wrapping(n: Num) -> i64 {
    match n {
        Num::I(i) => i as i64,
        Num::F(f) if f > -2_147_483_649.0 && f <= 2_147_483_647.0 => f as i64,
        Num::F(_) => 0,
    }
}

fn cast_from<S: Copy>(src: &[S], read: impl Fn(S) -> Num, dst: &mut DataMut<'_>, saturate: bool, round: e8m0::Round) {
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
        DataMut::F8E4M3FN(y) => fill!(y, |n| F8::E4M3FN.from_f32(f32_of(n), saturate)),
        DataMut::F8E4M3FNUZ(y) => fill!(y, |n| F8::E4M3FNUZ.from_f32(f32_of(n), saturate)),
        DataMut::F8E5M2(y) => fill!(y, |n| F8::E5M2.from_f32(f32_of(n), saturate)),
        DataMut::F8E5M2FNUZ(y) => fill!(y, |n| F8::E5M2FNUZ.from_f32(f32_of(n), saturate)),
        DataMut::U4(y) => fill!(y, |n| nibbles::wrap_unsigned(to_i64_wrapping(n), 4)),
        DataMut::I4(y) => fill!(y, |n| nibbles::wrap_signed(to_i64_wrapping(n), 4)),
        DataMut::F4E2M1(y) => fill!(y, |n| e2m1::from_f32(f32_of(n))),
        DataMut::U2(y) => fill!(y, |n| nibbles::wrap_unsigned(to_i64_wrapping(n), 2)),
        DataMut::I2(y) => fill!(y, |n| nibbles::wrap_signed(to_i64_wrapping(n), 2)),
        DataMut::E8M0(y) => fill!(y, |n| e8m0::from_f32(f32_of(n), saturate, round)),
    }
}

/// Cast between any two element types Rivet holds; half floats and 8-bit floats go
/// through f32 (`saturate`: for a cast to an 8-bit float).
fn cast(x: Data<'_>, dst: &mut DataMut<'_>, saturate: bool, round: e8m0::Round) {
    let f8 = |f: F8| move |v: u8| Num::F(f.to_f32(v) as f64);
    // An 8-bit float to its own format without saturation keeps its bits (E5M2's NaN
    // payloads included), as ONNX's reference (a plain astype) does; with it, it is
    // re-encoded (E5M2's infinities become ±57344 and its NaNs 0x7e / 0xfe, the reference
    // clipping first).
    let same = match (x, &mut *dst) {
        (Data::F8E4M3FN(s), DataMut::F8E4M3FN(y))
        | (Data::F8E4M3FNUZ(s), DataMut::F8E4M3FNUZ(y))
        | (Data::F8E5M2(s), DataMut::F8E5M2(y))
        | (Data::F8E5M2FNUZ(s), DataMut::F8E5M2FNUZ(y)) => Some((s, y)),
        _ => None,
    };
    if let (Some((s, y)), false) = (same, saturate) {
        y.copy_from_slice(s);
        return;
    }
    match x {
        Data::F32(s) => cast_from(s, |v| Num::F(v as f64), dst, saturate, round),
        Data::F64(s) => cast_from(s, Num::F, dst, saturate, round),
        Data::F16(s) => cast_from(s, |v| Num::F(f16_to_f32(v) as f64), dst, saturate, round),
        Data::BF16(s) => cast_from(s, |v| Num::F(bf16_to_f32(v) as f64), dst, saturate, round),
        Data::F8E4M3FN(s) => cast_from(s, f8(F8::E4M3FN), dst, saturate, round),
        Data::F8E4M3FNUZ(s) => cast_from(s, f8(F8::E4M3FNUZ), dst, saturate, round),
        Data::F8E5M2(s) => cast_from(s, f8(F8::E5M2), dst, saturate, round),
        Data::F8E5M2FNUZ(s) => cast_from(s, f8(F8::E5M2FNUZ), dst, saturate, round),
        Data::F4E2M1(s) => cast_from(s, |v| Num::F(e2m1::to_f32(v) as f64), dst, saturate, round),
        Data::E8M0(s) => cast_from(s, |v| Num::F(e8m0::to_f32(v) as f64), dst, saturate, round),
        Data::Bool(s) => cast_from(s, |v| Num::I((v != 0) as i128), dst, saturate, round),
        Data::I8(s) | Data::I4(s) | Data::I2(s) => cast_from(s, |v| Num::I(v as i128), dst, saturate, round),
        Data::I16(s) => cast_from(s, |v| Num::I(v as i128), dst, saturate, round),
        Data::I32(s) => cast_from(s, |v| Num::I(v as i128), dst, saturate, round),
        Data::I64(s) => cast_from(s, |v| Num::I(v as i128), dst, saturate, round),
        Data::U8(s) | Data::U4(s) | Data::U2(s) => cast_from(s, |v| Num::I(v as i128), dst, saturate, round),
        Data::U16(s) => cast_from(s, |v| Num::I(v as i128), dst, saturate, round),
        Data::U32(s) => cast_from(s, |v| Num::I(v as i128), dst, saturate, round),
        Data::U64(s) => cast_from(s, |v| Num::I(v as i128), dst, saturate, round),
    }
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
mod integers;
mod movement;
mod training;
use float64::*;
use integers::*;
use movement::*;
use training::*;
