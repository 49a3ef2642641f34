//! Matrix products and convolutions, split over the Run's pool.
//!
//! A split is decided by the product's shape alone, never by what the pool is seen to do,
//! so a plan makes the same calls to ORT on every Run and on every machine load. It costs
//! little when the tasks run in turn (`intra_op_num_threads=1`):
//! - a product of many rows is split by rows, whole tiles each, with its `op(B)` packed
//!   once and shared by the tasks (each packs only its own rows of A, as the whole
//!   product would);
//! - a product of few rows (64 tokens, say) is split by columns, with its (small) `op(A)`
//!   packed once and shared: each task packs only its columns of B (a shared packed B,
//!   large and read from another core's cache, was slow) and computes its own block of C
//!   (started from C's, for beta), which the calling thread then copies into place.
//!
//! Every split gives the unsplit product's bits (`tests` below).

use rivet_kernels::{conv, depthwise, direct, nn, winograd};
use smallvec::SmallVec;

use std::sync::MutexGuard;

use crate::parallel::{cores, lock, packed_once, Packed, Parallel, TaskScratch, PARALLEL_MIN_LEN};

/// Products of at least this many multiply-adds are split by rows over the thread pool.
const PARALLEL_MIN_MACS: usize = 1 << 18;
/// A product of at most this many rows (64 tokens, say) is split only from 8x as many
/// multiply-adds: its tasks are short, and a ParallelFor costs a few microseconds.
const FEW_ROWS: usize = 64;
/// The least rows per task.
const MIN_ROWS_PER_TASK: usize = 16;
/// A matrix-vector product (one row: a decode step's projection) is split by columns from
/// this many multiply-adds: it is bound by reading B (a megabyte here), and each core
/// brings its own share of the memory bandwidth.
const VECTOR_MIN_MACS: usize = 1 << 18;

/// Runs `f` with scratch for work that is not split (task 0's).
fn unsplit(par: &dyn Parallel, f: impl FnOnce(&mut TaskScratch)) {
    f(&mut par.scratch().task(0));
}

/// Runs a convolution: split over the pool by output rows when it is large enough, else
/// whole on the calling thread. `constant`: the filters never change and `key` (the
/// step's output value) names their packed copy in the Run's scratch, made on the first
/// Run and again only if ORT hands in other filters. `epilogue` (no bias of its own:
/// `bias` is the per-channel one) is applied after the bias.
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
    constant: Option<usize>,
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
        let per_task = planes.div_ceil(tasks);
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
    let kk = xs[1] / group * g.kernel.iter().product::<usize>();
    if let (Some(key), true) = (constant, group == 1 && winograd::fits(g, in_c, out_c)) {
        if crate::winograd_conv::convolution(x, w, bias, xs, out_c, g, y, par, key, epilogue) {
            return;
        }
    }
    // A grouped 1x1 convolution (ShuffleNet's, 17 to 68 channels a group) runs on the
    // GEMM: one thread, 272->272 in 4 groups on 14x14 took 1.78x ORT's time on the direct
    // kernel and 1.25x there, 68->272 1.84x and 1.29x, 544->136 on 7x7 1.40x and 1.31x.
    let grouped_pointwise = group > 1 && g.is_pointwise();
    if let (Some(key), true) = (constant, !grouped_pointwise && direct::fits(g, out_c / group, kk)) {
        return direct_conv(x, w, bias, xs, out_c, group, g, y, par, key, epilogue);
    }
    let mut cache = constant.map(|_| lock(&par.scratch().filters));
    let filters = match (&mut cache, constant) {
        (Some(cache), Some(key)) => {
            Some(packed_once(cache, key, w, |packed| conv::pack_filters(w, xs[1], out_c, group, g, packed)).as_slice())
        }
        _ => None,
    };
    if !conv_in_parallel(x, w, bias, xs, out_c, group, g, y, par, filters, epilogue) {
        unsplit(par, |s| {
            conv::conv(x, w, bias, xs[0], xs[1], out_c, group, g, y, &mut s.col, &mut s.gemm, filters, epilogue)
        });
    }
}

/// A convolution on the direct kernel (`rivet_kernels::direct`), its constant filters
/// packed on the first Run (entry `key` of the Run's cache). Each group's output channels
/// are split over the pool in whole 16-channel blocks, every task writing its own rows of
/// the output in place: at one thread the tasks run in turn and cost nothing (no copy, no
/// packing again), and every split gives the whole convolution's bits.
#[allow(clippy::too_many_arguments)]
fn direct_conv(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    xs: &[usize],
    out_c: usize,
    group: usize,
    g: &conv::Window3d,
    y: &mut [f32],
    par: &dyn Parallel,
    key: usize,
    epilogue: &nn::Epilogue<'_>,
) {
    let (in_c, cg, mg) = (xs[1], xs[1] / group, out_c / group);
    let kk = cg * g.kernel.iter().product::<usize>();
    let (positions, plane) = (g.positions(), g.plane());
    let mut cache = lock(&par.scratch().direct);
    let packed = packed_once(&mut cache, key, w, |p| direct::pack_filters(w, out_c, group, kk, p));
    let src = direct::source(g);
    let mut padded = lock(&par.scratch().conv_parts);
    let blocks = mg.div_ceil(direct::BLOCK);
    let tasks = cores().min(blocks);
    let per_task = blocks.div_ceil(tasks.max(1)) * direct::BLOCK;
    let group_w = blocks * kk * direct::BLOCK;
    for n in 0..xs[0] {
        for gi in 0..group {
            let xg = &x[(n * in_c + gi * cg) * plane..][..cg * plane];
            let input: &[f32] = if src.copy {
                direct::pad_planes(xg, cg, g, src, &mut padded);
                &padded
            } else {
                xg
            };
            let block = (n * out_c + gi * mg) * positions..(n * out_c + (gi + 1) * mg) * positions;
            let run = direct::Direct {
                x: input,
                src,
                cg,
                g,
                w: &packed[gi * group_w..][..group_w],
                bias: bias.map(|b| &b[gi * mg..][..mg]),
                epilogue: nn::Epilogue {
                    bias: nn::Bias::None,
                    residual: epilogue.residual.map(|r| &r[block.clone()]),
                    ..*epilogue
                },
            };
            let yg = &mut y[block];
            if tasks < 2 || mg * positions * kk < PARALLEL_MIN_MACS * 16 {
                unsplit(par, |s| run.run(0..mg, yg, &mut s.col));
            } else {
                par.for_each_task(yg, per_task * positions, &|start, part, s| {
                    let first = start / positions;
                    run.run(first..first + part.len() / positions, part, &mut s.col);
                });
            }
        }
    }
}

/// A large convolution split over ORT's pool by output rows, one task per core: each task
/// builds the im2col of its rows and multiplies it into its own part, which the calling
/// thread then copies into place (the parts give the bits of the whole, see
/// `conv::conv_rows`). Returns false, doing nothing, when the convolution is too small to
/// split or has one filter per group (its product is a matrix-vector one).
#[allow(clippy::too_many_arguments)]
fn conv_in_parallel(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    xs: &[usize],
    out_c: usize,
    group: usize,
    g: &conv::Window3d,
    y: &mut [f32],
    par: &dyn Parallel,
    filters: Option<&[nn::PackedA]>,
    epilogue: &nn::Epilogue<'_>,
) -> bool {
    let (in_c, cg, mg) = (xs[1], xs[1] / group, out_c / group);
    let kk = cg * g.kernel.iter().product::<usize>();
    let (rows, out_w, positions, plane) = (g.out[0] * g.out[1], g.out[2], g.positions(), g.plane());
    let tasks = cores().min(rows);
    if tasks < 2 || mg < 2 || mg * positions * kk < PARALLEL_MIN_MACS * 16 {
        return false;
    }
    // Where the GEMM reads the input (B) of a 1x1 convolution without packing it, a split
    // by output channels costs nothing at one thread.
    if let (true, 1, Some(filters)) = (g.is_pointwise() && (kk < mg || nn::reads_b_in_place()), group, filters) {
        // A 1x1 convolution: split by output channels, in place. Where B is packed, each
        // task packs the input for itself, so only one that widens (16 -> 96 channels,
        // say; its input smaller than its output) takes this path there: one thread then
        // pays the input's packing once more per task rather than a copy of the output.
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

impl Product {
    fn split(&self) -> Split {
        let Product { m, n, k, .. } = *self;
        let tasks = cores();
        if m <= FEW_ROWS {
            let cols = n.div_ceil(tasks).max(MIN_COLS_PER_TASK).next_multiple_of(COL_MULTIPLE);
            let least = if m == 1 { VECTOR_MIN_MACS } else { PARALLEL_MIN_MACS * 8 };
            return if m * n * k >= least && n > cols { Split::Columns(cols) } else { Split::Whole };
        }
        // Whole tiles per task, so the parts compute no more edge rows than the whole.
        let rows = m.div_ceil(tasks).max(MIN_ROWS_PER_TASK).next_multiple_of(nn::row_tile(m, n));
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
    let rows_per_task = match p.split() {
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
    let width = g.packed_b.and_then(|p| p.panel_width()).map_or(width, |nr| width.next_multiple_of(nr));
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
    for t in 0..tasks {
        let (cols, s) = (cols(t), par.scratch().task(t));
        let w = cols.len();
        for (row, src) in c.chunks_exact_mut(n).zip(s.out[..m * w].chunks_exact(w)) {
            row[cols.clone()].copy_from_slice(src);
        }
    }
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
    key: usize,
    (m, n, k): (usize, usize, usize),
    b: &[f32],
    trans_b: bool,
) -> MutexGuard<'s, Vec<Packed<nn::PackedB>>> {
    let mut cache = lock(&par.scratch().weights);
    packed_once(&mut cache, key, b, |packed| nn::pack_b(packed, m, n, k, b, trans_b));
    cache
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
mod tests {
    use super::*;
    use crate::parallel::Serial;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                ((s >> 40) as f32 / (1u64 << 23) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn split_products_give_the_unsplit_bits_with_and_without_beta() {
        let mut splits = [0; 3];
        for (m, n, k) in
            [(64, 256, 512), (33, 300, 200), (2, 1000, 300), (200, 96, 160), (129, 1, 2000), (1, 2000, 300)]
        {
            for (trans_a, trans_b) in [(false, false), (true, false), (false, true), (true, true)] {
                for (alpha, beta) in [(1.0, 0.0), (1.0, 1.0), (0.7, 0.3)] {
                    let p = Product { m, n, k, alpha, trans_a, trans_b, beta };
                    splits[match p.split() {
                        Split::Whole => 0,
                        Split::Rows(_) => 1,
                        Split::Columns(_) => 2,
                    }] += 1;
                    let (a, b, c0) = (values(m * k, 1), values(k * n, 2), values(m * n, 3));
                    let mut want = c0.clone();
                    nn::gemm_with(
                        &mut nn::GemmScratch::new(),
                        m,
                        n,
                        k,
                        alpha,
                        &a,
                        trans_a,
                        &b,
                        trans_b,
                        beta,
                        &mut want,
                    );
                    let mut got = c0.clone();
                    product_with(p, &a, &b, Extras::default(), &mut got, &Serial::default());
                    let same = got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                    assert!(same, "{m}x{n}x{k} ta={trans_a} tb={trans_b} beta={beta}: {:?}", p.split());
                }
            }
        }
        // On a one-core machine nothing splits; elsewhere both splits are exercised.
        if cores() > 1 {
            assert!(splits[1] > 0 && splits[2] > 0, "{splits:?}");
        }
    }

    #[test]
    fn packed_weights_and_epilogues_give_the_whole_products_bits_in_every_split() {
        let mut splits = [0; 3];
        for (m, n, k) in [(64, 256, 512), (33, 300, 200), (200, 96, 160), (2, 1000, 300), (1, 2000, 300)] {
            let (a, b) = (values(m * k, 1), values(k * n, 2));
            let (bias, res) = (values(n, 4), values(m * n, 5));
            let epilogue = nn::Epilogue {
                scale: Some(nn::Scale::Mul(0.3)),
                bias: nn::Bias::Cols(&bias),
                act: Some(nn::Activation::Unary(rivet_kernels::UnaryOp::Gelu)),
                residual: Some(&res),
                after: None,
            };
            let p = Product { m, n, k, alpha: 1.0, trans_a: false, trans_b: false, beta: 0.0 };
            splits[match p.split() {
                Split::Whole => 0,
                Split::Rows(_) => 1,
                Split::Columns(_) => 2,
            }] += 1;
            let mut want = vec![0.0; m * n];
            let g = nn::Gemm { epilogue, ..nn::Gemm::new(m, n, k, &a, false, &b, false) };
            g.compute(&mut nn::GemmScratch::new(), 0..m, 0..n, &mut want);
            // B packed for another m, as a constant weight packed on an earlier Run, in
            // either panel width (64 x 144 takes AVX-512's 48-wide tile).
            let (mut packed, mut wide) = (nn::PackedB::new(), nn::PackedB::new());
            nn::pack_b(&mut packed, m + 40, n, k, &b, false);
            nn::pack_b(&mut wide, 64, 144.max(n), k, &values(k * 144.max(n), 9), false);
            nn::pack_b(&mut wide, 64, n, k, &b, false);
            for packed_b in [None, Some(&packed), Some(&wide)] {
                let mut got = vec![f32::NAN; m * n];
                product_with(p, &a, &b, Extras { packed_b, epilogue }, &mut got, &Serial::default());
                let same = got.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{m}x{n}x{k} packed B {}: {:?}", packed_b.is_some(), p.split());
            }
        }
        if cores() > 1 {
            assert!(splits[1] > 0 && splits[2] > 0, "{splits:?}");
        }
    }

    /// A convolution as the plan runs it (split over the pool by its shape; `Serial` runs
    /// the tasks in turn, as a one-thread session does) against the kernels' unsplit
    /// call for its path: the same bits, on the direct kernel, on the GEMM split by output
    /// channels (a widening 1x1) and on the GEMM split by rows; with batches and groups;
    /// on the first Run (packing the filters) and on the second (reading them packed).
    #[test]
    fn split_convolutions_give_the_unsplit_bits_on_every_path() {
        use conv::{window_geometry, Padding};
        // (batch, in_c, out_c, group, size, kernel, stride, pad)
        for (batch, in_c, out_c, group, hw, k, s, p) in [
            (1, 64, 96, 1, 20, 3, 1, 1),
            (2, 64, 128, 1, 40, 3, 1, 1),
            (2, 48, 80, 1, 21, 3, 2, 1),
            (2, 64, 96, 2, 20, 3, 1, 1),
            (2, 16, 96, 1, 56, 1, 1, 0),
            (1, 96, 24, 1, 56, 1, 1, 0),
            (1, 160, 320, 1, 7, 1, 1, 0),
        ] {
            let pads = Padding::Explicit([0, p, p, 0, p, p]);
            let (g, _) = window_geometry([1, hw, hw], [1, k, k], [1, s, s], [1; 3], pads, false).unwrap();
            let (cg, mg) = (in_c / group, out_c / group);
            let (kk, positions, plane) = (cg * k * k, g.positions(), g.plane());
            let (x, w, bias) = (values(batch * in_c * plane, 1), values(out_c * kk, 2), values(out_c, 3));
            let residual = values(batch * out_c * positions, 4);
            let epilogue = nn::Epilogue {
                act: Some(nn::Activation::Unary(rivet_kernels::UnaryOp::Relu)),
                residual: Some(&residual),
                ..nn::Epilogue::default()
            };
            let mut want = vec![0.0; batch * out_c * positions];
            let direct = direct::fits(&g, mg, kk);
            if group == 1 && winograd::fits(&g, in_c, out_c) {
                let mut filters = winograd::Filters::default();
                winograd::transform_filters(&w, out_c, in_c, &g, &mut filters);
                for (n, yn) in want.chunks_exact_mut(out_c * positions).enumerate() {
                    let block = n * out_c * positions..(n + 1) * out_c * positions;
                    let run = winograd::Winograd {
                        x: &x[n * in_c * plane..][..in_c * plane],
                        g: &g,
                        filters: &filters,
                        epilogue: nn::Epilogue {
                            bias: nn::Bias::Rows(&bias),
                            residual: Some(&residual[block]),
                            ..epilogue
                        },
                    };
                    assert!(run.run(0..winograd::tiles(&g)[0], yn, &mut winograd::Scratch::default()));
                }
            } else if direct {
                let mut packed = Vec::new();
                direct::pack_filters(&w, out_c, group, kk, &mut packed);
                let src = direct::source(&g);
                let group_w = packed.len() / group;
                let mut padded = Vec::new();
                for n in 0..batch {
                    for gi in 0..group {
                        let xg = &x[(n * in_c + gi * cg) * plane..][..cg * plane];
                        let input: &[f32] = if src.copy {
                            direct::pad_planes(xg, cg, &g, src, &mut padded);
                            &padded
                        } else {
                            xg
                        };
                        let block = (n * out_c + gi * mg) * positions..(n * out_c + (gi + 1) * mg) * positions;
                        let run = direct::Direct {
                            x: input,
                            src,
                            cg,
                            g: &g,
                            w: &packed[gi * group_w..][..group_w],
                            bias: Some(&bias[gi * mg..][..mg]),
                            epilogue: nn::Epilogue { residual: Some(&residual[block.clone()]), ..epilogue },
                        };
                        run.run(0..mg, &mut want[block], &mut Vec::new());
                    }
                }
            } else {
                let mut filters = Vec::new();
                conv::pack_filters(&w, in_c, out_c, group, &g, &mut filters);
                let (mut col, mut scratch) = (Vec::new(), nn::GemmScratch::new());
                let f = Some(filters.as_slice());
                conv::conv(
                    &x,
                    &w,
                    Some(&bias),
                    batch,
                    in_c,
                    out_c,
                    group,
                    &g,
                    &mut want,
                    &mut col,
                    &mut scratch,
                    f,
                    &epilogue,
                );
            }
            let xs = [batch, in_c, hw, hw];
            let par = Serial::default();
            for run in ["first", "second"] {
                let mut got = vec![f32::NAN; want.len()];
                convolution(&x, &w, Some(&bias), &xs, out_c, group, &g, &mut got, &par, Some(0), &epilogue);
                let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{batch}x{in_c}->{out_c} g{group} {hw}x{hw} k{k} s{s} direct {direct}, {run} Run");
            }
        }
    }

    #[test]
    fn a_column_split_packs_a_only_where_the_kernel_would() {
        let (m, n, k) = (64, 256, 512);
        let (a, b) = (values(m * k, 1), values(k * n, 2));
        for trans_a in [false, true] {
            let p = Product { m, n, k, alpha: 1.0, trans_a, trans_b: false, beta: 0.0 };
            if p.split() == Split::Whole {
                return; // one core: nothing splits
            }
            let par = Serial::default();
            product_with(p, &a, &b, Extras::default(), &mut vec![0.0; m * n], &par);
            let g = nn::Gemm::new(m, n, k, &a, trans_a, &b, false);
            let packed = lock(&par.scratch().packed_a).strip_rows() > 0;
            assert_eq!(packed, !g.reads_a_in_place(), "trans_a {trans_a}");
            // The x86 builds read a row-major A in place; every build packs a transposed one.
            assert!(trans_a || !packed || cfg!(not(target_arch = "x86_64")), "A packed for nothing");
        }
    }

    #[test]
    fn a_batched_matmul_by_a_matrix_is_one_product_with_the_per_matrix_bits() {
        let (batch, m, n, k) = (3, 24, 40, 50);
        let (a, b) = (values(batch * m * k, 1), values(k * n, 2));
        let mut got = vec![0.0; batch * m * n];
        let op = MatMul { alpha: 1.0, trans_b: false };
        matmul(&a, &[batch, m, k], &b, &[k, n], op, Extras::default(), &mut got, &Serial::default());
        for (i, c) in got.chunks(m * n).enumerate() {
            let mut want = vec![0.0; m * n];
            nn::gemm(m, n, k, 1.0, &a[i * m * k..][..m * k], false, &b, false, 0.0, &mut want);
            assert!(c.iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits()), "matrix {i}");
        }
    }

    /// What `fold_matmul_operands` relies on: B stored transposed with `trans_b`, and an
    /// epilogue scale, give the bits of the plain product of the transposed copy followed
    /// by a Mul, batched and by a matrix, over several depth blocks (products of more than
    /// one row: see the pass for one).
    #[test]
    fn a_transposed_b_and_a_scale_give_the_bits_of_the_unfolded_nodes() {
        let (batch, m, n, k) = (3, 20, 36, 300);
        let a = values(batch * m * k, 3);
        for b_batch in [batch, 1] {
            let b = values(b_batch * k * n, 4);
            // B^T per matrix: [b_batch, n, k].
            let mut bt = vec![0.0; b.len()];
            for (src, dst) in b.chunks(k * n).zip(bt.chunks_mut(k * n)) {
                nn::transpose(src, &[k, n], &[1, 0], dst);
            }
            let (sb, sbt): (Vec<usize>, Vec<usize>) =
                if b_batch == 1 { (vec![k, n], vec![n, k]) } else { (vec![batch, k, n], vec![batch, n, k]) };
            let run = |b: &[f32], sb: &[usize], op: MatMul, scale: Option<nn::Scale>| {
                let mut c = vec![0.0; batch * m * n];
                let extras = Extras { epilogue: nn::Epilogue { scale, ..Default::default() }, ..Default::default() };
                matmul(&a, &[batch, m, k], b, sb, op, extras, &mut c, &Serial::default());
                c
            };
            let plain = run(&b, &sb, MatMul { alpha: 1.0, trans_b: false }, None);
            let scaled: Vec<f32> = plain.iter().map(|&x| x * 0.3).collect();
            let folded = run(&bt, &sbt, MatMul { alpha: 1.0, trans_b: true }, Some(nn::Scale::Mul(0.3)));
            assert!(folded.iter().zip(&scaled).all(|(x, y)| x.to_bits() == y.to_bits()), "B batch {b_batch}");
        }
    }

    /// A batched MatMul split by whole matrices (here in turn on `Serial`) gives each
    /// matrix's own product bit for bit, with a broadcast batch axis on either side.
    #[test]
    fn a_batched_matmul_split_by_matrices_gives_each_matrix_its_own_bits() {
        let (m, n, k) = (40, 48, 32);
        for (sa, sb) in [(vec![2, 3, m, k], vec![1, 3, k, n]), (vec![3, 1, m, k], vec![3, 2, k, n])] {
            let (a, b) = (values(sa.iter().product(), 5), values(sb.iter().product(), 6));
            let batch: Vec<usize> = sa[..2].iter().zip(&sb[..2]).map(|(&x, &y)| x.max(y)).collect();
            let count = batch[0] * batch[1];
            assert!(m * n * k * count >= PARALLEL_MIN_MACS && cores().min(count) >= 2 || cores() < 2);
            let mut got = vec![0.0; count * m * n];
            let op = MatMul { alpha: 1.0, trans_b: false };
            matmul(&a, &sa, &b, &sb, op, Extras::default(), &mut got, &Serial::default());
            for i in 0..count {
                let (i0, i1) = (i / batch[1], i % batch[1]);
                let ia = (if sa[0] == 1 { 0 } else { i0 }) * sa[1] + if sa[1] == 1 { 0 } else { i1 };
                let ib = (if sb[0] == 1 { 0 } else { i0 }) * sb[1] + if sb[1] == 1 { 0 } else { i1 };
                let mut want = vec![0.0; m * n];
                nn::gemm(
                    m,
                    n,
                    k,
                    1.0,
                    &a[ia * m * k..][..m * k],
                    false,
                    &b[ib * k * n..][..k * n],
                    false,
                    0.0,
                    &mut want,
                );
                let same = got[i * m * n..][..m * n].iter().zip(&want).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{sa:?} x {sb:?}: matrix {i}");
            }
        }
    }
}
