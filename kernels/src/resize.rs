//! Resize (and Upsample): per-axis tap tables and the passes that apply them.
//!
//! Every ONNX interpolation mode is separable: output index `j` of an axis reads `taps`
//! input indices with fixed weights, the same for every other coordinate. So a resize is
//! one table per axis ([`axis_taps`]) and one pass per axis that changes ([`pass`]),
//! with two fused plane kernels for the cases detectors use: nearest
//! ([`nearest_planes`], each output row a gathered or repeated input row) and bilinear
//! ([`bilinear_planes`]) over the last two axes. No kernel divides per element.

/// How an output coordinate maps to an input one (`coordinate_transformation_mode`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Coord {
    HalfPixel,
    HalfPixelSymmetric,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
    TfHalfPixelForNn,
    TfCropAndResize,
}

/// How nearest mode rounds (`nearest_mode`); `Simple` is Upsample's and Resize-10's
/// (truncation, or `ceil` when downsampling).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Nearest {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
    Simple,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Interp {
    Nearest(Nearest),
    Linear,
    /// `a` is `cubic_coeff_a`.
    Cubic {
        a: f64,
    },
}

/// The attributes of a resize that shape its tables.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Params {
    pub interp: Interp,
    pub coord: Coord,
    pub antialias: bool,
    pub exclude_outside: bool,
}

/// One axis: its input and output lengths, its scale and (for tf_crop_and_resize) its
/// region of interest in normalized coordinates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Axis {
    pub len_in: usize,
    pub len_out: usize,
    pub scale: f64,
    pub roi: (f64, f64),
}

/// Marks an output index whose coordinate falls outside the input (tf_crop_and_resize):
/// its value is the extrapolation value.
pub const OUTSIDE: usize = usize::MAX;

/// Taps per output index for `p` on an axis of scale `scale`.
pub fn tap_count(p: &Params, scale: f64) -> usize {
    let s = scale.min(1.0);
    match (p.interp, p.antialias) {
        (Interp::Nearest(_), _) => 1,
        (Interp::Linear, false) => 2,
        (Interp::Cubic { .. }, false) => 4,
        (Interp::Linear, true) => (2 - 2 * ((-1.0 / s).floor() as i64 + 1)) as usize,
        (Interp::Cubic { .. }, true) => (2 - 2 * ((-2.0 / s).floor() as i64 + 1)) as usize,
    }
}

/// The input coordinate of output index `x`, or `None` outside the input (crop).
fn original(p: &Params, a: &Axis, x: f64) -> Option<f64> {
    let (len_in, s) = (a.len_in as f64, a.scale);
    // The reference's "output width" is the scaled length, not the rounded one.
    let len_out = s * len_in;
    let x_ori = match p.coord {
        Coord::AlignCorners if len_out == 1.0 => 0.0,
        Coord::AlignCorners => x * (len_in - 1.0) / (len_out - 1.0),
        Coord::Asymmetric => x / s,
        Coord::TfHalfPixelForNn => (x + 0.5) / s,
        Coord::PytorchHalfPixel if len_out == 1.0 => -0.5,
        Coord::PytorchHalfPixel | Coord::HalfPixel => (x + 0.5) / s - 0.5,
        Coord::HalfPixelSymmetric => {
            let adjustment = a.len_out as f64 / len_out;
            let offset = len_in / 2.0 * (1.0 - adjustment);
            offset + (x + 0.5) / s - 0.5
        }
        Coord::TfCropAndResize => {
            let (r0, r1) = a.roi;
            let v = if len_out == 1.0 {
                (r1 - r0) * (len_in - 1.0) / 2.0
            } else {
                x * (r1 - r0) * (len_in - 1.0) / (len_out - 1.0)
            } + r0 * (len_in - 1.0);
            if v < 0.0 || v > len_in - 1.0 {
                return None;
            }
            v
        }
    };
    Some(x_ori)
}

fn cubic(a: f64, x: f64) -> f64 {
    let x = x.abs();
    if x <= 1.0 {
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a
    } else {
        0.0
    }
}

/// Fills the axis's table: for output index `j`, `idx[j * taps + k]` (an index into the
/// input, clamped to it) and `w[j * taps + k]`, `taps` = [`tap_count`]. An output index
/// outside the input has [`OUTSIDE`] as its first index. `coeffs` is working space.
pub fn axis_taps(p: &Params, a: &Axis, idx: &mut [usize], w: &mut [f32], coeffs: &mut [f64]) {
    let taps = tap_count(p, a.scale);
    let last = a.len_in.saturating_sub(1) as i64;
    for j in 0..a.len_out {
        let (idx, w) = (&mut idx[j * taps..][..taps], &mut w[j * taps..][..taps]);
        let Some(x) = original(p, a, j as f64) else {
            idx.fill(0);
            idx[0] = OUTSIDE;
            w.fill(0.0);
            continue;
        };
        // The left neighbour: x lies in (i0, i0 + 1], so `ratio` is in (0, 1].
        let i0 = (x.ceil() as i64).saturating_sub(1);
        let ratio = x - i0 as f64;
        if let Interp::Nearest(mode) = p.interp {
            let up = match mode {
                _ if ratio == 1.0 => true,
                Nearest::RoundPreferFloor => ratio > 0.5,
                Nearest::RoundPreferCeil => ratio >= 0.5,
                Nearest::Floor => false,
                Nearest::Ceil => true,
                Nearest::Simple => a.scale < 1.0,
            };
            // Simple truncates an integral coordinate to itself and a fractional one
            // down (or up when downsampling), like the rounding modes above.
            idx[0] = i0.saturating_add(up as i64).clamp(0, last) as usize;
            w[0] = 1.0;
            continue;
        }
        let half = (taps / 2) as i64;
        let first = i0.saturating_sub(half - 1);
        let coeffs = &mut coeffs[..taps];
        let s = a.scale.min(1.0);
        for (k, c) in coeffs.iter_mut().enumerate() {
            let d = first.saturating_add(k as i64) as f64 - x;
            *c = match (p.interp, p.antialias) {
                (Interp::Linear, false) => 1.0 - d.abs(),
                (Interp::Linear, true) => (1.0 - (d * s).abs()).clamp(0.0, 1.0),
                (Interp::Cubic { a }, false) => cubic(a, d),
                (Interp::Cubic { a }, true) => cubic(a, d * s),
                (Interp::Nearest(_), _) => unreachable!("handled above"),
            };
        }
        if p.antialias {
            normalize(coeffs);
        }
        if p.exclude_outside {
            for (k, c) in coeffs.iter_mut().enumerate() {
                let i = first.saturating_add(k as i64);
                if i < 0 || i > last {
                    *c = 0.0;
                }
            }
            normalize(coeffs);
        }
        for k in 0..taps {
            idx[k] = first.saturating_add(k as i64).clamp(0, last) as usize;
            w[k] = coeffs[k] as f32;
        }
    }
}

fn normalize(c: &mut [f64]) {
    let sum: f64 = c.iter().sum();
    if sum != 0.0 {
        c.iter_mut().for_each(|v| *v /= sum);
    }
}

/// Whether a table maps every output index to the same input index with weight 1.
pub fn is_identity(len_in: usize, taps: usize, idx: &[usize], w: &[f32]) -> bool {
    idx.len() == len_in * taps
        && (0..len_in).all(|j| {
            let (ij, wj) = (&idx[j * taps..][..taps], &w[j * taps..][..taps]);
            // Clamped taps may repeat j: together they weigh 1, every other tap 0.
            let on_j: f32 = ij.iter().zip(wj).filter(|(&i, _)| i == j).map(|(_, &w)| w).sum();
            on_j == 1.0 && ij.iter().zip(wj).all(|(&i, &w)| i == j || w == 0.0)
        })
}

/// An axis's table as [`axis_taps`] filled it.
#[derive(Clone, Copy, Debug)]
pub struct Table<'a> {
    pub taps: usize,
    pub idx: &'a [usize],
    pub w: &'a [f32],
}

/// One axis of a resize over whole slabs: `x` is slabs of `[len_in, inner]`, `y` the same
/// number of slabs of `[len_out, inner]` (`len_out = idx.len() / taps`); an output index
/// outside the input gets `extra`.
pub fn pass(x: &[f32], len_in: usize, inner: usize, t: Table<'_>, extra: f32, y: &mut [f32]) {
    let Table { taps, idx, w } = t;
    let len_out = idx.len() / taps;
    let (slab_in, slab_out) = (len_in * inner, len_out * inner);
    if slab_out == 0 || slab_in == 0 {
        return;
    }
    for (xs, ys) in x.chunks_exact(slab_in).zip(y.chunks_exact_mut(slab_out)) {
        if inner == 1 {
            for (j, v) in ys.iter_mut().enumerate() {
                let (ij, wj) = (&idx[j * taps..][..taps], &w[j * taps..][..taps]);
                *v = if ij[0] == OUTSIDE { extra } else { ij.iter().zip(wj).map(|(&i, &w)| w * xs[i]).sum() };
            }
            continue;
        }
        for (j, row) in ys.chunks_exact_mut(inner).enumerate() {
            let (ij, wj) = (&idx[j * taps..][..taps], &w[j * taps..][..taps]);
            if ij[0] == OUTSIDE {
                row.fill(extra);
                continue;
            }
            if taps == 1 {
                row.copy_from_slice(&xs[ij[0] * inner..][..inner]);
                continue;
            }
            let first = &xs[ij[0] * inner..][..inner];
            row.iter_mut().zip(first).for_each(|(r, &v)| *r = wj[0] * v);
            for k in 1..taps {
                if wj[k] != 0.0 {
                    let src = &xs[ij[k] * inner..][..inner];
                    row.iter_mut().zip(src).for_each(|(r, &v)| *r += wj[k] * v);
                }
            }
        }
    }
}

/// Nearest over the last two axes of whole planes: output row `r` is input row
/// `rows[r]` gathered by `cols`; a row equal to the one before is copied, and when
/// `cols` repeats each input column `repeat` times (integer upsampling) the row is
/// filled by runs, without a gather.
pub fn nearest_planes(
    x: &[f32],
    h: usize,
    w: usize,
    rows: &[usize],
    cols: &[usize],
    repeat: Option<usize>,
    y: &mut [f32],
) {
    let (ow, oh) = (cols.len(), rows.len());
    if ow == 0 || oh == 0 || h * w == 0 {
        return;
    }
    for (xp, yp) in x.chunks_exact(h * w).zip(y.chunks_exact_mut(oh * ow)) {
        for r in 0..oh {
            let (done, rest) = yp.split_at_mut(r * ow);
            let row = &mut rest[..ow];
            if r > 0 && rows[r] == rows[r - 1] {
                row.copy_from_slice(&done[(r - 1) * ow..]);
                continue;
            }
            let src = &xp[rows[r] * w..][..w];
            match repeat {
                // Twice each column, the detectors' upsampling: fixed pairs, which the
                // compiler makes into shuffles of whole vectors (runs of a length known
                // only at Run were a loop per input: 64x40x40 planes took 3x ORT's time).
                Some(2) => twice(src, row),
                Some(f) => row.chunks_exact_mut(f).zip(src).for_each(|(run, &v)| run.fill(v)),
                None => row.iter_mut().zip(cols).for_each(|(o, &c)| *o = src[c]),
            }
        }
    }
}

/// `y[2 j] = y[2 j + 1] = x[j]`, 8 inputs at a time as fixed arrays (one shuffle pair
/// of vectors), the rest one by one.
fn twice(x: &[f32], y: &mut [f32]) {
    let (xs, x_rest) = x.as_chunks::<8>();
    let (ys, y_rest) = y[..2 * x.len()].as_chunks_mut::<16>();
    for (o, i) in ys.iter_mut().zip(xs) {
        *o = std::array::from_fn(|k| i[k / 2]);
    }
    for (o, &v) in y_rest.as_chunks_mut::<2>().0.iter_mut().zip(x_rest) {
        *o = [v; 2];
    }
}

/// The repeat factor `f` when `cols` maps output `j` to input `j / f` over all of an
/// input of `w` columns (integer nearest upsampling), else `None`.
pub fn repeat_factor(w: usize, cols: &[usize]) -> Option<usize> {
    if w == 0 || !cols.len().is_multiple_of(w) {
        return None;
    }
    let f = cols.len() / w;
    let ok = cols.chunks_exact(f).enumerate().all(|(i, run)| run.iter().all(|&c| c == i));
    (f > 0 && ok).then_some(f)
}

/// Two-tap interpolation over the last two axes of whole planes: `rows` and `cols` are
/// two-tap tables (no [`OUTSIDE`] entries).
pub fn bilinear_planes(x: &[f32], h: usize, w: usize, rows: Table<'_>, cols: Table<'_>, y: &mut [f32]) {
    let (Table { idx: rows, w: rw, .. }, Table { idx: cols, w: cw, .. }) = (rows, cols);
    let (oh, ow) = (rows.len() / 2, cols.len() / 2);
    if ow == 0 || oh == 0 || h * w == 0 {
        return;
    }
    for (xp, yp) in x.chunks_exact(h * w).zip(y.chunks_exact_mut(oh * ow)) {
        for (r, row) in yp.chunks_exact_mut(ow).enumerate() {
            let (a0, a1) = (rw[2 * r], rw[2 * r + 1]);
            let top = &xp[rows[2 * r] * w..][..w];
            let bottom = &xp[rows[2 * r + 1] * w..][..w];
            for ((o, c), cw) in row.iter_mut().zip(cols.chunks_exact(2)).zip(cw.chunks_exact(2)) {
                let t = top[c[0]] * cw[0] + top[c[1]] * cw[1];
                let b = bottom[c[0]] * cw[0] + bottom[c[1]] * cw[1];
                *o = a0 * t + a1 * b;
            }
        }
    }
}

#[cfg(test)]
#[path = "resize_tests.rs"]
mod tests;

/// Nearest over every axis at once, for any element type: `tables[a]` maps each output
/// index of axis `a` to an input index (one tap, no [`OUTSIDE`] entries); `dims` are the
/// input's lengths. Each output row along the last axis is gathered from its input row.
pub fn nearest_nd<T: Copy>(x: &[T], dims: &[usize], tables: &[&[usize]], y: &mut [T]) {
    let r = dims.len();
    if r == 0 {
        y.copy_from_slice(&x[..y.len()]);
        return;
    }
    let cols = tables[r - 1];
    if cols.is_empty() || y.is_empty() {
        return;
    }
    let mut strides = [0usize; 16];
    let mut acc = 1;
    for a in (0..r).rev() {
        strides[a] = acc;
        acc *= dims[a];
    }
    let mut idx = [0usize; 16];
    for row in y.chunks_exact_mut(cols.len()) {
        let base: usize = (0..r - 1).map(|a| tables[a][idx[a]] * strides[a]).sum();
        let src = &x[base..][..dims[r - 1]];
        row.iter_mut().zip(cols).for_each(|(o, &c)| *o = src[c]);
        for a in (0..r - 1).rev() {
            idx[a] += 1;
            if idx[a] < tables[a].len() {
                break;
            }
            idx[a] = 0;
        }
    }
}
