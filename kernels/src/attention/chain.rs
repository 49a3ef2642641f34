//! Attention as the exporters write it, run as one step: `softmax(scale(Q · op(K)) +
//! mask) · op(V)` (a MatMul, an optional Mul or Div by a scalar, an optional Add, Softmax
//! along the last axis, a MatMul), strip by strip of query rows, so that a strip's scores
//! stay in the caches. Unfused, every head's S × L scores go to memory and come back
//! twice (Whisper-small's 500 × 500 scores are 6 MB a layer, and its Softmax and second
//! product ran at memory speed).
//!
//! Each strip runs the kernels the unfused nodes run, on a row range of the same
//! products: the GEMM sums every element in the same order whichever rows a call
//! computes and whether B is packed (the depth blocks are the product's), the scale is
//! the product's epilogue, the mask is one addition, and Softmax works row by row. So the
//! output has the unfused nodes' bits (but for which NaN payload an addition of two
//! NaNs keeps).

use std::ops::Range;

use crate::gemm::{pack_b, row_tile, Epilogue, Gemm, GemmScratch, PackedB, Scale};

/// The most scores a strip holds (floats): 128 KiB, twice with their softmax, beside K
/// and V packed (a head's 500 × 64 each, 128 KiB) within a core's L2.
const STRIP_FLOATS: usize = 32 << 10;

/// Where a matrix of an operand starts (in elements) for output matrix `i`: a batch axis
/// the operand broadcasts repeats one of its matrices.
pub type MatrixAt<'a> = &'a (dyn Fn(usize) -> usize + Sync);

/// An additive mask broadcast over the scores: for output matrix `i` and query row `r`,
/// the row's `L` terms are `data[head(i) + r * row + j * col]` (`col` 0 or 1).
#[derive(Clone, Copy)]
pub struct Mask<'a> {
    pub data: &'a [f32],
    pub head: MatrixAt<'a>,
    pub row: usize,
    pub col: usize,
}

/// One fused attention: `count` output matrices of `s` query rows and `dv` columns, each
/// from Q (`s × d`), K (`op(K)`: `d × l`; stored `l × d` when `trans_k`) and V (`op(V)`:
/// `l × dv`; stored `dv × l` when `trans_v`), with the matrix of each operand at its
/// `*_at(i)`.
#[derive(Clone, Copy)]
pub struct Chain<'a> {
    pub count: usize,
    pub s: usize,
    pub l: usize,
    pub d: usize,
    pub dv: usize,
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub q_at: MatrixAt<'a>,
    pub k_at: MatrixAt<'a>,
    pub v_at: MatrixAt<'a>,
    pub trans_k: bool,
    pub trans_v: bool,
    pub scale: Option<Scale>,
    pub mask: Option<Mask<'a>>,
}

/// One task's working memory: K and V packed (for the matrix it is on), a strip's
/// scores and probabilities, the products' packing. Each grows to the largest it has
/// needed, then no call allocates.
#[derive(Debug, Default)]
pub struct ChainScratch {
    k: PackedB,
    v: PackedB,
    scores: Vec<f32>,
    probs: Vec<f32>,
    gemm: GemmScratch,
}

impl Chain<'_> {
    /// Query rows a strip takes: whole tiles of the first product, its scores at most
    /// `STRIP_FLOATS`.
    fn strip_rows(&self) -> usize {
        let tile = row_tile(self.s, self.l).max(1);
        (STRIP_FLOATS / self.l.max(1)).max(tile) / tile * tile
    }

    /// Strips per matrix. A last strip of one row joins the one before: a product of one
    /// row takes the matrix-vector path, which may round otherwise than the tiles.
    fn strips(&self) -> usize {
        let r = self.strip_rows();
        let n = self.s.div_ceil(r);
        if n > 1 && self.s - (n - 1) * r == 1 {
            n - 1
        } else {
            n
        }
    }

    /// The query rows of strip `t` (of `strips`).
    fn rows(&self, t: usize, strips: usize) -> Range<usize> {
        let start = t * self.strip_rows();
        start..if t + 1 == strips { self.s } else { start + self.strip_rows() }
    }

    /// The units of work: every strip of every matrix, matrix by matrix.
    pub fn items(&self) -> usize {
        self.count * self.strips()
    }

    /// Where item `item`'s rows start in the output (in elements); `items()` gives the
    /// output's length.
    pub fn item_start(&self, item: usize) -> usize {
        let strips = self.strips().max(1);
        let (i, t) = (item / strips, item % strips);
        (i * self.s + t * self.strip_rows()).min(self.count * self.s) * self.dv
    }

    /// Computes items `items` into `out`, which holds their rows (from
    /// `item_start(items.start)` to `item_start(items.end)`).
    pub fn run(&self, items: Range<usize>, out: &mut [f32], scratch: &mut ChainScratch) {
        let ChainScratch { k: packed_k, v: packed_v, scores, probs, gemm } = scratch;
        let (s, l, d, dv) = (self.s, self.l, self.d, self.dv);
        let strips = self.strips();
        assert_eq!(out.len(), self.item_start(items.end) - self.item_start(items.start), "attention chain: output");
        // A product of more than one row and column packs its B once a matrix (a product
        // of one row or column ignores a packed B: the matrix-vector path reads B).
        let pack_k = s > 1 && l > 1 && d > 0;
        let pack_v = s > 1 && dv > 1 && l > 0;
        // The matrix whose K and V are packed: none yet in this call (a Run's data is new).
        let mut packed: Option<usize> = None;
        let mut at = 0;
        for item in items {
            let (i, rows) = (item / strips, self.rows(item % strips, strips));
            let q = &self.q[(self.q_at)(i)..][..s * d];
            let k = &self.k[(self.k_at)(i)..][..l * d];
            let v = &self.v[(self.v_at)(i)..][..l * dv];
            if packed != Some(i) {
                if pack_k {
                    pack_b(packed_k, s, l, d, k, self.trans_k);
                }
                if pack_v {
                    pack_b(packed_v, s, dv, l, v, self.trans_v);
                }
                packed = Some(i);
            }
            let r = rows.len();
            if scores.len() < r * l {
                scores.resize(r * l, 0.0);
                probs.resize(r * l, 0.0);
            }
            let (sc, pr) = (&mut scores[..r * l], &mut probs[..r * l]);
            let epilogue = Epilogue { scale: self.scale, ..Epilogue::default() };
            let qk = Gemm {
                packed_b: pack_k.then_some(&*packed_k),
                epilogue,
                ..Gemm::new(s, l, d, q, false, k, self.trans_k)
            };
            qk.compute(gemm, rows.clone(), 0..l, sc);
            if let Some(m) = &self.mask {
                let head = (m.head)(i);
                for (row, r_at) in sc.chunks_exact_mut(l.max(1)).zip(rows.clone()) {
                    let base = head + r_at * m.row;
                    if m.col == 0 {
                        let add = m.data[base];
                        row.iter_mut().for_each(|x| *x += add);
                    } else {
                        row.iter_mut().zip(&m.data[base..][..l]).for_each(|(x, &add)| *x += add);
                    }
                }
            }
            crate::norm::softmax(sc, pr, r, l, 1, false);
            let pv = Gemm { packed_b: pack_v.then_some(&*packed_v), ..Gemm::new(r, dv, l, pr, false, v, self.trans_v) };
            pv.compute(gemm, 0..r, 0..dv, &mut out[at..at + r * dv]);
            at += r * dv;
        }
    }
}

#[cfg(test)]
#[path = "chain_tests.rs"]
mod tests;
