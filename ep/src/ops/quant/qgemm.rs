//! com.microsoft QGemm, what ORT's quantizer makes of a Gemm in the QOperator format:
//! `acc = (A - za) × (B - zb) + C` in int32 (`op(A)`, `op(B)` transposed by `transA`,
//! `transB`; C an int32 bias broadcast to [M, N]), then each column's scale
//! `alpha · sa · sb[j]`, divided by `y_scale` when it is given: a float32 output is
//! `acc · scale`, an 8-bit one `clamp(round_half_even(acc · scale) + zy)`, as ORT's CPU
//! kernel computes them (`quant_gemm.cc`). uint8 or int8 A and B; a's scale and zero point
//! one value, b's one value or one per column. A constant B (the quantizer's weights) is
//! packed once. With K = 0 the output is C scaled as for any K (ORT's kernel then leaves
//! Y unwritten: C's int32 bits read as floats, or whatever the 8-bit buffer held, found
//! by review). B's scale and zero point have one shape, a scalar or `[1]` or `[N]`, as
//! ORT's kernel requires.

use std::sync::Arc;

use rivet_kernels::qgemm::{qgemm, QOut, QPackedA, QPackedB};

use super::super::op::util::{bad_types, check_attrs, check_inputs, input, input_type, output_type};
use super::super::{Op, RunIn, ShapeError, ShapeIn};
use super::{data_key, float_at, int_at, is_q8, per_channel, scalar_float, scalar_int, slots};
use crate::data::{Data, DataMut};
use crate::graph::dtype::{FLOAT, INT32};
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::{float_attr, int_attr};

#[derive(Debug)]
struct QGemm {
    alpha: f32,
    trans_a: bool,
    trans_b: bool,
    /// Where C, y's scale and y's zero point are among a Run's inputs.
    c: Option<usize>,
    sy: Option<usize>,
    zy: Option<usize>,
}

pub fn qgemm_op(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["alpha", "transA", "transB"])?;
    check_inputs(node, 6, 9)?;
    let t = |k| input_type(node, k);
    let given = |k| input(node, k).is_some();
    let y = output_type(node, 0);
    let ok = is_q8(t(0))
        && is_q8(t(3))
        && t(2) == t(0)
        && t(5) == t(3)
        && t(1) == FLOAT
        && t(4) == FLOAT
        && (!given(6) || t(6) == INT32)
        && (!given(7) || t(7) == FLOAT)
        && (y == FLOAT || (is_q8(y) && given(7) && (!given(8) || t(8) == y)));
    if !ok {
        return Err(bad_types(
            node,
            "uint8 or int8 A and B (zero points of their types), float32 scales, an int32 C, \
             and a float32 output, or an 8-bit one with y_scale",
        ));
    }
    // Any value but 0 transposes, as in ORT's kernel (and Rivet's Gemm).
    let flag = |name| -> Result<bool, String> { Ok(int_attr(node, name, 0)? != 0) };
    let alpha = float_attr(node, "alpha", 1.0)?;
    let [.., c, sy, zy] = slots::<9>(node);
    Ok(Arc::new(QGemm { alpha, trans_a: flag("transA")?, trans_b: flag("transB")?, c, sy, zy }))
}

impl QGemm {
    /// m, k, n from the shapes of A and B.
    fn dims(&self, a: &[usize], b: &[usize]) -> Result<(usize, usize, usize), String> {
        let (&[a0, a1], &[b0, b1]) = (a, b) else {
            return Err(format!("A and B must be matrices, have shapes {a:?} and {b:?}"));
        };
        let (m, k) = if self.trans_a { (a1, a0) } else { (a0, a1) };
        let (kb, n) = if self.trans_b { (b1, b0) } else { (b0, b1) };
        if k != kb {
            return Err(format!("op(A) is {m}x{k} but op(B) is {kb}x{n}"));
        }
        Ok((m, k, n))
    }
}

/// Working memory kept from Run to Run: the packed operands (B kept while the same
/// constant comes in), the transposed copies, the int32 sums and the columns' scales.
#[derive(Default)]
struct State {
    a: QPackedA,
    b: QPackedB,
    key: Option<(usize, usize)>,
    copy_u8: Vec<u8>,
    copy_i8: Vec<i8>,
    zero: Vec<i32>,
    acc: Vec<i32>,
    scales: Vec<f32>,
}

impl Op for QGemm {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (m, _, n) = self.dims(x.shapes[0], x.shapes[3]).map_err(ShapeError::Invalid)?;
        if let Some(c) = self.c {
            bias_at(x.shapes[c], m, n).map_err(ShapeError::Invalid)?;
        }
        Ok(Shape::from_slice(&[m, n]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (m, k, n) = self.dims(x.shapes[0], x.shapes[3])?;
        let za = scalar_int(Some(x.ins[2]), Some(x.shapes[2]), "A's zero point")?;
        let sa = scalar_float(x.ins[1], x.shapes[1], "A's scale")?;
        let (zb_shape, sb_shape) = (x.shapes[5], x.shapes[4]);
        if zb_shape != sb_shape || zb_shape.len() > 1 {
            return Err(format!(
                "input 4: B's scale (shape {sb_shape:?}) and zero point (shape {zb_shape:?}) must have one shape, \
                 a scalar or 1-D of 1 or N = {n} elements"
            ));
        }
        let zb_cols = per_channel(zb_shape, n, "input 5: B's zero point")?;
        let sb_cols = per_channel(sb_shape, n, "input 4: B's scale")?;
        let sy = match self.sy {
            Some(k) => Some(scalar_float(x.ins[k], x.shapes[k], "y's scale")?),
            None => None,
        };
        let zy = scalar_int(self.zy.map(|k| x.ins[k]), self.zy.map(|k| x.shapes[k]), "y's zero point")?;
        let bias = match self.c.map(|k| (x.ins[k], x.shapes[k])) {
            Some((Data::I32(c), shape)) => Some((c, bias_at(shape, m, n)?)),
            Some(_) => return Err("input 6: C is not int32".into()),
            None => None,
        };
        let s = x.scratch.state::<State>();
        // A: m×k, transposed first when stored k×m.
        match x.ins[0] {
            Data::U8(v) => s.a.pack(matrix(v, self.trans_a, m, k, &mut s.copy_u8)?, m, k, k, &[za]),
            Data::I8(v) => s.a.pack(matrix(v, self.trans_a, m, k, &mut s.copy_i8)?, m, k, k, &[za]),
            _ => return Err("input 0: A is not uint8 or int8".into()),
        }
        // B: k×n, packed again only when another tensor (or zero point) comes in.
        let constant = |i: usize| x.constant & (1 << i) != 0;
        let key = data_key(x.ins[3]).filter(|_| constant(3) && constant(5));
        if key.is_none() || s.key != key {
            s.key = None;
            s.zero.clear();
            s.zero.extend((0..if zb_cols { n } else { 1 }).map(|j| int_at(x.ins[5], j).unwrap_or(0)));
            match x.ins[3] {
                Data::U8(v) => s.b.pack(matrix(v, self.trans_b, k, n, &mut s.copy_u8)?, k, n, n, &s.zero),
                Data::I8(v) => s.b.pack(matrix(v, self.trans_b, k, n, &mut s.copy_i8)?, k, n, n, &s.zero),
                _ => return Err("input 3: B is not uint8 or int8".into()),
            }
            s.key = key;
        }
        s.scales.clear();
        for j in 0..if sb_cols { n } else { 1 } {
            let sb = float_at(x.ins[4], j).ok_or("input 4: B's scale is not float32")?;
            let scale = self.alpha * sa * sb;
            s.scales.push(sy.map_or(scale, |sy| scale / sy));
        }
        s.acc.clear();
        s.acc.resize(m * n, 0);
        qgemm(&s.a, &s.b, 0..n, QOut::I32(&mut s.acc), n);
        if let Some((c, at)) = bias {
            for (i, row) in s.acc.chunks_exact_mut(n.max(1)).enumerate() {
                for (j, v) in row.iter_mut().enumerate() {
                    *v = v.wrapping_add(c[at.index(i, j, n)]);
                }
            }
        }
        let scale = |j: usize| s.scales[if sb_cols { j } else { 0 }];
        match out {
            DataMut::F32(y) => {
                for (i, (o, &v)) in y.iter_mut().zip(&s.acc).enumerate() {
                    *o = v as f32 * scale(i % n.max(1));
                }
            }
            DataMut::U8(y) => requantize(y, &s.acc, n, scale, zy, 0, 255, |v| v as u8),
            DataMut::I8(y) => requantize(y, &s.acc, n, scale, zy, -128, 127, |v| v as i8),
            _ => return Err("the output element type differs from the plan's".into()),
        }
        Ok(())
    }
}

/// `y = clamp(round_half_even(acc · scale(j)) + zy, lo, hi)`.
#[allow(clippy::too_many_arguments)]
fn requantize<T>(
    y: &mut [T],
    acc: &[i32],
    n: usize,
    scale: impl Fn(usize) -> f32,
    zy: i32,
    lo: i32,
    hi: i32,
    to: fn(i32) -> T,
) {
    for (i, (o, &v)) in y.iter_mut().zip(acc).enumerate() {
        let q = (v as f32 * scale(i % n.max(1))).round_ties_even();
        // In float: a sum far out of range saturates instead of wrapping.
        *o = to((q + zy as f32).clamp(lo as f32, hi as f32) as i32);
    }
}

/// How C of shape `c` broadcasts to [m, n].
#[derive(Clone, Copy, Debug, PartialEq)]
enum Bias {
    One,
    Columns,
    Rows,
    Whole,
}

impl Bias {
    fn index(self, i: usize, j: usize, n: usize) -> usize {
        match self {
            Bias::One => 0,
            Bias::Columns => j,
            Bias::Rows => i,
            Bias::Whole => i * n + j,
        }
    }
}

fn bias_at(c: &[usize], m: usize, n: usize) -> Result<Bias, String> {
    let count: usize = c.iter().product();
    Ok(match c {
        _ if count == 1 && c.len() <= 2 => Bias::One,
        [cn] | [1, cn] if *cn == n => Bias::Columns,
        [cm, 1] if *cm == m => Bias::Rows,
        [cm, cn] if *cm == m && *cn == n => Bias::Whole,
        _ => return Err(format!("input 6: C of shape {c:?} does not broadcast to [{m}, {n}]")),
    })
}

/// `v` (rows × cols, or cols × rows when `trans`) as a rows × cols matrix: itself, or
/// transposed into `copy`.
fn matrix<'a, T: Copy>(
    v: &'a [T],
    trans: bool,
    rows: usize,
    cols: usize,
    copy: &'a mut Vec<T>,
) -> Result<&'a [T], String> {
    if v.len() < rows * cols {
        return Err("an operand has fewer elements than its shape".into());
    }
    if !trans {
        return Ok(v);
    }
    copy.clear();
    copy.extend((0..rows * cols).map(|at| v[(at % cols) * rows + at / cols]));
    Ok(copy)
}
