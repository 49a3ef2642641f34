//! The typed path's neural-network ops: Attention and Dropout's parameters.

use super::*;

/// Attention in f32 or f64: the mask (a number added, bool false excluded, padded with
/// exclusion past its last dim), the padding of `nonpad_kv_seqlen` and the causal rule
/// make the bias.
pub(super) fn attention<T: Storage + AttnFloat + Number>(
    cx: &Ctx<'_>,
    a: &AttentionSpec,
    ins: &[Data<'_>],
    scratch: &mut AttnScratch<T>,
    y: &mut [T],
) -> Result<()> {
    let shapes: SmallVec<[&[usize]; 8]> = (0..ins.len()).map(|k| cx.shape(k)).collect();
    let d = shapes::attention_dims(a, &shapes).map_err(Error::invalid)?;
    let f = |k: usize| input::<T>(cx, ins, k);
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
    let nonpad = if a.nonpad { Some(input::<i64>(cx, ins, at)?) } else { None };
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
                Data::F32(m) => row[..cols].iter_mut().enumerate().for_each(|(j, e)| *e += T::from_f32(m[at(j)])),
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
    let bias = (a.mask || a.nonpad).then_some(&bias as rivet_kernels::attention::AttnBias<'_, T>);
    rivet_kernels::attention::attention(&d, p, &x, bias, a.out, scratch, y);
    Ok(())
}

/// Dropout's ratio (input `ratio_at`, else 0.5) and training_mode (the last input), read
/// at Run; a ratio outside [0, 1) is an error naming the node.
pub(super) fn dropout_params(cx: &Ctx<'_>, ins: &[Data<'_>], ratio_at: Option<usize>) -> Result<(f64, bool)> {
    let one = |k: usize, what: &str| -> Result<()> {
        if cx.shape(k).iter().product::<usize>() != 1 {
            return Err(Error::invalid(format_args!("{} {what} must hold one value", NodeLabel(cx.step))));
        }
        Ok(())
    };
    let r = match ratio_at {
        Some(k) => {
            one(k, "ratio")?;
            number_at(ins[k], 0)
        }
        None => 0.5,
    };
    let last = ins.len() - 1;
    one(last, "training_mode")?;
    let Data::Bool(t) = ins[last] else { return Err(cx.mismatch()) };
    if !(0.0..1.0).contains(&r) {
        return Err(Error::invalid(format_args!("{} ratio {r} is outside [0, 1)", NodeLabel(cx.step))));
    }
    Ok((r, t[0] != 0))
}

/// A seed for an unseeded Dropout: a new one for each draw, from the clock and a count.
pub(super) fn fresh_seed() -> u32 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let n = DRAWS.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    // splitmix64's finaliser over both.
    let mut z = t ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}
