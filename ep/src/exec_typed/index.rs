//! Index ops on the typed path: ScatterND/ScatterElements, OneHot, TopK.

use super::*;

/// Element offsets in `data` of each update of a ScatterElements (along `axis`) or
/// ScatterND, in the updates' order; `Err` names a bad index.
pub(super) fn scatter_targets(cx: &Ctx<'_>, ins: &[Data<'_>], mut each: impl FnMut(usize, usize)) -> Result<()> {
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

pub(super) fn scatter_into<T: Storage>(
    cx: &Ctx<'_>,
    ins: &[Data<'_>],
    y: &mut [T],
    f: &dyn Fn(T, T) -> T,
) -> Result<()> {
    let u = input::<T>(cx, ins, 2)?;
    scatter_targets(cx, ins, |k, at| y[at] = f(y[at], u[k]))
}

pub(super) fn scatter_reduce<T: Storage + Number>(
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

pub(super) fn one_hot<T: Storage>(cx: &Ctx<'_>, ins: &[Data<'_>], axis: i64, y: &mut [T]) -> Result<()> {
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

/// TopK along `axis`: values, or their int64 indices when the step's kernel asks for them.
pub(super) fn top_k<T: Storage + PartialOrd>(
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
