//! Products with bfloat16 operands and float32 sums, for the opt-in `bf16` precision:
//! `C = alpha · op(A) · op(B) + beta · C` where both operands are rounded to bfloat16
//! (round to nearest even) and every sum is kept in float32 by AVX-512 BF16's
//! `vdpbf16ps`, which multiplies two pairs of bfloat16 and adds both products to a float
//! lane. On the Zen 5 of these machines a loop of it runs at 450 GFLOP/s against 224 for
//! float multiply-adds, and the kernel's 14 × 32 tile at 400-440 (fp32's at 190-220).
//!
//! A constant B takes it: [`pack_b_bf16`] packs `op(B)` once, in panels of 32
//! columns holding, for each pair of depths `2p, 2p + 1`, the two bfloat16 of each column
//! side by side (one 32-bit lane). A product whose [`PackedB`] was packed so runs here
//! from [`Gemm::compute`](super::Gemm::compute), whatever split calls it: A's rows are
//! rounded to bfloat16 pairs as the product starts (in strips of 14 rows and chunks of
//! 16 pairs, the order the kernel broadcasts them), the tiles run over the whole depth
//! in registers, and the epilogue follows each block of rows. Every element's sum runs
//! over the depth in the same order whatever the split, so splits give the whole
//! product's bits.
//!
//! So does a constant A (a convolution's filters, its rows the output channels):
//! [`pack_a_bf16`] rounds it once into those strips, and the product rounds B (the input,
//! or its im2col rows read straight from the image) panel by panel as it runs, each
//! 32-column panel of pairs made once and multiplied by every strip while it is in L1.

use super::{Gemm, GemmScratch, PackedA, PackedB};
use crate::arch::Level;
use std::ops::Range;
use std::sync::OnceLock;

/// The panel width of a bf16-packed B.
pub(crate) const NR: usize = 32;
/// The fewest columns of B the bf16 kernel takes: narrower, most of each 32-column
/// panel would be padding.
const MIN_COLUMNS: usize = 16;

/// Whether this CPU runs bf16 products: AVX-512 (not lowered by `RIVET_KERNELS_LEVEL`)
/// with the BF16 extension. Detected once.
pub fn bf16_supported() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            Level::detected() == Level::Avx512 && std::arch::is_x86_feature_detected!("avx512bf16")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// Whether this process runs the bf16 products (and the bf16 direct convolution of
/// stride 1) on AMX tiles: see `arch::amx::bf16_tiles`. Products of fewer than 8 rows
/// keep AVX-512 BF16.
pub fn bf16_tiles() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::arch::amx::bf16_tiles()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `x` rounded to bfloat16 as the vector conversion (`vcvtne2ps2bf16`) rounds it: as
/// [`f32_to_bf16`](crate::typed::f32_to_bf16) (nearest, ties to even; NaN stays NaN), but
/// subnormals become zero of the same sign.
pub fn to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if bits & 0x7f80_0000 == 0 {
        return ((bits >> 16) & 0x8000) as u16;
    }
    crate::typed::f32_to_bf16(x)
}

/// Packs `op(B)` (`b` stored k×n, or n×k when `trans_b`) as bfloat16 pairs for products
/// of any m by it, and returns true; or returns false and leaves `packed` as it was when
/// this CPU has no AVX-512 BF16, the depth is 0 (nothing to multiply) or B has fewer than
/// [`MIN_COLUMNS`]: the caller packs it for the float kernels instead. Panics if
/// `b.len() != k * n`.
pub fn pack_b_bf16(packed: &mut PackedB, n: usize, k: usize, b: &[f32], trans_b: bool) -> bool {
    assert_eq!(b.len(), k * n, "gemm: `b` must hold k*n elements");
    if !bf16_supported() || k == 0 || n < MIN_COLUMNS {
        return false;
    }
    let pairs = padded_pairs(k);
    let panels = n.div_ceil(NR);
    let len = panels * pairs * NR;
    let dst = &mut packed.room(len)[..len];
    let at = |p: usize, j: usize| -> u32 {
        if p >= k || j >= n {
            return 0;
        }
        to_bf16(if trans_b { b[j * k + p] } else { b[p * n + j] }) as u32
    };
    for (panel, out) in dst.chunks_exact_mut(pairs * NR).enumerate() {
        for (p, row) in out.chunks_exact_mut(NR).enumerate() {
            for (q, o) in row.iter_mut().enumerate() {
                let j = panel * NR + q;
                *o = f32::from_bits(at(2 * p, j) | (at(2 * p + 1, j) << 16));
            }
        }
    }
    packed.len = len;
    packed.bf16 = true;
    packed.key = Some((Level::Avx512, NR, n, k, trans_b));
    true
}

/// Rows of a panel of B (packed or rounded as the product runs) for a depth of `k`: its
/// pairs of depths, padded with zeros to whole chunks of [`CHUNK`] pairs (the AMX tiles
/// read whole chunks).
pub(crate) fn padded_pairs(k: usize) -> usize {
    k.div_ceil(2).next_multiple_of(CHUNK)
}

/// Rows of a bf16 strip of A (the tile's rows), and pairs of depths in each of a strip's
/// chunks.
pub(crate) const MR: usize = 14;
pub(crate) const CHUNK: usize = 16;

/// Packs A (`a` stored m×k) as bfloat16 strips for products of any n by a B rounded as
/// the product runs, and returns true; or returns false and leaves `packed` as it was
/// when this CPU has no AVX-512 BF16 or the depth is 0: the caller packs it for the
/// float kernels instead. Strip `s`, chunk `c`, row `r` holds the 16 pairs of depths
/// `32 c .. 32 c + 32` of row `14 s + r` (zero past m and k). Panics if `a.len() != m * k`.
pub fn pack_a_bf16(packed: &mut PackedA, m: usize, k: usize, a: &[f32]) -> bool {
    assert_eq!(a.len(), m * k, "gemm: `a` must hold m*k elements");
    if !bf16_supported() || k == 0 {
        return false;
    }
    let chunks = k.div_ceil(2 * CHUNK);
    let strip_len = chunks * MR * 16;
    let len = m.div_ceil(MR) * strip_len;
    let dst = &mut packed.0.room(len)[..len];
    let at = |i: usize, d: usize| -> u32 {
        if i < m && d < k {
            to_bf16(a[i * k + d]) as u32
        } else {
            0
        }
    };
    for (s, strip) in dst.chunks_exact_mut(strip_len).enumerate() {
        for (ch, chunk) in strip.chunks_exact_mut(MR * 16).enumerate() {
            for (r, row) in chunk.chunks_exact_mut(16).enumerate() {
                let i = s * MR + r;
                for (j, o) in row.iter_mut().enumerate() {
                    let d = 2 * (ch * CHUNK + j);
                    *o = f32::from_bits(at(i, d) | (at(i, d + 1) << 16));
                }
            }
        }
    }
    packed.0.len = len;
    packed.0.bf16 = true;
    packed.0.key = Some((Level::Avx512, m, 0, k, false));
    packed.1 = MR;
    true
}

/// Runs the block `rows` × `cols` of `g`, whose A is bf16-packed (by [`pack_a_bf16`]; B
/// is `g.b` stored k×n or `g.im2col`, and `rows.start` is a multiple of [`MR`]).
pub(super) fn compute_a(
    g: &Gemm<'_>,
    scratch: &mut GemmScratch,
    rows: Range<usize>,
    cols: Range<usize>,
    c: &mut [f32],
) {
    let packed = g.packed_a.expect("a bf16 A is packed");
    let (_, pm, _, pk, pt) = packed.0.key.expect("gemm: A was never packed");
    assert!((pm, pk, pt) == (g.m, g.k, g.trans_a), "gemm: A was packed for another product");
    assert!(g.packed_b.is_none() && !g.trans_b, "gemm: a bf16 A's product rounds B itself");
    if rows.is_empty() || cols.is_empty() {
        return;
    }
    assert!(rows.start.is_multiple_of(MR), "gemm: a packed A is read from whole strips");
    crate::arch::gemm_bf16_a(g, packed.0.data(), scratch, rows, cols, c);
}

/// Runs the block `rows` × `cols` of `g`, whose B is bf16-packed (see [`Gemm::compute`]
/// for the contract; `cols.start` is a multiple of [`NR`]).
pub(super) fn compute(g: &Gemm<'_>, scratch: &mut GemmScratch, rows: Range<usize>, cols: Range<usize>, c: &mut [f32]) {
    let packed = g.packed_b.expect("a bf16 product has a packed B");
    let (_, _, pn, pk, pt) = packed.key.expect("gemm: B was never packed");
    assert!((pn, pk, pt) == (g.n, g.k, g.trans_b), "gemm: B was packed for another product");
    assert!(g.packed_a.is_none() && g.im2col.is_none(), "gemm: a bf16 product packs its own A");
    assert!(cols.start.is_multiple_of(NR), "gemm: a packed B is read from whole panels");
    assert!(g.k > 0, "gemm: a bf16 B has depth (pack_b_bf16 refuses k = 0)");
    if rows.is_empty() || cols.is_empty() {
        return;
    }
    crate::arch::gemm_bf16(g, packed.data(), scratch, rows, cols, c);
}

#[cfg(test)]
#[path = "bf16_tests.rs"]
mod tests;
