//! The typed path's Dropout parameters.

use super::*;

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
