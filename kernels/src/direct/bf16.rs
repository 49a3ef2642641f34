//! The direct convolution with bfloat16 operands and float32 sums, for the opt-in `bf16`
//! precision: the narrow tiles of the float kernel (`R` outputs by `16 * NB` channels),
//! each step of depth a pair of input channels at one tap, one AVX-512 BF16 `vdpbf16ps`
//! per accumulator where the float tile makes one fused multiply-add per channel. That
//! is twice the float tile's work for the same instructions and loads.
//!
//! The input is rounded to bfloat16 once per call ([`pair_planes`]): the padded planes of
//! the float kernel, but each word holds channels `2p` and `2p + 1` at one position (the
//! low and high half), so a tile's broadcast of one word is one output's pair of inputs.
//! The filters are rounded once ([`pack_filters_bf16`]): per block of 16 output channels,
//! per pair of input channels, per tap, 16 words of the two channels' weights. Every
//! output sums its pairs in one chain, in the same order whatever the tile and the
//! split, so splits give the whole convolution's bits.

use super::{fits, shallow, unsplit_source, Direct, Source, BLOCK};
use crate::arch;
use crate::conv::Window3d;
use crate::gemm::to_bf16;

/// Whether the bfloat16 direct kernel runs a convolution of `cg` input and `mg` output
/// channels per group on `g`: where the float one does on its narrow tiles, on a CPU
/// with AVX-512 BF16, but not a stem or another shallow convolution, whatever its rows'
/// width: those stay float32 (on bfloat16 they ran 1.4-2.4x slower). A stem of rows under
/// 16 outputs (a 7x7 at stride 2 on 30x30) had taken it, against the README and the
/// precision test, on a CPU without AMX (Intel Xeon family 6 model 207 under KVM, whose
/// tiles Linux does not grant).
pub fn fits_bf16(g: &Window3d, cg: usize, mg: usize) -> bool {
    crate::gemm::bf16_supported() && fits(g, mg, cg * g.kernel[1] * g.kernel[2]) && !shallow(g, cg)
}

/// Words of the packed bfloat16 filters of `out_c` channels in `group` groups of `cg`
/// input channels and `taps` taps.
pub fn packed_len_bf16(out_c: usize, group: usize, cg: usize, taps: usize) -> usize {
    group * (out_c / group).div_ceil(BLOCK) * cg.div_ceil(2) * taps * BLOCK
}

/// Packs `w` (`[out_c, cg, taps]`) for the bfloat16 kernel into `dst` (as float bits):
/// per group, per block of 16 output channels, per pair of input channels, per tap, 16
/// words whose low half is channel `2p`'s weight and high half `2p + 1`'s (zero past the
/// group's channels).
pub fn pack_filters_bf16(w: &[f32], out_c: usize, group: usize, cg: usize, taps: usize, dst: &mut Vec<f32>) {
    let (mg, pairs, kk) = (out_c / group, cg.div_ceil(2), cg * taps);
    let blocks = mg.div_ceil(BLOCK);
    let per_block = pairs * taps * BLOCK;
    dst.clear();
    dst.resize(packed_len_bf16(out_c, group, cg, taps), 0.0);
    for gi in 0..group {
        for b in 0..blocks {
            let block = &mut dst[(gi * blocks + b) * per_block..][..per_block];
            for lane in 0..BLOCK.min(mg - b * BLOCK) {
                let filter = &w[(gi * mg + b * BLOCK + lane) * kk..][..kk];
                let at = |c: usize, t: usize| if c < cg { to_bf16(filter[c * taps + t]) as u32 } else { 0 };
                for p in 0..pairs {
                    for t in 0..taps {
                        block[(p * taps + t) * BLOCK + lane] = f32::from_bits(at(2 * p, t) | (at(2 * p + 1, t) << 16));
                    }
                }
            }
        }
    }
}

/// The padded input [`pair_planes`] writes for a convolution on `g`: whole rows, always
/// a copy (the rounded one).
pub fn pair_source(g: &Window3d) -> Source {
    Source { copy: true, ..unsplit_source(g) }
}

/// Rounds one group's `cg` input planes (`x`) to bfloat16 into `dst`: `cg / 2` rounded
/// up planes of words as [`pair_source`] pads them, channel `2p` in the low half of
/// plane `p`'s words and `2p + 1` (or zero) in the high half; the padding is zero.
pub fn pair_planes(x: &[f32], cg: usize, g: &Window3d, dst: &mut Vec<f32>) {
    let src = pair_source(g);
    let [_, in_h, in_w] = g.input;
    let plane_in = in_h * in_w;
    assert_eq!(x.len(), cg * plane_in, "direct bf16: input planes");
    let (pt, pl) = (g.pad_begin[1], g.pad_begin[2]);
    let plane = src.rows * src.cols;
    dst.clear();
    dst.resize(cg.div_ceil(2) * plane, 0.0);
    for (p, out) in dst.chunks_exact_mut(plane.max(1)).enumerate() {
        let lo = &x[2 * p * plane_in..][..plane_in];
        let hi = (2 * p + 1 < cg).then(|| &x[(2 * p + 1) * plane_in..][..plane_in]);
        for y in 0..in_h {
            let out = &mut out[(y + pt) * src.cols + pl..][..in_w];
            arch::pair_bf16(&lo[y * in_w..][..in_w], hi.map(|h| &h[y * in_w..][..in_w]), out);
        }
    }
}

/// Rounds `lo` and `hi` (zeros when `None`) to bfloat16 pairs in `out` (as float bits):
/// the portable form of `arch::pair_bf16`, which every build matches.
pub(crate) fn pair_bf16_portable(lo: &[f32], hi: Option<&[f32]>, out: &mut [f32]) {
    for (j, o) in out.iter_mut().enumerate() {
        let h = hi.map_or(0, |h| to_bf16(h[j]) as u32);
        *o = f32::from_bits(to_bf16(lo[j]) as u32 | (h << 16));
    }
}

/// The portable form of `arch::pair_bf16_halves`, which every build matches.
pub(crate) fn pair_bf16_halves_portable(lo: &[f32], hi: Option<&[f32]>, even: &mut [f32], odd: &mut [f32]) {
    for (j, &l) in lo.iter().enumerate() {
        let h = hi.map_or(0, |h| to_bf16(h[j]) as u32);
        let word = f32::from_bits(to_bf16(l) as u32 | (h << 16));
        if j % 2 == 0 {
            even[j / 2] = word;
        } else {
            odd[j / 2] = word;
        }
    }
}

impl Direct<'_> {
    /// [`Direct::run`] on the bfloat16 kernel: `x` holds the group's [`pair_planes`] and
    /// `w` its [`pack_filters_bf16`] filters (`cg` is still the input channels), `src` is
    /// [`pair_source`]'s. Runs on the narrow tiles whatever the depth (see [`fits_bf16`]
    /// for where that pays). Panics on a length mismatch or a CPU without AVX-512 BF16.
    pub fn run_bf16(&self, channels: std::ops::Range<usize>, y: &mut [f32], carry: &mut Vec<f32>) {
        let g = self.g;
        let positions = g.positions();
        assert!(channels.start.is_multiple_of(BLOCK), "direct: channels start at a block");
        assert_eq!(y.len(), channels.len() * positions, "direct: output length");
        let units = self.cg.div_ceil(2) * g.kernel[1] * g.kernel[2];
        assert!(self.w.len() >= channels.end.div_ceil(BLOCK) * units * BLOCK, "direct bf16: packed filters");
        let src = pair_source(g);
        assert!(self.src == src, "direct bf16: the input is the pair planes");
        assert_eq!(self.x.len(), self.cg.div_ceil(2) * src.rows * src.cols, "direct bf16: input planes");
        arch::direct_bf16(self, channels, y, carry);
    }
}

#[cfg(test)]
#[path = "bf16_tests.rs"]
mod tests;
