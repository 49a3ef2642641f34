//! Integer math: elementwise, CumSum and the reductions over integers and bool.

use super::*;

/// The integer kernels: Abs, Neg, Relu, Sign, CumSum (wrapping) and the exact reductions.
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
        Kernel::Reduce { .. } => return reduce_ints(cx, x, y, false),
        _ => return Err(cx.mismatch()),
    }
    Ok(())
}

/// An integer (or, with `boolean`, bool: Max = any, Min = all) reduction, exact in the
/// element type (wrapping); Mean divides the sum, truncating as integer division does.
pub(super) fn reduce_ints<T: Storage + Number>(cx: &Ctx<'_>, x: &[T], y: &mut [T], boolean: bool) -> Result<()> {
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

/// Elements in each group of a reduction over the axes `reduced` marks.
pub(super) fn group_size(shape: &[usize], reduced: &[bool]) -> usize {
    shape.iter().zip(reduced).filter(|(_, &r)| r).map(|(&d, _)| d).product()
}

/// Calls `f(group, value)` for every element of `x` (of `shape`, row-major), with the
/// index of its group in the reduction's output.
pub(super) fn for_each_grouped<T: Copy>(x: &[T], shape: &[usize], reduced: &[bool], f: &mut dyn FnMut(usize, T)) {
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
