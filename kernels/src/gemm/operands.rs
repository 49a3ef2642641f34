//! Where the blocked driver reads A and B from: where they are, packed strip by strip
//! (A) or block by block (B), or A packed once and kept for all of a product's column
//! blocks. Every way gives the same sums in the same order, so the choice is speed alone.

use super::Job;

/// The most floats of A a product keeps packed for its later column blocks (16 MiB).
const KEEP_A_MAX: usize = 1 << 22;

/// Whether `job` (A not packed already) packs each of its `parts` strip parts of A once,
/// in its first column block, and keeps them for the others (blocks `nc_max` wide, a
/// tile `mr` rows): a product of several column blocks whose A is at most
/// [`KEEP_A_MAX`]. Read in place (14 rows a step) 128x3072x768 ran at 120 GFLOP/s,
/// packed again for each block 127, kept 133 (196x1024x256 124 -> 155).
pub(super) fn keeps_a(job: &Job<'_>, nc_max: usize, parts: usize, mr: usize) -> bool {
    let col_blocks = job.cols.end.div_ceil(nc_max).saturating_sub(job.cols.start / nc_max);
    job.packed_a.is_none() && col_blocks > 1 && parts * job.k <= KEEP_A_MAX / mr
}

/// The panels of B up to which a product reads its strips of A where they are whatever
/// its depth: fewer than this many, packing a strip is not paid back.
const IN_PLACE_PANELS: usize = 8;
/// The most floats of a strip of A and a panel of B (one depth block of each) with which
/// a product of more panels still reads A in place: 32 KiB, two thirds of L1.
const IN_PLACE_FLOATS: usize = 8 << 10;

/// Whether the strips of `job`'s A (stored m×k, not packed already) are read where they
/// are, on a build that can (tile `mr` × `nr`, depth blocks `kc`), unless its rows alias
/// in L1 ([`a_rows_alias`]): for fewer than [`IN_PLACE_PANELS`] panels of B, or where the
/// strip and a panel fit in two thirds of L1. Read through one strided view
/// (`arch::rows`), a strip costs a few address additions a depth step where packing it
/// costs a transposing copy: 64x512x128 (B packed, 8x48 tile, kc 128, 28 KiB) ran at 188
/// GFLOP/s in place against 175 packed. But its rows are as many streams into L1 as the
/// tile has rows, in sets that a packed strip spreads evenly: beside a deeper panel the
/// strips stay packed (500x384x384 in a model, 14x32 tile, kc 192, 34.5 KiB, ran 15%
/// slower in place, though faster kernel-only). AVX2's 6x16 tile fits up to kc 372, so
/// it reads A in place at every depth block of 256: kernel-only 64x128x512 82 -> 93
/// GFLOP/s, 197x384x384 98 -> 101, 197x1536x384 95 either way.
pub(super) fn reads_a_in_place(job: &Job<'_>, mr: usize, nr: usize, kc: usize) -> bool {
    let fits = kc * (mr + nr) <= IN_PLACE_FLOATS;
    job.packed_a.is_none()
        && !job.trans_a
        && !a_rows_alias(job.k, mr)
        && (job.cols.len() < IN_PLACE_PANELS * nr || fits)
}

/// Whether `mr` rows of an A stored m×k, read where they are, would evict one another
/// from L1: rows 4 KiB apart (k a multiple of 1024 floats) fall in one set of a 32 KiB
/// 8-way L1, and more rows than ways thrash it. 64x256x1024 on AVX-512's 14-row tile
/// (B packed) ran at 49-65 GFLOP/s read in place, 81-95 packed strip by strip; the 8-row
/// tile (128x768x3072) ran the same either way.
pub(super) fn a_rows_alias(k: usize, mr: usize) -> bool {
    mr > 8 && k.is_multiple_of(1024)
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
