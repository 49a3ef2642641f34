//! Shape inference for plan steps, shared by Compile (static shapes, computed once) and
//! Run (symbolic shapes), and the shape texts error messages use.

use std::fmt;

use rivet_kernels::Broadcast;

use crate::data::Data;
use crate::error::{Error, Result};
use crate::graph::{DeclaredShape, Dim, Shape};
use crate::plan::{NodeLabel, PlanValue, Step};
use crate::registry::Kernel;
use rivet_kernels::attention::AttnOut;
use smallvec::SmallVec;

pub use crate::graph::ShapeText;

pub struct DeclaredText<'a>(pub &'a DeclaredShape);
impl fmt::Display for DeclaredText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match d {
                Dim::Fixed(n) => write!(f, "{n}")?,
                Dim::Symbolic(s) if s.is_empty() => f.write_str("?")?,
                Dim::Symbolic(s) => f.write_str(s)?,
            }
        }
        f.write_str("]")
    }
}

/// True when `actual` fits the declaration (no declaration fits anything).
pub fn matches_declared(actual: &[usize], declared: &Option<DeclaredShape>) -> bool {
    match declared {
        None => true,
        Some(dims) => {
            dims.len() == actual.len()
                && dims.iter().zip(actual).all(|(d, &a)| match d {
                    Dim::Fixed(n) => *n == a,
                    Dim::Symbolic(_) => true,
                })
        }
    }
}

/// The fully static shape of a declaration, if it has one.
pub fn fixed(declared: &Option<DeclaredShape>) -> Option<Shape> {
    declared.as_ref()?.iter().map(|d| if let Dim::Fixed(n) = d { Some(*n) } else { None }).collect()
}

/// Largest element count Rivet accepts for one tensor (2^48 floats is 1 PiB): a larger
/// declared shape is a hostile or broken model, rejected before any size arithmetic.
pub const MAX_ELEMENTS: usize = 1 << 48;

/// Element count of a shape, or an error naming the value when it is absurd.
pub fn checked_count(shape: &[usize], what: impl fmt::Display) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| Error::invalid(format_args!("{what}: shape {} has more than 2^48 elements", ShapeText(shape))))
}

/// The elementwise kernels of one input, whose output has the input's shape (a pattern).
macro_rules! same_shape {
    () => {
        Kernel::Unary(_)
            | Kernel::Identity
            | Kernel::Scale(_)
            | Kernel::Clip { .. }
            | Kernel::Math(_)
            | Kernel::Cast { .. }
            | Kernel::DropoutMask { .. }
            | Kernel::DropoutApply { .. }
    };
}

/// A dimension no tensor has: a shape holding it is "not computed yet". Run states start
/// their step outputs with it, and a failed check leaves it behind.
pub const UNSET_DIM: usize = usize::MAX;

/// Writes a step's output shape into `shapes` (in place: no shape is moved around) and
/// returns the broadcast plan of a binary step. Same-shape kernels copy the input's shape
/// and check the declaration; everything else goes through `infer`. `shapes` holds the
/// shapes of the previous Run (or [`UNSET_DIM`]): a same-shape output that already equals
/// its input was copied and checked then, and is left as it is.
#[inline]
pub fn infer_into(
    values: &[PlanValue],
    step: &Step,
    shapes: &mut [Shape],
    params: &[&[i64]],
) -> Result<Option<Broadcast>> {
    if matches!(step.kernel, same_shape!()) {
        // Values are numbered in plan order: an output comes after its inputs.
        let (before, from_output) = shapes.split_at_mut(step.output);
        let (out, src) = (from_output[0].as_slice(), before[step.inputs[0]].as_slice());
        // (An element loop: `==` on slices calls memcmp, which costs more at rank 1-4.)
        if out.len() == src.len() && out.iter().zip(src).all(|(a, b)| a == b) {
            return Ok(None);
        }
    }
    infer_changed(values, step, shapes, params)
}

/// [`infer_into`] when the shape has to be computed.
#[inline(never)]
fn infer_changed(
    values: &[PlanValue],
    step: &Step,
    shapes: &mut [Shape],
    params: &[&[i64]],
) -> Result<Option<Broadcast>> {
    if matches!(step.kernel, same_shape!()) {
        let (before, from_output) = shapes.split_at_mut(step.output);
        let (out, src) = (&mut from_output[0], &before[step.inputs[0]]);
        out.clear();
        out.extend_from_slice(src);
        if let Err(e) = check_declared(values, step, out) {
            out.clear();
            out.push(UNSET_DIM);
            return Err(e);
        }
        return Ok(None);
    }
    let (shape, b) = infer(values, step, shapes, params)?;
    shapes[step.output] = shape;
    Ok(b)
}

/// A step's output shape (and broadcast plan, for binary steps) from its input shapes,
/// checked against the output's declaration.
/// `params` holds the data of the step's int64 params (empty at Compile, where steps with
/// params are not inferred).
pub fn infer(
    values: &[PlanValue],
    step: &Step,
    shapes: &[Shape],
    params: &[&[i64]],
) -> Result<(Shape, Option<Broadcast>)> {
    let (shape, broadcast) = infer_shape(values, step, shapes, params)?;
    check_declared(values, step, &shape)?;
    Ok((shape, broadcast))
}

/// The output shape of a family op's step from its inputs' shapes and whatever input data
/// is known (`data[k]` for input `k`; missing entries are unknown). `None`: the shape
/// needs data only a Run has.
pub fn op_shape(
    values: &[PlanValue],
    step: &Step,
    shapes: &[Shape],
    data: &[Option<Data<'_>>],
) -> Result<Option<Shape>> {
    let op = step.op.as_ref().expect("a family op's step holds its op");
    let ins: SmallVec<[&[usize]; 16]> = step.inputs.iter().map(|&id| shapes[id].as_slice()).collect();
    match op.shape(&crate::ops::ShapeIn { shapes: &ins, data }) {
        Ok(s) => Ok(Some(s)),
        Err(crate::ops::ShapeError::NeedsData) => Ok(None),
        Err(crate::ops::ShapeError::Invalid(why)) => {
            let list: Vec<String> =
                step.inputs.iter().map(|&id| format!("'{}' {}", values[id].name, ShapeText(&shapes[id]))).collect();
            Err(Error::invalid(format_args!("{} (inputs {}): {why}", NodeLabel(step), list.join(", "))))
        }
    }
}

/// `infer` without the check against the output's declaration.
pub fn infer_shape(
    values: &[PlanValue],
    step: &Step,
    shapes: &[Shape],
    params: &[&[i64]],
) -> Result<(Shape, Option<Broadcast>)> {
    if step.op.is_some() {
        return match op_shape(values, step, shapes, &[])? {
            Some(s) => Ok((s, None)),
            None => Err(Error::ep(format_args!("{}: its shape comes from its data", NodeLabel(step)))),
        };
    }
    // Inputs were checked when they were produced (or bound, for the fused inputs).
    let x = &shapes[step.inputs[0]];
    let fail = |why: std::fmt::Arguments<'_>| {
        Error::invalid(format_args!(
            "{} input '{}' of shape {}: {why}",
            NodeLabel(step),
            values[step.inputs[0]].name,
            ShapeText(x)
        ))
    };
    let (shape, broadcast) = match step.kernel {
        Kernel::Binary(_) => {
            let y = &shapes[step.inputs[1]];
            let b = Broadcast::new(x, y).map_err(|e| {
                Error::invalid(format_args!(
                    "{} inputs '{}' and '{}': {e}",
                    NodeLabel(step),
                    values[step.inputs[0]].name,
                    values[step.inputs[1]].name
                ))
            })?;
            (Shape::from_slice(b.out_shape()), Some(b))
        }
        // `from_slice` copies the inline storage in one go (a clone extends element-wise).
        same_shape!() => (Shape::from_slice(x), None),
        Kernel::Hardmax { axis, .. } => {
            normalize_axis(axis, x.len(), false).map_err(|e| fail(format_args!("{e}")))?;
            (x.clone(), None)
        }
        Kernel::Ones => (x.clone(), None),
        Kernel::ConvTranspose(spec) => {
            let w = &shapes[step.inputs[1]];
            let g = conv_transpose_geometry(&spec, x, w).map_err(|e| fail(format_args!("{e}")))?;
            if let Some(&b) = step.inputs.get(2) {
                if shapes[b].as_slice() != [g.out_channels] {
                    return Err(fail(format_args!(
                        "bias of shape {} is not [{}]",
                        ShapeText(&shapes[b]),
                        g.out_channels
                    )));
                }
            }
            (windowed(x, g.out_channels, g.out), None)
        }
        Kernel::ShapeOf { start, end } => {
            let (a, b) = shape_range(x.len(), start, end);
            ([b - a].into_iter().collect(), None)
        }
        Kernel::SizeOf => (Shape::new(), None),
        Kernel::ConstantOfShape { shape, .. } => {
            let dims = int_list(&shape, params).map_err(|e| fail(format_args!("{e}")))?;
            if dims.iter().any(|&d| d < 0) || x.len() != 1 {
                return Err(fail(format_args!("shape {dims:?} must be 1-D and non-negative")));
            }
            (dims.iter().map(|&d| d as usize).collect(), None)
        }
        Kernel::ClipInputs { .. } => {
            if let Some(&b) = step.inputs[1..].iter().find(|&&b| shapes[b].iter().product::<usize>() != 1) {
                return Err(fail(format_args!("bound '{}' is not a scalar", values[b].name)));
            }
            (x.clone(), None)
        }
        Kernel::Einsum { .. } => {
            let ins: SmallVec<[&[usize]; 4]> = step.inputs.iter().map(|&id| shapes[id].as_slice()).collect();
            let ranks: SmallVec<[usize; 4]> = ins.iter().map(|s| s.len()).collect();
            let eq = rivet_kernels::einsum::parse(step.kernel.einsum_equation(), &ranks)
                .map_err(|e| fail(format_args!("{e}")))?;
            (rivet_kernels::einsum::output_shape(&eq, &ins).map_err(|e| fail(format_args!("{e}")))?, None)
        }
        Kernel::Range | Kernel::NonZero | Kernel::OneHot { depth: None, .. } | Kernel::Op => {
            return Err(Error::ep(format_args!("{}: its shape comes from its data", NodeLabel(step))))
        }
        Kernel::TopK { axis, k, .. } => {
            let a = normalize_axis(axis, x.len(), false).map_err(|e| fail(format_args!("{e}")))?;
            let k = int_list(&k, params).map_err(|e| fail(format_args!("{e}")))?;
            if x.is_empty() || k.len() != 1 || k[0] < 0 || k[0] as usize > x[a] {
                return Err(fail(format_args!("K {k:?} for an axis of {}", x.get(a).copied().unwrap_or(0))));
            }
            let mut s = x.clone();
            s[a] = k[0] as usize;
            (s, None)
        }
        Kernel::GroupNorm { groups, per_channel, .. } => {
            let want = if per_channel { x.get(1).copied().unwrap_or(0) } else { groups };
            let ok = x.len() >= 2
                && x[1].is_multiple_of(groups)
                && step.inputs[1..].iter().all(|&p| shapes[p].as_slice() == [want]);
            if !ok {
                return Err(fail(format_args!("{groups} groups, scale and bias of [{want}]")));
            }
            (x.clone(), None)
        }
        Kernel::Rotary { .. } => {
            let ins: SmallVec<[&[usize]; 4]> = step.inputs.iter().map(|&id| shapes[id].as_slice()).collect();
            rotary_dims(&step.kernel, &ins).map_err(|e| fail(format_args!("{e}")))?;
            (x.clone(), None)
        }
        Kernel::Tile { repeats } => {
            let r = int_list(&repeats, params).map_err(|e| fail(format_args!("{e}")))?;
            if r.len() != x.len() || r.iter().any(|&v| v < 0) {
                return Err(fail(format_args!("repeats {r:?} for rank {}", x.len())));
            }
            (x.iter().zip(r).map(|(&d, &k)| d * k as usize).collect(), None)
        }
        Kernel::GatherNd { batch_dims: b } => {
            let i = &shapes[step.inputs[1]];
            let last = i.last().copied().unwrap_or(usize::MAX);
            if i.is_empty() || b >= i.len() || b + last > x.len() || x[..b] != i[..b] {
                return Err(fail(format_args!("indices of shape {} with batch_dims {b}", ShapeText(i))));
            }
            (i[..i.len() - 1].iter().chain(&x[b + last..]).copied().collect(), None)
        }
        Kernel::Scatter { axis, .. } => {
            let (i, u) = (&shapes[step.inputs[1]], &shapes[step.inputs[2]]);
            let ok = match axis {
                Some(axis) => {
                    let a = normalize_axis(axis, x.len(), false).map_err(|e| fail(format_args!("{e}")))?;
                    i == u && i.len() == x.len() && (0..x.len()).all(|d| d == a || i[d] <= x[d])
                }
                None => {
                    let last = i.last().copied().unwrap_or(usize::MAX);
                    !i.is_empty()
                        && last <= x.len()
                        && u.len() == i.len() - 1 + x.len() - last
                        && u[..i.len() - 1] == i[..i.len() - 1]
                        && u[i.len() - 1..] == x[last..]
                }
            };
            if !ok {
                return Err(fail(format_args!("indices {} and updates {} do not fit", ShapeText(i), ShapeText(u))));
            }
            (x.clone(), None)
        }
        Kernel::OneHot { axis, depth: Some(depth) } => (one_hot_shape(step, axis, depth, x, shapes)?, None),
        Kernel::Attention(a) => {
            let ins: SmallVec<[&[usize]; 8]> = step.inputs.iter().map(|&id| shapes[id].as_slice()).collect();
            let d = attention_dims(&a, &ins).map_err(|e| fail(format_args!("{e}")))?;
            let total = d.total();
            let shape: Shape = match a.out {
                AttnOut::Y if d.q_3d => [d.batch, d.q_len, d.q_heads * d.v_head].into_iter().collect(),
                AttnOut::Y => [d.batch, d.q_heads, d.q_len, d.v_head].into_iter().collect(),
                AttnOut::PresentKey => [d.batch, d.kv_heads, total, d.head].into_iter().collect(),
                AttnOut::PresentValue => [d.batch, d.kv_heads, total, d.v_head].into_iter().collect(),
                AttnOut::Scores(_) => [d.batch, d.q_heads, d.q_len, total].into_iter().collect(),
            };
            (shape, None)
        }
        Kernel::Loss { reduction, .. } => {
            let t = &shapes[step.inputs[1]];
            let ok = x.len() >= 2 && t.len() == x.len() - 1 && t[0] == x[0] && t[1..] == x[2..];
            if !ok {
                return Err(fail(format_args!("target of shape {} does not match [N, d1, ...]", ShapeText(t))));
            }
            if let Some(&w) = step.inputs.get(2) {
                if shapes[w].as_slice() != [x[1]] {
                    return Err(fail(format_args!("weight of shape {} is not [C]", ShapeText(&shapes[w]))));
                }
            }
            match reduction {
                crate::registry::Reduction::None => (t.clone(), None),
                _ => (Shape::new(), None),
            }
        }
        Kernel::NormStat { axis, .. } => {
            let a = normalize_axis(axis, x.len(), false).map_err(|e| fail(format_args!("{e}")))?;
            let mut s = x.clone();
            s[a..].iter_mut().for_each(|d| *d = 1);
            (s, None)
        }
        Kernel::EyeLike { .. } => {
            if x.len() != 2 {
                return Err(fail(format_args!("EyeLike needs a 2-D input")));
            }
            (x.clone(), None)
        }
        Kernel::GatherElements { axis } => {
            let i = &shapes[step.inputs[1]];
            let a = normalize_axis(axis, x.len(), false).map_err(|e| fail(format_args!("{e}")))?;
            if x.is_empty() || i.len() != x.len() {
                return Err(fail(format_args!("indices of shape {} must have the data's rank", ShapeText(i))));
            }
            if (0..x.len()).any(|d| d != a && i[d] > x[d]) {
                return Err(fail(format_args!("indices of shape {} exceed the data off the axis", ShapeText(i))));
            }
            (i.clone(), None)
        }
        Kernel::Arith(_) | Kernel::PowTyped => {
            let mut out = Shape::from_slice(x);
            for &id in &step.inputs[1..] {
                let b = Broadcast::new(&out, &shapes[id]).map_err(|e| {
                    Error::invalid(format_args!(
                        "{} input '{}' does not broadcast with the others: {e}",
                        NodeLabel(step),
                        values[id].name
                    ))
                })?;
                out = Shape::from_slice(b.out_shape());
            }
            (out, None)
        }
        Kernel::ArgReduce { axis, keepdims, .. } => {
            if x.is_empty() {
                return Err(fail(format_args!("ArgMax / ArgMin need rank 1 or more")));
            }
            let a = normalize_axis(axis, x.len(), false).map_err(|e| fail(format_args!("{e}")))?;
            if x[a] == 0 {
                return Err(fail(format_args!("ArgMax / ArgMin over an empty axis")));
            }
            let mut s = x.clone();
            if keepdims {
                s[a] = 1;
            } else {
                s.remove(a);
            }
            (s, None)
        }
        Kernel::Gather { axis } => {
            if x.is_empty() {
                return Err(fail(format_args!("Gather needs data of rank 1 or more")));
            }
            let a = normalize_axis(axis, x.len(), false).map_err(|e| fail(format_args!("{e}")))?;
            let mut s: Shape = x[..a].iter().copied().collect();
            s.extend_from_slice(&shapes[step.inputs[1]]);
            s.extend_from_slice(&x[a + 1..]);
            (s, None)
        }
        Kernel::Norm { axis, .. } => {
            let a = normalize_axis(axis, x.len(), false).map_err(|e| fail(format_args!("{e}")))?;
            for &id in &step.inputs[1..] {
                // One value per normalized element (the normalized shape, possibly with
                // leading 1s): broadcasting a smaller parameter is not supported.
                let p = &shapes[id];
                if p.iter().product::<usize>() != x[a..].iter().product::<usize>() {
                    return Err(fail(format_args!(
                        "parameter '{}' of shape {} does not match {}",
                        values[id].name,
                        ShapeText(p),
                        ShapeText(&x[a..])
                    )));
                }
            }
            (Shape::from_slice(x), None)
        }
        Kernel::Variadic { .. } | Kernel::Dropout { .. } => unreachable!("lowered by the plan"),
        Kernel::Softmax { axis, .. } => {
            normalize_axis(axis, x.len(), false).map_err(|e| fail(format_args!("{e}")))?;
            (x.clone(), None)
        }
        Kernel::Transpose(perm) => (transposed(x, perm.as_slice()).map_err(|e| fail(format_args!("{e}")))?, None),
        Kernel::CumSum { axis, .. } => {
            let a = int_list(&axis, params).map_err(|e| fail(format_args!("{e}")))?;
            if a.len() != 1 {
                return Err(fail(format_args!("CumSum's axis must be one value, got {a:?}")));
            }
            normalize_axis(a[0], x.len(), false).map_err(|e| fail(format_args!("{e}")))?;
            (x.clone(), None)
        }
        Kernel::Trilu { k, .. } => {
            if x.len() < 2 || int_list(&k, params).map_err(|e| fail(format_args!("{e}")))?.len() > 1 {
                return Err(fail(format_args!("Trilu needs a matrix and at most one k")));
            }
            (x.clone(), None)
        }
        Kernel::Reshape(rule) => {
            let rule = if rule.reads_param() {
                let param = params.first().ok_or_else(|| fail(format_args!("its shape or axes tensor is missing")))?;
                rule.resolve(param).map_err(|e| fail(format_args!("{e}")))?
            } else {
                rule
            };
            (reshaped(x, rule).map_err(|e| fail(format_args!("{e}")))?, None)
        }
        Kernel::MatMul { trans_b, .. } => {
            // A B stored `[.., n, k]` is the matrix op(B) = its last two axes swapped.
            let mut b = shapes[step.inputs[1]].clone();
            if trans_b {
                let r = b.len();
                b.swap(r - 2, r - 1);
            }
            (matmul_shape(x, &b).map_err(|e| fail(format_args!("{e}")))?, None)
        }
        Kernel::Gemm { trans_a, trans_b, .. } => {
            let c = step.inputs.get(2).map(|&id| &shapes[id]);
            (gemm_shape(x, &shapes[step.inputs[1]], c, trans_a, trans_b).map_err(|e| fail(format_args!("{e}")))?, None)
        }
        // Per-channel parameters: every input after X is [C].
        Kernel::BatchNorm { .. } | Kernel::InstanceNorm { .. } | Kernel::BatchNormTrain { .. } => {
            let min_rank = if matches!(step.kernel, Kernel::InstanceNorm { .. }) { 3 } else { 2 };
            let c = *x.get(1).filter(|_| x.len() >= min_rank).ok_or_else(|| fail(format_args!("needs [N, C, ...]")))?;
            if let Some(&id) = step.inputs[1..].iter().find(|&&id| shapes[id].as_slice() != [c]) {
                return Err(fail(format_args!(
                    "parameter '{}' has shape {}, not [{c}]",
                    values[id].name,
                    ShapeText(&shapes[id])
                )));
            }
            match step.kernel {
                Kernel::BatchNormTrain { out: 1 | 2, .. } => ([c].into_iter().collect(), None),
                _ => (x.clone(), None),
            }
        }
        Kernel::Conv { window, group } => {
            let w = &shapes[step.inputs[1]];
            if !(3..=5).contains(&x.len()) || w.len() != x.len() {
                return Err(fail(format_args!("Conv needs 3-D to 5-D X and W alike, W is {}", ShapeText(w))));
            }
            if x[1] != w[1] * group || !w[0].is_multiple_of(group) {
                return Err(fail(format_args!("{} input channels, W {} with group {group}", x[1], ShapeText(w))));
            }
            if let Some(&b) = step.inputs.get(2) {
                if shapes[b].as_slice() != [w[0]] {
                    return Err(fail(format_args!("bias {} is not [{}]", ShapeText(&shapes[b]), w[0])));
                }
            }
            let wk = spatial(w);
            let k = if window.kernel == [0; 3] { wk } else { window.kernel };
            if k != wk {
                return Err(fail(format_args!("kernel_shape {k:?} differs from W {}", ShapeText(w))));
            }
            let (g, _) = window_3d(&window, spatial(x), k).map_err(|e| fail(format_args!("{e}")))?;
            (windowed(x, w[0], g.out), None)
        }
        Kernel::Pool { window, .. } | Kernel::PoolIndices { window, .. } => {
            if !(3..=5).contains(&x.len()) {
                return Err(fail(format_args!("needs [N, C] and 1 to 3 spatial axes")));
            }
            let (g, _) = window_3d(&window, spatial(x), window.kernel).map_err(|e| fail(format_args!("{e}")))?;
            (windowed(x, x[1], g.out), None)
        }

        Kernel::Lrn { .. } => {
            if x.len() < 2 {
                return Err(fail(format_args!("needs [N, C, ...]")));
            }
            (x.clone(), None)
        }
        Kernel::GlobalPool { .. } => {
            if x.len() < 2 {
                return Err(fail(format_args!("needs [N, C, ...]")));
            }
            let mut s = x.clone();
            s[2..].iter_mut().for_each(|d| *d = 1);
            (s, None)
        }
    };
    let out = &values[step.output];
    checked_count(&shape, format_args!("{} output '{}'", NodeLabel(step), out.name))?;
    Ok((shape, broadcast))
}

/// The model's declaration of a step's output agrees with the computed shape.
/// A computed shape must have the declared rank. Its sizes may differ from the declared
/// ones: ONNX shape inference and ORT's kernels part in places (a ceil-mode pool window
/// that starts in the end padding is kept by the former, dropped by ORT's kernel and
/// Rivet), and ORT then runs with the kernel's shape, warning; so does Rivet.
pub fn check_declared(values: &[PlanValue], step: &Step, shape: &[usize]) -> Result<()> {
    let out = &values[step.output];
    if out.declared.as_ref().is_some_and(|d| d.len() != shape.len()) {
        return Err(Error::invalid(format_args!(
            "{} output '{}': computed shape {} but the model declares {}",
            NodeLabel(step),
            out.name,
            ShapeText(shape),
            DeclaredText(out.declared.as_ref().expect("a mismatch needs a declaration"))
        )));
    }
    Ok(())
}

mod from_data;
mod geometry;
mod movement;
pub use from_data::*;
pub use geometry::*;
pub use movement::*;
