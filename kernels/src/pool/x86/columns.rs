//! [`Columns`]: Max windows of width stride 1 (2 to 5 taps) or 2 (2 or 3), columns first.

use std::arch::x86_64::*;

use super::{taps_in_range, MAX_CHUNKS};
use crate::arch::mem::{store_first, MaskedTaps, RowStack};
use crate::conv::Window3d;

/// The classes that make the order of a Max window's taps show in its bits: a NaN (it
/// must win) and -0 (it ties +0, and the first of the two in (h, w) order must win).
const ORDER_SHOWS: i32 = 0x01 | 0x04 | 0x80;

/// Input vectors a row of [`Columns`] may read (see `Columns::vectors`).
const COLUMN_VECTORS: usize = 2 * MAX_CHUNKS + 1;

/// Output rows [`Columns`] takes.
const MAX_OUT_ROWS: usize = 1024;

/// One output row's window: its first input row and how many are in range (`dh` apart,
/// at most 5; 0 for a window wholly in the padding).
#[derive(Clone, Copy)]
struct Rows {
    first: u32,
    count: u8,
}

/// Max windows of 2-D planes, width stride 2 with 2 or 3 undilated taps and up to 3 rows,
/// or 1 with 2 to 5 and up to 5 (the 3x3/2, 2x2/2, 3x3/1 and 5x5/1 pools of the CNNs and
/// YOLO's SPPF): for each output row, the maximum
/// of its in-range input rows is taken column by column, 16 columns a vector, and the
/// width taps are then, at stride 2, the even and odd lanes of pairs of those vectors
/// (and the even ones moved down a lane for a third tap), at stride 1 a vector and the
/// next one shifted down 1 to 4 lanes. Per 16 outputs of a 3x3/2 window: 6 loads, 2
/// permutes, a lane shift and 6 maxes, nothing stored between the two steps.
/// `max_rows` took each input row's width maxima first (a permute per row), stored them
/// and then merged the rows'. Kernel only (`pool_bench`), us: 256 planes of 27x27
/// 50.6 -> 31; 128 of 55x55 70 -> 51; 480 of 27x27 97 -> 54-60; 2x2/2 on 512 of 28x28
/// 103 -> 59, of 14x14 50 -> 23. Planes past L2 (64 of 112x112) stay bound by memory:
/// 149-170 -> 137. Stride 1 (3x3, `same_size` before): 256 planes of 27x27 100 -> 65,
/// 64 of 112x112 540 -> 220. 5x5/1 (YOLO's SPPF), through the plugin, one thread, AMD
/// Zen 4, us against ORT's (`same_size` before): 128 planes of 20x20 74 -> 42-43 (ORT
/// 45-48), 256 of 20x20 136 -> 78 (85), 64 of 40x40 147 -> 54 (80).
///
/// The maximum is of the same taps in another order, so the bits are the (h, w) order's
/// unless the order shows: a NaN must win, and of +0 and -0 the first must. Every element
/// read is classed as it is loaded, and a plane with a NaN or a -0 where a window reads is
/// left to the caller.
pub(crate) struct Columns {
    /// Per input vector, the lanes inside the row.
    masks: [u16; COLUMN_VECTORS],
    /// The vectors' offset in a row: `-pad`.
    offset: [isize; 1],
    /// The vectors all of whose lanes are inside the row.
    inside: std::ops::Range<usize>,
    windows: [Rows; MAX_OUT_ROWS],
    in_w: usize,
    plane: usize,
    pad: usize,
    out_h: usize,
    out_w: usize,
    dh: usize,
    kw: usize,
    sw: usize,
    /// Input vectors a row reads (two per chunk of 16 outputs at width stride 2, one at
    /// stride 1, and one past the last).
    vectors: usize,
}

impl Columns {
    /// `None` for windows it does not take.
    pub(crate) fn new(g: &Window3d) -> Option<Columns> {
        let ([in_d, in_h, in_w], [out_d, out_h, out_w]) = (g.input, g.out);
        let ([kd, kh, kw], [_, sh, sw], [_, dh, dw], pad) = (g.kernel, g.stride, g.dilation, g.pad_begin[2]);
        // A dilation of 0 (which the ops refuse) would divide by zero in `taps_in_range`.
        let two_d =
            in_d == 1 && out_d == 1 && kd == 1 && g.dilation.iter().all(|&d| d > 0) && taps_in_range(g, 0, 0) == (0..1);
        // Width stride 1 on rows of 16 outputs or more: on smaller planes a row's
        // overhead outweighs the loads saved, and `same_size` runs a plane as one flat row
        // (1024 planes of 7x7, 3x3/1: 35.5 us there, 44.7 here; 512 of 13x13 48.6 and 42.4).
        let strides = sw == 2 || (sw == 1 && out_w >= 16);
        // Stride 1 up to 5x5 (YOLO's SPPF pools 5x5/1 three times in a row: 1.54x ORT's
        // time on `same_size`'s 25 masked loads per 16 outputs), stride 2 up to 3x3.
        let taps = match sw {
            1 => (2..=5).contains(&kw) && (1..=5).contains(&kh),
            _ => matches!(kw, 2 | 3) && (1..=3).contains(&kh),
        };
        let fits = two_d && strides && taps && dw == 1 && pad < 16;
        let sizes = in_h > 0 && in_w > 0 && out_h > 0 && out_w > 0 && in_w < 1 << 24 && in_h < 1 << 24;
        if !fits || !sizes || out_w.div_ceil(16) > MAX_CHUNKS || out_h > MAX_OUT_ROWS || dh >= 1 << 24 {
            return None;
        }
        let vectors = sw * out_w.div_ceil(16) + 1;
        let mut masks = [0u16; COLUMN_VECTORS];
        // Vector i of an input row holds its columns 16 i - pad + lane (the padded row's
        // positions 16 i..), the identity outside the row.
        for (i, m) in masks.iter_mut().enumerate().take(vectors) {
            let start = (16 * i) as isize - pad as isize;
            let (lo, hi) = ((-start).clamp(0, 16), (in_w as isize - start).clamp(0, 16));
            *m = (((1u32 << hi) - 1) & !((1u32 << lo) - 1)) as u16;
        }
        let lo = (0..vectors).find(|&i| masks[i] == 0xffff).unwrap_or(vectors);
        let inside = lo..(lo..vectors).find(|&i| masks[i] != 0xffff).unwrap_or(vectors);
        let mut windows = [Rows { first: 0, count: 0 }; MAX_OUT_ROWS];
        for (zh, w) in windows.iter_mut().enumerate().take(out_h) {
            let rows = taps_in_range(g, 1, zh);
            if !rows.is_empty() {
                let first = zh * sh + rows.start * dh - g.pad_begin[1];
                *w = Rows { first: first as u32, count: rows.len() as u8 };
            }
        }
        let c = Columns {
            masks,
            offset: [-(pad as isize)],
            inside,
            windows,
            in_w,
            plane: in_h * in_w,
            pad,
            out_h,
            out_w,
            dh,
            kw,
            sw,
            vectors,
        };
        c.reads()?;
        Some(c)
    }

    /// The masked reads of a row, checked.
    fn reads(&self) -> Option<MaskedTaps<'_>> {
        MaskedTaps::new(self.in_w, &self.offset, &self.masks[..self.vectors])
    }

    /// Pools planes of `x` into `y` until one with a NaN or a -0; returns how many it
    /// pooled (`planes` unless such a plane, which it leaves to the caller).
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
    pub(super) fn planes(&self, x: &[f32], planes: usize, y: &mut [f32]) -> usize {
        let Some(reads) = self.reads() else { return 0 };
        let (plane, positions) = (self.plane, self.out_h * self.out_w);
        for (p, (src, dst)) in x.chunks_exact(plane).zip(y.chunks_exact_mut(positions)).take(planes).enumerate() {
            let shows = match (self.kw, self.sw) {
                (2, 1) => self.plane::<2, 1>(&reads, src, dst),
                (3, 1) => self.plane::<3, 1>(&reads, src, dst),
                (4, 1) => self.plane::<4, 1>(&reads, src, dst),
                (_, 1) => self.plane::<5, 1>(&reads, src, dst),
                (2, _) => self.plane::<2, 2>(&reads, src, dst),
                _ => self.plane::<3, 2>(&reads, src, dst),
            };
            if shows {
                return p;
            }
        }
        planes
    }

    /// One plane; whether it read a NaN or a -0 (its outputs then may not be the
    /// definition's).
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
    #[inline]
    fn plane<const K: usize, const S: usize>(&self, reads: &MaskedTaps<'_>, src: &[f32], dst: &mut [f32]) -> bool {
        let mut shows = 0u16;
        let (in_w, out_w, dh) = (self.in_w, self.out_w, self.dh);
        for (w, out) in self.windows[..self.out_h].iter().zip(dst.chunks_exact_mut(out_w)) {
            // `new` found each window's rows in the plane.
            const IN_PLANE: &str = "a window's rows are in its plane";
            let rows = &src[w.first as usize * in_w..];
            shows |= match w.count {
                1 => self.row::<K, S, 1>(reads, &RowStack::new(rows, dh * in_w, in_w).expect(IN_PLANE), out),
                2 => self.row::<K, S, 2>(reads, &RowStack::new(rows, dh * in_w, in_w).expect(IN_PLANE), out),
                3 => self.row::<K, S, 3>(reads, &RowStack::new(rows, dh * in_w, in_w).expect(IN_PLANE), out),
                4 => self.row::<K, S, 4>(reads, &RowStack::new(rows, dh * in_w, in_w).expect(IN_PLANE), out),
                5 => self.row::<K, S, 5>(reads, &RowStack::new(rows, dh * in_w, in_w).expect(IN_PLANE), out),
                _ => {
                    // No row in range: the window is empty.
                    out.fill(f32::NEG_INFINITY);
                    0
                }
            };
        }
        shows != 0
    }

    /// One output row from its `R` input rows; the lanes read that were NaN or -0.
    #[target_feature(enable = "avx512f,avx512dq,avx512bw,avx512vl,avx2,fma")]
    #[inline]
    fn row<const K: usize, const S: usize, const R: usize>(
        &self,
        reads: &MaskedTaps<'_>,
        rows: &RowStack<'_, R>,
        out: &mut [f32],
    ) -> u16 {
        let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        let odds = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
        let least = _mm512_set1_ps(f32::NEG_INFINITY);
        let out_w = self.out_w;
        // Vector i of the rows' column maxima: columns 16 i - pad.., plain loads inside
        // the row, masked ones at its ends.
        let mut shows = 0u16;
        let mut column = |i: usize| {
            let (v, classes) = match self.inside.contains(&i) {
                true => rows.max::<ORDER_SHOWS>(16 * i - self.pad),
                false => rows.max_masked::<ORDER_SHOWS>(reads, i, least),
            };
            shows |= classes;
            v
        };
        let mut low = column(0);
        for c in 0..out_w.div_ceil(16) {
            if S == 1 {
                // Width stride 1: output lane l's taps are lanes l to l + K - 1 of the
                // vector and the next one.
                let high = column(c + 1);
                let (l, h) = (_mm512_castps_si512(low), _mm512_castps_si512(high));
                let mut acc = _mm512_max_ps(_mm512_castsi512_ps(_mm512_alignr_epi32::<1>(h, l)), low);
                if K >= 3 {
                    acc = _mm512_max_ps(_mm512_castsi512_ps(_mm512_alignr_epi32::<2>(h, l)), acc);
                }
                if K >= 4 {
                    acc = _mm512_max_ps(_mm512_castsi512_ps(_mm512_alignr_epi32::<3>(h, l)), acc);
                }
                if K == 5 {
                    acc = _mm512_max_ps(_mm512_castsi512_ps(_mm512_alignr_epi32::<4>(h, l)), acc);
                }
                store_first(&mut out[16 * c..], (out_w - 16 * c).min(16), acc);
                low = high;
                continue;
            }
            let high = column(2 * c + 1);
            // The vector past the pair: its first lane is the last output's third tap.
            let next = column(2 * c + 2);
            let e = _mm512_permutex2var_ps(low, evens, high);
            let o = _mm512_permutex2var_ps(low, odds, high);
            let mut acc = _mm512_max_ps(o, e);
            if K == 3 {
                let third = _mm512_alignr_epi32::<1>(_mm512_castps_si512(next), _mm512_castps_si512(e));
                acc = _mm512_max_ps(_mm512_castsi512_ps(third), acc);
            }
            store_first(&mut out[16 * c..], (out_w - 16 * c).min(16), acc);
            low = next;
        }
        shows
    }
}
