//! Convolutions on the direct kernels (`rivet_kernels::direct`): the float one, the
//! AVX-512 BF16 one and, for the `bf16` precision on CPUs with AMX tiles, the AMX one
//! (every convolution of 16+ channels a group, and stems with their kernel's columns
//! folded into their channels), each split over the Run's pool in place, with the
//! padded or rounded input made over the pool where it is large.

use rivet_kernels::{conv, direct, nn};

use crate::parallel::{self, cores, lock, packed_once_as, Parallel, BY_ROWS_MAX_CHANNELS, BY_ROWS_MAX_TASKS};
use crate::products::{unsplit, Packing, DIRECT_MIN_MACS};

/// A convolution on the direct kernel (`rivet_kernels::direct`), its constant filters
/// packed on the first Run (entry `packing.key` of the Run's cache), on the bfloat16
/// kernel with `packing.bf16` (its input rounded into pair planes on each Run, where the
/// float kernel pads a copy only if it must). Each group's output is split over the pool
/// by output rows (float32, at most `BY_ROWS_MAX_CHANNELS` channels a group) or else in
/// whole 16-channel blocks, every task writing its own part of the output in place: at
/// one thread the tasks run in turn and cost nothing (no copy, no packing again), and
/// every split gives the whole convolution's bits.
#[allow(clippy::too_many_arguments)]
pub(crate) fn convolution(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    xs: &[usize],
    out_c: usize,
    group: usize,
    g: &conv::Window3d,
    y: &mut [f32],
    par: &dyn Parallel,
    packing: Packing,
    epilogue: &nn::Epilogue<'_>,
) {
    let (in_c, cg, mg, bf16) = (xs[1], xs[1] / group, out_c / group, packing.bf16);
    let fold = bf16 && amx_fold(g, cg, mg, group);
    let amx = bf16 && (fold || amx_conv(g, cg, mg));
    let taps = g.kernel.iter().product::<usize>();
    let (kk, positions, plane) = (cg * taps, g.positions(), g.plane());
    // A folded stem runs as the convolution `folded` of `cg · kw` channels and one column.
    #[cfg(target_arch = "x86_64")]
    let folded = fold.then(|| direct::folded(g));
    #[cfg(not(target_arch = "x86_64"))]
    let folded: Option<conv::Window3d> = None;
    let (gd, cgd) = match &folded {
        Some(f) => (f, cg * g.kernel[2]),
        None => (g, cg),
    };
    let mut cache = lock(&par.scratch().direct);
    let layout = bf16 as usize + amx as usize + fold as usize;
    // Packed once (then copied to 64-byte aligned memory, where the AMX tiles load a
    // filter row in one access: see `lines`).
    let packed = packed_once_as(&mut cache, packing.key, w, layout, |aligned| {
        let mut p = Vec::new();
        #[cfg(target_arch = "x86_64")]
        if fold {
            let w = direct::fold_filters(w, out_c, cg, g);
            direct::pack_filters_amx(&w, out_c, group, cgd, g.kernel[1], &mut p);
            return aligned.assign(&p);
        }
        if amx {
            direct::pack_filters_amx(w, out_c, group, cg, taps, &mut p);
        } else if bf16 {
            direct::pack_filters_bf16(w, out_c, group, cg, taps, &mut p);
        } else {
            direct::pack_filters(w, out_c, group, kk, &mut p);
        }
        aligned.assign(&p);
    });
    let src = if bf16 { direct::pair_source(gd) } else { direct::source(g, cg) };
    let mut padded = lock(&par.scratch().conv_parts);
    let blocks = mg.div_ceil(direct::BLOCK);
    // At least 2 blocks a task on the narrow tiles: a tile of one block broadcasts an
    // input for each multiply-add and runs at about half the rate of two blocks' (16->32
    // channels of 3x3 s2 on 80x80, one thread: 166-189 us as two tasks of one block).
    // Two threads on one block each do no more than one thread on both. The wide tiles
    // (stems) run a block at a time anyway.
    let least = if direct::wide_tiles(g, cg) && !amx { 1 } else { 2 };
    let tasks = cores().min(blocks / least).max(1);
    // The AMX tiles take two blocks a call: a task's part is whole pairs of them.
    let per_task = blocks.div_ceil(tasks.max(1)).next_multiple_of(1 + amx as usize) * direct::BLOCK;
    // Split by output rows where the parts' channels fit (`BY_ROWS_MAX_CHANNELS`): each
    // task reads only its rows of the input, mostly written by the same core if the
    // convolution before it split by rows too, where a task of a channel split reads all
    // of it. Between two cores a read of what the other wrote costs several times a local
    // one (two threads, YOLO: 1.06 -> 0.96 ms; a stem of one block and 16->32 channels of
    // 3x3 at stride 2, which the channel split left on one core, included).
    let row_tasks = cores().min(BY_ROWS_MAX_TASKS).min(g.out[1]);
    let by_rows = !bf16 && !g.is_pointwise() && mg <= BY_ROWS_MAX_CHANNELS && row_tasks > 1;
    let split = mg * positions * kk >= DIRECT_MIN_MACS && (tasks > 1 || by_rows);
    let group_w = packed.len() / group;
    for n in 0..xs[0] {
        for gi in 0..group {
            let xg = &x[(n * in_c + gi * cg) * plane..][..cg * plane];
            let input: &[f32] = if fold {
                #[cfg(target_arch = "x86_64")]
                direct::amx_planes_folded(xg, cg, g, &mut padded)
            } else if amx {
                amx_over_pool(xg, cg, g, split, &mut padded, par)
            } else if bf16 {
                direct::pair_planes(xg, cg, g, &mut padded);
                &padded
            } else if src.copy {
                pad_over_pool(xg, cg, g, src, split, &mut padded, par)
            } else {
                xg
            };
            let block = (n * out_c + gi * mg) * positions..(n * out_c + (gi + 1) * mg) * positions;
            let direct = direct::Direct {
                x: input,
                src,
                cg: cgd,
                g: gd,
                w: &packed[gi * group_w..][..group_w],
                bias: bias.map(|b| &b[gi * mg..][..mg]),
                epilogue: nn::Epilogue {
                    bias: nn::Bias::None,
                    residual: epilogue.residual.map(|r| &r[block.clone()]),
                    ..*epilogue
                },
            };
            let yg = &mut y[block];
            let run = |channels: std::ops::Range<usize>, part: &mut [f32], carry: &mut Vec<f32>| {
                if amx {
                    direct.run_amx(channels, part, carry)
                } else if bf16 {
                    direct.run_bf16(channels, part, carry)
                } else {
                    direct.run(channels, part, carry)
                }
            };
            if !split {
                unsplit(par, |s| run(0..mg, yg, &mut s.col));
            } else if by_rows {
                parallel::by_rows(yg, (g.out[1], g.out[2]), row_tasks, par, &|rows, parts, s| {
                    direct.run_rows(0..mg, rows, parts, &mut s.col)
                });
            } else {
                par.for_each_task(yg, per_task * positions, &|start, part, s| {
                    let first = start / positions;
                    run(first..first + part.len() / positions, part, &mut s.col);
                });
            }
        }
    }
}

/// Whether this CPU runs bf16 products on AMX tiles.
pub(crate) fn amx_tiles() -> bool {
    nn::bf16_tiles()
}

/// Whether a bf16 stem (`cg` < 16 input channels) runs on the AMX direct kernel with its
/// kernel's columns folded into its channels (`direct::folds`).
pub(crate) fn amx_fold(g: &conv::Window3d, cg: usize, mg: usize, group: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        direct::folds(g, cg, mg, group)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (g, cg, mg, group);
        false
    }
}

/// Whether a bf16 convolution of `cg` input and `mg` output channels a group runs on the
/// AMX direct kernel (`direct::fits_amx`: stride 1, 16 channels or more each way).
pub(crate) fn amx_conv(g: &conv::Window3d, cg: usize, mg: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        direct::fits_amx(g, cg, mg)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (g, cg, mg);
        false
    }
}

/// The least floats of a split convolution's padded copy that are padded over the pool.
/// At two threads, from 2^16 floats down to 2^12 (YOLO's copies of 14 K to 56 K floats
/// now split too), best of alternated processes, ms: YOLO-tiny 0.93-0.94 -> 0.89,
/// ResNet-18 20.3 -> 19.5, MobileNetV2 4.78 -> 4.75; 2^10 measured as 2^12. A copy under
/// 2^13 floats (32 KB, an L1's worth) takes about as long as a ParallelFor's round trip,
/// so it stays on the calling thread.
const PAD_OVER_POOL_MIN: usize = 1 << 13;

/// The padded copy of a direct convolution's `cg` input planes `x` in `padded`, its rows
/// padded over the pool when the convolution is `split` and the copy is not small
/// ([`PAD_OVER_POOL_MIN`]): that copy ran on the calling thread ahead of every task, its
/// input and output out of cache (in the YOLO model at two threads, 186 of its 1030 us
/// were such heads).
fn pad_over_pool<'p>(
    x: &[f32],
    cg: usize,
    g: &conv::Window3d,
    src: direct::Source,
    split: bool,
    padded: &'p mut Vec<f32>,
    par: &dyn Parallel,
) -> &'p [f32] {
    let len = direct::padded_len(cg, src);
    if !split || len < PAD_OVER_POOL_MIN {
        direct::pad_planes(x, cg, g, src, padded);
        return padded;
    }
    if padded.len() < len {
        padded.resize(len, 0.0);
    }
    let per_task = (cg * src.rows).div_ceil(cores()) * src.cols;
    par.for_each_chunk(&mut padded[..len], per_task, &|start, part| {
        let first = start / src.cols;
        direct::pad_rows(x, g, src, first..first + part.len() / src.cols, part)
    });
    &padded[..len]
}

/// The AMX kernel's rounded input (`direct::amx_planes`) of a convolution's `cg` input
/// planes `x` in `padded`, its pairs of channels rounded over the pool when the
/// convolution is `split` and the input is not small ([`PAD_OVER_POOL_MIN`]): on the
/// calling thread it ran ahead of every task (a 3x3 convolution of 128 channels at
/// stride 2 on 56x56: 170 us of rounding against 380 us of tiles).
#[cfg(target_arch = "x86_64")]
fn amx_over_pool<'p>(
    x: &[f32],
    cg: usize,
    g: &conv::Window3d,
    split: bool,
    padded: &'p mut Vec<f32>,
    par: &dyn Parallel,
) -> &'p [f32] {
    let (len, pair, pairs) = (direct::amx_planes_len(cg, g), direct::amx_pair_len(g), cg.div_ceil(2));
    if !split || pairs < 2 || len < PAD_OVER_POOL_MIN {
        return direct::amx_planes(x, cg, g, padded);
    }
    // From a 64-byte boundary, as `amx_planes` puts them.
    let planes = rivet_kernels::lines::aligned_in(padded, len);
    let (real, rest) = planes.split_at_mut(pairs * pair);
    rest.fill(0.0);
    let per_task = pairs.div_ceil(cores()) * pair;
    par.for_each_chunk(real, per_task, &|start, part| direct::amx_pairs(x, cg, g, start / pair, part));
    planes
}

#[cfg(not(target_arch = "x86_64"))]
fn amx_over_pool<'p>(
    _: &[f32],
    _: usize,
    _: &conv::Window3d,
    _: bool,
    _: &'p mut Vec<f32>,
    _: &dyn Parallel,
) -> &'p [f32] {
    unreachable!("AMX tiles exist only on x86-64")
}
