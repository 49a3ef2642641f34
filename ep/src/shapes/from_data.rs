//! Shapes that depend on a Run's data (NonZero, OneHot's depth, ...).

use super::*;

/// The output shape of a step whose shape depends on its input data (Range, NonZero).
pub fn shape_from_data(values: &[PlanValue], step: &Step, shapes: &[Shape], ins: &[Data<'_>]) -> Result<Shape> {
    let fail = |why: std::fmt::Arguments<'_>| Error::invalid(format_args!("{}: {why}", NodeLabel(step)));
    let shape: Shape = match step.kernel {
        Kernel::Range => {
            for k in 0..3 {
                if !shapes[step.inputs[k]].is_empty() {
                    return Err(fail(format_args!("start, limit and delta must be scalars")));
                }
            }
            let at = |k: usize| -> f64 {
                match ins[k] {
                    Data::F32(v) => v[0] as f64,
                    Data::F64(v) => v[0],
                    Data::I16(v) => v[0] as f64,
                    Data::I32(v) => v[0] as f64,
                    Data::I64(v) => v[0] as f64,
                    _ => f64::NAN,
                }
            };
            let (start, limit, delta) = (at(0), at(1), at(2));
            if delta == 0.0 || !(start.is_finite() && limit.is_finite() && delta.is_finite()) {
                return Err(fail(format_args!("Range({start}, {limit}, {delta}) has no length")));
            }
            let n = ((limit - start) / delta).ceil().max(0.0);
            if n > (1u64 << 40) as f64 {
                return Err(fail(format_args!("Range({start}, {limit}, {delta}) is too long")));
            }
            [n as usize].into_iter().collect()
        }
        Kernel::NonZero => {
            let x = &shapes[step.inputs[0]];
            [x.len().max(1), count_nonzero(ins[0])].into_iter().collect()
        }
        Kernel::OneHot { axis, depth: None } => {
            if shapes[step.inputs[1]].iter().product::<usize>() != 1 {
                return Err(fail(format_args!("depth must hold one value")));
            }
            // A float depth is truncated toward zero, as ORT reads it.
            let depth = crate::data::number_at(ins[1], 0).trunc();
            if !(depth >= 1.0 && depth <= (1u64 << 40) as f64) {
                return Err(fail(format_args!("depth {depth} is not a positive count")));
            }
            one_hot_shape(step, axis, depth as i64, &shapes[step.inputs[0]], shapes)?
        }
        _ => unreachable!("only data-shaped kernels"),
    };
    check_declared(values, step, &shape)?;
    Ok(shape)
}

/// OneHot's output: the indices' shape with `depth` inserted at `axis`.
pub(super) fn one_hot_shape(step: &Step, axis: i64, depth: i64, x: &[usize], shapes: &[Shape]) -> Result<Shape> {
    let fail = |why: std::fmt::Arguments<'_>| Error::invalid(format_args!("{}: {why}", NodeLabel(step)));
    let a = normalize_axis(axis, x.len() + 1, false).map_err(|e| fail(format_args!("{e}")))?;
    if shapes[step.inputs[2]].iter().product::<usize>() != 2 {
        return Err(fail(format_args!("values must hold [off, on]")));
    }
    let mut s: Shape = x.iter().copied().collect();
    s.insert(a, depth as usize);
    Ok(s)
}

/// How many elements of a tensor are not zero (for float16 / bfloat16, -0 is zero).
pub fn count_nonzero(d: Data<'_>) -> usize {
    match d {
        Data::F32(v) => v.iter().filter(|&&x| x != 0.0).count(),
        Data::F64(v) => v.iter().filter(|&&x| x != 0.0).count(),
        Data::I8(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::I16(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::I32(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::I64(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::U8(v) | Data::Bool(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::U16(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::U32(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::U64(v) => v.iter().filter(|&&x| x != 0).count(),
        Data::F16(v) | Data::BF16(v) => v.iter().filter(|&&x| x & 0x7fff != 0).count(),
    }
}
