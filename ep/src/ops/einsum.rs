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
    if ranks.iter().all(|&r| r != usize::MAX) {
        einsum::parse(eq, &ranks)?;
    }
    let t = output_type(node, 0);
    if !(data::is_number(computed(t)) && (0..n).all(|k| input_type(node, k) == t)) {
        return Err(bad_types(node, "other element types"));
    }
    Ok(Arc::new(Einsum { equation: eq.to_string(), half: is_half(t) }))
}

impl Einsum {
    fn parse(&self, shapes: &[&[usize]]) -> Result<einsum::Equation, String> {
        let ranks: SmallVec<[usize; 4]> = shapes.iter().map(|s| s.len()).collect();
        einsum::parse(&self.equation, &ranks)
    }
}

impl Op for Einsum {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let eq = self.parse(x.shapes)?;
        Ok(einsum::output_shape(&eq, x.shapes)?)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let eq = self.parse(x.shapes)?;
        if self.half {
            let (ins, y) = widen_all(x.ins, &mut x.scratch.f32, out.len());
            typed::<f32>(&eq, &ins, x.shapes, &mut DataMut::F32(&mut *y))?;
            return narrow(y, out);
        }
        by_number!(x.ins[0], Err("element types differ from the plan's".into()), typed(&eq, x.ins, x.shapes, out))
    }
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
