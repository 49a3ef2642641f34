//! Matrix products and convolutions, split over the Run's pool.
//!
//! A split is decided by the product's shape (and whether B comes packed) alone, never by
//! what the pool is seen to do, so a plan makes the same calls to ORT on every Run and on
//! every machine load. It costs little when the tasks run in turn
//! (`intra_op_num_threads=1`):
//! - a product of many rows is split by rows, whole tiles each, with its `op(B)` packed
//!   once and shared by the tasks (each packs only its own rows of A, as the whole
//!   product would);
//! - so is a product of few rows (64 tokens, say) by a packed B that stays in L2 when
//!   whole tiles (of the tile B was packed for) part its rows nearly evenly among the
//!   tasks (each task reads B from L2);
//! - any other product of few rows is split by columns cut on the tile's panels:
//!   each task reads A in place (packed once and shared only where the kernel would pack
//!   it), takes its columns of B (packed by the task, or from a constant B's panels) and
//!   computes its own block of C (started from C's, for beta), which a second split
//!   over C's rows then copies into place;
//! - so is a product of more rows whose B (past L2) outweighs twice what that split
//!   moves besides (A read by each task, C's blocks put in place): by rows, each task
//!   reads all of B, so a GPT-2 projection of 128 tokens read its 9 MB of weights twice a
//!   Run on one thread;
//! - one row (a decode step's projection) by a packed constant or a transposed B is split
//!   by columns from fewer multiply-adds (it is bound by reading B), each task writing its
//!   consecutive part of C in place.
//!
//! Every split gives the unsplit product's bits (`tests` below).

use rivet_kernels::{conv, depthwise, direct, nn, winograd};
use smallvec::SmallVec;

use std::sync::MutexGuard;

use crate::direct_conv::{self, amx_conv, amx_fold, amx_tiles};
use crate::parallel::{cores, lock, packed_once, packed_once_as, Packed, Parallel, TaskScratch, PARALLEL_MIN_LEN};
use crate::pointwise_conv;

/// Products of at least this many multiply-adds are split by rows over the thread pool.
const PARALLEL_MIN_MACS: usize = 1 << 18;
/// The least multiply-adds of a direct convolution split over the pool (about 20 us at
/// one core's speed): its tasks write their channels in place, so a split costs one
/// ParallelFor. A grouped one on the GEMM split by groups writes in place too.
pub(crate) const DIRECT_MIN_MACS: usize = 1 << 20;
/// A product of at most this many rows (64 tokens, say) is split only from 8x as many
/// multiply-adds: its tasks are short, and a ParallelFor costs a few microseconds (one
/// row: from `VECTOR_MIN_MACS`).
const FEW_ROWS: usize = 64;
/// The least rows per task.
const MIN_ROWS_PER_TASK: usize = 16;
/// A matrix-vector product (one row: a decode step's projection) is split by columns from
/// this many multiply-adds (a 256x256 weight, 256 KiB): it is bound by reading B, and each
/// core brings its own share of the bandwidth. From 2^18 (a megabyte), Llama-tiny's
/// decode step left its 256x688 MLP products (30 us each at one thread) whole and took
/// 1.42x ORT's time at two threads; from 2^16, 0.97x (Rivet's own time 359 -> 311 us).
const VECTOR_MIN_MACS: usize = 1 << 16;

/// The least output channels a group and depth for which `bf16` runs a convolution on
/// the GEMM by bfloat16 filters: its 14-row strips and 32-column panels need both (one
/// thread, MobileNetV2's 1x1 convolutions of 24->144 channels on 56x56 gained nothing).
/// Stems keep the float direct kernel's wide tiles.
const BF16_GEMM_MIN: (usize, usize) = (48, 64);

/// Runs `f` with scratch for work that is not split (task 0's).
pub(crate) fn unsplit(par: &dyn Parallel, f: impl FnOnce(&mut TaskScratch)) {
    f(&mut par.scratch().task(0));
}

/// Runs a convolution: split over the pool by output rows when it is large enough, else
/// whole on the calling thread. `constant`: the filters never change and its `key` (the
/// step's output value) names their packed copy in the Run's scratch, made on the first
/// Run and again only if ORT hands in other filters; with its `bf16`, the products that
/// have a bfloat16 kernel (the direct one, the small 1x1 ones) multiply bfloat16
/// operands. `epilogue` (no bias of its own: `bias` is the per-channel one) is applied
/// after the bias.
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
    constant: Option<Packing>,
    epilogue: &nn::Epilogue<'_>,
) {
    let (in_c, planes) = (xs[1], xs[0] * xs[1]);
    if group == in_c && out_c == in_c && group > 1 {
        // Depthwise: one filter per channel, direct, split over the pool by planes, each
        // task applying the epilogue to its planes while they are in cache.
        let positions = g.positions();
        let tasks = cores().min(planes);
        let run = |mine: std::ops::Range<usize>, x: &[f32], y: &mut [f32], s: &mut TaskScratch| {
            let y = &mut y[..mine.len() * positions];
            depthwise::depthwise_planes(x, w, bias, mine, in_c, g, y, epilogue, &mut s.col);
        };
        if x.len() < PARALLEL_MIN_LEN || tasks < 2 || positions == 0 {
            return unsplit(par, |s| run(0..planes, x, y, s));
        }
        // Whole blocks of 16 channels a task where the channels-last kernel takes them.
        let per_task = planes.div_ceil(tasks).next_multiple_of(depthwise::split_planes(g, in_c));
        return par.for_each_task(y, per_task * positions, &|start, part, s| {
            let first = start / positions;
            run(first..first + part.len() / positions, &x[first * g.plane()..], part, s);
        });
    }
    if let Some(sub) = conv::subsampled(g) {
        // A strided 1x1 convolution read its input in place, all of it (a stride of 2 reads
        // a quarter): the direct kernel streamed the planes again for every block of
        // filters, 3.7-4.5x ORT's time on ResNet's projections. Gathered first, it is a
        // pointwise convolution on a quarter of the bytes.
        let mut sampled = lock(&par.scratch().sampled);
        let len = planes * sub.plane();
        if sampled.len() < len {
            sampled.resize(len, 0.0);
        }
        conv::subsample(x, planes, g, &mut sampled[..len]);
        let xs_sub: SmallVec<[usize; 5]> =
            xs[..2].iter().copied().chain(sub.input.into_iter().skip(3 - (xs.len() - 2))).collect();
        return convolution(&sampled[..len], w, bias, &xs_sub, out_c, group, &sub, y, par, constant, epilogue);
    }
    // A window tiled by its kernel (ViT's patches: 3->384 channels of 16x16 at stride 16
    // on 224x224) that the direct kernel does not take (strides past 2, or a shallow
    // depth) ran on the im2col GEMM, its 196 positions leaving an eighth of its last
    // 32-wide panel empty and its patches gathered into the panels every Run: 1,245 us
    // against ORT's 895 in ViT-small (one thread). Its patches gathered as channels, it
    // is a pointwise convolution of 768 channels, which takes the transposed product for
    // such planes (`pointwise_conv`). The direct kernel's (2x2 at stride 2 on many
    // channels: ConvNeXt's and U-Net's downsampling) were 10-49% slower this way (review),
    // and float32 only: with bf16 the pointwise window could take the AMX direct kernel,
    // whose filters packed for it (`taps` channels a tap) would share their cache entry
    // with the same convolution's on a padded Run (`auto_pad` SAME on another size),
    // packed for `taps` taps a channel (review).
    let patches = conv::patchified(g).filter(|_| {
        let kk = in_c * g.kernel.iter().product::<usize>();
        group == 1 && !constant.is_some_and(|c| c.bf16) && !direct::fits(g, out_c, kk)
    });
    if let Some(sub) = patches {
        let taps = g.kernel.iter().product::<usize>();
        let mut gathered = lock(&par.scratch().sampled);
        let len = planes * taps * sub.plane();
        if gathered.len() < len {
            gathered.resize(len, 0.0);
        }
        conv::gather_patches(x, planes, g, &mut gathered[..len]);
        let xs_sub: SmallVec<[usize; 5]> =
            [xs[0], in_c * taps].into_iter().chain(sub.input.into_iter().skip(3 - (xs.len() - 2))).collect();
        return convolution(&gathered[..len], w, bias, &xs_sub, out_c, 1, &sub, y, par, constant, epilogue);
    }
    let kk = xs[1] / group * g.kernel.iter().product::<usize>();
    // bf16: the direct kernel where it runs on narrow tiles (a 1x1 convolution's
    // transposed store cost it its gain there), 1x1 convolutions of small planes on the
    // bf16 GEMM (`pointwise_conv`), and the GEMM by bf16 filters where they are deep and
    // many (`BF16_GEMM_MIN`); the rest stays float32. One thread, MobileNetV2 (AMD Zen 5):
    // a stem on the bf16 GEMM took 2.35x its float wide tiles' time, 32->16 channels of
    // 1x1 on 112x112 2.4x, 16->96 1.4x; 576->96 on 14x14 on the direct kernel 1.00x.
    if let Some(packing) = constant.filter(|c| {
        let (cg, mg) = (in_c / group, out_c / group);
        c.bf16
            && (amx_conv(g, cg, mg)
                || amx_fold(g, cg, mg, group)
                || !g.is_pointwise() && !amx_tiles() && direct::fits_bf16(g, cg, mg))
    }) {
        return direct_conv::convolution(x, w, bias, xs, out_c, group, g, y, par, packing, epilogue);
    }
    if let Some(packing) = constant.filter(|c| {
        let positions = g.positions();
        group == 1
            && g.is_pointwise()
            && pointwise_conv::fits(positions, in_c, out_c)
            && (c.bf16 || !direct::widens_on_gemm(positions, in_c, out_c))
    }) {
        let shape = (xs[0], in_c, g.positions());
        return pointwise_conv::convolution(x, w, bias, shape, out_c, y, par, packing, epilogue);
    }
    let mg = out_c / group;
    let bf16 = constant.is_some_and(|c| c.bf16)
        && mg >= BF16_GEMM_MIN.0
        && kk >= BF16_GEMM_MIN.1
        && !direct::wide_tiles(g, in_c / group);
    let constant = constant.map(|c| c.key);
    if let (Some(key), true) = (constant, group == 1 && winograd::fits(g, in_c, out_c)) {
        if crate::winograd_conv::convolution(x, w, bias, xs, out_c, g, y, par, key, epilogue) {
            return;
        }
    }
    // A grouped 1x1 convolution (ShuffleNet's, 17 to 68 channels a group) runs on the
    // GEMM: one thread, 272->272 in 4 groups on 14x14 took 1.78x ORT's time on the direct
    // kernel and 1.25x there, 68->272 1.84x and 1.29x, 544->136 on 7x7 1.40x and 1.31x.
    let grouped_pointwise = group > 1 && g.is_pointwise();
    if let (Some(key), false, true) = (constant, bf16, !grouped_pointwise && direct::fits(g, mg, kk)) {
        return direct_conv::convolution(
            x,
            w,
            bias,
            xs,
            out_c,
            group,
            g,
            y,
            par,
            Packing { key, bf16: false },
            epilogue,
        );
    }
    let mut cache = constant.map(|_| lock(&par.scratch().filters));
    let filters = match (&mut cache, constant) {
        (Some(cache), Some(key)) => Some(
            packed_once_as(cache, key, w, bf16 as usize, |packed| {
                conv::pack_filters(w, xs[1], out_c, group, g, bf16, packed)
            })
            .as_slice(),
        ),
        _ => None,
    };
    let call = GemmConv { x, w, bias, xs, out_c, group, g, par, filters, epilogue };
    if group > 1 && by_groups(&call, y) {
        return;
    }
    if !conv_in_parallel(&call, y) {
        unsplit(par, |s| {
            conv::conv(x, w, bias, xs[0], xs[1], out_c, group, g, y, &mut s.col, &mut s.gemm, filters, epilogue)
        });
    }
}

/// The most strips of filters (tiles of output channels) for which a 1x1 convolution
/// split by output channels leaves its input to each task (which reads it in place on
/// AVX-512, packs it elsewhere): past them the tasks share one packing of it. One thread
/// (Intel Xeon, AVX-512), four 1x1 convolutions in a chain, us a convolution, in place ->
/// packed once: 128->128 on 56x56 865 -> 800 (ORT 630), 256->256 on 28x28 780 -> 660
/// (ORT 600), but 32->32 on 112x112 (4 strips) 304 -> 345.
const IN_PLACE_INPUT_STRIPS: usize = 4;

/// Whether a 1x1 convolution of `mg` output channels and `positions` positions on
/// `filters` packs its input once for its tasks: past [`IN_PLACE_INPUT_STRIPS`] strips,
/// with float filters packed for the tile a product of this shape takes. The filters are
/// packed on the first Run and kept; a later Run on another plane size may take the
/// other AVX-512 tile (8x48 or 14x32), and an input packed for it would not fit them
/// (found by review: 64 -> 112 channels on 16x21 then 16x20 panicked), so such a Run
/// leaves the input to the tasks.
fn packs_input(mg: usize, positions: usize, filters: &nn::PackedA) -> bool {
    let strip = filters.strip_rows();
    mg.div_ceil(strip.max(1)) > IN_PLACE_INPUT_STRIPS && nn::row_tile(mg, positions) == strip && !filters.is_bf16()
}

/// A convolution on the GEMM path, as `convolution` received it (its filters packed for
/// the GEMM where they are constant), for the ways it may be split.
#[derive(Clone, Copy)]
struct GemmConv<'a> {
    x: &'a [f32],
    w: &'a [f32],
    bias: Option<&'a [f32]>,
    xs: &'a [usize],
    out_c: usize,
    group: usize,
    g: &'a conv::Window3d,
    par: &'a dyn Parallel,
    filters: Option<&'a [nn::PackedA]>,
    epilogue: &'a nn::Epilogue<'a>,
}

/// A grouped convolution on the GEMM split over the pool by groups, each task's groups'
/// output channels written in place: at one thread the tasks run in turn, the groups'
/// products as they would unsplit. Returns false, doing nothing, when it is too small
/// to split. (ShuffleNet's grouped 1x1 convolutions, 17 to 68 channels a group, ran on
/// one core: too few channels a group for the channel split.)
fn by_groups(call: &GemmConv<'_>, y: &mut [f32]) -> bool {
    let GemmConv { x, w, bias, xs, out_c, group, g, par, filters, epilogue } = *call;
    let (in_c, cg, mg) = (xs[1], xs[1] / group, out_c / group);
    let kk = cg * g.kernel.iter().product::<usize>();
    let (positions, plane) = (g.positions(), g.plane());
    let tasks = cores().min(group);
    if tasks < 2 || positions == 0 || group * mg * positions * kk < DIRECT_MIN_MACS {
        return false;
    }
    let block = mg * positions;
    let per_task = group.div_ceil(tasks) * block;
    for (n, yn) in y.chunks_exact_mut(out_c * positions).enumerate().take(xs[0]) {
        par.for_each_task(yn, per_task, &|start, part, s| {
            let (first, count) = (start / block, part.len() / block);
            let epilogue = nn::Epilogue {
                residual: epilogue.residual.map(|r| &r[n * out_c * positions + start..][..part.len()]),
                ..*epilogue
            };
            conv::conv(
                &x[(n * in_c + first * cg) * plane..][..count * cg * plane],
                &w[first * mg * kk..][..count * mg * kk],
                bias.map(|b| &b[first * mg..][..count * mg]),
                1,
                count * cg,
                count * mg,
                count,
                g,
                part,
                &mut s.col,
                &mut s.gemm,
                filters.map(|f| &f[first..first + count]),
                &epilogue,
            )
        });
    }
    true
}

/// A large convolution split over ORT's pool by output rows, one task per core: each task
/// builds the im2col of its rows and multiplies it into its own part, which the calling
/// thread then copies into place (the parts give the bits of the whole, see
/// `conv::conv_rows`). Returns false, doing nothing, when the convolution is too small to
/// split or has one filter per group (its product is a matrix-vector one).
fn conv_in_parallel(call: &GemmConv<'_>, y: &mut [f32]) -> bool {
    let GemmConv { x, w, bias, xs, out_c, group, g, par, filters, epilogue } = *call;
    let (in_c, cg, mg) = (xs[1], xs[1] / group, out_c / group);
    let kk = cg * g.kernel.iter().product::<usize>();
    let (rows, out_w, positions, plane) = (g.out[0] * g.out[1], g.out[2], g.positions(), g.plane());
    let tasks = cores().min(rows);
    // Where the GEMM reads the input (B) of a 1x1 convolution without packing it, or packs
    // it once for all the tasks (`packs_input`), a split by output channels costs nothing
    // at one thread: from `DIRECT_MIN_MACS`, as the direct kernel's split in place.
    let in_place = g.is_pointwise() && (kk < mg || nn::reads_b_in_place()) && group == 1 && filters.is_some();
    let least = if in_place { DIRECT_MIN_MACS } else { PARALLEL_MIN_MACS * 16 };
    if tasks < 2 || mg < 2 || mg * positions * kk < least {
        return false;
    }
    if let (true, Some(filters)) = (in_place, filters) {
        // A 1x1 convolution: split by output channels, in place. Where the GEMM packs B
        // (not AVX-512) and this does not, each task packs the input for itself, so only
        // one that widens (16 -> 96 channels, say; its input smaller than its output)
        // takes this path there: one thread then pays the input's packing once more per
        // task rather than a copy of the output.
        // The split by rows below builds each task's im2col block and copies the parts.
        let rows = mg.div_ceil(tasks).next_multiple_of(filters[0].strip_rows().max(1));
        for n in 0..xs[0] {
            let block = n * out_c * positions..(n + 1) * out_c * positions;
            let epilogue = nn::Epilogue {
                bias: bias.map_or(nn::Bias::None, nn::Bias::Rows),
                residual: epilogue.residual.map(|r| &r[block.clone()]),
                ..*epilogue
            };
            let xn = &x[n * in_c * plane..][..in_c * plane];
            let product = nn::Gemm {
                packed_a: Some(&filters[0]),
                epilogue,
                ..nn::Gemm::new(mg, positions, kk, w, false, xn, false)
            };
            // The input packed once, here, for all the tasks where the strips of filters
            // are many enough to pay for it (each task would read B in place at its row
            // stride, or pack it for itself).
            let mut packed = packs_input(mg, positions, &filters[0]).then(|| lock(&par.scratch().packed_b));
            let product = match &mut packed {
                Some(packed) => {
                    nn::pack_b(packed, mg, positions, kk, xn, false);
                    nn::Gemm { packed_b: Some(&**packed), ..product }
                }
                None => product,
            };
            par.for_each_task(&mut y[block], rows * positions, &|start, part, s| {
                let r0 = start / positions;
                product.compute(&mut s.gemm, r0..r0 + part.len() / positions, 0..positions, part);
            });
        }
        return true;
    }
    let rows_per_task = rows.div_ceil(tasks);
    let part_len = mg * rows_per_task * out_w;
    let mut parts = lock(&par.scratch().conv_parts);
    if parts.len() < mg * positions {
        parts.resize(mg * positions, 0.0);
    }
    let parts = &mut parts[..mg * positions];
    for n in 0..xs[0] {
        for gi in 0..group {
            let xg = &x[(n * in_c + gi * cg) * plane..][..cg * plane];
            let wg = &w[gi * mg * kk..][..mg * kk];
            par.for_each_task(parts, part_len, &|start, part, s| {
                let r0 = start / part_len * rows_per_task;
                let r1 = r0 + part.len() / (mg * out_w);
                let packed = filters.map(|f| &f[gi]);
                conv::conv_rows(xg, wg, cg, mg, g, r0..r1, part, &mut s.col, &mut s.gemm, packed);
            });
            // Each task's [mg, its positions] into the rows of [mg, positions].
            let yg = &mut y[(n * out_c + gi * mg) * positions..][..mg * positions];
            for (t, part) in parts.chunks(part_len).enumerate() {
                let (at, len) = (t * rows_per_task * out_w, part.len() / mg);
                for (m, src) in part.chunks_exact(len).enumerate() {
                    let row = &mut yg[m * positions + at..][..len];
                    match bias {
                        Some(b) => row.iter_mut().zip(src).for_each(|(o, &v)| *o = v + b[gi * mg + m]),
                        None => row.copy_from_slice(src),
                    }
                }
            }
            let block = (n * out_c + gi * mg) * positions..(n * out_c + (gi + 1) * mg) * positions;
            let residual = epilogue.residual.map(|r| &r[block]);
            nn::Epilogue { bias: nn::Bias::None, residual, ..*epilogue }.apply_rows(yg, positions, 0..mg);
        }
    }
    true
}

/// One matrix product `c = alpha op(a) op(b) + beta c`.
#[derive(Clone, Copy)]
pub(crate) struct Product {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub alpha: f32,
    pub trans_a: bool,
    pub trans_b: bool,
    pub beta: f32,
}

/// How a product is split over the pool.
#[derive(Debug, PartialEq, Eq)]
enum Split {
    Whole,
    /// Tasks of this many rows.
    Rows(usize),
    /// Tasks of this many columns.
    Columns(usize),
}

/// The least columns per task, and their multiple (whole 32- and 16-wide panels).
const MIN_COLS_PER_TASK: usize = 64;
const COL_MULTIPLE: usize = 32;
/// Elements of B from which a product of many rows may be split by columns (past half of
/// a core's L2, 2 MiB here, B comes from L3 or memory on each read), and up to which one
/// of few rows may be split by rows.
const WIDE_B_MIN: usize = 1 << 18;

impl Product {
    /// `b_tile`: op(B) comes packed (a constant weight), for a tile of this many rows.
    fn split(&self, b_tile: Option<usize>) -> Split {
        let Product { m, n, k, .. } = *self;
        let tasks = cores();
        // Tasks of whole panels of columns, or of whole tiles of rows.
        let cols = n.div_ceil(tasks).max(MIN_COLS_PER_TASK).next_multiple_of(COL_MULTIPLE);
        let rows = |tile: usize| m.div_ceil(tasks).max(MIN_ROWS_PER_TASK).next_multiple_of(tile);
        if m <= FEW_ROWS {
            let least = if m == 1 { VECTOR_MIN_MACS } else { PARALLEL_MIN_MACS * 8 };
            if m * n * k < least {
                return Split::Whole;
            }
            // A packed B that stays in L2, and whole tiles of its rows that part them
            // nearly evenly (the last task at least three quarters of the others): by
            // rows, each task writing its rows of C in place (by columns each computes a
            // block that is then copied into C). One product of 64 rows by a 256x1024 B
            // (64x1024x256) took 227 us by rows against 256 by columns at one thread, 139
            // against 198 at two.
            if let Some(rows) = b_tile.map(rows) {
                if k * n <= WIDE_B_MIN && m > rows && m.div_ceil(rows) * rows - m < rows / 4 {
                    return Split::Rows(rows);
                }
            }
            return if n > cols { Split::Columns(cols) } else { Split::Whole };
        }
        // A B past L2 that outweighs twice what a split by columns moves besides (A read
        // by every task, C's blocks written and put in place): by columns, so that the
        // tasks read B once between them (by rows each reads all of it, in turn on a
        // one-thread session).
        let wide_b = k * n >= WIDE_B_MIN && k * n > 2 * (m * k + 2 * m * n);
        if tasks > 1 && wide_b && m * n * k >= PARALLEL_MIN_MACS && n > cols {
            return Split::Columns(cols);
        }
        // Whole tiles per task, so the parts compute no more edge rows than the whole.
        let rows = rows(nn::row_tile(m, n));
        if m * n * k >= PARALLEL_MIN_MACS && m > rows {
            Split::Rows(rows)
        } else {
            Split::Whole
        }
    }
}

/// What a product may bring besides its operands: `op(B)` already packed (a constant
/// weight, packed once) and an epilogue fused into the store of C.
#[derive(Clone, Copy, Default)]
pub(crate) struct Extras<'a> {
    pub packed_b: Option<&'a nn::PackedB>,
    pub epilogue: nn::Epilogue<'a>,
}

/// One matrix product, split over the pool by its shape (see the module docs).
pub(crate) fn product_with(p: Product, a: &[f32], b: &[f32], extras: Extras<'_>, c: &mut [f32], par: &dyn Parallel) {
    let Product { m, n, k, alpha, trans_a, trans_b, beta } = p;
    if n == 0 || m == 0 {
        return;
    }
    let Extras { packed_b, epilogue } = extras;
    let g = nn::Gemm { alpha, beta, packed_b, epilogue, ..nn::Gemm::new(m, n, k, a, trans_a, b, trans_b) };
    // A packed B fixes the tile (its panels' width), whatever m it was packed for.
    let b_tile = packed_b.map(|b| b.strip_rows().unwrap_or_else(|| nn::row_tile(m, n)));
    let rows_per_task = match p.split(b_tile) {
        Split::Whole => return unsplit(par, |s| g.compute(&mut s.gemm, 0..m, 0..n, c)),
        // Unpacked and not transposed, B's columns are strided: a split would read
        // each row of B in every task (twice the time, on one thread).
        Split::Columns(_) if m == 1 && !trans_b && packed_b.is_none() => {
            return unsplit(par, |s| g.compute(&mut s.gemm, 0..m, 0..n, c))
        }
        Split::Columns(width) if m == 1 => return vector_by_columns(&g, width, c, par),
        Split::Columns(width) => return by_columns(&g, width, c, par),
        Split::Rows(rows) => rows,
    };
    // B packed once, here, for all the row tasks (unless it came packed).
    let mut packed = packed_b.is_none().then(|| lock(&par.scratch().packed_b));
    let g = match &mut packed {
        Some(packed) => {
            nn::pack_b(packed, m, n, k, b, trans_b);
            nn::Gemm { packed_b: Some(&**packed), ..g }
        }
        None => g,
    };
    par.for_each_task(c, rows_per_task * n, &|start, rows, s| {
        let r0 = start / n;
        g.compute(&mut s.gemm, r0..r0 + rows.len() / n, 0..n, rows);
    });
}

/// A product of few rows split by columns: task `t` computes C's columns
/// `t * width..(t + 1) * width` into its own block (a copy of C's, when `beta` reads C),
/// and the calling thread copies the blocks into place. Each block is computed exactly as
/// the whole product computes those columns, so the bits are the same. `op(A)` is packed
/// once for all of them where the kernel would pack it (else read in place, as the whole
/// product reads it); a packed B is read from whole panels.
fn by_columns(g: &nn::Gemm<'_>, width: usize, c: &mut [f32], par: &dyn Parallel) {
    let (m, n) = (g.m, g.n);
    // Cuts on the panels of the tile the whole product takes, so that no full tile of it
    // becomes an edge tile of a block (an edge tile merges beta * c with another rounding).
    let nr = g.packed_b.and_then(|p| p.panel_width()).unwrap_or_else(|| nn::col_tile(m, n));
    let width = width.next_multiple_of(nr);
    let tasks = n.div_ceil(width);
    let cols = |t: usize| t * width..((t + 1) * width).min(n);
    // op(A) packed once for all the tasks, unless the kernel reads it in place.
    let mut packed = (!g.reads_a_in_place()).then(|| lock(&par.scratch().packed_a));
    let g = match &mut packed {
        Some(packed) => {
            nn::pack_a_for(packed, g);
            nn::Gemm { packed_a: Some(&**packed), ..*g }
        }
        None => *g,
    };
    let c_in: &[f32] = c;
    par.for_each_index(tasks, &|t, s| {
        let cols = cols(t);
        let w = cols.len();
        if s.out.len() < m * w {
            s.out.resize(m * w, 0.0);
        }
        let block = &mut s.out[..m * w];
        if g.beta != 0.0 {
            for (row, dst) in c_in.chunks_exact(n).zip(block.chunks_exact_mut(w)) {
                dst.copy_from_slice(&row[cols.clone()]);
            }
        }
        g.compute(&mut s.gemm, 0..m, cols, block);
    });
    // The blocks put in place by rows of C, split over the pool when C is large (a
    // 128 x 3072 product's copy took 5% of its time at two threads on one).
    let blocks = par.scratch().task_outs(tasks);
    let rows_per_task = if m * n >= PARALLEL_MIN_LEN { m.div_ceil(cores()) } else { m };
    par.for_each_chunk(c, rows_per_task * n, &|start, part| {
        let r0 = start / n;
        for (r, row) in part.chunks_exact_mut(n).enumerate() {
            for t in 0..tasks {
                let cols = cols(t);
                let w = cols.len();
                row[cols].copy_from_slice(&blocks.get(t)[(r0 + r) * w..][..w]);
            }
        }
    });
}

/// A matrix-vector product (`m == 1`) split by columns: C's columns are consecutive, so
/// each task computes its part of C in place, from whole panels of a packed B (or from
/// B's rows, stored transposed), with the whole product's bits.
fn vector_by_columns(g: &nn::Gemm<'_>, width: usize, c: &mut [f32], par: &dyn Parallel) {
    let width = g.packed_b.and_then(|p| p.panel_width()).map_or(width, |nr| width.next_multiple_of(nr));
    par.for_each_task(c, width, &|start, part, s| g.compute(&mut s.gemm, 0..1, start..start + part.len(), part));
}

/// The constant `op(B)` of the step whose output is `key`, packed for an m×n×k product on
/// the first Run (and again only if ORT hands in another tensor): the cache, locked, with
/// that entry filled.
pub(crate) fn packed_weights<'s>(
    par: &'s dyn Parallel,
    packing: Packing,
    (m, n, k): (usize, usize, usize),
    b: &[f32],
    trans_b: bool,
) -> MutexGuard<'s, Vec<Packed<nn::PackedB>>> {
    let mut cache = lock(&par.scratch().weights);
    packed_once(&mut cache, packing.key, b, |packed| {
        // For the float kernels unless bf16 was asked for and `pack_b_bf16` takes this B.
        if !(packing.bf16 && nn::pack_b_bf16(packed, n, k, b, trans_b)) {
            nn::pack_b(packed, m, n, k, b, trans_b);
        }
    });
    cache
}

/// How a constant B is packed: the cache entry (the step's output value) and whether for
/// the bf16 kernel.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Packing {
    pub key: usize,
    pub bf16: bool,
}

/// How a MatMul step multiplies: `alpha · A · op(B)`, op(B) the last two axes of B
/// swapped when `trans_b` (B stored `[.., n, k]`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatMul {
    pub alpha: f32,
    pub trans_b: bool,
}

/// numpy matmul over broadcast batch axes: one product over all of A's rows when B is a
/// matrix (the rows of A's matrices follow one another, and so do C's), else one per
/// output matrix. `extras.packed_b` is op(B) packed (only for a matrix B); the epilogue's
/// residual is the whole output's.
#[allow(clippy::too_many_arguments)]
pub(crate) fn matmul(
    a: &[f32],
    sa: &[usize],
    b: &[f32],
    sb: &[usize],
    op: MatMul,
    extras: Extras<'_>,
    dst: &mut [f32],
    par: &dyn Parallel,
) {
    let MatMul { alpha, trans_b } = op;
    debug_assert!(!trans_b || sb.len() >= 2, "only a matrix B is stored transposed");
    let (m, k) = if sa.len() == 1 { (1, sa[0]) } else { (sa[sa.len() - 2], sa[sa.len() - 1]) };
    let n = match (sb.len(), trans_b) {
        (1, _) => 1,
        (r, false) => sb[r - 1],
        (r, true) => sb[r - 2],
    };
    if sb.len() == 2 && sa.len() > 2 {
        let rows = sa[..sa.len() - 1].iter().product();
        let p = Product { m: rows, n, k, alpha, trans_a: false, trans_b, beta: 0.0 };
        return product_with(p, a, b, extras, dst, par);
    }
    assert!(extras.packed_b.is_none() || sb.len() == 2, "a packed B is one matrix");
    let batch_a = &sa[..sa.len().saturating_sub(2)];
    let batch_b = &sb[..sb.len().saturating_sub(2)];
    let rank = batch_a.len().max(batch_b.len());
    let pad = |s: &[usize]| -> SmallVec<[usize; 8]> {
        let mut p: SmallVec<[usize; 8]> = SmallVec::from_elem(1, rank - s.len());
        p.extend_from_slice(s);
        p
    };
    let (pa, pb) = (pad(batch_a), pad(batch_b));
    let out_batch: SmallVec<[usize; 8]> = pa.iter().zip(&pb).map(|(&x, &y)| x.max(y)).collect();
    let count: usize = out_batch.iter().product();
    let (mn, tasks) = ((m * n).max(1), cores().min(count));
    // Matrix `i` of the output: its A and B (a broadcast batch axis reads index 0).
    let operands = |i: usize| {
        let mut digits = [0usize; 8];
        let mut rest = i;
        for d in (0..rank).rev() {
            digits[d] = rest % out_batch[d];
            rest /= out_batch[d];
        }
        let (mut oa, mut ob) = (0usize, 0usize);
        for d in 0..rank {
            oa = oa * pa[d] + if pa[d] == 1 { 0 } else { digits[d] };
            ob = ob * pb[d] + if pb[d] == 1 { 0 } else { digits[d] };
        }
        (&a[oa * m * k..(oa + 1) * m * k], &b[ob * k * n..(ob + 1) * k * n])
    };
    let residual = |i: usize| extras.epilogue.residual.map(|r| &r[i * mn..][..mn]);
    let even = count.is_multiple_of(tasks.max(1)) || count >= 2 * tasks;
    if tasks < 2 || !even || m * n * k * count < PARALLEL_MIN_MACS {
        for (i, c) in dst.chunks_mut(mn).take(count).enumerate() {
            let p = Product { m, n, k, alpha, trans_a: false, trans_b, beta: 0.0 };
            let extras = Extras { epilogue: nn::Epilogue { residual: residual(i), ..extras.epilogue }, ..extras };
            let (a, b) = operands(i);
            product_with(p, a, b, extras, c, par);
        }
        return;
    }
    // Whole matrices per task (attention's heads), each computed as it is alone on one
    // thread: one round of the pool for all of them, where splitting each small product
    // takes a round per matrix. In turn, the tasks cost nothing more; the bits are the
    // same (a split product gives the whole one's).
    let per_task = count.div_ceil(tasks);
    par.for_each_task(&mut dst[..count * mn], per_task * mn, &|start, part, s| {
        for (j, c) in part.chunks_mut(mn).enumerate() {
            let i = start / mn + j;
            let (a, b) = operands(i);
            let epilogue = nn::Epilogue { residual: residual(i), ..extras.epilogue };
            let g = nn::Gemm { alpha, epilogue, ..nn::Gemm::new(m, n, k, a, false, b, trans_b) };
            g.compute(&mut s.gemm, 0..m, 0..n, c);
        }
    });
}

#[cfg(test)]
#[path = "products_tests.rs"]
mod tests;
