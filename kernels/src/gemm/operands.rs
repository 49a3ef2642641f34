//! Where the blocked driver reads A and B from: where they are, packed strip by strip
//! (A) or block by block (B), or A packed once and kept for all of a product's column
//! blocks. Every way gives the same sums in the same order, so the choice is speed alone.

use super::{Gemm, Job};

/// The most floats of A a product keeps packed for its later column blocks (16 MiB).
const KEEP_A_MAX: usize = 1 << 22;

/// Whether `job` (A packed strip by strip, not read in place) packs each of its `parts`
/// strip parts of A once, in its first column block, and keeps them for the others
/// (blocks `nc_max` wide, a tile `mr` rows): a product of several column blocks whose A
/// is at most [`KEEP_A_MAX`]. (A read in place runs as fast as a kept one: 128x3072x768
/// and 197x1536x384 at 161-166 GFLOP/s either way, AVX-512 and AVX2.)
pub(super) fn keeps_a(job: &Job<'_>, nc_max: usize, parts: usize, mr: usize) -> bool {
    let col_blocks = job.cols.end.div_ceil(nc_max).saturating_sub(job.cols.start / nc_max);
    job.packed_a.is_none() && col_blocks > 1 && parts * job.k <= KEEP_A_MAX / mr
}

/// Whether the strips of `g`'s A (stored m×k, not packed already) are read where they
/// are, on a build that can: always (the driver and [`Gemm::reads_a_in_place`] both ask
/// here). Read through one strided view (`arch::rows`), a strip costs a few address
/// additions a depth step where packing it costs a transposing copy (0.43 ns a float:
/// 112 us for a 512x512 A), and its rows, as many streams into L1 as the tile has rows,
/// cost nothing measurable on Intel (12 ways), even 4 KiB apart in one L1 set; on AMD
/// Zen 4 (8 ways) the driver copies such strips first ([`copies_a_strip`]). Kernel-only,
/// B packed, AVX-512, one thread, GFLOP/s packed -> in place: 512³ 145 -> 171,
/// 500x384x384 132 -> 167, 64x256x1024 116 -> 162, 512x512x1024 136 -> 169; through the plugin 512³ took 2,089
/// -> 1,764 us (ORT 1,704). Packing had won before the view, when a strip was 14 row
/// slices, each bounds-checked every step.
pub(super) fn reads_a_in_place(g: &Gemm<'_>) -> bool {
    g.packed_a.is_none() && !g.trans_a
}

/// The floats between two addresses that fall in the same set of an L1 data cache of
/// 64 sets of 64-byte lines (4 KiB: Intel's and AMD's of recent years, whatever their ways).
const L1_SET_STRIDE: usize = 1024;
/// The most rows of A a strip reads in place from one L1 set: AMD Zen 4's L1 has 8 ways
/// (Intel's recent ones 12).
const L1_WAYS: usize = 8;

/// Whether a strip of `rows` rows of A stored m×k, read in place, would have all its
/// rows in one L1 set at every step of depth (`k` a multiple of [`L1_SET_STRIDE`]) and
/// more of them than the set holds: each step's loads then evict one another, and the
/// driver copies the strip's rows `kc` apart instead where that pays ([`copies_a_strip`]:
/// a contiguous copy, about 1% of the multiply-adds' time; the sums are the same). Kernel-only, B packed, AVX-512, one
/// thread, AMD Zen 4 (peak 117 GFLOP/s): 64x256xK on the 14 x 32 tile ran 111-115
/// GFLOP/s at K = 512, 768, 1088, 1152 and 1280 but 89 at K = 1024 (56x256x1024: 86);
/// the 8 x 48 tile's 8 rows (64x240x1024) 114. Packing those strips instead (the
/// transposing copy) ran 83-103.
pub(super) fn rows_share_a_set(k: usize, rows: usize) -> bool {
    k.is_multiple_of(L1_SET_STRIDE) && rows > L1_WAYS
}

/// The least columns of a block whose strips [`copies_a_strip`] copies: below them a
/// strip feeds too few panels to pay for its copy (found by review, B packed, one thread,
/// new / old time: 8192x32x1024 1.29-1.43, 4096x8x4096 1.40, 8192x64x1024 1.11-1.14, but
/// 8192x128x1024 0.97 and 8192x256x1024 0.88).
const COPY_MIN_COLUMNS: usize = 128;

/// Whether the driver copies a strip of `rows` rows of A read in place for a column
/// block `nc` wide: its rows share an L1 set ([`rows_share_a_set`]) and the block has
/// [`COPY_MIN_COLUMNS`] columns or more.
pub(super) fn copies_a_strip(k: usize, rows: usize, nc: usize) -> bool {
    rows_share_a_set(k, rows) && nc >= COPY_MIN_COLUMNS
}

/// Whether `run` reads B's full panels where they are instead of packing them (for the
/// builds that ask): B stored k×n, not made from an image. Packing costs a read and a
/// write of B per product, which only many strips of A share; reading a panel's rows at
/// B's row stride cost nothing measurable on AVX-512 (16×3136×128, a 1x1 Conv: 72 -> 105
/// GFLOP/s; 512³ 106 -> 107) except where rows 4 KiB apart share L1 sets and many strips
/// reread them (128×4096×256: 101 -> 98), which keep the packing. The AVX2 build (6 rows,
/// depth blocks of 256) measured slower in place on every shape (512³ 106 -> 74).
pub(super) fn b_in_place(job: &Job<'_>, mr: usize, nr: usize) -> bool {
    job.im2col.is_none()
        && !job.trans_b
        && job.n >= nr
        && (job.rows.len().div_ceil(mr) <= 8 || !job.n.is_multiple_of(1024))
}
