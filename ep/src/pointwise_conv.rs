//! 1x1 convolutions of small planes (a CNN's 7x7 and 14x14 layers) as the transposed
//! product `Y^T = X^T · W^T`, split over the Run's pool by output channels.
//!
//! In NCHW a 1x1 convolution is `Y[out_c, P] = W[out_c, in_c] · X[in_c, P]`, P the plane's
//! positions. With P = 49 or 196 the GEMM's 32- and 48-wide column panels leave a third
//! of the last panel empty, and the direct kernel's short rows do worse: 1.35-2.07x ORT's
//! time on MobileNetV2's and ResNet-50's late layers (AMD Zen 5, one thread). Transposed,
//! the positions are the product's rows (49 = 3 strips of 14 and one of 7, 196 = 14 of
//! 14) and the output channels its columns (multiples of 16 in every model), with `W^T`
//! packed once from the constant filters. Each task computes its channels' `[P, w]`
//! block of `Y^T` in its own scratch, then writes those channels' planes in place,
//! transposed, and applies the bias and the fused epilogue to them, as the separate ops
//! would. At one thread the tasks run in turn and cost no copy but the transpose.

use rivet_kernels::nn;

use crate::parallel::{cores, lock, Parallel};

/// The most positions taken: from 16x16 planes on, the plain product's panels are full
/// enough (a 28x28 plane measured at ORT's speed or better on the plain GEMM).
const MAX_POSITIONS: usize = 256;
/// The least multiply-adds worth splitting the channels over the pool.
const SPLIT_MIN_MACS: usize = 1 << 20;
/// The most filter weights (`W^T`, 512 KB) for which a split goes by positions: each task
/// then reads all of them, and this many stay in a core's cache next to its work.
const ROWS_MAX_WEIGHTS: usize = 1 << 17;
/// The least positions a task of a split by positions takes.
const ROWS_TASK_MIN: usize = 48;

/// Whether a 1x1 convolution of `positions` positions per plane, one group, runs here.
pub(crate) fn fits(positions: usize, in_c: usize, out_c: usize) -> bool {
    positions > 1 && positions <= MAX_POSITIONS && in_c > 1 && out_c > 1
}

/// Runs a 1x1, stride-1, unpadded convolution of one group: `x` is `[N, in_c, P]`, `w`
/// `[out_c, in_c]` (constant: `W^T` is packed on the first Run, as entry `packing.key`
/// of the Run's weights, as bfloat16 with `packing.bf16`), `y` `[N, out_c, P]`. `epilogue` (no bias of its own: `bias` is the
/// per-channel one) is applied after the bias.
#[allow(clippy::too_many_arguments)]
pub(crate) fn convolution(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    (batch, in_c, positions): (usize, usize, usize),
    out_c: usize,
    y: &mut [f32],
    par: &dyn Parallel,
    packing: crate::products::Packing,
    epilogue: &nn::Epilogue<'_>,
) {
    let (p, n, k) = (positions, out_c, in_c);
    let weights = crate::products::packed_weights(par, packing, (p, n, k), w, true);
    let packed_b = &weights[packing.key].packed;
    // Whole panels of the packed W^T per task, so every task computes its channels as the
    // whole product would: the same bits, split or not.
    let nr = packed_b.panel_width().unwrap_or(1);
    let split = p * n * k >= SPLIT_MIN_MACS;
    let width = if split { n.div_ceil(cores()).next_multiple_of(nr) } else { n };
    let row_tasks = cores().min(p / ROWS_TASK_MIN);
    if split && row_tasks >= 2 && n <= k && k * n <= ROWS_MAX_WEIGHTS && !packed_b.is_bf16() {
        let per = p.div_ceil(row_tasks).next_multiple_of(nn::row_tile(p, n));
        for image in 0..batch {
            let planes = image * n * p..(image + 1) * n * p;
            let xn = &x[image * k * p..][..k * p];
            let (fused, after) = split_epilogue(bias, epilogue, planes.clone());
            let product = nn::Gemm { packed_b: Some(packed_b), ..nn::Gemm::new(p, n, k, xn, true, w, true) };
            let product = nn::Gemm { epilogue: fused, ..product };
            by_positions(&product, per, &after, &mut y[planes], par);
        }
        return;
    }
    for image in 0..batch {
        let xn = &x[image * k * p..][..k * p];
        let planes = image * n * p..(image + 1) * n * p;
        // op(A) = X^T, packed once for all the tasks (the bf16 kernel rounds it itself,
        // strip by strip).
        let mut packed_a = lock(&par.scratch().packed_a);
        let (fused, after) = split_epilogue(bias, epilogue, planes.clone());
        let product = nn::Gemm { packed_b: Some(packed_b), ..nn::Gemm::new(p, n, k, xn, true, w, true) };
        let product = nn::Gemm { epilogue: fused, ..product };
        let product = if packed_b.is_bf16() {
            product
        } else {
            nn::pack_a_for(&mut packed_a, &product);
            nn::Gemm { packed_a: Some(&*packed_a), ..product }
        };
        par.for_each_task(&mut y[planes], width * p, &|start, part, s| {
            let channels = start / p..start / p + part.len() / p;
            let w = channels.len();
            if s.out.len() < p * w {
                s.out.resize(p * w, 0.0);
            }
            let yt = &mut s.out[..p * w];
            product.compute(&mut s.gemm, 0..p, channels.clone(), yt);
            nn::transpose_2d(yt, p, w, part);
            after.apply_rows(part, p, channels);
        });
    }
}

/// The epilogue split between the product `Y^T` and the planes of `y` (image block
/// `planes` of the whole output): without a residual, the bias (by columns, the output
/// channels) and the activations go into the product, where the AVX-512 tiles apply a
/// bias and a Relu or Clip as they store and the planes take no pass; with one (in NCHW),
/// all of it after the transpose. Either way each element takes the same operations in
/// the same order: the same bits, with two exceptions a review found (46,240 calls
/// against the previous code, float32 and bf16, every split: no other difference): a
/// NaN's sign on the generic build (its SiLU's vector loop and scalar tail treat a NaN
/// differently, and the rows are now channel columns), and a subnormal Clip bound under
/// denormals-as-zero (see the GEMM's `store_fused`).
pub(crate) fn split_epilogue<'a>(
    bias: Option<&'a [f32]>,
    epilogue: &nn::Epilogue<'a>,
    planes: std::ops::Range<usize>,
) -> (nn::Epilogue<'a>, nn::Epilogue<'a>) {
    match epilogue.residual {
        None => {
            (nn::Epilogue { bias: bias.map_or(nn::Bias::None, nn::Bias::Cols), ..*epilogue }, nn::Epilogue::default())
        }
        Some(r) => {
            let after = nn::Epilogue {
                bias: bias.map_or(nn::Bias::None, nn::Bias::Rows),
                residual: Some(&r[planes]),
                ..*epilogue
            };
            (nn::Epilogue::default(), after)
        }
    }
}

/// One image's transposed product split over the pool by positions: each task packs its
/// own rows of `X^T` (its positions of every input channel), multiplies them by the whole
/// `W^T` into its own scratch (`[its positions, out_c]`), then a second split by output
/// channels transposes every task's block into the planes in place and applies `after`.
/// Split by channels instead, every task would read the whole `X^T` packed by the calling
/// thread: rewritten on each Run after the other core read it, that packing took 66 us
/// against 13 on one core for 512->64 channels on 13x13 (ORT's pool, probe trace).
fn by_positions(product: &nn::Gemm<'_>, per: usize, after: &nn::Epilogue<'_>, y: &mut [f32], par: &dyn Parallel) {
    let (p, n) = (product.m, product.n);
    let tasks = p.div_ceil(per);
    let rows = |i: usize| i * per..((i + 1) * per).min(p);
    par.for_each_index(tasks, &|i, s| {
        let len = rows(i).len() * n;
        if s.out.len() < len {
            s.out.resize(len, 0.0);
        }
        product.compute(&mut s.gemm, rows(i), 0..n, &mut s.out[..len]);
    });
    let parts = par.scratch().task_outs(tasks);
    let width = n.div_ceil(cores()).max(1);
    par.for_each_chunk(y, width * p, &|start, planes| {
        let channels = start / p..start / p + planes.len() / p;
        for i in 0..tasks {
            let yt = &parts.get(i)[..rows(i).len() * n];
            let block = (rows(i).len(), channels.len(), n);
            nn::transpose_block(&yt[channels.start..], block, &mut planes[rows(i).start..], p);
        }
        after.apply_rows(planes, p, channels);
    });
}
