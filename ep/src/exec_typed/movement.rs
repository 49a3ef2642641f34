//! Data movement of any element type: the typed path's Transpose and its kin (each
//! reads only the bytes it moves).

use super::*;

/// Same-type kernels: the data-movement ops.
pub(super) fn movement<T: Storage>(cx: &Ctx<'_>, ins: &[Data<'_>], y: &mut [T]) -> Result<()> {
    let x = || input::<T>(cx, ins, 0);
    match cx.step.kernel {
        Kernel::Identity | Kernel::Reshape(_) | Kernel::Cast { .. } => y.copy_from_slice(x()?),
        Kernel::Transpose(perm) => {
            let s = cx.shape(0);
            let mut p: SmallVec<[usize; 8]> = SmallVec::new();
            if perm.len == 0 {
                p.extend((0..s.len()).rev());
            } else {
                p.extend(perm.as_slice().iter().map(|&a| shapes::normalize_axis(a, s.len(), false).unwrap_or(0)));
            }
            nn::transpose(x()?, s, &p, y);
        }
        _ => return Err(Error::ep(format_args!("{}: no typed kernel", NodeLabel(cx.step)))),
    }
    Ok(())
}
