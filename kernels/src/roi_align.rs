//! RoiAlign (ONNX, as ONNX Runtime's CPU EP computes it): each region of interest of a
//! `[C, H, W]` plane is cut into `out_h x out_w` bins; a bin is the average (or the
//! maximum) of a regular grid of bilinearly interpolated samples.
//!
//! ONNX Runtime's order of float operations is kept so the results are the same bits.
//! Its max mode takes, per sample, the largest of the four weighted corner terms (not
//! their sum), then the largest over the samples; this is kept too.

/// The op's parameters (from the node's attributes).
#[derive(Clone, Copy, Debug)]
pub struct RoiAlign {
    /// Max mode (else average).
    pub max: bool,
    pub out_h: usize,
    pub out_w: usize,
    /// Samples per bin along each axis; 0 chooses `ceil(roi extent / bins)` per roi.
    pub sampling_ratio: usize,
    pub spatial_scale: f32,
    /// `half_pixel` (coordinates shifted by -0.5), else `output_half_pixel`.
    pub half_pixel: bool,
}

/// More samples per bin than this along an axis is refused (a roi of absurd extent).
pub const MAX_GRID: i64 = 1 << 16;

/// One roi's sampling: its start corner, its bin size and its samples per bin.
#[derive(Clone, Copy, Debug)]
pub struct RoiGrid {
    start_h: f32,
    start_w: f32,
    bin_h: f32,
    bin_w: f32,
    grid_h: usize,
    grid_w: usize,
}

impl RoiGrid {
    /// Samples per bin (rows, columns).
    pub fn samples(&self) -> (usize, usize) {
        (self.grid_h, self.grid_w)
    }
}

/// Where a sample falls along one axis: the two neighbours and their weights.
#[derive(Clone, Copy)]
struct Axis {
    lo: usize,
    hi: usize,
    /// Weight of `hi` (`l`) and of `lo` (`h`).
    l: f32,
    h: f32,
}

/// Axis position `v` on an axis of `len` (at least 1) points; `None` outside `[-1, len]`.
fn axis(v: f32, len: usize) -> Option<Axis> {
    if v < -1.0 || v > len as f32 {
        return None;
    }
    let mut v = if v <= 0.0 { 0.0 } else { v };
    let last = len - 1;
    let mut lo = v as usize; // truncation, as a C++ cast (NaN gives 0)
    let hi;
    if lo >= last {
        lo = last;
        hi = last;
        v = lo as f32;
    } else {
        hi = lo + 1;
    }
    let l = v - lo as f32;
    Some(Axis { lo, hi, l, h: 1.0 - l })
}

/// `std::max(a, b)`: `b` only when `a < b` (NaN handling as C++).
fn cmax(a: f32, b: f32) -> f32 {
    if a < b {
        b
    } else {
        a
    }
}

impl RoiAlign {
    /// The sampling of roi `[x1, y1, x2, y2]`, or why it is refused (a grid past
    /// [`MAX_GRID`]).
    pub fn grid(&self, roi: &[f32]) -> Result<RoiGrid, String> {
        let offset = if self.half_pixel { 0.5 } else { 0.0 };
        let s = self.spatial_scale;
        let (start_w, start_h) = (roi[0] * s - offset, roi[1] * s - offset);
        let (end_w, end_h) = (roi[2] * s - offset, roi[3] * s - offset);
        let (mut h, mut w) = (end_h - start_h, end_w - start_w);
        if !self.half_pixel {
            h = h.max(1.0);
            w = w.max(1.0);
        }
        let (bin_h, bin_w) = (h / self.out_h as f32, w / self.out_w as f32);
        let count = |extent: f32, bins: usize| -> i64 {
            if self.sampling_ratio > 0 {
                self.sampling_ratio as i64
            } else {
                (extent / bins as f32).ceil() as i64
            }
        };
        let (gh, gw) = (count(h, self.out_h), count(w, self.out_w));
        if gh > MAX_GRID || gw > MAX_GRID {
            return Err(format!("roi {roi:?} needs {gh}x{gw} samples per bin, more than {MAX_GRID} along an axis"));
        }
        Ok(RoiGrid { start_h, start_w, bin_h, bin_w, grid_h: gh.max(0) as usize, grid_w: gw.max(0) as usize })
    }

    /// One output plane `y` (`out_h * out_w`) of roi `g` over input plane `x` (`h * w`,
    /// both at least 1). Panics if a length does not match.
    pub fn plane(&self, g: &RoiGrid, x: &[f32], h: usize, w: usize, y: &mut [f32]) {
        assert!(h > 0 && w > 0 && x.len() == h * w, "roi_align: plane");
        assert_eq!(y.len(), self.out_h * self.out_w, "roi_align: output plane");
        let (gh, gw) = (g.grid_h, g.grid_w);
        let count = (gh * gw).max(1) as f32;
        for (ph, row) in y.chunks_exact_mut(self.out_w).enumerate() {
            for (pw, out) in row.iter_mut().enumerate() {
                let mut acc = 0.0f32;
                let mut first = true;
                for iy in 0..gh {
                    let yy = g.start_h + ph as f32 * g.bin_h + (iy as f32 + 0.5) * g.bin_h / gh as f32;
                    let ya = axis(yy, h);
                    for ix in 0..gw {
                        let xx = g.start_w + pw as f32 * g.bin_w + (ix as f32 + 0.5) * g.bin_w / gw as f32;
                        // An outside sample has zero weights on the plane's first point.
                        let (w1, w2, w3, w4, p1, p2, p3, p4) = match (ya, axis(xx, w)) {
                            (Some(a), Some(b)) => (
                                a.h * b.h,
                                a.h * b.l,
                                a.l * b.h,
                                a.l * b.l,
                                a.lo * w + b.lo,
                                a.lo * w + b.hi,
                                a.hi * w + b.lo,
                                a.hi * w + b.hi,
                            ),
                            _ => (0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0),
                        };
                        if self.max {
                            let v = cmax(cmax(cmax(w1 * x[p1], w2 * x[p2]), w3 * x[p3]), w4 * x[p4]);
                            acc = if first { v } else { cmax(acc, v) };
                            first = false;
                        } else {
                            acc += w1 * x[p1] + w2 * x[p2] + w3 * x[p3] + w4 * x[p4];
                        }
                    }
                }
                *out = if self.max { acc } else { acc / count };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(max: bool, sampling_ratio: usize, half_pixel: bool) -> RoiAlign {
        RoiAlign { max, out_h: 2, out_w: 2, sampling_ratio, spatial_scale: 1.0, half_pixel }
    }

    #[test]
    fn average_of_a_linear_plane_is_the_bin_center() {
        // x[i, j] = 10 i + j is linear: the average of samples is the value at the bin's
        // center, inside the plane.
        let x: Vec<f32> = (0..25).map(|k| (k / 5 * 10 + k % 5) as f32).collect();
        let o = op(false, 2, false);
        let g = o.grid(&[0.0, 0.0, 4.0, 4.0]).unwrap();
        let mut y = [0.0; 4];
        o.plane(&g, &x, 5, 5, &mut y);
        assert_eq!(y, [11.0, 13.0, 31.0, 33.0]);
    }

    #[test]
    fn adaptive_grid_and_outside_samples() {
        let o = op(false, 0, true);
        let g = o.grid(&[0.0, 0.0, 7.0, 3.0]).unwrap();
        assert_eq!(g.samples(), (2, 4));
        // A roi far outside the plane samples nothing: zeros.
        let g = o.grid(&[50.0, 50.0, 60.0, 60.0]).unwrap();
        let mut y = [1.0; 4];
        o.plane(&g, &[5.0; 4], 2, 2, &mut y);
        assert_eq!(y, [0.0; 4]);
        assert!(o.grid(&[0.0, 0.0, 1e9, 1.0]).is_err());
    }

    #[test]
    fn max_takes_the_largest_weighted_corner() {
        // One sample per bin at the plane's center (0.5, 0.5) of a 2x2 plane: each corner
        // weighs 0.25, so max mode gives 0.25 * max, not the interpolated mean.
        let o = RoiAlign { out_h: 1, out_w: 1, ..op(true, 1, false) };
        let g = o.grid(&[0.0, 0.0, 1.0, 1.0]).unwrap();
        let mut y = [0.0];
        o.plane(&g, &[1.0, 2.0, 3.0, 8.0], 2, 2, &mut y);
        assert_eq!(y, [2.0]);
    }
}
