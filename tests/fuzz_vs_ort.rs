//! Property test against ORT's CPU EP: random graphs of supported ops with random shapes
//! (zero-sized dims and broadcasting included), attributes and values (NaN, ±inf,
//! denormals). `RIVET_FUZZ_CASES` sets how many (CI: 1,000; `cargo xtask fuzz`: 10,000);
//! `RIVET_FUZZ_SEED` replays one case. Every failure found becomes a fixed seed in
//! `REGRESSIONS`.

mod common;

use rivet::harness::HostTensor;
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT};

/// Seeds that once failed, kept as regression cases.
/// - 1411: Pow(GeluTanh(-3), -3). f64 truth -20779239.5; Rivet -20779224 (7.5e-7);
///   ORT -20777006 (1.1e-4: its 0.5x(1 + tanh u) cancels in the tail, Rivet's
///   x sigmoid(2u) does not), and Pow multiplies the base's relative error by the
///   exponent. Graphs with Pow are now compared at rtol 1e-3.
/// - 4685 (not kept): Sqrt(Reciprocal(Min(-0 broadcast, [.., 0, ..]))). ORT's Min/Max
///   return the first or the second operand on a +0/-0 tie depending on the tensor's
///   length (2 elements: the second; 5: the first), so no kernel can match it on ties;
///   Rivet always returns the second. Inputs are drawn without -0 since then (unary
///   ops still meet -0 in e2e_ops' sweeps).
const REGRESSIONS: &[u64] = &[1411];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const UNARY: &[&str] = &[
    "Relu",
    "Sigmoid",
    "Tanh",
    "Erf",
    "Exp",
    "Log",
    "Sqrt",
    "Abs",
    "Neg",
    "Reciprocal",
    "Floor",
    "Ceil",
    "Softplus",
    "Softsign",
    "HardSigmoid",
    "HardSwish",
    "LeakyRelu",
    "Elu",
    "Selu",
    "ThresholdedRelu",
    "Mish",
    "Gelu",
    "Identity",
];
const BINARY: &[&str] = &["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min"];

fn attrs(op: &str, rng: &mut Rng) -> Vec<(&'static str, Attr)> {
    let f = |rng: &mut Rng, lo: f64, hi: f64| Attr::Float((lo + (hi - lo) * rng.unit()) as f32);
    match (op, rng.below(2)) {
        (_, 0) => vec![],
        ("LeakyRelu" | "Elu" | "ThresholdedRelu", _) => vec![("alpha", f(rng, 0.01, 2.0))],
        ("HardSigmoid", _) => vec![("alpha", f(rng, 0.05, 1.0)), ("beta", f(rng, 0.0, 1.0))],
        ("Selu", _) => vec![("alpha", f(rng, 0.5, 2.0)), ("gamma", f(rng, 0.5, 2.0))],
        ("Gelu", _) => vec![("approximate", Attr::Str("tanh".into()))],
        _ => vec![],
    }
}

fn value(rng: &mut Rng) -> f32 {
    match rng.below(20) {
        0 => f32::NAN,
        1 => f32::INFINITY,
        2 => f32::NEG_INFINITY,
        3 => 1e-40,
        4 | 5 => 0.0,
        _ => (rng.unit() * 8.0 - 4.0) as f32,
    }
}

/// A random model and its inputs; the description is for failure messages.
fn case(seed: u64) -> (Vec<u8>, Vec<HostTensor>, String, bool) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let rank = rng.below(4);
    let base: Vec<i64> = (0..rank).map(|_| *rng.pick(&[0, 1, 2, 3, 5])).collect();
    let symbolic = rng.below(2) == 0;
    let mut b = ModelBuilder::new(21);
    let mut inputs = Vec::new();
    // Each input: the base shape with some dims set to 1 and some leading dims dropped.
    let n_inputs = 1 + rng.below(3);
    let mut values: Vec<String> = Vec::new();
    for i in 0..n_inputs {
        let drop = rng.below(rank + 1);
        let shape: Vec<i64> = base[drop..].iter().map(|&d| if rng.below(3) == 0 { 1 } else { d }).collect();
        let dims: Vec<Dim> = shape
            .iter()
            .enumerate()
            .map(|(k, &d)| if symbolic && d != 1 { Dim::Sym(format!("d{i}_{k}")) } else { Dim::Fixed(d) })
            .collect();
        let name = format!("in{i}");
        b = b.input(&name, FLOAT, &dims);
        let n: i64 = shape.iter().product();
        inputs.push(HostTensor::f32(&name, &shape, (0..n).map(|_| value(&mut rng)).collect()));
        values.push(name);
    }
    let shown: Vec<String> = inputs
        .iter()
        .map(|t| if t.data.len() <= 8 { format!("{:?}={:?}", t.shape, t.data) } else { format!("{:?}", t.shape) })
        .collect();
    let mut desc = format!("seed {seed}: inputs {};", shown.join(", "));
    let mut has_pow = false;
    let n_nodes = 1 + rng.below(6);
    for k in 0..n_nodes {
        let out = format!("v{k}");
        if rng.below(3) == 0 {
            let op = *rng.pick(BINARY);
            has_pow |= op == "Pow";
            let (x, y) = (rng.pick(&values).clone(), rng.pick(&values).clone());
            b = b.node(op, &format!("n{k}"), &[&x, &y], &[&out]);
            desc.push_str(&format!(" {out}={op}({x},{y})"));
        } else {
            let op = *rng.pick(UNARY);
            let a = attrs(op, &mut rng);
            let x = rng.pick(&values).clone();
            desc.push_str(&format!(" {out}={op}{a:?}({x})"));
            b = b.node_with(op, &format!("n{k}"), &[&x], &[&out], &a);
        }
        values.push(out);
    }
    let last = values.last().unwrap().clone();
    b = b.output(&last, FLOAT, None);
    (b.build(), inputs, desc, has_pow)
}

#[test]
fn random_graphs_match_ort() {
    let seeds: Vec<u64> = match std::env::var("RIVET_FUZZ_SEED") {
        Ok(s) => vec![s.parse().expect("RIVET_FUZZ_SEED is a number")],
        Err(_) => {
            let n: u64 = std::env::var("RIVET_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
            REGRESSIONS.iter().copied().chain(1..=n).collect()
        }
    };
    let mut failures = Vec::new();
    for &seed in &seeds {
        let (model, inputs, desc, has_pow) = case(seed);
        let rtol = if has_pow { 1e-3 } else { 1e-4 };
        if let Err(e) = common::check_matches_ort(&model, &inputs, rtol, 1e-4, &desc) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), seeds.len(), failures.join("\n"));
}

/// A chain of layout and network ops with attributes valid for the running shape:
/// Softmax / LogSoftmax over a random axis, Transpose by a random permutation, reductions
/// over random axes (constant axes input), Flatten, Unsqueeze and a few elementwise ops.
fn layout_case(seed: u64) -> (Vec<u8>, Vec<HostTensor>, String) {
    let mut rng = Rng(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
    let rank = 1 + rng.below(4);
    let mut shape: Vec<i64> = (0..rank).map(|_| *rng.pick(&[1, 2, 3, 5])).collect();
    let symbolic = rng.below(2) == 0;
    let dims: Vec<Dim> = shape
        .iter()
        .enumerate()
        .map(|(k, &d)| if symbolic && k == 0 { Dim::Sym("N".into()) } else { Dim::Fixed(d) })
        .collect();
    let mut b = ModelBuilder::new(18).input("x", FLOAT, &dims);
    let n: i64 = shape.iter().product();
    // ORT's ReduceMax/Min answer for NaN input depends on its internal reduction path
    // (see the README), so they are drawn only while no NaN can be present: half the
    // cases have NaN-free input, and Sqrt or Softmax (inf - inf) can introduce one.
    let mut may_nan = rng.below(2) == 0;
    let data = (0..n)
        .map(|_| loop {
            let v = value(&mut rng);
            if may_nan || !v.is_nan() {
                break v;
            }
        })
        .collect();
    let input = HostTensor::f32("x", &shape, data);
    let mut desc = format!("layout seed {seed}: x {shape:?};");
    let mut last = "x".to_string();
    for k in 0..1 + rng.below(4) {
        let out = format!("v{k}");
        let r = shape.len() as i64;
        let name = format!("n{k}");
        match rng.below(7) {
            0 | 1 if r >= 1 => {
                let op = if rng.below(2) == 0 { "Softmax" } else { "LogSoftmax" };
                may_nan = true;
                let axis = rng.below(r as usize) as i64 - if rng.below(2) == 0 { r } else { 0 };
                b = b.node_with(op, &name, &[&last], &[&out], &[("axis", Attr::Int(axis))]);
                desc.push_str(&format!(" {out}={op}(axis {axis})"));
            }
            2 => {
                let mut perm: Vec<i64> = (0..r).collect();
                for i in (1..perm.len()).rev() {
                    perm.swap(i, rng.below(i + 1));
                }
                b = b.node_with("Transpose", &name, &[&last], &[&out], &[("perm", Attr::Ints(perm.clone()))]);
                shape = perm.iter().map(|&p| shape[p as usize]).collect();
                desc.push_str(&format!(" {out}=Transpose({perm:?})"));
            }
            3 if r >= 1 => {
                let mut op =
                    *rng.pick(&["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceSumSquare"]);
                if may_nan && matches!(op, "ReduceMax" | "ReduceMin") {
                    op = "ReduceSum";
                }
                let axis = rng.below(r as usize) as i64;
                let keep = rng.below(2) as i64;
                let axes_name = format!("axes{k}");
                b = b.initializer_i64(&axes_name, &[1], vec![axis]);
                b = b.node_with(op, &name, &[&last, &axes_name], &[&out], &[("keepdims", Attr::Int(keep))]);
                if keep == 1 {
                    shape[axis as usize] = 1;
                } else {
                    shape.remove(axis as usize);
                }
                desc.push_str(&format!(" {out}={op}(axis {axis}, keepdims {keep})"));
            }
            4 if r <= 6 => {
                let axis = rng.below(r as usize + 1) as i64;
                let axes_name = format!("axes{k}");
                b = b.initializer_i64(&axes_name, &[1], vec![axis]);
                b = b.node("Unsqueeze", &name, &[&last, &axes_name], &[&out]);
                shape.insert(axis as usize, 1);
                desc.push_str(&format!(" {out}=Unsqueeze({axis})"));
            }
            5 => {
                let axis = rng.below(r as usize + 1);
                b = b.node_with("Flatten", &name, &[&last], &[&out], &[("axis", Attr::Int(axis as i64))]);
                shape = vec![shape[..axis].iter().product(), shape[axis..].iter().product()];
                desc.push_str(&format!(" {out}=Flatten({axis})"));
            }
            _ => {
                let op = *rng.pick(&["Relu", "Exp", "Tanh", "Neg", "Sqrt"]);
                may_nan |= op == "Sqrt";
                b = b.node(op, &name, &[&last], &[&out]);
                desc.push_str(&format!(" {out}={op}"));
            }
        }
        last = out;
    }
    b = b.output(&last, FLOAT, None);
    (b.build(), vec![input], desc)
}

#[test]
fn random_layout_chains_match_ort() {
    let n: u64 = std::env::var("RIVET_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000) / 2;
    let mut failures = Vec::new();
    for seed in 1..=n {
        let (model, inputs, desc) = layout_case(seed);
        if let Err(e) = common::check_matches_ort(&model, &inputs, 1e-4, 1e-4, &desc) {
            failures.push(e);
        }
    }
    assert!(failures.is_empty(), "{} of {n} chains differ:\n{}", failures.len(), failures.join("\n"));
}
