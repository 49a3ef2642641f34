//! Operands packed once for many products: a constant weight packed on the first Run, or
//! the shared operand of a split product.

#[cfg(target_arch = "x86_64")]
use super::x86;
use super::PORTABLE_MR;
use super::{Gemm, Job};
use crate::arch::{self, Level};

/// `op(B)` of one product packed once, in the order the blocked driver reads it, so that
/// the tasks of a product split by rows share one copy instead of each packing all of B
/// again (which made a split cost a whole extra packing of B per task when the tasks ran
/// in turn on one thread). Made by [`pack_b`], read by [`gemm_rows_packed`](super::gemm_rows_packed); the buffer is
/// reused, so packing allocates nothing once it has held a B this large.
#[derive(Default, Debug)]
pub struct PackedB {
    pub(super) buf: Vec<f32>,
    /// Where the 64-byte aligned data starts in `buf`, and how long it is.
    pub(super) at: usize,
    pub(super) len: usize,
    /// What was packed: the kernel build, the panel width (the tile's columns, which the
    /// build chose from the product's m and n), the product's n and k and the transpose
    /// flag. (For a [`PackedA`]: the build, m, n, k and flag.) A packed B serves products
    /// of any m: the panel width then fixes the tile.
    pub(super) key: Option<(Level, usize, usize, usize, bool)>,
    /// Packed as bfloat16 pairs by [`pack_b_bf16`](super::pack_b_bf16), for the bf16
    /// kernel (each float of `buf` holds the two bfloat16 of a column's pair of depths).
    pub(super) bf16: bool,
}

impl PackedB {
    /// An empty one (no allocation until the first [`pack_b`]).
    pub fn new() -> Self {
        Self::default()
    }

    pub(super) fn data(&self) -> &[f32] {
        &self.buf[self.at..][..self.len]
    }

    /// The width of its panels, once packed: a product may read it from any column that
    /// is a multiple of this (a split by columns cuts there).
    pub fn panel_width(&self) -> Option<usize> {
        self.key.map(|key| key.1)
    }

    /// The rows of the tile a product on it takes, once packed for the float kernels (its
    /// panel width fixes the tile, whatever the product's m): a split by rows cuts on
    /// multiples of them.
    pub fn strip_rows(&self) -> Option<usize> {
        let nr = self.panel_width().filter(|_| !self.bf16)?;
        TILES.iter().find(|t| t.1 == nr).map(|t| t.0)
    }

    /// Whether it holds bfloat16 pairs (made by [`pack_b_bf16`](super::pack_b_bf16)).
    pub fn is_bf16(&self) -> bool {
        self.bf16
    }

    /// Room for `floats` 64-byte aligned; returns it.
    pub(super) fn room(&mut self, floats: usize) -> &mut [f32] {
        const ALIGN: usize = 16;
        if self.buf.len() < floats + ALIGN {
            self.buf.resize(floats + ALIGN, 0.0);
        }
        let off = self.buf.as_ptr().align_offset(64);
        self.at = if off < ALIGN { off } else { 0 };
        &mut self.buf[self.at..]
    }
}

/// `op(A)` of one product packed once, in the order the blocked driver reads it, for the
/// tasks of a product split by columns and for constant filters packed once for every Run
/// ([`gemm_cols_packed_a`](super::gemm_cols_packed_a)). Made by [`pack_a`], for an m×n×k product; it serves any
/// product with the same m and k (n only chose the tile, which the packing fixes).
#[derive(Default, Debug)]
pub struct PackedA(pub(super) PackedB, pub(super) usize);

impl PackedA {
    /// An empty one (no allocation until the first [`pack_a`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// The rows of the tile it was packed for (0 before the first packing): a product on
    /// it may start only at a multiple of them.
    pub fn strip_rows(&self) -> usize {
        self.1
    }

    /// Whether it holds bfloat16 pairs (made by [`pack_a_bf16`](super::pack_a_bf16)).
    pub fn is_bf16(&self) -> bool {
        self.0.is_bf16()
    }
}

/// Packs `op(A)` (`a` stored m×k, or k×m when `trans_a`) for an m×n×k product, for
/// [`gemm_cols_packed_a`](super::gemm_cols_packed_a). Panics if `a.len() != m * k`.
pub fn pack_a(packed: &mut PackedA, m: usize, n: usize, k: usize, a: &[f32], trans_a: bool) {
    pack_a_at(Level::detected(), packed, m, n, k, a, trans_a);
}

/// [`pack_a`] with the kernel build for `level` (lowered to [`Level::detected`]).
#[doc(hidden)]
pub fn pack_a_at(level: Level, packed: &mut PackedA, m: usize, n: usize, k: usize, a: &[f32], trans_a: bool) {
    assert_eq!(a.len(), m * k, "gemm: `a` must hold m*k elements");
    let isa = arch::isa_at(level);
    let job = Job::for_packing(m, n, k, a, trans_a, &[], false);
    // Room for the largest layout any build makes: m rows padded to a whole 14-row strip.
    let p = &mut packed.0;
    let (len, mr) = arch::gemm_pack_a(isa, &job, p.room(k * (m + 13)));
    p.len = len;
    p.bf16 = false;
    p.key = Some((isa.level(), m, n, k, trans_a));
    packed.1 = mr;
}

/// Packs `op(B)` (`b` stored k×n, or n×k when `trans_b`) for an m×n×k product, for
/// [`gemm_rows_packed`](super::gemm_rows_packed). Panics if `b.len() != k * n`.
pub fn pack_b(packed: &mut PackedB, m: usize, n: usize, k: usize, b: &[f32], trans_b: bool) {
    pack_b_at(Level::detected(), packed, m, n, k, b, trans_b);
}

/// [`pack_b`] with the kernel build for `level` (lowered to [`Level::detected`]).
#[doc(hidden)]
pub fn pack_b_at(level: Level, packed: &mut PackedB, m: usize, n: usize, k: usize, b: &[f32], trans_b: bool) {
    assert_eq!(b.len(), k * n, "gemm: `b` must hold k*n elements");
    let isa = arch::isa_at(level);
    let job = Job::for_packing(m, n, k, &[], false, b, trans_b);
    // Room for the largest layout any build makes: k rows of n padded to whole panels,
    // at most 48 wide.
    let (len, nr) = arch::gemm_pack_b(isa, &job, packed.room(k * (n + 47)));
    packed.len = len;
    packed.bf16 = false;
    packed.key = Some((isa.level(), nr, n, k, trans_b));
}

/// Packs `g.a` for the product `g` with the tile `g`'s packed B (if any) fixes, for
/// [`Gemm::compute`](super::Gemm::compute) with both operands packed. Panics if `g.a.len() != m * k`.
pub fn pack_a_for(packed: &mut PackedA, g: &Gemm<'_>) {
    let Gemm { m, n, k, a, trans_a, .. } = *g;
    assert_eq!(a.len(), m * k, "gemm: `a` must hold m*k elements");
    let level = g.packed_b.map_or_else(Level::detected, |p| p.key.expect("gemm: B was never packed").0);
    let isa = arch::isa_at(level);
    let mut job = Job::for_packing(m, n, k, a, trans_a, &[], false);
    job.packed_b = g.packed_b.map(|p| (p.data(), p.key.expect("gemm: B was never packed").1));
    let p = &mut packed.0;
    let (len, mr) = arch::gemm_pack_a(isa, &job, p.room(k * (m + 13)));
    p.len = len;
    p.bf16 = false;
    p.key = Some((isa.level(), m, n, k, trans_a));
    packed.1 = mr;
}

/// The builds' tiles, (rows, columns): each width is one tile's.
const TILES: &[(usize, usize)] = &[
    (PORTABLE_MR, 8),
    #[cfg(target_arch = "x86_64")]
    x86::TILE_AVX512,
    #[cfg(target_arch = "x86_64")]
    x86::TILE_AVX512_WIDE,
    #[cfg(target_arch = "x86_64")]
    x86::TILE_AVX2,
];

/// Whether a tile of `mr` rows and one of `nr` columns are one of the builds' tiles.
pub(super) fn tiles_agree(mr: usize, nr: usize) -> bool {
    TILES.contains(&(mr, nr))
}
