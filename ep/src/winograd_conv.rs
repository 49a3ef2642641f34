//! 3x3 convolutions of stride 1 on the Winograd kernel (`rivet_kernels::winograd`), split
//! over the Run's pool by tile rows.

use rivet_kernels::{conv, nn, winograd};

use crate::parallel::{cores, lock, packed_once, Parallel};

/// The least multiply-adds of a task's products in one block worth a split (about 20 us
/// at one core's speed): each block's split is a ParallelFor of its own. At 2^23 the
/// smaller convolutions of DenseNet, Inception and SqueezeNet ran unsplit, on one core
/// at two threads: 2^21 took those models from 1.36, 1.32 and 2.19x ORT's time to 1.28,
/// 1.28 and 1.89x there, with one thread's unchanged within noise.
const TASK_MIN_MACS: usize = 1 << 21;

/// A convolution of one group on the Winograd kernel, its constant filters transformed on
/// the first Run (entry `key` of the Run's cache). Unsplit, it runs whole on task 0's
/// scratch. Split, each block of tile rows is transformed once on the calling thread and
/// its products and outputs are split over the pool by output channels, each task writing
/// its own channels' planes in place: at one thread the tasks run in turn and cost no copy.
/// Every split gives the same bits (the GEMM's sums do not depend on the rows computed).
/// Returns false when the input or the filters are out of the kernel's range
/// (`winograd::in_range`: an inf, a NaN or a magnitude past 2^64; the input is checked
/// as the transform reads it), `y` then partly written: the caller computes it otherwise.
#[allow(clippy::too_many_arguments)]
pub(crate) fn convolution(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    xs: &[usize],
    out_c: usize,
    g: &conv::Window3d,
    y: &mut [f32],
    par: &dyn Parallel,
    key: usize,
    epilogue: &nn::Epilogue<'_>,
) -> bool {
    let (in_c, plane, positions) = (xs[1], g.plane(), g.positions());
    let mut cache = lock(&par.scratch().winograd);
    let filters = packed_once(&mut cache, key, w, |f| winograd::transform_filters(w, out_c, in_c, g, f));
    if !filters.usable() {
        return false;
    }
    let [th, _] = winograd::tiles(g);
    for n in 0..xs[0] {
        let block = n * out_c * positions..(n + 1) * out_c * positions;
        let run = winograd::Winograd {
            x: &x[n * in_c * plane..][..in_c * plane],
            g,
            filters,
            epilogue: nn::Epilogue {
                bias: bias.map_or(nn::Bias::None, nn::Bias::Rows),
                residual: epilogue.residual.map(|r| &r[block.clone()]),
                ..*epilogue
            },
        };
        let yn = &mut y[block];
        let per_task = out_c.div_ceil(cores()).next_multiple_of(run.strip_rows());
        let block_tiles = run.block(0).len() * winograd::tiles(g)[1];
        if per_task >= out_c || per_task * in_c * winograd::POINTS * block_tiles < TASK_MIN_MACS {
            if !run.run(0..th, yn, &mut par.scratch().task(0).winograd) {
                return false;
            }
            continue;
        }
        let mut v = lock(&par.scratch().conv_parts);
        let mut r0 = 0;
        while r0 < th {
            let tiles = run.block(r0);
            if !run.input(tiles.clone(), &mut v, &mut par.scratch().task(0).winograd.pad) {
                return false;
            }
            let v: &[f32] = &v;
            par.for_each_task(yn, per_task * positions, &|start, part, s| {
                let k0 = start / positions;
                let ch = k0..k0 + part.len() / positions;
                let s = &mut s.winograd;
                run.output(tiles.clone(), ch, 0, v, part, &mut s.m, &mut s.gemm);
            });
            r0 = tiles.end;
        }
    }
    true
}
