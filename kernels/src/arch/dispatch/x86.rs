//! The `#[target_feature]` builds that `arch::dispatch` calls. Their bodies are safe
//! code; they are `unsafe fn` only because calling them on a CPU without the features is
//! undefined behaviour.

use super::*;
use crate::arch::simd;

/// # Safety
/// The CPU must support avx2 and fma.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn unary_avx2(op: &UnaryOp, io: Io<'_>) {
    match op {
        UnaryOp::Sigmoid => simd::sigmoid_avx2(io),
        UnaryOp::Exp => simd::exp_avx2(io),
        UnaryOp::GeluTanh => simd::gelu_tanh_avx2(io),
        UnaryOp::Erf => simd::erf_avx2(io),
        UnaryOp::Gelu => simd::gelu_avx2(io),
        _ => op.run::<true>(io),
    }
}

/// # Safety
/// The CPU must support avx512f, avx512dq, avx512bw, avx512vl, avx2 and fma.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(super) unsafe fn softmax_rows_avx512(x: &[f32], y: &mut [f32], n: usize, log: bool) {
    simd::softmax_rows_avx512(x, y, n, log)
}

/// # Safety
/// The CPU must support avx512f, avx512dq, avx512bw, avx512vl, avx2 and fma.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(super) unsafe fn softmax_cols_avx512(x: &[f32], y: &mut [f32], n: usize, inner: usize, log: bool) {
    simd::softmax_cols_avx512(x, y, n, inner, log)
}

/// # Safety
/// The CPU must support avx512f, avx512dq, avx512bw, avx512vl, avx2 and fma.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(super) unsafe fn instance_plane_avx512(xs: &[f32], ys: &mut [f32], scale: f32, bias: f32, epsilon: f32) {
    simd::instance_plane_avx512(xs, ys, scale, bias, epsilon)
}

/// # Safety
/// The CPU must support avx512f, avx512dq, avx512bw, avx512vl, avx2 and fma.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(super) unsafe fn run_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// # Safety
/// The CPU must support avx2 and fma.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn run_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// # Safety
/// The CPU must support avx2 and fma.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn qgemm_portable_avx2(
    a: &crate::qgemm::QPackedA,
    rows: std::ops::Range<usize>,
    b: &crate::qgemm::QPackedB,
    cols: std::ops::Range<usize>,
    out: &mut crate::qgemm::QOut<'_>,
    place: crate::qgemm::Place,
) {
    crate::qgemm::portable_body(a, rows, b, cols, out, place)
}

/// # Safety
/// The CPU must support avx2 and fma.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn silu_avx2(io: Io<'_>) {
    simd::silu_avx2(io)
}

/// # Safety
/// The CPU must support avx512f, avx512dq, avx512bw, avx512vl, avx2 and fma.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(super) unsafe fn silu_avx512(io: Io<'_>) {
    simd::silu_avx512(io)
}

/// # Safety
/// The CPU must support avx512f, avx512dq, avx512bw, avx512vl, avx2 and fma.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(super) unsafe fn unary_avx512(op: &UnaryOp, io: Io<'_>) {
    match op {
        UnaryOp::Sigmoid => simd::sigmoid_avx512(io),
        UnaryOp::Exp => simd::exp_avx512(io),
        UnaryOp::GeluTanh => simd::gelu_tanh_avx512(io),
        UnaryOp::Erf => simd::erf_avx512(io),
        UnaryOp::Gelu => simd::gelu_avx512(io),
        _ => op.run::<true>(io),
    }
}

/// # Safety
/// The CPU must support avx2 and fma.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn depthwise_avx2(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    planes: std::ops::Range<usize>,
    channels: usize,
    g: &crate::conv::Window3d,
    y: &mut [f32],
    epilogue: &crate::gemm::Epilogue<'_>,
    scratch: &mut Vec<f32>,
) {
    // (The channels-last and same-size kernels are AVX-512 code: not here, where the
    // CPU may have no AVX-512. Calling them from this build raised SIGILL on an AVX2
    // CPU, as valgrind's shows.)
    crate::depthwise::depthwise_2d::<true>(x, w, bias, planes, channels, g, y, epilogue, scratch)
}

/// # Safety
/// The CPU must support avx512f, avx512dq, avx512bw, avx512vl, avx2 and fma.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn depthwise_avx512(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    planes: std::ops::Range<usize>,
    channels: usize,
    g: &crate::conv::Window3d,
    y: &mut [f32],
    epilogue: &crate::gemm::Epilogue<'_>,
    scratch: &mut Vec<f32>,
) {
    let rows = crate::depthwise::x86::rows;
    // 3x3 windows on rows of 14 outputs or more run faster by rows (see `rows_first`).
    if crate::depthwise::x86::rows_first(g) && rows(x, w, bias, planes.clone(), channels, g, y, epilogue) {
        return;
    }
    if crate::depthwise::nhwc::channels_last(x, w, bias, planes.clone(), channels, g, y, epilogue, scratch) {
        return;
    }
    if !crate::depthwise::x86::same_size(x, w, bias, planes.clone(), channels, g, y, epilogue)
        && !rows(x, w, bias, planes.clone(), channels, g, y, epilogue)
    {
        crate::depthwise::depthwise_2d::<true>(x, w, bias, planes, channels, g, y, epilogue, scratch)
    }
}

/// # Safety
/// The CPU must support avx2 and fma.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn pool_avx2(
    x: &[f32],
    planes: usize,
    g: &crate::conv::Window3d,
    mode: crate::conv::Pool,
    pad_end: [usize; 3],
    y: &mut [f32],
) {
    if crate::pool::pool_flat(x, planes, g, mode, pad_end, y) {
        return;
    }
    // LLVM's 8-lane build of the rows' stride-2 Max (pairs loaded and shuffled, then
    // compared) measured 1.8x slower than the portable one: 5.4 against 3.0 ns an output.
    if mode == crate::conv::Pool::Max && g.stride[2] == 2 {
        return super::pool_portable(x, planes, g, mode, pad_end, y);
    }
    crate::pool::pool_rows(x, planes, g, mode, pad_end, y)
}

/// # Safety
/// The CPU must support sse4.1.
#[target_feature(enable = "sse4.1")]
pub(super) unsafe fn binary_sse41(op: BinaryOp, plan: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32], start: usize) {
    binary::run_op(op, plan, a, b, out, start)
}

/// # Safety
/// The CPU must support avx2 and fma.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn binary_avx2(op: BinaryOp, plan: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32], start: usize) {
    binary::run_op(op, plan, a, b, out, start)
}

/// # Safety
/// The CPU must support avx512f, avx512dq, avx512bw, avx512vl, avx2 and fma.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(super) unsafe fn binary_avx512(
    op: BinaryOp,
    plan: &Broadcast,
    a: &[f32],
    b: &[f32],
    out: &mut [f32],
    start: usize,
) {
    binary::run_op(op, plan, a, b, out, start)
}
