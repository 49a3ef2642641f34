//! Deformable convolution (ONNX DeformConv, 2-D): each kernel tap samples the input at
//! its regular position plus a learned offset, by bilinear interpolation (taps outside
//! the image read zero), optionally scaled by a mask; the sampled columns then go
//! through the GEMM as an im2col matrix would.

/// The shape of one DeformConv.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeformGeometry {
    pub channels: usize,
    pub in_h: usize,
    pub in_w: usize,
    pub out_channels: usize,
    pub out_h: usize,
    pub out_w: usize,
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    pub dilation: [usize; 2],
    /// Padding before the height and width axes.
    pub pad: [usize; 2],
    pub group: usize,
    pub offset_group: usize,
}

/// `x` at (h, w) by bilinear interpolation; corners outside the plane count as zero.
fn bilinear(x: &[f32], in_h: usize, in_w: usize, h: f32, w: f32) -> f32 {
    if !(h > -1.0 && w > -1.0 && h < in_h as f32 && w < in_w as f32) {
        return 0.0; // also NaN
    }
    let (h0, w0) = (h.floor(), w.floor());
    let (lh, lw) = (h - h0, w - w0);
    let (h0, w0) = (h0 as isize, w0 as isize);
    let at = |y: isize, xx: isize| -> f32 {
        if y >= 0 && xx >= 0 && (y as usize) < in_h && (xx as usize) < in_w {
            x[y as usize * in_w + xx as usize]
        } else {
            0.0
        }
    };
    (1.0 - lh) * (1.0 - lw) * at(h0, w0)
        + (1.0 - lh) * lw * at(h0, w0 + 1)
        + lh * (1.0 - lw) * at(h0 + 1, w0)
        + lh * lw * at(h0 + 1, w0 + 1)
}

/// One image: `x` `[C, H, W]`, `w` `[out_c, C / group, kh, kw]`, `offset`
/// `[offset_group * kh * kw * 2, out_h, out_w]` (per tap: the height offset, then the
/// width one), `mask` `[offset_group * kh * kw, out_h, out_w]`, `y` `[out_c, out_h, out_w]`.
/// `col` is working memory (resized here).
#[allow(clippy::too_many_arguments)]
pub fn deform_conv(
    x: &[f32],
    w: &[f32],
    offset: &[f32],
    mask: Option<&[f32]>,
    bias: Option<&[f32]>,
    g: &DeformGeometry,
    col: &mut Vec<f32>,
    y: &mut [f32],
) {
    let [kh, kw] = g.kernel;
    let taps = kh * kw;
    let positions = g.out_h * g.out_w;
    let cpg = g.channels / g.group;
    let ocpg = g.out_channels / g.group;
    let per_offset_group = g.channels / g.offset_group;
    let plane = g.in_h * g.in_w;
    col.clear();
    col.resize(cpg * taps * positions, 0.0);
    for gi in 0..g.group {
        for cl in 0..cpg {
            let c = gi * cpg + cl;
            let og = c / per_offset_group;
            let src = &x[c * plane..(c + 1) * plane];
            for i in 0..kh {
                for j in 0..kw {
                    let t = i * kw + j;
                    let dy = &offset[((og * taps + t) * 2) * positions..][..positions];
                    let dx = &offset[((og * taps + t) * 2 + 1) * positions..][..positions];
                    let m = mask.map(|m| &m[(og * taps + t) * positions..][..positions]);
                    let row = &mut col[(cl * taps + t) * positions..][..positions];
                    for oy in 0..g.out_h {
                        for ox in 0..g.out_w {
                            let p = oy * g.out_w + ox;
                            let h = (oy * g.stride[0] + i * g.dilation[0]) as f32 - g.pad[0] as f32 + dy[p];
                            let ww = (ox * g.stride[1] + j * g.dilation[1]) as f32 - g.pad[1] as f32 + dx[p];
                            let v = bilinear(src, g.in_h, g.in_w, h, ww);
                            row[p] = m.map_or(v, |m| v * m[p]);
                        }
                    }
                }
            }
        }
        let k = cpg * taps;
        let wg = &w[gi * ocpg * k..(gi + 1) * ocpg * k];
        let yg = &mut y[gi * ocpg * positions..(gi + 1) * ocpg * positions];
        crate::nn::gemm(ocpg, positions, k, 1.0, wg, false, col, false, 0.0, yg);
        if let Some(b) = bias {
            for (o, row) in yg.chunks_exact_mut(positions.max(1)).enumerate() {
                row.iter_mut().for_each(|v| *v += b[gi * ocpg + o]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_offsets_give_a_plain_convolution_and_half_steps_interpolate() {
        // 1 channel 3x3, a 2x2 kernel of ones: each output is the sum of a 2x2 window.
        let x: Vec<f32> = (0..9).map(|v| v as f32).collect();
        let g = DeformGeometry {
            channels: 1,
            in_h: 3,
            in_w: 3,
            out_channels: 1,
            out_h: 2,
            out_w: 2,
            kernel: [2, 2],
            stride: [1, 1],
            dilation: [1, 1],
            pad: [0, 0],
            group: 1,
            offset_group: 1,
        };
        let (w, mut col, mut y) = (vec![1.0; 4], Vec::new(), vec![0.0; 4]);
        deform_conv(&x, &w, &[0.0; 32], None, None, &g, &mut col, &mut y);
        assert_eq!(y, [8.0, 12.0, 20.0, 24.0]);
        // Every tap half a step right: the mean of two neighbours; past the right edge, half of one.
        let mut off = vec![0.0; 32];
        for t in 0..4 {
            off[(t * 2 + 1) * 4..(t * 2 + 2) * 4].fill(0.5);
        }
        deform_conv(&x, &w, &off, None, Some(&[1.0]), &g, &mut col, &mut y);
        assert_eq!(y, [11.0, 10.5, 23.0, 19.5]);
    }
}
