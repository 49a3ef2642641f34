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
        _ => return Err(cx.mismatch()),
    }
    Ok(())
}
