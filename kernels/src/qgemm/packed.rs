//! The 8-bit product on packed operands: `C[i][j] = Σ_k (A[i][k] - za[i]) · (B[k][j] -
//! zb[j])` in wrapping i32 (exact whenever the true sum fits, as for 8-bit operands and
//! any depth below 33 000), in the layout of the dot-product instructions.
//!
//! AVX-512 VNNI's `vpdpbusd` adds to each of 16 i32 lanes the four products of an
//! unsigned byte of one operand and a signed byte of the other. So A is packed unsigned
//! and B signed: an int8 A is shifted by +128 and a uint8 B by -128, their zero points
//! with them (`a - za = (a + 128) - (za + 128)`), which leaves every difference, and so
//! C, unchanged. The sums of A's rows and B's columns are kept with them, and the zero
//! points enter once per element of C: `C = S - za·colsum(B) - zb·(rowsum(A) - k·za)`
//! where `S = Σ A·B` on the shifted bytes.
//!
//! - A (m×k) in strips of [`MR`] rows; a strip is chunks of 64 depths, each holding
//!   for every row of the strip its 16 quads (four consecutive depths, one i32 of four
//!   bytes), so a tile's broadcast of row `r`, quad `j` of a chunk reads one i32.
//! - B (k×n) in panels of [`NR`] columns; a panel holds for each quad two vectors of 16
//!   columns, each lane the column's four bytes of that quad.
//!
//! Depths past k are zero bytes in both, adding nothing to S or to the sums.

use std::ops::Range;

use super::QInt;
use crate::arch::Level;

/// Rows of a strip (and of the full tile).
pub const MR: usize = 14;
/// Columns of a panel (two vectors of 16).
pub const NR: usize = 32;
/// Quads (four depths) in a chunk of a strip.
pub(crate) const CHUNK: usize = 16;

/// An 8-bit element type of a product operand.
pub trait Q8: QInt {
    /// Added to a value to make it unsigned (0 for uint8, 128 for int8).
    const TO_UNSIGNED: i32;
    fn unsigned(self) -> u8 {
        (self.to_i32() + Self::TO_UNSIGNED) as u8
    }
    fn signed(self) -> i8 {
        (self.to_i32() + Self::TO_UNSIGNED - 128) as i8
    }
    /// Eight values' bytes as they are stored (little-endian), and back.
    fn load8(v: &[Self; 8]) -> u64;
    fn store8(w: u64, v: &mut [Self; 8]);
}

impl Q8 for u8 {
    const TO_UNSIGNED: i32 = 0;
    #[inline(always)]
    fn load8(v: &[u8; 8]) -> u64 {
        u64::from_le_bytes(*v)
    }
    #[inline(always)]
    fn store8(w: u64, v: &mut [u8; 8]) {
        *v = w.to_le_bytes();
    }
}

impl Q8 for i8 {
    const TO_UNSIGNED: i32 = 128;
    #[inline(always)]
    fn load8(v: &[i8; 8]) -> u64 {
        u64::from_le_bytes(v.map(|b| b as u8))
    }
    #[inline(always)]
    fn store8(w: u64, v: &mut [i8; 8]) {
        *v = w.to_le_bytes().map(|b| b as i8);
    }
}

/// Whether this CPU runs the AVX-512 VNNI tiles (else a portable tile runs the same
/// packing, much more slowly).
pub fn vnni_supported() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            Level::detected() == Level::Avx512 && std::arch::is_x86_feature_detected!("avx512vnni")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// A left operand: unsigned bytes in strips, the sums of its rows, its zero points
/// (shifted with it; one, or one per row).
#[derive(Debug, Default, Clone)]
pub struct QPackedA {
    pub(crate) units: crate::lines::Lines<i32>,
    pub(crate) row_sums: Vec<i32>,
    pub(crate) zero: Vec<i32>,
    pub(crate) m: usize,
    /// Depth of the layout (a convolution's has zero quads inside it).
    pub(crate) k: usize,
    /// Depths that hold values: the product's depth for the zero-point terms.
    pub(crate) real_k: usize,
    /// A convolution's weights reordered, and their zero points shifted, while packing.
    pub(crate) reorder: Vec<u8>,
    pub(crate) zero_shifted: Vec<i32>,
}

/// A right operand: signed bytes in panels, the sums of its columns, its zero points
/// (shifted with it; one, or one per column).
#[derive(Debug, Default, Clone)]
pub struct QPackedB {
    pub(crate) units: crate::lines::Lines<i32>,
    /// Four rows of bytes, while packing.
    rows: Vec<i8>,
    pub(crate) col_sums: Vec<i32>,
    pub(crate) zero: Vec<i32>,
    /// As in [`QPackedA`].
    pub(crate) k: usize,
    pub(crate) real_k: usize,
    pub(crate) n: usize,
    /// A convolution's input with its channels in quads, while packing.
    pub(crate) words: Vec<i32>,
    pub(crate) word_row: Vec<i32>,
}

/// Units of B for `count` panels of `panel_len`: with the slack after the last one that
/// AMX tiles read for whole chunks of 16 quads (quads past the depth, zero in A: their
/// bytes add nothing).
pub(crate) fn panel_units(count: usize, panel_len: usize) -> usize {
    count * panel_len + 2 * CHUNK
}

pub(crate) fn quads(k: usize) -> usize {
    k.div_ceil(4)
}

fn chunks(k: usize) -> usize {
    quads(k).div_ceil(CHUNK)
}

impl QPackedA {
    pub fn new() -> QPackedA {
        QPackedA::default()
    }

    /// An A of `m` rows of depth `k` (`real_k` of them values) with zero point `za`
    /// (unsigned), whose bytes the tiles read elsewhere (`nhwc::ConvTaps`): no units, and
    /// row sums of 0 (its products' weights have zero points of 0).
    pub(crate) fn rows_only(&mut self, m: usize, (k, real_k): (usize, usize), za: i32) {
        self.m = m;
        self.k = k;
        self.real_k = real_k;
        self.zero.clear();
        self.zero.push(za);
        self.units.reset(0, [0; 16]);
        self.row_sums.clear();
        self.row_sums.resize(m, 0);
    }

    pub fn rows(&self) -> usize {
        self.m
    }

    fn strip_len(&self) -> usize {
        chunks(self.k) * MR
    }

    /// Packs A (m×k, row `i` at `a[i * lda..]`) with zero points `za` (one, or one per
    /// row), reusing this one's memory.
    pub fn pack<T: Q8>(&mut self, a: &[T], m: usize, k: usize, lda: usize, za: &[i32]) {
        assert!(za.len() == 1 || za.len() == m, "qgemm: one zero point, or one per row of A");
        assert!(m == 0 || a.len() >= (m - 1) * lda + k, "qgemm: A is shorter than its shape");
        self.m = m;
        self.k = k;
        self.real_k = k;
        self.zero.clear();
        self.zero.extend(za.iter().map(|&z| z + T::TO_UNSIGNED));
        let strip_len = self.strip_len();
        self.units.reset(m.div_ceil(MR) * strip_len, [0; 16]);
        self.row_sums.clear();
        self.row_sums.resize(m, 0);
        for i in 0..m {
            let row = &a[i * lda..i * lda + k];
            let (strip, r) = (i / MR, i % MR);
            let mut sum = 0i32;
            for (ch, piece) in row.chunks(4 * CHUNK).enumerate() {
                let mut bytes = [0u8; 4 * CHUNK];
                for (b, &v) in bytes.iter_mut().zip(piece) {
                    *b = v.unsigned();
                }
                sum += bytes.iter().map(|&b| b as i32).sum::<i32>();
                let unit = &mut self.units[strip * strip_len + ch * MR + r];
                for (o, quad) in unit.iter_mut().zip(bytes.as_chunks::<4>().0) {
                    *o = i32::from_le_bytes(*quad);
                }
            }
            self.row_sums[i] = sum;
        }
    }
}

impl QPackedB {
    pub fn new() -> QPackedB {
        QPackedB::default()
    }

    pub fn cols(&self) -> usize {
        self.n
    }

    pub(crate) fn panel_len(&self) -> usize {
        2 * quads(self.k)
    }

    /// The depth of the product (its real depth: the multiply-adds a column takes).
    pub fn k_depth(&self) -> usize {
        self.real_k
    }

    /// Whether every column's zero point is 0 (as packed: 0 for int8, 128 for uint8).
    pub fn zero_points_zero(&self) -> bool {
        self.zero.iter().all(|&z| z == 0)
    }

    /// Packs B (k×n, row `r` at `b[r * ldb..]`) with zero points `zb` (one, or one per
    /// column), reusing this one's memory.
    pub fn pack<T: Q8>(&mut self, b: &[T], k: usize, n: usize, ldb: usize, zb: &[i32]) {
        assert!(k == 0 || b.len() >= (k - 1) * ldb + n, "qgemm: B is shorter than its shape");
        self.pack_rows::<T>(k, n, zb, |r, dst| {
            for (o, &v) in dst.iter_mut().zip(&b[r * ldb..]) {
                *o = v.signed();
            }
        });
    }

    /// Packs a k×n B of which `row(r, dst)` writes row `r` (n columns) as signed bytes
    /// (shifted as `T::signed` shifts), with zero points `zb` of `T` (one, or one per
    /// column).
    pub fn pack_rows<T: Q8>(&mut self, k: usize, n: usize, zb: &[i32], mut row: impl FnMut(usize, &mut [i8])) {
        assert!(zb.len() == 1 || zb.len() == n, "qgemm: one zero point, or one per column of B");
        self.k = k;
        self.real_k = k;
        self.n = n;
        self.zero.clear();
        self.zero.extend(zb.iter().map(|&z| z + T::TO_UNSIGNED - 128));
        let panel_len = self.panel_len();
        self.units.reset(panel_units(n.div_ceil(NR), panel_len), [0; 16]);
        self.col_sums.clear();
        self.col_sums.resize(n, 0);
        // Four rows at a time (one quad), whole, then interleaved 16 columns at a time; in
        // the widest build (the filler inlined into it).
        let mut rows = std::mem::take(&mut self.rows);
        let stride = n.next_multiple_of(16);
        rows.clear();
        rows.resize(4 * stride, 0);
        let (units, col_sums) = (&mut self.units, &mut self.col_sums);
        crate::arch::widest(
            #[inline(always)]
            || {
                if n == 0 {
                    return;
                }
                for q in 0..quads(k) {
                    for (d, r) in rows.chunks_exact_mut(stride).enumerate() {
                        let depth = 4 * q + d;
                        if depth < k {
                            row(depth, &mut r[..n]);
                        } else {
                            r[..n].fill(0);
                        }
                    }
                    interleave(&rows, stride, n, col_sums, units, |v| (v / 2) * panel_len + 2 * q + v % 2);
                }
            },
        );
        self.rows = rows;
    }
}

/// Adds four rows of bytes (`rows`, each `stride` long, `n` used) to the column sums and
/// writes them as quads: columns `16 v .. 16 v + 16` into unit `unit(v)`.
#[inline(always)]
fn interleave(
    rows: &[i8],
    stride: usize,
    n: usize,
    col_sums: &mut [i32],
    units: &mut [[i32; 16]],
    unit: impl Fn(usize) -> usize,
) {
    let (r0, rest) = rows.split_at(stride);
    let (r1, rest) = rest.split_at(stride);
    let (r2, r3) = rest.split_at(stride);
    for (j, s) in col_sums[..n].iter_mut().enumerate() {
        *s += r0[j] as i32 + r1[j] as i32 + r2[j] as i32 + r3[j] as i32;
    }
    for v in 0..n.div_ceil(16) {
        let at = 16 * v;
        let col = |r: &[i8]| -> [i8; 16] { r[at..at + 16].try_into().expect("16 columns") };
        let (c0, c1, c2, c3) = (col(r0), col(r1), col(r2), col(r3));
        let dst = &mut units[unit(v)];
        for l in 0..16 {
            let word = (c0[l] as u8 as u32)
                | (c1[l] as u8 as u32) << 8
                | (c2[l] as u8 as u32) << 16
                | (c3[l] as u8 as u32) << 24;
            dst[l] = word as i32;
        }
    }
}

/// Where a product goes: its i32 sums, or them requantized to 8 bits.
pub enum QOut<'a> {
    I32(&'a mut [i32]),
    U8(&'a mut [u8], Requant<'a>),
    I8(&'a mut [i8], Requant<'a>),
}

/// Requantization as the quantized ops define it: `y = clamp(round_half_even((acc +
/// bias) · scale) + zy)`, the sum plus bias in wrapping i32, then float32.
#[derive(Clone, Copy, Debug)]
pub struct Requant<'a> {
    /// One scale, or one per row of A (`per_row`: a convolution's output channels) or per
    /// column of B (a matrix product's).
    pub scale: &'a [f32],
    pub per_row: bool,
    /// A convolution's bias: one int32 per row of A when `per_row` (its output channels
    /// as rows), else one per column of B (its output channels as columns).
    pub bias: Option<&'a [i32]>,
    pub zy: i32,
}

impl QOut<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            QOut::I32(c) => c.len(),
            QOut::U8(c, _) => c.len(),
            QOut::I8(c, _) => c.len(),
        }
    }
}

/// `out` (rows × `cols` of the product, row stride `ldc`; `cols.start` a multiple of
/// [`NR`]) = `a` × `b` with their zero points, as i32 or requantized.
pub fn qgemm(a: &QPackedA, b: &QPackedB, cols: Range<usize>, out: QOut<'_>, ldc: usize) {
    qgemm_rows(a, 0..a.m, b, cols, out, ldc)
}

/// [`qgemm`] for the rows `rows` of A only (`rows.start` a multiple of [`MR`]): `out`
/// holds those rows, from its start. Tasks that split a product by rows share A and B.
pub fn qgemm_rows(a: &QPackedA, rows: Range<usize>, b: &QPackedB, cols: Range<usize>, out: QOut<'_>, ldc: usize) {
    qgemm_placed(a, rows, b, cols, out, Place { ldc, kept: None })
}

/// Where a product's columns go in C: rows `ldc` apart, and with `kept` only the grid
/// columns it keeps, one after the other in each row.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    pub ldc: usize,
    pub kept: Option<Kept>,
}

/// The columns kept of a grid of rows of `wq` columns: the first `out_w` of each (a
/// convolution's outputs on the phase planes' grid, `implicit`). Kept columns are
/// consecutive outputs, whichever grid rows they are in.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kept {
    pub wq: usize,
    pub out_w: usize,
    /// The grid column of B's column 0.
    pub at: usize,
}

impl Kept {
    /// The kept columns before B's column `j` (counted from the grid's first).
    pub fn before(self, j: usize) -> usize {
        let g = self.at + j;
        (g / self.wq) * self.out_w + (g % self.wq).min(self.out_w)
    }

    /// Which of the `w` (at most 32) columns from B's column `j0` are kept: bit `l` for
    /// column `j0 + l`.
    pub fn mask(self, j0: usize, w: usize) -> u32 {
        let (mut m, mut x) = (0u32, (self.at + j0) % self.wq);
        for l in 0..w.min(32) {
            if x < self.out_w {
                m |= 1 << l;
            }
            x += 1;
            if x == self.wq {
                x = 0;
            }
        }
        m
    }
}

impl Place {
    /// The columns of C that `cols` of the product write.
    fn width(self, cols: &Range<usize>) -> usize {
        match self.kept {
            None => cols.len(),
            Some(k) => k.before(cols.end) - k.before(cols.start),
        }
    }
}

/// [`qgemm_rows`] into C as `place` says.
pub(crate) fn qgemm_placed(
    a: &QPackedA,
    rows: Range<usize>,
    b: &QPackedB,
    cols: Range<usize>,
    mut out: QOut<'_>,
    place: Place,
) {
    let (ldc, width) = (place.ldc, place.width(&cols));
    assert!(a.k == b.k && a.real_k == b.real_k, "qgemm: the operands' depths differ");
    assert!(cols.start.is_multiple_of(NR) && cols.end <= b.n, "qgemm: columns outside B or off a panel");
    assert!(rows.start.is_multiple_of(MR) && rows.end <= a.m, "qgemm: rows outside A or off a strip");
    assert!(rows.is_empty() || out.len() >= (rows.len() - 1) * ldc + width, "qgemm: C is too short");
    assert!(rows.len() < 2 || ldc >= width, "qgemm: C's rows overlap (its stride is below its width)");
    assert!(place.kept.is_none_or(|k| k.wq > 0 && k.out_w <= k.wq), "qgemm: a grid keeps at most its width");
    if let QOut::U8(_, rq) | QOut::I8(_, rq) = &out {
        let want = if rq.per_row { a.m } else { b.n };
        assert!(rq.scale.len() == 1 || rq.scale.len() == want, "qgemm: one scale, or one per row or column");
        assert!(rq.bias.is_none_or(|bias| bias.len() == want), "qgemm: a bias is one per row or column");
    }
    if rows.is_empty() || cols.is_empty() {
        return;
    }
    if vnni_supported() {
        crate::arch::qgemm_vnni(a, rows, b, cols, &mut out, place);
    } else {
        portable(a, rows, b, cols, &mut out, place);
    }
}

/// A tile's part of the output.
pub(crate) enum Dst<'a> {
    I32(&'a mut [i32]),
    U8(&'a mut [u8]),
    I8(&'a mut [i8]),
}

/// A strip's requantization: its rows' scales (used when `per_row`) and biases, and the
/// output's zero point; the columns' scales come with each tile.
#[derive(Clone, Copy)]
pub(crate) struct TileRequant {
    pub per_row: bool,
    pub scale_rows: [f32; MR],
    pub bias: [i32; MR],
    pub zy: i32,
}

/// The parts of a tile's place: its rows' sums and zero points, its columns' sums, zero
/// points and scales, and where it goes. The rows' parts are made once a strip and the
/// columns' are read in place (copied only at the product's last, partial panel), so
/// that a shallow product (a 1x1 convolution of 16 channels, whose tiles sum only four
/// quads) spends its time in the tiles rather than in making their parts.
pub(crate) struct TileOut<'a> {
    pub c: Dst<'a>,
    pub requant: Option<&'a TileRequant>,
    /// The columns' scales (read unless the requantization is per row).
    pub scale_cols: &'a [f32; NR],
    /// The columns' biases (zero unless the requantization is per column and has one).
    pub bias_cols: &'a [i32; NR],
    pub ldc: usize,
    /// The tile's first row in A.
    pub row: usize,
    /// Rows of the tile (at most MR) and columns (at most NR).
    pub h: usize,
    pub w: usize,
    /// Which of the `w` columns are kept (bit `l` for column `l`), written one after the
    /// other; `None`: all of them.
    pub keep: Option<u32>,
    pub row_sums: &'a [i32],
    pub za: &'a [i32; MR],
    /// Every row of the tile has `za[0]`.
    pub one_za: bool,
    /// Entries past `w` are unspecified.
    pub col_sums: &'a [i32; NR],
    pub zb: &'a [i32; NR],
    /// Every column of the product has `zb[0]`.
    pub one_zb: bool,
    pub k: i32,
}

impl TileOut<'_> {
    /// Writes the tile's sums `s` (row `r`, column `j` at `s[r][j]`) with the zero-point
    /// terms, requantized where asked.
    #[inline(always)]
    pub fn store_scalar(mut self, s: &[[i32; NR]]) {
        let (ldc, w, keep) = (self.ldc, self.w, self.keep);
        // The tile's columns written, in order, and their count.
        let mut kept = [0usize; NR];
        let n = match keep {
            None => {
                kept.iter_mut().enumerate().for_each(|(j, k)| *k = j);
                w
            }
            Some(mask) => {
                let mut n = 0;
                for j in (0..w).filter(|&j| mask >> j & 1 == 1) {
                    kept[n] = j;
                    n += 1;
                }
                n
            }
        };
        let kept = &kept[..n];
        for (r, sums) in s.iter().enumerate().take(self.h) {
            let (za, ra) = (self.za[r], self.row_sums[r]);
            let value = |j: usize| correct(sums[j], za, ra, self.col_sums[j], self.zb[j], self.k);
            let scaled = |j: usize| {
                let rq = self.requant.expect("requantizing");
                let scale = if rq.per_row { rq.scale_rows[r] } else { self.scale_cols[j] };
                (value(j).wrapping_add(rq.bias[r]).wrapping_add(self.bias_cols[j]) as f32 * scale, rq.zy)
            };
            match &mut self.c {
                Dst::I32(c) => c[r * ldc..r * ldc + n].iter_mut().zip(kept).for_each(|(o, &j)| *o = value(j)),
                Dst::U8(c) => c[r * ldc..r * ldc + n].iter_mut().zip(kept).for_each(|(o, &j)| {
                    let (v, zy) = scaled(j);
                    *o = super::requantize::<u8>(v, zy);
                }),
                Dst::I8(c) => c[r * ldc..r * ldc + n].iter_mut().zip(kept).for_each(|(o, &j)| {
                    let (v, zy) = scaled(j);
                    *o = super::requantize::<i8>(v, zy);
                }),
            }
        }
    }
}

/// `S - za·cb - zb·(ra - k·za)` in wrapping i32.
#[inline(always)]
pub(crate) fn correct(s: i32, za: i32, ra: i32, cb: i32, zb: i32, k: i32) -> i32 {
    s.wrapping_sub(za.wrapping_mul(cb)).wrapping_sub(zb.wrapping_mul(ra.wrapping_sub(k.wrapping_mul(za))))
}

/// Every tile of the product, in the order the kernels take them: each panel of `cols`
/// over every strip of A, `P` (1 or 2) strips at a time. `tile(strips, panel, (i, n),
/// outs)` computes one: `strips` holds the strips (one after the other, `strip_len` units
/// each), `panel` the panel and what follows it in B, panel `i` of the `n` that the
/// strips meet one after the other, `outs[i]` strip `i`'s place (`None` past the last
/// strip).
pub(crate) fn for_each_tile<const P: usize>(
    a: &QPackedA,
    rows: Range<usize>,
    b: &QPackedB,
    cols: Range<usize>,
    out: &mut QOut<'_>,
    place: Place,
    mut tile: impl FnMut(&[[i32; 16]], &[[i32; 16]], (usize, usize), [Option<TileOut<'_>>; P]),
) {
    assert!(P == 1 || P == 2, "qgemm: one or two strips a tile");
    let (strip_len, panel_len, ldc) = (a.strip_len(), b.panel_len(), place.ldc);
    let at = |z: &[i32], i: usize| if z.len() == 1 { z[0] } else { z[i] };
    let requant = match out {
        QOut::I32(_) => None,
        QOut::U8(_, rq) | QOut::I8(_, rq) => Some(*rq),
    };
    let fat = |z: &[f32], i: usize| if z.len() == 1 { z[0] } else { z[i] };
    // The columns' parts that are one value for every column, as whole panels.
    let one_zb = b.zero.len() == 1;
    let zb_all = [b.zero.first().copied().unwrap_or(0); NR];
    let col_scales = requant.filter(|rq| !rq.per_row).map(|rq| rq.scale);
    let scale_all = [col_scales.filter(|s| s.len() == 1).map_or(1.0, |s| s[0]); NR];
    let col_bias = requant.filter(|rq| !rq.per_row).and_then(|rq| rq.bias);
    let no_bias = [0; NR];
    // A panel's `NR` values of `v` from column `j0`, in place, or copied (zeros past `w`)
    // into `pad` when `v` ends before them.
    fn panel_of<'v, T: Copy + Default>(v: &'v [T], j0: usize, w: usize, pad: &'v mut [T; NR]) -> &'v [T; NR] {
        match v.get(j0..j0 + NR) {
            Some(s) => s.try_into().expect("NR values"),
            None => {
                *pad = [T::default(); NR];
                pad[..w].copy_from_slice(&v[j0..j0 + w]);
                pad
            }
        }
    }
    /// A strip's rows' parts: how many, their zero points (and whether they share one),
    /// their requantization.
    struct Strip {
        i0: usize,
        h: usize,
        za: [i32; MR],
        one_za: bool,
        requant: Option<TileRequant>,
    }
    let strip_of = |s: usize| {
        let i0 = s * MR;
        let h = MR.min(rows.end - i0);
        let mut za = [0; MR];
        for (r, z) in za.iter_mut().enumerate().take(h) {
            *z = at(&a.zero, i0 + r);
        }
        let one_za = za[..h].iter().all(|&z| z == za[0]);
        let requant = requant.map(|rq| {
            let (mut scale_rows, mut bias) = ([1.0; MR], [0; MR]);
            for r in 0..h {
                if rq.per_row {
                    scale_rows[r] = fat(rq.scale, i0 + r);
                    bias[r] = rq.bias.map_or(0, |b| b[i0 + r]);
                }
            }
            TileRequant { per_row: rq.per_row, scale_rows, bias, zy: rq.zy }
        });
        Strip { i0, h, za, one_za, requant }
    };
    // Panels a block: as many as fill BLOCK_BYTES (at least one).
    let per = (BLOCK_BYTES / (panel_len * 64).max(1)).max(1);
    let (first, last) = (rows.start / MR, rows.end.div_ceil(MR));
    let mut b0 = cols.start;
    while b0 < cols.end {
        let b1 = (b0 + per * NR).min(cols.end);
        for s in (first..last).step_by(P) {
            // (A depth of 0 has strips of no chunks.)
            let count = P.min(last - s);
            // (An A of rows only, `QPackedA::rows_only`, has no units: its tiles read
            // their rows elsewhere.)
            let strips = a.units.get(s * strip_len..(s + count) * strip_len).unwrap_or(&[]);
            let parts: [Option<Strip>; P] = std::array::from_fn(|i| (i < count).then(|| strip_of(s + i)));
            let mut j0 = b0;
            while j0 < b1 {
                let w = NR.min(b1 - j0);
                // (The panel and what follows it: the AMX tiles read whole chunks.)
                let panel = &b.units[(j0 / NR) * panel_len..];
                let (mut cb_pad, mut zb_pad, mut scale_pad) = ([0; NR], [0; NR], [0.0; NR]);
                let cb = panel_of(&b.col_sums, j0, w, &mut cb_pad);
                let zb = if one_zb { &zb_all } else { panel_of(&b.zero, j0, w, &mut zb_pad) };
                let scale_cols = match col_scales {
                    Some(sc) if sc.len() > 1 => panel_of(sc, j0, w, &mut scale_pad),
                    _ => &scale_all,
                };
                let mut bias_pad = [0; NR];
                let bias_cols = col_bias.map_or(&no_bias, |bias| panel_of(bias, j0, w, &mut bias_pad));
                // Each strip's rows of C, from its tile's first element (a strip's rows
                // end before the next strip's: w <= ldc).
                let (col, w_out, keep) = match place.kept {
                    None => (j0 - cols.start, w, None),
                    Some(k) => {
                        // (A panel whose kept columns are its first ones is stored whole.)
                        let mask = k.mask(j0, w);
                        let n = mask.count_ones() as usize;
                        let keep = (mask != low_bits(n)).then_some(mask);
                        (k.before(j0) - k.before(cols.start), if keep.is_some() { w } else { n }, keep)
                    }
                };
                let at_c = (s * MR - rows.start) * ldc + col;
                let mut rest = Some(match out {
                    QOut::I32(c) => Dst::I32(&mut c[at_c..]),
                    QOut::U8(c, _) => Dst::U8(&mut c[at_c..]),
                    QOut::I8(c, _) => Dst::I8(&mut c[at_c..]),
                });
                let outs: [Option<TileOut<'_>>; P] = std::array::from_fn(|i| {
                    let part = parts[i].as_ref()?;
                    let c = rest.take().expect("the rows of C left");
                    let c = if i + 1 < count {
                        let (this, next) = c.split_at(MR * ldc);
                        rest = Some(next);
                        this
                    } else {
                        c
                    };
                    Some(TileOut {
                        c,
                        requant: part.requant.as_ref(),
                        scale_cols,
                        bias_cols,
                        ldc,
                        row: part.i0,
                        h: part.h,
                        w: w_out,
                        keep,
                        row_sums: &a.row_sums[part.i0..part.i0 + part.h],
                        za: &part.za,
                        one_za: part.one_za,
                        col_sums: cb,
                        zb,
                        one_zb,
                        k: a.real_k as i32,
                    })
                });
                tile(strips, panel, ((j0 - b0) / NR, (b1 - b0).div_ceil(NR)), outs);
                j0 += NR;
            }
        }
        b0 = b1;
    }
}

impl<'a> Dst<'a> {
    /// The first `at` elements and the rest.
    fn split_at(self, at: usize) -> (Dst<'a>, Dst<'a>) {
        match self {
            Dst::I32(c) => {
                let (x, y) = c.split_at_mut(at);
                (Dst::I32(x), Dst::I32(y))
            }
            Dst::U8(c) => {
                let (x, y) = c.split_at_mut(at);
                (Dst::U8(x), Dst::U8(y))
            }
            Dst::I8(c) => {
                let (x, y) = c.split_at_mut(at);
                (Dst::I8(x), Dst::I8(y))
            }
        }
    }
}

/// The lowest `n` (at most 32) bits.
fn low_bits(n: usize) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1 << n) - 1
    }
}

/// The bytes of B's panels a block of [`for_each_tile`] holds: they stay in L1 while
/// each strip of A passes over them, so each strip writes its rows' outputs in runs of
/// the block's columns rather than 32 at a time.
const BLOCK_BYTES: usize = 24 << 10;

/// The product without VNNI: the same tiles in plain integer arithmetic, which LLVM
/// vectorises (8 lanes of `vpmulld` in the AVX2 build `arch` picks where the CPU has it).
pub(crate) fn portable(
    a: &QPackedA,
    rows: Range<usize>,
    b: &QPackedB,
    cols: Range<usize>,
    out: &mut QOut<'_>,
    place: Place,
) {
    crate::arch::qgemm_portable(a, rows, b, cols, out, place);
}

/// The body of [`portable`], inlined into each build.
#[inline(always)]
pub(crate) fn portable_body(
    a: &QPackedA,
    rows: Range<usize>,
    b: &QPackedB,
    cols: Range<usize>,
    out: &mut QOut<'_>,
    place: Place,
) {
    let q = quads(a.k);
    for_each_tile::<1>(a, rows, b, cols, out, place, |strip, panel, _, [out]| {
        let out = out.expect("a strip");
        let mut s = [[0i32; NR]; MR];
        for (ch, chunk) in strip.chunks_exact(MR).enumerate() {
            for (j, quad) in (ch * CHUNK..q.min((ch + 1) * CHUNK)).enumerate() {
                // The quad's four signed bytes of each column, as four planes of i32.
                let mut planes = [[0i32; NR]; 4];
                for (l, &v) in panel[2 * quad].iter().chain(&panel[2 * quad + 1]).enumerate() {
                    for (d, p) in planes.iter_mut().enumerate() {
                        p[l] = (v << (24 - 8 * d)) >> 24;
                    }
                }
                for (r, sums) in s.iter_mut().enumerate().take(out.h) {
                    let av = chunk[r][j].to_le_bytes().map(i32::from);
                    for (l, sum) in sums.iter_mut().enumerate() {
                        let dot =
                            av[0] * planes[0][l] + av[1] * planes[1][l] + av[2] * planes[2][l] + av[3] * planes[3][l];
                        *sum = sum.wrapping_add(dot);
                    }
                }
            }
        }
        out.store_scalar(&s);
    });
}
