//! Data movement of any element type: the typed path's Transpose, Slice, Concat,
//! Expand, Pad and their kin (each reads only the bytes it moves).

use super::*;

/// Same-type kernels: Where and the data-movement ops.
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
        Kernel::Concat { axis } => {
            let s = cx.shape(0);
            let a = shapes::normalize_axis(axis, s.len(), false).unwrap_or(0);
            let outer: usize = s[..a].iter().product();
            let mut parts: SmallVec<[&[T]; 4]> = SmallVec::new();
            for k in 0..ins.len() {
                parts.push(input::<T>(cx, ins, k)?);
            }
            let widths: SmallVec<[usize; 4]> = (0..ins.len()).map(|k| cx.shape(k)[a..].iter().product()).collect();
            nn::concat(&parts, &widths, outer, y);
        }
        Kernel::Slice { has_axes, has_steps } => {
            let s = cx.shape(0);
            let plan = shapes::slice_plan(s, cx.params, has_axes, has_steps).map_err(Error::invalid)?;
            rivet_kernels::typed::slice(x()?, s, &plan, y);
        }
        Kernel::Expand { .. } => nn::expand(x()?, cx.shape(0), cx.out_shape(), y),
        Kernel::Where => {
            let Data::Bool(c) = ins[0] else { return Err(cx.mismatch()) };
            let (a, b) = (input::<T>(cx, ins, 1)?, input::<T>(cx, ins, 2)?);
            let out = cx.out_shape();
            map3(c, cx.shape(0), a, cx.shape(1), b, cx.shape(2), out, y, |c, a, b| if c != 0 { a } else { b });
        }
        Kernel::SplitPart { axis, part, parts, sizes, exact, sizes_at_run } => {
            let sizes = if sizes_at_run {
                Some(crate::registry::Axes::new(cx.params.first().copied().unwrap_or(&[])).map_err(Error::invalid)?)
            } else {
                sizes
            };
            let s = cx.shape(0);
            let a = shapes::normalize_axis(axis, s.len(), false).unwrap_or(0);
            let (start, size) =
                shapes::split_part(s[a], parts as usize, part as usize, sizes, exact).map_err(Error::invalid)?;
            let inner: usize = s[a + 1..].iter().product();
            let (row, take) = (s[a] * inner, size * inner);
            if take > 0 {
                for (src, dst) in x()?.chunks(row).zip(y.chunks_mut(take)) {
                    dst.copy_from_slice(&src[start * inner..start * inner + take]);
                }
            }
        }
        Kernel::Pad(spec) => {
            let s = cx.shape(0);
            let pads = spec.resolve(s.len(), cx.params).map_err(Error::invalid)?;
            // A constant fill is read at Run (a float32 constant other than 0 is only claimed
            // on float32, which runs in exec.rs).
            let fill = if spec.value_at_run { input::<T>(cx, ins, 1)?[0] } else { T::default() };
            nn::pad(x()?, s, &pads[..s.len()], &pads[s.len()..2 * s.len()], spec.mode, fill, y);
        }
        _ => return Err(Error::ep(format_args!("{}: no typed kernel", NodeLabel(cx.step)))),
    }
    Ok(())
}
