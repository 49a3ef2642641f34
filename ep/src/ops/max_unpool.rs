//! MaxUnpool (opsets 9 to 22, float32): each value of X written at its index (flat over
//! the whole output, as MaxPool's Indices give it) in a zero output, whose shape is
//! `output_shape` when given, else the pooled input's.

use std::sync::Arc;

use super::op::util::{check_attrs, check_inputs, input, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::DataMut;
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::ints_attr;

#[derive(Debug)]
struct MaxUnpool {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    /// Begin pads then end pads.
    pads: Vec<usize>,
    output_shape: bool,
}

pub fn max_unpool(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["kernel_shape", "pads", "strides"])?;
    check_inputs(node, 2, 3)?;
    let shape_in = input(node, 2).is_some();
    if input_type(node, 0) != dtype::FLOAT
        || output_type(node, 0) != dtype::FLOAT
        || input_type(node, 1) != dtype::INT64
        || (shape_in && input_type(node, 2) != dtype::INT64)
    {
        return Err(super::op::util::bad_types(node, "float32 with int64 indices and output_shape"));
    }
    if let Some(v) = input(node, 2) {
        if v.constant.is_none() && !v.at_run_ok {
            return Err(format!("MaxUnpool output_shape '{}' is not known at Run", v.name));
        }
    }
    let kernel = ints_attr(node, "kernel_shape")?.ok_or("MaxUnpool needs kernel_shape")?;
    let n = kernel.len();
    let strides = ints_attr(node, "strides")?.unwrap_or_else(|| vec![1; n]);
    let pads = ints_attr(node, "pads")?.unwrap_or_else(|| vec![0; 2 * n]);
    let positive = |v: &[i64]| v.iter().all(|&x| (1..=1 << 20).contains(&x));
    if n == 0 || strides.len() != n || pads.len() != 2 * n || !positive(&kernel) || !positive(&strides) {
        return Err(format!("MaxUnpool kernel_shape {kernel:?}, strides {strides:?} or pads {pads:?} are not valid"));
    }
    if pads.iter().any(|&p| !(0..=1 << 20).contains(&p)) {
        return Err(format!("MaxUnpool pads {pads:?} are not valid"));
    }
    let us = |v: Vec<i64>| v.into_iter().map(|x| x as usize).collect();
    Ok(Arc::new(MaxUnpool { kernel: us(kernel), strides: us(strides), pads: us(pads), output_shape: shape_in }))
}

impl Op for MaxUnpool {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (s, n) = (x.shapes[0], self.kernel.len());
        if s.len() != n + 2 {
            return Err(format!("X must have rank {} for a {n}-D kernel, got {}", n + 2, s.len()).into());
        }
        if x.shapes[1] != s {
            return Err(format!("the indices' shape {:?} is not X's {s:?}", x.shapes[1]).into());
        }
        if self.output_shape {
            let d = x.data(2)?;
            let v = d.i64().ok_or("output_shape is not int64")?;
            if v.len() != s.len()
                || v[..2] != [s[0] as i64, s[1] as i64]
                || v.iter().any(|&d| !(0..=1 << 40).contains(&d))
            {
                return Err(format!("output_shape {v:?} is not valid for X {s:?}").into());
            }
            return Ok(v.iter().map(|&d| d as usize).collect());
        }
        let mut out = Shape::from_slice(&s[..2]);
        for a in 0..n {
            let full = s[a + 2].saturating_sub(1) * self.strides[a] + self.kernel[a];
            let pads = self.pads[a] + self.pads[a + n];
            if s[a + 2] == 0 || full < pads {
                return Err(format!("axis {} of X ({}) gives no output with these pads", a + 2, s[a + 2]).into());
            }
            out.push(full - pads);
        }
        Ok(out)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (v, idx) = (x.ins[0].f32().ok_or("X is not float32")?, x.ins[1].i64().ok_or("the indices are not int64")?);
        let y = out.f32().ok_or("the output is not float32")?;
        if v.len() != idx.len() {
            return Err("X and the indices differ in length".into());
        }
        y.fill(0.0);
        let len = y.len();
        for (&value, &i) in v.iter().zip(idx) {
            let at = usize::try_from(i)
                .ok()
                .filter(|&i| i < len)
                .ok_or_else(|| format!("index {i} is outside the output's {len} elements"))?;
            y[at] = value;
        }
        Ok(())
    }
}
