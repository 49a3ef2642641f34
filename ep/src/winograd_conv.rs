//! 3x3 convolutions of stride 1 on the Winograd kernel (`rivet_kernels::winograd`), split
//! over the Run's pool by tile rows or by channels.

use rivet_kernels::{conv, nn, winograd};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use crate::parallel::{
    by_rows_of, cores, lock, packed_once_as, Parallel, BY_ROWS_MAX_CHANNELS, BY_ROWS_MAX_TASKS, MAX_TASKS,
};

/// The least multiply-adds of a task's products in one block worth a split (about 20 us
/// at one core's speed): each block's split is a ParallelFor of its own. At 2^23 the
/// smaller convolutions of DenseNet, Inception and SqueezeNet ran unsplit, on one core
/// at two threads: 2^21 took those models from 1.36, 1.32 and 2.19x ORT's time to 1.28,
/// 1.28 and 1.89x there, with one thread's unchanged within noise.
const TASK_MIN_MACS: usize = 1 << 21;

/// A convolution of one group on the Winograd kernel, its constant filters transformed on
/// the first Run (entry `key` of the Run's cache). Unsplit, it runs whole on task 0's
/// scratch. Split, a plane of many tiles goes by tile rows ([`by_tile_rows`]); otherwise
/// each block of tile rows is transformed once (split by input channels when large) and
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
    // (Transformed again for another tile size when the input's size changes: review found
    // a 56x56 Run's F(4x4) filters read for a 200x4 input, whose rows have one tile of 4.)
    let side = winograd::side(g, in_c, out_c);
    let filters =
        packed_once_as(&mut cache, key, w, side, |f| winograd::transform_filters_side(w, out_c, in_c, g, side, f));
    if !filters.usable() {
        return false;
    }
    let [th, _] = winograd::tiles(g, filters.side());
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
        // A split by output channels has every task read the block's whole transformed
        // input for its share of the products: with few output channels (or shares cut
        // unevenly by the filters' strips) that read is most of a task's work, and the
        // convolution splits by tile rows from fewer tiles.
        let per_task = out_c.div_ceil(cores()).next_multiple_of(run.strip_rows());
        let few = out_c <= FEW_CHANNELS || 4 * per_task * cores() > 5 * out_c;
        let least = if few { ROWS_TASK_MIN_TILES_FEW } else { ROWS_TASK_MIN_TILES };
        match by_tile_rows(&run, yn, par, least) {
            Some(true) => continue,
            Some(false) => return false,
            None => {}
        }
        let block_tiles = run.block(0).len() * run.tiles()[1];
        if per_task >= out_c || per_task * in_c * run.points() * block_tiles < TASK_MIN_MACS {
            if !run.run(0..th, yn, &mut par.scratch().task(0).winograd) {
                return false;
            }
            continue;
        }
        let mut v = lock(&par.scratch().conv_parts);
        let mut r0 = 0;
        while r0 < th {
            let tiles = run.block(r0);
            if !input(&run, tiles.clone(), &mut v, par) {
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

/// The least multiply-adds of a task's products in a split by tile rows: half of
/// [`TASK_MIN_MACS`], since each task also transforms its own rows' input and output,
/// which at few channels cost more than the products (YOLO's 32->32 channels on 40x40,
/// 3.7 M multiply-adds in tiles of 4x4, one thread on AMD Zen 4: 256 us of which the
/// products at peak would take 65) and which a split by channels repeats or serialises.
/// At 2^21 that convolution ran whole on one core at two threads.
const ROWS_TASK_MIN_MACS: usize = 1 << 20;

/// The least tiles (of 2x2 outputs; a tile of 4x4 counts four) a task of a split by tile
/// rows takes: fewer leave its products' panels narrow, and a split by output channels
/// does better.
const ROWS_TASK_MIN_TILES: usize = 192;
/// [`ROWS_TASK_MIN_TILES`] for a convolution of at most [`FEW_CHANNELS`] output channels
/// (or whose split by them would be uneven). Two threads, 128->32 on 28x28 (98 tiles a
/// task): 327-419 us split by channels, 221 by tile rows (one thread: 422-433 and 422-428);
/// 64->64 on 28x28: 550 and 291-295 (one thread: 358-361 and 390-392). With 128 output
/// channels one thread paid 9-15% for it (128->128 on 28x28, 32->128 on 27x27).
const ROWS_TASK_MIN_TILES_FEW: usize = 96;
const FEW_CHANNELS: usize = 64;

/// One image's convolution split over the pool by tile rows, where the plane has enough
/// tiles for it (`least` a task): each task transforms its own rows' input, multiplies
/// it by every filter and writes its rows of every output channel. With at most
/// [`BY_ROWS_MAX_CHANNELS`] output channels it writes them in place (`by_rows_of`);
/// otherwise into its own scratch, the parts then copied into `y`, split by channels. No
/// task reads what another wrote, where a split by output channels has every task read
/// the whole transformed input of each block. Returns None, doing nothing, where it does
/// not split so; false (`y` then partly written) if an input is out of range. Gives the
/// bits of the whole.
fn by_tile_rows(run: &winograd::Winograd<'_>, y: &mut [f32], par: &dyn Parallel, least: usize) -> Option<bool> {
    let [th, tw] = run.tiles();
    let (cg, mg) = (run.input_channels(), y.len() / run.g.positions().max(1));
    let macs = th * tw * cg * mg * run.points();
    // (`least` counts tiles of 2x2: a tile of 4x4 holds four times the outputs.)
    let least = (least * 4 / (run.side() * run.side())).max(1);
    let tasks = cores().min(th * tw / least).min(th).min(macs / ROWS_TASK_MIN_MACS);
    if tasks < 2 {
        return None;
    }
    let [_, out_h, out_w] = run.g.out;
    let (per, positions) = (th.div_ceil(tasks), run.g.positions());
    let tasks = th.div_ceil(per);
    let side = run.side();
    let in_range = AtomicBool::new(true);
    if mg <= BY_ROWS_MAX_CHANNELS && tasks <= BY_ROWS_MAX_TASKS {
        // Each task writes its rows of every channel in place: no copy, which at one
        // thread (the tasks in turn) cost the split more than it gained.
        by_rows_of(y, (out_h, out_w), side * per, par, &|rows, parts, s| {
            let tiles = rows.start / side..rows.end.div_ceil(side);
            if !run.run_rows(tiles, parts, &mut s.winograd) {
                in_range.store(false, Ordering::Relaxed);
            }
        });
        return Some(in_range.into_inner());
    }
    let rows = |i: usize| side * i * per..(side * (i + 1) * per).min(out_h);
    par.for_each_index(tasks, &|i, s| {
        let len = y.len() / out_h * rows(i).len();
        if s.out.len() < len {
            s.out.resize(len, 0.0);
        }
        if !run.run(i * per..((i + 1) * per).min(th), &mut s.out[..len], &mut s.winograd) {
            in_range.store(false, Ordering::Relaxed);
        }
    });
    if !in_range.into_inner() {
        return Some(false);
    }
    let parts = par.scratch().task_outs(tasks);
    let channels = y.len() / positions;
    par.for_each_chunk(y, channels.div_ceil(cores()) * positions, &|start, planes| {
        for (k, plane) in (start / positions..).zip(planes.chunks_exact_mut(positions)) {
            for i in 0..tasks {
                let len = rows(i).len() * out_w;
                let src = &parts.get(i)[k * len..][..len];
                plane[rows(i).start * out_w..][..len].copy_from_slice(src);
            }
        }
    });
    Some(true)
}

/// The least transformed values a task of a split input transform writes (about 10 us
/// at one core's speed): a block's transform below twice this runs on the calling thread.
const TASK_MIN_VALUES: usize = 1 << 16;

/// The transformed input of the tile rows `block` into `v`, split over the pool by input
/// channels when it is large: each task transforms its channels into its own rows of `v`
/// (the same values as whole). Returns false if an input the block reads is out of range.
fn input(run: &winograd::Winograd<'_>, block: std::ops::Range<usize>, v: &mut Vec<f32>, par: &dyn Parallel) -> bool {
    let cg = run.input_channels();
    let values = run.points() * cg * block.len() * run.tiles()[1];
    let tasks = cores().min(values / TASK_MIN_VALUES).min(cg);
    if tasks < 2 {
        return run.input(block, v, &mut par.scratch().task(0).winograd.pad);
    }
    let per = cg.div_ceil(tasks);
    let mut parts: [Option<winograd::InputPart<'_>>; MAX_TASKS] = [const { None }; MAX_TASKS];
    for (slot, part) in parts.iter_mut().zip(run.input_parts(block.clone(), v, per)) {
        *slot = Some(part);
    }
    let (parts, in_range) = (Mutex::new(parts), AtomicBool::new(true));
    par.for_each_index(cg.div_ceil(per), &|i, s| {
        let part = lock(&parts)[i].take().expect("each part taken once");
        let chans = i * per..((i + 1) * per).min(cg);
        if !run.input_part(block.clone(), chans, part, &mut s.winograd.pad) {
            in_range.store(false, Ordering::Relaxed);
        }
    });
    in_range.into_inner()
}
