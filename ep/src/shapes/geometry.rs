//! Shapes of the rotary embeddings (the window and product geometry is `ops::geometry`).

use super::*;

pub use crate::ops::geometry::*;

/// RotaryEmbedding's sizes: batch, sequence, heads, head size, rotated size; checked.
pub fn rotary_dims(kernel: &Kernel, ins: &[&[usize]]) -> std::result::Result<[usize; 5], String> {
    let Kernel::Rotary { heads, rotary_dim, positions, .. } = *kernel else { unreachable!("a Rotary step") };
    let x = ins[0];
    let (b, s, h, d) = match x.len() {
        4 => (x[0], x[2], x[1], x[3]),
        3 if heads > 0 && x[2].is_multiple_of(heads) => (x[0], x[1], heads, x[2] / heads),
        _ => return Err(format!("input {x:?} must be [B, H, S, D], or [B, S, H * D] with num_heads")),
    };
    let rot = if rotary_dim == 0 { d } else { rotary_dim };
    if rot > d || !rot.is_multiple_of(2) {
        return Err(format!("rotary_embedding_dim {rot} for a head of {d}"));
    }
    let (cos, sin) = (ins[1], ins[2]);
    let cache_ok = if positions {
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
