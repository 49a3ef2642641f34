//! Integer math: elementwise and CumSum.

use super::*;

/// The integer kernels: Abs, Neg, Relu, Sign and CumSum (wrapping).
pub(super) fn integers<T: Storage + Number>(cx: &Ctx<'_>, ins: &[Data<'_>], dst: &mut DataMut<'_>) -> Result<()> {
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
        _ => return Err(cx.mismatch()),
    }
    Ok(())
}

/// CumSum on the typed path, along the axis from the constant or the step's param.
pub(super) fn cumsum<T: Copy>(cx: &Ctx<'_>, x: &[T], y: &mut [T], zero: T, add: impl Fn(T, T) -> T) {
    let Kernel::CumSum { axis, exclusive, reverse } = cx.step.kernel else { return };
    let s = cx.shape(0);
    let a = shapes::int_list(&axis, cx.params).ok().and_then(|v| v.first().copied()).unwrap_or(0);
    let a = shapes::normalize_axis(a, s.len(), false).unwrap_or(0);
    let (outer, inner) = (s[..a].iter().product(), s[a + 1..].iter().product());
    nn::cumsum(x, outer, s[a], inner, exclusive, reverse, zero, add, y);
}
