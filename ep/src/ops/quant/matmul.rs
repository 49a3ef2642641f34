//! MatMulInteger (`y = (a - za) × (b - zb)` in int32) and QLinearMatMul (that product
//! requantized: `y = round((sa · sb / sy) · acc) + zy`), with numpy batch broadcasting
//! and 1-D operands. uint8 and int8 operands; the zero point of `a` one value, those of
//! `b` (and its scale) one value or one per column. QLinearMatMul's scales are float32
//! (or float16 from opset 21). Not claimed: the float8 types.

use std::sync::Arc;

use rivet_kernels::qgemm::{qgemm, QOut, Requant};

use super::super::op::util::{bad_types, check_attrs, check_inputs, input, input_type, output_type};
use super::super::{Op, RunIn, ShapeError, ShapeIn};
use super::{data_key, float_at, int_at, is_q8, pack_a, pack_b, scalar_float, scalar_int, sub, Packs};
use crate::data::DataMut;
use crate::graph::dtype::{FLOAT, FLOAT16, INT32};
use crate::graph::{NodeDesc, Shape};

/// Batch axes a product may have.
const MAX_BATCH: usize = 8;

#[derive(Debug)]
struct QMatMul {
    /// QLinearMatMul (else MatMulInteger).
    qlinear: bool,
}

impl QMatMul {
    /// Input positions of a, its zero point, b and its zero point.
    fn slots(&self) -> [usize; 4] {
        if self.qlinear {
            [0, 2, 3, 5]
        } else {
            [0, 2, 1, 3]
        }
    }
}

pub fn matmul_integer(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &[])?;
    check_inputs(node, 2, 4)?;
    let (a, b) = (input_type(node, 0), input_type(node, 1));
    let zps_ok = (input(node, 2).is_none() || input_type(node, 2) == a)
        && (input(node, 3).is_none() || input_type(node, 3) == b);
    if !is_q8(a) || !is_q8(b) || !zps_ok || output_type(node, 0) != INT32 {
        return Err(bad_types(node, "uint8 or int8 operands (zero points of their types) to int32"));
    }
    Ok(Arc::new(QMatMul { qlinear: false }))
}

pub fn qlinear_matmul(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &[])?;
    check_inputs(node, 8, 8)?;
    let t = |k| input_type(node, k);
    let scale_ok = |k| t(k) == FLOAT || (node.since_version >= 21 && t(k) == FLOAT16);
    let y = output_type(node, 0);
    let ok = is_q8(t(0))
        && is_q8(t(3))
        && is_q8(y)
        && t(2) == t(0)
        && t(5) == t(3)
        && t(7) == y
        && [1, 4, 6].into_iter().all(scale_ok);
    if !ok {
        return Err(bad_types(node, "uint8 or int8 with float32 (or float16) scales and zero points of each's type"));
    }
    Ok(Arc::new(QMatMul { qlinear: true }))
}

/// The product's sizes and batch broadcasting.
struct Dims {
    m: usize,
    k: usize,
    n: usize,
    out: Shape,
    /// The output's batch dims and each operand's, right-aligned to them (1 = broadcast).
    batch: [usize; MAX_BATCH],
    a_batch: [usize; MAX_BATCH],
    b_batch: [usize; MAX_BATCH],
    rank: usize,
    b_rank: usize,
}

impl Dims {
    fn new(a: &[usize], b: &[usize]) -> Result<Dims, String> {
        if a.is_empty() || b.is_empty() {
            return Err("a matrix product's operands must have rank 1 or more".into());
        }
        let (ab, m, k) =
            if a.len() == 1 { (&a[..0], 1, a[0]) } else { (&a[..a.len() - 2], a[a.len() - 2], a[a.len() - 1]) };
        let (bb, kb, n) =
            if b.len() == 1 { (&b[..0], b[0], 1) } else { (&b[..b.len() - 2], b[b.len() - 2], b[b.len() - 1]) };
        if k != kb {
            return Err(format!("the operands {a:?} and {b:?} do not chain (inner sizes {k} and {kb})"));
        }
        let rank = ab.len().max(bb.len());
        if rank > MAX_BATCH {
            return Err(format!("more than {MAX_BATCH} batch axes"));
        }
        let pad = |s: &[usize]| -> [usize; MAX_BATCH] {
            let mut p = [1; MAX_BATCH];
            p[rank - s.len()..rank].copy_from_slice(s);
            p
        };
        let (a_batch, b_batch) = (pad(ab), pad(bb));
        let mut batch = [1; MAX_BATCH];
        let mut out = Shape::new();
        for d in 0..rank {
            let (x, y) = (a_batch[d], b_batch[d]);
            if x != y && x != 1 && y != 1 {
                return Err(format!("the batch dims of {a:?} and {b:?} do not broadcast"));
            }
            batch[d] = if x == 1 { y } else { x };
            out.push(batch[d]);
        }
        if a.len() > 1 {
            out.push(m);
        }
        if b.len() > 1 {
            out.push(n);
        }
        Ok(Dims { m, k, n, out, batch, a_batch, b_batch, rank, b_rank: b.len() })
    }

    fn batches(&self) -> usize {
        self.batch[..self.rank].iter().product()
    }

    /// The matrix index into a and into b of output batch `t`.
    fn operands(&self, mut t: usize) -> (usize, usize) {
        let (mut ia, mut ib, mut sa, mut sb) = (0, 0, 1, 1);
        for d in (0..self.rank).rev() {
            let i = t % self.batch[d];
            t /= self.batch[d];
            if self.a_batch[d] != 1 {
                ia += i * sa;
            }
            if self.b_batch[d] != 1 {
                ib += i * sb;
            }
            sa *= self.a_batch[d];
            sb *= self.b_batch[d];
        }
        (ia, ib)
    }
}

/// How a parameter of b (its zero point or scale) applies.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Param {
    /// One value.
    One,
    /// One per column, the same for every matrix of b.
    Columns,
    /// One per column of each matrix of b (shape `[batch.., 1, n]`).
    BatchColumns,
}

impl Param {
    /// The element for column `j` of b's matrix `tb` (`None`: the one value).
    fn index(self, tb: usize, j: usize, n: usize) -> Option<usize> {
        match self {
            Param::One => None,
            Param::Columns => Some(j),
            Param::BatchColumns => Some(tb * n + j),
        }
    }
}

impl Dims {
    /// The layout of a parameter of b of shape `p`: one value, `[n]` (or `[1, n]`), or
    /// b's shape with 1 for its rows.
    fn b_param(&self, p: &[usize], what: &str) -> Result<Param, String> {
        let count: usize = p.iter().product();
        if count == 1 && p.len() <= 1 {
            return Ok(Param::One);
        }
        if count == self.n && p.last() == Some(&self.n) && p.len() <= 2 {
            return Ok(Param::Columns);
        }
        let b_rank = self.b_rank;
        let batch_of_b = &self.b_batch[self.rank - (b_rank - 2).min(self.rank)..self.rank];
        if b_rank > 2
            && p.len() == b_rank
            && p[b_rank - 2] == 1
            && p[b_rank - 1] == self.n
            && p[..b_rank - 2] == *batch_of_b
        {
            return Ok(Param::BatchColumns);
        }
        Err(format!("{what} must be a scalar, one per column [{}] or b's shape with 1 row, has shape {p:?}", self.n))
    }
}

impl Op for QMatMul {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let [a, _, b, _] = self.slots();
        Ok(Dims::new(x.shapes[a], x.shapes[b])?.out)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let [ia, iza, ib, izb] = self.slots();
        let d = Dims::new(x.shapes[ia], x.shapes[ib])?;
        let (m, k, n) = (d.m, d.k, d.n);
        let za = scalar_int(x.ins.get(iza).copied(), x.shapes.get(iza).copied(), "a's zero point")?;
        let zb_data = x.ins.get(izb).copied();
        let zb_at = match x.shapes.get(izb) {
            Some(s) => d.b_param(s, "b's zero point")?,
            None => Param::One,
        };
        let zb0 = zb_data.and_then(|z| int_at(z, 0)).unwrap_or(0);

        let (mut sa, mut sy, mut sb_at) = (0.0, 0.0, Param::One);
        if self.qlinear {
            sa = scalar_float(x.ins[1], x.shapes[1], "a's scale")?;
            sy = scalar_float(x.ins[6], x.shapes[6], "y's scale")?;
            sb_at = d.b_param(x.shapes[4], "b's scale")?;
        }
        let zy = if self.qlinear { scalar_int(Some(x.ins[7]), Some(x.shapes[7]), "y's zero point")? } else { 0 };
        // B (and its zero point) the same data every Run: packed once, kept while it is.
        let constant = |i: usize| i >= x.ins.len() || x.constant & (1 << i) != 0;
        let b_key = data_key(x.ins[ib]).filter(|_| constant(ib) && constant(izb));
        let p = x.scratch.state::<Packs>();
        let mut packed_b = None;
        for t in 0..d.batches() {
            let (ta, tb) = d.operands(t);
            pack_a(sub(x.ins[ia], ta * m * k, m * k)?, m, k, k, &[za], &mut p.a)?;
            if packed_b != Some(tb) {
                let key = b_key.map(|(at, len)| (at, len, tb));
                if key.is_none() || p.key != key {
                    p.zero.clear();
                    p.zero.extend((0..if zb_at == Param::One { 1 } else { n }).map(|j| match zb_at.index(tb, j, n) {
                        Some(i) => zb_data.and_then(|z| int_at(z, i)).unwrap_or(0),
                        None => zb0,
                    }));
                    p.key = None;
                    pack_b(sub(x.ins[ib], tb * k * n, k * n)?, k, n, n, &p.zero, &mut p.b)?;
                    p.key = key;
                }
                if self.qlinear {
                    p.scales.clear();
                    for j in 0..if sb_at == Param::One { 1 } else { n } {
                        let at = sb_at.index(tb, j, n).unwrap_or(0);
                        let sb = float_at(x.ins[4], at).ok_or("b's scale is not float32 or float16")?;
                        p.scales.push(sa * sb / sy);
                    }
                }
                packed_b = Some(tb);
            }
            let at = t * m * n..(t + 1) * m * n;
            let rq = Requant { scale: &p.scales, per_row: false, bias: None, zy };
            match out {
                DataMut::I32(y) if !self.qlinear => qgemm(&p.a, &p.b, 0..n, QOut::I32(&mut y[at]), n),
                DataMut::U8(y) if self.qlinear => qgemm(&p.a, &p.b, 0..n, QOut::U8(&mut y[at], rq), n),
                DataMut::I8(y) if self.qlinear => qgemm(&p.a, &p.b, 0..n, QOut::I8(&mut y[at], rq), n),
                _ => return Err("the output element type differs from the plan's".into()),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_dims_broadcast_and_vectors_drop_their_axis() {
        let d = Dims::new(&[2, 1, 3, 4], &[5, 4, 6]).unwrap();
        assert_eq!(d.out.as_slice(), [2, 5, 3, 6]);
        assert_eq!(d.batches(), 10);
        assert_eq!(d.operands(7), (1, 2));
        let v = Dims::new(&[4], &[4, 6]).unwrap();
        assert_eq!((v.m, v.out.as_slice()), (1, &[6][..]));
        assert!(Dims::new(&[3, 4], &[5, 6]).is_err());
        assert!(Dims::new(&[2, 3, 4], &[3, 4, 6]).is_err());
    }
}
