//! The typed path's neural-network ops: losses, training BatchNormalization and
//! Dropout's parameters.

use super::*;

/// NegativeLogLikelihoodLoss (of `x`, log-probabilities) or, with `softmax`, the
/// cross-entropy of scores `x`: over `x` viewed as `[N, C, D]` and targets `[N, D]`,
/// accumulated in f64.
pub(super) fn loss<T: Number + Storage>(
    cx: &Ctx<'_>,
    ins: &[Data<'_>],
    reduction: Reduction,
    ignore_index: Option<i64>,
    softmax: bool,
    y: &mut [T],
) -> Result<()> {
    let s = cx.shape(0);
    let (n, c, d) = (s[0], s[1], s[2..].iter().product::<usize>());
    let x = input::<T>(cx, ins, 0)?;
    let weight = if ins.len() > 2 { Some(input::<T>(cx, ins, 2)?) } else { None };
    let target = |i: usize| match ins[1] {
        Data::I64(t) => t[i],
        Data::I32(t) => i64::from(t[i]),
        _ => 0,
    };
    if !matches!(ins[1], Data::I64(_) | Data::I32(_)) {
        return Err(cx.mismatch());
    }
    let (mut total, mut weights) = (0.0f64, 0.0f64);
    for b in 0..n {
        for k in 0..d {
            let i = b * d + k;
            let t = target(i);
            if Some(t) == ignore_index {
                if reduction == Reduction::None {
                    y[i] = T::from_f64(0.0);
                }
                continue;
            }
            if t < 0 || t >= c as i64 {
                return Err(Error::invalid(format_args!(
                    "{} input 1: target {t} is out of range for {c} classes",
                    NodeLabel(cx.step)
                )));
            }
            let at = |class: usize| x[(b * c + class) * d + k].to_f64();
            let log_p = if softmax {
                let max = (0..c).map(at).fold(f64::NEG_INFINITY, f64::max);
                let sum: f64 = (0..c).map(|j| (at(j) - max).exp()).sum();
                at(t as usize) - max - sum.ln()
            } else {
                at(t as usize)
            };
            let w = weight.map_or(1.0, |w| w[t as usize].to_f64());
            let l = -log_p * w;
            if reduction == Reduction::None {
                y[i] = T::from_f64(l);
            } else {
                total += l;
                weights += w;
            }
        }
    }
    match reduction {
        Reduction::None => {}
        Reduction::Sum => y[0] = T::from_f64(total),
        Reduction::Mean => y[0] = T::from_f64(total / weights),
    }
    Ok(())
}

/// BatchNormalization in training mode, statistics in f64: Y from the batch's mean and
/// population variance per channel (`out` 0), or the running mean (1) / variance (2)
/// moved toward them by `1 - momentum`.
pub(super) fn batch_norm_train<T: Storage + Number>(
    cx: &Ctx<'_>,
    ins: &[Data<'_>],
    epsilon: f32,
    momentum: f32,
    out: u8,
    y: &mut [T],
) -> Result<()> {
    let s = cx.shape(0);
    let (batch, channels, spatial) = (s[0], s[1], s[2..].iter().product::<usize>());
    let x = input::<T>(cx, ins, 0)?;
    let p = |k: usize| input::<T>(cx, ins, k);
    let (scale, bias, mean, var) = (p(1)?, p(2)?, p(3)?, p(4)?);
    let count = (batch * spatial).max(1) as f64;
    let momentum = f64::from(momentum);
    for c in 0..channels {
        let planes = || (0..batch).flat_map(move |b| x[(b * channels + c) * spatial..][..spatial].iter());
        let m = planes().map(|v| v.to_f64()).sum::<f64>() / count;
        let v = planes().map(|v| (v.to_f64() - m).powi(2)).sum::<f64>() / count;
        match out {
            0 => {
                let g = scale[c].to_f64() / (v + f64::from(epsilon)).sqrt();
                let shift = bias[c].to_f64() - m * g;
                for b in 0..batch {
                    let at = (b * channels + c) * spatial;
                    for (o, xv) in y[at..at + spatial].iter_mut().zip(&x[at..at + spatial]) {
                        *o = T::from_f64(xv.to_f64() * g + shift);
                    }
                }
            }
            1 => y[c] = T::from_f64(mean[c].to_f64() * momentum + m * (1.0 - momentum)),
            _ => y[c] = T::from_f64(var[c].to_f64() * momentum + v * (1.0 - momentum)),
        }
    }
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
