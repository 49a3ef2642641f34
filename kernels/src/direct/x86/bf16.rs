//! The AVX-512 BF16 build of the bfloat16 direct convolution (`direct::bf16`): the float
//! build's tile walk, filters and epilogue, with a pair of input channels a step of depth
//! and `vdpbf16ps` in place of the fused multiply-add.

use std::arch::x86_64::*;
use std::ops::Range;

use super::{each_block, each_tile, finish, first_sums, r_max, Blocks, Geo, Tile, CHUNK_TAPS};
use crate::arch::mem::{bcast_bh, load_bh, store16};
use crate::direct::{Direct, Out, BLOCK};
use crate::gemm::bf16_x86::pair16;

/// See `Direct::run_bf16`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
pub(crate) fn direct_bf16_avx512(d: &Direct<'_>, channels: Range<usize>, y: &mut [f32], carry: &mut Vec<f32>) {
    let geo = Geo::of(d, d.cg.div_ceil(2));
    let s = d.g.stride[2];
    each_block(&channels, geo.positions, &mut Out::Whole(y), |nb, ch, y| match nb {
        4 => block_rows::<4>(d, &geo, s, ch, y, carry),
        3 => block_rows::<3>(d, &geo, s, ch, y, carry),
        2 => block_rows::<2>(d, &geo, s, ch, y, carry),
        _ => block_rows::<1>(d, &geo, s, ch, y, carry),
    });
}

/// The outputs of channels `ch` (at most `NB` blocks) into `y` (their rows); `s` is the
/// width stride. Every tile runs across rows, each output from its own first input.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
fn block_rows<const NB: usize>(
    d: &Direct<'_>,
    geo: &Geo,
    s: usize,
    ch: Range<usize>,
    mut y: Out<'_, '_>,
    carry: &mut Vec<f32>,
) {
    let blocks = Blocks::<NB>::of(d, geo, &ch, CHUNK_TAPS);
    let carry = blocks.carry(geo, carry);
    let b = blocks.bias.as_ref();
    each_tile(geo, s, true, r_max(NB), blocks.per_chunk, |r, at| {
        let carry = if carry.is_empty() { &mut [] } else { &mut carry[at.pos..at.pos + r] };
        macro_rules! tiles {
            ($($n:literal)*) => {
                match r {
                    $($n => tile::<$n, NB>(d, geo, &blocks.w, b, &ch, at, carry, &mut y),)*
                    _ => unreachable!("tile of {r} outputs"),
                }
            };
        }
        tiles!(1 2 3 4 5 6 7 8);
    });
}

/// One tile: `R` outputs from position `at.pos`, the channels `ch`, summed over the
/// pairs of input channels `at.cs` (carried in `carry` between depth chunks).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
#[inline]
#[allow(clippy::too_many_arguments)]
fn tile<const R: usize, const NB: usize>(
    d: &Direct<'_>,
    geo: &Geo,
    w: &[&[[f32; BLOCK]]; NB],
    bias: Option<&[__m512; NB]>,
    ch: &Range<usize>,
    at: Tile,
    carry: &mut [[[f32; BLOCK]; NB]],
    y: &mut Out<'_, '_>,
) {
    let mut acc = first_sums::<R, NB>(&at, carry);
    // The inputs of a kernel row: from each output's first, the taps' span.
    let span = (geo.kw - 1) * geo.kx_step + 1;
    let mut k = at.cs.start * geo.kh * geo.kw;
    for p in at.cs.clone() {
        for ky in 0..geo.kh {
            let mut rows = [&[] as &[f32]; R];
            for (row, &base) in rows.iter_mut().zip(&at.bases) {
                *row = &d.x[base + p * geo.plane + ky * geo.ky_step..][..span];
            }
            for kx in 0..geo.kw {
                let wv: [__m512bh; NB] = std::array::from_fn(|i| load_bh(&w[i][k]));
                for (acc, row) in acc.iter_mut().zip(&rows) {
                    let v = bcast_bh(row[kx * geo.kx_step]);
                    for (a, &wi) in acc.iter_mut().zip(&wv) {
                        *a = _mm512_dpbf16_ps(*a, v, wi);
                    }
                }
                k += 1;
            }
        }
    }
    // The sums leave the registers once, here (see `wide_tile`).
    let sums = acc;
    finish::<R, NB>(d, geo, bias, ch, &at, &sums, carry, y);
}

/// See `arch::pair_bf16_halves`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
pub(crate) fn pair_bf16_halves_avx512(lo: &[f32], hi: Option<&[f32]>, even: &mut [f32], odd: &mut [f32]) {
    let (ie, io) = (
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31),
    );
    // 32 inputs a step, the last step's past the row read as zeros and not stored.
    for j in (0..lo.len()).step_by(32) {
        let n = 32.min(lo.len() - j);
        let (mut l, mut h) = ([0f32; 32], [0f32; 32]);
        l[..n].copy_from_slice(&lo[j..][..n]);
        if let Some(hi) = hi {
            h[..n].copy_from_slice(&hi[j..][..n]);
        }
        let ([l0, l1], [h0, h1]) = (l.as_chunks::<16>().0, h.as_chunks::<16>().0) else { unreachable!() };
        let (v0, v1) = (pair16(l0, h0), pair16(l1, h1));
        let (mut e, mut o) = ([0f32; 16], [0f32; 16]);
        store16(&mut e, _mm512_permutex2var_ps(v0, ie, v1));
        store16(&mut o, _mm512_permutex2var_ps(v0, io, v1));
        even[j / 2..][..n.div_ceil(2)].copy_from_slice(&e[..n.div_ceil(2)]);
        odd[j / 2..][..n / 2].copy_from_slice(&o[..n / 2]);
    }
}

/// See `arch::pair_bf16`.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,avx512bf16")]
pub(crate) fn pair_bf16_avx512(lo: &[f32], hi: Option<&[f32]>, out: &mut [f32]) {
    let n = out.len() / 16 * 16;
    let (lo_v, lo_t) = lo.as_chunks::<16>();
    let (out_v, out_t) = out.as_chunks_mut::<16>();
    let zeros = [0f32; 16];
    for (j, (o, l)) in out_v.iter_mut().zip(lo_v).enumerate() {
        let h: &[f32; 16] = hi.map_or(&zeros, |h| h[16 * j..][..16].try_into().expect("16 floats"));
        store16(o, pair16(l, h));
    }
    crate::direct::pair_bf16_portable(lo_t, hi.map(|h| &h[n..]), out_t);
}
