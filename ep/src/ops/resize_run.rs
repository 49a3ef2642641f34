//! Running a Resize: one tap table per axis (in the step's scratch), then either a fused
//! plane kernel (nearest or bilinear over the last two axes, the detectors' cases) or one
//! pass per changed axis, each split over slabs of the output with the Run's `Parallel`.
//! float16 runs in float32 between conversions (nearest gathers its bits directly); the
//! integer types run nearest as a gather.

use rivet_kernels::resize::{self, Interp, OUTSIDE};
use rivet_kernels::typed::{f16_to_f32, f32_to_f16};
use smallvec::SmallVec;

use super::op::util::{move_any, Move};
use super::resize::{Geometry, Resize};
use super::OpScratch;
use crate::data::{Data, DataMut};
use crate::parallel::{Parallel, CHUNK_LEN, PARALLEL_MIN_LEN};

/// One axis's table: where its indices and weights sit in the scratch, and its taps.
#[derive(Clone, Copy, Debug, Default)]
struct Table {
    at: usize,
    taps: usize,
    identity: bool,
    outside: bool,
}

/// The tables of every axis, filled in the scratch (`usize` indices, the first `total`
/// floats of `f32` weights).
struct Tables {
    axes: SmallVec<[Table; 8]>,
    total: usize,
}

/// The geometry whose tables the scratch holds, and where they are: a Run on the same
/// geometry as the last (every Run of a model of fixed shapes) reads them as they are.
#[derive(Default)]
struct Filled {
    geo: Option<Geometry>,
    axes: SmallVec<[Table; 8]>,
    total: usize,
}

impl Tables {
    fn fill(op: &Resize, geo: &Geometry, scratch: &mut OpScratch) -> Tables {
        let filled = scratch.state::<Filled>();
        if filled.geo.as_ref() == Some(geo) {
            return Tables { axes: filled.axes.clone(), total: filled.total };
        }
        filled.geo = None;
        let tables = Self::compute(op, geo, scratch);
        *scratch.state::<Filled>() = Filled { geo: Some(geo.clone()), axes: tables.axes.clone(), total: tables.total };
        tables
    }

    fn compute(op: &Resize, geo: &Geometry, scratch: &mut OpScratch) -> Tables {
        let p = &op.params;
        let mut axes: SmallVec<[Table; 8]> = SmallVec::new();
        let (mut total, mut max_taps) = (0, 1);
        for a in geo {
            let taps = resize::tap_count(p, a.scale);
            axes.push(Table { at: total, taps, identity: false, outside: false });
            total += taps * a.len_out;
            max_taps = max_taps.max(taps);
        }
        // Grown, never cut: the float32 path grows the weights' scratch past `total` for
        // its intermediates, and cutting it here made every Run write them all again.
        if scratch.usize.len() < total {
            scratch.usize.resize(total, 0);
        }
        if scratch.f64.len() < max_taps {
            scratch.f64.resize(max_taps, 0.0);
        }
        grow(&mut scratch.f32, total);
        for (a, t) in geo.iter().zip(axes.iter_mut()) {
            let n = t.taps * a.len_out;
            let (idx, w) = (&mut scratch.usize[t.at..][..n], &mut scratch.f32[t.at..][..n]);
            resize::axis_taps(p, a, idx, w, &mut scratch.f64);
            t.identity = a.len_in == a.len_out && resize::is_identity(a.len_in, t.taps, idx, w);
            t.outside = idx.contains(&OUTSIDE);
        }
        Tables { axes, total }
    }
}

pub(super) fn run(
    op: &Resize,
    geo: &Geometry,
    x: Data<'_>,
    y: &mut DataMut<'_>,
    par: &dyn Parallel,
    scratch: &mut OpScratch,
) -> Result<(), String> {
    if y.is_empty() {
        return Ok(());
    }
    let tables = Tables::fill(op, geo, scratch);
    let nearest = matches!(op.params.interp, Interp::Nearest(_)) && !tables.axes.iter().any(|t| t.outside);
    match (x, y) {
        (Data::F32(x), DataMut::F32(y)) => {
            let order = pass_order(geo, &tables.axes);
            let mid = working_len(geo, &order, x.len());
            grow(&mut scratch.f32, tables.total + 2 * mid);
            let (weights, bufs) = scratch.f32[..tables.total + 2 * mid].split_at_mut(tables.total);
            let t = Tabled { geo, tables: &tables.axes, idx: &scratch.usize, weights };
            float(op, &t, &order, x, y, bufs, mid, par);
        }
        (x, y) if nearest => {
            let idx = &scratch.usize;
            let cols: SmallVec<[&[usize]; 8]> =
                geo.iter().zip(&tables.axes).map(|(a, t)| &idx[t.at..][..a.len_out]).collect();
            let dims: SmallVec<[usize; 8]> = geo.iter().map(|a| a.len_in).collect();
            move_any(x, y, &Gather { dims: &dims, tables: &cols })?;
        }
        (Data::F16(x), DataMut::F16(y)) => {
            let order = pass_order(geo, &tables.axes);
            let mid = working_len(geo, &order, x.len());
            let (nx, ny) = (x.len(), y.len());
            grow(&mut scratch.f32, tables.total + 2 * mid + nx + ny);
            let (weights, rest) = scratch.f32[..tables.total + 2 * mid + nx + ny].split_at_mut(tables.total);
            let (bufs, rest) = rest.split_at_mut(2 * mid);
            let (xf, yf) = rest.split_at_mut(nx);
            xf.iter_mut().zip(x).for_each(|(f, &h)| *f = f16_to_f32(h));
            let t = Tabled { geo, tables: &tables.axes, idx: &scratch.usize, weights };
            float(op, &t, &order, xf, yf, bufs, mid, par);
            y.iter_mut().zip(yf.iter()).for_each(|(h, &f)| *h = f32_to_f16(f));
        }
        _ => return Err("Resize runs this element type in nearest mode only".into()),
    }
    Ok(())
}

/// `v` grown to at least `len` (never cut: what a later Run's larger need wrote is kept,
/// not written again).
fn grow(v: &mut Vec<f32>, len: usize) {
    if v.len() < len {
        v.resize(len, 0.0);
    }
}

/// Nearest as a gather, for any element type.
struct Gather<'a> {
    dims: &'a [usize],
    tables: &'a [&'a [usize]],
}

impl Move for Gather<'_> {
    fn apply<T: Copy + Default + PartialEq + Send + Sync>(&self, x: &[T], y: &mut [T]) {
        resize::nearest_nd(x, self.dims, self.tables, y);
    }
}

/// The tables with the scratch they sit in.
struct Tabled<'a> {
    geo: &'a Geometry,
    tables: &'a [Table],
    idx: &'a [usize],
    weights: &'a [f32],
}

impl Tabled<'_> {
    fn table(&self, k: usize) -> resize::Table<'_> {
        let (t, n) = (&self.tables[k], self.tables[k].taps * self.geo[k].len_out);
        resize::Table { taps: t.taps, idx: &self.idx[t.at..][..n], w: &self.weights[t.at..][..n] }
    }
}

/// The largest intermediate of the passes in `order` from an input of `len` values.
fn working_len(geo: &Geometry, order: &[usize], len: usize) -> usize {
    let (mut mid, mut len) = (0, len);
    for &a in order.iter().take(order.len().saturating_sub(1)) {
        len = len / geo[a].len_in.max(1) * geo[a].len_out;
        mid = mid.max(len);
    }
    mid
}

/// The float32 resize of `x` into `y`; `bufs` holds two intermediates of `mid` values.
#[allow(clippy::too_many_arguments)]
fn float(
    op: &Resize,
    t: &Tabled<'_>,
    order: &[usize],
    x: &[f32],
    y: &mut [f32],
    bufs: &mut [f32],
    mid: usize,
    par: &dyn Parallel,
) {
    let (geo, tables, p) = (t.geo, t.tables, &op.params);
    let r = geo.len();
    if r >= 2 && tables[..r - 2].iter().all(|t| t.identity) && !tables[r - 2].outside && !tables[r - 1].outside {
        let (h, w) = (geo[r - 2].len_in, geo[r - 1].len_in);
        let (rows, cols) = (t.table(r - 2), t.table(r - 1));
        let (plane_in, plane_out) = (h * w, geo[r - 2].len_out * geo[r - 1].len_out);
        if matches!(p.interp, Interp::Nearest(_)) {
            let repeat = resize::repeat_factor(w, cols.idx);
            let nearest = |x: &[f32], y: &mut [f32]| resize::nearest_planes(x, h, w, rows.idx, cols.idx, repeat, y);
            over_slabs(x, plane_in, y, plane_out, par, &nearest);
            return;
        }
        if p.interp == Interp::Linear && rows.taps == 2 && cols.taps == 2 {
            over_slabs(x, plane_in, y, plane_out, par, &|x, y| resize::bilinear_planes(x, h, w, rows, cols, y));
            return;
        }
    }
    if order.is_empty() {
        y.copy_from_slice(x);
        return;
    }
    let (a, b) = bufs.split_at_mut(mid);
    let mut bufs = [a, b];
    let mut dims: SmallVec<[usize; 8]> = geo.iter().map(|a| a.len_in).collect();
    let mut cur = x.len();
    for (pi, &axis) in order.iter().enumerate() {
        let (len_in, len_out) = (geo[axis].len_in, geo[axis].len_out);
        let inner: usize = dims[axis + 1..].iter().product();
        let next = cur / len_in.max(1) * len_out;
        let [b0, b1] = &mut bufs;
        let (prev, out) = if pi % 2 == 0 { (&*b1, &mut *b0) } else { (&*b0, &mut *b1) };
        let src: &[f32] = if pi == 0 { x } else { &prev[..cur] };
        let dst: &mut [f32] = if pi + 1 == order.len() { &mut *y } else { &mut out[..next] };
        let (tab, extra) = (t.table(axis), op.extrapolation);
        over_slabs(src, len_in * inner, dst, len_out * inner, par, &|x, y| {
            resize::pass(x, len_in, inner, tab, extra, y)
        });
        dims[axis] = len_out;
        cur = next;
    }
}

/// The axes that change, shrinking ones first (the later passes then work on less).
fn pass_order(geo: &Geometry, tables: &[Table]) -> SmallVec<[usize; 8]> {
    let mut order: SmallVec<[usize; 8]> = (0..geo.len()).filter(|&a| !tables[a].identity).collect();
    order.sort_by(|&a, &b| {
        let ra = geo[a].len_out as f64 / geo[a].len_in.max(1) as f64;
        let rb = geo[b].len_out as f64 / geo[b].len_in.max(1) as f64;
        ra.total_cmp(&rb)
    });
    order
}

/// Runs `f` over whole slabs: `x` of `slab_in` values each, `y` of `slab_out`, split into
/// chunks of whole slabs across the Run's threads when the output is large.
fn over_slabs(
    x: &[f32],
    slab_in: usize,
    y: &mut [f32],
    slab_out: usize,
    par: &dyn Parallel,
    f: &(dyn Fn(&[f32], &mut [f32]) + Sync),
) {
    if slab_out == 0 || y.is_empty() {
        return;
    }
    let per = if y.len() < PARALLEL_MIN_LEN { y.len() / slab_out } else { (CHUNK_LEN / slab_out).max(1) };
    par.for_each_chunk(y, per.max(1) * slab_out, &|start, chunk| {
        let first = start / slab_out;
        let count = chunk.len() / slab_out;
        f(&x[first * slab_in..(first + count) * slab_in], chunk)
    });
}
