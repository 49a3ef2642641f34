//! Helpers of the quantization tests: typed integer tensors and one-node models.

use super::{assert_matches_ort, env};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT, FLOAT16, INT16, INT32, INT8, UINT16, UINT8};

pub fn elem(code: i32) -> E {
    match code {
        FLOAT => E::Float32,
        INT8 => E::Int8,
        UINT8 => E::Uint8,
        INT16 => E::Int16,
        UINT16 => E::Uint16,
        INT32 => E::Int32,
        _ => unreachable!(),
    }
}

pub fn range(code: i32) -> (f64, f64) {
    match code {
        INT8 => (-128.0, 127.0),
        UINT8 => (0.0, 255.0),
        INT16 => (-32768.0, 32767.0),
        UINT16 => (0.0, 65535.0),
        INT32 => (-1e6, 1e6),
        _ => unreachable!(),
    }
}

/// `n` seeded integers of type `code` over its whole range.
pub fn ints(code: i32, seed: u64, n: usize) -> Vec<f64> {
    let (lo, hi) = range(code);
    harness::values(seed, n, lo, hi + 1.0).into_iter().map(f64::floor).collect()
}

pub fn len(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

pub fn tensor(name: &str, code: i32, shape: &[i64], data: Vec<f64>) -> HostTensor {
    HostTensor::typed(name, elem(code), shape, data)
}

pub fn dims(shape: &[i64]) -> Vec<Dim> {
    shape.iter().map(|&d| d.into()).collect()
}

/// Floats for quantizing with `scale`: many exact ties (`(k + 0.5) · scale`), values far
/// outside every type's range, and plain ones.
pub fn to_quantize(n: usize, scale: f64, seed: u64) -> Vec<f64> {
    harness::values(seed, n, -1.0, 1.0)
        .into_iter()
        .enumerate()
        .map(|(i, v)| match i % 4 {
            0 => ((v * 300.0).floor() + 0.5) * scale,
            1 => v * 70000.0 * scale,
            _ => v * 200.0 * scale,
        })
        .map(|v| v as f32 as f64)
        .collect()
}

/// A model of one node `op` (named "q") of opset `opset`.
pub struct One {
    pub b: ModelBuilder,
    pub inputs: Vec<String>,
}

impl One {
    pub fn new(opset: i64) -> Self {
        One { b: ModelBuilder::new(opset), inputs: Vec::new() }
    }
    pub fn input(mut self, name: &str, code: i32, dims: &[Dim]) -> Self {
        self.b = self.b.input(name, code, dims);
        self.inputs.push(name.into());
        self
    }
    /// A constant input (a Constant node, which ORT folds into an initializer).
    pub fn constant(mut self, name: &str, code: i32, shape: &[i64], data: &[f64]) -> Self {
        self.b = constant_node(self.b, name, code, shape, data);
        self.inputs.push(name.into());
        self
    }
    /// No input at this position.
    #[allow(dead_code)]
    pub fn skip(mut self) -> Self {
        self.inputs.push(String::new());
        self
    }
    /// [`One::node`] in the com.microsoft domain.
    pub fn node_ms(mut self, op: &str, attrs: &[(&str, Attr)], outputs: &[(&str, i32)]) -> Vec<u8> {
        let ins: Vec<&str> = self.inputs.iter().map(String::as_str).collect();
        let outs: Vec<&str> = outputs.iter().map(|(n, _)| *n).collect();
        self.b = self.b.node_in_domain_with("com.microsoft", op, "q", &ins, &outs, attrs);
        for &(name, code) in outputs {
            self.b = self.b.output(name, code, None);
        }
        self.b.build()
    }

    pub fn node(self, op: &str, attrs: &[(&str, Attr)], outputs: &[(&str, i32)]) -> Vec<u8> {
        let ins: Vec<&str> = self.inputs.iter().map(String::as_str).collect();
        let outs: Vec<&str> = outputs.iter().map(|(n, _)| *n).collect();
        let mut b = self.b.node_with(op, "q", &ins, &outs, attrs);
        for &(name, code) in outputs {
            b = b.output(name, code, None);
        }
        b.build()
    }
}

/// `b` with a Constant node `const_{name}` giving `name` the tensor of type `code`,
/// `shape` and values `data`.
pub fn constant_node(b: ModelBuilder, name: &str, code: i32, shape: &[i64], data: &[f64]) -> ModelBuilder {
    let bytes: Vec<u8> = data
        .iter()
        .flat_map(|&v| match code {
            FLOAT => (v as f32).to_le_bytes().to_vec(),
            FLOAT16 => f16_bits(v as f32).to_le_bytes().to_vec(),
            UINT8 => vec![v as u8],
            INT8 => vec![v as i8 as u8],
            UINT16 => (v as u16).to_le_bytes().to_vec(),
            INT16 => (v as i16).to_le_bytes().to_vec(),
            INT32 => (v as i32).to_le_bytes().to_vec(),
            _ => unreachable!(),
        })
        .collect();
    let value = Attr::Tensor(code, shape.to_vec(), bytes);
    b.node_with("Constant", &format!("const_{name}"), &[], &[name], &[("value", value)])
}

/// Compares with ORT where ORT's CPU EP has a kernel for the model (it lacks some type
/// pairs); returns whether it had one.
pub fn matches_ort_if_it_runs(model: &[u8], inputs: &[HostTensor], what: &str) -> bool {
    let opts = SessionOpts { record_assignment: true, ..Default::default() };
    match harness::session(env(), model, Arm::OrtCpu, &opts) {
        Err(e) if e.contains("Could not find an implementation") => {
            eprintln!("{what}: ORT's CPU EP has no kernel");
            return false;
        }
        Err(e) => panic!("{what}: ORT session: {e}"),
        Ok(_) => {}
    }
    assert_matches_ort(model, inputs, 0.0, 0.0, what);
    true
}

/// float32 to float16 bits, round to nearest even (normal values only: the scales here).
pub fn f16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32 - 127 + 15;
    assert!((1..31).contains(&exp), "{x} is not a normal float16");
    let man = b & 0x7f_ffff;
    let (mut h, rest) = (((exp as u32) << 10) | (man >> 13), man & 0x1fff);
    if rest > 0x1000 || (rest == 0x1000 && h & 1 == 1) {
        h += 1;
    }
    sign | h as u16
}
