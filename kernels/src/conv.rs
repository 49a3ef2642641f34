//! 2-D convolution (im2col + the packed GEMM) and 2-D max / average pooling, NCHW.

use crate::gemm::{gemm_with, GemmScratch};

/// Geometry of a 2-D window op over one image plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window2d {
    pub in_h: usize,
    pub in_w: usize,
    pub out_h: usize,
    pub out_w: usize,
    pub k_h: usize,
    pub k_w: usize,
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    /// Padding before each spatial axis (top, left).
    pub pad_begin: [usize; 2],
}

impl Window2d {
    /// Input row and column of tap (ky, kx) for output (oy, ox), or `None` in the padding.
    #[inline(always)]
    fn source(&self, oy: usize, ox: usize, ky: usize, kx: usize) -> Option<(usize, usize)> {
        let y = (oy * self.stride[0] + ky * self.dilation[0]).checked_sub(self.pad_begin[0])?;
        let x = (ox * self.stride[1] + kx * self.dilation[1]).checked_sub(self.pad_begin[1])?;
        (y < self.in_h && x < self.in_w).then_some((y, x))
    }
}

/// im2col of `channels` planes of one image: rows are (channel, ky, kx), columns are
/// output positions. Each output row's in-range columns are found once, so the inner loop
/// is a plain (strided or contiguous) copy.
fn im2col(x: &[f32], channels: usize, g: &Window2d, col: &mut [f32]) {
    let plane = g.in_h * g.in_w;
    let positions = g.out_h * g.out_w;
    let (sy, sx) = (g.stride[0], g.stride[1]);
    let mut row = 0;
    for c in 0..channels {
        let src = &x[c * plane..(c + 1) * plane];
        for ky in 0..g.k_h {
            for kx in 0..g.k_w {
                let dst = &mut col[row * positions..(row + 1) * positions];
                // Output columns whose input column is in range: x = ox*sx + off - pad >= 0 and < in_w.
                let off = kx * g.dilation[1];
                let lo = g.pad_begin[1].saturating_sub(off).div_ceil(sx).min(g.out_w);
                let hi = if g.in_w + g.pad_begin[1] > off {
                    (g.in_w + g.pad_begin[1] - off).div_ceil(sx).min(g.out_w)
                } else {
                    0
                }
                .max(lo);
                for oy in 0..g.out_h {
                    let out = &mut dst[oy * g.out_w..(oy + 1) * g.out_w];
                    let yy = (oy * sy + ky * g.dilation[0]).checked_sub(g.pad_begin[0]).filter(|&y| y < g.in_h);
                    let Some(yy) = yy else {
                        out.fill(0.0);
                        continue;
                    };
                    out[..lo].fill(0.0);
                    out[hi..].fill(0.0);
                    let line = &src[yy * g.in_w..(yy + 1) * g.in_w];
                    let x0 = lo * sx + off - g.pad_begin[1];
                    if sx == 1 {
                        out[lo..hi].copy_from_slice(&line[x0..x0 + (hi - lo)]);
                    } else {
                        for (j, o) in out[lo..hi].iter_mut().enumerate() {
                            *o = line[x0 + j * sx];
                        }
                    }
                }
                row += 1;
            }
        }
    }
}

/// Convolution of `x` [batch, in_c, in_h, in_w] with `w` [out_c, in_c / group, k_h, k_w]
/// plus optional `bias` [out_c], into `y` [batch, out_c, out_h, out_w]. `col` is scratch
/// the caller keeps (it grows to the largest im2col matrix and is then reused).
#[allow(clippy::too_many_arguments)]
pub fn conv2d(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    batch: usize,
    in_c: usize,
    out_c: usize,
    group: usize,
    g: &Window2d,
    y: &mut [f32],
    col: &mut Vec<f32>,
    scratch: &mut GemmScratch,
) {
    let (cg, mg) = (in_c / group, out_c / group);
    let kk = cg * g.k_h * g.k_w;
    let positions = g.out_h * g.out_w;
    let plane = g.in_h * g.in_w;
    if col.len() < kk * positions {
        col.resize(kk * positions, 0.0);
    }
    for n in 0..batch {
        for gi in 0..group {
            let xs = &x[(n * in_c + gi * cg) * plane..(n * in_c + (gi + 1) * cg) * plane];
            let ws = &w[gi * mg * kk..(gi + 1) * mg * kk];
            let ys = &mut y[(n * out_c + gi * mg) * positions..(n * out_c + (gi + 1) * mg) * positions];
            let is_pointwise = g.k_h == 1 && g.k_w == 1 && g.stride == [1, 1] && g.pad_begin == [0, 0];
            if is_pointwise && g.out_h == g.in_h && g.out_w == g.in_w {
                gemm_with(scratch, mg, positions, kk, 1.0, ws, false, xs, false, 0.0, ys);
            } else {
                let col = &mut col[..kk * positions];
                im2col(xs, cg, g, col);
                gemm_with(scratch, mg, positions, kk, 1.0, ws, false, col, false, 0.0, ys);
            }
            if let Some(b) = bias {
                for (m, out) in ys.chunks_exact_mut(positions.max(1)).enumerate() {
                    let bv = b[gi * mg + m];
                    out.iter_mut().for_each(|v| *v += bv);
                }
            }
        }
    }
}

/// How a pooling window reduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pool {
    Max,
    /// Average; `count_pad` divides by the full window, padding included.
    Average {
        count_pad: bool,
    },
}

/// Pools `planes` planes of `x` (each in_h × in_w) into `y` (each out_h × out_w). Padding
/// is ignored by Max and by Average without `count_pad`; windows that run past the
/// padded input (ceil mode) count only their in-range taps.
/// Max pooling on any ordered element type (MaxPool on integers): the largest tap of each
/// window; padding taps do not count.
pub fn max_pool2d<T: Copy + PartialOrd>(x: &[T], planes: usize, g: &Window2d, y: &mut [T]) {
    let plane = g.in_h * g.in_w;
    let positions = g.out_h * g.out_w;
    for p in 0..planes {
        let src = &x[p * plane..(p + 1) * plane];
        for oy in 0..g.out_h {
            for ox in 0..g.out_w {
                let mut best: Option<T> = None;
                for ky in 0..g.k_h {
                    for kx in 0..g.k_w {
                        if let Some((yy, xx)) = g.source(oy, ox, ky, kx) {
                            let v = src[yy * g.in_w + xx];
                            if best.is_none_or(|b| v > b) {
                                best = Some(v);
                            }
                        }
                    }
                }
                if let Some(b) = best {
                    y[p * positions + oy * g.out_w + ox] = b;
                }
            }
        }
    }
}

/// MaxPool's Indices: for each window, the index in the whole `[N, C, H, W]` input of its
/// maximum (the first one on ties, as `pool2d` picks it); within a plane row-major, or
/// column-major with `column_major` (storage_order 1).
pub fn max_pool_indices(x: &[f32], planes: usize, g: &Window2d, column_major: bool, y: &mut [i64]) {
    let plane = g.in_h * g.in_w;
    let positions = g.out_h * g.out_w;
    for p in 0..planes {
        let src = &x[p * plane..(p + 1) * plane];
        for oy in 0..g.out_h {
            for ox in 0..g.out_w {
                let (mut best, mut at) = (f32::NEG_INFINITY, None);
                for ky in 0..g.k_h {
                    for kx in 0..g.k_w {
                        if let Some((yy, xx)) = g.source(oy, ox, ky, kx) {
                            let v = src[yy * g.in_w + xx];
                            if at.is_none() || v > best || (v.is_nan() && !best.is_nan()) {
                                best = v;
                                at = Some(if column_major { xx * g.in_h + yy } else { yy * g.in_w + xx });
                            }
                        }
                    }
                }
                y[p * positions + oy * g.out_w + ox] = (p * plane + at.unwrap_or(0)) as i64;
            }
        }
    }
}

pub fn pool2d(x: &[f32], planes: usize, g: &Window2d, pool: Pool, pad_end: [usize; 2], y: &mut [f32]) {
    let plane = g.in_h * g.in_w;
    let positions = g.out_h * g.out_w;
    for p in 0..planes {
        let src = &x[p * plane..(p + 1) * plane];
        let dst = &mut y[p * positions..(p + 1) * positions];
        for oy in 0..g.out_h {
            for ox in 0..g.out_w {
                let mut acc = if pool == Pool::Max { f32::NEG_INFINITY } else { 0.0 };
                let mut count = 0usize;
                let mut padded = 0usize;
                for ky in 0..g.k_h {
                    for kx in 0..g.k_w {
                        match g.source(oy, ox, ky, kx) {
                            Some((yy, xx)) => {
                                let v = src[yy * g.in_w + xx];
                                acc = match pool {
                                    Pool::Max => {
                                        if v > acc || v.is_nan() {
                                            v
                                        } else {
                                            acc
                                        }
                                    }
                                    Pool::Average { .. } => acc + v,
                                };
                                count += 1;
                                padded += 1;
                            }
                            None => {
                                // Inside the declared padding (not past it, as ceil mode can be).
                                let yy = oy * g.stride[0] + ky * g.dilation[0];
                                let xx = ox * g.stride[1] + kx * g.dilation[1];
                                if yy < g.pad_begin[0] + g.in_h + pad_end[0]
                                    && xx < g.pad_begin[1] + g.in_w + pad_end[1]
                                {
                                    padded += 1;
                                }
                            }
                        }
                    }
                }
                dst[oy * g.out_w + ox] = match pool {
                    Pool::Max => acc,
                    Pool::Average { count_pad: true } => acc / padded.max(1) as f32,
                    Pool::Average { count_pad: false } => acc / count.max(1) as f32,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geom(in_hw: usize, k: usize, stride: usize, pad: usize, dil: usize) -> Window2d {
        let out = (in_hw + 2 * pad - dil * (k - 1) - 1) / stride + 1;
        Window2d {
            in_h: in_hw,
            in_w: in_hw,
            out_h: out,
            out_w: out,
            k_h: k,
            k_w: k,
            stride: [stride; 2],
            dilation: [dil; 2],
            pad_begin: [pad; 2],
        }
    }

    #[test]
    fn conv_matches_the_direct_sum() {
        for (group, stride, pad, dil) in [(1, 1, 1, 1), (2, 2, 0, 1), (4, 1, 2, 2), (1, 1, 0, 1)] {
            let (batch, in_c, out_c, hw, k) = (2, 4, 8, 7, 3);
            let g = geom(hw, k, stride, pad, dil);
            let x: Vec<f32> = (0..batch * in_c * hw * hw).map(|i| ((i * 7 % 17) as f32 - 8.0) * 0.1).collect();
            let cg = in_c / group;
            let w: Vec<f32> = (0..out_c * cg * k * k).map(|i| ((i * 5 % 13) as f32 - 6.0) * 0.1).collect();
            let bias: Vec<f32> = (0..out_c).map(|i| i as f32 * 0.5).collect();
            let mut y = vec![0.0; batch * out_c * g.out_h * g.out_w];
            conv2d(
                &x,
                &w,
                Some(&bias),
                batch,
                in_c,
                out_c,
                group,
                &g,
                &mut y,
                &mut Vec::new(),
                &mut GemmScratch::new(),
            );
            let mg = out_c / group;
            for n in 0..batch {
                for m in 0..out_c {
                    let gi = m / mg;
                    for oy in 0..g.out_h {
                        for ox in 0..g.out_w {
                            let mut s = f64::from(bias[m]);
                            for c in 0..cg {
                                for ky in 0..k {
                                    for kx in 0..k {
                                        if let Some((yy, xx)) = g.source(oy, ox, ky, kx) {
                                            let xv = x[((n * in_c + gi * cg + c) * hw + yy) * hw + xx];
                                            let wv = w[((m * cg + c) * k + ky) * k + kx];
                                            s += f64::from(xv) * f64::from(wv);
                                        }
                                    }
                                }
                            }
                            let got = y[((n * out_c + m) * g.out_h + oy) * g.out_w + ox];
                            assert!((f64::from(got) - s).abs() < 1e-4, "group {group}: {got} vs {s}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn pools_count_padding_as_asked() {
        let g = geom(3, 2, 2, 1, 1); // out 2x2, windows reach into the padding
        let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let mut y = vec![0.0; 4];
        pool2d(&x, 1, &g, Pool::Max, [1, 1], &mut y);
        assert_eq!(y, [1.0, 3.0, 7.0, 9.0]);
        pool2d(&x, 1, &g, Pool::Average { count_pad: false }, [1, 1], &mut y);
        assert_eq!(y, [1.0, 2.5, 5.5, 7.0]);
        pool2d(&x, 1, &g, Pool::Average { count_pad: true }, [1, 1], &mut y);
        assert_eq!(y, [0.25, 1.25, 2.75, 7.0]);
    }
}

/// Sizes of a 2-D transposed convolution, as (height, width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTransposeDims {
    pub in_hw: [usize; 2],
    pub kernel: [usize; 2],
    pub out_hw: [usize; 2],
    /// top, left; negative shifts the output the other way
    pub pad_begin: [i64; 2],
    pub strides: [usize; 2],
    pub dilations: [usize; 2],
    pub out_channels: usize,
}

/// Transposed convolution: every input pixel scatters `w`'s kernel (scaled by it) into
/// the output at `stride` spacing, then the bias is added. `w` is
/// `[in_channels, out_channels / group, kH, kW]`.
#[allow(clippy::too_many_arguments)]
pub fn conv_transpose2d(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    batch: usize,
    in_channels: usize,
    group: usize,
    d: ConvTransposeDims,
    y: &mut [f32],
) {
    let [ih, iw] = d.in_hw;
    let [kh, kw] = d.kernel;
    let [oh, ow] = d.out_hw;
    let (cin_g, cout_g) = (in_channels / group, d.out_channels / group);
    let plane = oh * ow;
    for n in 0..batch {
        for co in 0..d.out_channels {
            let b = bias.map_or(0.0, |b| b[co]);
            y[(n * d.out_channels + co) * plane..][..plane].iter_mut().for_each(|v| *v = b);
        }
        for g in 0..group {
            for cl in 0..cin_g {
                let ci = g * cin_g + cl;
                let xp = &x[(n * in_channels + ci) * ih * iw..][..ih * iw];
                for ol in 0..cout_g {
                    let co = g * cout_g + ol;
                    let kern = &w[(ci * cout_g + ol) * kh * kw..][..kh * kw];
                    let yp = &mut y[(n * d.out_channels + co) * plane..][..plane];
                    for r in 0..ih {
                        for c in 0..iw {
                            let v = xp[r * iw + c];
                            for a in 0..kh {
                                let oy = (r * d.strides[0] + a * d.dilations[0]) as isize - d.pad_begin[0] as isize;
                                if oy < 0 || oy as usize >= oh {
                                    continue;
                                }
                                for bcol in 0..kw {
                                    let ox =
                                        (c * d.strides[1] + bcol * d.dilations[1]) as isize - d.pad_begin[1] as isize;
                                    if ox >= 0 && (ox as usize) < ow {
                                        yp[oy as usize * ow + ox as usize] += v * kern[a * kw + bcol];
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
