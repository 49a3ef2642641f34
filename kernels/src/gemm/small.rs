//! Matrix-vector products (`m == 1` or `n == 1`), where packing would cost more than the
//! product: direct dot products and axpys over the operands as stored, memory-bound, or
//! over a constant B's panels when it came packed (read in memory order, the same sums).
//! The choice depends only on the whole product's shape, so splits give identical bits.

use super::Job;

/// Whether `job` takes this path.
#[inline(always)]
pub(super) fn applies(job: &Job<'_>) -> bool {
    job.m == 1 || job.n == 1
}

/// `c_rows = alpha * op(A)[rows] · op(B) + beta * c_rows` for `m == 1` or `n == 1`; `k > 0`.
/// With `m == 1`, only the columns `job.cols` (each computed as in the whole product).
#[inline(always)]
pub(super) fn gemv(job: &Job<'_>, c: &mut [f32]) {
    let (m, n, k, alpha) = (job.m, job.n, job.k, job.alpha);
    let rows = job.rows.clone();
    let merge = |o: &mut f32, v: f32| *o = if job.beta == 0.0 { alpha * v } else { alpha * v + job.beta * *o };
    if n == 1 && !job.trans_a {
        // Each output is a dot product of a row of A with the vector b.
        for (o, i) in c.iter_mut().zip(rows) {
            merge(o, dot(&job.a[i * k..][..k], job.b));
        }
    } else if n == 1 {
        // A stored k×m: c[rows] += alpha * b[p] * a[p][rows].
        super::scale(c, job.beta);
        for (p, &bv) in job.b.iter().enumerate() {
            axpy(c, alpha * bv, &job.a[p * m + rows.start..][..rows.len()]);
        }
    } else if job.trans_b {
        // m == 1, B stored n×k: each output (of the columns computed) is a dot product
        // with a row of B.
        for (o, j) in c.iter_mut().zip(job.cols.clone()) {
            merge(o, dot(job.a, &job.b[j * k..][..k]));
        }
    } else {
        // m == 1: c += alpha * a[p] * b[p][cols] over the rows of B.
        let cols = job.cols.clone();
        super::scale(c, job.beta);
        for (p, &av) in job.a.iter().enumerate().take(if rows.is_empty() { 0 } else { k }) {
            axpy(c, alpha * av, &job.b[p * n + cols.start..][..cols.len()]);
        }
    }
}

/// [`gemv`] for `m == 1` with `op(B)` (not transposed) packed as `run` packs it for `NR`,
/// `kc_max` and `nc_max`, and `job.cols` starting on a panel: B's panels are read in
/// memory order (block by block of columns, depth block by depth block, panel by panel),
/// so the tasks of a split by columns read disjoint runs of it. The sums are `gemv`'s:
/// C's columns scaled by beta, then `alpha * a[p] * b[p][j]` added for p in order.
#[inline(always)]
pub(super) fn gemv_packed<const NR: usize>(
    job: &Job<'_>,
    packed: &[[f32; NR]],
    kc_max: usize,
    nc_max: usize,
    c: &mut [f32],
) {
    let (n, k, alpha) = (job.n, job.k, job.alpha);
    let cols = job.cols.clone();
    debug_assert!(job.m == 1 && !job.trans_b && cols.start.is_multiple_of(NR));
    super::scale(c, job.beta);
    // The layout `pack_whole` made: blocks of `nc_max` columns, each holding, per depth
    // block of `kc_max`, its panels of `kc` rows.
    let kc_max = k.div_ceil(k.div_ceil(kc_max));
    let nc_max = nc_max.min(n).next_multiple_of(NR);
    // The run of panels of the columns from `j0` (to the block's end or `cols.end`) and
    // the depth block from `p0`: where it starts in `packed`, and its rows.
    let run = |j0: usize, p0: usize| {
        let (block, in_block) = (j0 / nc_max, j0 % nc_max);
        let nc = (nc_max - in_block).min(cols.end - j0);
        let width = nc_max.min(n - block * nc_max).div_ceil(NR);
        let kc = kc_max.min(k - p0);
        (block * k * (nc_max / NR) + p0 * width + in_block / NR * kc, kc * nc.div_ceil(NR))
    };
    let mut j0 = cols.start;
    while j0 < cols.end {
        let nc = (nc_max - j0 % nc_max).min(cols.end - j0);
        let part = &mut c[j0 - cols.start..][..nc];
        for p0 in (0..k).step_by(kc_max) {
            let kc = kc_max.min(k - p0);
            let (first, len) = run(j0, p0);
            let span = &packed[first..][..len];
            // The run read after this one, whose first rows are asked for in L2 while this
            // one's last are read.
            let next = match (p0 + kc < k, j0 + nc < cols.end) {
                (true, _) => Some(run(j0, p0 + kc)),
                (false, true) => Some(run(j0 + nc, 0)),
                (false, false) => None,
            };
            let next = next.map_or(&[][..], |(first, len)| &packed[first..][..len.min(PREFETCH_L2_ROWS)]);
            for (pi, (out, panel)) in part.chunks_mut(NR).zip(span.chunks_exact(kc)).enumerate() {
                let mut acc = [0.0f32; NR];
                acc[..out.len()].copy_from_slice(out);
                for (ri, (row, &av)) in panel.iter().zip(&job.a[p0..p0 + kc]).enumerate() {
                    let ahead = pi * kc + ri + PREFETCH_L2_ROWS;
                    prefetch_l2(span.get(ahead).or_else(|| next.get(ahead - len)));
                    let s = alpha * av;
                    for (o, &v) in acc.iter_mut().zip(row) {
                        *o += s * v;
                    }
                }
                out.copy_from_slice(&acc[..out.len()]);
            }
        }
        j0 += nc;
    }
}

/// How many rows of a packed B ahead of the one in use [`gemv_packed`] asks for in L2:
/// each row is read once, from L3 or memory, and the hardware's prefetchers alone kept a
/// thread at 12.4 GB/s (kernel only, 4096x4096, Intel Xeon, AVX-512); 16 rows ahead gave
/// 15.2-15.5, 32 13.0-13.2, 64 15.1-15.3, 128 13.2-13.6. Through the plugin (`rivet
/// bench --case gemv`, one thread) 17.6-18.2 -> 24.4-27.0 GB/s (ORT 15.7-22.3).
const PREFETCH_L2_ROWS: usize = 64;

/// Asks for `row` in L2 (a hint: no read, no fault), on x86.
#[inline(always)]
fn prefetch_l2<const NR: usize>(row: Option<&[f32; NR]>) {
    #[cfg(target_arch = "x86_64")]
    if let Some(row) = row {
        crate::arch::mem::prefetch_l2(row.as_chunks::<16>().0);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

/// `x · y` with 16 partial sums (vectorisable).
#[inline(always)]
fn dot(x: &[f32], y: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let (xc, xt) = x.as_chunks::<16>();
    let (yc, yt) = y.as_chunks::<16>();
    for (a, b) in xc.iter().zip(yc) {
        for ((s, &u), &v) in acc.iter_mut().zip(a).zip(b) {
            *s += u * v;
        }
    }
    let tail: f32 = xt.iter().zip(yt).map(|(&u, &v)| u * v).sum();
    acc.iter().sum::<f32>() + tail
}

/// `y += s * x`.
#[inline(always)]
fn axpy(y: &mut [f32], s: f32, x: &[f32]) {
    for (o, &v) in y.iter_mut().zip(x) {
        *o += s * v;
    }
}
