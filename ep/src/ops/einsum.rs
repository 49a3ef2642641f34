//! Einsum: sums of products over labelled axes (`rivet_kernels::einsum`), numbers, and the
//! halves in float32.

use std::sync::Arc;

use smallvec::SmallVec;

use rivet_kernels::einsum;
use rivet_kernels::typed::Number;

use super::halves::{computed, is_half, narrow, widen_all};
use super::int_input::one_output;
use super::op::util::{bad_types, check_attrs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, by_number, Data, DataMut, Storage};
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::string_attr;

#[derive(Debug)]
struct Einsum {
    equation: String,
    /// float16 / bfloat16, computed in float32.
    half: bool,
    /// The equation parsed for the operands' ranks, when the model declares them (parsing
    /// allocates, so a Run does it only for ranks it did not know).
    parsed: Option<(SmallVec<[usize; 4]>, einsum::Equation)>,
}

pub fn einsum(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    let n = node.inputs.len();
    if n < 1 || node.inputs.iter().any(Option::is_none) {
        return Err(format!("Einsum has {n} inputs"));
    }
    one_output(node)?;
    check_attrs(node, &["equation"])?;
    let eq = string_attr(node, "equation", "")?;
    if eq.is_empty() || eq.len() > 64 || !eq.is_ascii() {
        return Err(format!("Einsum equation '{eq}' (Rivet takes up to 64 ASCII characters)"));
    }
    let ranks: Vec<usize> =
        node.inputs.iter().flatten().map(|v| v.dims.as_ref().map_or(usize::MAX, |d| d.len())).collect();
    let parsed = match ranks.iter().all(|&r| r != usize::MAX) {
        true => Some((ranks.iter().copied().collect(), einsum::parse(eq, &ranks)?)),
        false => None,
    };
    let t = output_type(node, 0);
    if !(data::is_number(computed(t)) && (0..n).all(|k| input_type(node, k) == t)) {
        return Err(bad_types(node, "other element types"));
    }
    Ok(Arc::new(Einsum { equation: eq.to_string(), half: is_half(t), parsed }))
}

impl Einsum {
    fn parse(&self, shapes: &[&[usize]]) -> Result<std::borrow::Cow<'_, einsum::Equation>, String> {
        let ranks: SmallVec<[usize; 4]> = shapes.iter().map(|s| s.len()).collect();
        match &self.parsed {
            Some((known, eq)) if *known == ranks => Ok(std::borrow::Cow::Borrowed(eq)),
            _ => Ok(std::borrow::Cow::Owned(einsum::parse(&self.equation, &ranks)?)),
        }
    }
}

impl Op for Einsum {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let eq = self.parse(x.shapes)?;
        Ok(einsum::output_shape(&eq, x.shapes)?)
    }

    /// A float32 (or half) contraction that is a batched matrix product runs on the GEMM,
    /// its operands put in order in the step's state (grown once); the rest in the loop.
    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let eq = self.parse(x.shapes)?;
        let product = einsum::product(&eq, x.shapes);
        if self.half {
            let (ins, y) = widen_all(x.ins, &mut x.scratch.f32, out.len());
            match &product {
                Some(p) => on_gemm(p, &ins, y, x.scratch.state.get_or_insert_with(|| Box::new(Scratch::default())))?,
                None => typed::<f32>(&eq, &ins, x.shapes, &mut DataMut::F32(&mut *y))?,
            }
            return narrow(y, out);
        }
        if let (Some(p), DataMut::F32(y)) = (&product, &mut *out) {
            return on_gemm(p, x.ins, y, x.scratch.state.get_or_insert_with(|| Box::new(Scratch::default())));
        }
        by_number!(x.ins[0], Err("element types differ from the plan's".into()), typed(&eq, x.ins, x.shapes, out))
    }
}

type Scratch = einsum::Scratch;

fn on_gemm(
    p: &einsum::Product,
    ins: &[Data<'_>],
    y: &mut [f32],
    state: &mut Box<dyn std::any::Any + Send + Sync>,
) -> Result<(), String> {
    let scratch = state.downcast_mut::<Scratch>().ok_or("an Einsum step's state is its own")?;
    let f = |k: usize| ins[k].f32().ok_or("element types differ from the plan's");
    einsum::contract(p, [f(0)?, f(1)?], y, scratch);
    Ok(())
}

fn typed<T: Storage + Number>(
    eq: &einsum::Equation,
    ins: &[Data<'_>],
    shapes: &[&[usize]],
    out: &mut DataMut<'_>,
) -> Result<(), String> {
    let mut xs: SmallVec<[&[T]; 4]> = SmallVec::new();
    for &d in ins {
        xs.push(T::get(d).ok_or("element types differ from the plan's")?);
    }
    let y = T::get_mut(out).ok_or("element types differ from the plan's")?;
    einsum::einsum(eq, &xs, shapes, y, T::default(), |a, b| a.add(b), |a, b| a.mul(b))
}
