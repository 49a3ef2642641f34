//! GridSample, AffineGrid and Col2Im: sampling an image at given points, making the
//! points of an affine map, and summing sliding blocks back into an image.

/// GridSample's interpolation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum GridMode {
    Nearest,
    Linear,
    Cubic,
}

/// What a point outside the image reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Padding {
    Zeros,
    Border,
    Reflection,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GridParams {
    pub mode: GridMode,
    pub padding: Padding,
    pub align_corners: bool,
}

/// Reflects `x` into `[lo, hi]` by the nearer border, as often as it takes.
fn reflect(x: f32, lo: f32, hi: f32) -> f32 {
    let range = hi - lo;
    if range <= 0.0 {
        return lo;
    }
    let (dx, from_lo) = if x < lo {
        (lo - x, true)
    } else if x > hi {
        (x - hi, false)
    } else {
        return x;
    };
    let n = (dx / range).trunc();
    let r = dx - n * range;
    let even = n % 2.0 == 0.0;
    if from_lo == even {
        lo + r
    } else {
        hi - r
    }
}

fn keys(t: f32) -> [f32; 4] {
    const A: f32 = -0.75;
    let c = |x: f32| {
        let x = x.abs();
        if x <= 1.0 {
            ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
        } else if x < 2.0 {
            ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A
        } else {
            0.0
        }
    };
    [c(t + 1.0), c(t), c(1.0 - t), c(2.0 - t)]
}

/// GridSample of whole `[C, spatial...]` images: `x` holds `planes` images of
/// `dims` (1 to 3 spatial axes, outermost first), `grid` the points of this batch item
/// (`points` of `dims.len()` normalized coordinates, innermost axis first), `y` the
/// `planes` outputs of `points` values each.
pub fn grid_sample(p: &GridParams, x: &[f32], dims: &[usize], grid: &[f32], y: &mut [f32]) {
    let nd = dims.len();
    let plane: usize = dims.iter().product();
    let points = grid.len() / nd.max(1);
    if points == 0 || plane == 0 {
        y.fill(0.0);
        return;
    }
    let mut strides = [0usize; 3];
    let mut acc = 1;
    for i in (0..nd).rev() {
        strides[i] = acc;
        acc *= dims[i];
    }
    for (xp, yp) in x.chunks_exact(plane).zip(y.chunks_exact_mut(points)) {
        for (o, g) in yp.iter_mut().zip(grid.chunks_exact(nd)) {
            *o = sample(p, xp, &dims[..nd], &strides[..nd], g);
        }
    }
}

/// One point: `g` has the innermost axis's coordinate first.
fn sample(p: &GridParams, x: &[f32], dims: &[usize], strides: &[usize], g: &[f32]) -> f32 {
    let nd = dims.len();
    let mut c = [0f32; 3];
    let mut bounds = [(0f32, 0f32); 3];
    for i in 0..nd {
        let (n, len) = (g[nd - 1 - i], dims[i] as f32);
        let mut v = if p.align_corners { (n + 1.0) / 2.0 * (len - 1.0) } else { ((n + 1.0) * len - 1.0) / 2.0 };
        if p.mode == GridMode::Nearest {
            v = v.round_ties_even();
        }
        let b = if p.align_corners { (0.0, len - 1.0) } else { (-0.5, len - 0.5) };
        if v < b.0 || v > b.1 {
            v = match p.padding {
                // Cubic reads its taps through the padding instead (as ORT and PyTorch
                // do; the ONNX reference clamps the point first).
                Padding::Border if p.mode == GridMode::Cubic => v,
                Padding::Border => v.clamp(0.0, len - 1.0),
                Padding::Reflection => reflect(v, b.0, b.1),
                Padding::Zeros => v,
            };
        }
        c[i] = v;
        bounds[i] = b;
    }
    // Per axis: up to four taps (index, weight).
    let mut taps = [[(0i64, 0f32); 4]; 3];
    let n_taps: usize = match p.mode {
        GridMode::Nearest => 1,
        GridMode::Linear => 2,
        GridMode::Cubic => 4,
    };
    for i in 0..nd {
        let v = c[i];
        match p.mode {
            GridMode::Nearest => taps[i][0] = (v as i64, 1.0),
            GridMode::Linear => {
                let f = v.floor();
                let t = v - f;
                taps[i][0] = (f as i64, 1.0 - t);
                taps[i][1] = ((f as i64).saturating_add(1), t);
            }
            GridMode::Cubic => {
                let f = v.floor();
                let w = keys(v - f);
                for (k, wk) in w.iter().enumerate() {
                    taps[i][k] = ((f as i64).saturating_add(k as i64 - 1), *wk);
                }
            }
        }
    }
    // The taps' indices resolved by the padding mode (None: reads zero).
    let resolve = |i: usize, t: i64| -> Option<usize> {
        let len = dims[i] as i64;
        if (0..len).contains(&t) {
            return Some(t as usize);
        }
        match p.padding {
            Padding::Zeros => None,
            Padding::Border => Some(t.clamp(0, len - 1) as usize),
            Padding::Reflection => {
                Some((reflect(t as f32, bounds[i].0, bounds[i].1) as i64).clamp(0, len - 1) as usize)
            }
        }
    };
    let mut sum = 0.0;
    let total = n_taps.pow(nd as u32);
    for k in 0..total {
        let (mut off, mut w, mut rem) = (0usize, 1.0f32, k);
        let mut zero = false;
        for i in (0..nd).rev() {
            let (t, wt) = taps[i][rem % n_taps];
            rem /= n_taps;
            match resolve(i, t) {
                Some(j) => off += j * strides[i],
                None => zero = true,
            }
            w *= wt;
        }
        if !zero && w != 0.0 {
            sum += w * x[off];
        }
    }
    sum
}

/// AffineGrid for one batch item: `theta` is `[nd, nd + 1]`, `dims` the output's
/// spatial lengths (outermost first, 2 or 3 of them), `grid` gets `points x nd`
/// coordinates, innermost axis first.
pub fn affine_grid(theta: &[f32], dims: &[usize], align_corners: bool, grid: &mut [f32]) {
    let nd = dims.len();
    let base = |i: usize, len: usize| -> f32 {
        if align_corners {
            if len <= 1 {
                -1.0
            } else {
                -1.0 + 2.0 * i as f32 / (len - 1) as f32
            }
        } else {
            -1.0 + (2 * i + 1) as f32 / len as f32
        }
    };
    let mut idx = [0usize; 3];
    for out in grid.chunks_exact_mut(nd) {
        // Homogeneous point, innermost axis first: (x, y[, z], 1).
        let mut h = [0f32; 4];
        for a in 0..nd {
            h[nd - 1 - a] = base(idx[a], dims[a]);
        }
        h[nd] = 1.0;
        for (r, o) in out.iter_mut().enumerate() {
            *o = (0..=nd).map(|k| theta[r * (nd + 1) + k] * h[k]).sum();
        }
        for a in (0..nd).rev() {
            idx[a] += 1;
            if idx[a] < dims[a] {
                break;
            }
            idx[a] = 0;
        }
    }
}

/// The geometry of a Col2Im: per spatial axis the image length, block length,
/// dilation, leading pad and stride, and the number of block positions.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Col2ImAxis {
    pub image: usize,
    pub block: usize,
    pub dilation: usize,
    pub pad: usize,
    pub stride: usize,
    pub positions: usize,
}

/// Col2Im of whole images: `x` holds, per image, `prod(block)` rows of
/// `prod(positions)` columns; each image of `y` (`prod(image)` values) is the sum of
/// the blocks' values at their places.
pub fn col2im(axes: &[Col2ImAxis], x: &[f32], y: &mut [f32]) {
    let nd = axes.len();
    let image: usize = axes.iter().map(|a| a.image).product();
    let kernel: usize = axes.iter().map(|a| a.block).product();
    let cols: usize = axes.iter().map(|a| a.positions).product();
    if image == 0 {
        return;
    }
    let mut strides = [0usize; 8];
    let mut acc = 1;
    for i in (0..nd).rev() {
        strides[i] = acc;
        acc *= axes[i].image;
    }
    for (xi, yi) in x.chunks_exact((kernel * cols).max(1)).zip(y.chunks_exact_mut(image)) {
        yi.fill(0.0);
        let mut k_idx = [0usize; 8];
        for row in xi.chunks_exact(cols.max(1)).take(kernel) {
            let mut c_idx = [0usize; 8];
            for &v in row {
                let mut off = 0usize;
                let mut inside = true;
                for a in 0..nd {
                    let ax = &axes[a];
                    let pos = (c_idx[a] * ax.stride + k_idx[a] * ax.dilation) as i64 - ax.pad as i64;
                    if pos < 0 || pos >= ax.image as i64 {
                        inside = false;
                        break;
                    }
                    off += pos as usize * strides[a];
                }
                if inside {
                    yi[off] += v;
                }
                step(&mut c_idx[..nd], axes, |a| a.positions);
            }
            step(&mut k_idx[..nd], axes, |a| a.block);
        }
    }
}

/// Advances a row-major multi-index over the lengths `len(axes[i])`.
fn step(idx: &mut [usize], axes: &[Col2ImAxis], len: impl Fn(&Col2ImAxis) -> usize) {
    for a in (0..idx.len()).rev() {
        idx[a] += 1;
        if idx[a] < len(&axes[a]) {
            return;
        }
        idx[a] = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect_folds_by_the_nearer_border_as_often_as_it_takes() {
        assert_eq!(reflect(-1.0, -0.5, 3.5), 0.0);
        assert_eq!(reflect(4.0, -0.5, 3.5), 3.0);
        // Past two widths the reflection comes back from the other side.
        assert_eq!(reflect(-5.0, -0.5, 3.5), 3.0);
        assert_eq!(reflect(2.0, 0.0, 0.0), 0.0);
    }

    #[test]
    fn the_identity_affine_grid_samples_the_image_back() {
        // theta = identity: the grid's points are the pixel centres (align_corners = 0),
        // so bilinear GridSample returns the image itself.
        let (h, w) = (3, 4);
        let mut grid = vec![0.0; h * w * 2];
        affine_grid(&[1.0, 0.0, 0.0, 0.0, 1.0, 0.0], &[h, w], false, &mut grid);
        for (g, want) in grid.iter().zip([-0.75, -2.0 / 3.0, -0.25, -2.0 / 3.0]) {
            assert!((g - want).abs() < 1e-6, "{grid:?}");
        }
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let mut y = vec![0.0; 12];
        let p = GridParams { mode: GridMode::Linear, padding: Padding::Zeros, align_corners: false };
        grid_sample(&p, &x, &[h, w], &grid, &mut y);
        for (a, b) in y.iter().zip(&x) {
            assert!((a - b).abs() < 1e-5, "{y:?}");
        }
    }

    #[test]
    fn col2im_sums_overlapping_blocks() {
        // One channel, 2x2 blocks over a 3x3 image, stride 1: 4 positions; every value 1,
        // so each pixel counts the blocks covering it.
        let axis = Col2ImAxis { image: 3, block: 2, dilation: 1, pad: 0, stride: 1, positions: 2 };
        let x = vec![1.0; 4 * 4];
        let mut y = vec![f32::NAN; 9];
        col2im(&[axis, axis], &x, &mut y);
        assert_eq!(y, [1.0, 2.0, 1.0, 2.0, 4.0, 2.0, 1.0, 2.0, 1.0]);
    }
}
