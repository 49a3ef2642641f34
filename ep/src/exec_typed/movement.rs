//! Data movement of any element type: the typed path's Transpose, Gather, Tile and their
//! kin (each reads only the bytes it moves).

use super::*;

/// Same-type kernels: Gather and the data-movement ops.
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
        Kernel::Trilu { k, upper } => {
            let s = cx.shape(0);
            let k = shapes::int_list(&k, cx.params).ok().and_then(|v| v.first().copied()).unwrap_or(0);
            nn::trilu(x()?, s[s.len() - 2], s[s.len() - 1], k, upper, y);
        }
        Kernel::Tile { .. } => {
            let (s, o) = (cx.shape(0), cx.out_shape());
            let x = x()?;
            let rank = s.len();
            let mut index = [0usize; 8];
            for v in y.iter_mut() {
                let mut src = 0;
                for a in 0..rank {
                    src = src * s[a] + index[a] % s[a].max(1);
                }
                *v = x[src];
                for a in (0..rank).rev() {
                    index[a] += 1;
                    if index[a] < o[a] {
                        break;
                    }
                    index[a] = 0;
                }
            }
        }
        Kernel::GatherNd { batch_dims: b } => {
            let (s, si) = (cx.shape(0), cx.shape(1));
            let Data::I64(idx) = ins[1] else { return Err(cx.mismatch()) };
            let last = si[si.len() - 1];
            let inner: usize = s[b + last..].iter().product();
            let per_batch: usize = s[b..].iter().product();
            let tuples_per_batch: usize = si[b..si.len() - 1].iter().product();
            let x = x()?;
            for (t, (tuple, dst)) in idx.chunks(last.max(1)).zip(y.chunks_mut(inner.max(1))).enumerate() {
                let mut at = (t / tuples_per_batch.max(1)) * per_batch;
                let mut stride = per_batch;
                for (k, &raw) in tuple.iter().enumerate().take(last) {
                    let n = s[b + k];
                    stride /= n.max(1);
                    let i = if raw < 0 { raw + n as i64 } else { raw };
                    if i < 0 || i >= n as i64 {
                        return Err(Error::invalid(format_args!(
                            "{} input 1: index {raw} is out of range for axis {} of size {n}",
                            NodeLabel(cx.step),
                            b + k
                        )));
                    }
                    at += i as usize * stride;
                }
                dst.copy_from_slice(&x[at..at + inner]);
            }
        }
        Kernel::Scatter { .. } => {
            y.copy_from_slice(x()?);
            scatter_into(cx, ins, y, &|_, u| u)?;
        }
        Kernel::GatherElements { axis } => {
            let (s, si) = (cx.shape(0), cx.shape(1));
            let a = shapes::normalize_axis(axis, s.len(), false).unwrap_or(0);
            let x = x()?;
            let result = match ins[1] {
                Data::I64(idx) => typed::gather_elements(x, s, idx, si, a, y),
                Data::I32(idx) => typed::gather_elements(x, s, idx, si, a, y),
                _ => return Err(cx.mismatch()),
            };
            result.map_err(|bad| {
                Error::invalid(format_args!(
                    "{} input 1: index {bad} is out of range for axis {a} of size {}",
                    NodeLabel(cx.step),
                    s[a]
                ))
            })?;
        }
        Kernel::Gather { axis } => {
            let s = cx.shape(0);
            let a = shapes::normalize_axis(axis, s.len(), false).unwrap_or(0);
            let (outer, inner) = (s[..a].iter().product(), s[a + 1..].iter().product());
            let x = x()?;
            let result = match ins[1] {
                Data::I64(idx) => typed::gather(x, outer, s[a], inner, idx, y),
                Data::I32(idx) => typed::gather(x, outer, s[a], inner, idx, y),
                _ => return Err(cx.mismatch()),
            };
            result.map_err(|bad| {
                Error::invalid(format_args!(
                    "{} input 1: index {bad} is out of range for axis {a} of size {}",
                    NodeLabel(cx.step),
                    s[a]
                ))
            })?;
        }
        _ => return Err(Error::ep(format_args!("{}: no typed kernel", NodeLabel(cx.step)))),
    }
    Ok(())
}
