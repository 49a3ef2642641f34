//! Recurrent layers (ONNX RNN, GRU and LSTM): one direction of the recurrence over a
//! padded batch of sequences.
//!
//! The input projection `X·W^T` (plus the biases that do not depend on the hidden state)
//! is one GEMM over every time step; each step then multiplies the hidden state by `R^T`
//! (a small GEMM, or a GEMV for batch 1, with `R^T` packed once per call) and applies the
//! cell's gates. A sequence shorter than the batch's keeps its state once it has ended:
//! its later (earlier, in reverse) steps are neither computed nor written.
//!
//! Constant weights can be packed once ([`PackedWeights`]) and handed to every call;
//! the products then give the same bits as when packed per call.

use crate::gemm::{pack_b, Gemm, GemmScratch, PackedB};
use crate::UnaryOp;

/// The cell of a recurrent layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell {
    /// `H = f(X W^T + H R^T + Wb + Rb)`.
    Rnn,
    /// Gates z, r, h; with `linear_before_reset` the reset gate multiplies `H R_h^T + Rb_h`
    /// instead of `H`.
    Gru { linear_before_reset: bool },
    /// Gates i, o, f, c and peepholes i, o, f; with `input_forget` the forget gate is
    /// `1 - i`.
    Lstm { input_forget: bool },
}

impl Cell {
    /// Gates per hidden unit.
    pub fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru { .. } => 3,
            Cell::Lstm { .. } => 4,
        }
    }

    /// Activation functions per direction.
    pub fn activations(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru { .. } => 2,
            Cell::Lstm { .. } => 3,
        }
    }
}

/// An activation function of a recurrent cell (the spec's list, alpha and beta resolved).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Act {
    Relu,
    Tanh,
    Sigmoid,
    /// `alpha x + beta`.
    Affine(f32, f32),
    /// `x` if `x >= 0` else `alpha x`.
    LeakyRelu(f32),
    /// `x` if `x > alpha` else 0.
    ThresholdedRelu(f32),
    /// `alpha tanh(beta x)`.
    ScaledTanh(f32, f32),
    /// `min(max(alpha x + beta, 0), 1)`.
    HardSigmoid(f32, f32),
    /// `x` if `x >= 0` else `alpha (e^x - 1)`.
    Elu(f32),
    Softsign,
    Softplus,
}

impl Act {
    /// Applies the function to every element of `v`.
    pub fn apply(self, v: &mut [f32]) {
        let unary = |op: UnaryOp, v: &mut [f32]| op.apply_inplace(v);
        match self {
            Act::Relu => unary(UnaryOp::Relu, v),
            Act::Tanh => unary(UnaryOp::Tanh, v),
            Act::Sigmoid => unary(UnaryOp::Sigmoid, v),
            Act::Affine(a, b) => v.iter_mut().for_each(|x| *x = a * *x + b),
            Act::LeakyRelu(a) => v.iter_mut().for_each(|x| *x = if *x >= 0.0 { *x } else { a * *x }),
            Act::ThresholdedRelu(a) => unary(UnaryOp::ThresholdedRelu { alpha: a }, v),
            Act::ScaledTanh(a, b) => {
                v.iter_mut().for_each(|x| *x *= b);
                unary(UnaryOp::Tanh, v);
                v.iter_mut().for_each(|x| *x *= a);
            }
            Act::HardSigmoid(a, b) => unary(UnaryOp::HardSigmoid { alpha: a, beta: b }, v),
            Act::Elu(a) => unary(UnaryOp::Elu { alpha: a }, v),
            Act::Softsign => unary(UnaryOp::Softsign, v),
            Act::Softplus => unary(UnaryOp::Softplus, v),
        }
    }
}

/// One direction of a recurrent layer over `x`.
#[derive(Clone, Copy, Debug)]
pub struct Recurrence<'a> {
    pub cell: Cell,
    pub seq: usize,
    pub batch: usize,
    pub input: usize,
    pub hidden: usize,
    /// `x` is `[batch, seq, input]` (layout 1) instead of `[seq, batch, input]`.
    pub batch_major: bool,
    pub x: &'a [f32],
    /// `[gates·hidden, input]`.
    pub w: &'a [f32],
    /// `[gates·hidden, hidden]`.
    pub r: &'a [f32],
    /// `Wb` then `Rb`, `gates·hidden` each.
    pub bias: Option<&'a [f32]>,
    /// LSTM peepholes i, o, f (`3·hidden`).
    pub peephole: Option<&'a [f32]>,
    /// Each sequence's length (at most `seq`).
    pub lens: &'a [usize],
    pub reverse: bool,
    /// The cell's activations (f, g, h), `cell.activations()` of them.
    pub acts: [Act; 3],
    pub clip: Option<f32>,
    /// `w` and `r` already packed by [`PackedWeights::pack`] (from these `w` and `r`);
    /// `None`: packed in the scratch by each call.
    pub packed: Option<&'a PackedWeights>,
}

/// One direction's `W^T` and `R^T` packed for the GEMM (`R^T` in two parts for the GRU
/// without linear_before_reset), made once for constant weights.
#[derive(Debug, Default)]
pub struct PackedWeights {
    w: PackedB,
    r: [PackedB; 2],
    /// `R^T`'s parts stored `hidden × n` (see [`transpose_into`]).
    rt: [Vec<f32>; 2],
}

/// `rt` = `r` (`n × k`, row-major) transposed, `k × n`. The recurrent products take `R^T`
/// stored this way (not `R` with `trans_b`): a product of one row (batch 1) then reads
/// the packed panels, the same bits whether packed once or per call, where `R` stored
/// transposed had it take dot products of R's rows (1x128x512: 4.9 us against 2.6).
fn transpose_into(rt: &mut Vec<f32>, r: &[f32], n: usize, k: usize) {
    rt.clear();
    rt.resize(n * k, 0.0);
    for (j, row) in r.chunks_exact(k.max(1)).take(n).enumerate() {
        for (p, &v) in row.iter().enumerate() {
            rt[p * n + j] = v;
        }
    }
}

/// The row counts the weights are packed for: a packed B serves products of any m (with
/// the same bits), these only choose the panel width.
const PACK_ROWS_W: usize = 64;
const PACK_ROWS_R: usize = 8;

/// `r` split as the recurrent products read it: the whole, or (GRU without
/// linear_before_reset) its z, r part and its h part.
fn r_parts(cell: Cell, hidden: usize, r: &[f32]) -> (&[f32], &[f32]) {
    if matches!(cell, Cell::Gru { linear_before_reset: false }) {
        r.split_at(2 * hidden * hidden)
    } else {
        (r, &[])
    }
}

impl PackedWeights {
    /// Packs one direction's `w` (`[gates·hidden, input]`) and `r` (`[gates·hidden,
    /// hidden]`). Panics if a length does not match.
    pub fn pack(&mut self, cell: Cell, input: usize, hidden: usize, w: &[f32], r: &[f32]) {
        let gh = cell.gates() * hidden;
        pack_b(&mut self.w, PACK_ROWS_W, gh, input, w, true);
        let (first, h) = r_parts(cell, hidden, r);
        let n_first = first.len() / hidden.max(1);
        transpose_into(&mut self.rt[0], first, n_first, hidden);
        pack_b(&mut self.r[0], PACK_ROWS_R, n_first, hidden, &self.rt[0], false);
        if !h.is_empty() {
            transpose_into(&mut self.rt[1], h, hidden, hidden);
            pack_b(&mut self.r[1], PACK_ROWS_R, hidden, hidden, &self.rt[1], false);
        }
    }
}

/// Where a direction's hidden states go: `y` is `[seq, dirs, batch, hidden]`, or
/// `[batch, seq, dirs, hidden]` when `batch_major`; this direction is `dir`.
pub struct YOut<'a> {
    pub y: &'a mut [f32],
    pub dirs: usize,
    pub dir: usize,
}

/// Working memory of [`Recurrence::run`], reused from call to call.
#[derive(Debug, Default)]
pub struct RnnScratch {
    /// The input projection, one row of `gates·hidden` per (time, batch).
    proj: Vec<f32>,
    /// `H R^T` of a step, `batch × gates·hidden`.
    rec: Vec<f32>,
    /// GRU: `r ⊙ H`, and one row of gates.
    tmp: Vec<f32>,
    row: Vec<f32>,
    /// The state: `batch × hidden` each; set them before [`Recurrence::run`] (the initial
    /// state), read them after (the last one).
    pub h: Vec<f32>,
    pub c: Vec<f32>,
    gemm: GemmScratch,
    packed: [PackedB; 2],
    /// `R^T`'s parts, when packed per call.
    rt: [Vec<f32>; 2],
}

impl RnnScratch {
    /// Sizes the state for `batch × hidden` (zeros).
    pub fn reset_state(&mut self, batch: usize, hidden: usize) {
        for v in [&mut self.h, &mut self.c] {
            v.clear();
            v.resize(batch * hidden, 0.0);
        }
    }
}

fn clip(v: &mut [f32], c: Option<f32>) {
    if let Some(c) = c {
        v.iter_mut().for_each(|x| *x = x.clamp(-c, c));
    }
}

impl Recurrence<'_> {
    /// Runs the direction from the state in `s.h` / `s.c`, leaving the last state there and
    /// writing each step's hidden state into `y`. Panics if a length does not match.
    pub fn run(&self, s: &mut RnnScratch, mut y: Option<YOut<'_>>) {
        let (seq, batch, hid) = (self.seq, self.batch, self.hidden);
        let g = self.cell.gates();
        let gh = g * hid;
        assert_eq!(self.x.len(), seq * batch * self.input, "rnn: x");
        assert_eq!(self.w.len(), gh * self.input, "rnn: w");
        assert_eq!(self.r.len(), gh * hid, "rnn: r");
        assert_eq!(self.lens.len(), batch, "rnn: lens");
        assert!(s.h.len() == batch * hid && s.c.len() == batch * hid, "rnn: state");
        if let Some(b) = self.bias {
            assert_eq!(b.len(), 2 * gh, "rnn: bias");
        }
        if let Some(p) = self.peephole {
            assert_eq!(p.len(), 3 * hid, "rnn: peephole");
        }
        let rows = seq * batch;
        let RnnScratch { proj, rec, tmp, row, h, c, gemm, packed, rt } = s;
        proj.resize(rows * gh, 0.0);
        rec.resize(batch * gh, 0.0);
        tmp.resize(batch * hid, 0.0);
        row.resize(gh, 0.0);
        // The projection of every time step, with the biases the state does not scale.
        let packed_w = self.packed.map(|p| &p.w);
        Gemm { packed_b: packed_w, ..Gemm::new(rows, gh, self.input, self.x, false, self.w, true) }.compute(
            gemm,
            0..rows,
            0..gh,
            proj,
        );
        let gru_lbr = matches!(self.cell, Cell::Gru { linear_before_reset: true });
        if let Some(b) = self.bias {
            let (wb, rb) = b.split_at(gh);
            for p in proj.chunks_exact_mut(gh) {
                for (j, v) in p.iter_mut().enumerate() {
                    *v += wb[j] + if gru_lbr && j >= 2 * hid { 0.0 } else { rb[j] };
                }
            }
        }
        // R^T packed once per call unless it was already: for the GRU without
        // linear_before_reset, its z, r part and its h part are two products.
        let split = matches!(self.cell, Cell::Gru { linear_before_reset: false });
        let (r_first, r_h) = r_parts(self.cell, hid, self.r);
        let n_first = if split { 2 * hid } else { gh };
        let (pk0, pk1, rt0, rt1) = match self.packed {
            Some(p) => (&p.r[0], &p.r[1], &p.rt[0][..], &p.rt[1][..]),
            None => {
                let ([pk0, pk1], [rt0, rt1]) = (packed, rt);
                transpose_into(rt0, r_first, n_first, hid);
                pack_b(pk0, batch, n_first, hid, rt0, false);
                if split {
                    transpose_into(rt1, r_h, hid, hid);
                    pack_b(pk1, batch, hid, hid, rt1, false);
                }
                (&*pk0, &*pk1, &rt0[..], &rt1[..])
            }
        };
        let x_row = |t: usize, b: usize| if self.batch_major { b * seq + t } else { t * batch + b };
        for step in 0..seq {
            let t = if self.reverse { seq - 1 - step } else { step };
            if self.lens.iter().all(|&l| t >= l) {
                continue;
            }
            let prod = Gemm { packed_b: Some(pk0), ..Gemm::new(batch, n_first, hid, h, false, rt0, false) };
            prod.compute(gemm, 0..batch, 0..n_first, &mut rec[..batch * n_first]);
            if split {
                self.gru_step(t, x_row, proj, rec, tmp, h, gemm, pk1, rt1);
            } else {
                for b in (0..batch).filter(|&b| t < self.lens[b]) {
                    let pre = &proj[x_row(t, b) * gh..][..gh];
                    let rec_b = &rec[b * gh..][..gh];
                    let (h_b, c_b) = (&mut h[b * hid..][..hid], &mut c[b * hid..][..hid]);
                    self.cell_step(pre, rec_b, row, h_b, c_b);
                }
            }
            if let Some(y) = y.as_mut() {
                for b in (0..batch).filter(|&b| t < self.lens[b]) {
                    let at = if self.batch_major {
                        ((b * seq + t) * y.dirs + y.dir) * hid
                    } else {
                        ((t * y.dirs + y.dir) * batch + b) * hid
                    };
                    y.y[at..at + hid].copy_from_slice(&h[b * hid..][..hid]);
                }
            }
        }
    }

    /// One step of one sequence for the cells whose recurrent product is one: RNN, LSTM,
    /// GRU with linear_before_reset.
    fn cell_step(&self, pre: &[f32], rec: &[f32], row: &mut [f32], h: &mut [f32], c: &mut [f32]) {
        let hid = self.hidden;
        let [f, g, act_h] = self.acts;
        for ((o, &p), &r) in row.iter_mut().zip(pre).zip(rec) {
            *o = p + r;
        }
        match self.cell {
            Cell::Rnn => {
                clip(row, self.clip);
                f.apply(row);
                h.copy_from_slice(row);
            }
            Cell::Gru { .. } => {
                // z, r from the sum; h from Xh + r ⊙ (H Rh^T + Rbh).
                let (zr, hg) = row.split_at_mut(2 * hid);
                clip(zr, self.clip);
                f.apply(zr);
                let rb = self.bias.map(|b| &b[3 * hid + 2 * hid..][..hid]);
                for j in 0..hid {
                    let rbh = rb.map_or(0.0, |b| b[j]);
                    hg[j] = pre[2 * hid + j] + zr[hid + j] * (rec[2 * hid + j] + rbh);
                }
                clip(hg, self.clip);
                g.apply(hg);
                for j in 0..hid {
                    let z = zr[j];
                    h[j] = (1.0 - z) * hg[j] + z * h[j];
                }
            }
            Cell::Lstm { input_forget } => {
                let (i, rest) = row.split_at_mut(hid);
                let (o, rest) = rest.split_at_mut(hid);
                let (fg, cg) = rest.split_at_mut(hid);
                if let Some(p) = self.peephole {
                    for j in 0..hid {
                        i[j] += p[j] * c[j];
                        fg[j] += p[2 * hid + j] * c[j];
                    }
                }
                clip(i, self.clip);
                f.apply(i);
                if input_forget {
                    for j in 0..hid {
                        fg[j] = 1.0 - i[j];
                    }
                } else {
                    clip(fg, self.clip);
                    f.apply(fg);
                }
                clip(cg, self.clip);
                g.apply(cg);
                for j in 0..hid {
                    c[j] = fg[j] * c[j] + i[j] * cg[j];
                }
                if let Some(p) = self.peephole {
                    for j in 0..hid {
                        o[j] += p[hid + j] * c[j];
                    }
                }
                clip(o, self.clip);
                f.apply(o);
                // h(C) into the cell gate's room.
                cg.copy_from_slice(c);
                act_h.apply(cg);
                for j in 0..hid {
                    h[j] = o[j] * cg[j];
                }
            }
        }
    }

    /// One step of the GRU without linear_before_reset, for every running sequence: z and
    /// r, then `(r ⊙ H) Rh^T`, then the new state.
    #[allow(clippy::too_many_arguments)]
    fn gru_step(
        &self,
        t: usize,
        x_row: impl Fn(usize, usize) -> usize,
        proj: &[f32],
        rec: &mut [f32],
        tmp: &mut [f32],
        h: &mut [f32],
        gemm: &mut GemmScratch,
        packed_h: &PackedB,
        rt_h: &[f32],
    ) {
        let (hid, batch) = (self.hidden, self.batch);
        let [f, g, _] = self.acts;
        let running = |b: usize| t < self.lens[b];
        // rec holds batch × 2H (z, r), then room for batch × H; z, r are activated in it.
        for b in 0..batch {
            let zr = &mut rec[b * 2 * hid..][..2 * hid];
            let pre = &proj[x_row(t, b) * 3 * hid..][..2 * hid];
            for (v, &p) in zr.iter_mut().zip(pre) {
                *v += p;
            }
            clip(zr, self.clip);
            f.apply(zr);
            for j in 0..hid {
                tmp[b * hid + j] = if running(b) { zr[hid + j] * h[b * hid + j] } else { 0.0 };
            }
        }
        let (zr_all, h_all) = rec.split_at_mut(batch * 2 * hid);
        let prod = Gemm { packed_b: Some(packed_h), ..Gemm::new(batch, hid, hid, tmp, false, rt_h, false) };
        prod.compute(gemm, 0..batch, 0..hid, &mut h_all[..batch * hid]);
        for b in (0..batch).filter(|&b| running(b)) {
            let hg = &mut h_all[b * hid..][..hid];
            let pre = &proj[x_row(t, b) * 3 * hid + 2 * hid..][..hid];
            for (v, &p) in hg.iter_mut().zip(pre) {
                *v += p;
            }
            clip(hg, self.clip);
            g.apply(hg);
            let z = &zr_all[b * 2 * hid..][..hid];
            for j in 0..hid {
                let hp = &mut h[b * hid + j];
                *hp = (1.0 - z[j]) * hg[j] + z[j] * *hp;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sigmoid(x: f64) -> f64 {
        1.0 / (1.0 + (-x).exp())
    }

    /// `m [rows, k] · v`, row `r` of the result.
    fn dot(m: &[f32], r: usize, v: &[f64]) -> f64 {
        v.iter().enumerate().map(|(j, &x)| m[r * v.len() + j] as f64 * x).sum()
    }

    /// One direction of an LSTM with peepholes or a GRU, step by step in f64.
    fn naive(rec: &Recurrence<'_>, h0: &[f32], c0: &[f32]) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let (s, b, n, hid) = (rec.seq, rec.batch, rec.input, rec.hidden);
        let bias = |k: usize| rec.bias.map_or(0.0, |v| v[k] as f64);
        let gh = rec.cell.gates() * hid;
        let mut y = vec![0.0; s * b * hid];
        let (mut hs, mut cs) =
            (h0.iter().map(|&v| v as f64).collect::<Vec<_>>(), c0.iter().map(|&v| v as f64).collect::<Vec<_>>());
        for bi in 0..b {
            let steps: Vec<usize> =
                if rec.reverse { (0..rec.lens[bi]).rev().collect() } else { (0..rec.lens[bi]).collect() };
            for t in steps {
                let x: Vec<f64> = rec.x[(t * b + bi) * n..][..n].iter().map(|&v| v as f64).collect();
                let h: Vec<f64> = hs[bi * hid..][..hid].to_vec();
                let xw = |g: usize| dot(rec.w, g, &x) + bias(g);
                let hr = |g: usize| dot(rec.r, g, &h) + bias(gh + g);
                for j in 0..hid {
                    let c = cs[bi * hid + j];
                    let (new_h, new_c) = match rec.cell {
                        Cell::Lstm { .. } => {
                            let p = |k: usize| rec.peephole.map_or(0.0, |p| p[k * hid + j] as f64);
                            let i = sigmoid(xw(j) + hr(j) + p(0) * c);
                            let f = sigmoid(xw(2 * hid + j) + hr(2 * hid + j) + p(2) * c);
                            let cc = (xw(3 * hid + j) + hr(3 * hid + j)).tanh();
                            let c = f * c + i * cc;
                            let o = sigmoid(xw(hid + j) + hr(hid + j) + p(1) * c);
                            (o * c.tanh(), c)
                        }
                        _ => {
                            let z = sigmoid(xw(j) + hr(j));
                            let rh: Vec<f64> = (0..hid).map(|k| sigmoid(xw(hid + k) + hr(hid + k)) * h[k]).collect();
                            let hh = (xw(2 * hid + j) + dot(rec.r, 2 * hid + j, &rh) + bias(gh + 2 * hid + j)).tanh();
                            ((1.0 - z) * hh + z * h[j], c)
                        }
                    };
                    y[(t * b + bi) * hid + j] = new_h;
                    cs[bi * hid + j] = new_c;
                    hs[bi * hid + j] = new_h;
                }
            }
        }
        (y, hs, cs)
    }

    #[test]
    fn lstm_with_peepholes_and_gru_match_a_step_by_step_reference() {
        let v = |n: usize, seed: u64| crate::test_values(n, seed).into_iter().map(|x| x * 0.7).collect::<Vec<f32>>();
        let (s, n, hid) = (4, 3, 5);
        for (b, lens) in [(2, &[4, 2][..]), (1, &[3][..])] {
            for (cell, acts) in [
                (Cell::Lstm { input_forget: false }, [Act::Sigmoid, Act::Tanh, Act::Tanh]),
                (Cell::Gru { linear_before_reset: false }, [Act::Sigmoid, Act::Tanh, Act::Tanh]),
            ] {
                for reverse in [false, true] {
                    let gh = cell.gates() * hid;
                    let (x, w, r, bias, p) =
                        (v(s * b * n, 1), v(gh * n, 2), v(gh * hid, 3), v(2 * gh, 4), v(3 * hid, 5));
                    let (h0, c0) = (v(b * hid, 6), v(b * hid, 7));
                    let lstm = matches!(cell, Cell::Lstm { .. });
                    let rec = Recurrence {
                        cell,
                        seq: s,
                        batch: b,
                        input: n,
                        hidden: hid,
                        batch_major: false,
                        x: &x,
                        w: &w,
                        r: &r,
                        bias: Some(&bias),
                        peephole: lstm.then_some(&p[..]),
                        lens,
                        reverse,
                        acts,
                        clip: None,
                        packed: None,
                    };
                    let mut scratch = RnnScratch::default();
                    scratch.reset_state(b, hid);
                    scratch.h.copy_from_slice(&h0);
                    scratch.c.copy_from_slice(&c0);
                    let mut y = vec![0.0; s * b * hid];
                    rec.run(&mut scratch, Some(YOut { y: &mut y, dirs: 1, dir: 0 }));
                    let (want_y, want_h, want_c) = naive(&rec, &h0, &c0);
                    let close =
                        |got: &[f32], want: &[f64]| got.iter().zip(want).all(|(&g, &w)| (g as f64 - w).abs() < 1e-5);
                    assert!(close(&y, &want_y), "{cell:?} reverse {reverse}: Y {y:?} vs {want_y:?}");
                    assert!(close(&scratch.h, &want_h), "{cell:?} reverse {reverse}: Y_h");
                    assert!(!lstm || close(&scratch.c, &want_c), "{cell:?} reverse {reverse}: Y_c");
                    // The weights packed once give the same bits.
                    let mut pw = PackedWeights::default();
                    pw.pack(cell, n, hid, &w, &r);
                    let mut again = vec![0.0; s * b * hid];
                    scratch.reset_state(b, hid);
                    scratch.h.copy_from_slice(&h0);
                    scratch.c.copy_from_slice(&c0);
                    Recurrence { packed: Some(&pw), ..rec }
                        .run(&mut scratch, Some(YOut { y: &mut again, dirs: 1, dir: 0 }));
                    assert!(again.iter().zip(&y).all(|(a, b)| a.to_bits() == b.to_bits()), "{cell:?}: packed once");
                }
            }
        }
    }
}
