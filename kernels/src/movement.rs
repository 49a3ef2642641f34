//! Data movement over plain slices: Transpose and Expand, any element type, rank ≤ 8.
//!
//! Both first merge the axes that move together (consecutive in the input and in the
//! output, or all broadcast) and drop those of size 1, so a transpose that swaps two heads
//! of `[1, 256, 8, 64]` is a walk over 2 048 contiguous runs of 64, and an Expand of
//! `[1, 2, 1, 256, 64]` to 4 heads is 8 copies of 16 384 elements. What is left is then
//! copied run by run (`copy_from_slice`), filled run by run (a broadcast innermost axis),
//! or, when the innermost output axis is strided in the input, transposed in 8 × 8
//! tiles so that the reads and the writes both stay within a few cache lines.

use smallvec::SmallVec;

/// One output axis after merging: its length, its stride in the input (0 where Expand
/// broadcasts) and its stride in the output.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Axis {
    len: usize,
    src: usize,
    dst: usize,
}

/// A plane of two output axes transposed in tiles: `rows` is contiguous in the input,
/// `cols` is the innermost output axis.
#[derive(Clone, Copy, Debug)]
struct Plane {
    rows: Axis,
    cols: Axis,
}

type Axes = SmallVec<[Axis; 8]>;

/// The side of a transposed tile (8 × 8 four-byte elements: eight 256-bit vectors).
const TILE: usize = 8;

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;

/// `y[c][r] = x[r][c]` for float `x` of `rows` x `cols` (row-major): the same as
/// [`transpose`] with `perm` `[1, 0]`, in 16 x 16 register blocks on AVX-512 (a tenth of
/// the 8 x 8 element tiles' time on the `[196, 576]` blocks of a transposed 1x1 convolution).
pub fn transpose_2d(x: &[f32], rows: usize, cols: usize, y: &mut [f32]) {
    crate::arch::transpose_2d(crate::arch::isa(), x, rows, cols, y);
}

/// `y[c * ldy + r] = x[r * ldx + c]` for `r < rows`, `c < cols`: a block of one
/// row-major matrix transposed into a block of another, as [`transpose_2d`] does whole.
/// Panics if a block runs past its slice or its rows overlap (`cols > ldx`, `rows > ldy`).
pub fn transpose_block(x: &[f32], (rows, cols, ldx): (usize, usize, usize), y: &mut [f32], ldy: usize) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(cols <= ldx && rows <= ldy, "transpose_block: rows overlap");
    assert!(x.len() >= (rows - 1) * ldx + cols, "transpose_block: x too short");
    assert!(y.len() >= (cols - 1) * ldy + rows, "transpose_block: y too short");
    crate::arch::transpose_block(crate::arch::isa(), x, (rows, cols, ldx), y, ldy);
}

/// SpaceToDepth of `x` (`[n, c, h, w]`) by blocks of 2 into `y` (`[n, 4 c, h / 2, w /
/// 2]`, block offset `(by, bx)` of channel `ci` in channel `(2 by + bx) c + ci`): each
/// input row split into its even and odd elements, the two channels of its `by`, in one
/// pass the compiler vectorises with permutes (the 6-D transpose gathered each output row
/// from a stride of 2: 1.44x ORT's time on [1,16,160,160]). Panics unless `h` and `w` are
/// even and the lengths match.
pub fn space_to_depth_2(x: &[f32], [n, c, h, w]: [usize; 4], y: &mut [f32]) {
    assert!(h % 2 == 0 && w % 2 == 0, "space_to_depth_2: the blocks must divide the image");
    assert!(x.len() == n * c * h * w && y.len() == x.len(), "space_to_depth_2: lengths");
    if x.is_empty() {
        return;
    }
    let (ow, plane) = (w / 2, h / 2 * (w / 2));
    for (img, xi) in x.chunks_exact(c * h * w).enumerate() {
        let yi = &mut y[img * c * h * w..][..c * h * w];
        for (ci, xc) in xi.chunks_exact(h * w).enumerate() {
            for (r, row) in xc.chunks_exact(w).enumerate() {
                let (oy, by) = (r / 2, r % 2);
                let at = |bx: usize| ((2 * by + bx) * c + ci) * plane + oy * ow;
                let (lo, hi) = yi.split_at_mut(at(1));
                let (even, odd) = (&mut lo[at(0)..][..ow], &mut hi[..ow]);
                crate::arch::widest(
                    #[inline(always)]
                    || {
                        for ((e, o), pair) in even.iter_mut().zip(odd.iter_mut()).zip(row.as_chunks::<2>().0) {
                            (*e, *o) = (pair[0], pair[1]);
                        }
                    },
                );
            }
        }
    }
}

/// `y = transpose(x, perm)` for `x` of `shape` (row-major), rank ≤ 8.
pub fn transpose<T: Copy>(x: &[T], shape: &[usize], perm: &[usize], y: &mut [T]) {
    transpose_with(x, shape, perm, y, tiled);
}

/// [`transpose`] for floats: a plane (the output's innermost axis strided in the input)
/// goes to [`transpose_block`], in 16 x 16 register blocks on AVX-512, where the element
/// tiles move 8 x 8 through memory. A detector head's `[1, 3, 13, 20, 20]` to
/// `[1, 3, 20, 20, 13]` (three 13 x 400 planes) took twice ORT's time on the tiles.
pub fn transpose_f32(x: &[f32], shape: &[usize], perm: &[usize], y: &mut [f32]) {
    transpose_with(x, shape, perm, y, blocked);
}

fn transpose_with<T: Copy>(x: &[T], shape: &[usize], perm: &[usize], y: &mut [T], plane: PlaneFn<T>) {
    assert_eq!(x.len(), shape.iter().product::<usize>());
    assert_eq!(y.len(), x.len());
    if x.is_empty() {
        return;
    }
    walk(x, y, &transpose_axes(shape, perm), plane);
}

/// The outermost axis of the output of [`transpose`] once axes that move together are
/// merged: its length and the output elements per index of it. A range of its indices is
/// a contiguous part of the output, which [`transpose_part`] writes: a split over threads.
pub fn transpose_outer(shape: &[usize], perm: &[usize]) -> (usize, usize) {
    let a = transpose_axes(shape, perm)[0];
    (a.len, a.dst)
}

/// The part of `transpose(x, perm)` at indices `outer` of its outermost merged axis (see
/// [`transpose_outer`]) into `y`, which holds just that part.
pub fn transpose_part<T: Copy>(x: &[T], shape: &[usize], perm: &[usize], outer: std::ops::Range<usize>, y: &mut [T]) {
    transpose_part_with(x, shape, perm, outer, y, tiled);
}

/// [`transpose_part`] for floats, its planes as [`transpose_f32`] does them.
pub fn transpose_part_f32(x: &[f32], shape: &[usize], perm: &[usize], outer: std::ops::Range<usize>, y: &mut [f32]) {
    transpose_part_with(x, shape, perm, outer, y, blocked);
}

fn transpose_part_with<T: Copy>(
    x: &[T],
    shape: &[usize],
    perm: &[usize],
    outer: std::ops::Range<usize>,
    y: &mut [T],
    plane: PlaneFn<T>,
) {
    assert_eq!(x.len(), shape.iter().product::<usize>());
    if x.is_empty() {
        return;
    }
    let mut axes = transpose_axes(shape, perm);
    assert!(outer.start <= outer.end && outer.end <= axes[0].len, "transpose_part: outer range");
    assert_eq!(y.len(), outer.len() * axes[0].dst, "transpose_part: output length");
    if outer.is_empty() {
        return;
    }
    let skip = outer.start * axes[0].src;
    axes[0].len = outer.len();
    walk(&x[skip..], y, &axes, plane);
}

/// The merged output axes of `transpose(shape, perm)` (never empty).
fn transpose_axes(shape: &[usize], perm: &[usize]) -> Axes {
    let rank = shape.len();
    assert_eq!(perm.len(), rank);
    assert!(rank <= 8);
    let mut in_strides = [0usize; 8];
    let mut acc = 1;
    for d in (0..rank).rev() {
        in_strides[d] = acc;
        acc *= shape[d];
    }
    merged(perm.iter().map(|&p| (shape[p], in_strides[p])))
}

/// Broadcasts `x` of `shape` to `out_shape` (numpy rules; `shape` may have fewer axes).
pub fn expand<T: Copy>(x: &[T], shape: &[usize], out_shape: &[usize], y: &mut [T]) {
    let rank = out_shape.len();
    assert!(rank <= 8 && shape.len() <= rank);
    assert_eq!(y.len(), out_shape.iter().product::<usize>());
    if y.is_empty() {
        return;
    }
    let pad = rank - shape.len();
    // Input stride per output axis; 0 where the input is broadcast.
    let mut strides = [0usize; 8];
    let mut acc = 1usize;
    for a in (0..shape.len()).rev() {
        if shape[a] != 1 {
            strides[a + pad] = acc;
        }
        acc *= shape[a];
    }
    let axes = merged((0..rank).map(|a| (out_shape[a], strides[a])));
    walk(x, y, &axes, tiled);
}

/// The output axes `(len, input stride)`, outermost first, merged where an axis continues
/// the one inside it in the input too (or both are broadcast), without axes of length 1;
/// with their output strides. Never empty: a tensor of one element is one axis of one.
fn merged(axes: impl DoubleEndedIterator<Item = (usize, usize)>) -> Axes {
    let mut inner_first: Axes = SmallVec::new();
    for (len, src) in axes.rev().filter(|&(len, _)| len != 1) {
        match inner_first.last_mut() {
            Some(last) if src == last.src * last.len => last.len *= len,
            _ => inner_first.push(Axis { len, src, dst: 0 }),
        }
    }
    if inner_first.is_empty() {
        inner_first.push(Axis { len: 1, src: 1, dst: 0 });
    }
    let mut dst = 1;
    for a in inner_first.iter_mut() {
        a.dst = dst;
        dst *= a.len;
    }
    inner_first.reverse();
    inner_first
}

/// How a plane at these input and output offsets is transposed.
type PlaneFn<T> = fn(&[T], usize, &mut [T], usize, Plane);

/// A plane in element tiles ([`tiles`], then [`edges`]).
fn tiled<T: Copy>(x: &[T], src: usize, y: &mut [T], dst: usize, plane: Plane) {
    tiles(x, src, y, dst, plane);
    edges(x, src, y, dst, plane);
}

/// A float plane by [`transpose_block`]: output row `i` (input column) holds input
/// elements `src + i + j * cols.src` for `j < cols.len`.
fn blocked(x: &[f32], src: usize, y: &mut [f32], dst: usize, plane: Plane) {
    let Plane { rows, cols } = plane;
    transpose_block(&x[src..], (cols.len, rows.len, cols.src), &mut y[dst..], rows.dst);
}

/// Writes every element of `y` (laid out by `axes`' output strides) from `x`, each plane
/// (see [`Plane`]) by `plane`.
fn walk<T: Copy>(x: &[T], y: &mut [T], axes: &[Axis], plane_fn: PlaneFn<T>) {
    let last = axes[axes.len() - 1];
    // The output axis the input walks contiguously, when it is not the innermost one: the
    // pair is transposed in tiles.
    let plane = (last.src != 1 && last.src != 0)
        .then(|| axes.iter().position(|a| a.src == 1))
        .flatten()
        .filter(|&q| axes[q].len >= TILE && last.len >= TILE);
    let outer: Axes =
        axes[..axes.len() - 1].iter().enumerate().filter(|&(q, _)| Some(q) != plane).map(|(_, &a)| a).collect();
    odometer(&outer, |src, dst| match plane {
        Some(q) => plane_fn(x, src, y, dst, Plane { rows: axes[q], cols: last }),
        None if last.src == 1 => y[dst..][..last.len].copy_from_slice(&x[src..][..last.len]),
        None if last.src == 0 => y[dst..][..last.len].fill(x[src]),
        None => {
            for (j, o) in y[dst..][..last.len].iter_mut().enumerate() {
                *o = x[src + j * last.src];
            }
        }
    });
}

/// Calls `f(input offset, output offset)` for every index of `axes`, the last fastest.
fn odometer(axes: &[Axis], mut f: impl FnMut(usize, usize)) {
    let mut index = [0usize; 8];
    let (mut src, mut dst) = (0usize, 0usize);
    loop {
        f(src, dst);
        let mut d = axes.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            src += axes[d].src;
            dst += axes[d].dst;
            if index[d] < axes[d].len {
                break;
            }
            src -= axes[d].src * axes[d].len;
            dst -= axes[d].dst * axes[d].len;
            index[d] = 0;
        }
    }
}

/// The full `TILE × TILE` tiles of a plane at these offsets: each reads `TILE` input runs
/// of `TILE` elements and writes `TILE` output runs, transposed in registers (the
/// fixed-size arrays become vector loads, shuffles and stores). `edges` does the rest.
fn tiles<T: Copy>(x: &[T], src: usize, y: &mut [T], dst: usize, plane: Plane) {
    let Plane { rows, cols } = plane;
    for i0 in (0..rows.len / TILE * TILE).step_by(TILE) {
        for j0 in (0..cols.len / TILE * TILE).step_by(TILE) {
            let block: [[T; TILE]; TILE] = std::array::from_fn(|j| {
                *<&[T; TILE]>::try_from(&x[src + i0 + (j0 + j) * cols.src..][..TILE]).expect("TILE elements")
            });
            for i in 0..TILE {
                let out = <&mut [T; TILE]>::try_from(&mut y[dst + (i0 + i) * rows.dst + j0..][..TILE]).expect("TILE");
                *out = std::array::from_fn(|j| block[j][i]);
            }
        }
    }
}

/// The elements of a plane outside its full tiles: the right edge of the tiled rows, then
/// the rows below them.
fn edges<T: Copy>(x: &[T], src: usize, y: &mut [T], dst: usize, plane: Plane) {
    let Plane { rows, cols } = plane;
    let (full_rows, full_cols) = (rows.len / TILE * TILE, cols.len / TILE * TILE);
    for i in 0..rows.len {
        let from = if i < full_rows { full_cols } else { 0 };
        for j in from..cols.len {
            y[dst + i * rows.dst + j] = x[src + i + j * cols.src];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The element of `x` (of `shape`) that output index `out` reads.
    fn transpose_reference(x: &[u32], shape: &[usize], perm: &[usize]) -> Vec<u32> {
        let out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let n: usize = out.iter().product();
        (0..n)
            .map(|mut flat| {
                let mut idx = vec![0; shape.len()];
                for o in (0..out.len()).rev() {
                    idx[perm[o]] = flat % out[o];
                    flat /= out[o];
                }
                let src = idx.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i);
                x[src]
            })
            .collect()
    }

    /// The float transpose on every build this CPU has, full blocks and every remainder
    /// of rows and columns, against index arithmetic (distinct values: a lane moved to
    /// the wrong place shows).
    #[test]
    fn transpose_block_matches_index_arithmetic_on_every_build() {
        // (rows, cols, ldx, ldy): whole 16 x 16 blocks, partial ones, a single row.
        for (rows, cols, ldx, ldy) in
            [(33, 40, 45, 50), (16, 16, 16, 16), (5, 37, 37, 9), (1, 20, 20, 1), (20, 1, 3, 21)]
        {
            let x: Vec<f32> = (0..(rows - 1) * ldx + cols).map(|i| i as f32).collect();
            let len = (cols - 1) * ldy + rows;
            for level in crate::arch::Level::supported() {
                let mut y = vec![-1.0f32; len];
                crate::arch::transpose_block(crate::arch::isa_at(level), &x, (rows, cols, ldx), &mut y, ldy);
                for (i, &v) in y.iter().enumerate() {
                    let (c, r) = (i / ldy, i % ldy);
                    let want = if r < rows { x[r * ldx + c] } else { -1.0 };
                    assert_eq!(v.to_bits(), want.to_bits(), "{level:?} {rows}x{cols} ({ldx}, {ldy}) at {i}");
                }
            }
        }
    }

    #[test]
    fn transpose_2d_matches_index_arithmetic_on_every_build() {
        for level in crate::arch::Level::supported() {
            for (rows, cols) in [(16, 16), (49, 960), (196, 32), (1, 17), (17, 1), (33, 47), (7, 16), (16, 5), (0, 3)] {
                let x: Vec<f32> = (0..rows * cols).map(|i| i as f32).collect();
                let mut y = vec![-1.0; x.len()];
                crate::arch::transpose_2d(crate::arch::isa_at(level), &x, rows, cols, &mut y);
                let want: Vec<f32> = (0..rows * cols).map(|i| x[(i % rows) * cols + i / rows]).collect();
                assert_eq!(y, want, "{} {rows}x{cols}", level.name());
            }
        }
    }

    /// Parts along the outermost merged axis, in three uneven pieces, make the whole.
    #[test]
    fn transpose_parts_make_the_whole() {
        for (shape, perm) in [
            (&[1, 30, 12, 64][..], &[0, 2, 1, 3][..]),
            (&[3, 17, 19], &[2, 0, 1]),
            (&[5, 40], &[1, 0]),
            (&[2, 3, 4, 5], &[0, 1, 2, 3]),
            (&[9, 1, 12, 8], &[2, 1, 0, 3]),
        ] {
            let n: usize = shape.iter().product();
            let x: Vec<u32> = (0..n as u32).collect();
            let want = transpose_reference(&x, shape, perm);
            let (outer, per) = transpose_outer(shape, perm);
            assert_eq!(outer * per, n);
            let mut got = vec![u32::MAX; n];
            let cuts = [0, outer / 3, outer / 3 + (outer > 1) as usize, outer];
            for c in cuts.windows(2) {
                transpose_part(&x, shape, perm, c[0]..c[1], &mut got[c[0] * per..c[1] * per]);
            }
            assert_eq!(got, want, "{shape:?} {perm:?}");
            // The float parts, their planes in register blocks: the same elements.
            let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let mut gotf = vec![-1.0f32; n];
            for c in cuts.windows(2) {
                transpose_part_f32(&xf, shape, perm, c[0]..c[1], &mut gotf[c[0] * per..c[1] * per]);
            }
            assert!(gotf.iter().zip(&want).all(|(&g, &w)| g == w as f32), "f32 {shape:?} {perm:?}");
        }
    }

    /// Every permutation of shapes that take each path (runs, tiles with edges, strided
    /// rows too short to tile, size-1 axes, merged axes) against index arithmetic.
    #[test]
    fn transpose_matches_index_arithmetic_on_every_path() {
        fn perms(n: usize) -> Vec<Vec<usize>> {
            if n == 0 {
                return vec![vec![]];
            }
            let mut all = Vec::new();
            for p in perms(n - 1) {
                for at in 0..n {
                    let mut q = p.clone();
                    q.insert(at, n - 1);
                    all.push(q);
                }
            }
            all
        }
        let shapes: &[&[usize]] =
            &[&[37, 21], &[3, 40, 17], &[2, 1, 19, 33], &[1, 4, 16, 16], &[5, 3, 2, 7], &[64, 3], &[3, 13, 20, 20]];
        for shape in shapes {
            let x: Vec<u32> = (0..shape.iter().product::<usize>() as u32).collect();
            let xf: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            for perm in perms(shape.len()) {
                let mut y = vec![0; x.len()];
                transpose(&x, shape, &perm, &mut y);
                let want = transpose_reference(&x, shape, &perm);
                assert_eq!(y, want, "{shape:?} {perm:?}");
                // Floats, their planes by `transpose_block` (distinct values below 2^24:
                // exact as f32).
                let mut yf = vec![-1.0f32; x.len()];
                transpose_f32(&xf, shape, &perm, &mut yf);
                assert!(yf.iter().zip(&want).all(|(&g, &w)| g == w as f32), "f32 {shape:?} {perm:?}");
            }
        }
        let mut s = [0.0];
        transpose(&[7.0], &[], &[], &mut s);
        assert_eq!(s, [7.0]);
    }

    #[test]
    fn merging_leaves_the_axes_that_move_apart() {
        // [1, 256, 8, 64] -> [1, 8, 256, 64]: runs of 64.
        let axes = merged([(8, 64), (256, 512), (64, 1)].into_iter());
        assert_eq!(axes.iter().map(|a| (a.len, a.src)).collect::<Vec<_>>(), [(8, 64), (256, 512), (64, 1)]);
        // Expand [2, 1, 256, 64] to [2, 4, 256, 64]: 2 x 4 copies of 16 384.
        let axes = merged([(2, 16384), (4, 0), (256, 64), (64, 1)].into_iter());
        assert_eq!(axes.iter().map(|a| (a.len, a.src)).collect::<Vec<_>>(), [(2, 16384), (4, 0), (16384, 1)]);
    }

    #[test]
    fn expand_matches_index_arithmetic_on_every_path() {
        let cases: &[(&[usize], &[usize])] = &[
            (&[2, 1, 5, 3], &[2, 4, 5, 3]),
            (&[3, 1], &[2, 3, 40]),
            (&[1], &[7]),
            (&[], &[2, 3]),
            (&[4, 1, 1], &[4, 3, 2]),
            (&[1, 6], &[5, 6]),
            (&[2, 1, 1, 3], &[1, 2, 2, 2, 3]),
        ];
        for &(shape, out) in cases {
            let x: Vec<u32> = (0..shape.iter().product::<usize>() as u32).collect();
            let mut y = vec![0; out.iter().product()];
            expand(&x, shape, out, &mut y);
            let pad = out.len() - shape.len();
            for (flat, &got) in y.iter().enumerate() {
                let (mut rest, mut src, mut scale) = (flat, 0, 1);
                for a in (0..out.len()).rev() {
                    let i = rest % out[a];
                    rest /= out[a];
                    if a >= pad {
                        let d = shape[a - pad];
                        src += if d == 1 { 0 } else { i } * scale;
                        scale *= d;
                    }
                }
                assert_eq!(got, x[src], "{shape:?} -> {out:?} at {flat}");
            }
        }
    }
}
