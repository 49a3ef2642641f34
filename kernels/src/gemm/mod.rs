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
mod driver;
use driver::scale;
pub(crate) use driver::{run, APanel, BPanel, Out};
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
