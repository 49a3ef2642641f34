//! x86-64 microkernels and their builds of the driver. These are safe `#[target_feature]`
//! functions: `arch::dispatch` calls the entry points once an `Isa` proves the features,
//! and the vector loads/stores go through its reference-taking helpers (`arch::mem`).

use super::driver::Fin;
use super::{pack_a_whole, pack_whole, run, APanel, BPanel, Bias, GemmScratch, Job, Out, MID_MR, SHORT_MR, TINY_MR};
use crate::arch::mem::{load16, load8, store16, store8};
use std::arch::x86_64::*;

/// AVX-512 tiles: 14 rows × 32 columns (28 zmm accumulators, 2 for the row of B) or
/// 8 × 48 (24 and 3); the A elements are broadcast straight from memory. Each product
/// takes the one that leaves less of its edge tiles empty: 8 rows divide the channel and
/// sequence counts models use (64, 256, ...), where 14 leave a partly empty last strip
/// (64 × 3136 × 576, a 3x3 Conv on 64 channels, runs 15% faster on 8 × 48), while 32
/// columns fit narrow products (64 × 64 attention heads) and 512 × 512 better.
const MR512: usize = 14;
const NR512: usize = 32;
const MR512_WIDE: usize = 8;
const NR512_WIDE: usize = 48;

pub(crate) const TILE_AVX512: (usize, usize) = (MR512, NR512);
pub(crate) const TILE_AVX512_WIDE: (usize, usize) = (MR512_WIDE, NR512_WIDE);
pub(crate) const TILE_AVX2: (usize, usize) = (MR256, NR256);

/// AVX2 tile: 6 rows × 16 columns = 12 ymm accumulators, 2 for B, 1 broadcast.
const MR256: usize = 6;
const NR256: usize = 16;

/// Depth block and column block: an A strip (MR × KC) stays in L1, the packed B block
/// (KC × NC) in L2.
const KC: usize = 256;
const NC: usize = 512;
/// AVX-512's depth block, for both tiles: one depth blocking for both keeps every split
/// of a product bit-identical to the whole whichever tile each part takes. At 128 each
/// tile of C was merged (read, added, written) twice as often: on Zen 4, one thread, B
/// packed, 256 ran 512^3 at 111 GFLOP/s against 106, 64x688x256 (a Llama MLP) 109
/// against 106, 65x768x192 110 against 106, and a 64x3136x576 3x3 Conv's product (8 x 48
/// tile, its 48 KiB B panel now past L1) the same within noise.
const KC512: usize = 256;
/// [`KC512`] on a CPU that runs AVX-512 in halves ([`crate::arch::avx512_in_halves`], AMD
/// Zen 4): half as many merges of each tile of C, with the 14-row strip of A (28 KiB)
/// still in its 32 KiB L1 and a B panel (64 KiB) in L2. Kernel only, B packed, one
/// thread, Zen 4 family 25 model 17, GFLOP/s 256 -> 512: 512^3 113.7 -> 115.5,
/// 197x384x1536 113.6 -> 115.3, 384x1536x384 112.9 -> 115.2, 256x784x2304 111.5 ->
/// 113.8, 64x688x256 the same. In the models (paired, one thread): t5_small 0.981,
/// vit_small 0.987, bert_small 0.989, whisper_tiny 0.984, resnet18 0.986 of the old time.
const KC512_HALVES: usize = 512;

/// The AVX-512 depth block on this CPU.
fn kc512() -> usize {
    if crate::arch::avx512_in_halves() {
        KC512_HALVES
    } else {
        KC512
    }
}

/// The AVX-512 build of the driver.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn gemm_avx512(scratch: &mut GemmScratch, job: &Job<'_>, c: &mut [f32]) {
    if wide_tile(job) {
        // The tile is the mid kernel's height: it has none.
        run::<MR512_WIDE, NR512_WIDE, SHORT_MR>(
            scratch,
            job,
            c,
            kc512(),
            NC,
            true,
            true,
            true,
            |a, b, t| narrow::<MR512_WIDE, MR512_WIDE, NR512_WIDE, 3>(a, b, t),
            |a, b, t| narrow::<MR512_WIDE, SHORT_MR, NR512_WIDE, 3>(a, b, t),
            |a, b, t| narrow::<MR512_WIDE, SHORT_MR, NR512_WIDE, 3>(a, b, t),
            |a, b, t| narrow::<MR512_WIDE, TINY_MR, NR512_WIDE, 3>(a, b, t),
        );
    } else {
        run::<MR512, NR512, MID_MR>(
            scratch,
            job,
            c,
            kc512(),
            NC,
            true,
            true,
            true,
            |a, b, t| narrow::<MR512, MR512, NR512, 2>(a, b, t),
            |a, b, t| narrow::<MR512, MID_MR, NR512, 2>(a, b, t),
            |a, b, t| narrow::<MR512, SHORT_MR, NR512, 2>(a, b, t),
            |a, b, t| narrow::<MR512, TINY_MR, NR512, 2>(a, b, t),
        );
    }
}

/// Whether an AVX-512 product takes the 8 × 48 tile: the one of the two whose edge tiles
/// leave less empty, from the whole product's shape (a row split takes the same tile;
/// another tile would give the same bits too, the depth blocks being the same).
fn wide_tile(job: &Job<'_>) -> bool {
    match (job.packed_a, job.packed_b) {
        // An operand packed already: the tile it was packed for.
        (Some((_, mr)), _) => mr == MR512_WIDE,
        (None, Some((_, nr))) => nr == NR512_WIDE,
        (None, None) => wide_tile_for(job.m, job.n),
    }
}

fn wide_tile_for(m: usize, n: usize) -> bool {
    // The share of each tile shape's computed elements that are real ones, counting
    // whole strips.
    let used = |len: usize, tile: usize| len as f64 / (len.div_ceil(tile) * tile).max(1) as f64;
    used(m, MR512_WIDE) * used(n, NR512_WIDE) > used(m, MR512) * used(n, NR512)
}

/// Columns of the AVX-512 tile an m×n product takes.
pub(crate) fn col_tile_avx512(m: usize, n: usize) -> usize {
    if wide_tile_for(m, n) {
        NR512_WIDE
    } else {
        NR512
    }
}

/// Rows of the AVX-512 tile an m×n product takes.
pub(crate) fn row_tile_avx512(m: usize, n: usize) -> usize {
    if wide_tile_for(m, n) {
        MR512_WIDE
    } else {
        MR512
    }
}

/// Rows of the AVX2 tile.
pub(crate) const ROW_TILE_AVX2: usize = MR256;

/// `op(B)` packed whole for the AVX-512 driver, with the panel width its tile takes.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn pack_b_avx512(job: &Job<'_>, dst: &mut [f32]) -> (usize, usize) {
    if wide_tile(job) {
        (pack_whole::<NR512_WIDE>(job, dst, kc512(), NC), NR512_WIDE)
    } else {
        (pack_whole::<NR512>(job, dst, kc512(), NC), NR512)
    }
}

/// `op(A)` packed whole for the AVX-512 driver, with the rows its tile takes.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
pub(crate) fn pack_a_avx512(job: &Job<'_>, dst: &mut [f32]) -> (usize, usize) {
    if wide_tile(job) {
        (pack_a_whole::<MR512_WIDE>(job, dst, kc512()), MR512_WIDE)
    } else {
        (pack_a_whole::<MR512>(job, dst, kc512()), MR512)
    }
}

/// `op(A)` packed whole for the AVX2 driver.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn pack_a_avx2(job: &Job<'_>, dst: &mut [f32]) -> (usize, usize) {
    (pack_a_whole::<MR256>(job, dst, KC), MR256)
}

/// `op(B)` packed whole for the AVX2 driver.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn pack_b_avx2(job: &Job<'_>, dst: &mut [f32]) -> (usize, usize) {
    (pack_whole::<NR256>(job, dst, KC, NC), NR256)
}

/// The AVX2 + FMA build of the driver.
#[target_feature(enable = "avx2,fma")]
pub(crate) fn gemm_avx2(scratch: &mut GemmScratch, job: &Job<'_>, c: &mut [f32]) {
    // 6 rows: no mid kernel.
    run::<MR256, NR256, SHORT_MR>(
        scratch,
        job,
        c,
        KC,
        NC,
        true,
        false,
        false,
        |a, b, t| micro_avx2::<MR256, MR256>(a, b, t),
        |a, b, t| micro_avx2::<MR256, SHORT_MR>(a, b, t),
        |a, b, t| micro_avx2::<MR256, SHORT_MR>(a, b, t),
        |a, b, t| micro_avx2::<MR256, TINY_MR>(a, b, t),
    );
}

/// [`micro_avx512`] of `NB` vectors, or of fewer for an edge tile whose columns fit in
/// fewer (`Out::Part`): the last panel of a product 16 columns past a multiple of 32
/// computes 16 columns, not 32 (each column's sum is the same either way).
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn narrow<const PMR: usize, const MR: usize, const NR: usize, const NB: usize>(
    a: APanel<'_, PMR>,
    b: BPanel<'_, NR>,
    out: Out<'_, MR, NR>,
) {
    match out {
        Out::Part(tile, 1) if NB > 1 => micro_avx512::<PMR, MR, NR, 1>(a, b, Out::Tile(tile)),
        Out::Part(tile, 2) if NB > 2 => micro_avx512::<PMR, MR, NR, 2>(a, b, Out::Tile(tile)),
        out => micro_avx512::<PMR, MR, NR, NB>(a, b, out),
    }
}

#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline]
fn micro_avx512<const PMR: usize, const MR: usize, const NR: usize, const NB: usize>(
    a: APanel<'_, PMR>,
    b: BPanel<'_, NR>,
    out: Out<'_, MR, NR>,
) {
    const { assert!(MR <= PMR, "a kernel computes at most its strip's rows") };
    let mut acc = [[_mm512_setzero_ps(); NB]; MR];
    // One step of depth: NB vectors of B's row, each of the MR elements of A broadcast.
    let mut step = |br: &[f32; NR], ar: &dyn Fn(usize) -> f32| {
        let mut bv = [_mm512_setzero_ps(); NB];
        for (j, v) in bv.iter_mut().enumerate() {
            *v = load16(sixteen(br, j));
        }
        for (r, row) in acc.iter_mut().enumerate() {
            let av = _mm512_set1_ps(ar(r));
            for (x, &bj) in row.iter_mut().zip(&bv) {
                *x = _mm512_fmadd_ps(av, bj, *x);
            }
        }
    };
    a.each_depth::<MR, NR>(b, &mut step);
    match out {
        Out::Tile(tile) | Out::Part(tile, _) => {
            for (t, row) in tile.iter_mut().zip(&acc) {
                for (j, &v) in row.iter().enumerate() {
                    store16(sixteen_mut(t, j), v);
                }
            }
        }
        Out::C { c, ldc, alpha, beta, fin: Some(f) } => {
            // The sums leave the registers once, here, for a call (see `store_fused`).
            let sums = acc;
            match (f.ep.bias, f.ep.clamp) {
                (Bias::Rows(_), 0) => store_fused::<MR, NR, NB, true, 0>(&sums, c, ldc, alpha, beta, &f),
                (Bias::Rows(_), 1) => store_fused::<MR, NR, NB, true, 1>(&sums, c, ldc, alpha, beta, &f),
                (Bias::Rows(_), _) => store_fused::<MR, NR, NB, true, 2>(&sums, c, ldc, alpha, beta, &f),
                (_, 0) => store_fused::<MR, NR, NB, false, 0>(&sums, c, ldc, alpha, beta, &f),
                (_, 1) => store_fused::<MR, NR, NB, false, 1>(&sums, c, ldc, alpha, beta, &f),
                (_, _) => store_fused::<MR, NR, NB, false, 2>(&sums, c, ldc, alpha, beta, &f),
            }
        }
        Out::C { c, ldc, alpha, beta, fin: None } => {
            let (alpha, beta_v) = (_mm512_set1_ps(alpha), _mm512_set1_ps(beta));
            for (i, row) in acc.iter().enumerate() {
                let cr = row_mut::<NR>(c, i * ldc);
                for (j, &v) in row.iter().enumerate() {
                    let v = _mm512_mul_ps(alpha, v);
                    let cj = sixteen_mut(cr, j);
                    if beta == 0.0 {
                        store16(cj, v);
                    } else {
                        store16(cj, _mm512_fmadd_ps(beta_v, load16(cj), v));
                    }
                }
            }
        }
    }
}

/// A full tile's sums (in memory: stored once after the depth loop) merged into C as the
/// plain store does, then the epilogue `f` applied to each vector before it is stored:
/// the bias (of the tile's rows with `ROWS`, else of its columns; none adds -0, which
/// changes no value), then a clamp from below (`CLAMP` 1) or from below and above (2),
/// NaN passing, each element with the bits of the strip pass in the default floating-point
/// mode. (With denormals read as zero (MXCSR DAZ, which ORT's
/// `session.set_denormal_as_zero` sets with FTZ) a subnormal Clip bound is stored as it
/// is, where the compiled strip pass flushes it; with DAZ alone, adding -0 also flushes a
/// subnormal sum. The direct kernel's register clamp behaves the same way. Found by
/// review.) One build per form keeps
/// it at 3-5 instructions a vector: a general one testing each part of the epilogue per
/// vector ran no faster than the strip pass, and inlined into the 14-row tile the fused
/// store made it keep its sums in memory through every step of depth. Kernel only, one
/// thread, Intel Xeon (AVX-512, family 6 model 207), 1x1 convolutions with their bias and
/// Relu (`--example pw_plane_bench`), us: 16 -> 64 channels on 55x55 79 -> 59-68 (the
/// product alone 53-55), 16 -> 96 on 112x112 616 -> 489-495, 24 -> 144 on 56x56 231 ->
/// 178-182, 64 -> 256 on 56x56 810-820 -> 707-714.
#[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
#[inline(never)]
fn store_fused<const MR: usize, const NR: usize, const NB: usize, const ROWS: bool, const CLAMP: u8>(
    acc: &[[__m512; NB]; MR],
    c: &mut [f32],
    ldc: usize,
    alpha: f32,
    beta: f32,
    f: &Fin<'_>,
) {
    let (alpha, beta_v) = (_mm512_set1_ps(alpha), _mm512_set1_ps(beta));
    let (lo, hi) = (_mm512_set1_ps(f.ep.lo), _mm512_set1_ps(f.ep.hi));
    let (rows, cols): (&[f32], &[f32]) = match f.ep.bias {
        Bias::Rows(b) => (&b[f.row..][..MR], &[]),
        Bias::Cols(b) => (&[], &b[f.col..][..16 * NB]),
        Bias::None => (&[], &[]),
    };
    let mut col_bias = [_mm512_set1_ps(-0.0); NB];
    if !cols.is_empty() {
        for (j, v) in col_bias.iter_mut().enumerate() {
            *v = load16(first16(&cols[16 * j..]));
        }
    }
    for (i, row) in acc.iter().enumerate() {
        let cr = row_mut::<NR>(c, i * ldc);
        let row_bias = if ROWS { _mm512_set1_ps(rows[i]) } else { _mm512_setzero_ps() };
        for (j, &v) in row.iter().enumerate() {
            let cj = sixteen_mut(cr, j);
            let mut v = _mm512_mul_ps(alpha, v);
            if beta != 0.0 {
                v = _mm512_fmadd_ps(beta_v, load16(cj), v);
            }
            v = _mm512_add_ps(v, if ROWS { row_bias } else { col_bias[j] });
            if CLAMP >= 1 {
                v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, lo), lo);
            }
            if CLAMP >= 2 {
                v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask::<_CMP_GT_OQ>(v, hi), hi);
            }
            store16(cj, v);
        }
    }
}

/// The first 16 elements of `x`.
#[inline(always)]
fn first16(x: &[f32]) -> &[f32; 16] {
    x[..16].try_into().expect("16 elements")
}

/// Elements `16 j .. 16 j + 16` of a row of B or C.
#[inline(always)]
fn sixteen<const N: usize>(x: &[f32; N], j: usize) -> &[f32; 16] {
    (&x[16 * j..16 * j + 16]).try_into().expect("16 elements")
}

#[inline(always)]
fn sixteen_mut<const N: usize>(x: &mut [f32; N], j: usize) -> &mut [f32; 16] {
    (&mut x[16 * j..16 * j + 16]).try_into().expect("16 elements")
}

#[target_feature(enable = "avx2,fma")]
#[inline]
fn micro_avx2<const PMR: usize, const MR: usize>(a: APanel<'_, PMR>, b: BPanel<'_, NR256>, out: Out<'_, MR, NR256>) {
    const { assert!(MR <= PMR, "a kernel computes at most its strip's rows") };
    let mut acc = [[_mm256_setzero_ps(); 2]; MR];
    let mut step = |br: &[f32; NR256], ar: &dyn Fn(usize) -> f32| {
        let (b0, b1) = halves(br);
        let (b0, b1) = (load8(b0), load8(b1));
        for (r, row) in acc.iter_mut().enumerate() {
            let av = _mm256_set1_ps(ar(r));
            row[0] = _mm256_fmadd_ps(av, b0, row[0]);
            row[1] = _mm256_fmadd_ps(av, b1, row[1]);
        }
    };
    a.each_depth::<MR, NR256>(b, &mut step);
    match out {
        Out::Tile(tile) | Out::Part(tile, _) => {
            for (t, row) in tile.iter_mut().zip(&acc) {
                let (t0, t1) = halves_mut(t);
                store8(t0, row[0]);
                store8(t1, row[1]);
            }
        }
        Out::C { fin: Some(_), .. } => unreachable!("only the AVX-512 driver is asked for fused tiles"),
        Out::C { c, ldc, alpha, beta, fin: None } => {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX-512 depth block is 512 where AVX-512 runs in halves (AMD Zen 4), else 256.
    #[test]
    fn the_depth_block_follows_the_cpu() {
        assert_eq!(kc512(), if crate::arch::avx512_in_halves() { 512 } else { 256 });
    }
}
