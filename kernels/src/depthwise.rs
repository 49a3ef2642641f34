//! Depthwise convolution (one filter per channel, `group == in_c == out_c`): direct, one
//! output row at a time, with no im2col.
//!
//! The im2col path built a taps × positions matrix per channel and ran a matrix-vector
//! product on it (PERF-FINDINGS: ORT's depthwise was 11-25x faster in-model). Here each
//! in-range (d, h) input row is merged into the output row once per width tap, scaled by
//! that tap's weight, over the outputs whose tap is in range, as the pools do. Every output
//! sums its taps in (d, h, w) order from 0, as the matrix-vector product did; the padding
//! taps it added as `w * 0` are skipped, which can change only the sign of an exact zero.

use std::ops::Range;

use crate::conv::Window3d;
use crate::pool::{taps_in_range, width_span};

/// `y[n, c] = sum over taps of w[c, tap] * x[n, c, tap] (+ bias[c])` over `planes` =
/// batch × channels planes; `w` is `[channels, 1, kernel...]`.
pub fn depthwise(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    planes: usize,
    channels: usize,
    g: &Window3d,
    y: &mut [f32],
) {
    depthwise_planes(x, w, bias, 0..planes, channels, g, y);
}

/// [`depthwise`] for the planes `planes` only: `x` and `y` start at the first of them
/// (for splitting over threads by planes).
pub fn depthwise_planes(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    planes: Range<usize>,
    channels: usize,
    g: &Window3d,
    y: &mut [f32],
) {
    let (plane, positions) = (g.plane(), g.positions());
    if positions == 0 {
        return;
    }
    let [_, in_h, in_w] = g.input;
    let [out_d, out_h, out_w] = g.out;
    let [_, kh, kw] = g.kernel;
    let taps: usize = g.kernel.iter().product();
    let first = planes.start;
    for (p, dst) in planes.zip(y.chunks_exact_mut(positions)) {
        let c = p % channels;
        let wc = &w[c * taps..][..taps];
        let b = bias.map_or(0.0, |b| b[c]);
        if plane == 0 {
            dst.fill(b);
            continue;
        }
        let src = &x[(p - first) * plane..][..plane];
        for zd in 0..out_d {
            let rd = taps_in_range(g, 0, zd);
            for zh in 0..out_h {
                let rh = taps_in_range(g, 1, zh);
                let row = &mut dst[(zd * out_h + zh) * out_w..][..out_w];
                row.fill(0.0);
                for td in rd.clone() {
                    let sd = zd * g.stride[0] + td * g.dilation[0] - g.pad_begin[0];
                    for th in rh.clone() {
                        let sh = zh * g.stride[1] + th * g.dilation[1] - g.pad_begin[1];
                        let input = &src[(sd * in_h + sh) * in_w..][..in_w];
                        for tw in 0..kw {
                            let wv = wc[(td * kh + th) * kw + tw];
                            let Some((outs, at)) = width_span(g, tw, out_w) else { continue };
                            let n = outs.len();
                            let outs = &mut row[outs];
                            if g.stride[2] == 1 {
                                outs.iter_mut().zip(&input[at..][..n]).for_each(|(o, &v)| *o += wv * v);
                            } else {
                                let ins = input[at..].iter().step_by(g.stride[2]);
                                outs.iter_mut().zip(ins).for_each(|(o, &v)| *o += wv * v);
                            }
                        }
                    }
                }
                if b != 0.0 {
                    row.iter_mut().for_each(|o| *o += b);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::conv;
    use crate::gemm::GemmScratch;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        crate::test_values(n, seed)
    }

    #[test]
    fn depthwise_matches_the_grouped_im2col_convolution() {
        let mut checked = 0;
        for dims in 1..=3usize {
            let len = [0, 13, 9, 5][dims];
            for k in [1, 3, 5] {
                for stride in 1..=2 {
                    for dil in 1..=2 {
                        for pad in [0, k / 2, k - 1] {
                            let Some(g) = Window3d::cube(dims, len, k, stride, dil, pad, 0) else { continue };
                            let (batch, ch) = (2, 3);
                            let taps: usize = g.kernel.iter().product();
                            let x = values(batch * ch * g.plane(), (k * 5 + stride + dil) as u64);
                            let w = values(ch * taps, 9);
                            let bias = values(ch, 4);
                            let mut want = vec![0.0; batch * ch * g.positions()];
                            let (mut col, mut s) = (Vec::new(), GemmScratch::new());
                            conv(
                                &x,
                                &w,
                                Some(&bias),
                                batch,
                                ch,
                                ch,
                                ch,
                                &g,
                                &mut want,
                                &mut col,
                                &mut s,
                                None,
                                &Default::default(),
                            );
                            let mut got = vec![f32::NAN; want.len()];
                            depthwise(&x, &w, Some(&bias), batch * ch, ch, &g, &mut got);
                            // The same sums in the same order, but where the old path took a
                            // dot product with partial sums (one output position).
                            if g.positions() > 1 {
                                assert_eq!(got, want, "{g:?}");
                            } else {
                                let close = got.iter().zip(&want).all(|(a, b)| (a - b).abs() <= 1e-5 * (1.0 + b.abs()));
                                assert!(close, "{g:?}: {got:?} vs {want:?}");
                            }
                            checked += 1;
                        }
                    }
                }
            }
        }
        assert!(checked > 50, "{checked}");
    }
}
