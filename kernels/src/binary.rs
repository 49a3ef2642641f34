//! Binary elementwise f32 operators with broadcasting.

use crate::arch::{self, Level};
use crate::broadcast::{Broadcast, BroadcastKind};
use smallvec::SmallVec;

/// Binary elementwise f32 operators (ONNX semantics).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b` (IEEE division).
    Div,
    /// `a.powf(b)`; `b == 2` is computed as `a * a` (the same correctly rounded
    /// value, without the libm call).
    Pow,
    /// Maximum; NaN if either input is NaN (as ONNX Runtime).
    Max,
    /// Minimum; NaN if either input is NaN (as ONNX Runtime).
    Min,
}

impl BinaryOp {
    /// The op on one pair of scalars; `binary_f32` produces exactly these bits.
    #[inline(always)]
    pub fn scalar(&self, a: f32, b: f32) -> f32 {
        match *self {
            BinaryOp::Add => a + b,
            BinaryOp::Sub => a - b,
            BinaryOp::Mul => a * b,
            BinaryOp::Div => a / b,
            BinaryOp::Pow => pow(a, b),
            BinaryOp::Max => max_nan(a, b),
            BinaryOp::Min => min_nan(a, b),
        }
    }
}

#[inline(always)]
fn pow(a: f32, b: f32) -> f32 {
    if b == 2.0 {
        a * a
    } else {
        a.powf(b)
    }
}

#[inline(always)]
fn max_nan(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else if a <= b {
        b
    } else {
        a + b // at least one NaN
    }
}

#[inline(always)]
fn min_nan(a: f32, b: f32) -> f32 {
    if a < b {
        a
    } else if a >= b {
        b
    } else {
        a + b // at least one NaN
    }
}

/// Computes out[start..start+out.len()] of the broadcast result (out is the
/// sub-slice for that range of the flat output, so callers can split work into
/// chunks for threads). a.len() and b.len() must equal the element counts of
/// the shapes given to `Broadcast::new`; panics otherwise (and when the range
/// exceeds the output).
pub fn binary_f32(op: BinaryOp, plan: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32], start: usize) {
    check(plan, a, b, out, start);
    arch::binary(arch::isa(), op, plan, a, b, out, start);
}

/// [`binary_f32`] with the kernel build for `level` (lowered to
/// [`Level::detected`] if the CPU lacks it); every level gives the same bits.
/// For tests and benchmarks.
#[doc(hidden)]
pub fn binary_f32_at(
    level: Level,
    op: BinaryOp,
    plan: &Broadcast,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    start: usize,
) {
    check(plan, a, b, out, start);
    arch::binary(arch::isa_at(level), op, plan, a, b, out, start);
}

fn check(plan: &Broadcast, a: &[f32], b: &[f32], out: &[f32], start: usize) {
    assert_eq!(a.len(), plan.a_len, "binary_f32: `a` length does not match the plan");
    assert_eq!(b.len(), plan.b_len, "binary_f32: `b` length does not match the plan");
    let in_range = start.checked_add(out.len()).is_some_and(|end| end <= plan.out_len());
    assert!(in_range, "binary_f32: output range exceeds the broadcast output");
}

/// The kernel body, instantiated once per [`Level`] by `arch::dispatch`;
/// `check` has passed.
#[inline(always)]
pub(crate) fn run_op(op: BinaryOp, plan: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32], start: usize) {
    if out.is_empty() {
        return;
    }
    match op {
        BinaryOp::Add => run(plan, a, b, out, start, |x, y| x + y),
        BinaryOp::Sub => run(plan, a, b, out, start, |x, y| x - y),
        BinaryOp::Mul => run(plan, a, b, out, start, |x, y| x * y),
        BinaryOp::Div => run(plan, a, b, out, start, |x, y| x / y),
        BinaryOp::Pow if plan.kind() == BroadcastKind::ScalarB && b[0] == 2.0 => {
            run(plan, a, b, out, start, |x, _| x * x)
        }
        BinaryOp::Pow => run(plan, a, b, out, start, pow),
        BinaryOp::Max => run(plan, a, b, out, start, max_nan),
        BinaryOp::Min => run(plan, a, b, out, start, min_nan),
    }
}

/// Dispatches on the plan kind; `f` is inlined into every loop.
#[inline(always)]
fn run<F: Fn(f32, f32) -> f32 + Copy>(plan: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32], start: usize, f: F) {
    let end = start + out.len();
    match plan.kind() {
        BroadcastKind::SameShape => vv(&a[start..end], &b[start..end], out, f),
        BroadcastKind::ScalarA => sv(a[0], &b[start..end], out, f),
        BroadcastKind::ScalarB => vs(&a[start..end], b[0], out, f),
        BroadcastKind::General => general(plan, a, b, out, start, f),
    }
}

#[inline(always)]
fn vv<F: Fn(f32, f32) -> f32>(a: &[f32], b: &[f32], out: &mut [f32], f: F) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = f(x, y);
    }
}

#[inline(always)]
fn vs<F: Fn(f32, f32) -> f32>(a: &[f32], y: f32, out: &mut [f32], f: F) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x, y);
    }
}

#[inline(always)]
fn sv<F: Fn(f32, f32) -> f32>(x: f32, b: &[f32], out: &mut [f32], f: F) {
    for (o, &y) in out.iter_mut().zip(b) {
        *o = f(x, y);
    }
}

/// Strided walk over the collapsed shape: an odometer over the outer axes and
/// a contiguous or broadcast row loop for the innermost one.
#[inline(always)]
fn general<F: Fn(f32, f32) -> f32 + Copy>(plan: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32], start: usize, f: F) {
    let (dims, sa, sb) = (&plan.dims[..], &plan.a_strides[..], &plan.b_strides[..]);
    // out_len >= 2 here (smaller outputs are SameShape or empty), so some
    // collapsed axis exists.
    let outer = dims.len() - 1;
    let (inner, ia, ib) = (dims[outer], sa[outer], sb[outer]);
    // Multi-index of `start`.
    let mut idx: SmallVec<[usize; 8]> = SmallVec::from_elem(0, outer);
    let mut col = start % inner;
    let mut rest = start / inner;
    let (mut oa, mut ob) = (0usize, 0usize);
    for d in (0..outer).rev() {
        idx[d] = rest % dims[d];
        rest /= dims[d];
        oa += idx[d] * sa[d];
        ob += idx[d] * sb[d];
    }
    let mut done = 0;
    while done < out.len() {
        let len = (inner - col).min(out.len() - done);
        let o = &mut out[done..done + len];
        let (pa, pb) = (oa + col * ia, ob + col * ib);
        match (ia, ib) {
            (1, 1) => vv(&a[pa..pa + len], &b[pb..pb + len], o, f),
            (1, 0) => vs(&a[pa..pa + len], b[pb], o, f),
            (0, 1) => sv(a[pa], &b[pb..pb + len], o, f),
            _ => {
                for (k, v) in o.iter_mut().enumerate() {
                    *v = f(a[pa + k * ia], b[pb + k * ib]);
                }
            }
        }
        done += len;
        col = 0;
        // Next row.
        for d in (0..outer).rev() {
            idx[d] += 1;
            oa += sa[d];
            ob += sb[d];
            if idx[d] < dims[d] {
                break;
            }
            oa -= sa[d] * dims[d];
            ob -= sb[d] * dims[d];
            idx[d] = 0;
        }
    }
}
