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
//! each strip of `MR` rows, the microkernel computes each `MR × NR` tile of C with the
//! whole tile held in registers, reading one broadcast element of A and one `NR`-wide row
//! of B per step of depth. The x86 kernels read A (stored m×k) where it is, `MR` rows side
//! by side through one strided view (`arch::rows`: one bounds check a strip, the rows'
//! addresses from a few base registers; a last strip of fewer rows than its kernel is
//! copied row by row); A stored k×m, and A on the portable build, is packed strip by
//! strip first (it stays in L1). Packing A cost the most where B is narrow: in an
//! attention head's `P · V` (256×64×256) it took 32 of the product's 111 us, and A was
//! packed again for every column block of a wide product (a product of several column
//! blocks packs it once and keeps it). The
//! tile is then merged into C (`alpha`, and `beta` on the first depth block, 1 after).
//! Edge tiles use zero-padded panels and write back only their valid part. Matrix-vector
//! products (`m == 1` or `n == 1`) skip packing (module `small`).
//!
//! Microkernels per [`Level`]: AVX-512 14×32 (28 zmm accumulators), AVX2 + FMA 6×16
//! (12 ymm accumulators), and a portable 4×8 one in plain Rust. All levels sum each output
//! in the same order (depth ascending); the FMA levels round once per step, so they may
//! differ from the portable one in the last bits.

mod bf16;
#[cfg(target_arch = "x86_64")]
pub(crate) mod bf16_x86;
mod epilogue;
mod pack;
pub(crate) use pack::{pack_a_whole, pack_whole};
mod packed;
mod portable;
pub(crate) use portable::{portable, portable_pack_a, portable_pack_b, PORTABLE_MR};
mod operands;
mod small;
mod strips;
pub(crate) use strips::{kernel_rows, strip_list, MID_MR, SHORT_MR, TINY_MR};
#[cfg(test)]
mod tests;
#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

use crate::arch::rows::StridedRows;
use crate::arch::{self, Level};
use crate::conv::Im2col;
use std::cell::RefCell;
use std::ops::Range;

pub use bf16::{bf16_supported, bf16_tiles, pack_a_bf16, pack_b_bf16, to_bf16};
pub use epilogue::{Activation, Bias, Epilogue, Scale};
use packed::tiles_agree;
pub use packed::{pack_a, pack_a_at, pack_a_for, pack_b, pack_b_at, PackedA, PackedB};

/// Reusable packing buffers for [`gemm_with`] / [`gemm_rows`]. Create one per thread (or per
/// worker) and keep it: it grows to the largest block size it has needed (a few hundred
/// KiB; up to the A of a product of several column blocks, at most 16 MiB) and never
/// shrinks.
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

/// One block of a checked product, as the driver runs it: the [`Gemm`] (read through
/// `Deref`), the block, the kernel build, and the packed operands as slices with their
/// tile widths.
pub(crate) struct Job<'a> {
    pub g: Gemm<'a>,
    pub rows: Range<usize>,
    /// The columns of C computed (all of them but in [`gemm_block`]); C's row stride is
    /// their count.
    pub cols: Range<usize>,
    /// `op(B)` already packed by [`pack_b`] (for all columns) in panels this wide (`b` is
    /// still the operand, for the matrix-vector path), or `None` to pack each block as it
    /// is needed.
    pub packed_b: Option<(&'a [f32], usize)>,
    /// `op(A)` already packed by [`pack_a`] (for all rows) with tiles of this many rows,
    /// or `None`.
    pub packed_a: Option<(&'a [f32], usize)>,
    /// The build the epilogue's activations run on.
    pub level: Level,
}

impl<'a> std::ops::Deref for Job<'a> {
    type Target = Gemm<'a>;

    fn deref(&self) -> &Gemm<'a> {
        &self.g
    }
}

thread_local! {
    static SCRATCH: RefCell<GemmScratch> = RefCell::new(GemmScratch::new());
}

impl<'a> Job<'a> {
    /// The whole product with alpha 1 and beta 0: what packing an operand reads (the
    /// other operand may be empty).
    fn for_packing(m: usize, n: usize, k: usize, a: &'a [f32], trans_a: bool, b: &'a [f32], trans_b: bool) -> Self {
        let g = Gemm::new(m, n, k, a, trans_a, b, trans_b);
        Job { g, rows: 0..m, cols: 0..n, packed_b: None, packed_a: None, level: Level::detected() }
    }
}

/// One product with all a caller can give it: `c = epilogue(alpha op(a) op(b) + beta c)`,
/// with either operand already packed. [`Gemm::compute`] runs a block of it; every block
/// split of a product gives the whole product's bits.
#[derive(Clone, Copy, Debug)]
pub struct Gemm<'a> {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    /// Stored m×k, or k×m when `trans_a`.
    pub a: &'a [f32],
    pub trans_a: bool,
    /// Stored k×n, or n×k when `trans_b`.
    pub b: &'a [f32],
    pub trans_b: bool,
    pub beta: f32,
    /// `op(A)` packed by [`pack_a`] or [`pack_a_for`] from this `a`, for this m and k.
    pub packed_a: Option<&'a PackedA>,
    /// `op(B)` packed by [`pack_b`] from this `b`, for this n and k (any m).
    pub packed_b: Option<&'a PackedB>,
    pub epilogue: Epilogue<'a>,
    /// `op(B)` read from a convolution's input as its im2col matrix (then `b` is empty,
    /// `trans_b` false, nothing packed for B, and m, n > 1).
    pub im2col: Option<Im2col<'a>>,
}

impl<'a> Gemm<'a> {
    /// `c = op(a) op(b)`: alpha 1, beta 0, nothing packed, no epilogue.
    pub fn new(m: usize, n: usize, k: usize, a: &'a [f32], trans_a: bool, b: &'a [f32], trans_b: bool) -> Self {
        let (alpha, beta, packed_a, packed_b, epilogue) = (1.0, 0.0, None, None, Epilogue::default());
        Gemm { m, n, k, alpha, a, trans_a, b, trans_b, beta, packed_a, packed_b, epilogue, im2col: None }
    }

    /// Computes the block `rows` × `cols` of C into `c_block` (row-major, `cols.len()`
    /// wide; it holds that block of C on entry when `beta != 0`, and a residual is read from
    /// the whole m×n addend). Panics if a range is outside the product, if `n == 1` with a
    /// partial column range, if a packed operand was made for another
    /// product or another kernel build, if a packed A is used from a row or a packed B from
    /// a column that is not a multiple of its tile's, or if a length does not match.
    pub fn compute(&self, scratch: &mut GemmScratch, rows: Range<usize>, cols: Range<usize>, c_block: &mut [f32]) {
        let level = self.packed_level().unwrap_or_else(Level::detected);
        self.compute_at(level, scratch, rows, cols, c_block);
    }

    /// Whether computing this product reads `op(A)` where it is (A stored m×k, on the x86
    /// builds) instead of packing it strip by strip: then a split by columns gains
    /// nothing from packing A once for its parts, and packing it would cost the partial
    /// last strip its short kernel (a 64-row product packed in 14-row strips computes 70).
    pub fn reads_a_in_place(&self) -> bool {
        if self.packed_b.is_some_and(PackedB::is_bf16) {
            // The bf16 kernel rounds A into its own strips.
            return true;
        }
        let level = arch::isa_at(self.packed_level().unwrap_or_else(Level::detected)).level();
        operands::reads_a_in_place(self) && matches!(level, Level::Avx2 | Level::Avx512)
    }

    /// The kernel build of the packed operands (asserting they agree).
    fn packed_level(&self) -> Option<Level> {
        let a = self.packed_a.map(|p| p.0.key.expect("gemm: A was never packed").0);
        let b = self.packed_b.map(|p| p.key.expect("gemm: B was never packed").0);
        if let (Some(a), Some(b)) = (a, b) {
            assert!(a == b, "gemm: A and B were packed for different kernel builds");
        }
        a.or(b)
    }

    /// [`Gemm::compute`] with the kernel build for `level` (lowered to
    /// [`Level::detected`]).
    #[doc(hidden)]
    pub fn compute_at(
        &self,
        level: Level,
        scratch: &mut GemmScratch,
        rows: Range<usize>,
        cols: Range<usize>,
        c_block: &mut [f32],
    ) {
        let Gemm { m, n, k, .. } = *self;
        assert_eq!(self.a.len(), m * k, "gemm: `a` must hold m*k elements");
        match self.im2col {
            None => assert_eq!(self.b.len(), k * n, "gemm: `b` must hold k*n elements"),
            Some(_) => assert!(m > 1 && n > 1 && !self.trans_b && self.packed_b.is_none(), "gemm: im2col source"),
        }
        assert!(rows.start <= rows.end && rows.end <= m, "gemm: rows {rows:?} outside 0..{m}");
        assert!(cols.start <= cols.end && cols.end <= n, "gemm: columns {cols:?} outside 0..{n}");
        assert!(cols == (0..n) || n > 1, "gemm: a matrix-vector product takes all its columns");
        let len = rows.len() * cols.len();
        assert_eq!(c_block.len(), len, "gemm: `c` must hold rows.len()*cols.len() elements");
        self.epilogue.check(m, n);
        if self.packed_b.is_some_and(PackedB::is_bf16) {
            return bf16::compute(self, scratch, rows, cols, c_block);
        }
        if self.packed_a.is_some_and(|p| p.0.is_bf16()) {
            return bf16::compute_a(self, scratch, rows, cols, c_block);
        }
        let isa = arch::isa_at(level);
        let packed_a = self.packed_a.map(|p| {
            let (plevel, pm, _, pk, pt) = p.0.key.expect("gemm: A was never packed");
            assert!((pm, pk, pt) == (m, k, self.trans_a), "gemm: A was packed for another product");
            assert!(plevel == isa.level(), "gemm: A was packed for another kernel build");
            assert!(rows.start.is_multiple_of(p.1), "gemm: a packed A is read from whole strips");
            (p.0.data(), p.1)
        });
        let packed_b = self.packed_b.map(|p| {
            let (plevel, nr, pn, pk, pt) = p.key.expect("gemm: B was never packed");
            assert!((pn, pk, pt) == (n, k, self.trans_b), "gemm: B was packed for another product");
            assert!(plevel == isa.level(), "gemm: B was packed for another kernel build");
            // A matrix-vector product reads B unpacked, from any column, except one row by
            // a B not stored transposed, which reads the panels.
            let unpacked = n == 1 || (m == 1 && self.trans_b);
            assert!(
                unpacked || cols.is_empty() || cols.start.is_multiple_of(nr),
                "gemm: a packed B is read from whole panels"
            );
            (p.data(), nr)
        });
        if let (Some((_, mr)), Some((_, nr))) = (packed_a, packed_b) {
            assert!(tiles_agree(mr, nr), "gemm: A and B were packed for different tiles");
        }
        let job = Job { g: *self, rows, cols, packed_b, packed_a, level: isa.level() };
        arch::gemm(isa, scratch, &job, c_block);
    }
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
    let g = Gemm { alpha, beta, ..Gemm::new(m, n, k, a, trans_a, b, trans_b) };
    g.compute_at(level, scratch, rows, 0..n, c_rows);
}

/// The block `rows` × `cols` of [`gemm`]'s result: `c_block` holds only that block,
/// row-major (`rows.len() * cols.len()` elements), with the same bits as the whole
/// product's when `cols.start` is a multiple of [`col_tile`] (else a full tile of the
/// whole product becomes an edge tile of the block, which merges `beta * c` with another
/// rounding). `a` and `b` are the whole operands. For splitting a product of few rows
/// across threads by columns: each task packs only its own columns of B. Panics if a range
/// is outside the product, if `n == 1` with a partial column range, or if a length does
/// not match.
#[allow(clippy::too_many_arguments)]
pub fn gemm_block(
    scratch: &mut GemmScratch,
    rows: Range<usize>,
    cols: Range<usize>,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    trans_a: bool,
    b: &[f32],
    trans_b: bool,
    beta: f32,
    c_block: &mut [f32],
) {
    gemm_block_at(Level::detected(), scratch, rows, cols, m, n, k, alpha, a, trans_a, None, b, trans_b, beta, c_block);
}

/// [`gemm_block`] of all rows, with `op(A)` from `packed` (made by [`pack_a`] for this
/// very product, from this `a`): tasks splitting a product of few rows by columns share
/// one packing of A. The same bits.
#[allow(clippy::too_many_arguments)]
pub fn gemm_cols_packed_a(
    scratch: &mut GemmScratch,
    cols: Range<usize>,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    trans_a: bool,
    packed: &PackedA,
    b: &[f32],
    trans_b: bool,
    beta: f32,
    c_block: &mut [f32],
) {
    let g = Gemm { alpha, beta, packed_a: Some(packed), ..Gemm::new(m, n, k, a, trans_a, b, trans_b) };
    g.compute(scratch, 0..m, cols, c_block);
}

/// [`gemm_block`] with the kernel build for `level` (lowered to [`Level::detected`]).
#[doc(hidden)]
#[allow(clippy::too_many_arguments)]
pub fn gemm_block_at(
    level: Level,
    scratch: &mut GemmScratch,
    rows: Range<usize>,
    cols: Range<usize>,
    m: usize,
    n: usize,
    k: usize,
    alpha: f32,
    a: &[f32],
    trans_a: bool,
    packed_a: Option<&PackedA>,
    b: &[f32],
    trans_b: bool,
    beta: f32,
    c_block: &mut [f32],
) {
    let g = Gemm { alpha, beta, packed_a, ..Gemm::new(m, n, k, a, trans_a, b, trans_b) };
    g.compute_at(level, scratch, rows, cols, c_block);
}

/// Whether the detected level's build reads a B stored k×n where it is, rather than
/// packing it (the AVX-512 one; see `operands::b_in_place`): a split of the product's rows then
/// costs no second packing of B.
pub fn reads_b_in_place() -> bool {
    Level::detected() == Level::Avx512
}

/// The columns of the tile (the panel width) an m×n product runs on at the detected level,
/// with no operand packed: a column split that cuts at multiples of it gives the whole
/// product's bits.
pub fn col_tile(m: usize, n: usize) -> usize {
    match Level::detected() {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => x86::col_tile_avx512(m, n),
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => x86::TILE_AVX2.1,
        _ => 8,
    }
}

/// The rows of the tile an m×n product runs on at the detected level: a row split whose
/// parts are multiples of it computes no more edge rows than the whole product.
pub fn row_tile(m: usize, n: usize) -> usize {
    match Level::detected() {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => x86::row_tile_avx512(m, n),
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => x86::ROW_TILE_AVX2,
        _ => PORTABLE_MR,
    }
}

/// [`gemm_rows`] with `op(B)` from `packed` (made by [`pack_b`] for this very product,
/// from this `b`): the same bits, with no packing of B. Panics if `packed` was made for
/// another product shape or a length does not match.
#[allow(clippy::too_many_arguments)]
pub fn gemm_rows_packed(
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
    packed: &PackedB,
    beta: f32,
    c_rows: &mut [f32],
) {
    let g = Gemm { alpha, beta, packed_b: Some(packed), ..Gemm::new(m, n, k, a, trans_a, b, trans_b) };
    g.compute(scratch, rows, 0..n, c_rows);
}

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
    /// not reading C when `beta == 0`.
    C { c: &'a mut [f32], ldc: usize, alpha: f32, beta: f32 },
    /// An edge tile: `acc` alone, merged into C by the driver.
    Tile(&'a mut [[f32; NR]; MR]),
    /// An edge tile whose columns past the first `16 * vectors` are not used (left as
    /// they are): a kernel may compute only those vectors, each column's sum the same.
    Part(&'a mut [[f32; NR]; MR], usize),
}

impl<const MR: usize, const NR: usize> Out<'_, MR, NR> {
    /// Writes `acc` (the portable path; the x86 kernels merge from registers).
    #[inline(always)]
    fn merge(self, acc: &[[f32; NR]; MR]) {
        match self {
            Out::C { c, ldc, alpha, beta } => store(acc, NR, c, ldc, alpha, beta),
            Out::Tile(t) | Out::Part(t, _) => *t = *acc,
        }
    }
}

/// The blocked driver, instantiated per level with its microkernel and block sizes.
/// `kernel(a_panel, b_panel, out)` computes `a_panel^T · b_panel` (depth = panel length)
/// into `out`. `rows_in_place`: A stored m×k is read where it is; `b_rows`: so is B where
/// [`operands::b_in_place`] says it pays. Either way every element's sum runs over depth in the
/// same order, so the bits are those of the packed operands.
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
    let mut j0 = cols.start;
    while j0 < cols.end {
        let nc = (nc_max - j0 % nc_max).min(cols.end - j0);
        for p0 in (0..k).step_by(kc_max) {
            let kc = kc_max.min(k - p0);
            let beta = if p0 == 0 { job.beta } else { 1.0 };
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
                    // A stored m×k: the strip's rows are read where they are, no copy.
                    None if a_in_place && rows_computed == mr => {
                        let strip = &job.a[i0 * k + p0..(i0 + mr - 1) * k + p0 + kc];
                        APanel::Rows(StridedRows::new(strip, mr, k, kc))
                    }
                    // A last strip of fewer rows than its kernel computes: the rows are
                    // copied as they are (a contiguous copy, not a packing's transpose),
                    // the last repeated; the repeats' sums are never stored.
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
                        kernel(a_panel, b_panel, Out::C { c, ldc, alpha: job.alpha, beta });
                    } else {
                        let mut tile = [[0.0f32; NR]; MR];
                        kernel(a_panel, b_panel, Out::Part(&mut tile, nr.div_ceil(16)));
                        store(&tile[..mr], nr, c, ldc, job.alpha, beta);
                    }
                }
                if p0 + kc == k {
                    // The strip's sums are complete, and it is still in L1.
                    job.epilogue.apply(job.level, strip, ldc, job.n, i0..i0 + mr, j0..j0 + nc);
                }
            }
        }
        j0 += nc;
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
