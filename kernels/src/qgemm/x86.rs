//! The AVX-512 VNNI tiles of [`packed`](super::packed): safe `#[target_feature]` code,
//! called by `arch::qgemm_vnni` once the CPU is known to have the features.
//!
//! Each 32-column panel of B runs over every strip of A; a tile of up to 14 rows sums the
//! whole depth in 28 registers with `vpdpbusd` (64 byte products an instruction, four
//! times the multiply-adds of a float `vfmadd231ps`), then adds the zero-point terms as
//! it stores.

use super::packed::{for_each_tile, Dst, Place, QOut, QPackedA, QPackedB, TileOut, CHUNK, MR, NR};
use crate::arch::mem::{
    copy_first_bytes_xor, dpbusd_taps, load16, load16i, load64_bytes, store16, store32_bytes, store8_u64,
    store_first_bytes, store_first_i32,
};
use std::arch::x86_64::*;
use std::ops::Range;

/// `c` = `a` × `b` over the rows `rows` and columns `cols` (see `packed::qgemm_rows`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) fn qgemm_avx512(
    a: &QPackedA,
    rows: Range<usize>,
    b: &QPackedB,
    cols: Range<usize>,
    out: &mut QOut<'_>,
    place: Place,
) {
    let quads = a.k.div_ceil(4);
    let small = a.m <= 2;
    if a.m >= TILE_MIN_ROWS && a.k > TILE_MIN_DEPTH && crate::arch::amx::int8_tiles() {
        let (chunks, panel_len) = (quads.div_ceil(CHUNK), b.panel_len());
        // The sums of a strip pair by up to `AMX_PANELS` panels, made at the first of
        // them under one tile configuration, stored panel by panel.
        let mut sums = [[[0i32; NR]; 2 * MR]; AMX_PANELS];
        // (Every B has slack after its last panel for the whole chunks the tiles read:
        // `packed::panel_units`.)
        for_each_tile::<2>(a, rows, b, cols, out, place, |strips, panel, (i, n), outs| {
            if i % AMX_PANELS == 0 {
                let sums = &mut sums[..AMX_PANELS.min(n - i)];
                if outs[1].is_some() {
                    let (s0, s1) = strips.split_at(chunks * MR);
                    crate::arch::amx::int8_panel::<2>([s0, s1], (panel, panel_len), chunks, sums);
                } else {
                    crate::arch::amx::int8_panel::<1>([strips], (panel, panel_len), chunks, sums);
                }
            }
            store_sums(&sums[i % AMX_PANELS], outs);
        });
        return;
    }
    for_each_tile::<1>(a, rows, b, cols, out, place, |strip, panel, _, [out]| {
        tile_rows(small, strip, panel, quads, out.expect("a strip"))
    });
}

/// `out` = the product of `a` (rows only: `QPackedA::rows_only`) and `b` whose rows are
/// read in place from a channels-last uint8 image `x` through `taps` (`nhwc::ConvTaps`):
/// row `r` of strip `s`, tap `t` is the `4 · quads` bytes at `x[offset]`, or `zrow`
/// (the zero point) where the offset is `ConvTaps::PAD`. Every tile sums all 14 rows (a
/// partial strip's last rows read `zrow`) and stores its `h`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_taps_avx512(
    x: &[u8],
    zrow: &[u8],
    taps: &super::nhwc::ConvTaps,
    a: &QPackedA,
    rows: Range<usize>,
    b: &QPackedB,
    out: &mut QOut<'_>,
    place: Place,
) {
    let (quads, count) = (taps.quads(), taps.taps());
    assert!(x.len() >= taps.image_len() && zrow.len() >= 4 * quads, "qgemm: the image is shorter than its taps");
    assert!(b.k == 4 * quads * count && a.k == b.k, "qgemm: the weights' depth is not the taps'");
    for_each_tile::<1>(a, rows, b, 0..b.n, out, place, |_, panel, _, [out]| {
        let out = out.expect("a strip");
        let offsets = taps.strip(out.row / MR);
        let panel = &panel[..2 * quads * count];
        tile_taps(x, zrow, offsets, quads, panel, out)
    });
}

/// One tile of [`conv_taps_avx512`]: 14 rows × 32 columns over every tap
/// (`arch::mem::dpbusd_taps` checks each row's reach once a tap).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn tile_taps(x: &[u8], zrow: &[u8], offsets: &[[u32; MR]], quads: usize, panel: &[[i32; 16]], out: TileOut<'_>) {
    let mut acc = [[_mm512_setzero_si512(); 2]; MR];
    dpbusd_taps(&mut acc, (x, zrow, super::nhwc::ConvTaps::PAD), offsets, quads, panel);
    let h = out.h;
    store(&acc[..h], out);
}

/// `y` (`cols` × `rows` bytes) = the transpose of `x` (`rows` × `cols`) on its first
/// `rows / 8 · 8` rows and `cols / 64 · 64` columns, which it returns (the caller does
/// the rest): eight rows of 64 bytes a step, each u64 lane of the eight vectors one 8 x 8
/// block, transposed by three rounds of masked swaps between the vectors (the rounds of
/// `nhwc::transpose_bytes`, eight blocks at once), then each block's rows stored where
/// their columns go.
#[target_feature(enable = "avx512f,avx512bw")]
pub(crate) fn transpose_bytes_avx512(x: &[u8], (rows, cols): (usize, usize), y: &mut [u8]) -> (usize, usize) {
    assert!(x.len() >= rows * cols && y.len() >= rows * cols, "qgemm: a transpose's operands are short");
    let (r8, c64) = (rows / 8 * 8, cols / 64 * 64);
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn swap(v: &mut [__m512i; 8], step: usize, shift: u32, mask: i64) {
        let m = _mm512_set1_epi64(mask);
        let sh = _mm_cvtsi32_si128(shift as i32);
        for i in 0..8 {
            if i & step == 0 {
                let t = _mm512_and_si512(_mm512_xor_si512(_mm512_srl_epi64(v[i], sh), v[i + step]), m);
                v[i + step] = _mm512_xor_si512(v[i + step], t);
                v[i] = _mm512_xor_si512(v[i], _mm512_sll_epi64(t, sh));
            }
        }
    }
    let mut lanes = [0u64; 8];
    for r0 in (0..r8).step_by(8) {
        for c0 in (0..c64).step_by(64) {
            let mut v: [__m512i; 8] = std::array::from_fn(|i| {
                let at = (r0 + i) * cols + c0;
                load64_bytes(x[at..at + 64].try_into().expect("64 bytes"))
            });
            swap(&mut v, 1, 8, 0x00ff_00ff_00ff_00ff);
            swap(&mut v, 2, 16, 0x0000_ffff_0000_ffff);
            swap(&mut v, 4, 32, 0xffff_ffff);
            // Lane k of vector j: column c0 + 8 k + j, rows r0..r0 + 8.
            for (j, &vj) in v.iter().enumerate() {
                store8_u64(&mut lanes, vj);
                for (k, lane) in lanes.iter().enumerate() {
                    let at = (c0 + 8 * k + j) * rows + r0;
                    y[at..at + 8].copy_from_slice(&lane.to_le_bytes());
                }
            }
        }
    }
    (r8, c64)
}

/// Panels whose tiles run under one tile configuration (loading it and releasing the
/// tiles take about 70 ns: a 1x1 convolution of 64 channels sums a tile in 4 products).
const AMX_PANELS: usize = 4;

/// Products of at least this many rows, deeper than [`TILE_MIN_DEPTH`], run on AMX-INT8
/// tiles where the CPU has them (fewer rows leave most of each 14-row tile empty).
/// Integer sums: the tiles and `vpdpbusd` give the same bits, whatever runs where.
const TILE_MIN_ROWS: usize = 8;
/// The depth up to which `vpdpbusd` is as fast as the tiles or faster (their sums go
/// through memory to the stores): 1x1 convolutions on 28x28 (Xeon, AMX), AMX / VNNI
/// microseconds, 256 output channels: 16 channels 92 / 60, 64: 100 / 87, 128: 119 /
/// 128, 192: 133 / 166, 576: 317 / 404.
const TILE_MIN_DEPTH: usize = 128;

/// Stores the AMX sums of one or two strips by a panel (strip `i`'s rows from row `14 i`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
fn store_sums(sums: &[[i32; NR]; 2 * MR], outs: [Option<TileOut<'_>>; 2]) {
    for (i, out) in outs.into_iter().enumerate() {
        let Some(out) = out else { break };
        let mut v = [[_mm512_setzero_si512(); 2]; MR];
        for (r, row) in v.iter_mut().enumerate().take(out.h) {
            let (lo, hi) = sums[MR * i + r].split_at(16);
            *row = [load16i(lo.try_into().expect("16 lanes")), load16i(hi.try_into().expect("16 lanes"))];
        }
        let h = out.h;
        store(&v[..h], out);
    }
}

/// The tile of `out.h` rows; `two_sets` for a product of one or two rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_rows(two_sets: bool, strip: &[[i32; 16]], panel: &[[i32; 16]], quads: usize, out: TileOut<'_>) {
    match out.h {
        1 if two_sets => tile::<1, 2>(strip, panel, quads, out),
        2 if two_sets => tile::<2, 2>(strip, panel, quads, out),
        1 => tile::<1, 1>(strip, panel, quads, out),
        2 => tile::<2, 1>(strip, panel, quads, out),
        3 => tile::<3, 1>(strip, panel, quads, out),
        4 => tile::<4, 1>(strip, panel, quads, out),
        5 => tile::<5, 1>(strip, panel, quads, out),
        6 => tile::<6, 1>(strip, panel, quads, out),
        7 => tile::<7, 1>(strip, panel, quads, out),
        8 => tile::<8, 1>(strip, panel, quads, out),
        9 => tile::<9, 1>(strip, panel, quads, out),
        10 => tile::<10, 1>(strip, panel, quads, out),
        11 => tile::<11, 1>(strip, panel, quads, out),
        12 => tile::<12, 1>(strip, panel, quads, out),
        13 => tile::<13, 1>(strip, panel, quads, out),
        _ => tile::<MR, 1>(strip, panel, quads, out),
    }
}

/// `R` rows × 32 columns over the whole depth. `S` sets of sums: a product of one or two
/// rows alternates quads between two, so that the chain of additions into each register
/// does not bound it, and adds them at the end (integer sums: the same result).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn tile<const R: usize, const S: usize>(strip: &[[i32; 16]], panel: &[[i32; 16]], quads: usize, out: TileOut<'_>) {
    let mut acc = [[[_mm512_setzero_si512(); 2]; R]; S];
    for (ch, chunk) in strip.chunks_exact(MR).enumerate() {
        let chunk: &[[i32; 16]; MR] = chunk.try_into().expect("a chunk of MR rows");
        let q0 = ch * CHUNK;
        let len = CHUNK.min(quads - q0);
        let bs = &panel[2 * q0..2 * (q0 + len)];
        for (j, bj) in bs.chunks_exact(2).enumerate() {
            let (b0, b1) = (load16i(&bj[0]), load16i(&bj[1]));
            let set = &mut acc[j % S];
            for (r, sums) in set.iter_mut().enumerate() {
                let a = _mm512_set1_epi32(chunk[r][j]);
                sums[0] = _mm512_dpbusd_epi32(sums[0], a, b0);
                sums[1] = _mm512_dpbusd_epi32(sums[1], a, b1);
            }
        }
    }
    let mut sums = acc[0];
    for set in &acc[1..] {
        for (x, y) in sums.iter_mut().zip(set) {
            x[0] = _mm512_add_epi32(x[0], y[0]);
            x[1] = _mm512_add_epi32(x[1], y[1]);
        }
    }
    store(&sums, out);
}

/// Writes a tile with its zero-point terms: `S - za·cb - zb·(ra - k·za)`, wrapping; and
/// where asked requantized as `qgemm::requantize` does, one multiply by the row's or the
/// column's scale: `(v + bias) as f32 · scale`, clamped in float to the type's range
/// less `zy` (NaN to its minimum, as `f32::max` does), rounded half to even, plus `zy`.
///
/// A shallow product (a 1x1 convolution of 16 channels: four quads a tile) spends most of
/// its time here, so the work a row does is made small: when the rows share a zero point
/// and the columns share one (a convolution's weights per tensor and its input), the
/// column term `za·cb` is one vector a half for the tile and the row term, with the
/// row's bias, one scalar (wrapping i32, so the same bits in any order): two additions a
/// half, where a row once took three and two `vpmulld`. Each output type has its own row
/// loop; whole rows of bytes are narrowed two rows at a time ([`pairs_of_rows`]); a row
/// narrower than 32 columns, or with columns to leave out, goes out with masked stores.
/// Kernel only, a 16 -> 96 1x1 convolution on 112x112 requantized to u8 (Xeon family 6
/// model 207, same process): 405-410 -> 373-378 us with the pairs (and 3-5% less before
/// them, with the terms made once a tile).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn store(sums: &[[__m512i; 2]], out: TileOut<'_>) {
    let terms = Terms::new(&out);
    let (ldc, w, keep) = (out.ldc, out.w, out.keep);
    let (min, max) = if matches!(out.c, Dst::I8(_)) { (-128, 127) } else { (0, 255) };
    let rq = out.requant.map(|rq| Vectors::new(rq, out.scale_cols, min, max));
    let sums = &sums[..out.h];
    let rows = sums.iter().enumerate();
    match out.c {
        Dst::I32(c) => {
            for (r, s) in rows {
                let v = terms.row(*s, r);
                let c = &mut c[r * ldc..];
                match keep {
                    None => put_row(c, w, v, |x, n, h| store_first_i32(x, n, h)),
                    Some(keep) => put_kept(c, keep, v, |x, n, h| store_first_i32(x, n, h)),
                }
            }
        }
        Dst::U8(c) if keep.is_none() && w == NR => {
            pairs_of_rows(sums, &terms, rq.as_ref().expect("requantizing"), |r, bytes| {
                store32_bytes((&mut c[r * ldc..r * ldc + NR]).try_into().expect("a row of 32"), bytes)
            })
        }
        Dst::I8(c) if keep.is_none() && w == NR => {
            pairs_of_rows(sums, &terms, rq.as_ref().expect("requantizing"), |r, bytes| {
                store32_bytes((&mut c[r * ldc..r * ldc + NR]).try_into().expect("a row of 32"), bytes)
            })
        }
        Dst::U8(c) => {
            let rq = rq.as_ref().expect("requantizing");
            for (r, s) in rows {
                let v = rq.row(terms.row(*s, r), r);
                let c = &mut c[r * ldc..];
                match keep {
                    None => put_row(c, w, v, |x, n, h| store_first_bytes(x, n, h)),
                    Some(keep) => put_kept(c, keep, v, |x, n, h| store_first_bytes(x, n, h)),
                }
            }
        }
        Dst::I8(c) => {
            let rq = rq.as_ref().expect("requantizing");
            for (r, s) in rows {
                let v = rq.row(terms.row(*s, r), r);
                let c = &mut c[r * ldc..];
                match keep {
                    None => put_row(c, w, v, |x, n, h| store_first_bytes(x, n, h)),
                    Some(keep) => put_kept(c, keep, v, |x, n, h| store_first_bytes(x, n, h)),
                }
            }
        }
    }
}

/// Whole rows of 32 requantized to bytes two rows at a time: each row's two halves are
/// clamped above in float (a NaN kept, then made the least i32 by the conversion), and
/// the four vectors of a pair narrowed by two saturating packs and one permutation
/// (`vpackusdw`, `vpackuswb`, `vpermd`: four instructions where `vpmovdb` takes two a
/// vector), which also clamp below: the same bytes as clamping both ends in float (the
/// lower bound, `min - zy`, is an integer, so rounding commutes with it). An int8 output
/// is made as uint8 with its zero point raised by 128, then its bytes' top bits flipped.
/// `put(r, bytes)` writes row `r`'s 32 bytes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
#[inline]
fn pairs_of_rows(sums: &[[__m512i; 2]], terms: &Terms<'_>, rq: &Vectors<'_>, mut put: impl FnMut(usize, __m256i)) {
    // Dword `4 i + p` of the packs' result is byte quad `i` (of four) of: row A's first
    // half (p = 0), its second (1), row B's first (2), its second (3).
    let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    let flip = _mm512_set1_epi8(if rq.flip { -128 } else { 0 });
    for r in (0..sums.len()).step_by(2) {
        let a = rq.row_below(terms.row(sums[r], r), r);
        let b = if r + 1 < sums.len() { rq.row_below(terms.row(sums[r + 1], r + 1), r + 1) } else { a };
        let words = [_mm512_packus_epi32(a[0], a[1]), _mm512_packus_epi32(b[0], b[1])];
        let bytes = _mm512_xor_si512(_mm512_permutexvar_epi32(order, _mm512_packus_epi16(words[0], words[1])), flip);
        put(r, _mm512_castsi512_si256(bytes));
        if r + 1 < sums.len() {
            put(r + 1, _mm512_extracti64x4_epi64::<1>(bytes));
        }
    }
}

/// A tile's zero-point terms and its rows' biases (zero without a requantization).
struct Terms<'a> {
    row_sums: &'a [i32],
    za: &'a [i32; MR],
    zb0: i32,
    k: i32,
    bias: Option<&'a [i32; MR]>,
    /// `za·cb` less the columns' biases, for every row (when the rows share `za`).
    col: [__m512i; 2],
    /// The columns' biases.
    bias_cols: [__m512i; 2],
    /// The columns' sums and zero points (for the general case).
    cb: [__m512i; 2],
    zb: [__m512i; 2],
    /// Rows and columns each share a zero point.
    shared: bool,
}

impl<'a> Terms<'a> {
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn new(out: &TileOut<'a>) -> Terms<'a> {
        let half = |x: &[i32; NR], h: usize| -> [i32; 16] { x[16 * h..16 * h + 16].try_into().expect("16 lanes") };
        let cb = [load16i(&half(out.col_sums, 0)), load16i(&half(out.col_sums, 1))];
        let zb = [load16i(&half(out.zb, 0)), load16i(&half(out.zb, 1))];
        let za0 = _mm512_set1_epi32(out.za[0]);
        let bias_cols = [load16i(&half(out.bias_cols, 0)), load16i(&half(out.bias_cols, 1))];
        Terms {
            row_sums: out.row_sums,
            za: out.za,
            zb0: out.zb[0],
            k: out.k,
            bias: out.requant.map(|rq| &rq.bias),
            col: std::array::from_fn(|h| _mm512_sub_epi32(_mm512_mullo_epi32(za0, cb[h]), bias_cols[h])),
            bias_cols,
            cb,
            zb,
            shared: out.one_za && out.one_zb,
        }
    }

    /// Row `r`'s sums `s` with the zero-point terms and the row's bias.
    #[target_feature(enable = "avx512f")]
    #[inline]
    fn row(&self, s: [__m512i; 2], r: usize) -> [__m512i; 2] {
        let za = self.za[r];
        let t = self.row_sums[r].wrapping_sub(self.k.wrapping_mul(za));
        let bias = self.bias.map_or(0, |b| b[r]);
        if self.shared {
            let row = _mm512_set1_epi32(bias.wrapping_sub(self.zb0.wrapping_mul(t)));
            return [
                _mm512_add_epi32(_mm512_sub_epi32(s[0], self.col[0]), row),
                _mm512_add_epi32(_mm512_sub_epi32(s[1], self.col[1]), row),
            ];
        }
        let (za, t, bias) = (_mm512_set1_epi32(za), _mm512_set1_epi32(t), _mm512_set1_epi32(bias));
        std::array::from_fn(|h| {
            let col = _mm512_mullo_epi32(za, self.cb[h]);
            let row = _mm512_mullo_epi32(self.zb[h], t);
            let bias = _mm512_add_epi32(bias, self.bias_cols[h]);
            _mm512_add_epi32(_mm512_sub_epi32(_mm512_sub_epi32(s[h], col), row), bias)
        })
    }
}

/// The first `w` (at most 32) of a row's two halves into `c`: `store(c, n, half)` writes
/// a half's first `n` lanes.
#[inline(always)]
fn put_row<T>(c: &mut [T], w: usize, halves: [__m512i; 2], store: impl Fn(&mut [T], usize, __m512i)) {
    store(c, w.min(16), halves[0]);
    if w > 16 {
        store(&mut c[16..], w - 16, halves[1]);
    }
}

/// The columns of a row's two halves that `keep` marks (bit `l` for column `l`) into `c`,
/// one after the other: each half's compressed to its low lanes, then stored.
#[target_feature(enable = "avx512f")]
#[inline]
fn put_kept<T>(c: &mut [T], keep: u32, halves: [__m512i; 2], store: impl Fn(&mut [T], usize, __m512i)) {
    let mut at = 0;
    for (h, v) in halves.into_iter().enumerate() {
        let mask = (keep >> (16 * h)) as __mmask16;
        let n = mask.count_ones() as usize;
        if n > 0 {
            store(&mut c[at..], n, _mm512_maskz_compress_epi32(mask, v));
            at += n;
        }
    }
}

/// A tile's requantization in vectors, made once per tile.
struct Vectors<'a> {
    rq: &'a super::packed::TileRequant,
    lo: __m512,
    hi: __m512,
    zy: __m512i,
    scale_cols: [__m512; 2],
    /// For [`pairs_of_rows`]: the zero point of the output made as uint8, and whether it
    /// is int8 (its bytes' top bits to flip).
    zy_u8: __m512i,
    flip: bool,
}

impl<'a> Vectors<'a> {
    /// For outputs of the range `min..=max`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    fn new(rq: &'a super::packed::TileRequant, scale_cols: &[f32; NR], min: i32, max: i32) -> Vectors<'a> {
        let half = |h: usize| -> [f32; 16] { scale_cols[16 * h..16 * h + 16].try_into().expect("16 lanes") };
        Vectors {
            rq,
            lo: _mm512_set1_ps((min - rq.zy) as f32),
            hi: _mm512_set1_ps((max - rq.zy) as f32),
            zy: _mm512_set1_epi32(rq.zy),
            scale_cols: [load16(&half(0)), load16(&half(1))],
            zy_u8: _mm512_set1_epi32(rq.zy - min),
            flip: min < 0,
        }
    }

    /// Row `r` (as [`row`](Self::row)) clamped above only, plus the uint8 zero point: for
    /// [`pairs_of_rows`], whose packs clamp below.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    fn row_below(&self, v: [__m512i; 2], r: usize) -> [__m512i; 2] {
        let row_scale = _mm512_set1_ps(self.rq.scale_rows[r]);
        std::array::from_fn(|h| {
            let scale = if self.rq.per_row { row_scale } else { self.scale_cols[h] };
            let x = _mm512_mul_ps(_mm512_cvtepi32_ps(v[h]), scale);
            // `vminps` gives its second operand for a NaN in either: the NaN, which
            // converts to i32::MIN (far below zero even with the zero point added).
            let x = _mm512_min_ps(self.hi, x);
            _mm512_add_epi32(_mm512_cvtps_epi32(x), self.zy_u8)
        })
    }

    /// Row `r` of the tile (`v`, 32 sums with their bias) requantized, each value in the
    /// low byte of its i32 lane, 16 in each half.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    fn row(&self, v: [__m512i; 2], r: usize) -> [__m512i; 2] {
        let row_scale = _mm512_set1_ps(self.rq.scale_rows[r]);
        std::array::from_fn(|h| {
            let scale = if self.rq.per_row { row_scale } else { self.scale_cols[h] };
            let x = _mm512_mul_ps(_mm512_cvtepi32_ps(v[h]), scale);
            // `vmaxps` gives its second operand for a NaN in the first.
            let x = _mm512_min_ps(_mm512_max_ps(x, self.lo), self.hi);
            _mm512_add_epi32(_mm512_cvtps_epi32(x), self.zy)
        })
    }
}

/// The planes of an 8-bit depthwise convolution (`qgemm::depthwise`), in one call: each
/// plane's rows copied into the padded plane (made unsigned, 64 bytes a masked load and
/// store), then 16 outputs at a time (16 of a row, or `ahead` whole rows of up to 8),
/// each kernel row's input bytes gathered by one `vpermb` from one 64-byte load and
/// summed against the row's weight dword by one `vpdpbusd`; then stored as i32 or
/// requantized (the requantization of `qgemm::requantize`: `(sum + bias) · scale` clamped
/// in float, NaN to the minimum, rounded half to even, plus `zy`), the last outputs of a
/// vector with masked stores.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx512vbmi")]
pub(crate) fn qdw_planes_avx512<T: super::Q8>(
    job: &super::depthwise::Planes<'_, T>,
    padded: &mut [u8],
    out: super::depthwise::QDwPlanes<'_>,
) {
    use super::depthwise::{requant_of, DwRequant, QDwPlanes, MAX_KH};
    let g = job.geo;
    let (out_h, out_w, ahead) = (g.out_h, g.out_w, g.ahead);
    // Byte `4 i + q` of the gather: lane `i`'s tap `q` (taps past the kernel's width meet
    // zero weights).
    let order = load64_bytes(&g.order);
    let flip = _mm512_set1_epi8(T::TO_UNSIGNED as u8 as i8);
    // (`requant` for the output's range: (bias, scale, lo, hi, zy) as vectors.)
    let requant = |rq: DwRequant, min: i32, max: i32| {
        (
            _mm512_set1_epi32(rq.bias),
            _mm512_set1_ps(rq.scale),
            _mm512_set1_ps((min - rq.zy) as f32),
            _mm512_set1_ps((max - rq.zy) as f32),
            _mm512_set1_epi32(rq.zy),
        )
    };
    let bytes = |acc: __m512i, (bias, scale, lo, hi, zy): (__m512i, __m512, __m512, __m512, __m512i)| {
        let x = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(acc, bias)), scale);
        // `vmaxps` gives its second operand for a NaN in the first.
        let x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
        _mm512_add_epi32(_mm512_cvtps_epi32(x), zy)
    };
    let mut out = out;
    let mut ch = job.planes.start % job.c;
    for i in 0..job.planes.len() {
        for (r, row) in job.x[i * job.plane..][..job.plane].chunks_exact(job.in_w).enumerate() {
            let dst = &mut padded[job.at + r * g.stride..][..job.in_w];
            let mut col = 0;
            while col < job.in_w {
                copy_first_bytes_xor(&mut dst[col..], &row[col..], (job.in_w - col).min(64), flip);
                col += 64;
            }
        }
        let dwords = job.dwords(ch);
        let kh = dwords.len();
        let weights: [__m512i; MAX_KH] =
            std::array::from_fn(|r| _mm512_set1_epi32(dwords.get(r).copied().unwrap_or(0)));
        let base = _mm512_set1_epi32(job.base(ch));
        let padded = &*padded;
        let sums = |oy: usize, ox: usize| {
            let mut acc = base;
            for (r, w) in weights.iter().enumerate().take(kh) {
                let at = (oy * g.sh + r * g.dh) * g.stride + ox * g.sw;
                let window = load64_bytes(padded[at..at + 64].try_into().expect("64 bytes"));
                acc = _mm512_dpbusd_epi32(acc, _mm512_permutexvar_epi8(order, window), *w);
            }
            acc
        };
        // Each vector's outputs: `ahead` whole rows from row `oy`, or 16 outputs of row
        // `oy` from column `ox`; `$put(first output, count, sums)`. (Counted by hand: a
        // `step_by` made a division a row; a 14x14 plane took 172 ns with it, 141 without.)
        macro_rules! each {
            ($y:expr, $put:expr) => {{
                let y = &mut $y[i * job.p..(i + 1) * job.p];
                let mut oy = 0;
                while oy < out_h {
                    let n = if ahead > 1 { (out_h - oy).min(ahead) * out_w } else { out_w };
                    let mut ox = 0;
                    while ox < n {
                        $put(&mut y[oy * out_w + ox..], (n - ox).min(16), sums(oy, ox));
                        ox += 16;
                    }
                    oy += ahead;
                }
            }};
        }
        match &mut out {
            QDwPlanes::I32(y) => each!(y, |y: &mut [i32], n, acc| store_first_i32(y, n, acc)),
            QDwPlanes::U8(y, r) => {
                let v = requant(requant_of(r, ch), 0, 255);
                each!(y, |y: &mut [u8], n, acc| store_first_bytes(y, n, bytes(acc, v)));
            }
            QDwPlanes::I8(y, r) => {
                let v = requant(requant_of(r, ch), -128, 127);
                each!(y, |y: &mut [i8], n, acc| store_first_bytes(y, n, bytes(acc, v)));
            }
        }
        ch += 1;
        if ch == job.c {
            ch = 0;
        }
    }
}

/// The smallest and largest of `x`, NaN ignored (see `qgemm::min_max`).
#[target_feature(enable = "avx512f")]
pub(crate) fn min_max_avx512(x: &[f32]) -> (f32, f32) {
    let (chunks, rest) = x.as_chunks::<16>();
    let (mut lo, mut hi) = (_mm512_set1_ps(f32::INFINITY), _mm512_set1_ps(f32::NEG_INFINITY));
    for c in chunks {
        // With a NaN in `v`, `vminps` / `vmaxps` return their second operand.
        let v = load16(c);
        lo = _mm512_min_ps(v, lo);
        hi = _mm512_max_ps(v, hi);
    }
    let (mut l, mut h) = ([0f32; 16], [0f32; 16]);
    store16(&mut l, lo);
    store16(&mut h, hi);
    let (mut lo, mut hi) = (f32::INFINITY, f32::NEG_INFINITY);
    for &v in l.iter().chain(rest) {
        lo = if v < lo { v } else { lo };
    }
    for &v in h.iter().chain(rest) {
        hi = if v > hi { v } else { hi };
    }
    (lo, hi)
}
