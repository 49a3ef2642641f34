//! How the blocked driver covers a strip of rows shorter than its tile: which of the
//! tiny, short, mid and full kernels compute it, and where two smaller kernels beat one.

/// The rows of the short kernel the x86 drivers take for strips of that many rows or fewer.
pub(crate) const SHORT_MR: usize = 4;
/// The rows of the tiny kernel every driver takes for a strip of one or two rows (a
/// recurrent layer's batch of 2: the short kernel computed twice the rows, 2x64x256 in
/// 1.5 us like 4x64x256).
pub(crate) const TINY_MR: usize = 2;
/// The rows of the mid kernel AVX-512's 14-row tile takes for a last strip of 5 to 8 rows
/// (a 64-row product: four strips of 14 and one of 8, none computed for nothing).
pub(crate) const MID_MR: usize = 8;

/// The rows a kernel computes for a strip of `mr` rows on a tile of `MR` rows with a mid
/// kernel of `MID` rows (`MID` no more than [`SHORT_MR`] when there is none): the fewest of
/// the tiny, the short, the mid and the full kernel that cover them.
pub(crate) const fn kernel_rows(mr: usize, tile: usize, mid: usize) -> usize {
    if mr <= TINY_MR && TINY_MR < tile {
        TINY_MR
    } else if mr <= SHORT_MR && SHORT_MR < tile {
        SHORT_MR
    } else if mr <= mid && mid < tile {
        mid
    } else {
        tile
    }
}

/// The parts `(first row, rows)` a strip of `mr` rows (on a tile of `tile` rows with a mid
/// kernel of `mid` rows) is computed in, and how many: one kernel of [`kernel_rows`], or,
/// where two smaller kernels compute fewer rows, the mid or short kernel and then the
/// short or tiny one. A last strip of 9 rows on AVX-512's 14-row tile (a 65-token
/// sequence: 4 x 14 + 9) ran the full kernel for 5 rows of nothing: 65x768x192 at 100
/// GFLOP/s against 111 for 64 rows. Every kernel sums each element in the same order,
/// so the bits do not change.
pub(crate) const fn strip_parts(mr: usize, tile: usize, mid: usize) -> ([(usize, usize); 3], usize) {
    let one = ([(0, mr); 3], 1);
    if mr >= tile {
        return one;
    }
    // Rows a kernel computes for `r` rows, and the first kernel of a cut.
    let single = kernel_rows(mr, tile, mid);
    let first = if mr > mid && mid > SHORT_MR && mid < tile {
        mid
    } else if mr > SHORT_MR && SHORT_MR < tile {
        SHORT_MR
    } else {
        return one;
    };
    let rest = mr - first;
    if rest > SHORT_MR || first + kernel_rows(rest, tile, mid) >= single {
        return one;
    }
    ([(0, first), (first, rest), (0, 0)], 2)
}

/// The parts `(first row, rows)` the driver computes `rows` in on a tile of `tile` rows
/// with a mid kernel of `mid` rows: each strip of `tile` rows, a last, shorter one in the
/// parts [`strip_parts`] cuts it into (in one piece when A is packed `whole`: its strips
/// are read whole).
pub(crate) fn strip_list(
    rows: std::ops::Range<usize>,
    tile: usize,
    mid: usize,
    whole: bool,
) -> impl Iterator<Item = (usize, usize)> {
    let end = rows.end;
    rows.step_by(tile).flat_map(move |i0| {
        let mr = tile.min(end - i0);
        let (cuts, n) = if whole { ([(0, mr); 3], 1) } else { strip_parts(mr, tile, mid) };
        cuts.into_iter().take(n).map(move |(off, len)| (i0 + off, len))
    })
}
