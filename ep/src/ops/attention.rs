//! Attention (opsets 23-24) in float32 or float64: multi-head, grouped-query and
//! multi-query heads; a bool or numeric mask, causal, softcap, a scale; a key/value cache
//! (present key and value outputs), `nonpad_kv_seqlen` padding, and the scores output in
//! each `qk_matmul_output_mode`. Each output is an op of its own (`out`).

use std::sync::Arc;

use rivet_kernels::attention::{
    attention_groups, group_len, AttnBias, AttnDims, AttnFloat, AttnInputs, AttnOut, AttnParams, AttnScratch,
};
use rivet_kernels::typed::Number;

use super::claim::{bad_types, extra_output, outputs};
use super::geometry::within_limit;
use super::op::util::{check_attrs, check_inputs, input};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, number_at, Data, DataMut, Storage};
use crate::graph::{dtype, AttrValue, NodeDesc, Shape};
use crate::node_attrs::{float_attr, int_attr};
use crate::parallel::{cores, Parallel};

/// Attention of at least this many multiply-adds (in both products) is split over the
/// pool by groups of heads.
const PARALLEL_MIN_MACS: usize = 1 << 18;

// softmax_precision: Rivet's softmax runs in float32 whatever it asks.
const ATTRS: &[&str] =
    &["q_num_heads", "kv_num_heads", "scale", "softcap", "is_causal", "qk_matmul_output_mode", "softmax_precision"];

/// An Attention node's attributes, which optional inputs it has, and which of its
/// outputs a step computes.
#[derive(Clone, Copy, Debug)]
struct Attention {
    /// From the attributes (3-D inputs); 0 when Q, K, V are 4-D.
    q_heads: usize,
    kv_heads: usize,
    /// `None`: 1 / sqrt(head size).
    scale: Option<f32>,
    softcap: f32,
    causal: bool,
    qk_mode: u8,
    mask: bool,
    past: bool,
    nonpad: bool,
    out: AttnOut,
}

/// Attention (opset 23-24): output `output`'s op.
pub fn attention(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 3, 7)?;
    outputs(node, true)?;
    check_attrs(node, ATTRS)?;
    let has = |i: usize| input(node, i).is_some();
    let (mask, past, nonpad) = (has(3), has(4) || has(5), has(6));
    if past && !(has(4) && has(5)) {
        return Err("Attention needs both past key and past value, or neither".into());
    }
    if past && nonpad {
        return Err("Attention with both a cache and nonpad_kv_seqlen".into());
    }
    let qk_mode = int_attr(node, "qk_matmul_output_mode", 0)?;
    if !(0..=3).contains(&qk_mode) {
        return Err(format!("qk_matmul_output_mode {qk_mode}"));
    }
    let heads = |name| -> Result<usize, String> {
        let h = int_attr(node, name, 0)?;
        usize::try_from(h).map_err(|_| format!("{name} {h}"))
    };
    let scale = match node.attr("scale") {
        Some(AttrValue::Float(s)) => Some(*s),
        Some(_) => return Err("scale must be a float".into()),
        None => None,
    };
    let a = Attention {
        q_heads: heads("q_num_heads")?,
        kv_heads: heads("kv_num_heads")?,
        scale,
        softcap: float_attr(node, "softcap", 0.0)?,
        causal: int_attr(node, "is_causal", 0)? != 0,
        qk_mode: qk_mode as u8,
        mask,
        past,
        nonpad,
        out: AttnOut::Y,
    };
    check_types(node, &a)?;
    if output == 0 {
        return Ok(Arc::new(a));
    }
    let out = match output {
        1 => AttnOut::PresentKey,
        2 => AttnOut::PresentValue,
        _ => AttnOut::Scores(a.qk_mode),
    };
    if output < 3 && !a.past {
        return Err("Attention's present key and value need past key and value".into());
    }
    extra_output(node, output, node.inputs[0].as_ref().map_or(0, |v| v.elem_type))?;
    Ok(Arc::new(Attention { out, ..a }))
}

/// float32 or float64 throughout; the mask bool or any number (added).
fn check_types(node: &NodeDesc, a: &Attention) -> Result<(), String> {
    let types: Vec<i32> = node.inputs.iter().flatten().map(|v| v.elem_type).collect();
    let t = node.outputs[0].as_ref().map_or(0, |v| v.elem_type);
    let all = |types: &[i32]| types.iter().all(|&x| x == t);
    let mut k = 3;
    let mask_ok = !a.mask || {
        k += 1;
        types[k - 1] == dtype::BOOL || data::is_number(types[k - 1])
    };
    let past_ok = !a.past || {
        k += 2;
        all(&types[k - 2..k])
    };
    let nonpad_ok = !a.nonpad || types[k] == dtype::INT64;
    if !(matches!(t, dtype::FLOAT | dtype::DOUBLE) && all(&types[..3]) && mask_ok && past_ok && nonpad_ok) {
        return Err(bad_types(node, "other element types"));
    }
    Ok(())
}

/// The sizes of an Attention step from its present inputs' shapes (Q, K, V, then the
/// mask, the cache and `nonpad_kv_seqlen` when the node has them), checked.
fn attention_dims(a: &Attention, ins: &[&[usize]]) -> Result<AttnDims, String> {
    let (q, k, v) = (ins[0], ins[1], ins[2]);
    if q.len() != k.len() || q.len() != v.len() || !(q.len() == 3 || q.len() == 4) {
        return Err(format!("Q, K and V must all be 3-D or 4-D, got ranks {}, {}, {}", q.len(), k.len(), v.len()));
    }
    let q_3d = q.len() == 3;
    let split = |s: &[usize], heads: usize, what: &str| -> Result<(usize, usize, usize), String> {
        if q_3d {
            if heads == 0 || !s[2].is_multiple_of(heads) {
                return Err(format!("{what}'s hidden size {} does not split into {heads} heads", s[2]));
            }
            Ok((heads, s[1], s[2] / heads))
        } else {
            Ok((s[1], s[2], s[3]))
        }
    };
    let (q_heads, q_len, head) = split(q, a.q_heads, "Q")?;
    let (kv_heads, kv_len, k_head) = split(k, a.kv_heads, "K")?;
    let (v_heads, v_len, v_head) = split(v, a.kv_heads, "V")?;
    if k[0] != q[0] || v[0] != q[0] || k_head != head || v_heads != kv_heads || v_len != kv_len {
        return Err(format!("Q {q:?}, K {k:?} and V {v:?} do not agree"));
    }
    if kv_heads == 0 || !q_heads.is_multiple_of(kv_heads) {
        return Err(format!("{q_heads} query heads are not a multiple of {kv_heads} key/value heads"));
    }
    let mut at = 3;
    let mask = if a.mask {
        at += 1;
        Some(ins[at - 1])
    } else {
        None
    };
    let mut past_len = 0;
    if a.past {
        let (pk, pv) = (ins[at], ins[at + 1]);
        at += 2;
        let ok = pk.len() == 4 && pv.len() == 4 && pk[..2] == [q[0], kv_heads] && pv[..3] == pk[..3];
        if !ok || pk[3] != head || pv[3] != v_head {
            return Err(format!("past key {pk:?} and value {pv:?} do not match K and V"));
        }
        past_len = pk[2];
    }
    let d = AttnDims { batch: q[0], q_heads, kv_heads, q_len, kv_len, past_len, head, v_head, q_3d, kv_3d: q_3d };
    if let Some(m) = mask {
        let full = [d.batch, q_heads, q_len, d.total()];
        let lead = 4usize.checked_sub(m.len()).ok_or("the mask has more than 4 dims")?;
        for (i, &dim) in m.iter().enumerate() {
            let want = full[lead + i];
            let last = lead + i == 3;
            if !(dim == 1 || dim == want || (last && dim < want)) {
                return Err(format!("mask {m:?} does not broadcast to {full:?}"));
            }
        }
    }
    if a.nonpad && ins[at] != [d.batch] {
        return Err(format!("nonpad_kv_seqlen {:?} is not [batch]", ins[at]));
    }
    Ok(d)
}

/// Attention in f32 or f64: the mask (a number added, bool false excluded, padded with
/// exclusion past its last dim), the padding of `nonpad_kv_seqlen` and the causal rule
/// make the bias.
fn run<T: Storage + AttnFloat + Number>(
    a: &Attention,
    ins: &[Data<'_>],
    shapes: &[&[usize]],
    go: impl FnOnce(&AttnDims, AttnParams, &AttnInputs<'_, T>, Option<AttnBias<'_, T>>),
) -> Result<(), String> {
    let d = attention_dims(a, shapes)?;
    let f = |k: usize| T::get(ins[k]).ok_or("element types differ from the plan's");
    let mut at = 3;
    let mask = if a.mask {
        at += 1;
        Some((ins[at - 1], shapes[at - 1]))
    } else {
        None
    };
    let (past_key, past_value) = if a.past {
        at += 2;
        (Some(f(at - 2)?), Some(f(at - 1)?))
    } else {
        (None, None)
    };
    let nonpad = if a.nonpad { Some(ins[at].i64().ok_or("element types differ from the plan's")?) } else { None };
    // The mask's strides over [B, H, Sq, its own last dim], 0 on broadcast axes.
    let mut strides = [0usize; 4];
    let mut mask_cols = usize::MAX;
    if let Some((_, m)) = mask {
        let lead = 4 - m.len();
        let mut acc = 1;
        for i in (0..m.len()).rev() {
            if m[i] != 1 || lead + i == 3 {
                strides[lead + i] = acc;
            }
            acc *= m[i];
        }
        mask_cols = m.last().copied().unwrap_or(1);
        if m.is_empty() {
            mask_cols = 1;
        }
    }
    // Adds query i's bias to its row of scores: the mask's row (its last axis walked with
    // stride strides[3]), -inf past the mask's last dim and past the batch's nonpad length.
    let bias = |b: usize, h: usize, i: usize, row: &mut [T]| {
        let keep = nonpad.map_or(row.len(), |n| usize::try_from(n[b]).unwrap_or(0).min(row.len()));
        let ninf = <T as AttnFloat>::NEG_INFINITY;
        if let Some((data, _)) = mask {
            let base = b * strides[0] + h * strides[1] + i * strides[2];
            let cols = mask_cols.min(keep);
            let at = |j: usize| base + j * strides[3];
            match data {
                // A row of the mask's own (not broadcast along its last axis): added as a
                // slice, which vectorises (element by element with strides, T5's position
                // bias took 22 of a 4-head layer's 59 us).
                Data::F32(m) if strides[3] == 1 => {
                    row[..cols].iter_mut().zip(&m[base..base + cols]).for_each(|(e, &v)| *e += T::from_f32(v))
                }
                Data::F32(m) => row[..cols].iter_mut().enumerate().for_each(|(j, e)| *e += T::from_f32(m[at(j)])),
                Data::Bool(m) if strides[3] == 1 => {
                    row[..cols].iter_mut().zip(&m[base..base + cols]).for_each(|(e, &v)| {
                        if v == 0 {
                            *e += ninf
                        }
                    })
                }
                Data::Bool(m) => row[..cols].iter_mut().enumerate().for_each(|(j, e)| {
                    if m[at(j)] == 0 {
                        *e += ninf
                    }
                }),
                other => {
                    row[..cols].iter_mut().enumerate().for_each(|(j, e)| *e += T::from_f64(number_at(other, at(j))))
                }
            }
            // Past the mask's last dim: padding.
            row[cols..].iter_mut().for_each(|e| *e += ninf);
        } else {
            row[keep..].iter_mut().for_each(|e| *e += ninf);
        }
    };
    let scale = a.scale.unwrap_or(1.0 / (d.head as f32).sqrt());
    let p = AttnParams { scale, softcap: a.softcap, causal: a.causal };
    let x = AttnInputs { q: f(0)?, k: f(1)?, v: f(2)?, past_key, past_value };
    let bias = (a.mask || a.nonpad).then_some(&bias as AttnBias<'_, T>);
    go(&d, p, &x, bias);
    Ok(())
}

/// Float32 attention, split over the pool by groups of heads (a batch's key/value head
/// and the query heads it serves) when it is large and its output holds each group's
/// part contiguously; each task works in its own scratch. The bits are the unsplit ones.
#[allow(clippy::too_many_arguments)]
fn split_f32(
    d: &AttnDims,
    p: AttnParams,
    x: &AttnInputs<'_, f32>,
    bias: Option<AttnBias<'_, f32>>,
    out: AttnOut,
    scratch: &mut AttnScratch<f32>,
    par: &dyn Parallel,
    y: &mut [f32],
) {
    let groups = d.batch * d.kv_heads;
    let macs = d.batch * d.q_heads * d.q_len * d.total() * (d.head + d.v_head);
    let tasks = cores().min(groups);
    match group_len(d, out) {
        Some(len) if len > 0 && tasks >= 2 && macs >= PARALLEL_MIN_MACS && y.len() == groups * len => {
            let per_task = groups.div_ceil(tasks);
            par.for_each_task(y, per_task * len, &|start, part, s| {
                let first = start / len;
                attention_groups(d, p, x, bias, out, &mut s.attention, first..first + part.len() / len, part);
            });
        }
        _ => rivet_kernels::attention::attention(d, p, x, bias, out, scratch, y),
    }
}

impl Op for Attention {
    fn halves_in_f32(&self) -> bool {
        true
    }

    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let d = attention_dims(self, x.shapes)?;
        let total = d.total();
        let shape: Shape = match self.out {
            AttnOut::Y if d.q_3d => [d.batch, d.q_len, d.q_heads * d.v_head].into_iter().collect(),
            AttnOut::Y => [d.batch, d.q_heads, d.q_len, d.v_head].into_iter().collect(),
            AttnOut::PresentKey => [d.batch, d.kv_heads, total, d.head].into_iter().collect(),
            AttnOut::PresentValue => [d.batch, d.kv_heads, total, d.v_head].into_iter().collect(),
            AttnOut::Scores(_) => [d.batch, d.q_heads, d.q_len, total].into_iter().collect(),
        };
        Ok(within_limit(shape)?)
    }

    /// Its packed heads and scores are the step's state (each task's own when it is split):
    /// they grow to the largest, then no Run allocates.
    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        match out {
            DataMut::F32(y) => {
                let (scratch, par) = (x.scratch.state::<AttnScratch<f32>>(), x.par);
                run(self, x.ins, x.shapes, |d, p, inputs, bias| {
                    split_f32(d, p, inputs, bias, self.out, scratch, par, y)
                })
            }
            DataMut::F64(y) => {
                let scratch = x.scratch.state::<AttnScratch<f64>>();
                run(self, x.ins, x.shapes, |d, p, inputs, bias| {
                    rivet_kernels::attention::attention(d, p, inputs, bias, self.out, scratch, y)
                })
            }
            _ => Err("element types differ from the plan's".into()),
        }
    }
}
