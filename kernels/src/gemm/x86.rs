//! x86-64 microkernels and their builds of the driver. These are safe `#[target_feature]`
//! functions: `arch::dispatch` calls the entry points once an `Isa` proves the features,
//! and the vector loads/stores go through its reference-taking helpers (`arch::mem`).

use super::{run, GemmScratch, Job, Out};
use crate::arch::mem::{load16, load8, store16, store8};
use std::arch::x86_64::*;

/// AVX-512 tile: 14 rows × 32 columns = 28 zmm accumulators, plus 2 for the row of B
/// (the A elements are broadcast straight from memory).
const MR512: usize = 14;
const NR512: usize = 32;

/// AVX2 tile: 6 rows × 16 columns = 12 ymm accumulators, 2 for B, 1 broadcast.
const MR256: usize = 6;
const NR256: usize = 16;

/// Depth block and column block: an A strip (MR × KC) stays in L1, the packed B block
/// (KC × NC) in L2.
const KC: usize = 256;
const NC: usize = 512;

/// The AVX-512 build of the driver.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn gemm_avx512(scratch: &mut GemmScratch, job: &Job<'_>, c: &mut [f32]) {
    run::<MR512, NR512>(scratch, job, c, KC, NC, |a, b, t| micro_avx512(a, b, t));
}

/// The AVX2 + FMA build of the driver.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn gemm_avx2(scratch: &mut GemmScratch, job: &Job<'_>, c: &mut [f32]) {
    run::<MR256, NR256>(scratch, job, c, KC, NC, |a, b, t| micro_avx2(a, b, t));
}

#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn micro_avx512(a: &[[f32; MR512]], b: &[[f32; NR512]], out: Out<'_, MR512, NR512>) {
    let mut acc = [[_mm512_setzero_ps(); 2]; MR512];
    for (ar, br) in a.iter().zip(b) {
        let (b0, b1) = halves(br);
        let (b0, b1) = (load16(b0), load16(b1));
        for (row, &av) in acc.iter_mut().zip(ar) {
            let av = _mm512_set1_ps(av);
            row[0] = _mm512_fmadd_ps(av, b0, row[0]);
            row[1] = _mm512_fmadd_ps(av, b1, row[1]);
        }
    }
    match out {
        Out::Tile(tile) => {
            for (t, row) in tile.iter_mut().zip(&acc) {
                let (t0, t1) = halves_mut(t);
                store16(t0, row[0]);
                store16(t1, row[1]);
            }
        }
        Out::C { c, ldc, alpha, beta } => {
            let (alpha, beta_v) = (_mm512_set1_ps(alpha), _mm512_set1_ps(beta));
            for (i, row) in acc.iter().enumerate() {
                let (c0, c1) = halves_mut(row_mut::<NR512>(c, i * ldc));
                let (v0, v1) = (_mm512_mul_ps(alpha, row[0]), _mm512_mul_ps(alpha, row[1]));
                if beta == 0.0 {
                    store16(c0, v0);
                    store16(c1, v1);
                } else {
                    store16(c0, _mm512_fmadd_ps(beta_v, load16(c0), v0));
                    store16(c1, _mm512_fmadd_ps(beta_v, load16(c1), v1));
                }
            }
        }
    }
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn micro_avx2(a: &[[f32; MR256]], b: &[[f32; NR256]], out: Out<'_, MR256, NR256>) {
    let mut acc = [[_mm256_setzero_ps(); 2]; MR256];
    for (ar, br) in a.iter().zip(b) {
        let (b0, b1) = halves(br);
        let (b0, b1) = (load8(b0), load8(b1));
        for (row, &av) in acc.iter_mut().zip(ar) {
            let av = _mm256_set1_ps(av);
            row[0] = _mm256_fmadd_ps(av, b0, row[0]);
            row[1] = _mm256_fmadd_ps(av, b1, row[1]);
        }
    }
    match out {
        Out::Tile(tile) => {
            for (t, row) in tile.iter_mut().zip(&acc) {
                let (t0, t1) = halves_mut(t);
                store8(t0, row[0]);
                store8(t1, row[1]);
            }
        }
        Out::C { c, ldc, alpha, beta } => {
            let (alpha, beta_v) = (_mm256_set1_ps(alpha), _mm256_set1_ps(beta));
            for (i, row) in acc.iter().enumerate() {
                let (c0, c1) = halves_mut(row_mut::<NR256>(c, i * ldc));
                let (v0, v1) = (_mm256_mul_ps(alpha, row[0]), _mm256_mul_ps(alpha, row[1]));
                if beta == 0.0 {
                    store8(c0, v0);
                    store8(c1, v1);
                } else {
                    store8(c0, _mm256_fmadd_ps(beta_v, load8(c0), v0));
                    store8(c1, _mm256_fmadd_ps(beta_v, load8(c1), v1));
                }
            }
        }
    }
}

/// `c[at..at + N]` as an array.
#[inline(always)]
fn row_mut<const N: usize>(c: &mut [f32], at: usize) -> &mut [f32; N] {
    (&mut c[at..at + N]).try_into().expect("N elements")
}

/// The two halves of an array of even length `N = 2 * H`.
#[inline(always)]
fn halves<const N: usize, const H: usize>(x: &[f32; N]) -> (&[f32; H], &[f32; H]) {
    let (lo, hi) = x.split_at(H);
    (lo.try_into().expect("N = 2H"), hi.try_into().expect("N = 2H"))
}

#[inline(always)]
fn halves_mut<const N: usize, const H: usize>(x: &mut [f32; N]) -> (&mut [f32; H], &mut [f32; H]) {
    let (lo, hi) = x.split_at_mut(H);
    (lo.try_into().expect("N = 2H"), hi.try_into().expect("N = 2H"))
}
