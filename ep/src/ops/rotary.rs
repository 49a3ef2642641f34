//! RotaryEmbedding (opset 23) on float32: each head's first `rotary_embedding_dim`
//! elements rotated in pairs (halves, or interleaved) by the cos / sin caches, which are
//! indexed by the int64 position ids when given, else by (batch, position).

use std::sync::Arc;

use super::claim::{bad_types, outputs};
use super::geometry::broadcast_strides;
use super::op::util::{check_attrs, check_inputs};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::int_attr;
use rivet_kernels::{nn, Broadcast};
use smallvec::SmallVec;

#[derive(Debug)]
struct Rotary {
    heads: usize,
    rotary_dim: usize,
    interleaved: bool,
    positions: bool,
}

pub fn rotary_embedding(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 3, 4)?;
    outputs(node, false)?;
    check_attrs(node, &["num_heads", "rotary_embedding_dim", "interleaved"])?;
    let nonneg = |name| {
        let v = int_attr(node, name, 0)?;
        usize::try_from(v).map_err(|_| format!("{name} {v}"))
    };
    let op = Rotary {
        heads: nonneg("num_heads")?,
        rotary_dim: nonneg("rotary_embedding_dim")?,
        interleaved: int_attr(node, "interleaved", 0)? != 0,
        positions: node.inputs.get(3).is_some_and(Option::is_some),
    };
    let types: Vec<i32> = node.inputs.iter().flatten().map(|v| v.elem_type).collect();
    let out = node.outputs[0].as_ref().map_or(0, |v| v.elem_type);
    let ok = types[..3].iter().all(|&t| t == dtype::FLOAT)
        && (!op.positions || types[3] == dtype::INT64)
        && out == dtype::FLOAT;
    if !ok {
        return Err(bad_types(node, "other element types"));
    }
    Ok(Arc::new(op))
}

impl Rotary {
    /// RotaryEmbedding's sizes: batch, sequence, heads, head size, rotated size; checked.
    fn dims(&self, ins: &[&[usize]]) -> Result<[usize; 5], String> {
        let x = ins[0];
        let (b, s, h, d) = match x.len() {
            4 => (x[0], x[2], x[1], x[3]),
            3 if self.heads > 0 && x[2].is_multiple_of(self.heads) => (x[0], x[1], self.heads, x[2] / self.heads),
            _ => return Err(format!("input {x:?} must be [B, H, S, D], or [B, S, H * D] with num_heads")),
        };
        let rot = if self.rotary_dim == 0 { d } else { self.rotary_dim };
        if rot > d || !rot.is_multiple_of(2) {
            return Err(format!("rotary_embedding_dim {rot} for a head of {d}"));
        }
        let (cos, sin) = (ins[1], ins[2]);
        let cache_ok = if self.positions {
            let p = ins[3];
            p == [b, s] && cos.len() == 2 && cos[1] == rot / 2
        } else {
            cos == [b, s, rot / 2]
        };
        if !cache_ok || cos != sin {
            return Err(format!("cos {cos:?} / sin {sin:?} caches do not match the input"));
        }
        Ok([b, s, h, d, rot])
    }
}

impl Op for Rotary {
    fn halves_in_f32(&self) -> bool {
        true
    }

    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        self.dims(x.shapes)?;
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let mismatch = || "element types differ from the plan's".to_string();
        let shapes = x.shapes;
        let [b, s, h, d, rot] = self.dims(shapes)?;
        let (DataMut::F32(y), Data::F32(input), Data::F32(cos), Data::F32(sin)) = (out, x.ins[0], x.ins[1], x.ins[2])
        else {
            return Err(mismatch());
        };
        let pos = if self.positions { Some(x.ins[3].i64().ok_or_else(mismatch)?) } else { None };
        let half = rot / 2;
        let four_d = shapes[0].len() == 4;
        y.copy_from_slice(input);
        for bi in 0..b {
            for si in 0..s {
                let row = match pos {
                    Some(p) => {
                        let at = p[bi * s + si];
                        let rows = shapes[1][0];
                        if at < 0 || at as usize >= rows {
                            return Err(format!("input 3: position {at} is outside the {rows}-row cache"));
                        }
                        at as usize
                    }
                    None => bi * s + si,
                };
                let (c, sn) = (&cos[row * half..][..half], &sin[row * half..][..half]);
                for hi in 0..h {
                    let at = if four_d { ((bi * h + hi) * s + si) * d } else { ((bi * s + si) * h + hi) * d };
                    let (xs, ys) = (&input[at..at + rot], &mut y[at..at + rot]);
                    for i in 0..half {
                        let (p, q) = if self.interleaved { (2 * i, 2 * i + 1) } else { (i, i + half) };
                        ys[p] = xs[p] * c[i] - xs[q] * sn[i];
                        ys[q] = xs[q] * c[i] + xs[p] * sn[i];
                    }
                }
            }
        }
        Ok(())
    }
}

/// Rotary embedding in the rotate-half form (`x · cos + rotate_half(x) · sin`), the step
/// `passes::fuse_rope` makes of the exporters' Slice, Neg, Concat, Mul, Mul and Add:
/// inputs x, cos and sin, broadcast to one another along every axis but the last, which
/// is `2 * half` long in all three. The output has the unfused nodes' shape and bits
/// (`rivet_kernels::nn::rotate_half`).
#[derive(Debug)]
pub(crate) struct RotateHalf {
    pub half: usize,
}

impl RotateHalf {
    /// The output's shape: the three inputs broadcast, each of the last axis' length.
    fn out(&self, ins: &[&[usize]]) -> Result<Shape, String> {
        let d = 2 * self.half;
        for (k, s) in ins.iter().take(3).enumerate() {
            if s.last() != Some(&d) {
                return Err(format!("input {k} of shape {s:?}: the last axis must be {d} long"));
            }
        }
        let xc = Broadcast::new(ins[0], ins[1]).map_err(|e| format!("x and cos: {e}"))?;
        let all = Broadcast::new(xc.out_shape(), ins[2]).map_err(|e| format!("x and sin: {e}"))?;
        Ok(Shape::from_slice(all.out_shape()))
    }
}

impl Op for RotateHalf {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        Ok(self.out(x.shapes)?)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let shape = self.out(x.shapes)?;
        let (DataMut::F32(y), [Data::F32(v), Data::F32(cos), Data::F32(sin)]) = (out, x.ins) else {
            return Err("element types differ from the plan's".into());
        };
        let r = shape.len();
        let strides = [0, 1, 2].map(|k| broadcast_strides(x.shapes[k], r));
        let rows = Rows { dims: &shape[..r - 1], strides: &strides, index: SmallVec::from_elem(0, r - 1), at: [0; 3] };
        nn::rotate_half(v, cos, sin, 2 * self.half, rows, y);
        Ok(())
    }
}

/// The rows of a broadcast output in order, as the element offsets of each of three
/// operands' rows (`strides[k]`: operand k's element strides along the output's axes, 0
/// where it broadcasts; the last axis, the rows' own, is not walked). Each step adds one
/// stride and carries, where a division per axis cost more than the row's arithmetic.
struct Rows<'a> {
    dims: &'a [usize],
    strides: &'a [SmallVec<[usize; 8]>; 3],
    index: SmallVec<[usize; 8]>,
    at: [usize; 3],
}

impl Iterator for Rows<'_> {
    type Item = [usize; 3];

    fn next(&mut self) -> Option<[usize; 3]> {
        let row = self.at;
        // The next row: the last axis that has not reached its end goes one on, the
        // ones after it back to 0.
        for a in (0..self.dims.len()).rev() {
            self.index[a] += 1;
            if self.index[a] < self.dims[a] {
                self.at.iter_mut().zip(self.strides).for_each(|(o, s)| *o += s[a]);
                return Some(row);
            }
            self.index[a] = 0;
            self.at.iter_mut().zip(self.strides).for_each(|(o, s)| *o -= s[a] * (self.dims[a] - 1));
        }
        // Past the last row (the caller takes as many rows as the output has).
        Some(row)
    }
}
