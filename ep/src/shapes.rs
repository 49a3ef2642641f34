//! Shape inference for plan steps, shared by Compile (static shapes, computed once) and
//! Run (symbolic shapes), and the shape texts error messages use.

use std::fmt;

use rivet_kernels::Broadcast;

use crate::data::Data;
use crate::error::{Error, Result};
use crate::graph::{DeclaredShape, Dim, Shape};
use crate::plan::{NodeLabel, PlanValue, Step};
use crate::registry::{AttentionSpec, AutoPad, Axes, ConvTransposeSpec, Kernel, ReduceAxes, ReshapeRule, Window};
use rivet_kernels::attention::{AttnDims, AttnOut};
use rivet_kernels::conv::Window3d;
use smallvec::SmallVec;

pub struct ShapeText<'a>(pub &'a [usize]);
impl fmt::Display for ShapeText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

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
            | Kernel::Not
            | Kernel::IsNaN
            | Kernel::IsInf { .. }
            | Kernel::BitNot
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

/// `infer` without the check against the output's declaration.
pub fn infer_shape(
    values: &[PlanValue],
    step: &Step,
    shapes: &[Shape],
    params: &[&[i64]],
) -> Result<(Shape, Option<Broadcast>)> {
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
        Kernel::Range | Kernel::NonZero | Kernel::OneHot { depth: None, .. } => {
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
        Kernel::SplitPart { axis, part, parts, sizes, exact, sizes_at_run } => {
            let sizes = if sizes_at_run {
                Some(Axes::new(params.first().copied().unwrap_or(&[])).map_err(|e| fail(format_args!("{e}")))?)
            } else {
                sizes
            };
            let a = normalize_axis(axis, x.len(), false).map_err(|e| fail(format_args!("{e}")))?;
            if x.is_empty() {
                return Err(fail(format_args!("Split needs rank 1 or more")));
            }
            let (_, size) =
                split_part(x[a], parts as usize, part as usize, sizes, exact).map_err(|e| fail(format_args!("{e}")))?;
            let mut s = x.clone();
            s[a] = size;
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
        Kernel::Arith(_)
        | Kernel::Compare(_)
        | Kernel::Logic(_)
        | Kernel::Where
        | Kernel::Bits(_)
        | Kernel::PowTyped => {
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
        Kernel::Expand { shape } => {
            let dims = int_list(&shape, params).map_err(|e| fail(format_args!("{e}")))?;
            if dims.iter().any(|&d| d < 0) {
                return Err(fail(format_args!("Expand to {dims:?}")));
            }
            let target: SmallVec<[usize; 8]> = dims.iter().map(|&d| d as usize).collect();
            let b = Broadcast::new(x, &target).map_err(|e| fail(format_args!("{e}")))?;
            (Shape::from_slice(b.out_shape()), None)
        }
        Kernel::Slice { has_axes, has_steps } => {
            let plan = slice_plan(x, params, has_axes, has_steps).map_err(|e| fail(format_args!("{e}")))?;
            (plan.iter().map(|&(_, _, n)| n).collect(), None)
        }
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
        Kernel::Reduce { axes, keepdims, noop_empty, .. } => {
            let mask = reduced_axes(x.len(), axes, noop_empty, params).map_err(|e| fail(format_args!("{e}")))?;
            let shape = (0..x.len())
                .filter_map(|a| {
                    if !mask[a] {
                        Some(x[a])
                    } else if keepdims {
                        Some(1)
                    } else {
                        None
                    }
                })
                .collect();
            (shape, None)
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
        Kernel::Concat { axis } => {
            let parts: SmallVec<[&Shape; 4]> = step.inputs.iter().map(|&id| &shapes[id]).collect();
            (concatenated(&parts, axis).map_err(|e| fail(format_args!("{e}")))?, None)
        }
        Kernel::MatMul => (matmul_shape(x, &shapes[step.inputs[1]]).map_err(|e| fail(format_args!("{e}")))?, None),
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
        Kernel::Pad(spec) => {
            let rank = x.len();
            if spec.value_at_run && shapes[step.inputs[1]].iter().product::<usize>() != 1 {
                return Err(fail(format_args!("constant_value must hold one value")));
            }
            let resolved = spec.resolve(rank, params).map_err(|e| fail(format_args!("{e}")))?;
            let pads = &resolved[..2 * rank];
            if spec.mode == rivet_kernels::nn::PadMode::Reflect
                && (0..rank).any(|a| (pads[a] > 0 || pads[a + rank] > 0) && (pads[a] >= x[a] || pads[a + rank] >= x[a]))
            {
                return Err(fail(format_args!("reflect pads {pads:?} must be smaller than the axes")));
            }
            if matches!(spec.mode, rivet_kernels::nn::PadMode::Edge)
                && (0..rank).any(|a| x[a] == 0 && pads[a] + pads[a + rank] > 0)
            {
                return Err(fail(format_args!("edge padding of an empty axis")));
            }
            ((0..rank).map(|a| x[a] + pads[a] + pads[a + rank]).collect(), None)
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

/// The sizes of an Attention step from its present inputs' shapes (Q, K, V, then the
/// mask, the cache and `nonpad_kv_seqlen` when the node has them), checked.
pub fn attention_dims(a: &AttentionSpec, ins: &[&[usize]]) -> std::result::Result<AttnDims, String> {
    let (q, k, v) = (ins[0], ins[1], ins[2]);
    if q.len() != k.len() || q.len() != v.len() || !(q.len() == 3 || q.len() == 4) {
        return Err(format!("Q, K and V must all be 3-D or 4-D, got ranks {}, {}, {}", q.len(), k.len(), v.len()));
    }
    let q_3d = q.len() == 3;
    let split = |s: &[usize], heads: usize, what: &str| -> std::result::Result<(usize, usize, usize), String> {
        if q_3d {
            if heads == 0 || !s[2].is_multiple_of(heads) {
                return Err(format!("{what}'s hidden size {} does not split into {heads} heads", s[2]));
            }
            Ok((heads, s[1], s[2] / heads))
        } else {
            Ok((s[1], s[2], s[3]))
        }
    };
    let (q_heads, q_len, head) = split(q, a.q_heads, "Q")?;
    let (kv_heads, kv_len, k_head) = split(k, a.kv_heads, "K")?;
    let (v_heads, v_len, v_head) = split(v, a.kv_heads, "V")?;
    if k[0] != q[0] || v[0] != q[0] || k_head != head || v_heads != kv_heads || v_len != kv_len {
        return Err(format!("Q {q:?}, K {k:?} and V {v:?} do not agree"));
    }
    if kv_heads == 0 || !q_heads.is_multiple_of(kv_heads) {
        return Err(format!("{q_heads} query heads are not a multiple of {kv_heads} key/value heads"));
    }
    let mut at = 3;
    let mask = if a.mask {
        at += 1;
        Some(ins[at - 1])
    } else {
        None
    };
    let mut past_len = 0;
    if a.past {
        let (pk, pv) = (ins[at], ins[at + 1]);
        at += 2;
        let ok = pk.len() == 4 && pv.len() == 4 && pk[..2] == [q[0], kv_heads] && pv[..3] == pk[..3];
        if !ok || pk[3] != head || pv[3] != v_head {
            return Err(format!("past key {pk:?} and value {pv:?} do not match K and V"));
        }
        past_len = pk[2];
    }
    let d = AttnDims { batch: q[0], q_heads, kv_heads, q_len, kv_len, past_len, head, v_head, q_3d, kv_3d: q_3d };
    if let Some(m) = mask {
        let full = [d.batch, q_heads, q_len, d.total()];
        let lead = 4usize.checked_sub(m.len()).ok_or("the mask has more than 4 dims")?;
        for (i, &dim) in m.iter().enumerate() {
            let want = full[lead + i];
            let last = lead + i == 3;
            if !(dim == 1 || dim == want || (last && dim < want)) {
                return Err(format!("mask {m:?} does not broadcast to {full:?}"));
            }
        }
    }
    if a.nonpad && ins[at] != [d.batch] {
        return Err(format!("nonpad_kv_seqlen {:?} is not [batch]", ins[at]));
    }
    Ok(d)
}

/// RotaryEmbedding's sizes: batch, sequence, heads, head size, rotated size; checked.
pub fn rotary_dims(kernel: &Kernel, ins: &[&[usize]]) -> std::result::Result<[usize; 5], String> {
    let Kernel::Rotary { heads, rotary_dim, positions, .. } = *kernel else { unreachable!("a Rotary step") };
    let x = ins[0];
    let (b, s, h, d) = match x.len() {
        4 => (x[0], x[2], x[1], x[3]),
        3 if heads > 0 && x[2].is_multiple_of(heads) => (x[0], x[1], heads, x[2] / heads),
        _ => return Err(format!("input {x:?} must be [B, H, S, D], or [B, S, H * D] with num_heads")),
    };
    let rot = if rotary_dim == 0 { d } else { rotary_dim };
    if rot > d || !rot.is_multiple_of(2) {
        return Err(format!("rotary_embedding_dim {rot} for a head of {d}"));
    }
    let (cos, sin) = (ins[1], ins[2]);
    let cache_ok = if positions {
        let p = ins[3];
        p == [b, s] && cos.len() == 2 && cos[1] == rot / 2
    } else {
        cos == [b, s, rot / 2]
    };
    if !cache_ok || cos != sin {
        return Err(format!("cos {cos:?} / sin {sin:?} caches do not match the input"));
    }
    Ok([b, s, h, d, rot])
}

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
            let depth = crate::exec_typed::number_at(ins[1], 0).trunc();
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
fn one_hot_shape(step: &Step, axis: i64, depth: i64, x: &[usize], shapes: &[Shape]) -> Result<Shape> {
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

/// ConvTranspose's sizes, per (depth, height, width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTransposeGeometry {
    pub input: [usize; 3],
    pub kernel: [usize; 3],
    pub out: [usize; 3],
    /// Negative: the output starts before the first input's footprint.
    pub pad_begin: [i64; 3],
    pub out_channels: usize,
}

/// Output size and padding of a ConvTranspose of `x` ([N, C, ...] with 1 to 3 spatial
/// axes) by weights `w` ([C, M / group, ...]), per the ONNX rules for output_shape and
/// auto_pad.
pub fn conv_transpose_geometry(
    spec: &ConvTransposeSpec,
    x: &[usize],
    w: &[usize],
) -> std::result::Result<ConvTransposeGeometry, String> {
    if w.len() != x.len() || !(3..=5).contains(&x.len()) || w[0] != x[1] || !x[1].is_multiple_of(spec.group) {
        return Err(format!("weights {w:?} do not match the input and group {}", spec.group));
    }
    let (input, kernel) = (spatial(x), spatial(w));
    let mut out = [0usize; 3];
    let mut pad_begin = [0i64; 3];
    for a in 0..3 {
        let span = (kernel[a] - 1) * spec.dilations[a] + 1;
        let full = spec.strides[a] * (input[a].max(1) - 1) + spec.output_padding[a] + span;
        let want = if spec.output_shape[a] > 0 {
            Some(spec.output_shape[a])
        } else if matches!(spec.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) {
            Some(input[a] * spec.strides[a])
        } else {
            None
        };
        match want {
            Some(o) => {
                // May be negative (an output_shape larger than the full result): floor
                // division, as the ONNX definition's.
                let total = full as i64 - o as i64;
                let half = total.div_euclid(2);
                // SAME_UPPER puts the larger half at the end; otherwise at the begin.
                pad_begin[a] = if spec.auto_pad == AutoPad::SameUpper { half } else { total - half };
                out[a] = o;
            }
            None => {
                let (b, e) = if spec.auto_pad == AutoPad::Valid { (0, 0) } else { (spec.pads[a], spec.pads[a + 3]) };
                out[a] = full.checked_sub(b + e).ok_or("pads larger than the output")?;
                pad_begin[a] = b as i64;
            }
        }
    }
    Ok(ConvTransposeGeometry { input, kernel, out, pad_begin, out_channels: w[1] * spec.group })
}

/// A window op's (depth, height, width): inputs with fewer spatial axes have leading
/// axes of size 1.
pub fn spatial(s: &[usize]) -> [usize; 3] {
    let n = s.len().saturating_sub(2).min(3);
    std::array::from_fn(|a| if a + n >= 3 { s[2 + a + n - 3] } else { 1 })
}

/// A window op's output shape, of the input's rank.
fn windowed(x: &[usize], channels: usize, out: [usize; 3]) -> Shape {
    let n = x.len().saturating_sub(2).min(3);
    [x[0], channels].into_iter().chain(out[3 - n..].iter().copied()).collect()
}

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
    sizes: Option<crate::registry::Axes>,
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

/// An axis in `-rank..rank` (`-rank..=rank` when `inclusive`, as Flatten's) as an index.
/// A scalar accepts axis 0 and -1.
pub fn normalize_axis(axis: i64, rank: usize, inclusive: bool) -> std::result::Result<usize, String> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    let ok = if inclusive { (0..=r).contains(&a) } else { (0..r).contains(&a) };
    if ok {
        Ok(a as usize)
    } else if rank == 0 && !inclusive && (axis == 0 || axis == -1) {
        Ok(0)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}

fn transposed(x: &[usize], perm: &[i64]) -> std::result::Result<Shape, String> {
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

fn reshaped(x: &[usize], rule: ReshapeRule) -> std::result::Result<Shape, String> {
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

fn concatenated(parts: &[&Shape], axis: i64) -> std::result::Result<Shape, String> {
    let first = parts[0];
    let a = normalize_axis(axis, first.len(), false)?;
    let mut out = first.clone();
    for p in &parts[1..] {
        if p.len() != first.len() || p.iter().enumerate().any(|(i, &d)| i != a && d != first[i]) {
            return Err(format!("input of shape {} does not match {} off axis {a}", ShapeText(p), ShapeText(first)));
        }
        out[a] += p[a];
    }
    Ok(out)
}

/// numpy matmul: 1-D operands are promoted and the added axis removed again; batch axes
/// broadcast.
fn matmul_shape(a: &[usize], b: &[usize]) -> std::result::Result<Shape, String> {
    if a.is_empty() || b.is_empty() {
        return Err("MatMul needs operands of rank 1 or more".into());
    }
    let (m, k) = if a.len() == 1 { (1, a[0]) } else { (a[a.len() - 2], a[a.len() - 1]) };
    let (k2, n) = if b.len() == 1 { (b[0], 1) } else { (b[b.len() - 2], b[b.len() - 1]) };
    if k != k2 {
        return Err(format!("inner dimensions {k} and {k2} differ (against {})", ShapeText(b)));
    }
    let batch_a = &a[..a.len().saturating_sub(2)];
    let batch_b = &b[..b.len().saturating_sub(2)];
    let batch = Broadcast::new(batch_a, batch_b).map_err(|e| e.to_string())?;
    let mut out = Shape::from_slice(batch.out_shape());
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(out)
}

fn gemm_shape(a: &[usize], b: &[usize], c: Option<&Shape>, ta: bool, tb: bool) -> std::result::Result<Shape, String> {
    if a.len() != 2 || b.len() != 2 {
        return Err(format!("Gemm needs 2-D A and B, got B {}", ShapeText(b)));
    }
    let (m, k) = if ta { (a[1], a[0]) } else { (a[0], a[1]) };
    let (k2, n) = if tb { (b[1], b[0]) } else { (b[0], b[1]) };
    if k != k2 {
        return Err(format!("inner dimensions {k} and {k2} differ"));
    }
    if let Some(c) = c {
        let b = Broadcast::new(c, &[m, n]).map_err(|e| format!("C: {e}"))?;
        if b.out_shape() != [m, n] {
            return Err(format!("C of shape {} does not broadcast to [{m}, {n}]", ShapeText(c)));
        }
    }
    Ok(Shape::from_slice(&[m, n]))
}

/// The geometry of a window op on an `input` plane (depth, height, width) with kernel
/// `k`, and the padding after each axis.
pub fn window_3d(w: &Window, input: [usize; 3], k: [usize; 3]) -> std::result::Result<(Window3d, [usize; 3]), String> {
    let mut out = [0usize; 3];
    let mut begin = [0usize; 3];
    let mut end = [0usize; 3];
    for a in 0..3 {
        let (n, s, d) = (input[a], w.strides[a], w.dilations[a]);
        let span = d * (k[a].max(1) - 1) + 1;
        match w.auto_pad {
            AutoPad::NotSet | AutoPad::Valid => {
                let (pb, pe) = if w.auto_pad == AutoPad::Valid { (0, 0) } else { (w.pads[a], w.pads[a + 3]) };
                let padded = n + pb + pe;
                if padded < span {
                    return Err(format!("window {span} is larger than the padded input {padded}"));
                }
                let mut o = if w.ceil_mode { (padded - span).div_ceil(s) + 1 } else { (padded - span) / s + 1 };
                // A last window that would start in the end padding is dropped.
                if w.ceil_mode && (o - 1) * s >= n + pb {
                    o -= 1;
                }
                (out[a], begin[a], end[a]) = (o, pb, pe);
            }
            AutoPad::SameUpper | AutoPad::SameLower => {
                let o = n.div_ceil(s);
                let total = ((o.max(1) - 1) * s + span).saturating_sub(n);
                let small = total / 2;
                let (pb, pe) =
                    if w.auto_pad == AutoPad::SameUpper { (small, total - small) } else { (total - small, small) };
                (out[a], begin[a], end[a]) = (o, pb, pe);
            }
        }
    }
    let g = Window3d { input, out, kernel: k, stride: w.strides, dilation: w.dilations, pad_begin: begin };
    Ok((g, end))
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
