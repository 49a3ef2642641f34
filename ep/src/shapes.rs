//! Shape inference for plan steps, shared by Compile (static shapes, computed once) and
//! Run (symbolic shapes), and the shape texts error messages use.

use std::fmt;

use rivet_kernels::Broadcast;

use crate::error::{Error, Result};
use crate::graph::{DeclaredShape, Dim, Shape};
use crate::plan::{NodeLabel, PlanValue, Step};
use crate::registry::Kernel;

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

/// A step's output shape (and broadcast plan, for binary steps) from its input shapes,
/// checked against the output's declaration.
pub fn infer(values: &[PlanValue], step: &Step, shapes: &[Shape]) -> Result<(Shape, Option<Broadcast>)> {
    let x = &shapes[step.inputs[0]];
    for (pos, &id) in step.inputs.iter().enumerate() {
        checked_count(&shapes[id], format_args!("{} input {pos} '{}'", NodeLabel(step), values[id].name))?;
    }
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
        Kernel::Unary(_) | Kernel::Identity => (x.clone(), None),
    };
    let out = &values[step.output];
    checked_count(&shape, format_args!("{} output '{}'", NodeLabel(step), out.name))?;
    if !matches_declared(&shape, &out.declared) {
        return Err(Error::invalid(format_args!(
            "{} output '{}': computed shape {} but the model declares {}",
            NodeLabel(step),
            out.name,
            ShapeText(&shape),
            DeclaredText(out.declared.as_ref().expect("a mismatch needs a declaration"))
        )));
    }
    Ok((shape, broadcast))
}
