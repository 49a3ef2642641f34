//! A convolution as one 8-bit product: the weights (m × c × taps) as A, the input's
//! im2col as B, both in the depth order (channel quad, tap, channel in the quad), so that
//! a quad of B (four depths of one column) is the four channels of one quad at one input
//! position. The input is first rewritten with its channels in quads (one i32 of four
//! signed bytes per position and quad, `words`); a row of B (one quad, one tap) is then a
//! shifted run of those words with the padding's words at the window's edges, copied into
//! the panels 16 at a time: no byte is moved on its own.
//!
//! Channels past c (the last quad of a count not a multiple of 4) are zero bytes in A and
//! B, adding nothing; the zero-point terms use the real depth `c · taps`.

use super::packed::{QPackedA, QPackedB, Q8};
use crate::conv::Window3d;

impl QPackedA {
    /// Packs convolution weights (`w`: m rows of c × taps, zero points `za`: one, or one
    /// per row) in the depth order of [`QPackedB::pack_conv_input`].
    pub fn pack_conv_weights<T: Q8>(&mut self, w: &[T], m: usize, c: usize, taps: usize, za: &[i32]) {
        assert!(w.len() >= m * c * taps, "qgemm: the weights are shorter than their shape");
        let c4 = c.div_ceil(4);
        let k = c4 * 4 * taps;
        // The weights reordered, as unsigned bytes (missing channels 0).
        let mut rows = std::mem::take(&mut self.reorder);
        rows.clear();
        rows.resize(m * k, 0);
        for (o, row) in rows.chunks_exact_mut(k.max(1)).enumerate().take(if k == 0 { 0 } else { m }) {
            for ch in 0..c {
                let (q4, l) = (ch / 4, ch % 4);
                for t in 0..taps {
                    row[(q4 * taps + t) * 4 + l] = w[(o * c + ch) * taps + t].unsigned();
                }
            }
        }
        self.zero_shifted.clear();
        self.zero_shifted.extend(za.iter().map(|&z| z + T::TO_UNSIGNED));
        let za = std::mem::take(&mut self.zero_shifted);
        self.pack::<u8>(&rows, m, k, k, &za);
        self.real_k = c * taps;
        self.reorder = rows;
        self.zero_shifted = za;
    }
}

impl QPackedB {
    /// Packs the im2col matrix of `channels` planes of one image (`x`, planes of
    /// `g.plane()` elements, zero point `zx`) as a B of `g.positions()` columns, in the
    /// depth order of [`QPackedA::pack_conv_weights`]. Taps in the padding read the zero
    /// point (a difference of 0).
    pub fn pack_conv_input<T: Q8>(&mut self, x: &[T], channels: usize, g: &Window3d, zx: i32) {
        let (plane, taps, n) = (g.plane(), g.kernel.iter().product::<usize>(), g.positions());
        assert!(x.len() >= channels * plane, "qgemm: the image is shorter than its shape");
        let c4 = channels.div_ceil(4);
        let k = c4 * 4 * taps;
        self.k = k;
        self.real_k = channels * taps;
        self.n = n;
        self.zero.clear();
        self.zero.push(zx + T::TO_UNSIGNED - 128);
        let panel_len = self.panel_len();
        self.units.reset(super::packed::panel_units(n.div_ceil(super::NR), panel_len), [0; 16]);
        self.col_sums.clear();
        self.col_sums.resize(n, 0);
        let pad = T::from_i32(zx).signed() as u8;
        let (mut words, mut row) = (std::mem::take(&mut self.words), std::mem::take(&mut self.word_row));
        words.clear();
        words.resize(c4 * plane, 0);
        row.clear();
        row.resize(n.next_multiple_of(16), 0);
        let (units, col_sums) = (&mut self.units, &mut self.col_sums);
        crate::arch::widest(
            #[inline(always)]
            || {
                // The channels in quads: missing channels are zero bytes. (An empty plane
                // has none: every tap reads padding.)
                for (q4, dst) in words.chunks_exact_mut(plane.max(1)).enumerate().take(if plane == 0 { 0 } else { c4 })
                {
                    let lanes = (channels - 4 * q4).min(4);
                    let src = |l: usize| &x[(4 * q4 + l) * plane..(4 * q4 + l + 1) * plane];
                    match lanes {
                        4 => quads_of([src(0), src(1), src(2), src(3)], dst),
                        _ => {
                            dst.fill(0);
                            for l in 0..lanes {
                                for (o, &v) in dst.iter_mut().zip(src(l)) {
                                    *o |= ((v.signed() as u8) as i32) << (8 * l);
                                }
                            }
                        }
                    }
                }
                for q4 in 0..c4 {
                    let lanes = (channels - 4 * q4).min(4);
                    let pad_word = quad(std::array::from_fn(|l| if l < lanes { pad as i8 } else { 0 }));
                    let src = &words[q4 * plane..(q4 + 1) * plane];
                    for t in 0..taps {
                        fill_row(src, g, t, pad_word, &mut row[..n]);
                        let q = q4 * taps + t;
                        for (s, &w) in col_sums.iter_mut().zip(&row[..n]) {
                            *s += byte_sum(w);
                        }
                        // (The row's columns past n stay 0 from its making.)
                        for (v, part) in row.chunks_exact(16).enumerate() {
                            let dst = &mut units[(v / 2) * panel_len + 2 * q + v % 2];
                            dst.copy_from_slice(part);
                        }
                    }
                }
            },
        );
        self.words = words;
        self.word_row = row;
    }
}

/// Element `i` of four rows of bytes (`rows`, each at least `out.len()` long), made signed
/// as [`Q8::signed`] makes them, as one i32 a position (row `l`'s byte at bits `8 l..`):
/// the quad words of four channels. Written on raw bytes and one XOR (a uint8 made signed
/// is its byte with the top bit flipped; an int8 is its byte), so that it vectorises:
/// through `quad` of four `signed` calls a position took about 0.55 ns (144 channels of
/// 56x56: 62 of the planes' 83 us).
#[inline(always)]
pub(super) fn quads_of<T: Q8>(rows: [&[T]; 4], out: &mut [i32]) {
    let flip: u32 = if T::TO_UNSIGNED == 0 { 0x8080_8080 } else { 0 };
    let n = out.len();
    let (a, b, c, d) = (&rows[0][..n], &rows[1][..n], &rows[2][..n], &rows[3][..n]);
    let byte = |v: T| v.to_i32() as u8 as u32;
    for i in 0..n {
        let w = byte(a[i]) | byte(b[i]) << 8 | byte(c[i]) << 16 | byte(d[i]) << 24;
        out[i] = (w ^ flip) as i32;
    }
}

/// [`quads_of`], and each quad's [`byte_sum`] added to `sums` (as long as `out`) in the
/// same pass.
#[inline(always)]
pub(super) fn quads_and_sums_of<T: Q8>(rows: [&[T]; 4], out: &mut [i32], sums: &mut [i32]) {
    let flip: u32 = if T::TO_UNSIGNED == 0 { 0x8080_8080 } else { 0 };
    let n = out.len();
    let (a, b, c, d) = (&rows[0][..n], &rows[1][..n], &rows[2][..n], &rows[3][..n]);
    let sums = &mut sums[..n];
    let byte = |v: T| v.to_i32() as u8 as u32;
    for i in 0..n {
        let w = (byte(a[i]) | byte(b[i]) << 8 | byte(c[i]) << 16 | byte(d[i]) << 24) ^ flip;
        out[i] = w as i32;
        sums[i] += byte_sum(w as i32);
    }
}

/// Four signed bytes as one i32 (byte `l` at bits `8 l..`).
#[inline(always)]
pub(super) fn quad(b: [i8; 4]) -> i32 {
    i32::from_le_bytes(b.map(|v| v as u8))
}

/// The sum of the four signed bytes of `w`.
#[inline(always)]
pub(super) fn byte_sum(w: i32) -> i32 {
    ((w << 24) >> 24) + ((w << 16) >> 24) + ((w << 8) >> 24) + (w >> 24)
}

/// Row `t` (a tap) of the im2col of one plane `src`: element `j` is the input under tap
/// `t` of output position `j`, or `pad` in the padding.
#[inline(always)]
fn fill_row<E: Copy>(src: &[E], g: &Window3d, t: usize, pad: E, dst: &mut [E]) {
    let [o0, o1, o2] = g.out;
    let [_, k1, k2] = g.kernel;
    let [_, in1, in2] = g.input;
    let tap = [t / (k1 * k2), (t / k2) % k1, t % k2];
    let (stride, dil, begin) = (g.stride[2] as isize, g.dilation[2] as isize, g.pad_begin[2] as isize);
    // Along the width, output `ox` reads column `ox · stride + off`: inside the row for
    // `lo..hi`, padding elsewhere.
    let off = tap[2] as isize * dil - begin;
    let lo = if off >= 0 { 0 } else { ((-off + stride - 1) / stride) as usize };
    let hi = if in2 as isize - off <= 0 { 0 } else { ((in2 as isize - 1 - off) / stride + 1) as usize };
    let (lo, hi) = (lo.min(o2), hi.min(o2).max(lo.min(o2)));
    // Stride 1 and the output as wide as the input: the output rows inside the input's
    // height read one run of the plane shifted by `off`, copied whole, then the padding
    // columns of each row set.
    let block_copy = g.stride[1] == 1 && stride == 1 && o2 == in2;
    let plane = src.len();
    for od in 0..o0 {
        let plane_out = &mut dst[od * o1 * o2..][..o1 * o2];
        let Some(z) = g.source(0, od, tap[0]) else {
            plane_out.fill(pad);
            continue;
        };
        if block_copy {
            let inside = |oy: usize| g.source(1, oy, tap[1]).is_some();
            let oy0 = (0..o1).find(|&oy| inside(oy)).unwrap_or(o1);
            let oy1 = (oy0..o1).find(|&oy| !inside(oy)).unwrap_or(o1);
            plane_out[..oy0 * o2].fill(pad);
            plane_out[oy1 * o2..].fill(pad);
            if oy0 < oy1 {
                let y0 = g.source(1, oy0, tap[1]).expect("inside");
                let base = ((z * in1 + y0) * in2) as isize + off;
                let out = &mut plane_out[oy0 * o2..oy1 * o2];
                // Positions whose source lies outside the plane are padding columns.
                let p_lo = (-base).clamp(0, out.len() as isize) as usize;
                let p_hi = (plane as isize - base).clamp(p_lo as isize, out.len() as isize) as usize;
                let from = (base + p_lo as isize) as usize;
                out[p_lo..p_hi].copy_from_slice(&src[from..from + (p_hi - p_lo)]);
                for r in out.chunks_exact_mut(o2) {
                    r[..lo].fill(pad);
                    r[hi..].fill(pad);
                }
            }
            continue;
        }
        for oy in 0..o1 {
            let out = &mut plane_out[oy * o2..][..o2];
            let Some(y) = g.source(1, oy, tap[1]) else {
                out.fill(pad);
                continue;
            };
            let row = &src[(z * in1 + y) * in2..][..in2];
            out[..lo].fill(pad);
            out[hi..].fill(pad);
            if lo == hi {
                // (No output reads this tap inside the row: its first column may lie outside.)
                continue;
            }
            let first = (lo as isize * stride + off) as usize;
            for (o, &v) in out[lo..hi].iter_mut().zip(row[first..].iter().step_by(stride as usize)) {
                *o = v;
            }
        }
    }
}
