//! The decomposed attention that `plan::passes::fuse_attention` finds (MatMul, a scale,
//! an optional mask Add, Softmax along the last axis, MatMul), run as one step: inputs Q,
//! K, V and the mask, as the nodes read them. When every output matrix has its own
//! scores (the mask and V broadcast no further than Q · op(K)), it runs strip by strip
//! of query rows (`rivet_kernels::attention::chain`); otherwise the nodes' own kernels
//! run one after another on whole tensors in the step's scratch. Either way the output
//! has the unfused nodes' bits, but for which of two NaNs an addition keeps (the mask
//! added to a NaN score: the compiler orders an addition's operands as it likes).

use std::sync::Mutex;

use rivet_kernels::attention::chain::{Chain, Mask};
use rivet_kernels::nn::{self, Scale};
use rivet_kernels::{binary_f32, BinaryOp, Broadcast};
use smallvec::SmallVec;

use crate::data::{Data, DataMut};
use crate::graph::Shape;
use crate::ops::geometry::{broadcast_strides, matmul_shape};
use crate::ops::{Op, RunIn, ShapeError, ShapeIn};
use crate::parallel::{cores, lock, MAX_TASKS};
use crate::products::{self, Extras, MatMul};

/// Work below this many multiply-adds (both products) runs as one task.
const PARALLEL_MIN_MACS: usize = 1 << 18;

/// What the fused nodes do besides the two products.
#[derive(Debug)]
pub struct AttentionChain {
    /// The first MatMul reads K stored `[.., L, d]` (a Transpose folded into it), the
    /// second V stored `[.., dv, L]`.
    pub trans_k: bool,
    pub trans_v: bool,
    pub scale: Option<Scale>,
    /// Input 3 is added to the scores.
    pub mask: bool,
    /// The scores' rank the Softmax's axis was resolved against (`None`: axis -1).
    pub rank: Option<usize>,
}

/// Q, K, V and the mask.
type Operands<'a> = (&'a [f32], &'a [f32], &'a [f32], Option<&'a [f32]>);

/// The shapes of the chain's values: scores, scores after the mask, output.
struct Shapes {
    scores: Shape,
    masked: Shape,
    out: Shape,
}

/// `shape` with its last two axes swapped when `trans` (a matrix stored transposed).
fn op_shape(shape: &[usize], trans: bool) -> Shape {
    let mut s = Shape::from_slice(shape);
    if trans && s.len() >= 2 {
        let r = s.len();
        s.swap(r - 2, r - 1);
    }
    s
}

impl AttentionChain {
    fn shapes(&self, ins: &[&[usize]]) -> Result<Shapes, String> {
        let scores = matmul_shape(ins[0], &op_shape(ins[1], self.trans_k)).map_err(|e| format!("Q · K: {e}"))?;
        let masked = match self.mask {
            true => {
                Shape::from_slice(Broadcast::new(&scores, ins[3]).map_err(|e| format!("the mask: {e}"))?.out_shape())
            }
            false => scores.clone(),
        };
        // Softmax's input: the scores after the mask (which may add axes).
        if masked.is_empty() || self.rank.is_some_and(|r| r != masked.len()) {
            return Err(format!("the Softmax input's rank {} is not the model's {:?}", masked.len(), self.rank));
        }
        let out = matmul_shape(&masked, &op_shape(ins[2], self.trans_v)).map_err(|e| format!("P · V: {e}"))?;
        Ok(Shapes { scores, masked, out })
    }
}

impl Op for AttentionChain {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(self.shapes(x.shapes)?.out)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let f32_in = |k: usize| match x.ins.get(k) {
            Some(Data::F32(v)) => Ok(*v),
            _ => Err(format!("input {k}: expected float32")),
        };
        let (q, k, v) = (f32_in(0)?, f32_in(1)?, f32_in(2)?);
        let mask = if self.mask { Some(f32_in(3)?) } else { None };
        let DataMut::F32(y) = out else { return Err("the output is not float32".into()) };
        let shapes = self.shapes(x.shapes)?;
        let (sq, sk, sv) = (x.shapes[0], x.shapes[1], x.shapes[2]);
        let r = shapes.out.len();
        let batch = |s: &[usize]| -> SmallVec<[usize; 8]> { s[..s.len().saturating_sub(2)].iter().copied().collect() };
        // Strips need each output matrix to have scores of its own, and Q, K, V matrices.
        let own_scores = shapes.masked == shapes.scores && batch(&shapes.scores) == batch(&shapes.out);
        if !own_scores || sq.len() < 2 || sk.len() < 2 || sv.len() < 2 {
            return self.whole(x, (q, k, v, mask), &shapes, y);
        }
        let (s, d) = (sq[sq.len() - 2], sq[sq.len() - 1]);
        // Unfused, a product whose B is one matrix takes all of A's rows at once: with one
        // query row a matrix, the strips' products of one row would round otherwise (the
        // matrix-vector path), so those run whole (found by review: a decode step with K
        // or V shared as a plain matrix).
        let rows_of = |a: &[usize]| a[..a.len() - 1].iter().product::<usize>();
        let folds = |a: &[usize], b: &[usize]| b.len() == 2 && a.len() > 2 && rows_of(a) > 1;
        if s == 1 && (folds(sq, sk) || folds(&shapes.masked, sv)) {
            return self.whole(x, (q, k, v, mask), &shapes, y);
        }
        let l = shapes.scores[r - 1];
        let dv = shapes.out[r - 1];
        let out_batch = batch(&shapes.out);
        let count: usize = out_batch.iter().product();
        // Each operand's element strides along the output's axes (0 where it broadcasts);
        // matrix `i` of the output starts at `offset_of(i, out_batch, batch axes' strides)`.
        let (qs, ks, vs) = (broadcast_strides(sq, r), broadcast_strides(sk, r), broadcast_strides(sv, r));
        let ms = if self.mask { broadcast_strides(x.shapes[3], r) } else { SmallVec::from_elem(0, r) };
        let b = r - 2;
        let (q_at, k_at) = (|i| offset_of(i, &out_batch, &qs[..b]), |i| offset_of(i, &out_batch, &ks[..b]));
        let (v_at, head) = (|i| offset_of(i, &out_batch, &vs[..b]), |i| offset_of(i, &out_batch, &ms[..b]));
        let chain = Chain {
            count,
            s,
            l,
            d,
            dv,
            q,
            k,
            v,
            q_at: &q_at,
            k_at: &k_at,
            v_at: &v_at,
            trans_k: self.trans_k,
            trans_v: self.trans_v,
            scale: self.scale,
            mask: mask.map(|data| Mask { data, head: &head, row: ms[r - 2], col: ms[r - 1] }),
        };
        let items = chain.items();
        let macs = count * s * l * (d + dv);
        let tasks = cores().min(items).min(MAX_TASKS);
        if tasks < 2 || macs < PARALLEL_MIN_MACS {
            chain.run(0..items, y, &mut x.par.scratch().task(0).chain);
            return Ok(());
        }
        // Each task a run of items, its rows of the output its own.
        let per = items.div_ceil(tasks);
        let tasks = items.div_ceil(per);
        let parts: SmallVec<[Mutex<&mut [f32]>; MAX_TASKS]> = {
            let mut rest = &mut y[..];
            (0..tasks)
                .map(|t| {
                    let len = chain.item_start(((t + 1) * per).min(items)) - chain.item_start(t * per);
                    let (mine, next) = std::mem::take(&mut rest).split_at_mut(len);
                    rest = next;
                    Mutex::new(mine)
                })
                .collect()
        };
        x.par.for_each_index(tasks, &|t, scratch| {
            chain.run(t * per..((t + 1) * per).min(items), &mut lock(&parts[t]), &mut scratch.chain)
        });
        Ok(())
    }
}

impl AttentionChain {
    /// The unfused nodes one after another on whole tensors (the scores in the step's
    /// scratch): for a mask or V that broadcasts the scores to more matrices, and
    /// operands of rank 1.
    fn whole(&self, x: RunIn<'_, '_>, operands: Operands<'_>, shapes: &Shapes, y: &mut [f32]) -> Result<(), String> {
        let (q, k, v, mask) = operands;
        let (scores_len, masked_len) = (shapes.scores.iter().product::<usize>(), shapes.masked.iter().product());
        let buf = &mut x.scratch.f32;
        if buf.len() < scores_len + 2 * masked_len {
            buf.resize(scores_len + 2 * masked_len, 0.0);
        }
        let (scores, rest) = buf.split_at_mut(scores_len);
        let (masked, probs) = rest.split_at_mut(masked_len);
        let probs = &mut probs[..masked_len];
        let epilogue = nn::Epilogue { scale: self.scale, ..nn::Epilogue::default() };
        let first = MatMul { alpha: 1.0, trans_b: self.trans_k };
        products::matmul(q, x.shapes[0], k, x.shapes[1], first, Extras { packed_b: None, epilogue }, scores, x.par);
        let masked: &[f32] = match mask {
            Some(m) => {
                let plan = Broadcast::new(&shapes.scores, x.shapes[3]).map_err(|e| e.to_string())?;
                binary_f32(BinaryOp::Add, &plan, scores, m, masked, 0);
                masked
            }
            None => scores,
        };
        let n = *shapes.masked.last().expect("rank 1 or more");
        if let Some(rows) = masked_len.checked_div(n) {
            nn::softmax(masked, probs, rows, n, 1, false);
        }
        let second = MatMul { alpha: 1.0, trans_b: self.trans_v };
        products::matmul(probs, &shapes.masked, v, x.shapes[2], second, Extras::default(), y, x.par);
        Ok(())
    }
}

/// Where element `i` of a row-major index space of `dims` lies, with `strides` per axis.
fn offset_of(i: usize, dims: &[usize], strides: &[usize]) -> usize {
    let (mut rest, mut offset) = (i, 0);
    for (&n, &stride) in dims.iter().zip(strides).rev() {
        offset += (rest % n.max(1)) * stride;
        rest /= n.max(1);
    }
    offset
}
