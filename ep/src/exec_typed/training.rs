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
