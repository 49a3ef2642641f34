//! The blocked driver every level's GEMM runs: the operands of one microkernel call
//! ([`APanel`], [`BPanel`]), where its result goes ([`Out`]), and [`run`], which walks a
//! product's column blocks, depth blocks and strips of rows, packing or reading each
//! operand in place (`operands`), and applies the epilogue to each strip of C.

use super::epilogue::InRegisters;
use super::{kernel_rows, operands, pack, small, strip_list, GemmScratch, Job, SHORT_MR, TINY_MR};
use crate::arch::{self, rows::StridedRows};

/// The A operand of one microkernel call.
#[derive(Clone, Copy)]
pub(crate) enum APanel<'a, const MR: usize> {
    /// `kc` rows of `[f32; MR]`, made by `pack::pack_a` (or a packed A).
    Packed(&'a [[f32; MR]]),
    /// The rows its kernel computes (up to `MR`), `kc` deep, read where they are (op(A)
    /// stored m×k, row stride k) or from their copy in the scratch (row stride `kc`: a
    /// last strip of fewer rows than its kernel, the last row repeated).
    Rows(StridedRows<'a, MR>),
}

impl<const MR: usize> APanel<'_, MR> {
    /// Calls `step(row p of the B panel, a)` for each depth `p`, in order, with `a(r)` the
    /// strip's element of row `r` at that depth: every microkernel's loop over depth.
    #[inline(always)]
    pub(crate) fn each_depth<const USED: usize, const NR: usize>(
        self,
        b: BPanel<'_, NR>,
        mut step: impl FnMut(&[f32; NR], &dyn Fn(usize) -> f32),
    ) {
        match (self, b) {
            (APanel::Packed(a), BPanel::Packed(b)) => {
                for (p, (ar, br)) in a.iter().zip(b).enumerate() {
                    prefetch_ahead(b, p);
                    step(br, &|r| ar[r]);
                }
            }
            (APanel::Rows(rows), BPanel::Packed(b)) => {
                assert_eq!(rows.depth(), b.len(), "gemm: A and B panels of one depth");
                rows.each_depth::<USED>(|p, ar| {
                    prefetch_ahead(b, p);
                    step(&b[p], ar)
                });
            }
            (APanel::Packed(a), BPanel::Rows { b, ld }) => {
                let depth = a.len();
                for (p, ar) in a.iter().enumerate() {
                    prefetch_row_ahead::<NR>(b, ld, p, depth);
                    step(b_row(b, p * ld), &|r| ar[r]);
                }
            }
            (APanel::Rows(rows), BPanel::Rows { b, ld }) => {
                let depth = rows.depth();
                rows.each_depth::<USED>(|p, ar| {
                    prefetch_row_ahead::<NR>(b, ld, p, depth);
                    step(b_row(b, p * ld), ar)
                });
            }
        }
    }
}

/// How many rows of a B panel (packed, or read in place) ahead of the one in use the
/// kernels ask for in L1.
const PREFETCH_ROWS: usize = 8;

/// Asks for row `p + PREFETCH_ROWS` of a packed B panel in L1, if the panel has it.
#[inline(always)]
fn prefetch_ahead<const NR: usize>(b: &[[f32; NR]], p: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(row) = b.get(p + PREFETCH_ROWS) {
        arch::mem::prefetch_l1(row);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (b, p);
}

/// Asks for row `p + PREFETCH_ROWS` of a B panel read where it is (row stride `ld`,
/// `depth` rows) in L1, if the panel has it. Its rows are a row of B apart (a plane
/// apart in a 1x1 convolution's input), too far for the hardware's stride prefetcher.
/// One thread (Intel Xeon, AVX-512), kernel only, A packed, bias and Relu, us: 128 x 3136
/// x 128 (a 1x1 convolution on 56x56) 852 -> 729, 256 x 784 x 256 728 -> 655, 64 x 3136 x
/// 64 228 -> 205.
#[inline(always)]
fn prefetch_row_ahead<const NR: usize>(b: &[f32], ld: usize, p: usize, depth: usize) {
    #[cfg(target_arch = "x86_64")]
    if p + PREFETCH_ROWS < depth {
        // Each 16 floats' line from the first, and the last float's (a row 64-byte
        // unaligned spans one line more).
        let row = b_row::<NR>(b, (p + PREFETCH_ROWS) * ld);
        arch::mem::prefetch_l1(row);
        arch::mem::prefetch_l1::<1>(row[NR - 1..].try_into().expect("1 element"));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (b, ld, p, depth);
}

/// `b[at..at + NR]` as an array.
#[inline(always)]
fn b_row<const NR: usize>(b: &[f32], at: usize) -> &[f32; NR] {
    (&b[at..at + NR]).try_into().expect("NR elements")
}

/// The B operand of one microkernel call: `kc` rows of `NR` columns.
#[derive(Clone, Copy)]
pub(crate) enum BPanel<'a, const NR: usize> {
    /// Rows made by `pack::pack_b` (or a packed B).
    Packed(&'a [[f32; NR]]),
    /// The panel's rows read where they are (op(B) stored k×n, all `NR` columns inside
    /// the matrix): row `p` is `b[p * ld..][..NR]`; the depth is A's.
    Rows { b: &'a [f32], ld: usize },
}

/// Where a microkernel puts its `MR × NR` result `acc = a_panel^T · b_panel`.
pub(crate) enum Out<'a, const MR: usize, const NR: usize> {
    /// A full tile of C, row `i` at `c[i * ldc..][..NR]`: `c = alpha * acc + beta * c`,
    /// not reading C when `beta == 0`, then the epilogue `fin` when it has one (only the
    /// builds whose driver is asked to give them one).
    C { c: &'a mut [f32], ldc: usize, alpha: f32, beta: f32, fin: Option<Fin<'a>> },
    /// An edge tile: `acc` alone, merged into C by the driver.
    Tile(&'a mut [[f32; NR]; MR]),
    /// An edge tile whose columns past the first `16 * vectors` are not used (left as
    /// they are): a kernel may compute only those vectors, each column's sum the same.
    Part(&'a mut [[f32; NR]; MR], usize),
}

impl<const MR: usize, const NR: usize> Out<'_, MR, NR> {
    /// Writes `acc` (the portable path; the x86 kernels merge from registers).
    #[inline(always)]
    pub(super) fn merge(self, acc: &[[f32; NR]; MR]) {
        match self {
            Out::C { c, ldc, alpha, beta, fin: None } => store(acc, NR, c, ldc, alpha, beta),
            Out::C { fin: Some(_), .. } => unreachable!("only the AVX-512 driver is asked for fused tiles"),
            Out::Tile(t) | Out::Part(t, _) => *t = *acc,
        }
    }
}

/// The epilogue a full tile applies to its sums in its registers, before it stores them:
/// its bias (of the tile's rows or columns, from the tile's first), and clamp.
#[derive(Clone, Copy)]
pub(crate) struct Fin<'a> {
    pub ep: InRegisters<'a>,
    pub row: usize,
    pub col: usize,
}

/// The blocked driver, instantiated per level with its microkernel and block sizes.
/// `kernel(a_panel, b_panel, out)` computes `a_panel^T · b_panel` (depth = panel length)
/// into `out`. `rows_in_place`: A stored m×k is read where it is; `b_rows`: so is B where
/// [`operands::b_in_place`] says it pays. Either way every element's sum runs over depth in the
/// same order, so the bits are those of the packed operands. `registers`: the full tiles
/// apply an epilogue of a bias and at most a clamp as they store their sums ([`Out::C`]'s
/// `fin`), the edge tiles take the strip pass, and the rest of the strip none (kernel
/// only, one thread, AVX-512: a 1x1 convolution of 16 -> 64 channels on 55x55 with its
/// bias and Relu 79 -> 59-68 us, the product alone 53-55; see `x86::store_fused`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn run<const MR: usize, const NR: usize, const MID: usize>(
    scratch: &mut GemmScratch,
    job: &Job<'_>,
    c: &mut [f32],
    kc_max: usize,
    nc_max: usize,
    rows_in_place: bool,
    b_rows: bool,
    registers: bool,
    kernel: impl Fn(APanel<'_, MR>, BPanel<'_, NR>, Out<'_, MR, NR>),
    mid: impl Fn(APanel<'_, MR>, BPanel<'_, NR>, Out<'_, MID, NR>),
    short: impl Fn(APanel<'_, MR>, BPanel<'_, NR>, Out<'_, SHORT_MR, NR>),
    tiny: impl Fn(APanel<'_, MR>, BPanel<'_, NR>, Out<'_, TINY_MR, NR>),
) {
    let (k, rows, cols) = (job.k, job.rows.clone(), job.cols.clone());
    // C's row stride: the block's width.
    let ldc = cols.len();
    if rows.is_empty() || ldc == 0 {
        return;
    }
    if k == 0 || small::applies(job) {
        match job.packed_b {
            _ if k == 0 => scale(c, job.beta),
            // A row times a packed constant B: its panels are read in memory order, so the
            // columns of a split read disjoint, contiguous parts of B.
            Some((p, nr)) if job.m == 1 && job.n > 1 && !job.trans_b => {
                assert_eq!(nr, NR, "gemm: B was packed for another tile");
                small::gemv_packed(job, p.as_chunks::<NR>().0, kc_max, nc_max, c);
            }
            _ => small::gemv(job, c),
        }
        job.epilogue.apply(job.level, c, ldc, job.n, rows, cols);
        return;
    }
    // Depth blocks of equal size (at most kc_max).
    let kc_max = k.div_ceil(k.div_ceil(kc_max));
    // Column blocks start at multiples of `nc_max` (and at `cols.start`): a packed B is
    // laid out in the blocks of the whole product's width.
    let nc_max = nc_max.min(if job.packed_b.is_some() { job.n } else { ldc }).next_multiple_of(NR);
    let b_room = if job.packed_b.is_some() { 0 } else { kc_max * nc_max / NR };
    // The parts each strip of rows is computed in, the same for every block of B (a
    // packed A is read in whole strips).
    let parts = || strip_list(rows.clone(), MR, MID, job.packed_a.is_some());
    let n_parts = parts().count();
    let a_in_place = rows_in_place && operands::reads_a_in_place(job);
    let keep_a = !a_in_place && operands::keeps_a(job, nc_max, n_parts, MR);
    let (a_pack, b_pack) = scratch.parts::<MR, NR>(if keep_a { n_parts * k } else { kc_max }, b_room);
    let packed = job.packed_b.map(|(p, nr)| {
        assert_eq!(nr, NR, "gemm: B was packed for another tile");
        p.as_chunks::<NR>().0
    });
    debug_assert!(job.packed_a.is_none() || rows.start.is_multiple_of(MR), "a packed A is read from whole strips");
    let strips = job.m.div_ceil(MR);
    let in_place = b_rows && packed.is_none() && operands::b_in_place(job, MR, NR);
    let fused = if registers && !job.epilogue.is_empty() { job.epilogue.in_registers() } else { None };
    let mut j0 = cols.start;
    while j0 < cols.end {
        let nc = (nc_max - j0 % nc_max).min(cols.end - j0);
        for p0 in (0..k).step_by(kc_max) {
            let kc = kc_max.min(k - p0);
            let beta = if p0 == 0 { job.beta } else { 1.0 };
            // The sums are complete after this depth block.
            let last = p0 + kc == k;
            let fused = fused.as_ref().filter(|_| last);
            let panels = kc * nc.div_ceil(NR);
            // B read in place: only a last, partial panel is packed (into the first).
            let full_panels = if in_place { nc / NR } else { 0 };
            if in_place && nc % NR != 0 {
                pack::pack_b(job, j0 + full_panels * NR, nc % NR, p0, kc, &mut b_pack[..kc]);
            }
            let b_pack: &[[f32; NR]] = match packed {
                _ if in_place => &b_pack[..kc],
                // Block `j0 / nc_max` holds, per depth block, its panels of `kc` rows
                // each (see `pack_whole`); the earlier blocks are all `nc_max` wide.
                Some(p) => {
                    let (block, in_block) = (j0 / nc_max, j0 % nc_max);
                    let width = nc_max.min(job.n - block * nc_max).div_ceil(NR);
                    &p[block * k * (nc_max / NR) + p0 * width + in_block / NR * kc..][..panels]
                }
                None => {
                    let b_pack = &mut b_pack[..panels];
                    pack::pack_b(job, j0, nc, p0, kc, b_pack);
                    b_pack
                }
            };
            // Each part of each strip of MR rows (`strip_list`).
            for (pi, (i0, mr)) in parts().enumerate() {
                // A last strip of few rows takes the short or the mid kernel over the same
                // panels (the rows past the strip repeat its last, or are the packing's
                // zeros): the same sums, without computing MR - mr rows for nothing.
                let rows_computed = kernel_rows(mr, MR, MID);
                let a_panel: APanel<'_, MR> = match job.packed_a {
                    // Depth block p0 holds every strip, `kc` rows each (see `pack_a_whole`).
                    Some((p, mr)) => {
                        assert_eq!(mr, MR, "gemm: A was packed for another tile");
                        APanel::Packed(&p.as_chunks::<MR>().0[p0 * strips + i0 / MR * kc..][..kc])
                    }
                    // Kept: depth block p0 holds every part, `kc` rows each, packed in
                    // the first column block.
                    None if keep_a => {
                        let a_pack = &mut a_pack[p0 * n_parts + pi * kc..][..kc];
                        if j0 == cols.start {
                            pack::pack_a(job, i0, mr, p0, a_pack);
                        }
                        APanel::Packed(&*a_pack)
                    }
                    // A stored m×k: the strip's rows are read where they are, no copy,
                    // unless they share one L1 set for panels enough to pay for a copy
                    // ([`operands::copies_a_strip`]).
                    None if a_in_place && rows_computed == mr && !operands::copies_a_strip(k, mr, nc) => {
                        let strip = &job.a[i0 * k + p0..(i0 + mr - 1) * k + p0 + kc];
                        APanel::Rows(StridedRows::new(strip, mr, k, kc))
                    }
                    // A last strip of fewer rows than its kernel computes, or one whose
                    // rows share an L1 set: the rows are copied as they are (a contiguous
                    // copy, not a packing's transpose), `kc` apart, the last repeated; the
                    // repeats' sums are never stored.
                    None if a_in_place => {
                        let rows = &mut a_pack[..kc].as_flattened_mut()[..rows_computed * kc];
                        for (r, row) in rows.chunks_exact_mut(kc).enumerate() {
                            row.copy_from_slice(&job.a[(i0 + r.min(mr - 1)) * k + p0..][..kc]);
                        }
                        APanel::Rows(StridedRows::new(&*rows, rows_computed, kc, kc))
                    }
                    None => {
                        let a_pack = &mut a_pack[..kc];
                        pack::pack_a(job, i0, mr, p0, a_pack);
                        APanel::Packed(&*a_pack)
                    }
                };
                let strip = &mut c[(i0 - rows.start) * ldc + j0 - cols.start..];
                for jp in 0..nc.div_ceil(NR) {
                    let j = jp * NR;
                    let b_panel = if jp < full_panels {
                        BPanel::Rows { b: &job.b[p0 * job.n + j0 + j..], ld: job.n }
                    } else if in_place {
                        BPanel::Packed(b_pack)
                    } else {
                        BPanel::Packed(&b_pack[jp * kc..][..kc])
                    };
                    let nr = NR.min(nc - j);
                    let c = &mut strip[j..];
                    // A partial tile goes through a tile and `store`, as every edge tile
                    // merges into C (a direct store rounds `beta * c + alpha * acc` once,
                    // `store` twice): whichever kernel computes it, the bits are the same.
                    if rows_computed == TINY_MR && mr < MR {
                        let mut tile = [[0.0f32; NR]; TINY_MR];
                        tiny(a_panel, b_panel, Out::Part(&mut tile, nr.div_ceil(16)));
                        store(&tile[..mr], nr, c, ldc, job.alpha, beta);
                    } else if rows_computed == SHORT_MR && mr < MR {
                        let mut tile = [[0.0f32; NR]; SHORT_MR];
                        short(a_panel, b_panel, Out::Part(&mut tile, nr.div_ceil(16)));
                        store(&tile[..mr], nr, c, ldc, job.alpha, beta);
                    } else if rows_computed == MID && mr < MR {
                        let mut tile = [[0.0f32; NR]; MID];
                        mid(a_panel, b_panel, Out::Part(&mut tile, nr.div_ceil(16)));
                        store(&tile[..mr], nr, c, ldc, job.alpha, beta);
                    } else if mr == MR && nr == NR {
                        let fin = fused.map(|&ep| Fin { ep, row: i0, col: j0 + j });
                        kernel(a_panel, b_panel, Out::C { c, ldc, alpha: job.alpha, beta, fin });
                    } else {
                        let mut tile = [[0.0f32; NR]; MR];
                        kernel(a_panel, b_panel, Out::Part(&mut tile, nr.div_ceil(16)));
                        store(&tile[..mr], nr, c, ldc, job.alpha, beta);
                    }
                }
                if last {
                    // The strip's sums are complete, and it is still in L1: the epilogue on
                    // it, or with the full tiles' in their registers, on its edge tiles
                    // (all of a strip of fewer rows than the tile's, else the last panel
                    // of fewer columns).
                    let edge = match fused {
                        None => 0,
                        Some(_) if mr < MR => 0,
                        Some(_) => nc - nc % NR,
                    };
                    let strip = &mut strip[edge..];
                    job.epilogue.apply(job.level, strip, ldc, job.n, i0..i0 + mr, j0 + edge..j0 + nc);
                }
            }
        }
        j0 += nc;
    }
}

/// `c = beta * c`, or zeros (without reading c) when `beta == 0`.
pub(super) fn scale(c: &mut [f32], beta: f32) {
    if beta == 0.0 {
        c.fill(0.0);
    } else if beta != 1.0 {
        c.iter_mut().for_each(|v| *v *= beta);
    }
}

/// Merges the first `nr` columns of `tile`'s rows into C (row stride `ldc`):
/// `c = alpha * tile + beta * c` (the sum rounded once), not reading C when `beta == 0`.
#[inline(always)]
fn store<const NR: usize>(tile: &[[f32; NR]], nr: usize, c: &mut [f32], ldc: usize, alpha: f32, beta: f32) {
    for (i, t) in tile.iter().enumerate() {
        let row = &mut c[i * ldc..][..nr];
        if beta == 0.0 {
            row.iter_mut().zip(t).for_each(|(o, &v)| *o = alpha * v);
        } else if beta == 1.0 {
            row.iter_mut().zip(t).for_each(|(o, &v)| *o += alpha * v);
        } else {
            // `beta * c + alpha * acc` rounded once, as the x86 kernels' full tiles merge
            // (`fmadd(beta, c, alpha * acc)`): a row gets the same bits whether its tile
            // is full or an edge one (found by review: a packed A of the other AVX-512 tile
            // moved rows between the two with beta -0.75).
            row.iter_mut().zip(t).for_each(|(o, &v)| *o = beta.mul_add(*o, alpha * v));
        }
    }
}
