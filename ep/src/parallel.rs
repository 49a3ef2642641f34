//! How a Run splits work: the `Parallel` seam over ORT's intra-op pool (or the calling
//! thread), and the scratch that split kernels use.
//!
//! Scratch belongs to the Run's state, one per task index, never to a thread: ORT decides
//! which pool thread runs which task, and a busy machine changes that from Run to Run, so
//! scratch kept per thread would make a steady-state Run allocate whenever a task first
//! lands on a thread that had not run one yet.

use std::sync::{Mutex, MutexGuard};

use rivet_kernels::nn;

/// Runs `f` over disjoint chunks of `out` that together cover it, possibly in parallel.
/// `f` receives the chunk's offset into `out`.
pub trait Parallel {
    fn for_each_chunk(&self, out: &mut [f32], chunk_len: usize, f: &(dyn Fn(usize, &mut [f32]) + Sync));

    /// The Run's scratch.
    fn scratch(&self) -> &RunScratch;

    /// [`Parallel::for_each_chunk`] for work that needs scratch: chunk `i` gets task
    /// scratch `i`, whichever thread runs it. Panics past [`MAX_TASKS`] chunks.
    fn for_each_task(
        &self,
        out: &mut [f32],
        chunk_len: usize,
        f: &(dyn Fn(usize, &mut [f32], &mut TaskScratch) + Sync),
    ) {
        let chunk_len = chunk_len.max(1);
        assert!(out.len().div_ceil(chunk_len) <= MAX_TASKS, "more than {MAX_TASKS} tasks");
        let scratch = self.scratch();
        self.for_each_chunk(out, chunk_len, &|start, chunk| f(start, chunk, &mut scratch.task(start / chunk_len)));
    }

    /// Runs `f(i, scratch of task i)` for `i` in `0..count`, possibly in parallel: for
    /// tasks that write into their own scratch. Panics past [`MAX_TASKS`].
    fn for_each_index(&self, count: usize, f: &(dyn Fn(usize, &mut TaskScratch) + Sync)) {
        let mut one_each = [0.0f32; MAX_TASKS];
        self.for_each_task(&mut one_each[..count], 1, &|i, _, s| f(i, s));
    }
}

/// Runs every chunk on the calling thread.
#[derive(Default)]
pub struct Serial {
    scratch: RunScratch,
}

impl Parallel for Serial {
    fn for_each_chunk(&self, out: &mut [f32], chunk_len: usize, f: &(dyn Fn(usize, &mut [f32]) + Sync)) {
        run_in_turn(out, chunk_len, f);
    }

    fn scratch(&self) -> &RunScratch {
        &self.scratch
    }
}

/// Every chunk of `out` in turn, on the calling thread.
pub fn run_in_turn(out: &mut [f32], chunk_len: usize, f: &(dyn Fn(usize, &mut [f32]) + Sync)) {
    for (i, chunk) in out.chunks_mut(chunk_len.max(1)).enumerate() {
        f(i * chunk_len, chunk);
    }
}

/// Below this many elements a node runs on one thread.
pub const PARALLEL_MIN_LEN: usize = 1 << 16;
/// Elements per parallel task.
pub const CHUNK_LEN: usize = 1 << 14;
/// The most tasks a kernel that needs scratch splits into.
pub const MAX_TASKS: usize = 64;

/// Tasks for work split over the pool: one per core (ORT's pool has one thread per core
/// by default; with `intra_op_num_threads=1` ORT runs them in turn).
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    cores.min(MAX_TASKS)
}

/// Work on a range of planes, given the input and the output from the first of them.
pub type PlaneWork<'a> = dyn Fn(std::ops::Range<usize>, &[f32], &mut [f32]) + Sync + 'a;

/// Runs `f(planes, x from the first of them, y from the first of them)` over `planes`
/// planes of `plane` input and `positions` output elements each: split over the pool by
/// planes when the input is large, else in one call.
pub fn by_planes(
    x: &[f32],
    y: &mut [f32],
    planes: usize,
    (plane, positions): (usize, usize),
    par: &dyn Parallel,
    f: &PlaneWork<'_>,
) {
    let tasks = cores().min(planes);
    if x.len() < PARALLEL_MIN_LEN || tasks < 2 || positions == 0 {
        return f(0..planes, x, y);
    }
    let per_task = planes.div_ceil(tasks);
    par.for_each_chunk(y, per_task * positions, &|start, part| {
        let first = start / positions;
        f(first..first + part.len() / positions, &x[first * plane..], part);
    });
}

/// What one task of a split kernel works in: packing buffers, an im2col block, and a
/// block of output it computes before the calling thread puts it in place. Each grows to
/// the largest it has needed, then no Run allocates.
#[derive(Debug, Default)]
pub struct TaskScratch {
    pub gemm: nn::GemmScratch,
    pub col: Vec<f32>,
    pub out: Vec<f32>,
    /// Float64 working memory (the ml ops' float64 scores).
    pub f64: Vec<f64>,
    /// A Winograd convolution's transformed input and products.
    pub winograd: rivet_kernels::winograd::Scratch,
    /// An attention step's packed heads and scores.
    pub attention: rivet_kernels::attention::AttnScratch<f32>,
    /// A fused attention chain's packed K and V and a strip's scores.
    pub chain: rivet_kernels::attention::chain::ChainScratch,
}

/// A Run's scratch: one [`TaskScratch`] per task index (index 0 also serves work that is
/// not split), the packed operand of the product being split, and a split convolution's
/// parts.
/// One per concurrent Run; the locks are uncontended.
#[derive(Debug)]
pub struct RunScratch {
    tasks: [Mutex<TaskScratch>; MAX_TASKS],
    pub(crate) packed_a: Mutex<nn::PackedA>,
    pub(crate) packed_b: Mutex<nn::PackedB>,
    pub(crate) conv_parts: Mutex<Vec<f32>>,
    /// A strided 1x1 convolution's subsampled input.
    pub(crate) sampled: Mutex<Vec<f32>>,
    /// Constant conv filters packed for the GEMM (one per group), by the Conv step's
    /// output value.
    pub(crate) filters: Mutex<Vec<Packed<Vec<nn::PackedA>>>>,
    /// Constant right-hand operands of MatMul and Gemm packed for the GEMM, by the step's
    /// output value.
    pub(crate) weights: Mutex<Vec<Packed<nn::PackedB>>>,
    /// Constant conv filters packed for the direct kernel, by the Conv step's output value.
    pub(crate) direct: Mutex<Vec<Packed<rivet_kernels::lines::Aligned<f32>>>>,
    /// Constant conv filters transformed for the Winograd kernel, by the Conv step's
    /// output value.
    pub(crate) winograd: Mutex<Vec<Packed<rivet_kernels::winograd::Filters>>>,
    /// A channels-last convolution's input and output in the other layout, where its
    /// kernels do not take it as it is stored (`channels_last_conv`).
    pub(crate) relaid: Mutex<[Vec<f32>; 2]>,
}

/// A constant operand packed once, which tensor it was packed from (address and length
/// of ORT's constant initializer) and in which of its kernel's layouts.
#[derive(Debug, Default)]
pub(crate) struct Packed<T> {
    source: Option<(usize, usize, usize)>,
    pub packed: T,
}

/// Entry `key` of `cache`, packed from `w` by `pack` unless it already was (on an earlier
/// Run, from the same tensor).
pub(crate) fn packed_once<'c, T: Default>(
    cache: &'c mut Vec<Packed<T>>,
    key: usize,
    w: &[f32],
    pack: impl FnOnce(&mut T),
) -> &'c T {
    packed_once_as(cache, key, w, 0, pack)
}

/// [`packed_once`] in `layout` (the caller's number for one of its layouts): packed
/// again when an earlier Run packed the same tensor in another one. (A convolution whose
/// input size changes between Runs can change kernels: with `bf16`, a stem's filters
/// packed for the float kernel were read as bfloat16 ones, found by review.)
pub(crate) fn packed_once_as<'c, T: Default>(
    cache: &'c mut Vec<Packed<T>>,
    key: usize,
    w: &[f32],
    layout: usize,
    pack: impl FnOnce(&mut T),
) -> &'c T {
    if cache.len() <= key {
        cache.resize_with(key + 1, Default::default);
    }
    let entry = &mut cache[key];
    let source = (w.as_ptr() as usize, w.len(), layout);
    if entry.source != Some(source) {
        pack(&mut entry.packed);
        entry.source = Some(source);
    }
    &entry.packed
}

impl Default for RunScratch {
    fn default() -> Self {
        RunScratch {
            tasks: std::array::from_fn(|_| Mutex::default()),
            packed_a: Mutex::default(),
            packed_b: Mutex::default(),
            conv_parts: Mutex::default(),
            sampled: Mutex::default(),
            filters: Mutex::default(),
            weights: Mutex::default(),
            direct: Mutex::default(),
            winograd: Mutex::default(),
            relaid: Mutex::default(),
        }
    }
}

impl RunScratch {
    /// Task `index`'s scratch (a panic in an earlier task leaves it sound: every user
    /// resizes what it takes).
    pub fn task(&self, index: usize) -> MutexGuard<'_, TaskScratch> {
        lock(&self.tasks[index])
    }

    /// The `out` blocks of tasks `0..count`, locked together for a second split that
    /// reads what every task of the first wrote (their parts, put in place).
    pub(crate) fn task_outs(&self, count: usize) -> TaskOuts<'_> {
        let mut guards = [const { None }; MAX_TASKS];
        for (i, guard) in guards.iter_mut().enumerate().take(count) {
            *guard = Some(self.task(i));
        }
        TaskOuts { guards }
    }
}

/// See [`RunScratch::task_outs`].
pub(crate) struct TaskOuts<'s> {
    guards: [Option<MutexGuard<'s, TaskScratch>>; MAX_TASKS],
}

impl TaskOuts<'_> {
    /// Task `i`'s `out` block. Panics past the tasks locked.
    pub(crate) fn get(&self, i: usize) -> &[f32] {
        &self.guards[i].as_ref().expect("a task `task_outs` locked").out
    }
}

/// Locks `m`, taking it over from a holder that panicked.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The most channels [`by_rows`] takes, and the most tasks: each task's parts (a slice per
/// channel) are held on the stack.
pub(crate) const BY_ROWS_MAX_CHANNELS: usize = 128;
pub(crate) const BY_ROWS_MAX_TASKS: usize = 8;

/// Work on a range of rows, given each channel's part for them and the task's scratch.
pub(crate) type RowWork<'a> = dyn Fn(std::ops::Range<usize>, &mut [&mut [f32]], &mut TaskScratch) + Sync + 'a;

/// Runs `f(rows, parts, scratch)` over ranges of `rows.div_ceil(tasks)` of the `rows`
/// rows (at most `tasks` of them: 5 rows in 4 tasks are 3 ranges of 2, 2 and 1) of
/// `row_len` positions each of `y`, a `[channels][rows * row_len]` block: `parts[l]` is channel
/// `l`'s part for those rows, written in place, so that a kernel with few channels can
/// split by positions and still write no copy. Panics past [`BY_ROWS_MAX_CHANNELS`]
/// channels or [`BY_ROWS_MAX_TASKS`] tasks.
pub(crate) fn by_rows(
    y: &mut [f32],
    (rows, row_len): (usize, usize),
    tasks: usize,
    par: &dyn Parallel,
    f: &RowWork<'_>,
) {
    by_rows_of(y, (rows, row_len), rows.div_ceil(tasks.max(1)), par, f);
}

/// [`by_rows`] in ranges of `per` rows (the last may have fewer). Panics past
/// [`BY_ROWS_MAX_CHANNELS`] channels or [`BY_ROWS_MAX_TASKS`] ranges.
pub(crate) fn by_rows_of(
    y: &mut [f32],
    (rows, row_len): (usize, usize),
    per: usize,
    par: &dyn Parallel,
    f: &RowWork<'_>,
) {
    let positions = rows * row_len;
    let per = per.max(1);
    let tasks = rows.div_ceil(per);
    assert!(positions > 0 && y.len().is_multiple_of(positions), "by_rows: a channel's rows");
    assert!(y.len() / positions <= BY_ROWS_MAX_CHANNELS && tasks <= BY_ROWS_MAX_TASKS, "by_rows: too many");
    let mut parts: [Mutex<smallvec::SmallVec<[&mut [f32]; BY_ROWS_MAX_CHANNELS]>>; BY_ROWS_MAX_TASKS] =
        Default::default();
    for channel in y.chunks_mut(positions) {
        let mut rest = channel;
        for part in &mut parts[..tasks] {
            let at = (per * row_len).min(rest.len());
            let (mine, next) = std::mem::take(&mut rest).split_at_mut(at);
            part.get_mut().unwrap_or_else(|p| p.into_inner()).push(mine);
            rest = next;
        }
    }
    par.for_each_index(tasks, &|i, s| {
        let rows = i * per..((i + 1) * per).min(rows);
        f(rows, &mut lock(&parts[i]), s)
    });
}
