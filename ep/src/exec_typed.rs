//! The typed path: steps over other element types than float32 (casts, integer and f64
//! arithmetic, comparisons, masks, indices, and data movement of any type). Serial,
//! strided loops: these are the index and mask parts of a graph, not its heavy math.

use rivet_kernels::nn;
use rivet_kernels::typed::{
    self, arg_reduce, bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16, map2, map3, BitOp, Bits, Number,
};
use smallvec::SmallVec;

use crate::data::{Data, DataMut};
use crate::error::{Error, Result};
use crate::graph::Shape;
use crate::plan::{NodeLabel, Step};
use crate::registry::{AttentionSpec, Kernel, Reduction, ScatterReduction};
use crate::shapes;
use rivet_kernels::attention::{AttnFloat, AttnInputs, AttnParams, AttnScratch};

/// Element storage: a typed slice out of a [`Data`]. bool shares `u8` and the half floats
/// share `u16`, which is all data movement needs.
trait Storage: Copy + Default + 'static {
    fn get(d: Data<'_>) -> Option<&[Self]>;
    fn get_mut<'a>(d: &'a mut DataMut<'_>) -> Option<&'a mut [Self]>;
}

macro_rules! storage {
    ($t:ty: $($v:ident),+) => {
        impl Storage for $t {
            fn get(d: Data<'_>) -> Option<&[$t]> {
                match d {
                    $(Data::$v(x) => Some(x),)+
                    _ => None,
                }
            }
            fn get_mut<'a>(d: &'a mut DataMut<'_>) -> Option<&'a mut [$t]> {
                match d {
                    $(DataMut::$v(x) => Some(x),)+
                    _ => None,
                }
            }
        }
    };
}
storage!(f32: F32);
storage!(f64: F64);
storage!(i8: I8);
storage!(i16: I16);
storage!(i32: I32);
storage!(i64: I64);
storage!(u8: U8, Bool);
storage!(u16: U16, F16, BF16);
storage!(u32: U32);
storage!(u64: U64);

/// Calls `$f::<T>(args.., y)` with the output's storage type.
macro_rules! by_storage {
    ($dst:expr, $f:ident($($arg:expr),*)) => {
        match $dst {
            DataMut::F32(y) => $f::<f32>($($arg,)* y),
            DataMut::F64(y) => $f::<f64>($($arg,)* y),
            DataMut::I8(y) => $f::<i8>($($arg,)* y),
            DataMut::I16(y) => $f::<i16>($($arg,)* y),
            DataMut::I32(y) => $f::<i32>($($arg,)* y),
            DataMut::I64(y) => $f::<i64>($($arg,)* y),
            DataMut::U8(y) | DataMut::Bool(y) => $f::<u8>($($arg,)* y),
            DataMut::U16(y) | DataMut::F16(y) | DataMut::BF16(y) => $f::<u16>($($arg,)* y),
            DataMut::U32(y) => $f::<u32>($($arg,)* y),
            DataMut::U64(y) => $f::<u64>($($arg,)* y),
        }
    };
}

/// Calls `$f::<T>(args..)` with the numeric type of `$data` (`$other` for other types).
macro_rules! by_number {
    ($data:expr, $other:expr, $f:ident($($arg:expr),*)) => {
        match $data {
            Data::F32(_) => $f::<f32>($($arg),*),
            Data::F64(_) => $f::<f64>($($arg),*),
            Data::I8(_) => $f::<i8>($($arg),*),
            Data::I16(_) => $f::<i16>($($arg),*),
            Data::I32(_) => $f::<i32>($($arg),*),
            Data::I64(_) => $f::<i64>($($arg),*),
            Data::U8(_) => $f::<u8>($($arg),*),
            Data::U16(_) => $f::<u16>($($arg),*),
            Data::U32(_) => $f::<u32>($($arg),*),
            Data::U64(_) => $f::<u64>($($arg),*),
            Data::Bool(_) | Data::F16(_) | Data::BF16(_) => $other,
        }
    };
}

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
        Kernel::Compare(op) => {
            let DataMut::Bool(y) = dst else { return Err(cx.mismatch()) };
            by_number!(ins[0], compare::<u8>(&cx, op, ins, y), compare(&cx, op, ins, y))
        }
        Kernel::Logic(op) => {
            let (DataMut::Bool(y), Data::Bool(a), Data::Bool(b)) = (dst, ins[0], ins[1]) else {
                return Err(cx.mismatch());
            };
            map2(a, cx.shape(0), b, cx.shape(1), cx.out_shape(), y, |a, b| op.apply(a, b));
            Ok(())
        }
        Kernel::Not => {
            let (DataMut::Bool(y), Data::Bool(a)) = (dst, ins[0]) else { return Err(cx.mismatch()) };
            y.iter_mut().zip(a).for_each(|(o, &v)| *o = (v == 0) as u8);
            Ok(())
        }
        Kernel::ArgReduce { axis, max, last, .. } => {
            let DataMut::I64(y) = dst else { return Err(cx.mismatch()) };
            by_number!(ins[0], Err(cx.mismatch()), arg(&cx, ins, axis, max, last, y))
        }
        Kernel::IsNaN | Kernel::IsInf { .. } => {
            let DataMut::Bool(y) = dst else { return Err(cx.mismatch()) };
            let test = |v: f64| match cx.step.kernel {
                Kernel::IsInf { negative, positive } => {
                    (v == f64::INFINITY && positive) || (v == f64::NEG_INFINITY && negative)
                }
                _ => v.is_nan(),
            };
            match ins[0] {
                Data::F32(x) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = test(v as f64) as u8),
                Data::F64(x) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = test(v) as u8),
                Data::F16(x) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = test(f16_to_f32(v) as f64) as u8),
                Data::BF16(x) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = test(bf16_to_f32(v) as f64) as u8),
                _ => return Err(cx.mismatch()),
            }
            Ok(())
        }
        Kernel::Bits(op) => by_int!(dst, bits(&cx, op, ins)),
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
        | Kernel::MatMul
        | Kernel::Gemm { .. }
        | Kernel::BatchNorm { .. }
        | Kernel::GroupNorm { .. }
        | Kernel::InstanceNorm { .. }
        | Kernel::Hardmax { .. } => {
            let DataMut::F64(y) = dst else { return Err(cx.mismatch()) };
            float64_nn(&cx, ins, y)
        }
        Kernel::Unary(_) | Kernel::Math(_) | Kernel::CumSum { .. } | Kernel::Reduce { .. } => match (dst, ins[0]) {
            (DataMut::F64(y), Data::F64(x)) => float64(&cx, x, y),
            (DataMut::Bool(y), Data::Bool(x)) => reduce_ints::<u8>(&cx, x, y, true),
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
        Kernel::BitNot => by_int!(dst, bit_not(&cx, ins)),
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

fn bits<T: Storage + Bits>(cx: &Ctx<'_>, op: BitOp, ins: &[Data<'_>], y: &mut [T]) -> Result<()> {
    let (a, b) = (input::<T>(cx, ins, 0)?, input::<T>(cx, ins, 1)?);
    map2(a, cx.shape(0), b, cx.shape(1), cx.out_shape(), y, |a, b| a.bit(op, b));
    Ok(())
}

fn bit_not<T: Storage + Bits>(cx: &Ctx<'_>, ins: &[Data<'_>], y: &mut [T]) -> Result<()> {
    y.iter_mut().zip(input::<T>(cx, ins, 0)?).for_each(|(o, &v)| *o = v.not());
    Ok(())
}

/// Same-type kernels: Where, Gather and the data-movement ops.
fn movement<T: Storage>(cx: &Ctx<'_>, ins: &[Data<'_>], y: &mut [T]) -> Result<()> {
    let x = || input::<T>(cx, ins, 0);
    match cx.step.kernel {
        Kernel::Identity | Kernel::Reshape(_) | Kernel::Cast { .. } => y.copy_from_slice(x()?),
        Kernel::Transpose(perm) => {
            let s = cx.shape(0);
            let mut p: SmallVec<[usize; 8]> = SmallVec::new();
            if perm.len == 0 {
                p.extend((0..s.len()).rev());
            } else {
                p.extend(perm.as_slice().iter().map(|&a| shapes::normalize_axis(a, s.len(), false).unwrap_or(0)));
            }
            nn::transpose(x()?, s, &p, y);
        }
        Kernel::Concat { axis } => {
            let s = cx.shape(0);
            let a = shapes::normalize_axis(axis, s.len(), false).unwrap_or(0);
            let outer: usize = s[..a].iter().product();
            let mut parts: SmallVec<[&[T]; 4]> = SmallVec::new();
            for k in 0..ins.len() {
                parts.push(input::<T>(cx, ins, k)?);
            }
            let widths: SmallVec<[usize; 4]> = (0..ins.len()).map(|k| cx.shape(k)[a..].iter().product()).collect();
            nn::concat(&parts, &widths, outer, y);
        }
        Kernel::Slice { has_axes, has_steps } => {
            let s = cx.shape(0);
            let plan = shapes::slice_plan(s, cx.params, has_axes, has_steps).map_err(Error::invalid)?;
            crate::exec::slice(x()?, s, &plan, y);
        }
        Kernel::Expand { .. } => nn::expand(x()?, cx.shape(0), cx.out_shape(), y),
        Kernel::Trilu { k, upper } => {
            let s = cx.shape(0);
            let k = shapes::int_list(&k, cx.params).ok().and_then(|v| v.first().copied()).unwrap_or(0);
            nn::trilu(x()?, s[s.len() - 2], s[s.len() - 1], k, upper, y);
        }
        Kernel::Where => {
            let Data::Bool(c) = ins[0] else { return Err(cx.mismatch()) };
            let (a, b) = (input::<T>(cx, ins, 1)?, input::<T>(cx, ins, 2)?);
            let out = cx.out_shape();
            map3(c, cx.shape(0), a, cx.shape(1), b, cx.shape(2), out, y, |c, a, b| if c != 0 { a } else { b });
        }
        Kernel::SplitPart { axis, part, parts, sizes, exact, sizes_at_run } => {
            let sizes = if sizes_at_run {
                Some(crate::registry::Axes::new(cx.params.first().copied().unwrap_or(&[])).map_err(Error::invalid)?)
            } else {
                sizes
            };
            let s = cx.shape(0);
            let a = shapes::normalize_axis(axis, s.len(), false).unwrap_or(0);
            let (start, size) =
                shapes::split_part(s[a], parts as usize, part as usize, sizes, exact).map_err(Error::invalid)?;
            let inner: usize = s[a + 1..].iter().product();
            let (row, take) = (s[a] * inner, size * inner);
            if take > 0 {
                for (src, dst) in x()?.chunks(row).zip(y.chunks_mut(take)) {
                    dst.copy_from_slice(&src[start * inner..start * inner + take]);
                }
            }
        }
        Kernel::Pad(spec) => {
            let s = cx.shape(0);
            let pads = spec.resolve(s.len(), cx.params).map_err(Error::invalid)?;
            // A constant fill is read at Run (a float32 constant other than 0 is only claimed
            // on float32, which runs in exec.rs).
            let fill = if spec.value_at_run { input::<T>(cx, ins, 1)?[0] } else { T::default() };
            nn::pad(x()?, s, &pads[..s.len()], &pads[s.len()..2 * s.len()], spec.mode, fill, y);
        }
        Kernel::Tile { .. } => {
            let (s, o) = (cx.shape(0), cx.out_shape());
            let x = x()?;
            let rank = s.len();
            let mut index = [0usize; 8];
            for v in y.iter_mut() {
                let mut src = 0;
                for a in 0..rank {
                    src = src * s[a] + index[a] % s[a].max(1);
                }
                *v = x[src];
                for a in (0..rank).rev() {
                    index[a] += 1;
                    if index[a] < o[a] {
                        break;
                    }
                    index[a] = 0;
                }
            }
        }
        Kernel::GatherNd { batch_dims: b } => {
            let (s, si) = (cx.shape(0), cx.shape(1));
            let Data::I64(idx) = ins[1] else { return Err(cx.mismatch()) };
            let last = si[si.len() - 1];
            let inner: usize = s[b + last..].iter().product();
            let per_batch: usize = s[b..].iter().product();
            let tuples_per_batch: usize = si[b..si.len() - 1].iter().product();
            let x = x()?;
            for (t, (tuple, dst)) in idx.chunks(last.max(1)).zip(y.chunks_mut(inner.max(1))).enumerate() {
                let mut at = (t / tuples_per_batch.max(1)) * per_batch;
                let mut stride = per_batch;
                for (k, &raw) in tuple.iter().enumerate().take(last) {
                    let n = s[b + k];
                    stride /= n.max(1);
                    let i = if raw < 0 { raw + n as i64 } else { raw };
                    if i < 0 || i >= n as i64 {
                        return Err(Error::invalid(format_args!(
                            "{} input 1: index {raw} is out of range for axis {} of size {n}",
                            NodeLabel(cx.step),
                            b + k
                        )));
                    }
                    at += i as usize * stride;
                }
                dst.copy_from_slice(&x[at..at + inner]);
            }
        }
        Kernel::Scatter { .. } => {
            y.copy_from_slice(x()?);
            scatter_into(cx, ins, y, &|_, u| u)?;
        }
        Kernel::GatherElements { axis } => {
            let (s, si) = (cx.shape(0), cx.shape(1));
            let a = shapes::normalize_axis(axis, s.len(), false).unwrap_or(0);
            let x = x()?;
            let result = match ins[1] {
                Data::I64(idx) => typed::gather_elements(x, s, idx, si, a, y),
                Data::I32(idx) => typed::gather_elements(x, s, idx, si, a, y),
                _ => return Err(cx.mismatch()),
            };
            result.map_err(|bad| {
                Error::invalid(format_args!(
                    "{} input 1: index {bad} is out of range for axis {a} of size {}",
                    NodeLabel(cx.step),
                    s[a]
                ))
            })?;
        }
        Kernel::Gather { axis } => {
            let s = cx.shape(0);
            let a = shapes::normalize_axis(axis, s.len(), false).unwrap_or(0);
            let (outer, inner) = (s[..a].iter().product(), s[a + 1..].iter().product());
            let x = x()?;
            let result = match ins[1] {
                Data::I64(idx) => typed::gather(x, outer, s[a], inner, idx, y),
                Data::I32(idx) => typed::gather(x, outer, s[a], inner, idx, y),
                _ => return Err(cx.mismatch()),
            };
            result.map_err(|bad| {
                Error::invalid(format_args!(
                    "{} input 1: index {bad} is out of range for axis {a} of size {}",
                    NodeLabel(cx.step),
                    s[a]
                ))
            })?;
        }
        _ => return Err(Error::ep(format_args!("{}: no typed kernel", NodeLabel(cx.step)))),
    }
    Ok(())
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

fn compare<T: Storage + PartialOrd>(cx: &Ctx<'_>, op: typed::Compare, ins: &[Data<'_>], y: &mut [u8]) -> Result<()> {
    let (a, b) = (input::<T>(cx, ins, 0)?, input::<T>(cx, ins, 1)?);
    map2(a, cx.shape(0), b, cx.shape(1), cx.out_shape(), y, |a, b| op.apply(a, b));
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

/// NegativeLogLikelihoodLoss (of `x`, log-probabilities) or, with `softmax`, the
/// cross-entropy of scores `x`: over `x` viewed as `[N, C, D]` and targets `[N, D]`,
/// accumulated in f64.
fn loss<T: Number + Storage>(
    cx: &Ctx<'_>,
    ins: &[Data<'_>],
    reduction: Reduction,
    ignore_index: Option<i64>,
    softmax: bool,
    y: &mut [T],
) -> Result<()> {
    let s = cx.shape(0);
    let (n, c, d) = (s[0], s[1], s[2..].iter().product::<usize>());
    let x = input::<T>(cx, ins, 0)?;
    let weight = if ins.len() > 2 { Some(input::<T>(cx, ins, 2)?) } else { None };
    let target = |i: usize| match ins[1] {
        Data::I64(t) => t[i],
        Data::I32(t) => i64::from(t[i]),
        _ => 0,
    };
    if !matches!(ins[1], Data::I64(_) | Data::I32(_)) {
        return Err(cx.mismatch());
    }
    let (mut total, mut weights) = (0.0f64, 0.0f64);
    for b in 0..n {
        for k in 0..d {
            let i = b * d + k;
            let t = target(i);
            if Some(t) == ignore_index {
                if reduction == Reduction::None {
                    y[i] = T::from_f64(0.0);
                }
                continue;
            }
            if t < 0 || t >= c as i64 {
                return Err(Error::invalid(format_args!(
                    "{} input 1: target {t} is out of range for {c} classes",
                    NodeLabel(cx.step)
                )));
            }
            let at = |class: usize| x[(b * c + class) * d + k].to_f64();
            let log_p = if softmax {
                let max = (0..c).map(at).fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = (0..c).map(|j| (at(j) - max).exp()).sum();
                at(t as usize) - max - sum.ln()
            } else {
                at(t as usize)
            };
            let w = weight.map_or(1.0, |w| w[t as usize].to_f64());
            let l = -log_p * w;
            if reduction == Reduction::None {
                y[i] = T::from_f64(l);
            } else {
                total += l;
                weights += w;
            }
        }
    }
    match reduction {
        Reduction::None => {}
        Reduction::Sum => y[0] = T::from_f64(total),
        Reduction::Mean => y[0] = T::from_f64(total / weights),
    }
    Ok(())
}

thread_local! {
    /// Attention's packed heads and scores, per thread; they grow to the largest, then no
    /// Run allocates.
    static ATTN: std::cell::RefCell<AttnScratch<f32>> = std::cell::RefCell::new(AttnScratch::default());
    static ATTN64: std::cell::RefCell<AttnScratch<f64>> = std::cell::RefCell::new(AttnScratch::default());
}

/// Attention in f32 or f64: the mask (a number added, bool false excluded, padded with
/// exclusion past its last dim), the padding of `nonpad_kv_seqlen` and the causal rule
/// make the bias.
fn attention<T: Storage + AttnFloat + Number>(
    cx: &Ctx<'_>,
    a: &AttentionSpec,
    ins: &[Data<'_>],
    scratch: &mut AttnScratch<T>,
    y: &mut [T],
) -> Result<()> {
    let shapes: SmallVec<[&[usize]; 8]> = (0..ins.len()).map(|k| cx.shape(k)).collect();
    let d = shapes::attention_dims(a, &shapes).map_err(Error::invalid)?;
    let f = |k: usize| input::<T>(cx, ins, k);
    let mut at = 3;
    let mask = if a.mask {
        at += 1;
        Some((ins[at - 1], shapes[at - 1]))
    } else {
        None
    };
    let (past_key, past_value) = if a.past {
        at += 2;
        (Some(f(at - 2)?), Some(f(at - 1)?))
    } else {
        (None, None)
    };
    let nonpad = if a.nonpad { Some(input::<i64>(cx, ins, at)?) } else { None };
    // The mask's strides over [B, H, Sq, its own last dim], 0 on broadcast axes.
    let mut strides = [0usize; 4];
    let mut mask_cols = usize::MAX;
    if let Some((_, m)) = mask {
        let lead = 4 - m.len();
        let mut acc = 1;
        for i in (0..m.len()).rev() {
            if m[i] != 1 || lead + i == 3 {
                strides[lead + i] = acc;
            }
            acc *= m[i];
        }
        mask_cols = m.last().copied().unwrap_or(1);
        if m.is_empty() {
            mask_cols = 1;
        }
    }
    let bias = |b: usize, h: usize, i: usize, j: usize| -> T {
        if nonpad.is_some_and(|n| j as i64 >= n[b]) {
            return <T as AttnFloat>::NEG_INFINITY;
        }
        let Some((data, _)) = mask else { return T::default() };
        if j >= mask_cols {
            return <T as AttnFloat>::NEG_INFINITY; // past the mask's last dim: padding
        }
        let at = b * strides[0] + h * strides[1] + i * strides[2] + j * strides[3];
        match data {
            Data::F32(m) => T::from_f32(m[at]),
            Data::Bool(m) => {
                if m[at] != 0 {
                    T::default()
                } else {
                    <T as AttnFloat>::NEG_INFINITY
                }
            }
            other => T::from_f64(number_at(other, at)),
        }
    };
    let scale = a.scale.unwrap_or(1.0 / (d.head as f32).sqrt());
    let p = AttnParams { scale, softcap: a.softcap, causal: a.causal };
    let x = AttnInputs { q: f(0)?, k: f(1)?, v: f(2)?, past_key, past_value };
    rivet_kernels::attention::attention(&d, p, &x, &bias, a.out, scratch, y);
    Ok(())
}

/// Element offsets in `data` of each update of a ScatterElements (along `axis`) or
/// ScatterND, in the updates' order; `Err` names a bad index.
fn scatter_targets(cx: &Ctx<'_>, ins: &[Data<'_>], mut each: impl FnMut(usize, usize)) -> Result<()> {
    let (s, si) = (cx.shape(0), cx.shape(1));
    let index = |k: usize| match ins[1] {
        Data::I64(v) => v[k],
        Data::I32(v) => i64::from(v[k]),
        _ => 0,
    };
    let bad = |raw: i64, axis: usize| {
        Error::invalid(format_args!(
            "{} input 1: index {raw} is out of range for axis {axis} of size {}",
            NodeLabel(cx.step),
            s[axis]
        ))
    };
    let mut strides = [0usize; 8];
    let mut acc = 1;
    for a in (0..s.len()).rev() {
        strides[a] = acc;
        acc *= s[a];
    }
    match cx.step.kernel {
        Kernel::Scatter { axis: Some(axis), .. } => {
            let a = shapes::normalize_axis(axis, s.len(), false).unwrap_or(0);
            let count: usize = si.iter().product();
            let mut pos = [0usize; 8];
            for k in 0..count {
                let raw = index(k);
                let i = if raw < 0 { raw + s[a] as i64 } else { raw };
                if i < 0 || i >= s[a] as i64 {
                    return Err(bad(raw, a));
                }
                let at: usize = (0..s.len()).map(|d| strides[d] * if d == a { i as usize } else { pos[d] }).sum();
                each(k, at);
                for d in (0..si.len()).rev() {
                    pos[d] += 1;
                    if pos[d] < si[d] {
                        break;
                    }
                    pos[d] = 0;
                }
            }
        }
        _ => {
            let last = si[si.len() - 1];
            let inner: usize = s[last..].iter().product();
            let tuples: usize = si[..si.len() - 1].iter().product();
            for t in 0..tuples {
                let mut at = 0;
                for d in 0..last {
                    let raw = index(t * last + d);
                    let i = if raw < 0 { raw + s[d] as i64 } else { raw };
                    if i < 0 || i >= s[d] as i64 {
                        return Err(bad(raw, d));
                    }
                    at += i as usize * strides[d];
                }
                for e in 0..inner {
                    each(t * inner + e, at + e);
                }
            }
        }
    }
    Ok(())
}

fn scatter_into<T: Storage>(cx: &Ctx<'_>, ins: &[Data<'_>], y: &mut [T], f: &dyn Fn(T, T) -> T) -> Result<()> {
    let u = input::<T>(cx, ins, 2)?;
    scatter_targets(cx, ins, |k, at| y[at] = f(y[at], u[k]))
}

fn scatter_reduce<T: Storage + Number>(
    cx: &Ctx<'_>,
    reduction: ScatterReduction,
    ins: &[Data<'_>],
    dst: &mut DataMut<'_>,
) -> Result<()> {
    let y = T::get_mut(dst).ok_or_else(|| cx.mismatch())?;
    y.copy_from_slice(input::<T>(cx, ins, 0)?);
    let f: &dyn Fn(T, T) -> T = match reduction {
        ScatterReduction::Add => &|a, b| a.add(b),
        ScatterReduction::Mul => &|a, b| a.mul(b),
        ScatterReduction::Max => &|a, b| if b > a { b } else { a },
        ScatterReduction::Min => &|a, b| if b < a { b } else { a },
        ScatterReduction::None => &|_, b| b,
    };
    scatter_into(cx, ins, y, f)
}

/// BatchNormalization in training mode, statistics in f64: Y from the batch's mean and
/// population variance per channel (`out` 0), or the running mean (1) / variance (2)
/// moved toward them by `1 - momentum`.
fn batch_norm_train<T: Storage + Number>(
    cx: &Ctx<'_>,
    ins: &[Data<'_>],
    epsilon: f32,
    momentum: f32,
    out: u8,
    y: &mut [T],
) -> Result<()> {
    let s = cx.shape(0);
    let (batch, channels, spatial) = (s[0], s[1], s[2..].iter().product::<usize>());
    let x = input::<T>(cx, ins, 0)?;
    let p = |k: usize| input::<T>(cx, ins, k);
    let (scale, bias, mean, var) = (p(1)?, p(2)?, p(3)?, p(4)?);
    let count = (batch * spatial).max(1) as f64;
    let momentum = f64::from(momentum);
    for c in 0..channels {
        let planes = || (0..batch).flat_map(move |b| x[(b * channels + c) * spatial..][..spatial].iter());
        let m = planes().map(|v| v.to_f64()).sum::<f64>() / count;
        let v = planes().map(|v| (v.to_f64() - m).powi(2)).sum::<f64>() / count;
        match out {
            0 => {
                let g = scale[c].to_f64() / (v + f64::from(epsilon)).sqrt();
                let shift = bias[c].to_f64() - m * g;
                for b in 0..batch {
                    let at = (b * channels + c) * spatial;
                    for (o, xv) in y[at..at + spatial].iter_mut().zip(&x[at..at + spatial]) {
                        *o = T::from_f64(xv.to_f64() * g + shift);
                    }
                }
            }
            1 => y[c] = T::from_f64(mean[c].to_f64() * momentum + m * (1.0 - momentum)),
            _ => y[c] = T::from_f64(var[c].to_f64() * momentum + v * (1.0 - momentum)),
        }
    }
    Ok(())
}

/// Dropout's ratio (input `ratio_at`, else 0.5) and training_mode (the last input), read
/// at Run; a ratio outside [0, 1) is an error naming the node.
fn dropout_params(cx: &Ctx<'_>, ins: &[Data<'_>], ratio_at: Option<usize>) -> Result<(f64, bool)> {
    let one = |k: usize, what: &str| -> Result<()> {
        if cx.shape(k).iter().product::<usize>() != 1 {
            return Err(Error::invalid(format_args!("{} {what} must hold one value", NodeLabel(cx.step))));
        }
        Ok(())
    };
    let r = match ratio_at {
        Some(k) => {
            one(k, "ratio")?;
            number_at(ins[k], 0)
        }
        None => 0.5,
    };
    let last = ins.len() - 1;
    one(last, "training_mode")?;
    let Data::Bool(t) = ins[last] else { return Err(cx.mismatch()) };
    if !(0.0..1.0).contains(&r) {
        return Err(Error::invalid(format_args!("{} ratio {r} is outside [0, 1)", NodeLabel(cx.step))));
    }
    Ok((r, t[0] != 0))
}

/// A seed for an unseeded Dropout: a new one for each draw, from the clock and a count.
fn fresh_seed() -> u32 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let n = DRAWS.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    // splitmix64's finaliser over both.
    let mut z = t ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

/// An element of any numeric tensor, as f64.
pub(crate) fn number_at(d: Data<'_>, k: usize) -> f64 {
    match d {
        Data::F32(v) => v[k] as f64,
        Data::F64(v) => v[k],
        Data::I8(v) => v[k] as f64,
        Data::I16(v) => v[k] as f64,
        Data::I32(v) => v[k] as f64,
        Data::I64(v) => v[k] as f64,
        Data::U8(v) => v[k] as f64,
        Data::U16(v) => v[k] as f64,
        Data::U32(v) => v[k] as f64,
        Data::U64(v) => v[k] as f64,
        Data::F16(v) => f16_to_f32(v[k]) as f64,
        Data::BF16(v) => bf16_to_f32(v[k]) as f64,
        Data::Bool(_) => f64::NAN,
    }
}

fn one_hot<T: Storage>(cx: &Ctx<'_>, ins: &[Data<'_>], axis: i64, y: &mut [T]) -> Result<()> {
    let s = cx.shape(0);
    let a = shapes::normalize_axis(axis, s.len() + 1, false).unwrap_or(0);
    let values = input::<T>(cx, ins, 2)?;
    let (off, on) = (values[0], values[1]);
    let (outer, inner): (usize, usize) = (s[..a].iter().product(), s[a..].iter().product());
    let d = cx.out_shape()[a];
    let depth = d as i64;
    for o in 0..outer {
        for i in 0..inner {
            // Truncated toward zero, as ORT reads float indices; negative ones count back.
            let raw = number_at(ins[0], o * inner + i).trunc() as i64;
            let hot = if raw < 0 { raw + depth } else { raw };
            for k in 0..d {
                y[(o * d + k) * inner + i] = if hot == k as i64 { on } else { off };
            }
        }
    }
    Ok(())
}

thread_local! {
    /// TopK's order of one column, per thread.
    static ORDER: std::cell::RefCell<Vec<usize>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// TopK along `axis`: values, or their int64 indices when the step's kernel asks for them.
fn top_k<T: Storage + PartialOrd>(
    cx: &Ctx<'_>,
    ins: &[Data<'_>],
    axis: i64,
    largest: bool,
    dst: &mut DataMut<'_>,
) -> Result<()> {
    let s = cx.shape(0);
    let a = shapes::normalize_axis(axis, s.len(), false).unwrap_or(0);
    let (outer, n, inner) = (s[..a].iter().product::<usize>(), s[a], s[a + 1..].iter().product::<usize>());
    let k = cx.out_shape()[a];
    let x = input::<T>(cx, ins, 0)?;
    enum Out<'a, T> {
        Values(&'a mut [T]),
        Indices(&'a mut [i64]),
    }
    let mut out = if matches!(cx.step.kernel, Kernel::TopK { indices: true, .. }) {
        match dst {
            DataMut::I64(ix) => Out::Indices(ix),
            _ => return Err(cx.mismatch()),
        }
    } else {
        Out::Values(T::get_mut(dst).ok_or_else(|| cx.mismatch())?)
    };
    ORDER.with(|order| {
        let mut order = order.borrow_mut();
        for o in 0..outer {
            for i in 0..inner {
                let at = |j: usize| x[(o * n + j) * inner + i];
                order.clear();
                order.extend(0..n);
                // Stable sort: equal values keep the lower index first, as ORT does.
                order.sort_by(|&p, &q| {
                    let c = at(p).partial_cmp(&at(q)).unwrap_or(std::cmp::Ordering::Equal);
                    if largest {
                        c.reverse()
                    } else {
                        c
                    }
                });
                for (r, &j) in order.iter().take(k).enumerate() {
                    let to = (o * k + r) * inner + i;
                    match &mut out {
                        Out::Values(v) => v[to] = at(j),
                        Out::Indices(ix) => ix[to] = j as i64,
                    }
                }
            }
        }
    });
    Ok(())
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

/// The float64 kernels: elementwise math, CumSum and the reductions, computed in f64.
fn float64(cx: &Ctx<'_>, x: &[f64], y: &mut [f64]) -> Result<()> {
    let s = cx.shape(0);
    match cx.step.kernel {
        Kernel::Unary(op) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = op.apply_f64(v)),
        Kernel::Math(op) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = op.apply_f64(v)),
        Kernel::CumSum { .. } => cumsum(cx, x, y, 0.0, |p, q| p + q),
        Kernel::Reduce { op, axes, noop_empty, .. } => {
            let mask = shapes::reduced_axes(s.len(), axes, noop_empty, cx.params).map_err(Error::invalid)?;
            if !mask[..s.len()].iter().any(|&m| m) {
                y.copy_from_slice(x);
                return Ok(());
            }
            reduce_f64(x, s, &mask[..s.len()], op, y);
        }
        _ => return Err(cx.mismatch()),
    }
    Ok(())
}

/// A reduction in f64 over the axes `reduced` marks. LogSumExp subtracts each group's
/// maximum first.
fn reduce_f64(x: &[f64], shape: &[usize], reduced: &[bool], op: nn::ReduceOp, y: &mut [f64]) {
    use nn::ReduceOp as R;
    let count = group_size(shape, reduced);
    let each = |f: &mut dyn FnMut(usize, f64)| for_each_grouped(x, shape, reduced, f);
    let init = match op {
        R::Max | R::Min => f64::NAN, // set from the first element below
        R::Prod => 1.0,
        _ => 0.0,
    };
    y.iter_mut().for_each(|v| *v = init);
    let mut max = vec![f64::NEG_INFINITY; if op == R::LogSumExp { y.len() } else { 0 }];
    let mut first = vec![true; if matches!(op, R::Max | R::Min) { y.len() } else { 0 }];
    if op == R::LogSumExp {
        each(&mut |o, v| max[o] = max[o].max(v));
    }
    each(&mut |o, v| match op {
        R::Sum | R::Mean | R::LogSum => y[o] += v,
        R::SumSquare | R::L2 => y[o] += v * v,
        R::L1 => y[o] += v.abs(),
        R::Prod => y[o] *= v,
        R::LogSumExp => y[o] += (v - max[o]).exp(),
        R::Max | R::Min => {
            // The group's first element, then strictly larger (smaller) ones: a NaN is
            // kept only when it comes first, as the float32 kernel and ORT do.
            if first[o] {
                y[o] = v;
                first[o] = false;
            } else if (op == R::Max && v > y[o]) || (op == R::Min && v < y[o]) {
                y[o] = v;
            }
        }
    });
    for (o, v) in y.iter_mut().enumerate() {
        *v = match op {
            R::Mean => *v / count as f64,
            R::L2 => v.sqrt(),
            R::LogSum => v.ln(),
            R::LogSumExp => v.ln() + max[o],
            _ => *v,
        };
    }
}

/// The integer kernels: Abs, Neg, Relu, Sign, CumSum (wrapping) and the exact reductions.
fn integers<T: Storage + Number>(cx: &Ctx<'_>, ins: &[Data<'_>], dst: &mut DataMut<'_>) -> Result<()> {
    let x = input::<T>(cx, ins, 0)?;
    let y = T::get_mut(dst).ok_or_else(|| cx.mismatch())?;
    let zero = T::default();
    match cx.step.kernel {
        Kernel::Unary(rivet_kernels::UnaryOp::Abs) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = v.abs()),
        Kernel::Unary(rivet_kernels::UnaryOp::Neg) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = v.neg()),
        Kernel::Unary(rivet_kernels::UnaryOp::Relu) => {
            y.iter_mut().zip(x).for_each(|(o, &v)| *o = if v > zero { v } else { zero })
        }
        Kernel::Math(_) => y.iter_mut().zip(x).for_each(|(o, &v)| {
            *o = if v > zero {
                T::from_f64(1.0)
            } else if v < zero {
                T::from_f64(-1.0)
            } else {
                zero
            }
        }),
        Kernel::CumSum { .. } => cumsum(cx, x, y, zero, |p, q| p.add(q)),
        Kernel::Reduce { .. } => return reduce_ints(cx, x, y, false),
        _ => return Err(cx.mismatch()),
    }
    Ok(())
}

/// An integer (or, with `boolean`, bool: Max = any, Min = all) reduction, exact in the
/// element type (wrapping); Mean divides the sum, truncating as integer division does.
fn reduce_ints<T: Storage + Number>(cx: &Ctx<'_>, x: &[T], y: &mut [T], boolean: bool) -> Result<()> {
    use nn::ReduceOp as R;
    let Kernel::Reduce { op, axes, noop_empty, .. } = cx.step.kernel else { return Err(cx.mismatch()) };
    let s = cx.shape(0);
    let mask = shapes::reduced_axes(s.len(), axes, noop_empty, cx.params).map_err(Error::invalid)?;
    let reduced = &mask[..s.len()];
    if !reduced.iter().any(|&m| m) {
        y.copy_from_slice(x);
        return Ok(());
    }
    let count = group_size(s, reduced);
    if matches!(op, R::L2 | R::LogSum | R::LogSumExp) && !boolean {
        // Not exact in the element type: computed in f64, truncated toward zero as ORT's
        // cast of its double result is.
        let xf: Vec<f64> = x.iter().map(|v| v.to_f64()).collect();
        let mut yf = vec![0.0; y.len()];
        reduce_f64(&xf, s, reduced, op, &mut yf);
        y.iter_mut().zip(&yf).for_each(|(o, &v)| *o = T::from_f64(v));
        return Ok(());
    }
    let (zero, one) = (T::default(), T::from_f64(1.0));
    let init = match op {
        R::Prod => one,
        R::Min if boolean => one, // all(): true for an empty group
        _ => zero,
    };
    y.iter_mut().for_each(|v| *v = init);
    let mut seen = vec![false; if matches!(op, R::Max | R::Min) && !boolean { y.len() } else { 0 }];
    let mut result = Ok(());
    for_each_grouped(x, s, reduced, &mut |out, v| {
        let o = &mut y[out];
        *o = match op {
            R::Sum | R::Mean => o.add(v),
            R::SumSquare => o.add(v.mul(v)),
            R::L1 => o.add(v.abs()),
            R::Prod => o.mul(v),
            R::Max if boolean => T::from_f64((!o.is_zero() || !v.is_zero()) as u8 as f64),
            R::Min if boolean => T::from_f64((!o.is_zero() && !v.is_zero()) as u8 as f64),
            R::Max | R::Min => {
                let better = if op == R::Max { v > *o } else { v < *o };
                if !seen[out] || better {
                    seen[out] = true;
                    v
                } else {
                    *o
                }
            }
            _ => {
                result = Err(cx.mismatch());
                *o
            }
        };
    });
    result?;
    if op == R::Mean {
        let n = T::from_f64(count as f64);
        for v in y.iter_mut() {
            *v = v.div(n).unwrap_or(zero);
        }
    }
    Ok(())
}

/// CumSum on the typed path, along the axis from the constant or the step's param.
fn cumsum<T: Copy>(cx: &Ctx<'_>, x: &[T], y: &mut [T], zero: T, add: impl Fn(T, T) -> T) {
    let Kernel::CumSum { axis, exclusive, reverse } = cx.step.kernel else { return };
    let s = cx.shape(0);
    let a = shapes::int_list(&axis, cx.params).ok().and_then(|v| v.first().copied()).unwrap_or(0);
    let a = shapes::normalize_axis(a, s.len(), false).unwrap_or(0);
    let (outer, inner) = (s[..a].iter().product(), s[a + 1..].iter().product());
    nn::cumsum(x, outer, s[a], inner, exclusive, reverse, zero, add, y);
}

/// Elements in each group of a reduction over the axes `reduced` marks.
fn group_size(shape: &[usize], reduced: &[bool]) -> usize {
    shape.iter().zip(reduced).filter(|(_, &r)| r).map(|(&d, _)| d).product()
}

/// Calls `f(group, value)` for every element of `x` (of `shape`, row-major), with the
/// index of its group in the reduction's output.
fn for_each_grouped<T: Copy>(x: &[T], shape: &[usize], reduced: &[bool], f: &mut dyn FnMut(usize, T)) {
    let rank = shape.len();
    // Output strides per input axis (0 on reduced axes).
    let mut ost = [0usize; 8];
    let mut acc = 1;
    for a in (0..rank).rev() {
        if !reduced[a] {
            ost[a] = acc;
            acc *= shape[a];
        }
    }
    let mut index = [0usize; 8];
    let mut out = 0;
    for &v in x {
        f(out, v);
        for a in (0..rank).rev() {
            index[a] += 1;
            out += ost[a];
            if index[a] < shape[a] {
                break;
            }
            out -= ost[a] * shape[a];
            index[a] = 0;
        }
    }
}

/// float64 Softmax/LogSoftmax, LayerNormalization/RMSNormalization, MatMul and Gemm,
/// computed in f64 (plain loops: float64 models are for accuracy, not speed).
fn float64_nn(cx: &Ctx<'_>, ins: &[Data<'_>], y: &mut [f64]) -> Result<()> {
    let f = |k: usize| input::<f64>(cx, ins, k);
    let s = cx.shape(0);
    match cx.step.kernel {
        Kernel::Hardmax { axis, legacy } => {
            let (outer, n, inner) = crate::exec::axis_split(s, axis, legacy);
            let x = f(0)?;
            y.iter_mut().for_each(|v| *v = 0.0);
            for o in 0..outer {
                for i in 0..inner {
                    let at = |k: usize| (o * n + k) * inner + i;
                    let best = (1..n).fold(0, |b, k| if x[at(k)] > x[at(b)] { k } else { b });
                    if n > 0 {
                        y[at(best)] = 1.0;
                    }
                }
            }
        }
        Kernel::GroupNorm { groups, epsilon, per_channel } => {
            let spatial = s[2..].iter().product();
            nn::group_norm(f(0)?, f(1)?, f(2)?, s[0], s[1], spatial, groups, epsilon, per_channel, y);
        }
        // InstanceNormalization is GroupNormalization with a group per channel.
        Kernel::InstanceNorm { epsilon } => {
            let spatial = s[2..].iter().product();
            nn::group_norm(f(0)?, f(1)?, f(2)?, s[0], s[1], spatial, s[1], epsilon, true, y);
        }
        Kernel::BatchNorm { epsilon } => {
            let (x, scale, bias, mean, var) = (f(0)?, f(1)?, f(2)?, f(3)?, f(4)?);
            let spatial: usize = s[2..].iter().product();
            for (block, (xs, ys)) in x.chunks(spatial.max(1)).zip(y.chunks_mut(spatial.max(1))).enumerate() {
                let c = block % s[1].max(1);
                let g = scale[c] / (var[c] + f64::from(epsilon)).sqrt();
                let shift = bias[c] - mean[c] * g;
                ys.iter_mut().zip(xs).for_each(|(o, &v)| *o = v * g + shift);
            }
        }
        Kernel::Softmax { axis, log, legacy } => {
            let (outer, n, inner) = crate::exec::axis_split(s, axis, legacy);
            let x = f(0)?;
            for o in 0..outer {
                for i in 0..inner {
                    let at = |k: usize| (o * n + k) * inner + i;
                    let max = (0..n).map(|k| x[at(k)]).fold(f64::NEG_INFINITY, f64::max);
                    let sum: f64 = (0..n).map(|k| (x[at(k)] - max).exp()).sum();
                    for k in 0..n {
                        let d = x[at(k)] - max;
                        y[at(k)] = if log { d - sum.ln() } else { d.exp() / sum };
                    }
                }
            }
        }
        Kernel::Norm { axis, epsilon, rms } => {
            let a = shapes::normalize_axis(axis, s.len(), false).unwrap_or(0);
            let inner: usize = s[a..].iter().product();
            let (x, scale) = (f(0)?, f(1)?);
            let bias = if ins.len() > 2 { Some(f(2)?) } else { None };
            for (xs, ys) in x.chunks(inner.max(1)).zip(y.chunks_mut(inner.max(1))) {
                let mean = if rms { 0.0 } else { xs.iter().sum::<f64>() / inner as f64 };
                let var = xs.iter().map(|&v| (v - mean).powi(2)).sum::<f64>() / inner as f64;
                let inv = 1.0 / (var + f64::from(epsilon)).sqrt();
                for (j, (o, &v)) in ys.iter_mut().zip(xs).enumerate() {
                    *o = (v - mean) * inv * scale[j] + bias.map_or(0.0, |b| b[j]);
                }
            }
        }
        Kernel::Gemm { alpha, beta, trans_a, trans_b } => {
            let (a, b, sa, sb) = (f(0)?, f(1)?, s, cx.shape(1));
            let (m, k) = if trans_a { (sa[1], sa[0]) } else { (sa[0], sa[1]) };
            let n = if trans_b { sb[0] } else { sb[1] };
            let c = if ins.len() > 2 { Some((f(2)?, cx.shape(2))) } else { None };
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0.0;
                    for p in 0..k {
                        let av = if trans_a { a[p * m + i] } else { a[i * k + p] };
                        let bv = if trans_b { b[j * k + p] } else { b[p * n + j] };
                        acc += av * bv;
                    }
                    let cv = c.map_or(0.0, |(c, cs)| {
                        let (cm, cn) = match cs.len() {
                            0 => (1, 1),
                            1 => (1, cs[0]),
                            _ => (cs[cs.len() - 2], cs[cs.len() - 1]),
                        };
                        c[if cm == 1 { 0 } else { i } * cn + if cn == 1 { 0 } else { j }]
                    });
                    y[i * n + j] = f64::from(alpha) * acc + f64::from(beta) * cv;
                }
            }
        }
        Kernel::MatMul => {
            let (a, b, sa, sb) = (f(0)?, f(1)?, s, cx.shape(1));
            let (m, k) = if sa.len() == 1 { (1, sa[0]) } else { (sa[sa.len() - 2], sa[sa.len() - 1]) };
            let n = if sb.len() == 1 { 1 } else { sb[sb.len() - 1] };
            // Batch axes broadcast as numpy's: each output matrix's A and B matrices.
            let out = cx.out_shape();
            let batch_rank = out.len().saturating_sub(if sa.len() == 1 || sb.len() == 1 { 1 } else { 2 });
            let batch = &out[..batch_rank.min(out.len())];
            let strides = |sh: &[usize], mat: usize| -> SmallVec<[usize; 8]> {
                let bs = &sh[..sh.len().saturating_sub(2)];
                typed::broadcast_strides(bs, batch).iter().map(|st| st * mat).collect()
            };
            let (sta, stb) = (strides(sa, m * k), strides(sb, k * n));
            let count: usize = batch.iter().product();
            let mut index: SmallVec<[usize; 8]> = SmallVec::from_elem(0, batch.len());
            for t in 0..count {
                let oa: usize = index.iter().zip(&sta).map(|(i, s)| i * s).sum();
                let ob: usize = index.iter().zip(&stb).map(|(i, s)| i * s).sum();
                for i in 0..m {
                    for j in 0..n {
                        let acc: f64 = (0..k).map(|p| a[oa + i * k + p] * b[ob + p * n + j]).sum();
                        y[t * m * n + i * n + j] = acc;
                    }
                }
                for d in (0..batch.len()).rev() {
                    index[d] += 1;
                    if index[d] < batch[d] {
                        break;
                    }
                    index[d] = 0;
                }
            }
        }
        _ => return Err(cx.mismatch()),
    }
    Ok(())
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
