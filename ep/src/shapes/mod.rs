//! Shape inference for plan steps, shared by Compile (static shapes, computed once) and
//! Run (symbolic shapes), and the shape texts error messages use.

use std::fmt;

use rivet_kernels::Broadcast;

use crate::data::Data;
use crate::error::{Error, Result};
use crate::graph::{DeclaredShape, Dim, Shape};
use crate::plan::{NodeLabel, PlanValue, Step};
use crate::registry::Kernel;
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
        Ok(s) => {
            checked_count(&s, format_args!("{} output '{}'", NodeLabel(step), values[step.output].name))?;
            Ok(Some(s))
        }
        Err(crate::ops::ShapeError::NeedsData) => Ok(None),
        Err(crate::ops::ShapeError::Invalid(why)) => {
            let list: Vec<String> =
                step.inputs.iter().map(|&id| format!("'{}' {}", values[id].name, ShapeText(&shapes[id]))).collect();
            Err(Error::invalid(format_args!("{}: {why} (inputs {})", NodeLabel(step), list.join(", "))))
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
        Kernel::Ones => (x.clone(), None),
        Kernel::ClipInputs { .. } => {
            if let Some(&b) = step.inputs[1..].iter().find(|&&b| shapes[b].iter().product::<usize>() != 1) {
                return Err(fail(format_args!("bound '{}' is not a scalar", values[b].name)));
            }
            (x.clone(), None)
        }
        Kernel::Op => return Err(Error::ep(format_args!("{}: its shape comes from its data", NodeLabel(step)))),
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
        Kernel::Variadic { .. } | Kernel::Dropout { .. } => unreachable!("lowered by the plan"),
        Kernel::Transpose(perm) => (transposed(x, perm.as_slice()).map_err(|e| fail(format_args!("{e}")))?, None),
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
        Kernel::Conv { window, group, .. } => {
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

mod geometry;
mod movement;
pub use geometry::*;
pub use movement::*;
