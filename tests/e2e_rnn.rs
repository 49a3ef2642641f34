//! RNN, GRU and LSTM against ORT's CPU EP, on Rivet alone: every direction, sequence_lens
//! shorter than the sequence (and 0), initial states, layout 1, every output, peepholes,
//! input_forget, linear_before_reset, activations with alpha / beta, clip, symbolic batch
//! and sequence dims, and a wrong W at Run.

mod common;

use common::{assert_matches_ort, env, rivet_session};
use ort::value::TensorElementType as E;
use rivet::harness::{self, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT, INT32};

const RTOL: f64 = 1e-4;
const ATOL: f64 = 1e-5;

#[derive(Clone)]
struct Case {
    op: &'static str,
    dir: &'static str,
    layout: i64,
    seq: i64,
    batch: i64,
    input: i64,
    hidden: i64,
    lens: Option<Vec<i32>>,
    init: bool,
    peepholes: bool,
    bias: bool,
    /// Y, Y_h, Y_c present.
    outs: [bool; 3],
    attrs: Vec<(&'static str, Attr)>,
    /// X declared with symbolic batch and sequence dims.
    symbolic: bool,
    /// W a graph input (symbolic dims) instead of an initializer.
    w_input: bool,
    opset: i64,
}

impl Case {
    fn new(op: &'static str, dir: &'static str) -> Self {
        let lstm = op == "LSTM";
        Case {
            op,
            dir,
            layout: 0,
            seq: 5,
            batch: 3,
            input: 4,
            hidden: 6,
            lens: None,
            init: false,
            peepholes: false,
            bias: true,
            outs: [true, true, lstm],
            attrs: vec![],
            symbolic: false,
            w_input: false,
            opset: 14,
        }
    }

    fn dirs(&self) -> i64 {
        if self.dir == "bidirectional" {
            2
        } else {
            1
        }
    }

    fn gates(&self) -> i64 {
        match self.op {
            "RNN" => 1,
            "GRU" => 3,
            _ => 4,
        }
    }

    fn x_dims(&self) -> [i64; 3] {
        if self.layout == 1 {
            [self.batch, self.seq, self.input]
        } else {
            [self.seq, self.batch, self.input]
        }
    }

    fn state_dims(&self) -> [i64; 3] {
        if self.layout == 1 {
            [self.batch, self.dirs(), self.hidden]
        } else {
            [self.dirs(), self.batch, self.hidden]
        }
    }

    fn w_dims(&self) -> [i64; 3] {
        [self.dirs(), self.gates() * self.hidden, self.input]
    }

    fn model(&self) -> Vec<u8> {
        let (d, gh, h) = (self.dirs(), self.gates() * self.hidden, self.hidden);
        let n = |dims: &[i64]| dims.iter().product::<i64>() as usize;
        let init = |seed: u64, dims: &[i64]| -> Vec<f32> {
            harness::values(seed, n(dims), -0.6, 0.6).into_iter().map(|v| v as f32).collect()
        };
        let x_dims: Vec<Dim> = match (self.symbolic, self.layout) {
            (true, 0) => vec!["S".into(), "N".into(), self.input.into()],
            (true, _) => vec!["N".into(), "S".into(), self.input.into()],
            (false, _) => self.x_dims().iter().map(|&v| v.into()).collect(),
        };
        let mut m = ModelBuilder::new(self.opset).input("X", FLOAT, &x_dims);
        let w = self.w_dims();
        if self.w_input {
            m = m.input("W", FLOAT, &[d.into(), "G".into(), "I".into()]);
        } else {
            m = m.initializer("W", &w, init(1, &w));
        }
        m = m.initializer("R", &[d, gh, h], init(2, &[d, gh, h]));
        let mut ins = vec!["X", "W", "R"];
        let mut last = 3;
        ins.push(if self.bias { "B" } else { "" });
        if self.bias {
            m = m.initializer("B", &[d, 2 * gh], init(3, &[d, 2 * gh]));
        }
        if self.lens.is_some() {
            let b: Dim = if self.symbolic { "N".into() } else { self.batch.into() };
            m = m.input("L", INT32, &[b]);
            ins.push("L");
            last = ins.len();
        } else {
            ins.push("");
        }
        let state: Vec<Dim> = self.state_dims().iter().map(|&v| v.into()).collect();
        let state: Vec<Dim> = if self.symbolic {
            state
                .iter()
                .enumerate()
                .map(|(k, v)| if k == (1 - self.layout) as usize { "N".into() } else { v.clone() })
                .collect()
        } else {
            state
        };
        if self.init {
            m = m.input("H0", FLOAT, &state);
            ins.push("H0");
            last = ins.len();
            if self.op == "LSTM" {
                m = m.input("C0", FLOAT, &state);
                ins.push("C0");
                last = ins.len();
            }
        }
        if self.peepholes {
            if !self.init {
                ins.extend(["", ""]);
            }
            m = m.initializer("P", &[d, 3 * h], init(4, &[d, 3 * h]));
            ins.push("P");
            last = ins.len();
        }
        ins.truncate(last);
        let names = ["Y", "Y_h", "Y_c"];
        let outs: Vec<&str> = (0..3).map(|k| if self.outs[k] { names[k] } else { "" }).collect();
        let upto = (0..3).rev().find(|&k| self.outs[k]).expect("an output") + 1;
        for k in (0..3).filter(|&k| self.outs[k]) {
            m = m.output(names[k], FLOAT, None);
        }
        let mut attrs: Vec<(&str, Attr)> =
            vec![("hidden_size", Attr::Int(h)), ("direction", Attr::Str(self.dir.into()))];
        if self.layout != 0 {
            attrs.push(("layout", Attr::Int(self.layout)));
        }
        attrs.extend(self.attrs.iter().cloned());
        m.node_with(self.op, "rec", &ins, &outs[..upto], &attrs).build()
    }

    fn inputs(&self, seed: u64) -> Vec<HostTensor> {
        let f = |name: &str, dims: &[i64], seed: u64| {
            let n = dims.iter().product::<i64>() as usize;
            HostTensor::f32(name, dims, harness::values(seed, n, -1.0, 1.0).into_iter().map(|v| v as f32).collect())
        };
        let mut v = vec![f("X", &self.x_dims(), seed)];
        if self.w_input {
            v.push(f("W", &self.w_dims(), 11));
        }
        if let Some(l) = &self.lens {
            v.push(HostTensor::typed("L", E::Int32, &[self.batch], l.iter().map(|&x| x as f64).collect()));
        }
        if self.init {
            v.push(f("H0", &self.state_dims(), seed + 1));
            if self.op == "LSTM" {
                v.push(f("C0", &self.state_dims(), seed + 2));
            }
        }
        v
    }

    fn check(&self, what: &str) {
        if self.layout == 1 {
            return self.check_batch_major(what);
        }
        assert_matches_ort(&self.model(), &self.inputs(7), RTOL, ATOL, what);
    }

    /// ORT's CPU EP refuses layout 1: Rivet's layout-1 run is compared with ORT's run of
    /// the same layer in layout 0 on the transposed inputs, its outputs transposed back.
    fn check_batch_major(&self, what: &str) {
        let time_major = Case { layout: 0, ..self.clone() };
        let ins = self.inputs(7);
        let to_time_major: Vec<HostTensor> =
            ins.iter().map(|t| if t.shape.len() == 3 { permute(t, &[1, 0, 2]) } else { t.clone() }).collect();
        let mut ort = common::ort_session(&time_major.model());
        let want = harness::run(&mut ort, &to_time_major).expect("ORT runs the layout-0 layer");
        let want: Vec<HostTensor> = want
            .iter()
            .map(|t| if t.shape.len() == 4 { permute(t, &[2, 0, 1, 3]) } else { permute(t, &[1, 0, 2]) })
            .collect();
        let mut s = rivet_session(&self.model());
        let got = harness::run(&mut s, &ins).unwrap_or_else(|e| panic!("{what}: {e}"));
        harness::compare(&got, &want, RTOL, ATOL).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

/// `t` transposed: output axis `k` is input axis `perm[k]`.
fn permute(t: &HostTensor, perm: &[usize]) -> HostTensor {
    let dims: Vec<usize> = t.shape.iter().map(|&d| d as usize).collect();
    let mut strides = vec![1; dims.len()];
    for a in (0..dims.len() - 1).rev() {
        strides[a] = strides[a + 1] * dims[a + 1];
    }
    let out_dims: Vec<usize> = perm.iter().map(|&p| dims[p]).collect();
    let mut data = Vec::with_capacity(t.data.len());
    let mut idx = vec![0; dims.len()];
    for _ in 0..t.data.len() {
        data.push(t.data[perm.iter().zip(&idx).map(|(&p, &i)| i * strides[p]).sum::<usize>()]);
        for a in (0..idx.len()).rev() {
            idx[a] += 1;
            if idx[a] < out_dims[a] {
                break;
            }
            idx[a] = 0;
        }
    }
    let shape = out_dims.iter().map(|&d| d as i64).collect::<Vec<_>>();
    HostTensor { shape, data, ..t.clone() }
}

const OPS: [&str; 3] = ["RNN", "GRU", "LSTM"];
const DIRS: [&str; 3] = ["forward", "reverse", "bidirectional"];

#[test]
fn every_direction_with_every_output_and_initial_states() {
    env();
    for op in OPS {
        for dir in DIRS {
            let c = Case { init: true, outs: [true, true, op == "LSTM"], ..Case::new(op, dir) };
            c.check(&format!("{op} {dir}"));
            let c = Case { bias: false, ..Case::new(op, dir) };
            c.check(&format!("{op} {dir}, no bias or initial state"));
        }
    }
}

#[test]
fn sequence_lens_shorter_than_the_sequence_and_zero() {
    env();
    for op in OPS {
        for dir in DIRS {
            let c = Case { lens: Some(vec![5, 2, 3]), init: true, ..Case::new(op, dir) };
            c.check(&format!("{op} {dir} lens 5,2,3"));
            let c = Case { lens: Some(vec![0, 4, 1]), init: true, ..Case::new(op, dir) };
            c.check(&format!("{op} {dir} lens 0,4,1"));
        }
    }
}

#[test]
fn layout_1_batch_major() {
    env();
    for op in OPS {
        for dir in DIRS {
            let c = Case { layout: 1, lens: Some(vec![4, 5, 1]), init: true, ..Case::new(op, dir) };
            c.check(&format!("{op} {dir} layout 1"));
        }
    }
}

/// The two directions run as two tasks: one thread and two give the same bits, for every
/// output, with the outputs' shared step and without it (Y alone), in both layouts.
#[test]
fn bidirectional_layers_give_the_same_bits_on_one_thread_and_two() {
    env();
    for op in OPS {
        for (layout, outs) in
            [(0, [true, true, op == "LSTM"]), (1, [true, true, op == "LSTM"]), (0, [true, false, false])]
        {
            let c = Case {
                layout,
                outs,
                lens: Some(vec![5, 2, 0]),
                init: true,
                seq: 9,
                hidden: 40,
                ..Case::new(op, "bidirectional")
            };
            let (model, ins) = (c.model(), c.inputs(3));
            let (one, two) = (common::rivet_run_at(&model, &ins, 1, 2), common::rivet_run_at(&model, &ins, 2, 2));
            assert_eq!(one.len(), two.len());
            for (a, b) in one.iter().zip(&two) {
                let same = a.data.iter().zip(&b.data).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same && a.shape == b.shape, "{op} layout {layout} outputs {outs:?}: '{}' differs", a.name);
            }
        }
    }
}

#[test]
fn only_the_last_states_when_y_is_absent() {
    env();
    for op in OPS {
        let c = Case { outs: [false, true, op == "LSTM"], init: true, ..Case::new(op, "bidirectional") };
        c.check(&format!("{op} without Y"));
    }
    let c = Case { outs: [false, false, true], ..Case::new("LSTM", "forward") };
    c.check("LSTM Y_c alone");
}

#[test]
fn lstm_peepholes_and_input_forget_gru_linear_before_reset() {
    env();
    for dir in DIRS {
        let c = Case { peepholes: true, init: true, lens: Some(vec![3, 5, 2]), ..Case::new("LSTM", dir) };
        c.check(&format!("LSTM {dir} peepholes"));
        let c = Case { peepholes: true, attrs: vec![("input_forget", Attr::Int(1))], ..Case::new("LSTM", dir) };
        c.check(&format!("LSTM {dir} input_forget"));
        let c = Case { attrs: vec![("linear_before_reset", Attr::Int(1))], init: true, ..Case::new("GRU", dir) };
        c.check(&format!("GRU {dir} linear_before_reset"));
    }
}

#[test]
fn activations_with_alpha_and_beta_and_clip() {
    env();
    let strs = |v: &[&str]| Attr::Strs(v.iter().map(|s| s.to_string()).collect());
    type Lists<'a> = [(&'a str, &'a [&'a str], Vec<f32>, Vec<f32>); 4];
    let lists: Lists = [
        ("RNN", &["LeakyRelu", "Affine"], vec![0.1, 0.7], vec![0.2]),
        ("RNN", &["ScaledTanh", "Elu"], vec![1.5, 0.8], vec![0.6]),
        ("GRU", &["HardSigmoid", "Softsign", "Sigmoid", "ThresholdedRelu"], vec![0.3, 0.1], vec![0.4]),
        (
            "LSTM",
            &["Sigmoid", "Softplus", "Relu", "HardSigmoid", "Tanh", "ScaledTanh"],
            vec![0.25, 0.9],
            vec![0.5, 1.2],
        ),
    ];
    for (op, acts, alpha, beta) in lists {
        let attrs = vec![
            ("activations", strs(acts)),
            ("activation_alpha", Attr::Floats(alpha)),
            ("activation_beta", Attr::Floats(beta)),
        ];
        let c = Case { attrs, init: true, ..Case::new(op, "bidirectional") };
        c.check(&format!("{op} {acts:?}"));
    }
    for op in OPS {
        let c = Case {
            attrs: vec![("clip", Attr::Float(0.3))],
            init: true,
            peepholes: op == "LSTM",
            ..Case::new(op, "bidirectional")
        };
        c.check(&format!("{op} clip"));
    }
}

#[test]
fn symbolic_batch_and_sequence_dims_at_opsets_7_and_22() {
    env();
    for op in OPS {
        let c = Case { symbolic: true, lens: Some(vec![2, 5, 4]), init: true, ..Case::new(op, "bidirectional") };
        let model = c.model();
        for (seq, batch, lens) in [(5, 3, vec![2, 5, 4]), (2, 1, vec![1]), (7, 4, vec![7, 0, 3, 6])] {
            let c = Case { seq, batch, lens: Some(lens), ..c.clone() };
            assert_matches_ort(&model, &c.inputs(seq as u64), RTOL, ATOL, &format!("{op} symbolic {seq}x{batch}"));
        }
        let c = Case { symbolic: true, layout: 1, ..c };
        c.check(&format!("{op} symbolic layout 1"));
        Case { opset: 7, ..Case::new(op, "reverse") }.check(&format!("{op} opset 7"));
        Case { opset: 22, ..Case::new(op, "reverse") }.check(&format!("{op} opset 22"));
    }
}

#[test]
fn a_wrong_w_at_run_names_the_node_and_the_session_stays_usable() {
    env();
    for op in OPS {
        let c = Case { w_input: true, ..Case::new(op, "forward") };
        let mut s = rivet_session(&c.model());
        let mut bad = c.inputs(3);
        bad[1] = HostTensor::f32(
            "W",
            &[1, c.gates() * c.hidden + 1, c.input],
            vec![0.5; (c.gates() * c.hidden + 1) as usize * 4],
        );
        let err = harness::run(&mut s, &bad).expect_err("a W of the wrong shape fails").to_string();
        assert!(err.contains("'rec'") && err.contains("W must have shape"), "{op}: {err}");
        let good = harness::run(&mut s, &c.inputs(3)).expect("the session still runs");
        let mut ort = common::ort_session(&c.model());
        let want = harness::run(&mut ort, &c.inputs(3)).expect("ORT runs");
        harness::compare(&good, &want, RTOL, ATOL).expect("same values after the error");
        let bad_lens = Case { lens: Some(vec![1, 9, 2]), ..c.clone() };
        let mut s = rivet_session(&bad_lens.model());
        let err = harness::run(&mut s, &bad_lens.inputs(3)).expect_err("a length past the sequence fails").to_string();
        assert!(err.contains("'rec'") && err.contains("sequence_lens value 9"), "{op}: {err}");
    }
}
