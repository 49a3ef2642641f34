//! Convolutions whose input or output the plan stores channels last (`[N, H, W, C]` data
//! under the declared `[N, C, H, W]` shape; `passes::channels_last`): an inverted residual
//! block's 1x1 convolutions as products over positions (`Y^T = X^T · W^T`, its rows the
//! channels-last output, or `X` read as stored) and its depthwise convolution on the
//! channels-last kernels, with no transpose between them. Laid out as NCHW, the
//! depthwise kernel transposed its input into channels-last blocks and its output back
//! (MobileNetV2 and EfficientNet-B0 in-model: 1.6-2.1x ORT's time on their 7x7 and 14x14
//! planes, where ORT keeps a blocked layout between its convolutions).
//!
//! Anything the channels-last paths do not take (another CPU, a window or channel count
//! the kernels refuse) runs on the NCHW paths (`products::convolution`) with its input and
//! output transposed around it: the same values, in the layout the plan stores.

use std::sync::atomic::{AtomicBool, Ordering};

use rivet_kernels::{conv, depthwise, nn};

use crate::parallel::{cores, lock, Parallel, PARALLEL_MIN_LEN};
use crate::products::{self, Extras, Packing, Product};
use crate::registry::ChannelsLast;

/// A convolution's operands: `x` (`xs` its declared shape), the filters `w` of `out_c`
/// channels in `group` groups, the per-channel `bias`, and its window.
pub(crate) struct Conv<'a> {
    pub x: &'a [f32],
    pub w: &'a [f32],
    pub bias: Option<&'a [f32]>,
    pub xs: &'a [usize],
    pub out_c: usize,
    pub group: usize,
    pub g: &'a conv::Window3d,
}

/// Runs `c` with its input and output stored as `layout` says, into `y`; `constant` and
/// `epilogue` as for `products::convolution` (the epilogue's residual is NCHW, as every
/// value the plan does not mark is).
pub(crate) fn convolution(
    c: &Conv<'_>,
    layout: ChannelsLast,
    y: &mut [f32],
    par: &dyn Parallel,
    constant: Option<Packing>,
    epilogue: &nn::Epilogue<'_>,
) {
    let in_c = c.xs[1];
    let done = if c.group == 1 && c.g.is_pointwise() {
        constant.is_some_and(|packing| pointwise(c, layout, y, par, packing, epilogue))
    } else if c.group == in_c && c.out_c == in_c && in_c > 1 {
        depthwise(c, layout, y, par, epilogue)
    } else {
        false
    };
    if !done {
        relaid(c, layout, y, par, constant, epilogue);
    }
}

/// Whether a 1x1 convolution of `positions` positions from `in_c` to `out_c` channels
/// runs on the channels-last products: where the NCHW paths too run it as a GEMM over
/// all its input channels (`pointwise_conv`, or the plain GEMM past 256 positions), so
/// that each output sums its products in the same order. A plane of one position, or one
/// input or output channel, they run otherwise (the direct kernel, or a matrix-vector
/// product), in another order: found by review, 1-2 ulp apart.
pub(crate) fn takes_pointwise(positions: usize, in_c: usize, out_c: usize) -> bool {
    positions > 1 && in_c > 1 && out_c > 1
}

/// The most positions whose NCHW output a channels-last 1x1 convolution computes as
/// `Y^T` and transposes: past them the plain product `W · X^T` fills the GEMM's panels
/// (a projection to 24 channels on 56x56 ran 102 -> 238 us as `Y^T`, its 24 columns a
/// part-empty panel).
const TRANSPOSED_MAX_POSITIONS: usize = 256;

/// A 1x1 convolution as the product over positions `Y^T = X^T · W^T` (`W^T` packed once
/// from the constant filters), one image at a time: its rows are the channels-last
/// output; from a channels-last input `X^T` is read as stored. An NCHW output is
/// transposed from it into the planes, its epilogue split as `pointwise_conv` splits it.
/// False (nothing written) for a channels-last output with a residual, bfloat16 filters
/// and what [`takes_pointwise`] refuses, which the plan never marks.
fn pointwise(
    c: &Conv<'_>,
    layout: ChannelsLast,
    y: &mut [f32],
    par: &dyn Parallel,
    packing: Packing,
    epilogue: &nn::Epilogue<'_>,
) -> bool {
    let (batch, k, p, n) = (c.xs[0], c.xs[1], c.g.positions(), c.out_c);
    if (layout.output && epilogue.residual.is_some()) || packing.bf16 || !takes_pointwise(p, k, n) {
        return false;
    }
    let plain = !layout.output && p > TRANSPOSED_MAX_POSITIONS;
    let weights = (!plain).then(|| products::packed_weights(par, packing, (p, n, k), c.w, true));
    let packed_b = weights.as_ref().map(|w| &w[packing.key].packed);
    let product = Product { m: p, n, k, alpha: 1.0, trans_a: !layout.input, trans_b: true, beta: 0.0 };
    for image in 0..batch {
        let x = &c.x[image * k * p..][..k * p];
        let block = image * n * p..(image + 1) * n * p;
        if layout.output {
            let fused = nn::Epilogue { bias: c.bias.map_or(nn::Bias::None, nn::Bias::Cols), ..*epilogue };
            products::product_with(product, x, c.w, Extras { packed_b, epilogue: fused }, &mut y[block], par);
            continue;
        }
        if plain {
            // Y = W · X^T: the planes themselves, X^T packed from its rows as it is stored.
            let plain = Product { m: n, n: p, k, alpha: 1.0, trans_a: false, trans_b: true, beta: 0.0 };
            let ep = nn::Epilogue {
                bias: c.bias.map_or(nn::Bias::None, nn::Bias::Rows),
                residual: epilogue.residual.map(|r| &r[block.clone()]),
                ..*epilogue
            };
            products::product_with(plain, c.w, x, Extras { packed_b: None, epilogue: ep }, &mut y[block], par);
            continue;
        }
        let (fused, after) = crate::pointwise_conv::split_epilogue(c.bias, epilogue, block.clone());
        let mut relaid = lock(&par.scratch().relaid);
        let yt = &mut relaid[1];
        if yt.len() < p * n {
            yt.resize(p * n, 0.0);
        }
        let yt = &mut yt[..p * n];
        products::product_with(product, x, c.w, Extras { packed_b, epilogue: fused }, yt, par);
        let yt: &[f32] = yt;
        let per = if p * n >= PARALLEL_MIN_LEN { n.div_ceil(cores()) } else { n };
        par.for_each_chunk(&mut y[block], per * p, &|start, planes| {
            let channels = start / p..start / p + planes.len() / p;
            nn::transpose_block(&yt[channels.start..], (p, channels.len(), n), planes, p);
            after.apply_rows(planes, p, channels);
        });
    }
    true
}

/// A depthwise convolution from a channels-last input on the channels-last kernels: to a
/// channels-last output split over the pool by output rows (its epilogue an activation
/// alone, as the plan marks it), else to the planes split by blocks of 16 channels. False
/// (nothing written) where the kernels do not take it.
fn depthwise(
    c: &Conv<'_>,
    layout: ChannelsLast,
    y: &mut [f32],
    par: &dyn Parallel,
    epilogue: &nn::Epilogue<'_>,
) -> bool {
    let (batch, ch, g) = (c.xs[0], c.xs[1], c.g);
    let act_only = epilogue.scale.is_none()
        && matches!(epilogue.bias, nn::Bias::None)
        && epilogue.residual.is_none()
        && epilogue.after.is_none();
    if !layout.input || !depthwise::takes_nhwc(g, ch) || (layout.output && !act_only) {
        return false;
    }
    let (plane, positions, [_, oh, ow]) = (g.plane(), g.positions(), g.out);
    let taken = AtomicBool::new(true);
    for image in 0..batch {
        let x = &c.x[image * plane * ch..][..plane * ch];
        let yi = &mut y[image * positions * ch..][..positions * ch];
        let split = x.len() >= PARALLEL_MIN_LEN;
        if layout.output {
            let per = oh.div_ceil(if split { cores().min(oh) } else { 1 }) * ow * ch;
            par.for_each_task(yi, per, &|start, part, s| {
                let r0 = start / (ow * ch);
                let rows = r0..r0 + part.len() / (ow * ch);
                if !depthwise::depthwise_rows_nhwc(x, c.w, c.bias, ch, g, rows, part, epilogue.act, &mut s.col) {
                    taken.store(false, Ordering::Relaxed);
                }
            });
        } else {
            let blocks = ch / 16;
            let per = blocks.div_ceil(if split { cores().min(blocks) } else { 1 }) * 16 * positions;
            let ep = nn::Epilogue {
                residual: epilogue.residual.map(|r| &r[image * ch * positions..][..ch * positions]),
                ..*epilogue
            };
            par.for_each_task(yi, per, &|start, part, s| {
                let b0 = start / (16 * positions);
                let blocks = b0..b0 + part.len() / (16 * positions);
                if !depthwise::depthwise_from_nhwc(x, c.w, c.bias, ch, blocks, g, part, (&ep, 0), &mut s.col) {
                    taken.store(false, Ordering::Relaxed);
                }
            });
        }
    }
    // `takes_nhwc` said they run: a refusal here is a broken promise, not an input.
    assert!(taken.into_inner(), "the channels-last depthwise kernels refused a window they take");
    true
}

/// `c` on the NCHW paths, its channels-last input transposed into planes first and its
/// output, if channels last, transposed from them after: the values the layout holds.
fn relaid(
    c: &Conv<'_>,
    layout: ChannelsLast,
    y: &mut [f32],
    par: &dyn Parallel,
    constant: Option<Packing>,
    epilogue: &nn::Epilogue<'_>,
) {
    let (in_c, plane) = (c.xs[1], c.g.plane());
    let (n, positions) = (c.out_c, c.g.positions());
    let mut relaid = lock(&par.scratch().relaid);
    let [xin, yout] = &mut *relaid;
    let x: &[f32] = if layout.input {
        if xin.len() < c.x.len() {
            xin.resize(c.x.len(), 0.0);
        }
        for (src, dst) in c.x.chunks_exact(plane * in_c).zip(xin.chunks_exact_mut(plane * in_c)) {
            nn::transpose_2d(src, plane, in_c, dst);
        }
        &xin[..c.x.len()]
    } else {
        c.x
    };
    if !layout.output {
        return products::convolution(x, c.w, c.bias, c.xs, n, c.group, c.g, y, par, constant, epilogue);
    }
    if yout.len() < y.len() {
        yout.resize(y.len(), 0.0);
    }
    let planes = &mut yout[..y.len()];
    products::convolution(x, c.w, c.bias, c.xs, n, c.group, c.g, planes, par, constant, epilogue);
    for (src, dst) in planes.chunks_exact(n * positions).zip(y.chunks_exact_mut(n * positions)) {
        nn::transpose_2d(src, n, positions, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::Serial;

    use rivet_kernels::test_values as values;

    /// `[n, c, p]` planes as `[n, p, c]` rows.
    fn to_nhwc(x: &[f32], c: usize, p: usize) -> Vec<f32> {
        let mut y = vec![0.0; x.len()];
        for (src, dst) in x.chunks_exact(c * p).zip(y.chunks_exact_mut(c * p)) {
            for i in 0..c * p {
                dst[(i % p) * c + i / p] = src[i];
            }
        }
        y
    }

    /// Every layout of each convolution gives the NCHW path's values, stored as the
    /// layout says: on the channels-last paths (1x1 ones on small and large planes, with
    /// and without a residual; depthwise ones) and on the transposed fallback (a depthwise
    /// convolution of 24 channels, a grouped one, filters that change), bit for bit.
    #[test]
    fn every_layout_gives_the_nchw_values() {
        let relu = Some(nn::Activation::Unary(rivet_kernels::UnaryOp::Relu));
        // (n, in_c, out_c, group, hw, k, stride, constant, residual)
        let cases = [
            (2, 16, 64, 1, 7, 1, 1, true, false),
            (1, 24, 40, 1, 20, 1, 1, true, true),
            (1, 32, 32, 32, 14, 3, 1, true, false),
            (2, 48, 48, 48, 13, 5, 2, true, false),
            (1, 24, 24, 24, 9, 3, 1, true, false),
            (1, 16, 32, 4, 9, 3, 1, true, false),
            (1, 16, 32, 1, 6, 1, 1, false, false),
            // Found by review: one position, one output channel (the NCHW paths' direct
            // kernel and matrix-vector product sum in another order): the fallback.
            (1, 16, 32, 1, 1, 1, 1, true, false),
            (1, 64, 1, 1, 14, 1, 1, true, false),
            (1, 64, 1, 1, 30, 1, 1, true, false),
            // Past 256 positions and under `BF16_GEMM_MIN`: float32 filters on the NCHW
            // paths even in bf16 (found by review).
            (1, 24, 40, 1, 20, 1, 1, true, false),
        ];
        for (n, in_c, out_c, group, hw, k, stride, constant, residual) in cases {
            let pads = conv::Padding::Explicit([0, k / 2, k / 2, 0, k / 2, k / 2]);
            let (g, _) =
                conv::window_geometry([1, hw, hw], [1, k, k], [1, stride, stride], [1; 3], pads, false).unwrap();
            let (plane, p) = (g.plane(), g.positions());
            let x = values(n * in_c * plane, 1);
            let w = values(out_c * in_c / group * k * k, 2);
            let bias = values(out_c, 3);
            let res = values(n * out_c * p, 4);
            let xs = [n, in_c, hw, hw];
            // Found by review: bfloat16 filters where the NCHW paths keep float32 ones.
            for bf16 in [false, true] {
                let packing = constant.then_some(Packing { key: 0, bf16 });
                let epilogue = nn::Epilogue { act: relu, residual: residual.then_some(&res[..]), ..Default::default() };
                let mut want = vec![0.0; n * out_c * p];
                let par = Serial::default();
                products::convolution(&x, &w, Some(&bias), &xs, out_c, group, &g, &mut want, &par, packing, &epilogue);
                let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                for (input, output) in [(false, true), (true, false), (true, true)] {
                    if residual && output {
                        continue; // never marked: the residual is NCHW
                    }
                    let xl = if input { to_nhwc(&x, in_c, plane) } else { x.clone() };
                    let c = Conv { x: &xl, w: &w, bias: Some(&bias), xs: &xs, out_c, group, g: &g };
                    let mut got = vec![f32::NAN; want.len()];
                    let par = Serial::default();
                    convolution(&c, ChannelsLast { input, output }, &mut got, &par, packing, &epilogue);
                    let expected = if output { to_nhwc(&want, out_c, p) } else { want.clone() };
                    assert_eq!(
                        bits(&got),
                        bits(&expected),
                        "{in_c}->{out_c} g{group} {hw}x{hw} k{k} in {input} out {output} bf16 {bf16}"
                    );
                }
            }
        }
    }
}
