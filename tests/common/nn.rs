//! Helpers of the network-op end-to-end tests (e2e_nn.rs, e2e_conv.rs): inputs, dims and
//! one-node cases.

use rivet::harness::HostTensor;
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT};

pub const TOL: (f64, f64) = (2e-5, 2e-6);

pub fn x(name: &str, shape: &[i64], seed: u64) -> HostTensor {
    let n: i64 = shape.iter().product();
    let data = rivet::harness::values(seed, n as usize, -3.0, 3.0).into_iter().map(|v| v as f32).collect();
    HostTensor::f32(name, shape, data)
}

pub fn dims(shape: &[i64], symbolic: bool) -> Vec<Dim> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if symbolic && i == 0 { Dim::Sym("N".into()) } else { Dim::Fixed(d) })
        .collect()
}

pub struct Case {
    pub name: String,
    pub model: Vec<u8>,
    pub inputs: Vec<HostTensor>,
}

pub fn one_input(name: &str, opset: i64, op: &str, attrs: &[(&str, Attr)], shape: &[i64], symbolic: bool) -> Case {
    let model = ModelBuilder::new(opset)
        .input("x", FLOAT, &dims(shape, symbolic))
        .node_with(op, "n", &["x"], &["y"], attrs)
        .output("y", FLOAT, None)
        .build();
    Case { name: format!("{name} {shape:?} symbolic={symbolic}"), model, inputs: vec![x("x", shape, 1)] }
}
