//! The transposed convolution (ConvTranspose): a GEMM of the filters' transpose by the
//! input in blocks of input positions, then each column added at its tap's place.

use crate::gemm::{Gemm, GemmScratch};
use std::ops::Range;

/// Sizes of a transposed convolution, per spatial axis (depth, height, width).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTransposeDims {
    pub input: [usize; 3],
    pub kernel: [usize; 3],
    pub out: [usize; 3],
    /// Negative: the output starts before the first input's footprint.
    pub pad_begin: [i64; 3],
    pub strides: [usize; 3],
    pub dilations: [usize; 3],
    pub out_channels: usize,
}

/// Input positions a block of [`conv_transpose`]'s product takes at most: its columns
/// (`out_channels / group` x taps rows of them) stay within a few MB.
const CT_BLOCK_FLOATS: usize = 1 << 20;

/// Transposed convolution as a product and a scatter: for each group, the columns
/// `W_g^T X_g` (`[out_channels / group x taps, positions]`, `w` read as `[in_channels,
/// out_channels / group x taps]`) in blocks of input positions, each column then added
/// into the output at its tap's place (`col2im`), after the bias. Each output sums the
/// products over input channels in the GEMM's order, then its (channel, tap, position)
/// terms in that order: the same on every Run and every thread count. An element-by-element
/// scatter took 100-170x ORT's time on `[1, 64, 40, 40]` (ORT does the same product and
/// scatter). `w` is `[in_channels, out_channels / group, (kd, kh,) kw]`; `cols` and
/// `gemm` are working memory, grown to their largest need.
#[allow(clippy::too_many_arguments)]
pub fn conv_transpose(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    batch: usize,
    in_channels: usize,
    group: usize,
    d: ConvTransposeDims,
    y: &mut [f32],
    cols: &mut Vec<f32>,
    gemm: &mut GemmScratch,
) {
    let (in_plane, k_len, plane) =
        (d.input.iter().product::<usize>(), d.kernel.iter().product::<usize>(), d.out.iter().product::<usize>());
    let (cin_g, cout_g) = (in_channels / group, d.out_channels / group);
    let rows = cout_g * k_len;
    for n in 0..batch {
        for co in 0..d.out_channels {
            let b = bias.map_or(0.0, |b| b[co]);
            y[(n * d.out_channels + co) * plane..][..plane].fill(b);
        }
    }
    if rows == 0 || in_plane == 0 || cin_g == 0 {
        return;
    }
    let block = (CT_BLOCK_FLOATS / rows).clamp(1, in_plane);
    if cols.len() < rows * block {
        cols.resize(rows * block, 0.0);
    }
    for n in 0..batch {
        for g in 0..group {
            let xg = &x[(n * in_channels + g * cin_g) * in_plane..][..cin_g * in_plane];
            let wg = &w[g * cin_g * rows..][..cin_g * rows];
            let product = Gemm::new(rows, in_plane, cin_g, wg, true, xg, false);
            let mut p0 = 0;
            while p0 < in_plane {
                let p1 = (p0 + block).min(in_plane);
                let c = &mut cols[..rows * (p1 - p0)];
                product.compute(gemm, 0..rows, p0..p1, c);
                let yg = &mut y[(n * d.out_channels + g * cout_g) * plane..][..cout_g * plane];
                col2im(c, p0..p1, &d, k_len, yg);
                p0 = p1;
            }
        }
    }
}

/// Adds the columns `c` (`[channels x taps, positions]`, the input positions `at`) into
/// the channels' output planes `y`, each at its tap's place, skipping places outside.
fn col2im(c: &[f32], at: Range<usize>, d: &ConvTransposeDims, k_len: usize, y: &mut [f32]) {
    let plane = d.out.iter().product::<usize>();
    let width = at.len();
    let [_, in_h, in_w] = d.input;
    // Output index along axis `a` of input `i` and tap `k`, if inside the output.
    let place = |a: usize, i: usize, k: usize| -> Option<usize> {
        let o = (i * d.strides[a] + k * d.dilations[a]) as i64 - d.pad_begin[a];
        (o >= 0 && (o as usize) < d.out[a]).then_some(o as usize)
    };
    for (ch, yp) in y.chunks_exact_mut(plane).enumerate() {
        for kz in 0..d.kernel[0] {
            for ky in 0..d.kernel[1] {
                for kx in 0..d.kernel[2] {
                    let tap = (kz * d.kernel[1] + ky) * d.kernel[2] + kx;
                    let row = &c[(ch * k_len + tap) * width..][..width];
                    // Walk the block's positions as (z, r, c), a run of columns at a time.
                    let mut p = at.start;
                    while p < at.end {
                        let (z, r, col0) = (p / (in_h * in_w), (p / in_w) % in_h, p % in_w);
                        let run = (in_w - col0).min(at.end - p);
                        if let (Some(oz), Some(oy)) = (place(0, z, kz), place(1, r, ky)) {
                            let out_row = &mut yp[(oz * d.out[1] + oy) * d.out[2]..][..d.out[2]];
                            let vals = &row[p - at.start..][..run];
                            let (sw, first) = (d.strides[2], (kx * d.dilations[2]) as i64 - d.pad_begin[2]);
                            for (k, &v) in vals.iter().enumerate() {
                                let ox = ((col0 + k) * sw) as i64 + first;
                                if ox >= 0 && (ox as usize) < out_row.len() {
                                    out_row[ox as usize] += v;
                                }
                            }
                        }
                        p += run;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The transposed convolution by its definition: each input element scatters its
    /// kernel, in float64.
    fn conv_transpose_reference(
        x: &[f32],
        w: &[f32],
        bias: &[f32],
        cin: usize,
        group: usize,
        d: ConvTransposeDims,
    ) -> Vec<f64> {
        let (in_plane, k_len, plane) =
            (d.input.iter().product::<usize>(), d.kernel.iter().product::<usize>(), d.out.iter().product::<usize>());
        let (cin_g, cout_g) = (cin / group, d.out_channels / group);
        let mut y: Vec<f64> = (0..d.out_channels * plane).map(|i| f64::from(bias[i / plane])).collect();
        for ci in 0..cin {
            let g = ci / cin_g;
            for ol in 0..cout_g {
                let co = g * cout_g + ol;
                for p in 0..in_plane {
                    let idx = [p / (d.input[1] * d.input[2]), (p / d.input[2]) % d.input[1], p % d.input[2]];
                    for t in 0..k_len {
                        let k = [t / (d.kernel[1] * d.kernel[2]), (t / d.kernel[2]) % d.kernel[1], t % d.kernel[2]];
                        let o: Vec<i64> = (0..3)
                            .map(|a| (idx[a] * d.strides[a] + k[a] * d.dilations[a]) as i64 - d.pad_begin[a])
                            .collect();
                        if (0..3).all(|a| o[a] >= 0 && (o[a] as usize) < d.out[a]) {
                            let at = (o[0] as usize * d.out[1] + o[1] as usize) * d.out[2] + o[2] as usize;
                            y[co * plane + at] +=
                                f64::from(x[ci * in_plane + p]) * f64::from(w[(ci * cout_g + ol) * k_len + t]);
                        }
                    }
                }
            }
        }
        y
    }

    /// The product and scatter against the definition: strides 1-3, dilation, pads (and
    /// a negative one), groups, and a plane of 2,500 positions that takes several blocks.
    #[test]
    fn conv_transpose_matches_its_definition() {
        // (cin, cout, group, input [h, w], kernel, stride, dilation, pad)
        for (cin, cout, group, [h, wd], k, s, dil, pad) in [
            (3, 5, 1, [6, 7], 3, 2, 1, 1i64),
            (4, 6, 2, [5, 5], 2, 2, 1, 0),
            (2, 3, 1, [4, 6], 3, 1, 2, 2),
            (3, 4, 1, [5, 4], 4, 3, 1, -1),
            (4, 32, 1, [50, 50], 4, 2, 1, 1),
        ] {
            let o = |n: usize| ((n - 1) * s + (k - 1) * dil + 1) as i64 - 2 * pad;
            let d = ConvTransposeDims {
                input: [1, h, wd],
                kernel: [1, k, k],
                out: [1, o(h) as usize, o(wd) as usize],
                pad_begin: [0, pad, pad],
                strides: [1, s, s],
                dilations: [1, dil, dil],
                out_channels: cout,
            };
            let x: Vec<f32> = (0..cin * h * wd).map(|i| ((i * 37 % 101) as f32) * 0.02 - 1.0).collect();
            let w: Vec<f32> = (0..cin * (cout / group) * k * k).map(|i| ((i * 53 % 97) as f32) * 0.02 - 0.9).collect();
            let bias: Vec<f32> = (0..cout).map(|i| i as f32 * 0.5 - 1.0).collect();
            let want = conv_transpose_reference(&x, &w, &bias, cin, group, d);
            let mut y = vec![f32::NAN; want.len()];
            let (mut cols, mut gemm) = (Vec::new(), GemmScratch::new());
            conv_transpose(&x, &w, Some(&bias), 1, cin, group, d, &mut y, &mut cols, &mut gemm);
            for (i, (&a, &b)) in y.iter().zip(&want).enumerate() {
                assert!(
                    (f64::from(a) - b).abs() <= 1e-4 * (1.0 + b.abs()),
                    "{cin}->{cout} g{group} {h}x{wd} k{k} s{s}: {i}: {a} against {b}"
                );
            }
        }
    }
}
