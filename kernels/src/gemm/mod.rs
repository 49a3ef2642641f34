//! Single-precision matrix multiply: `C = alpha · op(A) · op(B) + beta · C`, row-major.
//!
//! # API
//!
//! * [`gemm`]`(m, n, k, alpha, a, trans_a, b, trans_b, beta, c)`: the whole product. `a` is
//!   stored m×k (k×m when `trans_a`), `b` k×n (n×k when `trans_b`), `c` m×n. Uses a
//!   thread-local [`GemmScratch`], so it allocates only the first time a thread needs more
//!   scratch than before.
//! * [`gemm_with`]`(scratch, ...)`: the same with a caller-owned [`GemmScratch`]. The scratch
//!   grows to fit the largest product it has seen and is then reused: no heap allocation in
//!   steady state.
//! * [`gemm_rows`]`(scratch, rows, m, ..., c_rows)`: only the rows `rows` of C; `c_rows` is
//!   that part of C (`rows.len() × n`, i.e. `&mut c[rows.start * n..rows.end * n]`). Disjoint
//!   row ranges are independent, so a thread pool can split one product by handing each task
//!   its own range, its own `chunks_mut` of C and its own scratch (one per worker). Each
//!   task packs the B blocks it needs itself; ranges of a few dozen rows or more (multiples of
//!   16 ideally) keep that overhead small.
//!
//! With `beta == 0` the old contents of C are never read (NaN/Inf in C do not propagate);
//! with `k == 0` the result is `beta · C` (zeros when `beta == 0`). Any size works, including
//! zero.
//!
//! # Method
//!
//! Goto/BLIS-style blocking. For each block of `NC` columns and `KC` depth, the block of
//! `op(B)` is packed into `NR`-column panels (module `pack`; sized to stay in L2); then, for
//! each strip of `MR` rows, the strip of `op(A)` is packed (it stays in L1) and the
//! microkernel computes each `MR × NR` tile of C with the whole tile held in registers,
//! reading one broadcast element of A and one `NR`-wide row of B per step of depth. The
//! tile is then merged into C (`alpha`, and `beta` on the first depth block, 1 after).
//! Edge tiles use zero-padded panels and write back only their valid part. Matrix-vector
//! products (`m == 1` or `n == 1`) skip packing (module `small`).
//!
//! Microkernels per [`Level`]: AVX-512 14×32 (28 zmm accumulators), AVX2 + FMA 6×16
//! (12 ymm accumulators), and a portable 4×8 one in plain Rust. All levels sum each output
//! in the same order (depth ascending); the FMA levels round once per step, so they may
//! differ from the portable one in the last bits.

mod pack;
mod small;
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

use crate::arch::{self, Level};
use std::cell::RefCell;
use std::ops::Range;

/// Reusable packing buffers for [`gemm_with`] / [`gemm_rows`]. Create one per thread (or per
/// worker) and keep it: it grows to the largest block size it has needed (at most a few
/// hundred KiB) and never shrinks.
#[derive(Default, Debug)]
pub struct GemmScratch {
    buf: Vec<f32>,
}

impl GemmScratch {
    /// An empty scratch (no allocation until the first product).
    pub fn new() -> Self {
        Self::default()
    }

    /// Two 64-byte aligned parts: `a_rows` rows of `[f32; MR]` and `b_rows` of `[f32; NR]`.
    #[inline(always)]
    fn parts<const MR: usize, const NR: usize>(
        &mut self,
        a_rows: usize,
        b_rows: usize,
    ) -> (&mut [[f32; MR]], &mut [[f32; NR]]) {
        const ALIGN: usize = 16; // floats in 64 bytes
        let a_len = (a_rows * MR).next_multiple_of(ALIGN);
        let need = a_len + b_rows * NR + ALIGN;
        if self.buf.len() < need {
            self.buf.resize(need, 0.0);
        }
        let off = self.buf.as_ptr().align_offset(64);
        let off = if off < ALIGN { off } else { 0 };
        let (a, b) = self.buf[off..].split_at_mut(a_len);
        (a[..a_rows * MR].as_chunks_mut().0, b[..b_rows * NR].as_chunks_mut().0)
    }
}

/// One (row range of a) product, arguments checked.
pub(crate) struct Job<'a> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub a: &'a [f32],
    pub trans_a: bool,
    pub b: &'a [f32],
    pub trans_b: bool,
    pub beta: f32,
    pub rows: Range<usize>,
}

thread_local! {
    static SCRATCH: RefCell<GemmScratch> = RefCell::new(GemmScratch::new());
}

/// `c = alpha * op(a) * op(b) + beta * c` for row-major `op(a)`: m×k and `op(b)`: k×n.
/// `a` is stored m×k (or k×m when `trans_a`), `b` k×n (or n×k when `trans_b`). With
/// `beta == 0`, `c`'s old contents are ignored (NaN included). Uses a thread-local scratch;
/// see the module docs.
#[allow(clippy::too_many_arguments)]
pub fn gemm(
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    trans_a: bool,
    b: &[f32],
    trans_b: bool,
    beta: f32,
    c: &mut [f32],
) {
    SCRATCH.with_borrow_mut(|s| gemm_with(s, m, n, k, alpha, a, trans_a, b, trans_b, beta, c));
}

/// [`gemm`] with a caller-owned scratch (no allocation once the scratch is large enough).
#[allow(clippy::too_many_arguments)]
pub fn gemm_with(
    scratch: &mut GemmScratch,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    trans_a: bool,
    b: &[f32],
    trans_b: bool,
    beta: f32,
    c: &mut [f32],
) {
    gemm_rows(scratch, 0..m, m, n, k, alpha, a, trans_a, b, trans_b, beta, c);
}

/// Rows `rows` of [`gemm`]'s result: `c_rows` is C's rows `rows` only (`rows.len() * n`
/// elements), `a` and `b` are the whole operands. For splitting one product across threads.
/// Panics if `rows.end > m` or a length does not match.
#[allow(clippy::too_many_arguments)]
pub fn gemm_rows(
    scratch: &mut GemmScratch,
    rows: Range<usize>,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    trans_a: bool,
    b: &[f32],
    trans_b: bool,
    beta: f32,
    c_rows: &mut [f32],
) {
    gemm_rows_at(Level::detected(), scratch, rows, m, n, k, alpha, a, trans_a, b, trans_b, beta, c_rows);
}

/// [`gemm_rows`] with the kernel build for `level` (lowered to [`Level::detected`] if the
/// CPU lacks it). For tests and benchmarks.
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn gemm_rows_at(
    level: Level,
    scratch: &mut GemmScratch,
    rows: Range<usize>,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    trans_a: bool,
    b: &[f32],
    trans_b: bool,
    beta: f32,
    c_rows: &mut [f32],
) {
    assert_eq!(a.len(), m * k, "gemm: `a` must hold m*k elements");
    assert_eq!(b.len(), k * n, "gemm: `b` must hold k*n elements");
    assert!(rows.start <= rows.end && rows.end <= m, "gemm: rows {rows:?} outside 0..{m}");
    assert_eq!(c_rows.len(), rows.len() * n, "gemm: `c` must hold rows.len()*n elements");
    let job = Job { m, n, k, alpha, a, trans_a, b, trans_b, beta, rows };
    arch::gemm(arch::isa_at(level), scratch, &job, c_rows);
}

/// Where a microkernel puts its `MR × NR` result `acc = a_panel^T · b_panel`.
pub(crate) enum Out<'a, const MR: usize, const NR: usize> {
    /// A full tile of C, row `i` at `c[i * ldc..][..NR]`: `c = alpha * acc + beta * c`,
    /// not reading C when `beta == 0`.
    C { c: &'a mut [f32], ldc: usize, alpha: f32, beta: f32 },
    /// An edge tile: `acc` alone, merged into C by the driver.
    Tile(&'a mut [[f32; NR]; MR]),
}

impl<const MR: usize, const NR: usize> Out<'_, MR, NR> {
    /// Writes `acc` (the portable path; the x86 kernels merge from registers).
    #[inline(always)]
    fn merge(self, acc: &[[f32; NR]; MR]) {
        match self {
            Out::C { c, ldc, alpha, beta } => store(acc, NR, c, ldc, alpha, beta),
            Out::Tile(t) => *t = *acc,
        }
    }
}

/// The blocked driver, instantiated per level with its microkernel and block sizes.
/// `kernel(a_panel, b_panel, out)` computes `a_panel^T · b_panel` (depth = panel length)
/// into `out`.
#[inline(always)]
pub(crate) fn run<const MR: usize, const NR: usize>(
    scratch: &mut GemmScratch,
    job: &Job<'_>,
    c: &mut [f32],
    kc_max: usize,
    nc_max: usize,
    kernel: impl Fn(&[[f32; MR]], &[[f32; NR]], Out<'_, MR, NR>),
) {
    let (n, k, rows) = (job.n, job.k, job.rows.clone());
    if rows.is_empty() || n == 0 {
        return;
    }
    if k == 0 {
        scale(c, job.beta);
        return;
    }
    if small::applies(job) {
        small::gemv(job, c);
        return;
    }
    // Depth blocks of equal size (at most kc_max).
    let kc_max = k.div_ceil(k.div_ceil(kc_max));
    let nc_max = nc_max.min(n).next_multiple_of(NR);
    let (a_pack, b_pack) = scratch.parts::<MR, NR>(kc_max, kc_max * nc_max / NR);
    for j0 in (0..n).step_by(nc_max) {
        let nc = nc_max.min(n - j0);
        for p0 in (0..k).step_by(kc_max) {
            let kc = kc_max.min(k - p0);
            let beta = if p0 == 0 { job.beta } else { 1.0 };
            let b_pack = &mut b_pack[..kc * nc.div_ceil(NR)];
            pack::pack_b(job, j0, nc, p0, kc, b_pack);
            let a_pack = &mut a_pack[..kc];
            for i0 in rows.clone().step_by(MR) {
                let mr = MR.min(rows.end - i0);
                pack::pack_a(job, i0, mr, p0, a_pack);
                for (jp, b_panel) in b_pack.chunks_exact(kc).enumerate() {
                    let j = j0 + jp * NR;
                    let nr = NR.min(j0 + nc - j);
                    let c = &mut c[(i0 - rows.start) * n + j..];
                    if mr == MR && nr == NR {
                        kernel(a_pack, b_panel, Out::C { c, ldc: n, alpha: job.alpha, beta });
                    } else {
                        let mut tile = [[0.0f32; NR]; MR];
                        kernel(a_pack, b_panel, Out::Tile(&mut tile));
                        store(&tile[..mr], nr, c, n, job.alpha, beta);
                    }
                }
            }
        }
    }
}

/// `c = beta * c`, or zeros (without reading c) when `beta == 0`.
fn scale(c: &mut [f32], beta: f32) {
    if beta == 0.0 {
        c.fill(0.0);
    } else if beta != 1.0 {
        c.iter_mut().for_each(|v| *v *= beta);
    }
}

/// Merges the first `nr` columns of `tile`'s rows into C (row stride `ldc`):
/// `c = alpha * tile + beta * c`, not reading C when `beta == 0`.
#[inline(always)]
fn store<const NR: usize>(tile: &[[f32; NR]], nr: usize, c: &mut [f32], ldc: usize, alpha: f32, beta: f32) {
    for (i, t) in tile.iter().enumerate() {
        let row = &mut c[i * ldc..][..nr];
        if beta == 0.0 {
            row.iter_mut().zip(t).for_each(|(o, &v)| *o = alpha * v);
        } else if beta == 1.0 {
            row.iter_mut().zip(t).for_each(|(o, &v)| *o += alpha * v);
        } else {
            row.iter_mut().zip(t).for_each(|(o, &v)| *o = alpha * v + beta * *o);
        }
    }
}

/// Portable microkernel: 4×8 in plain Rust (LLVM keeps it in SSE registers).
#[inline(always)]
fn micro_portable(a: &[[f32; 4]], b: &[[f32; 8]], out: Out<'_, 4, 8>) {
    let mut acc = [[0.0f32; 8]; 4];
    for (ar, br) in a.iter().zip(b) {
        for (row, &av) in acc.iter_mut().zip(ar) {
            for (x, &bv) in row.iter_mut().zip(br) {
                *x += av * bv;
            }
        }
    }
    out.merge(&acc);
}

/// The portable build (any CPU).
pub(crate) fn portable(scratch: &mut GemmScratch, job: &Job<'_>, c: &mut [f32]) {
    run::<4, 8>(scratch, job, c, 256, 1024, micro_portable);
}
