//! Packing: copies of one block of `op(A)` and `op(B)` laid out in the order the
//! microkernel reads them, so its inner loop walks two contiguous streams.
//!
//! * An A panel is `kc` rows of `[f32; MR]`: row `p` holds `op(A)[i0..i0 + MR][p0 + p]`
//!   (one column of the MR-row strip). Rows past the matrix are zero.
//! * A B panel is `kc` rows of `[f32; NR]`: row `p` holds `op(B)[p0 + p][j0..j0 + NR]`.
//!   Columns past the matrix are zero.
//!
//! The zero padding makes the microkernel compute edge tiles like full ones;
//! the caller only writes back the valid `mr × nr` part.

use super::Job;

/// Fills `dst` (`kc` rows) with the A panel for rows `i0..i0 + mr` and depth `p0..p0 + kc`.
#[inline(always)]
pub(super) fn pack_a<const MR: usize>(job: &Job<'_>, i0: usize, mr: usize, p0: usize, dst: &mut [[f32; MR]]) {
    let kc = dst.len();
    let (m, k, a) = (job.m, job.k, job.a);
    if job.trans_a {
        // A stored k×m: op(A)[i][p] = a[p * m + i], so each depth p is one contiguous run.
        for (p, d) in dst.iter_mut().enumerate() {
            let src = &a[(p0 + p) * m + i0..][..mr];
            d[..mr].copy_from_slice(src);
            d[mr..].fill(0.0);
        }
    } else {
        for i in 0..mr {
            let src = &a[(i0 + i) * k + p0..][..kc];
            for (d, &v) in dst.iter_mut().zip(src) {
                d[i] = v;
            }
        }
        if mr < MR {
            for d in dst.iter_mut() {
                d[mr..].fill(0.0);
            }
        }
    }
}

/// Fills `dst` with the B panels for columns `j0..j0 + nc` and depth `p0..p0 + kc`:
/// `ceil(nc / NR)` panels of `kc` rows each, one after the other.
#[inline(always)]
pub(super) fn pack_b<const NR: usize>(
    job: &Job<'_>,
    j0: usize,
    nc: usize,
    p0: usize,
    kc: usize,
    dst: &mut [[f32; NR]],
) {
    let (n, k, b) = (job.n, job.k, job.b);
    for (jp, panel) in dst.chunks_exact_mut(kc).take(nc.div_ceil(NR)).enumerate() {
        let j = j0 + jp * NR;
        let nr = NR.min(j0 + nc - j);
        if job.trans_b {
            // B stored n×k: column j of op(B) is the contiguous row j of B.
            for jj in 0..nr {
                let src = &b[(j + jj) * k + p0..][..kc];
                for (d, &v) in panel.iter_mut().zip(src) {
                    d[jj] = v;
                }
            }
            if nr < NR {
                for d in panel.iter_mut() {
                    d[nr..].fill(0.0);
                }
            }
        } else {
            for (p, d) in panel.iter_mut().enumerate() {
                d[..nr].copy_from_slice(&b[(p0 + p) * n + j..][..nr]);
                d[nr..].fill(0.0);
            }
        }
    }
}
