//! Explicit AVX-512 and AVX2 kernels for `Exp`, `Sigmoid`, `GeluTanh`
//! (`x sigmoid(2u)`), `Erf` and `Gelu`.
//!
//! All use `e^x` from an 8-entry table of `2^(j/8)` (`math::texp`): after
//! the argument reduction that is one register permute per table and four
//! fused multiply-adds, where the portable formulas need six or seven
//! multiply-adds plus a multiply or integer ops for the scaling. LLVM would
//! turn a table lookup in scalar code into a gather, so these kernels are
//! written with intrinsics: `k16` for AVX-512 (16 lanes), `k8` for AVX2 (8
//! lanes). AVX-512 has single instructions for a few steps (`vrangeps` for
//! magnitudes, `vscalefps` for the scaling by `2^m`, `vfixupimmps` for
//! Sigmoid's numerator); the AVX2 code computes the same values with a few
//! more, so both levels give the same bits. The portable build keeps the
//! scalar formulas (within the same pinned bounds).
//!
//! Loads and stores go through arrays (`setr` and lane extracts, which LLVM
//! turns into plain vector moves), so this module needs no `unsafe`. The tail
//! of a slice goes through one zero-padded block, so a one-element call runs
//! the same code as a long one.

use std::arch::x86_64::*;

use crate::unary::{Io, GUARD_BLOCK};

mod k16;
mod k8;

#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn load16(v: &[f32; 16]) -> __m512 {
    _mm512_setr_ps(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9], v[10], v[11], v[12], v[13], v[14], v[15])
}

#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn store16(q: __m512) -> [f32; 16] {
    let mut out = [0.0; 16];
    store4(_mm512_extractf32x4_ps::<0>(q), &mut out[..4]);
    store4(_mm512_extractf32x4_ps::<1>(q), &mut out[4..8]);
    store4(_mm512_extractf32x4_ps::<2>(q), &mut out[8..12]);
    store4(_mm512_extractf32x4_ps::<3>(q), &mut out[12..]);
    out
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn load8(v: &[f32; 8]) -> __m256 {
    _mm256_setr_ps(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7])
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn store8(q: __m256) -> [f32; 8] {
    let mut out = [0.0; 8];
    store4(_mm256_castps256_ps128(q), &mut out[..4]);
    store4(_mm256_extractf128_ps::<1>(q), &mut out[4..]);
    out
}

/// Writes the four lanes of `v` to `o[..4]` (LLVM merges the stores).
#[target_feature(enable = "avx2,fma")]
#[inline]
fn store4(v: __m128, o: &mut [f32]) {
    o[0] = _mm_cvtss_f32(v);
    o[1] = _mm_cvtss_f32(_mm_permute_ps::<1>(v));
    o[2] = _mm_cvtss_f32(_mm_permute_ps::<2>(v));
    o[3] = _mm_cvtss_f32(_mm_permute_ps::<3>(v));
}

/// `blocks!(io, lanes, x => body)` writes `body` (an array, with `x: &[f32;
/// lanes]` bound to the inputs) to the outputs, block by block. The body is
/// pasted, so it is inlined into the `#[target_feature]` function for sure.
macro_rules! blocks {
    ($io:expr, $lanes:expr, $x:ident => $body:expr) => {{
        let mut pad = [0.0f32; $lanes];
        match $io {
            Io::Out(x, y) => {
                let mut xc = x.chunks_exact($lanes);
                let mut yc = y.chunks_exact_mut($lanes);
                for (xb, yb) in (&mut xc).zip(&mut yc) {
                    let $x: &[f32; $lanes] = xb.try_into().expect("block");
                    yb.copy_from_slice(&$body);
                }
                let (xr, yr) = (xc.remainder(), yc.into_remainder());
                if !xr.is_empty() {
                    pad[..xr.len()].copy_from_slice(xr);
                    let $x = &pad;
                    yr.copy_from_slice(&$body[..xr.len()]);
                }
            }
            Io::InPlace(xy) => {
                let mut c = xy.chunks_exact_mut($lanes);
                for b in &mut c {
                    let $x: &[f32; $lanes] = (&*b).try_into().expect("block");
                    let r = $body;
                    b.copy_from_slice(&r);
                }
                let rest = c.into_remainder();
                if !rest.is_empty() {
                    pad[..rest.len()].copy_from_slice(rest);
                    let $x = &pad;
                    let r = $body;
                    rest.copy_from_slice(&r[..rest.len()]);
                }
            }
        }
    }};
}

/// `e^x` over `io` in guarded blocks (as `map_guarded!`): `$exp::<false>`
/// (no clamping, cheaper scaling on AVX2) on blocks of [`GUARD_BLOCK`]
/// elements whose magnitudes are all at most 87, `$exp::<true>` on the
/// others; both give the same bits where both apply.
macro_rules! exp_guarded {
    ($io:expr, $lanes:expr, $tame:path, $exp:ident) => {{
        match $io {
            Io::Out(x, y) => {
                for (xc, yc) in x.chunks(GUARD_BLOCK).zip(y.chunks_mut(GUARD_BLOCK)) {
                    if $tame(xc) {
                        blocks!(Io::Out(xc, yc), $lanes, b => $exp::<false>(b))
                    } else {
                        blocks!(Io::Out(xc, yc), $lanes, b => $exp::<true>(b))
                    }
                }
            }
            Io::InPlace(xy) => {
                for c in xy.chunks_mut(GUARD_BLOCK) {
                    if $tame(c) {
                        blocks!(Io::InPlace(c), $lanes, b => $exp::<false>(b))
                    } else {
                        blocks!(Io::InPlace(c), $lanes, b => $exp::<true>(b))
                    }
                }
            }
        }
    }};
}

/// Exp, AVX-512 build. With a separate output, each block is computed without clamping
/// while its magnitudes are checked in the same pass, and computed again with clamping
/// when one of them exceeds 87: the tame blocks are read once (a separate check pass
/// cost about a tenth of the time). In place, the check comes first, as in
/// `exp_guarded!`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn exp_avx512(io: Io<'_>) {
    use k16::exp;
    match io {
        Io::Out(x, y) => {
            for (xc, yc) in x.chunks(GUARD_BLOCK).zip(y.chunks_mut(GUARD_BLOCK)) {
                if !k16::exp_tame_into(xc, yc) {
                    blocks!(Io::Out(xc, yc), 16, b => exp::<true>(b))
                }
            }
        }
        io @ Io::InPlace(_) => exp_guarded!(io, 16, k16::tame, exp),
    }
}

/// Exp, AVX2 build.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn exp_avx2(io: Io<'_>) {
    use k8::exp;
    exp_guarded!(io, 8, k8::tame, exp)
}

/// Sigmoid, AVX-512 build.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn sigmoid_avx512(io: Io<'_>) {
    blocks!(io, 16, x => k16::sigmoid(x))
}

/// SiLU, `x * sigmoid(x)`, AVX-512 build: the Sigmoid kernel's value times x, exactly,
/// in one pass (the Sigmoid + Mul pair's bits).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn silu_avx512(io: Io<'_>) {
    blocks!(io, 16, x => {
        let s = k16::sigmoid(x);
        let mut r = [0.0f32; 16];
        for ((r, &x), &s) in r.iter_mut().zip(x).zip(&s) {
            *r = x * s;
        }
        r
    })
}

/// SiLU, AVX2 build.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn silu_avx2(io: Io<'_>) {
    blocks!(io, 8, x => {
        let s = k8::sigmoid(x);
        let mut r = [0.0f32; 8];
        for ((r, &x), &s) in r.iter_mut().zip(x).zip(&s) {
            *r = x * s;
        }
        r
    })
}

/// Softmax (or, with `log`, LogSoftmax) of each row of `n` elements of `x` into `y`,
/// AVX-512 build, in registers with no call per row and masked loads and stores for a
/// row's last `n % 16`: the row's maximum; then the terms `e^max(x - max, -87)` (NaN
/// kept; see `norm::above_underflow`) by `k16::exp` unclamped, whose range that is, with
/// their sum in 16 lanes as `norm::lanes_sum` makes it (the lanes in order, then the
/// tail); then the terms scaled as `norm::scale_terms` does, or for `log` `x - max -
/// ln(sum)`. The bits of `norm::softmax_row` (a NaN where it has one, its payload maybe
/// another: review found a row of two NaNs give the first's payload twice). The maximum
/// is reduced across lanes in another order than `lanes_max`'s; that can only pick the
/// other sign of a zero maximum, which changes no output: every term is `e^(x - max)`
/// with `e^(+0) = e^(-0)`, and such a row has two zero terms, so `log` subtracts
/// `ln(sum) >= ln 2` from `+0` and `-0` alike.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn softmax_rows_avx512(x: &[f32], y: &mut [f32], n: usize, log: bool) {
    use super::mem::{load16, load_lanes, store16, store_first};
    let tail = n % 16;
    let mask = ((1u32 << tail) - 1) as __mmask16;
    let (floor, flush) = (_mm512_set1_ps(-87.0), _mm512_set1_ps(crate::norm::FLUSH));
    for (xr, yr) in x.chunks_exact(n).zip(y.chunks_exact_mut(n)) {
        let (xc, xt) = xr.as_chunks::<16>();
        // `max_ps(v, m)` is m where v is NaN: NaN ignored, as by `lanes_max`.
        let mut m = _mm512_set1_ps(f32::NEG_INFINITY);
        for b in xc {
            m = _mm512_max_ps(load16(b), m);
        }
        if tail > 0 {
            m = _mm512_mask_max_ps(m, mask, load_lanes(xt, 0, mask), m);
        }
        let max = _mm512_set1_ps(_mm512_reduce_max_ps(m));
        // `max_ps(floor, d)` is d where d is NaN, as `above_underflow` keeps it.
        let term = |v: __m512| k16::exp_v::<false>(_mm512_max_ps(floor, _mm512_sub_ps(v, max)));
        let mut acc = _mm512_setzero_ps();
        let (yc, yt) = yr.as_chunks_mut::<16>();
        for (xb, yb) in xc.iter().zip(yc.iter_mut()) {
            let e = term(load16(xb));
            acc = _mm512_add_ps(acc, e);
            if !log {
                store16(yb, e);
            }
        }
        let mut tail_terms = [0.0f32; 16];
        if tail > 0 {
            let e = term(load_lanes(xt, 0, mask));
            store16(&mut tail_terms, e);
            if !log {
                store_first(yt, tail, e);
            }
        }
        let mut lanes = [0.0f32; 16];
        store16(&mut lanes, acc);
        let sum = lanes.iter().sum::<f32>() + tail_terms[..tail].iter().sum::<f32>();
        let (yc, yt) = yr.as_chunks_mut::<16>();
        if log {
            // `x - max - ln(sum)`, as `softmax_row` makes it.
            let ln = _mm512_set1_ps(sum.ln());
            let out = |v: __m512| _mm512_sub_ps(_mm512_sub_ps(v, max), ln);
            for (xb, yb) in xc.iter().zip(yc.iter_mut()) {
                store16(yb, out(load16(xb)));
            }
            if tail > 0 {
                store_first(yt, tail, out(load_lanes(xt, 0, mask)));
            }
        } else {
            // A term below FLUSH is 0 before the multiply (NaN is not below it).
            let inv = _mm512_set1_ps(1.0 / sum);
            let out =
                |e: __m512| _mm512_mul_ps(_mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_NLT_UQ>(e, flush), e), inv);
            for yb in yc.iter_mut() {
                let v = out(load16(yb));
                store16(yb, v);
            }
            if tail > 0 {
                let v = out(load_lanes(yt, 0, mask));
                store_first(yt, tail, v);
            }
        }
    }
}

/// [`softmax_rows_avx512`] along an axis of `n` elements `inner` apart (a Softmax over a
/// channel axis: YOLO's box distributions, segmentation heads), 16 columns a vector: each
/// column gets the bits its row would get there (the columns transposed into rows). Row
/// `k`'s term goes to the sum of lane `k % 16` of the rows path, kept here in 16 vectors
/// (one per lane, over 16 columns), then the lanes in order and the tail, as there.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn softmax_cols_avx512(x: &[f32], y: &mut [f32], n: usize, inner: usize, log: bool) {
    use super::mem::{load_lanes, store_first};
    let (floor, flush) = (_mm512_set1_ps(-87.0), _mm512_set1_ps(crate::norm::FLUSH));
    let full = n / 16 * 16;
    for (xo, yo) in x.chunks_exact(n * inner).zip(y.chunks_exact_mut(n * inner)) {
        for c0 in (0..inner).step_by(16) {
            let w = (inner - c0).min(16);
            let mask = ((1u32 << w) - 1) as __mmask16;
            let load = |v: &[f32], k: usize| load_lanes(v, (k * inner + c0) as isize, mask);
            let mut max = _mm512_set1_ps(f32::NEG_INFINITY);
            for k in 0..n {
                // NaN ignored, as by `lanes_max` (see the rows).
                max = _mm512_mask_max_ps(max, mask, load(xo, k), max);
            }
            let term = |v: __m512| k16::exp_v::<false>(_mm512_max_ps(floor, _mm512_sub_ps(v, max)));
            let mut lanes = [_mm512_setzero_ps(); 16];
            for block in (0..full).step_by(16) {
                for (l, lane) in lanes.iter_mut().enumerate() {
                    let k = block + l;
                    let e = term(load(xo, k));
                    *lane = _mm512_add_ps(*lane, e);
                    if !log {
                        store_first(&mut yo[k * inner + c0..], w, e);
                    }
                }
            }
            let mut tail = _mm512_set1_ps(-0.0);
            for k in full..n {
                let e = term(load(xo, k));
                tail = _mm512_add_ps(tail, e);
                if !log {
                    store_first(&mut yo[k * inner + c0..], w, e);
                }
            }
            let sum = _mm512_add_ps(lanes.iter().fold(_mm512_set1_ps(-0.0), |s, &l| _mm512_add_ps(s, l)), tail);
            if log {
                let mut sums = [0.0f32; 16];
                super::mem::store16(&mut sums, sum);
                let ln = super::mem::load16(&sums.map(f32::ln));
                for k in 0..n {
                    store_first(&mut yo[k * inner + c0..], w, _mm512_sub_ps(_mm512_sub_ps(load(xo, k), max), ln));
                }
            } else {
                let inv = _mm512_div_ps(_mm512_set1_ps(1.0), sum);
                for k in 0..n {
                    let e = load(yo, k);
                    let kept = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_NLT_UQ>(e, flush), e);
                    store_first(&mut yo[k * inner + c0..], w, _mm512_mul_ps(kept, inv));
                }
            }
        }
    }
}

/// One plane of instance normalization, AVX-512 build: the float64 sums of
/// `nn::lane_sum` (element `i` into lane `i % 32`, the 32 lanes four vectors of 8, then
/// halved in the same tree, then the rest in order), the mean's and the variance's, then
/// `(x - mean) * g + bias` in float32: the portable plane's operations in its order, so
/// its bits (LLVM had kept the portable plane's float64 lanes in two-lane registers).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn instance_plane_avx512(xs: &[f32], ys: &mut [f32], scale: f32, bias: f32, epsilon: f32) {
    use super::mem::{load16, load8, load_lanes, store16, store_first};
    let sum = |f: &dyn Fn(__m512d) -> __m512d, g: &dyn Fn(f64) -> f64| -> f64 {
        let (chunks, rest) = xs.as_chunks::<32>();
        let mut a = [_mm512_setzero_pd(); 4];
        for c in chunks {
            let (eights, _) = c.as_chunks::<8>();
            for (a, e) in a.iter_mut().zip(eights) {
                *a = _mm512_add_pd(*a, f(_mm512_cvtps_pd(load8(e))));
            }
        }
        // Lane j plus lane j + 16, j + 8, j + 4, j + 2, j + 1.
        let h16 = [_mm512_add_pd(a[0], a[2]), _mm512_add_pd(a[1], a[3])];
        let h8 = _mm512_add_pd(h16[0], h16[1]);
        let h4 = _mm256_add_pd(_mm512_castpd512_pd256(h8), _mm512_extractf64x4_pd::<1>(h8));
        let h2 = _mm_add_pd(_mm256_castpd256_pd128(h4), _mm256_extractf128_pd::<1>(h4));
        let h1 = _mm_add_sd(h2, _mm_unpackhi_pd(h2, h2));
        rest.iter().fold(_mm_cvtsd_f64(h1), |s, &v| s + g(f64::from(v)))
    };
    let n = xs.len() as f64;
    let mean = sum(&|v| v, &|v| v) / n;
    let m = _mm512_set1_pd(mean);
    let var = sum(&|v| _mm512_mul_pd(_mm512_sub_pd(v, m), _mm512_sub_pd(v, m)), &|v| (v - mean) * (v - mean)) / n;
    let g = (f64::from(scale) / (var + f64::from(epsilon)).sqrt()) as f32;
    let (mean, g, b) = (_mm512_set1_ps(mean as f32), _mm512_set1_ps(g), _mm512_set1_ps(bias));
    let out = |v: __m512| _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(v, mean), g), b);
    let (xc, xt) = xs.as_chunks::<16>();
    let (yc, yt) = ys.as_chunks_mut::<16>();
    for (x, y) in xc.iter().zip(yc.iter_mut()) {
        store16(y, out(load16(x)));
    }
    if !xt.is_empty() {
        let mask = ((1u32 << xt.len()) - 1) as __mmask16;
        store_first(yt, xt.len(), out(load_lanes(xt, 0, mask)));
    }
}

/// GELU (tanh form), AVX-512 build.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn gelu_tanh_avx512(io: Io<'_>) {
    blocks!(io, 16, x => k16::gelu_tanh(x))
}

/// GELU (tanh form), AVX2 build.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn gelu_tanh_avx2(io: Io<'_>) {
    blocks!(io, 8, x => k8::gelu_tanh(x))
}

/// Erf, AVX-512 build.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn erf_avx512(io: Io<'_>) {
    blocks!(io, 16, x => k16::erf(x))
}

/// Erf, AVX2 build.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn erf_avx2(io: Io<'_>) {
    blocks!(io, 8, x => k8::erf(x))
}

/// Exact GELU, AVX-512 build.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn gelu_avx512(io: Io<'_>) {
    blocks!(io, 16, x => k16::gelu(x))
}

/// Exact GELU, AVX2 build.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn gelu_avx2(io: Io<'_>) {
    blocks!(io, 8, x => k8::gelu(x))
}

/// Sigmoid, AVX2 build.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn sigmoid_avx2(io: Io<'_>) {
    blocks!(io, 8, x => k8::sigmoid(x))
}

#[cfg(test)]
mod tests {
    use crate::{Level, UnaryOp};

    /// Every 4099th f32 bit pattern (all exponents, both signs, NaNs and
    /// infinities): the AVX2 code spells out what one AVX-512 instruction
    /// does, so the two must agree bit for bit (NaN as NaN).
    #[test]
    fn avx2_matches_avx512() {
        if !Level::supported().contains(&Level::Avx512) {
            return;
        }
        let xs: Vec<f32> = (0..u32::MAX).step_by(4099).map(f32::from_bits).collect();
        for op in [UnaryOp::Exp, UnaryOp::Sigmoid, UnaryOp::GeluTanh, UnaryOp::Erf, UnaryOp::Gelu] {
            let (mut a, mut b) = (vec![0.0; xs.len()], vec![0.0; xs.len()]);
            op.apply_at(Level::Avx2, &xs, &mut a);
            op.apply_at(Level::Avx512, &xs, &mut b);
            for ((x, a), b) in xs.iter().zip(&a).zip(&b) {
                assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "{op:?}({x:e}): {a:e} vs {b:e}");
            }
        }
    }
}
