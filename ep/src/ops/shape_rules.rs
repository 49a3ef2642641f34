//! Shapes of the data-movement ops and axis arguments: Transpose, Reshape, Concat,
//! Split, Slice, axis normalization and reduced axes.

use smallvec::SmallVec;

use crate::graph::{Shape, ShapeText};
use crate::ops::params::*;

/// Shape's `start..end` over a rank: negative values count back, both clamped.
pub fn shape_range(rank: usize, start: i64, end: Option<i64>) -> (usize, usize) {
    let clamp = |v: i64| {
        let v = if v < 0 { v + rank as i64 } else { v };
        v.clamp(0, rank as i64) as usize
    };
    let (a, b) = (clamp(start), clamp(end.unwrap_or(rank as i64)));
    (a, b.max(a))
}

/// Where part `part` of `parts` starts along an axis of length `len`, and its length.
pub fn split_part(
    len: usize,
    parts: usize,
    part: usize,
    sizes: Option<Axes>,
    exact: bool,
) -> std::result::Result<(usize, usize), String> {
    if let Some(sizes) = sizes {
        let s = sizes.as_slice();
        let total: i64 = s.iter().sum();
        if total != len as i64 {
            return Err(format!("split sizes {s:?} add up to {total}, not the axis length {len}"));
        }
        let start: i64 = s[..part].iter().sum();
        return Ok((start as usize, s[part] as usize));
    }
    if exact && !len.is_multiple_of(parts) {
        return Err(format!("an axis of length {len} does not split into {parts} equal parts"));
    }
    let chunk = len.div_ceil(parts.max(1));
    let start = (chunk * part).min(len);
    Ok((start, chunk.min(len - start)))
}

pub use crate::graph::normalize_axis;

pub fn transposed(x: &[usize], perm: &[i64]) -> std::result::Result<Shape, String> {
    if x.len() > 8 {
        return Err(format!("rank {}: Rivet transposes rank 8 at most", x.len()));
    }
    if perm.is_empty() {
        return Ok(x.iter().rev().copied().collect());
    }
    if perm.len() != x.len() {
        return Err(format!("perm {perm:?} does not match rank {}", x.len()));
    }
    let mut seen = [false; 8];
    let mut out = Shape::new();
    for &p in perm {
        let p = normalize_axis(p, x.len(), false)?;
        if std::mem::replace(&mut seen[p], true) {
            return Err(format!("perm {perm:?} repeats axis {p}"));
        }
        out.push(x[p]);
    }
    Ok(out)
}

pub fn reshaped(x: &[usize], rule: ReshapeRule) -> std::result::Result<Shape, String> {
    let count: usize = x.iter().product();
    match rule {
        ReshapeRule::To { dims, allowzero } => {
            let mut out = Shape::new();
            let mut infer = None;
            for (i, &d) in dims.as_slice().iter().enumerate() {
                match d {
                    -1 if infer.is_none() => {
                        infer = Some(i);
                        out.push(1);
                    }
                    0 if !allowzero => {
                        out.push(*x.get(i).ok_or_else(|| format!("0 at axis {i} copies a dim the input lacks"))?)
                    }
                    d if d >= 0 => out.push(d as usize),
                    d => return Err(format!("shape {:?}: bad dim {d}", dims.as_slice())),
                }
            }
            let known: usize = out.iter().product();
            if let Some(i) = infer {
                if known == 0 || !count.is_multiple_of(known) {
                    return Err(format!("cannot infer -1 in {:?} for {count} elements", dims.as_slice()));
                }
                out[i] = count / known;
            } else if known != count {
                return Err(format!("shape {:?} holds {known} elements, the input {count}", dims.as_slice()));
            }
            Ok(out)
        }
        ReshapeRule::Flatten { axis } => {
            let a = normalize_axis(axis, x.len(), true)?;
            Ok(Shape::from_slice(&[x[..a].iter().product(), x[a..].iter().product()]))
        }
        ReshapeRule::Squeeze { axes } => {
            let mut drop = [false; 8];
            if axes.len == 0 {
                x.iter().enumerate().for_each(|(i, &d)| drop[i] = d == 1);
            }
            for &a in axes.as_slice() {
                let a = normalize_axis(a, x.len(), false)?;
                if x[a] != 1 {
                    return Err(format!("axis {a} has size {}, not 1", x[a]));
                }
                drop[a] = true;
            }
            Ok(x.iter().enumerate().filter(|(i, _)| !drop[*i]).map(|(_, &d)| d).collect())
        }
        ReshapeRule::ToAtRun { .. } | ReshapeRule::SqueezeAtRun | ReshapeRule::UnsqueezeAtRun => {
            Err("the rule's tensor was not resolved".into())
        }
        ReshapeRule::Unsqueeze { axes } => {
            let rank = x.len() + axes.len as usize;
            if rank > 8 {
                return Err(format!("rank {rank} is above 8"));
            }
            let mut ones = [false; 8];
            for &a in axes.as_slice() {
                let a = normalize_axis(a, rank, false)?;
                if std::mem::replace(&mut ones[a], true) {
                    return Err(format!("axes {:?} repeat {a}", axes.as_slice()));
                }
            }
            let mut rest = x.iter();
            Ok((0..rank).map(|i| if ones[i] { 1 } else { *rest.next().expect("counted") }).collect())
        }
    }
}

pub fn concatenated(parts: &[&[usize]], axis: i64) -> std::result::Result<Shape, String> {
    let first = parts[0];
    let a = normalize_axis(axis, first.len(), false)?;
    let mut out = Shape::from_slice(first);
    for p in &parts[1..] {
        if p.len() != first.len() || p.iter().enumerate().any(|(i, &d)| i != a && d != first[i]) {
            return Err(format!("input of shape {} does not match {} off axis {a}", ShapeText(p), ShapeText(first)));
        }
        out[a] += p[a];
    }
    Ok(out)
}

/// Which axes a reduction reduces, as a mask over the input's axes.
pub fn reduced_axes(
    rank: usize,
    axes: ReduceAxes,
    noop_empty: bool,
    params: &[&[i64]],
) -> std::result::Result<[bool; 8], String> {
    let list: &[i64] = match &axes {
        ReduceAxes::Const(a) => a.as_slice(),
        ReduceAxes::AtRun => params.first().copied().ok_or("the axes tensor is missing")?,
    };
    if rank > 8 {
        return Err(format!("rank {rank} is above 8"));
    }
    let mut mask = [false; 8];
    if list.is_empty() {
        if !noop_empty {
            mask[..rank].iter_mut().for_each(|m| *m = true);
        }
        return Ok(mask);
    }
    for &a in list {
        mask[normalize_axis(a, rank, false)?] = true;
    }
    Ok(mask)
}

/// The values of an int64 list: the constant, or the step's param at Run.
pub fn int_list<'a>(list: &'a ReduceAxes, params: &[&'a [i64]]) -> std::result::Result<&'a [i64], String> {
    match list {
        ReduceAxes::Const(a) => Ok(a.as_slice()),
        ReduceAxes::AtRun => params.first().copied().ok_or_else(|| "the int64 input is missing".to_string()),
    }
}

/// Per input axis of a Slice: (first index, step, count).
pub type SlicePlan = SmallVec<[(i64, i64, usize); 8]>;

/// The Slice plan for an input of shape `x` from its starts, ends, axes and steps.
pub fn slice_plan(
    x: &[usize],
    params: &[&[i64]],
    has_axes: bool,
    has_steps: bool,
) -> std::result::Result<SlicePlan, String> {
    let (starts, ends) = (params.first().copied().unwrap_or(&[]), params.get(1).copied().unwrap_or(&[]));
    let axes = if has_axes { params.get(2).copied() } else { None };
    let steps = if has_steps { params.get(2 + usize::from(has_axes)).copied() } else { None };
    if starts.len() != ends.len()
        || axes.is_some_and(|a| a.len() != starts.len())
        || steps.is_some_and(|s| s.len() != starts.len())
    {
        return Err(format!("starts {starts:?}, ends {ends:?}, axes and steps differ in length"));
    }
    if x.len() > 8 {
        return Err(format!("rank {} is above 8", x.len()));
    }
    let mut plan: SlicePlan = x.iter().map(|&d| (0, 1, d)).collect();
    let mut seen = [false; 8];
    for k in 0..starts.len() {
        let a = match axes {
            Some(a) => normalize_axis(a[k], x.len(), false)?,
            None if k < x.len() => k,
            None => return Err(format!("{} starts for rank {}", starts.len(), x.len())),
        };
        if std::mem::replace(&mut seen[a], true) {
            return Err(format!("axis {a} is sliced twice"));
        }
        let step = steps.map_or(1, |s| s[k]);
        if step == 0 {
            return Err("a step of 0".into());
        }
        let d = x[a] as i64;
        let fix = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
        let (start, end) = if step > 0 {
            (fix(starts[k]).clamp(0, d), fix(ends[k]).clamp(0, d))
        } else {
            (fix(starts[k]).clamp(0, d - 1), fix(ends[k]).clamp(-1, d - 1))
        };
        // Both spans are >= 0 and the divisors > 0: ceil division on u64.
        let count = if step > 0 {
            ((end - start).max(0) as u64).div_ceil(step as u64)
        } else {
            ((start - end).max(0) as u64).div_ceil(step.unsigned_abs())
        };
        plan[a] = (start, step, count as usize);
    }
    Ok(plan)
}
