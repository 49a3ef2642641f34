//! Shapes of the windowed and product ops: convolution and pooling windows, MatMul, Gemm,
//! Attention and rotary embeddings.

use rivet_kernels::attention::AttnDims;
use rivet_kernels::conv::Window3d;
use rivet_kernels::Broadcast;

use crate::graph::{Shape, ShapeText};
use crate::ops::params::*;

/// The sizes of an Attention step from its present inputs' shapes (Q, K, V, then the
/// mask, the cache and `nonpad_kv_seqlen` when the node has them), checked.
pub fn attention_dims(a: &AttentionSpec, ins: &[&[usize]]) -> std::result::Result<AttnDims, String> {
    let (q, k, v) = (ins[0], ins[1], ins[2]);
    if q.len() != k.len() || q.len() != v.len() || !(q.len() == 3 || q.len() == 4) {
        return Err(format!("Q, K and V must all be 3-D or 4-D, got ranks {}, {}, {}", q.len(), k.len(), v.len()));
    }
    let q_3d = q.len() == 3;
    let split = |s: &[usize], heads: usize, what: &str| -> std::result::Result<(usize, usize, usize), String> {
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

/// ConvTranspose's sizes, per (depth, height, width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTransposeGeometry {
    pub input: [usize; 3],
    pub kernel: [usize; 3],
    pub out: [usize; 3],
    /// Negative: the output starts before the first input's footprint.
    pub pad_begin: [i64; 3],
    pub out_channels: usize,
}

/// Output size and padding of a ConvTranspose of `x` ([N, C, ...] with 1 to 3 spatial
/// axes) by weights `w` ([C, M / group, ...]), per the ONNX rules for output_shape and
/// auto_pad.
pub fn conv_transpose_geometry(
    spec: &ConvTransposeSpec,
    x: &[usize],
    w: &[usize],
) -> std::result::Result<ConvTransposeGeometry, String> {
    if w.len() != x.len() || !(3..=5).contains(&x.len()) || w[0] != x[1] || !x[1].is_multiple_of(spec.group) {
        return Err(format!("weights {w:?} do not match the input and group {}", spec.group));
    }
    let (input, kernel) = (spatial(x), spatial(w));
    let mut out = [0usize; 3];
    let mut pad_begin = [0i64; 3];
    for a in 0..3 {
        let span = (kernel[a] - 1) * spec.dilations[a] + 1;
        let full = spec.strides[a] * (input[a].max(1) - 1) + spec.output_padding[a] + span;
        let want = if spec.output_shape[a] > 0 {
            Some(spec.output_shape[a])
        } else if matches!(spec.auto_pad, AutoPad::SameUpper | AutoPad::SameLower) {
            Some(input[a] * spec.strides[a])
        } else {
            None
        };
        match want {
            Some(o) => {
                // May be negative (an output_shape larger than the full result): floor
                // division, as the ONNX definition's.
                let total = full as i64 - o as i64;
                let half = total.div_euclid(2);
                // SAME_UPPER puts the larger half at the end; otherwise at the begin.
                pad_begin[a] = if spec.auto_pad == AutoPad::SameUpper { half } else { total - half };
                out[a] = o;
            }
            None => {
                let (b, e) = if spec.auto_pad == AutoPad::Valid { (0, 0) } else { (spec.pads[a], spec.pads[a + 3]) };
                out[a] = full.checked_sub(b + e).ok_or("pads larger than the output")?;
                pad_begin[a] = b as i64;
            }
        }
    }
    Ok(ConvTransposeGeometry { input, kernel, out, pad_begin, out_channels: w[1] * spec.group })
}

/// A window op's (depth, height, width): inputs with fewer spatial axes have leading
/// axes of size 1.
pub fn spatial(s: &[usize]) -> [usize; 3] {
    let n = s.len().saturating_sub(2).min(3);
    std::array::from_fn(|a| if a + n >= 3 { s[2 + a + n - 3] } else { 1 })
}

/// A window op's output shape, of the input's rank.
pub fn windowed(x: &[usize], channels: usize, out: [usize; 3]) -> Shape {
    let n = x.len().saturating_sub(2).min(3);
    [x[0], channels].into_iter().chain(out[3 - n..].iter().copied()).collect()
}

/// numpy matmul: 1-D operands are promoted and the added axis removed again; batch axes
/// broadcast.
pub fn matmul_shape(a: &[usize], b: &[usize]) -> std::result::Result<Shape, String> {
    if a.is_empty() || b.is_empty() {
        return Err("MatMul needs operands of rank 1 or more".into());
    }
    let (m, k) = if a.len() == 1 { (1, a[0]) } else { (a[a.len() - 2], a[a.len() - 1]) };
    let (k2, n) = if b.len() == 1 { (b[0], 1) } else { (b[b.len() - 2], b[b.len() - 1]) };
    if k != k2 {
        return Err(format!("inner dimensions {k} and {k2} differ (against {})", ShapeText(b)));
    }
    let batch_a = &a[..a.len().saturating_sub(2)];
    let batch_b = &b[..b.len().saturating_sub(2)];
    let batch = Broadcast::new(batch_a, batch_b).map_err(|e| e.to_string())?;
    let mut out = Shape::from_slice(batch.out_shape());
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(out)
}

pub fn gemm_shape(
    a: &[usize],
    b: &[usize],
    c: Option<&Shape>,
    ta: bool,
    tb: bool,
) -> std::result::Result<Shape, String> {
    if a.len() != 2 || b.len() != 2 {
        return Err(format!("Gemm needs 2-D A and B, got B {}", ShapeText(b)));
    }
    let (m, k) = if ta { (a[1], a[0]) } else { (a[0], a[1]) };
    let (k2, n) = if tb { (b[1], b[0]) } else { (b[0], b[1]) };
    if k != k2 {
        return Err(format!("inner dimensions {k} and {k2} differ"));
    }
    if let Some(c) = c {
        let b = Broadcast::new(c, &[m, n]).map_err(|e| format!("C: {e}"))?;
        if b.out_shape() != [m, n] {
            return Err(format!("C of shape {} does not broadcast to [{m}, {n}]", ShapeText(c)));
        }
    }
    Ok(Shape::from_slice(&[m, n]))
}

/// The geometry of a window op on an `input` plane (depth, height, width) with kernel
/// `k`, and the padding after each axis.
pub fn window_3d(w: &Window, input: [usize; 3], k: [usize; 3]) -> std::result::Result<(Window3d, [usize; 3]), String> {
    use rivet_kernels::conv::{window_geometry, Padding};
    let padding = match w.auto_pad {
        AutoPad::NotSet => Padding::Explicit(w.pads),
        AutoPad::Valid => Padding::Valid,
        AutoPad::SameUpper => Padding::SameUpper,
        AutoPad::SameLower => Padding::SameLower,
    };
    window_geometry(input, k, w.strides, w.dilations, padding, w.ceil_mode)
}
