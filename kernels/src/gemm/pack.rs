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

/// The line an im2col row of a block is made in (a multiple of every panel width).
const LINE: usize = 480;

/// Fills `dst` (`kc` rows) with the A panel for rows `i0..i0 + mr` and depth `p0..p0 + kc`.
#[inline(always)]
pub(super) fn pack_a<const MR: usize>(job: &Job<'_>, i0: usize, mr: usize, p0: usize, dst: &mut [[f32; MR]]) {
    if job.trans_a {
        // A stored k×m: op(A)[i][p] = a[p * m + i], so each depth p is one contiguous run.
        for (p, d) in dst.iter_mut().enumerate() {
            copy_row(d, &job.a[(p0 + p) * job.m + i0..], mr);
        }
    } else {
        gather(dst, job.a, job.k, i0, mr, p0);
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
    let panels = dst.chunks_exact_mut(kc).take(nc.div_ceil(NR));
    if let Some(source) = &job.im2col {
        // Each row of the block made from the input into an L1 line, then spread over
        // the panels as a row of B is.
        let mut line = [0.0f32; LINE];
        for p in 0..kc {
            let mut j = 0;
            while j < nc {
                let len = LINE.min(nc - j);
                source.span(p0 + p, j0 + j, &mut line[..len]);
                for (q, src) in line[..len].chunks(NR).enumerate() {
                    copy_row(&mut dst[(j / NR + q) * kc + p], src, src.len());
                }
                j += len;
            }
        }
    } else if job.trans_b {
        // B stored n×k: column j of op(B) is the contiguous row j of B.
        for (jp, panel) in panels.enumerate() {
            let j = j0 + jp * NR;
            gather(panel, b, k, j, NR.min(j0 + nc - j), p0);
        }
    } else {
        // Row p of B feeds row p of every panel: read B rows contiguously.
        for p in 0..kc {
            let row = &b[(p0 + p) * n + j0..][..nc];
            for (jp, src) in row.chunks(NR).enumerate() {
                copy_row(&mut dst[jp * kc + p], src, src.len());
            }
        }
    }
}

/// `dst[p][i] = src[(first + i) * ld + p0 + p]` for `i < count` (zero beyond): packs
/// `count` contiguous source rows as the lanes of `dst`.
#[inline(always)]
fn gather<const R: usize>(dst: &mut [[f32; R]], src: &[f32], ld: usize, first: usize, count: usize, p0: usize) {
    let kc = dst.len();
    if count == R && R.is_multiple_of(16) {
        // Whole panels of B (`NR` = 16, 32, 48) in 16x16 register blocks: attention's
        // K, packed transposed every Run, took 0.52 ns a float in the blocks of 8 below
        // and takes 0.24 here (197 x 64; 1024 x 128 0.43 -> 0.15).
        crate::movement::transpose_block(&src[first * ld + p0..], (R, kc, ld), dst.as_flattened_mut(), R);
    } else if count == R {
        // Blocks of 8 depths: contiguous loads from each source row, transposed in
        // registers, contiguous stores. (A plain element loop gets vectorised into
        // scatters, which are slow on some CPUs.)
        let rows: [&[f32]; R] = std::array::from_fn(|i| &src[(first + i) * ld + p0..][..kc]);
        let (blocks, tail) = dst.as_chunks_mut::<8>();
        for (q, d) in blocks.iter_mut().enumerate() {
            let blk: [[f32; 8]; R] = std::array::from_fn(|i| *<&[f32; 8]>::try_from(&rows[i][q * 8..][..8]).unwrap());
            for (p, dp) in d.iter_mut().enumerate() {
                *dp = std::array::from_fn(|i| blk[i][p]);
            }
        }
        let done = blocks.len() * 8;
        for (p, d) in tail.iter_mut().enumerate() {
            *d = std::array::from_fn(|i| rows[i][done + p]);
        }
    } else {
        for (p, d) in dst.iter_mut().enumerate() {
            *d = std::array::from_fn(|i| if i < count { src[(first + i) * ld + p0 + p] } else { 0.0 });
        }
    }
}

/// `d = src[..len]` padded with zeros; a fixed-size copy (vector moves, no `memcpy` call)
/// when the row is full.
#[inline(always)]
fn copy_row<const N: usize>(d: &mut [f32; N], src: &[f32], len: usize) {
    if len == N {
        *d = *<&[f32; N]>::try_from(&src[..N]).expect("N elements");
    } else {
        d[..len].copy_from_slice(&src[..len]);
        d[len..].fill(0.0);
    }
}

/// Packs all of `op(B)` into `dst` as `run` would pack it block by block with the same
/// `NR`, `kc_max` and `nc_max`: the blocks in `run`'s loop order, one after the other.
/// Returns the floats written (`k * n` rounded up to whole panels; nothing for the
/// products `run` computes without packing).
#[inline(always)]
pub(crate) fn pack_whole<const NR: usize>(job: &Job<'_>, dst: &mut [f32], kc_max: usize, nc_max: usize) -> usize {
    let (n, k) = (job.n, job.k);
    // Packed whatever m is (a constant B packed for one m serves products of any m), but
    // not for the products `run` computes without packing whatever m is.
    if n <= 1 || k == 0 {
        return 0;
    }
    let kc_max = k.div_ceil(k.div_ceil(kc_max));
    let nc_max = nc_max.min(n).next_multiple_of(NR);
    let total = k * n.next_multiple_of(NR);
    let (mut rest, _) = dst[..total].as_chunks_mut::<NR>();
    for j0 in (0..n).step_by(nc_max) {
        let nc = nc_max.min(n - j0);
        for p0 in (0..k).step_by(kc_max) {
            let kc = kc_max.min(k - p0);
            let (block, after) = rest.split_at_mut(kc * nc.div_ceil(NR));
            pack_b(job, j0, nc, p0, kc, block);
            rest = after;
        }
    }
    total
}

/// Packs all of `op(A)` into `dst` as `run` would pack it strip by strip with the same
/// `MR` and `kc_max`: per depth block, every strip of `MR` rows (`kc` rows of `[f32; MR]`
/// each, zero past the matrix). Returns the floats written.
#[inline(always)]
pub(crate) fn pack_a_whole<const MR: usize>(job: &Job<'_>, dst: &mut [f32], kc_max: usize) -> usize {
    let (m, k) = (job.m, job.k);
    // Packed whatever n is: the packing serves products of any width (a conv's filters
    // packed at one output position serve the next Run's hundreds), and a product the
    // driver runs without packing (n == 1, k == 0) just does not read it.
    if m == 0 || k == 0 {
        return 0;
    }
    let kc_max = k.div_ceil(k.div_ceil(kc_max));
    let total = k * m.next_multiple_of(MR);
    let (mut rest, _) = dst[..total].as_chunks_mut::<MR>();
    for p0 in (0..k).step_by(kc_max) {
        let kc = kc_max.min(k - p0);
        for i0 in (0..m).step_by(MR) {
            let (strip, after) = rest.split_at_mut(kc);
            pack_a(job, i0, MR.min(m - i0), p0, strip);
            rest = after;
        }
    }
    total
}
