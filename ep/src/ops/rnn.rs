//! RNN, GRU and LSTM (float32): forward, reverse and bidirectional, sequence_lens,
//! initial states, LSTM peepholes and input_forget, GRU linear_before_reset, the spec's
//! activations with their alpha / beta, clip, and layout 0 and 1.
//!
//! A node one of whose outputs (Y, Y_h, Y_c) is read runs the recurrence in that output's
//! step (Y_h and Y_c keep only the last state and write no sequence). A node two or more
//! of whose outputs are read runs it once, in a step of its own ([`Op::shared`]) that
//! writes all three into one value, which each output's step then copies its part of.
//! The recurrence itself is
//! `rivet_kernels::rnn` (one GEMM for the input projection of every time step, a small
//! GEMM per step for the hidden state). Constant W and R (initializers) are packed for
//! the GEMM once, on the first Run, and shared by every later (and concurrent) Run.

use std::sync::{Arc, Mutex, OnceLock};

use rivet_kernels::rnn::{Act, Cell, PackedWeights, Recurrence, RnnScratch, YOut};

use super::op::util::{check_attrs, check_inputs, input, input_type, output_type};
use super::{Op, OpRef, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, AttrValue, NodeDesc, Shape};
use crate::node_attrs::{float_attr, int_attr, string_attr};
use crate::parallel::lock;

/// Input positions.
const X: usize = 0;
const W: usize = 1;
const R: usize = 2;
const B: usize = 3;
const LENS: usize = 4;
const H0: usize = 5;
const C0: usize = 6;
const P: usize = 7;

/// The shared step's output: Y, then Y_h, then Y_c (zeros for a cell without one), each
/// in the layout of the node's output.
const ALL: usize = 3;

#[derive(Debug)]
struct Recurrent {
    cell: Cell,
    /// 0: Y, 1: Y_h, 2: Y_c; [`ALL`]: the shared step's Y, Y_h and Y_c in one value.
    output: usize,
    dirs: usize,
    reverse: bool,
    hidden: usize,
    /// Per direction: f, g, h.
    acts: [[Act; 3]; 2],
    clip: Option<f32>,
    batch_major: bool,
    /// Where each input position is among the step's inputs (the present ones, in order).
    slot: [Option<usize>; 8],
    /// How many inputs the node has (past them, a step reads the shared step's value).
    present: usize,
    /// Constant W and R packed once (on the first Run that sees them constant).
    packed: OnceLock<Packed>,
}

/// W and R packed per direction, and the tensors they were packed from (address and
/// length of W, then of R).
#[derive(Debug)]
struct Packed {
    source: [(usize, usize); 2],
    dirs: Vec<PackedWeights>,
}

pub fn rnn(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    compile(node, output, Cell::Rnn, &[])
}

pub fn gru(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    let lbr = int_attr(node, "linear_before_reset", 0)?;
    if !(0..=1).contains(&lbr) {
        return Err(format!("GRU linear_before_reset {lbr} is not 0 or 1"));
    }
    compile(node, output, Cell::Gru { linear_before_reset: lbr == 1 }, &["linear_before_reset"])
}

pub fn lstm(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    let input_forget = int_attr(node, "input_forget", 0)?;
    if !(0..=1).contains(&input_forget) {
        return Err(format!("LSTM input_forget {input_forget} is not 0 or 1"));
    }
    compile(node, output, Cell::Lstm { input_forget: input_forget == 1 }, &["input_forget"])
}

fn compile(node: &NodeDesc, output: usize, cell: Cell, extra: &[&str]) -> Result<Arc<dyn Op>, String> {
    let op = &node.op_type;
    let mut allowed = vec!["activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size"];
    if node.since_version >= 14 {
        allowed.push("layout");
    }
    allowed.extend_from_slice(extra);
    check_attrs(node, &allowed)?;
    let max_inputs = if matches!(cell, Cell::Lstm { .. }) { 8 } else { 6 };
    check_inputs(node, 3, max_inputs)?;
    let float_ok =
        (0..max_inputs).filter(|&k| k != LENS && input(node, k).is_some()).all(|k| input_type(node, k) == dtype::FLOAT);
    let lens_ok = input(node, LENS).is_none() || input_type(node, LENS) == dtype::INT32;
    let outs_ok = (0..node.outputs.len()).all(|k| node.outputs[k].is_none() || output_type(node, k) == dtype::FLOAT);
    if !float_ok || !lens_ok || !outs_ok || node.outputs.len() > if matches!(cell, Cell::Lstm { .. }) { 3 } else { 2 } {
        return Err(super::op::util::bad_types(node, "float32 (sequence_lens int32)"));
    }
    let hidden = int_attr(node, "hidden_size", 0)?;
    if !(1..=1 << 20).contains(&hidden) {
        return Err(format!("{op} needs a positive hidden_size, got {hidden}"));
    }
    let (dirs, reverse) = match string_attr(node, "direction", "forward")? {
        "forward" => (1, false),
        "reverse" => (1, true),
        "bidirectional" => (2, false),
        d => return Err(format!("{op} direction '{d}' is not forward, reverse or bidirectional")),
    };
    let layout = int_attr(node, "layout", 0)?;
    if !(0..=1).contains(&layout) {
        return Err(format!("{op} layout {layout} is not 0 or 1"));
    }
    let clip = match node.attr("clip") {
        None => None,
        Some(_) => {
            let c = float_attr(node, "clip", 0.0)?;
            if c.is_nan() || c <= 0.0 {
                return Err(format!("{op} clip {c} is not positive"));
            }
            Some(c)
        }
    };
    let acts = activations(node, cell, dirs)?;
    let mut slot = [None; 8];
    let mut at = 0;
    for (k, s) in slot.iter_mut().enumerate().take(node.inputs.len()) {
        if input(node, k).is_some() {
            *s = Some(at);
            at += 1;
        }
    }
    Ok(Arc::new(Recurrent {
        cell,
        output,
        dirs,
        reverse,
        hidden: hidden as usize,
        acts,
        clip,
        batch_major: layout == 1,
        slot,
        present: at,
        packed: OnceLock::new(),
    }))
}

/// The activations per direction, with alpha and beta taken in order by the functions
/// that use them (as ONNX Runtime does); a function short of its values is refused.
fn activations(node: &NodeDesc, cell: Cell, dirs: usize) -> Result<[[Act; 3]; 2], String> {
    let per = cell.activations();
    let floats = |name: &str| match node.attr(name) {
        None => Ok(Vec::new()),
        Some(AttrValue::Floats(v)) => Ok(v.clone()),
        Some(other) => Err(format!("attribute '{name}' should be floats, is {other:?}")),
    };
    let (alphas, betas) = (floats("activation_alpha")?, floats("activation_beta")?);
    let names: Vec<String> = match node.attr("activations") {
        None => {
            let d: &[&str] = match cell {
                Cell::Rnn => &["Tanh"],
                Cell::Gru { .. } => &["Sigmoid", "Tanh"],
                Cell::Lstm { .. } => &["Sigmoid", "Tanh", "Tanh"],
            };
            (0..dirs).flat_map(|_| d.iter().map(|s| s.to_string())).collect()
        }
        // The schema's default for RNN is two Tanh (one per direction), which ORT reports
        // as the node's attribute: one direction uses the first.
        Some(AttrValue::Strings(v)) if cell == Cell::Rnn && dirs == 1 && v.len() == 2 => v[..1].to_vec(),
        Some(AttrValue::Strings(v)) => v.clone(),
        Some(_) => return Err(format!("{} attribute 'activations' could not be read as strings", node.op_type)),
    };
    if names.len() != per * dirs {
        return Err(format!("{} needs {} activations, got {}", node.op_type, per * dirs, names.len()));
    }
    let (mut a, mut b) = (alphas.iter().copied(), betas.iter().copied());
    let mut out = [[Act::Tanh; 3]; 2];
    for (i, name) in names.iter().enumerate() {
        let short = |what: &str| format!("{} activation {name} needs a value in activation_{what}", node.op_type);
        let mut alpha = || a.next().ok_or_else(|| short("alpha"));
        let act = match name.as_str() {
            "Relu" => Act::Relu,
            "Tanh" => Act::Tanh,
            "Sigmoid" => Act::Sigmoid,
            "Softsign" => Act::Softsign,
            "Softplus" => Act::Softplus,
            "LeakyRelu" => Act::LeakyRelu(alpha()?),
            "ThresholdedRelu" => Act::ThresholdedRelu(alpha()?),
            "Elu" => Act::Elu(alpha()?),
            "Affine" | "ScaledTanh" | "HardSigmoid" => {
                let al = alpha()?;
                let be = b.next().ok_or_else(|| short("beta"))?;
                match name.as_str() {
                    "Affine" => Act::Affine(al, be),
                    "ScaledTanh" => Act::ScaledTanh(al, be),
                    _ => Act::HardSigmoid(al, be),
                }
            }
            other => return Err(format!("{} activation '{other}' is not supported", node.op_type)),
        };
        out[i / per][i % per] = act;
    }
    if a.next().is_some() || b.next().is_some() {
        return Err(format!(
            "{} has more activation_alpha / activation_beta values than its activations use",
            node.op_type
        ));
    }
    Ok(out)
}

/// The sizes of one Run.
struct Dims {
    seq: usize,
    batch: usize,
    input: usize,
}

impl Recurrent {
    fn at(&self, k: usize) -> Option<usize> {
        self.slot[k]
    }

    /// Checks every input's shape against X's and the attributes.
    fn dims(&self, shapes: &[&[usize]]) -> Result<Dims, String> {
        let x = shapes[self.at(X).ok_or("X is missing")?];
        if x.len() != 3 {
            return Err(format!("X must be 3-D, got rank {}", x.len()));
        }
        let (seq, batch) = if self.batch_major { (x[1], x[0]) } else { (x[0], x[1]) };
        let (d, h, gh) = (self.dirs, self.hidden, self.cell.gates() * self.hidden);
        let state = if self.batch_major { [batch, d, h] } else { [d, batch, h] };
        let want = |k: usize, name: &str, dims: &[usize]| -> Result<(), String> {
            match self.at(k) {
                Some(i) if shapes[i] != dims => Err(format!("{name} must have shape {dims:?}, got {:?}", shapes[i])),
                _ => Ok(()),
            }
        };
        want(W, "W", &[d, gh, x[2]])?;
        want(R, "R", &[d, gh, h])?;
        want(B, "B", &[d, 2 * gh])?;
        want(LENS, "sequence_lens", &[batch])?;
        want(H0, "initial_h", &state)?;
        want(C0, "initial_c", &state)?;
        want(P, "P", &[d, 3 * h])?;
        Ok(Dims { seq, batch, input: x[2] })
    }

    /// The packed weights when W and R are constants (packed on the first call), else
    /// `None` (each Run packs R in its scratch).
    fn packed(&self, constant: u32, w: &[f32], r: &[f32], input: usize) -> Option<&Packed> {
        let is_const = |k: usize| self.at(k).is_some_and(|i| i < 32 && constant & (1 << i) != 0);
        if !(is_const(W) && is_const(R)) {
            return None;
        }
        let source = [(w.as_ptr() as usize, w.len()), (r.as_ptr() as usize, r.len())];
        let p = self.packed.get_or_init(|| {
            let (gh, h) = (self.cell.gates() * self.hidden, self.hidden);
            let dirs = (0..self.dirs)
                .map(|d| {
                    let mut p = PackedWeights::default();
                    p.pack(self.cell, input, h, &w[d * gh * input..][..gh * input], &r[d * gh * h..][..gh * h]);
                    p
                })
                .collect();
            Packed { source, dirs }
        });
        // Another tensor than the one packed (not expected of a constant): pack per Run.
        (p.source == source).then_some(p)
    }

    fn f32_in<'d>(&self, ins: &[Data<'d>], k: usize) -> Result<Option<&'d [f32]>, String> {
        match self.at(k) {
            None => Ok(None),
            Some(i) => ins[i].f32().map(Some).ok_or_else(|| format!("input {k} is not float32")),
        }
    }
}

/// The per-Run memory: the kernel's (one per direction), each direction's Y when the two
/// run as tasks, and the sequence lengths.
#[derive(Default)]
struct State {
    rnn: [Mutex<RnnScratch>; 2],
    ys: [Mutex<Vec<f32>>; 2],
    lens: Vec<usize>,
}

impl Op for Recurrent {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let Dims { seq, batch, .. } = self.dims(x.shapes)?;
        let (d, h) = (self.dirs, self.hidden);
        Ok(match (self.output, self.batch_major) {
            (ALL, _) => Shape::from_slice(&[(seq + 2) * d * batch * h]),
            (0, false) => Shape::from_slice(&[seq, d, batch, h]),
            (0, true) => Shape::from_slice(&[batch, seq, d, h]),
            (_, false) => Shape::from_slice(&[d, batch, h]),
            (_, true) => Shape::from_slice(&[batch, d, h]),
        })
    }

    fn shared(&self) -> Option<OpRef> {
        let all = Recurrent {
            cell: self.cell,
            output: ALL,
            dirs: self.dirs,
            reverse: self.reverse,
            hidden: self.hidden,
            acts: self.acts,
            clip: self.clip,
            batch_major: self.batch_major,
            slot: self.slot,
            present: self.present,
            packed: OnceLock::new(),
        };
        Some(OpRef(Arc::new(all)))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let Dims { seq, batch, input } = self.dims(x.shapes)?;
        let out = out.f32().ok_or("the output is not float32")?;
        let (d, h, gh) = (self.dirs, self.hidden, self.cell.gates() * self.hidden);
        let ins = x.ins;
        let (y_len, state_len) = (seq * d * batch * h, d * batch * h);
        if self.output != ALL && ins.len() > self.present {
            // The shared step ran the recurrence: this output's part of its value.
            let all = ins[self.present].f32().ok_or("the shared step's value is not float32")?;
            let part = match self.output {
                0 => all.get(..y_len),
                k => all.get(y_len + (k - 1) * state_len..y_len + k * state_len),
            };
            let part = part.filter(|p| p.len() == out.len()).ok_or("the shared step's value has the wrong length")?;
            out.copy_from_slice(part);
            return Ok(());
        }
        let xs = self.f32_in(ins, X)?.ok_or("X is missing")?;
        let (w, r) = (self.f32_in(ins, W)?.ok_or("W is missing")?, self.f32_in(ins, R)?.ok_or("R is missing")?);
        let (bias, h0, c0, p) =
            (self.f32_in(ins, B)?, self.f32_in(ins, H0)?, self.f32_in(ins, C0)?, self.f32_in(ins, P)?);
        let packed = self.packed(x.constant, w, r, input);
        let st: &mut State = x.scratch.state();
        st.lens.clear();
        match self.at(LENS).map(|i| ins[i]) {
            None => st.lens.resize(batch, seq),
            Some(Data::I32(v)) => {
                for &l in v {
                    if l < 0 || l as usize > seq {
                        return Err(format!("sequence_lens value {l} is outside 0..={seq}"));
                    }
                    st.lens.push(l as usize);
                }
            }
            Some(_) => return Err("sequence_lens is not int32".into()),
        }
        out.fill(0.0);
        let state_at = |dir: usize, b: usize| if self.batch_major { (b * d + dir) * h } else { (dir * batch + b) * h };
        let State { rnn, ys, lens } = st;
        let lens = &lens[..];
        // One direction from its initial state, its Y into `y` (`dirs` wide, at `at`).
        let direction = |dir: usize, s: &mut RnnScratch, y: Option<YOut<'_>>| {
            s.reset_state(batch, h);
            for b in 0..batch {
                if let Some(h0) = h0 {
                    s.h[b * h..][..h].copy_from_slice(&h0[state_at(dir, b)..][..h]);
                }
                if let Some(c0) = c0 {
                    s.c[b * h..][..h].copy_from_slice(&c0[state_at(dir, b)..][..h]);
                }
            }
            let rec = Recurrence {
                cell: self.cell,
                seq,
                batch,
                input,
                hidden: h,
                batch_major: self.batch_major,
                x: xs,
                w: &w[dir * gh * input..][..gh * input],
                r: &r[dir * gh * h..][..gh * h],
                bias: bias.map(|v| &v[dir * 2 * gh..][..2 * gh]),
                peephole: p.map(|v| &v[dir * 3 * h..][..3 * h]),
                lens,
                reverse: self.reverse || dir == 1,
                acts: self.acts[dir],
                clip: self.clip,
                packed: packed.map(|p| &p.dirs[dir]),
            };
            rec.run(s, y);
        };
        let writes_y = matches!(self.output, 0 | ALL);
        let (y, states) = out.split_at_mut(if writes_y { y_len } else { 0 });
        if d == 2 {
            // The two directions are independent: two tasks (in turn on one thread), each
            // with its own state and its Y in its own buffer, put in place after.
            let per_dir = if writes_y { seq * batch * h } else { 0 };
            for v in ys.iter_mut() {
                let v = v.get_mut().unwrap_or_else(|e| e.into_inner());
                v.clear();
                v.resize(per_dir, 0.0);
            }
            let (scratch, bufs) = (&rnn[..], &ys[..]);
            x.par.for_each_index(2, &|dir, _| {
                let (mut s, mut yb) = (lock(&scratch[dir]), lock(&bufs[dir]));
                direction(dir, &mut s, writes_y.then(|| YOut { y: &mut yb[..], dirs: 1, dir: 0 }));
            });
            if writes_y {
                // A direction's rows are [seq, batch] (or [batch, seq]).
                let inner_len = if self.batch_major { seq } else { batch };
                for (dir, yb) in ys.iter_mut().enumerate() {
                    let yb = yb.get_mut().unwrap_or_else(|e| e.into_inner());
                    for (i, row) in yb.chunks_exact(h).enumerate() {
                        let (outer, inner) = (i / inner_len, i % inner_len);
                        let at = if self.batch_major {
                            ((outer * seq + inner) * d + dir) * h
                        } else {
                            ((outer * d + dir) * batch + inner) * h
                        };
                        y[at..][..h].copy_from_slice(row);
                    }
                }
            }
        } else {
            let s = rnn[0].get_mut().unwrap_or_else(|e| e.into_inner());
            direction(0, s, writes_y.then_some(YOut { y, dirs: 1, dir: 0 }));
        }
        // The last states (a sequence of length 0 has a zero state, as ORT gives, not its
        // initial one).
        let with_c = matches!(self.cell, Cell::Lstm { .. });
        let (mut yh, mut yc) = match self.output {
            0 => (None, None),
            1 => (Some(&mut states[..]), None),
            2 => (None, Some(&mut states[..])),
            _ => {
                let (yh, yc) = states.split_at_mut(state_len);
                (Some(yh), with_c.then_some(yc))
            }
        };
        for (dir, s) in rnn.iter_mut().enumerate().take(d) {
            let s = s.get_mut().unwrap_or_else(|e| e.into_inner());
            for b in (0..batch).filter(|&b| lens[b] > 0) {
                if let Some(yh) = yh.as_deref_mut() {
                    yh[state_at(dir, b)..][..h].copy_from_slice(&s.h[b * h..][..h]);
                }
                if let Some(yc) = yc.as_deref_mut() {
                    yc[state_at(dir, b)..][..h].copy_from_slice(&s.c[b * h..][..h]);
                }
            }
        }
        Ok(())
    }
}
