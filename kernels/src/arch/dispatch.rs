//! With `mem`, the crate's only `unsafe`: calling the `#[target_feature]` builds of the
//! kernels, which is sound once an [`Isa`] proves the CPU has the features.
//!
//! Each build is a thin `#[target_feature]` wrapper around the same
//! `#[inline(always)]` generic code (`UnaryOp::run`, `binary::run_op`), so
//! LLVM inlines the element formulas into the wrapper and vectorises the
//! loops for that instruction set (8 lanes with AVX2, 16 with AVX-512,
//! fused multiply-adds where the formulas ask for them). `Exp` and `Sigmoid`
//! go to the explicit kernels of `arch::simd` instead (safe code, callable
//! here because the features match).

use super::{Isa, Level};
use crate::binary::{self, BinaryOp};
use crate::broadcast::Broadcast;
use crate::gemm::{self, GemmScratch, Job};
use crate::unary::{Io, UnaryOp};

/// Outputs of at least this many elements run Add, Sub, Mul, Max and Min (contiguous or
/// with a scalar side) on 128-bit vectors. These ops only move bytes. On the Zen 4 of
/// these machines, an Add of two 1 Mi float tensors from L3 took 157-160 us with LLVM's
/// 512-bit loop and 132-144 us with the 128-bit one. In the plugin, add_1m went from 1.07-1.14
/// to 0.96-1.00 of ORT and from 71-79% to 83-86% of a memcpy's speed. Shorter outputs, which
/// sit in L1, keep the wide build. The bits are the same: the ops are exact. (The same switch
/// for the unary byte movers, Relu say, measured slower in the plugin, 94 -> 104 us, so they
/// keep the wide build.)
pub(crate) const STREAM_MIN: usize = 1 << 14;

/// Runs `op` over `io` with the build for `isa`.
#[inline]
pub(crate) fn unary(isa: Isa, op: &UnaryOp, io: Io<'_>) {
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `unary_avx512` enables.
            unsafe { x86::unary_avx512(op, io) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx2 and fma, the features `unary_avx2` enables.
            unsafe { x86::unary_avx2(op, io) }
        }
        _ => op.run::<false>(io),
    }
}

/// Softmax (LogSoftmax when `log`) of each row of `n` elements of `x` into `y` where the CPU has AVX-512 (see
/// `simd::softmax_rows_avx512`): whether it ran (the caller runs its passes if not).
pub(crate) fn softmax_rows(x: &[f32], y: &mut [f32], n: usize, log: bool) -> bool {
    assert!(x.len() == y.len() && n > 0 && x.len().is_multiple_of(n), "softmax rows: lengths");
    #[cfg(target_arch = "x86_64")]
    if Level::detected() == Level::Avx512 {
        // SAFETY: the CPU has AVX-512 (detected), with avx2 and fma, the features
        // `softmax_rows_avx512` enables.
        unsafe { x86::softmax_rows_avx512(x, y, n, log) };
        return true;
    }
    false
}

/// One plane of instance normalization (`xs` into `ys`, its channel's `scale` and
/// `bias`) where the CPU has AVX-512 (see `simd::instance_plane_avx512`): whether it
/// ran (the caller runs the portable plane if not).
pub(crate) fn instance_plane(xs: &[f32], ys: &mut [f32], scale: f32, bias: f32, epsilon: f32) -> bool {
    assert_eq!(xs.len(), ys.len(), "instance plane: lengths");
    #[cfg(target_arch = "x86_64")]
    if Level::detected() == Level::Avx512 {
        // SAFETY: the CPU has AVX-512 (detected), with avx2 and fma, the features
        // `instance_plane_avx512` enables.
        unsafe { x86::instance_plane_avx512(xs, ys, scale, bias, epsilon) };
        return true;
    }
    false
}

/// Softmax (LogSoftmax when `log`) along an axis of `n` elements `inner` apart of each
/// `n * inner` block of `x` into `y`, where the CPU has AVX-512 (see
/// `simd::softmax_cols_avx512`): whether it ran (the caller runs its loops if not).
pub(crate) fn softmax_cols(x: &[f32], y: &mut [f32], n: usize, inner: usize, log: bool) -> bool {
    assert!(x.len() == y.len() && n > 0 && inner > 0 && x.len().is_multiple_of(n * inner), "softmax cols: lengths");
    #[cfg(target_arch = "x86_64")]
    if Level::detected() == Level::Avx512 {
        // SAFETY: the CPU has AVX-512 (detected), with avx2 and fma, the features
        // `softmax_cols_avx512` enables.
        unsafe { x86::softmax_cols_avx512(x, y, n, inner, log) };
        return true;
    }
    false
}

/// SiLU (`x * sigmoid(x)`, the Sigmoid op's value times x) in place with the build for
/// `isa`: one pass on the SIMD builds; the portable one runs Sigmoid on a copy of each
/// chunk, then multiplies.
#[inline]
pub(crate) fn silu_inplace(isa: Isa, xs: &mut [f32]) {
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `silu_avx512` enables.
            unsafe { x86::silu_avx512(Io::InPlace(xs)) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx2 and fma, the features `silu_avx2` enables.
            unsafe { x86::silu_avx2(Io::InPlace(xs)) }
        }
        _ => {
            let mut s = [0.0f32; 256];
            for chunk in xs.chunks_mut(256) {
                let s = &mut s[..chunk.len()];
                s.copy_from_slice(chunk);
                unary(isa, &UnaryOp::Sigmoid, Io::InPlace(s));
                chunk.iter_mut().zip(s.iter()).for_each(|(x, &g)| *x *= g);
            }
        }
    }
}

/// Runs `binary::run_op` with the build for `isa`.
#[inline]
pub(crate) fn binary(isa: Isa, op: BinaryOp, plan: &Broadcast, a: &[f32], b: &[f32], out: &mut [f32], start: usize) {
    #[cfg(target_arch = "x86_64")]
    if isa.0 >= Level::Avx2
        && out.len() >= STREAM_MIN
        && matches!(op, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Max | BinaryOp::Min)
        && plan.kind() != crate::broadcast::BroadcastKind::General
    {
        // SAFETY: an `Isa` never exceeds `Level::detected()`, and every AVX2 CPU has
        // SSE4.1, the feature `binary_sse41` enables.
        return unsafe { x86::binary_sse41(op, plan, a, b, out, start) };
    }
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `binary_avx512` enables.
            unsafe { x86::binary_avx512(op, plan, a, b, out, start) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx2 and fma, the features `binary_avx2` enables.
            unsafe { x86::binary_avx2(op, plan, a, b, out, start) }
        }
        _ => binary::run_op(op, plan, a, b, out, start),
    }
}

/// Runs the blocked matrix multiply with the microkernel for `isa`.
#[inline]
pub(crate) fn gemm(isa: Isa, scratch: &mut GemmScratch, job: &Job<'_>, c: &mut [f32]) {
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `gemm_avx512` enables.
            unsafe { gemm::x86::gemm_avx512(scratch, job, c) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx2 and fma, the features `gemm_avx2` enables.
            unsafe { gemm::x86::gemm_avx2(scratch, job, c) }
        }
        _ => gemm::portable(scratch, job, c),
    }
}

/// The block `rows` × `cols` of `g`, whose B (`b`) is packed as bfloat16 pairs (see
/// `gemm::bf16`). Panics on a CPU without AVX-512 BF16, where nothing packs one.
#[inline]
pub(crate) fn gemm_bf16(
    g: &gemm::Gemm<'_>,
    b: &[f32],
    scratch: &mut GemmScratch,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    c: &mut [f32],
) {
    assert!(gemm::bf16_supported(), "gemm: a bf16 product on a CPU without AVX-512 BF16");
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `bf16_supported` says the detected level is AVX-512 (avx512f/dq/bw/vl, avx2,
    // fma) and the CPU has avx512bf16: the features `gemm_bf16_avx512` enables.
    unsafe {
        gemm::bf16_x86::gemm_bf16_avx512(g, b, scratch, rows, cols, c)
    }
}

/// The block `rows` × `cols` of `g`, whose A (`a`) is packed as bfloat16 strips (see
/// `gemm::bf16`). Panics on a CPU without AVX-512 BF16, where nothing packs one.
#[inline]
pub(crate) fn gemm_bf16_a(
    g: &gemm::Gemm<'_>,
    a: &[f32],
    scratch: &mut GemmScratch,
    rows: std::ops::Range<usize>,
    cols: std::ops::Range<usize>,
    c: &mut [f32],
) {
    assert!(gemm::bf16_supported(), "gemm: a bf16 product on a CPU without AVX-512 BF16");
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `gemm_bf16`: the CPU has the features `gemm_bf16_a_avx512` enables.
    unsafe {
        gemm::bf16_x86::gemm_bf16_a_avx512(g, a, scratch, rows, cols, c)
    }
}

/// The 8-bit product of packed operands on AVX-512 VNNI (see `qgemm::packed`). Panics
/// on a CPU without it.
#[inline]
pub(crate) fn qgemm_vnni(
    a: &crate::qgemm::QPackedA,
    rows: std::ops::Range<usize>,
    b: &crate::qgemm::QPackedB,
    cols: std::ops::Range<usize>,
    out: &mut crate::qgemm::QOut<'_>,
    place: crate::qgemm::Place,
) {
    assert!(crate::qgemm::vnni_supported(), "qgemm: a VNNI product on a CPU without AVX-512 VNNI");
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `vnni_supported` says the detected level is AVX-512 (avx512f/dq/bw/vl) and
    // the CPU has avx512vnni: the features `qgemm_avx512` enables.
    unsafe {
        crate::qgemm::x86::qgemm_avx512(a, rows, b, cols, out, place)
    }
}

/// The transpose of `x` (`rows` × `cols` bytes) into `y` on the AVX-512 build where the CPU
/// has it: the rows and columns it did (`qgemm::x86::transpose_bytes_avx512`), or none.
#[inline]
pub(crate) fn transpose_bytes<T: crate::qgemm::Q8>(x: &[T], dims: (usize, usize), y: &mut [T]) -> (usize, usize) {
    #[cfg(target_arch = "x86_64")]
    if Level::detected() == Level::Avx512 {
        if let (Some(x), Some(y)) = (crate::arch::mem::bytes_of(x), crate::arch::mem::bytes_of_mut(y)) {
            // SAFETY: the detected level is AVX-512, so this CPU has avx512f/bw, the
            // features `transpose_bytes_avx512` enables.
            return unsafe { crate::qgemm::x86::transpose_bytes_avx512(x, dims, y) };
        }
    }
    let _ = (x, dims, y);
    (0, 0)
}

/// A channels-last convolution's product read through its taps (see
/// `qgemm::nhwc::conv_taps`). Panics on a CPU without AVX-512 VNNI.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn qconv_taps(
    x: &[u8],
    zrow: &[u8],
    taps: &crate::qgemm::nhwc::ConvTaps,
    a: &crate::qgemm::QPackedA,
    rows: std::ops::Range<usize>,
    b: &crate::qgemm::QPackedB,
    out: &mut crate::qgemm::QOut<'_>,
    place: crate::qgemm::Place,
) {
    assert!(crate::qgemm::vnni_supported(), "qgemm: a VNNI product on a CPU without AVX-512 VNNI");
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `vnni_supported` says the detected level is AVX-512 (avx512f/dq/bw/vl) and
    // the CPU has avx512vnni: the features `conv_taps_avx512` enables.
    unsafe {
        crate::qgemm::x86::conv_taps_avx512(x, zrow, taps, a, rows, b, out, place)
    }
}

/// The planes of an 8-bit depthwise convolution (see `qgemm::depthwise`): on AVX-512
/// VNNI with VBMI where the CPU has them, else in plain integers.
#[inline]
pub(crate) fn qdw_planes<T: crate::qgemm::Q8>(
    job: &crate::qgemm::depthwise::Planes<'_, T>,
    padded: &mut [u8],
    out: crate::qgemm::depthwise::QDwPlanes<'_>,
) {
    #[cfg(target_arch = "x86_64")]
    if crate::qgemm::depthwise::supported() {
        // SAFETY: `supported` says the detected level is AVX-512 (avx512f/dq/bw/vl) and
        // the CPU has avx512vnni and avx512vbmi: the features `qdw_planes_avx512` enables.
        return unsafe { crate::qgemm::x86::qdw_planes_avx512(job, padded, out) };
    }
    crate::qgemm::depthwise::planes_portable(job, padded, out)
}

/// [`crate::pool::max_pool_ints`] on AVX-512 with VBMI for uint8 and int8 on the windows
/// `pool::x86::bytes::max_bytes_avx512` takes: false, writing nothing, otherwise. `rows` is
/// scratch.
pub(crate) fn max_pool_bytes<T: crate::qgemm::QInt>(
    x: &[T],
    planes: usize,
    g: &crate::conv::Window3d,
    y: &mut [T],
    rows: &mut Vec<T>,
) -> bool {
    #[cfg(target_arch = "x86_64")]
    if crate::qgemm::depthwise::supported() && crate::pool::x86::bytes::max_bytes_fits(g) {
        rows.resize(crate::pool::x86::bytes::max_bytes_row_len(g), T::from_i32(0));
        let (Some(xb), Some(yb), Some(rb)) =
            (super::mem::bytes_of(x), super::mem::bytes_of_mut(y), super::mem::bytes_of_mut(rows))
        else {
            return false;
        };
        // SAFETY: `depthwise::supported` says the detected level is AVX-512
        // (avx512f/dq/bw/vl) and the CPU has avx512vbmi: the features `max_bytes_avx512`
        // enables.
        return unsafe { crate::pool::x86::bytes::max_bytes_avx512(xb, T::MIN < 0, planes, g, yb, rb) };
    }
    let _ = (x, planes, g, y, rows);
    false
}

/// Runs `f` compiled for the widest instruction set this CPU has: `f` must be an
/// `#[inline(always)]` closure, so that its body is built inside the `#[target_feature]`
/// wrapper (LLVM then vectorises its loops for that set).
#[inline(always)]
pub(crate) fn widest<R>(f: impl FnOnce() -> R) -> R {
    match Level::detected() {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: the detected level is AVX-512, so this CPU has avx512f/dq/bw/vl,
            // avx2 and fma, the features `run_avx512` enables.
            unsafe { x86::run_avx512(f) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => {
            // SAFETY: the detected level is AVX2, so this CPU has avx2 and fma, the
            // features `run_avx2` enables.
            unsafe { x86::run_avx2(f) }
        }
        _ => f(),
    }
}

/// The smallest and largest of `x`, NaN ignored (see `qgemm::min_max`).
#[inline]
pub(crate) fn min_max(x: &[f32]) -> (f32, f32) {
    match Level::detected() {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: the detected level is AVX-512, so this CPU has avx512f, the feature
            // `min_max_avx512` enables.
            unsafe { crate::qgemm::x86::min_max_avx512(x) }
        }
        _ => crate::qgemm::min_max_portable(x),
    }
}

/// The 8-bit product of packed operands without VNNI, in the AVX2 build where the CPU
/// has AVX2 (see `qgemm::packed::portable`).
#[inline]
pub(crate) fn qgemm_portable(
    a: &crate::qgemm::QPackedA,
    rows: std::ops::Range<usize>,
    b: &crate::qgemm::QPackedB,
    cols: std::ops::Range<usize>,
    out: &mut crate::qgemm::QOut<'_>,
    place: crate::qgemm::Place,
) {
    match Level::detected() {
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 | Level::Avx512 => {
            // SAFETY: the detected level is AVX2 or above, so this CPU has avx2 and fma,
            // the features `qgemm_portable_avx2` enables.
            unsafe { x86::qgemm_portable_avx2(a, rows, b, cols, out, place) }
        }
        _ => crate::qgemm::portable_body(a, rows, b, cols, out, place),
    }
}

/// Packs all of `op(B)` into `dst` for the driver of `isa` (see `gemm::pack_whole`);
/// returns the floats written and the width of the panels it was packed in.
#[inline]
pub(crate) fn gemm_pack_b(isa: Isa, job: &Job<'_>, dst: &mut [f32]) -> (usize, usize) {
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `pack_b_avx512` enables.
            unsafe { gemm::x86::pack_b_avx512(job, dst) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx2 and fma, the features `pack_b_avx2` enables.
            unsafe { gemm::x86::pack_b_avx2(job, dst) }
        }
        _ => gemm::portable_pack_b(job, dst),
    }
}

/// Packs all of `op(A)` into `dst` for the driver of `isa` (see `gemm::pack_a_whole`);
/// returns the floats written and the rows of the tile it was packed for.
#[inline]
pub(crate) fn gemm_pack_a(isa: Isa, job: &Job<'_>, dst: &mut [f32]) -> (usize, usize) {
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `pack_a_avx512` enables.
            unsafe { gemm::x86::pack_a_avx512(job, dst) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx2 and fma, the features `pack_a_avx2` enables.
            unsafe { gemm::x86::pack_a_avx2(job, dst) }
        }
        _ => gemm::portable_pack_a(job, dst),
    }
}

/// The channels-last depthwise kernel alone, for its tests: false, writing nothing, unless
/// the CPU has AVX-512 and the kernel takes the window.
#[cfg(all(test, target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_channels_last(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    planes: std::ops::Range<usize>,
    channels: usize,
    g: &crate::conv::Window3d,
    y: &mut [f32],
    epilogue: &crate::gemm::Epilogue<'_>,
    scratch: &mut Vec<f32>,
) -> bool {
    if Level::detected() != Level::Avx512 {
        return false;
    }
    // SAFETY: this CPU has AVX-512 (checked above), the features `channels_last` enables.
    unsafe { crate::depthwise::nhwc::channels_last(x, w, bias, planes, channels, g, y, epilogue, scratch) }
}

/// `depthwise::nhwc::from_nhwc` on AVX-512 CPUs; false (nothing written) on others.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_from_nhwc(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    channels: usize,
    blocks: std::ops::Range<usize>,
    g: &crate::conv::Window3d,
    y: &mut [f32],
    epilogue: (&crate::gemm::Epilogue<'_>, usize),
    scratch: &mut Vec<f32>,
) -> bool {
    if Level::detected() != Level::Avx512 {
        return false;
    }
    // SAFETY: this CPU has AVX-512 (checked above), the features `from_nhwc` enables.
    unsafe { crate::depthwise::nhwc::from_nhwc(x, w, bias, channels, blocks, g, y, epilogue, scratch) }
}

/// `depthwise::nhwc::rows_nhwc` on AVX-512 CPUs; false (nothing written) on others.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_rows_nhwc(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    channels: usize,
    g: &crate::conv::Window3d,
    rows: std::ops::Range<usize>,
    y: &mut [f32],
    act: Option<crate::gemm::Activation>,
    scratch: &mut Vec<f32>,
) -> bool {
    if Level::detected() != Level::Avx512 {
        return false;
    }
    // SAFETY: this CPU has AVX-512 (checked above), the features `rows_nhwc` enables.
    unsafe { crate::depthwise::nhwc::rows_nhwc(x, w, bias, channels, g, rows, y, act, scratch) }
}

/// Runs the 2-D depthwise path with the build for `isa`.
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_2d(
    isa: Isa,
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
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `depthwise_avx512` enables.
            unsafe { x86::depthwise_avx512(x, w, bias, planes, channels, g, y, epilogue, scratch) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx2 and fma, the features `depthwise_avx2` enables.
            unsafe { x86::depthwise_avx2(x, w, bias, planes, channels, g, y, epilogue, scratch) }
        }
        _ => crate::depthwise::depthwise_2d::<false>(x, w, bias, planes, channels, g, y, epilogue, scratch),
    }
}

/// The direct convolution's unsplit padded rows ([`crate::direct::pad_rows`]) with the
/// build for `isa`: true where it ran (AVX-512), false (nothing written) where the
/// caller's portable loop is to.
#[inline]
pub(crate) fn pad_rows(
    isa: Isa,
    x: &[f32],
    g: &crate::conv::Window3d,
    src: crate::direct::Source,
    rows: std::ops::Range<usize>,
    dst: &mut [f32],
) -> bool {
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `pad_rows_avx512` enables.
            unsafe { crate::direct::x86::pad_rows_avx512(x, g, src, rows, dst) };
            true
        }
        _ => false,
    }
}

/// Runs the float pools with the build for `isa`.
#[inline]
pub(crate) fn pool(
    isa: Isa,
    x: &[f32],
    planes: usize,
    g: &crate::conv::Window3d,
    mode: crate::conv::Pool,
    pad_end: [usize; 3],
    y: &mut [f32],
) {
    if crate::pool::whole_plane(x, planes, g, mode, pad_end, y) {
        return;
    }
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `pool_avx512` enables.
            unsafe { crate::pool::x86::pool_avx512(x, planes, g, mode, pad_end, y) }
        }
        #[cfg(target_arch = "x86_64")]
        Level::Avx2 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx2 and fma, the features `pool_avx2` enables.
            unsafe { x86::pool_avx2(x, planes, g, mode, pad_end, y) }
        }
        _ => pool_portable(x, planes, g, mode, pad_end, y),
    }
}

/// The portable build of the float pools. Out of line: `pool_flat`'s stack arrays (28 KB)
/// would otherwise make every call of [`pool`] reserve them, the AVX-512 build's too
/// (found by review).
#[inline(never)]
fn pool_portable(
    x: &[f32],
    planes: usize,
    g: &crate::conv::Window3d,
    mode: crate::conv::Pool,
    pad_end: [usize; 3],
    y: &mut [f32],
) {
    if !crate::pool::pool_flat(x, planes, g, mode, pad_end, y) {
        crate::pool::pool_rows(x, planes, g, mode, pad_end, y)
    }
}

/// The bfloat16 direct convolution (see `direct::bf16`). Panics on a CPU without AVX-512
/// BF16.
#[inline]
pub(crate) fn direct_bf16(
    d: &crate::direct::Direct<'_>,
    channels: std::ops::Range<usize>,
    y: &mut [f32],
    carry: &mut Vec<f32>,
) {
    assert!(gemm::bf16_supported(), "direct bf16: a CPU without AVX-512 BF16");
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `bf16_supported` says the detected level is AVX-512 (avx512f/dq/bw/vl, avx2,
    // fma) and the CPU has avx512bf16: the features `direct_bf16_avx512` enables.
    unsafe {
        crate::direct::x86::bf16::direct_bf16_avx512(d, channels, y, carry)
    }
}

/// `lo` and `hi` (zeros when `None`) rounded to bfloat16 pairs in `out`, as
/// `direct::pair_bf16_portable` rounds them, vectorised where the CPU has AVX-512 BF16.
#[inline]
pub(crate) fn pair_bf16(lo: &[f32], hi: Option<&[f32]>, out: &mut [f32]) {
    assert!(lo.len() == out.len() && hi.is_none_or(|h| h.len() == out.len()), "pair_bf16: lengths");
    if gemm::bf16_supported() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `direct_bf16`: the CPU has avx512f/bw and avx512bf16, the features
        // `pair_bf16_avx512` enables.
        unsafe {
            return crate::direct::x86::bf16::pair_bf16_avx512(lo, hi, out);
        }
    }
    crate::direct::pair_bf16_portable(lo, hi, out)
}

/// `lo` and `hi` (zeros when `None`) rounded to bfloat16 pairs as [`pair_bf16`] rounds
/// them, the pairs of even indices into `even` and of odd ones into `odd`.
#[inline]
pub(crate) fn pair_bf16_halves(lo: &[f32], hi: Option<&[f32]>, even: &mut [f32], odd: &mut [f32]) {
    let n = lo.len();
    assert!(hi.is_none_or(|h| h.len() == n), "pair_bf16_halves: lengths");
    assert!(even.len() == n.div_ceil(2) && odd.len() == n / 2, "pair_bf16_halves: lengths");
    if gemm::bf16_supported() {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in `direct_bf16`: the CPU has avx512f/bw and avx512bf16, the features
        // `pair_bf16_halves_avx512` enables.
        unsafe {
            return crate::direct::x86::bf16::pair_bf16_halves_avx512(lo, hi, even, odd);
        }
    }
    crate::direct::pair_bf16_halves_portable(lo, hi, even, odd)
}

/// Runs the direct convolution with the build for `isa`. Panics below AVX-512 (its
/// callers ask [`crate::direct::fits`] first).
#[inline]
pub(crate) fn direct(
    isa: Isa,
    d: &crate::direct::Direct<'_>,
    channels: std::ops::Range<usize>,
    rows: std::ops::Range<usize>,
    y: crate::direct::Out<'_, '_>,
    carry: &mut Vec<f32>,
) {
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `direct_avx512` enables.
            unsafe { crate::direct::x86::direct_avx512(d, channels, rows, y, carry) }
        }
        _ => panic!("direct convolution: needs AVX-512"),
    }
}

/// Runs the Winograd input transform of channels `chans` with the build for `isa`. Panics
/// below AVX-512 (its callers ask [`crate::winograd::fits`] first).
#[inline]
pub(crate) fn winograd_input(
    isa: Isa,
    w: &crate::winograd::Winograd<'_>,
    block: std::ops::Range<usize>,
    chans: std::ops::Range<usize>,
    v: crate::winograd::InputPart<'_>,
    pad: &mut Vec<f32>,
) -> bool {
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `input_avx512` enables.
            unsafe { crate::winograd::x86::input_avx512(w, block, chans, v, pad) }
        }
        _ => panic!("winograd convolution: needs AVX-512"),
    }
}

/// Runs the Winograd output transform with the build for `isa`. Panics below AVX-512.
#[inline]
pub(crate) fn winograd_output(
    isa: Isa,
    w: &crate::winograd::Winograd<'_>,
    block: std::ops::Range<usize>,
    ch: std::ops::Range<usize>,
    row0: usize,
    m: &[f32],
    y: crate::winograd::OutRows<'_, '_>,
) {
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `output_avx512` enables.
            unsafe { crate::winograd::x86::output_avx512(w, block, ch, row0, m, y) }
        }
        _ => panic!("winograd convolution: needs AVX-512"),
    }
}

/// Transposes a block of a float matrix into a block of another (`y[c * ldy + r] =
/// x[r * ldx + c]`) with the build for `isa`.
#[inline]
pub(crate) fn transpose_block(
    isa: Isa,
    x: &[f32],
    (rows, cols, ldx): (usize, usize, usize),
    y: &mut [f32],
    ldy: usize,
) {
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `transpose_into_avx512` enables.
            unsafe { crate::movement::x86::transpose_into_avx512(x, rows, cols, ldx, y, |c| c * ldy) }
        }
        _ => {
            for r in 0..rows {
                for (c, &v) in x[r * ldx..][..cols].iter().enumerate() {
                    y[c * ldy + r] = v;
                }
            }
        }
    }
}

/// Transposes a float matrix with the build for `isa`.
#[inline]
pub(crate) fn transpose_2d(isa: Isa, x: &[f32], rows: usize, cols: usize, y: &mut [f32]) {
    match isa.0 {
        #[cfg(target_arch = "x86_64")]
        Level::Avx512 => {
            // SAFETY: an `Isa` never exceeds `Level::detected()`, so this CPU has
            // avx512f/dq/bw/vl, avx2 and fma, the features `transpose_avx512` enables.
            unsafe { crate::movement::x86::transpose_avx512(x, rows, cols, y) }
        }
        _ => crate::movement::transpose(x, &[rows, cols], &[1, 0], y),
    }
}

/// The `#[target_feature]` builds (`dispatch/x86.rs`).
#[cfg(target_arch = "x86_64")]
mod x86;
