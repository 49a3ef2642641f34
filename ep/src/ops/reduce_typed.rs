//! The reductions off the float32 kernel: float64 in f64, and integers (and bool) exact
//! in their type, L2 and the logs through f64 (moved here from the typed path).

use rivet_kernels::nn::ReduceOp;
use rivet_kernels::typed::Number;

use crate::data::Storage;

/// The working memory of the reductions here, kept in the op's scratch (grown once, then
/// reused): no Run allocates.
#[derive(Debug, Default)]
pub struct Work {
    /// Per output: LogSumExp's group maximum.
    max: Vec<f64>,
    /// Per output: Max / Min have seen no element yet (f64), or have seen one (integers).
    flags: Vec<bool>,
    /// An integer input and output in f64 (L2 and the logs).
    xf: Vec<f64>,
    yf: Vec<f64>,
}

/// `v` holding `n` copies of `value` (its capacity kept).
fn filled<T: Copy>(v: &mut Vec<T>, n: usize, value: T) -> &mut [T] {
    v.clear();
    v.resize(n, value);
    v
}

/// An integer (or, with `boolean`, bool: Max = any, Min = all) reduction, exact in the
/// element type (wrapping); Mean divides the sum, truncating as integer division does.
pub fn reduce_ints<T: Storage + Number>(
    x: &[T],
    s: &[usize],
    reduced: &[bool],
    op: ReduceOp,
    y: &mut [T],
    boolean: bool,
    work: &mut Work,
) -> Result<(), String> {
    use ReduceOp as R;
    if !reduced.iter().any(|&m| m) {
        y.copy_from_slice(x);
        return Ok(());
    }
    let count = group_size(s, reduced);
    if matches!(op, R::L2 | R::LogSum | R::LogSumExp) && !boolean {
        // Not exact in the element type: computed in f64, truncated toward zero as ORT's
        // cast of its double result is.
        let (mut xf, mut yf) = (std::mem::take(&mut work.xf), std::mem::take(&mut work.yf));
        xf.clear();
        xf.extend(x.iter().map(|v| v.to_f64()));
        reduce_f64(&xf, s, reduced, op, filled(&mut yf, y.len(), 0.0), work);
        y.iter_mut().zip(&yf).for_each(|(o, &v)| *o = T::from_f64(v));
        (work.xf, work.yf) = (xf, yf);
        return Ok(());
    }
    let (zero, one) = (T::default(), T::from_f64(1.0));
    let init = match op {
        R::Prod => one,
        R::Min if boolean => one, // all(): true for an empty group
        _ => zero,
    };
    y.iter_mut().for_each(|v| *v = init);
    let seen = filled(&mut work.flags, if matches!(op, R::Max | R::Min) && !boolean { y.len() } else { 0 }, false);
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
                result = Err("element types differ from the plan's".to_string());
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
pub fn group_size(shape: &[usize], reduced: &[bool]) -> usize {
    shape.iter().zip(reduced).filter(|(_, &r)| r).map(|(&d, _)| d).product()
}

/// Calls `f(group, value)` for every element of `x` (of `shape`, row-major), with the
/// index of its group in the reduction's output.
pub fn for_each_grouped<T: Copy>(x: &[T], shape: &[usize], reduced: &[bool], f: &mut dyn FnMut(usize, T)) {
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

/// A reduction in f64 over the axes `reduced` marks. LogSumExp subtracts each group's
/// maximum first.
pub fn reduce_f64(x: &[f64], shape: &[usize], reduced: &[bool], op: ReduceOp, y: &mut [f64], work: &mut Work) {
    use ReduceOp as R;
    let count = group_size(shape, reduced);
    let each = |f: &mut dyn FnMut(usize, f64)| for_each_grouped(x, shape, reduced, f);
    let init = match op {
        R::Max | R::Min => f64::NAN, // set from the first element below
        R::Prod => 1.0,
        _ => 0.0,
    };
    y.iter_mut().for_each(|v| *v = init);
    let max = filled(&mut work.max, if op == R::LogSumExp { y.len() } else { 0 }, f64::NEG_INFINITY);
    let first = filled(&mut work.flags, if matches!(op, R::Max | R::Min) { y.len() } else { 0 }, true);
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
