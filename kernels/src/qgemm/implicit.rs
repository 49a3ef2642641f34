//! A 1-D or 2-D convolution's 8-bit product without its im2col.
//!
//! [`QPackedB::pack_conv_input`] writes the whole im2col matrix (channels × taps ×
//! positions bytes: 1.8 MB for 64 channels of 3x3 on 56x56) and the product then reads it
//! back: that round trip through L2 and memory was about a quarter of ResNet-18's
//! quantized convolutions. Here the input is written once as channel-quad words (one i32 of four
//! signed bytes a position) into zero-point-padded phase planes, as the depthwise 2-D
//! path lays out floats: padded row `r` and column `c` go to phase `(r % sh, c % sw)` at
//! `(r / sh) · wq + c / sw`. Outputs are computed on a grid of `out_h` rows of `wq`
//! columns (those past `out_w` are discarded), so that every tap of every output is one
//! word of one phase plane at a fixed offset from the output's grid index, whatever the
//! stride and dilation. Each 32-column panel of B is then copied from those planes into
//! an L1-sized panel right before the tiles use it (two 16-word runs per depth quad), and
//! its column sums come from a box sum of the planes' per-position byte sums. The tiles
//! store only the grid columns that are outputs, straight into the output's rows
//! (`packed::Kept`; the VNNI tiles compress each half-row to its kept lanes).
//!
//! ResNet-18's 64 -> 64 3x3 on 56x56, kernel only, one thread, against the same tiles
//! on a pre-packed im2col (Xeon family 6 model 207, same process): 1.28-1.30x its time
//! as u8 and 1.40x as i32 when each panel's copy reset the panel and copied it element by
//! element outside the widest build, and the grid went to a scratch copied out after the
//! product; 1.15-1.17x and 1.12-1.14x now (the copies alone 24 us of 427).
//!
//! The product is the one [`super::qgemm`] computes on the im2col of
//! [`QPackedA::pack_conv_weights`]' depth order (channel quad, tap, channel in the quad),
//! bit for bit. Tasks share the planes and split the product by rows of A
//! ([`ConvPlanes::product_rows`]) or by grid columns ([`ConvPlanes::product_part`], then
//! [`ConvPlanes::place_part`] on the calling thread), each with its own
//! [`ProductScratch`].

use std::ops::Range;

use super::conv::{byte_sum, quad, quads_and_sums_of, quads_of};
use super::packed::{panel_units, qgemm_placed, qgemm_rows, quads, Kept, Place, QOut, QPackedA, QPackedB, NR, Q8};
use crate::conv::Window3d;

/// A convolution input in phase planes of channel-quad words, and the product's scratch
/// (made on the first use and reused).
#[derive(Debug, Default, Clone)]
pub struct ConvPlanes {
    /// `c4` blocks of `phases` planes of `phase_len` words.
    words: Vec<i32>,
    /// Per word of a block: the sum of its bytes over all channel quads.
    sums: Vec<i32>,
    /// Per grid column (rounded up to a panel): the sum of its im2col column.
    col_sums: Vec<i32>,
    /// Per tap (height-major): its word offset from a grid index within a block.
    offs: Vec<usize>,
    block: usize,
    c4: usize,
    wq: usize,
    out_w: usize,
    out_h: usize,
    /// Grid columns (`out_h · wq`).
    grid: usize,
    real_k: usize,
    zero: i32,
    /// One input row's words (a strided window's, before they go to their phases).
    row: Vec<i32>,
    /// Per tap: its phase and offset in it.
    in_phase: Vec<(usize, usize)>,
    /// The scratch of a product made on the calling thread ([`ConvPlanes::product`]).
    own: ProductScratch,
}

/// What one product over the planes (or one task's rows of it) works in: B's panels, and
/// the grid-shaped output when the grid is wider than the output rows.
#[derive(Debug, Default, Clone)]
pub struct ProductScratch {
    panel: QPackedB,
    tmp_u8: Vec<u8>,
    tmp_i8: Vec<i8>,
    tmp_i32: Vec<i32>,
}

impl ConvPlanes {
    pub fn new() -> ConvPlanes {
        ConvPlanes::default()
    }

    /// Whether a window takes this path: one depth plane (1-D and 2-D convolutions), some
    /// input and some outputs.
    pub fn fits(g: &Window3d) -> bool {
        g.input[0] == 1
            && g.kernel[0] == 1
            && g.out[0] == 1
            && g.pad_begin[0] == 0
            && g.plane() > 0
            && g.positions() > 0
    }

    /// Writes `channels` planes of one image (`x`, zero point `zx`) on window `g` (which
    /// [`fits`](Self::fits)) as phase planes, for a product with weights packed by
    /// [`QPackedA::pack_conv_weights`] (`channels` per group, the same taps).
    pub fn pack<T: Q8>(&mut self, x: &[T], channels: usize, g: &Window3d, zx: i32) {
        assert!(Self::fits(g), "qgemm: the window has a depth axis or no positions");
        let [_, in_h, in_w] = g.input;
        let plane = in_h * in_w;
        assert!(x.len() >= channels * plane, "qgemm: the image is shorter than its shape");
        let span = |a: usize| (g.out[a] - 1) * g.stride[a] + (g.kernel[a] - 1) * g.dilation[a] + 1;
        let (sh, sw) = (g.stride[1], g.stride[2]);
        let (pt, pl) = (g.pad_begin[1], g.pad_begin[2]);
        let hp = span(1).max(pt + in_h);
        let wp = span(2).max(pl + in_w);
        let (hq, wq) = (hp.div_ceil(sh), wp.div_ceil(sw));
        let (out_h, out_w) = (g.out[1], g.out[2]);
        let grid = out_h * wq;
        let cols = grid.next_multiple_of(NR);
        // Each tap: its phase plane and offset in it.
        let taps = g.kernel[1] * g.kernel[2];
        let mut in_phase = std::mem::take(&mut self.in_phase);
        in_phase.clear();
        for th in 0..g.kernel[1] {
            for tw in 0..g.kernel[2] {
                let (r, c) = (th * g.dilation[1], tw * g.dilation[2]);
                in_phase.push(((r % sh) * sw + c % sw, (r / sh) * wq + c / sw));
            }
        }
        // A plane holds its padded input and every panel's reads past it.
        let phase_len = in_phase.iter().map(|&(_, o)| o + cols).max().unwrap_or(0).max(hq * wq);
        let phases = sh * sw;
        // The phases some tap reads (a strided 1x1 window reads one of four): only their
        // rows and columns are written and summed.
        let mut used = [false; MAX_PHASES];
        let track = phases <= MAX_PHASES;
        for &(p, _) in &in_phase {
            if track {
                used[p] = true;
            }
        }
        let used = |p: usize| !track || used[p];
        let row_used = |r: usize| (0..sw).any(|c| used((r % sh) * sw + c));
        self.offs.clear();
        self.offs.extend(in_phase.iter().map(|&(p, o)| p * phase_len + o));
        self.in_phase = in_phase;
        let c4 = channels.div_ceil(4);
        let block = phases * phase_len;
        (self.block, self.c4, self.wq, self.out_w, self.out_h, self.grid) = (block, c4, wq, out_w, out_h, grid);
        self.real_k = channels * taps;
        self.zero = zx + T::TO_UNSIGNED - 128;
        let pad = T::from_i32(zx).signed();
        // Not cleared: every word a panel reads (those of the used phases) is written below
        // (clearing them first wrote the planes twice).
        self.words.truncate(c4 * block);
        self.words.resize(c4 * block, 0);
        self.sums.clear();
        self.sums.resize(block, 0);
        self.col_sums.clear();
        self.col_sums.resize(cols, 0);
        let (words, sums, col_sums, offs) = (&mut self.words, &mut self.sums, &mut self.col_sums, &self.offs);
        let row = &mut self.row;
        // Stride 1 with no padding left or right: each plane lands in one run.
        let whole_planes = sh == 1 && sw == 1 && wq == in_w;
        crate::arch::widest(
            #[inline(always)]
            || {
                for (q4, dst) in words.chunks_exact_mut(block).enumerate() {
                    let lanes = (channels - 4 * q4).min(4);
                    let pad_word = quad(std::array::from_fn(|l| if l < lanes { pad } else { 0 }));
                    let src = |l: usize| &x[(4 * q4 + l) * plane..(4 * q4 + l + 1) * plane];
                    if whole_planes && lanes == 4 {
                        // The input's rows are the plane's rows, back to back: one run
                        // (a row of 14 words left most of a vector idle), padding only
                        // above and below.
                        let at = pt * wq;
                        let (above, rest) = dst.split_at_mut(at);
                        let (inside, below) = rest.split_at_mut(plane);
                        above.fill(pad_word);
                        below.fill(pad_word);
                        let pad_sum = byte_sum(pad_word);
                        let (sums_above, rest) = sums.split_at_mut(at);
                        let (sums_inside, sums_below) = rest.split_at_mut(plane);
                        sums_above.iter_mut().chain(sums_below.iter_mut()).for_each(|s| *s += pad_sum);
                        quads_and_sums_of([src(0), src(1), src(2), src(3)], inside, sums_inside);
                        continue;
                    } else {
                        // The used phases' planes (a strided 1x1 window reads one of four).
                        for (p, phase) in dst.chunks_exact_mut(phase_len).enumerate() {
                            if used(p) {
                                phase.fill(pad_word);
                            }
                        }
                    }
                    for ih in 0..in_h {
                        let r = ih + pt;
                        if !row_used(r) {
                            continue;
                        }
                        let at = (r % sh) * sw * phase_len + (r / sh) * wq;
                        let out = &mut dst[at..];
                        let row_of = |l: usize| &src(l)[ih * in_w..(ih + 1) * in_w];
                        if sw == 1 && lanes == 4 {
                            quads_of([row_of(0), row_of(1), row_of(2), row_of(3)], &mut out[pl..pl + in_w]);
                            continue;
                        }
                        row.clear();
                        row.resize(in_w, 0);
                        if lanes == 4 {
                            quads_of([row_of(0), row_of(1), row_of(2), row_of(3)], row);
                        } else {
                            for l in 0..lanes {
                                for (o, &v) in row.iter_mut().zip(row_of(l)) {
                                    *o |= ((v.signed() as u8) as i32) << (8 * l);
                                }
                            }
                        }
                        if sw == 1 {
                            out[pl..pl + in_w].copy_from_slice(row);
                        } else if sw == 2 {
                            // Pairs of columns, one to each phase (which first depends on
                            // the pad's parity).
                            let (even, odd) = out.split_at_mut(phase_len);
                            let (a, b) = if pl.is_multiple_of(2) { (even, odd) } else { (odd, even) };
                            let (a, b) = (&mut a[pl / 2..], &mut b[pl.div_ceil(2)..]);
                            let pairs = row.chunks_exact(2);
                            if let [last] = pairs.remainder() {
                                a[in_w / 2] = *last;
                            }
                            for ((a, b), pair) in a.iter_mut().zip(b.iter_mut()).zip(pairs) {
                                *a = pair[0];
                                *b = pair[1];
                            }
                        } else {
                            for (iw, &v) in row.iter().enumerate() {
                                let c = iw + pl;
                                out[(c % sw) * phase_len + c / sw] = v;
                            }
                        }
                    }
                    for (p, (sums, plane)) in
                        sums.chunks_exact_mut(phase_len).zip(dst.chunks_exact(phase_len)).enumerate()
                    {
                        if used(p) {
                            for (s, &w) in sums.iter_mut().zip(plane) {
                                *s += byte_sum(w);
                            }
                        }
                    }
                }
                for &off in offs {
                    for (s, &v) in col_sums.iter_mut().zip(&sums[off..off + cols]) {
                        *s += v;
                    }
                }
            },
        );
    }

    /// `out` (`a.rows()` rows of the output's positions, row after row) = `a` × the
    /// im2col of the packed input, with the zero-point terms, as i32 or requantized (a
    /// convolution's requantization: one scale, or one per row).
    pub fn product(&mut self, a: &QPackedA, out: QOut<'_>) {
        let mut own = std::mem::take(&mut self.own);
        self.product_rows(a, 0..a.m, out, &mut own);
        self.own = own;
    }

    /// [`product`](Self::product) for the rows `rows` of `a` (`rows.start` a multiple of
    /// [`MR`](super::MR)) into `out`, which holds those rows from its start: tasks that
    /// split a convolution by output channels share the planes, each with its own
    /// `scratch` (each copies B's panels for itself: about `4 / (3 · rows)` of its
    /// product's time).
    pub fn product_rows(&self, a: &QPackedA, rows: Range<usize>, mut out: QOut<'_>, scratch: &mut ProductScratch) {
        assert!(a.real_k == self.real_k, "qgemm: the weights' depth differs from the input's");
        assert!(a.k == self.c4 * 4 * self.offs.len(), "qgemm: the weights' layout differs from the input's");
        let (m, positions) = (rows.len(), self.out_h * self.out_w);
        if let QOut::U8(_, rq) | QOut::I8(_, rq) = &out {
            assert!(rq.per_row || rq.scale.len() == 1, "qgemm: a convolution's scale is one, or one per row");
        }
        // Straight into the output: the tiles store only the grid columns that are
        // outputs (all of them when the grid is as wide as the output rows).
        let kept = (self.wq != self.out_w).then_some(Kept { wq: self.wq, out_w: self.out_w, at: 0 });
        // A batch of panels from grid column `j0`: where its outputs start, and how they go.
        let start = |j0: usize| kept.map_or(j0, |k| k.before(j0));
        let place = |j0: usize| Place { ldc: positions, kept: kept.map(|k| Kept { at: j0, ..k }) };
        let rows_of =
            |p: &QPackedB, j0: usize, w: usize, out: QOut<'_>| qgemm_placed(a, rows.clone(), p, 0..w, out, place(j0));
        assert!(out.len() >= m * positions, "qgemm: the output is shorter than its shape");
        let panel = &mut scratch.panel;
        match &mut out {
            QOut::U8(y, rq) => self.panels(a, panel, |p, j0, w| rows_of(p, j0, w, QOut::U8(&mut y[start(j0)..], *rq))),
            QOut::I8(y, rq) => self.panels(a, panel, |p, j0, w| rows_of(p, j0, w, QOut::I8(&mut y[start(j0)..], *rq))),
            QOut::I32(y) => self.panels(a, panel, |p, j0, w| rows_of(p, j0, w, QOut::I32(&mut y[start(j0)..]))),
        }
    }

    /// The panels of B, copied from the phase planes a few at a time (as many 32-column
    /// panels as fill [`PANELS_BYTES`], at least one): `run(panels, first column,
    /// columns)`.
    fn panels(&self, a: &QPackedA, panel: &mut QPackedB, run: impl FnMut(&QPackedB, usize, usize)) {
        self.panels_of(a, 0..self.grid, panel, run)
    }

    /// [`panels`](Self::panels) for the grid columns `cols` only (`cols.start` a multiple
    /// of [`NR`]); `run` gets each batch's first column counted from `cols.start`.
    fn panels_of(
        &self,
        a: &QPackedA,
        cols: Range<usize>,
        panel: &mut QPackedB,
        mut run: impl FnMut(&QPackedB, usize, usize),
    ) {
        let k = a.k;
        let panel_len = 2 * quads(k);
        let per = (PANELS_BYTES / (panel_len * 64).max(1)).max(1);
        panel.k = k;
        panel.real_k = self.real_k;
        panel.zero.clear();
        panel.zero.push(self.zero);
        let mut j0 = cols.start;
        while j0 < cols.end {
            let w = (per * NR).min(cols.end - j0);
            let count = w.div_ceil(NR);
            panel.n = w;
            panel.col_sums.clear();
            panel.col_sums.extend_from_slice(&self.col_sums[j0..j0 + w]);
            // Every unit of the panels is written below; what the slack after them holds
            // meets only A's zero quads.
            panel.units.resize_any(panel_units(count, panel_len));
            let units = &mut panel.units;
            crate::arch::widest(
                #[inline(always)]
                || {
                    for (v, units) in units.chunks_exact_mut(panel_len.max(1)).enumerate().take(count) {
                        let j = j0 + v * NR;
                        let mut pairs = units.chunks_exact_mut(2);
                        for block in self.words.chunks_exact(self.block.max(1)).take(self.c4) {
                            for (&off, pair) in self.offs.iter().zip(&mut pairs) {
                                let run: &[i32; NR] = block[off + j..off + j + NR].try_into().expect("a panel's run");
                                let (lo, hi) = run.split_at(16);
                                pair[0] = lo.try_into().expect("16 words");
                                pair[1] = hi.try_into().expect("16 words");
                            }
                        }
                    }
                },
            );
            run(panel, j0 - cols.start, w);
            j0 += w;
        }
    }

    /// The grid columns of a split by columns into `tasks` parts (whole panels each):
    /// part `i` of `tasks`.
    pub fn grid_part(&self, i: usize, tasks: usize) -> Range<usize> {
        let panels = self.grid.div_ceil(NR);
        let at = |i: usize| ((panels * i).div_ceil(tasks) * NR).min(self.grid);
        at(i)..at(i + 1)
    }

    /// One task's part of a product split by grid columns: every row of `a` for the grid
    /// columns `cols` (see [`grid_part`](Self::grid_part)) into the task's `scratch`, as
    /// `kind` (the product's output, only read for its type and requantization) has it.
    /// [`place_part`](Self::place_part) then puts them in the output. A convolution of
    /// few output channels (ResNet's 64: five strips of A) splits evenly this way.
    pub fn product_part(&self, a: &QPackedA, cols: Range<usize>, kind: &QOut<'_>, scratch: &mut ProductScratch) {
        assert!(
            a.real_k == self.real_k && a.k == self.c4 * 4 * self.offs.len(),
            "qgemm: the weights differ from the input"
        );
        assert!(cols.end <= self.grid, "qgemm: columns outside the grid");
        if cols.is_empty() {
            return;
        }
        assert!(cols.start.is_multiple_of(NR), "qgemm: columns off a panel");
        let (m, ldc) = (a.m, cols.len());
        let ProductScratch { panel, tmp_u8, tmp_i8, tmp_i32 } = scratch;
        let rows_of = |p: &QPackedB, w: usize, out: QOut<'_>| qgemm_rows(a, 0..m, p, 0..w, out, ldc);
        match kind {
            QOut::U8(_, rq) => {
                tmp_u8.resize(m * ldc, 0);
                self.panels_of(a, cols, panel, |p, j0, w| rows_of(p, w, QOut::U8(&mut tmp_u8[j0..], *rq)));
            }
            QOut::I8(_, rq) => {
                tmp_i8.resize(m * ldc, 0);
                self.panels_of(a, cols, panel, |p, j0, w| rows_of(p, w, QOut::I8(&mut tmp_i8[j0..], *rq)));
            }
            QOut::I32(_) => {
                tmp_i32.resize(m * ldc, 0);
                self.panels_of(a, cols, panel, |p, j0, w| rows_of(p, w, QOut::I32(&mut tmp_i32[j0..])));
            }
        }
    }

    /// Puts a task's part (grid columns `cols`, made by [`product_part`](Self::product_part)
    /// in `scratch`) into the output's rows, without the grid's discarded columns.
    pub fn place_part(&self, cols: Range<usize>, scratch: &ProductScratch, out: &mut QOut<'_>) {
        match out {
            QOut::U8(y, _) => self.place(cols, &scratch.tmp_u8, y),
            QOut::I8(y, _) => self.place(cols, &scratch.tmp_i8, y),
            QOut::I32(y) => self.place(cols, &scratch.tmp_i32, y),
        }
    }

    /// Rows of grid columns `cols` (`t`, `cols.len()` each) into the output rows `y`.
    fn place<E: Copy>(&self, cols: Range<usize>, t: &[E], y: &mut [E]) {
        let (w, out_w, wq, positions) = (cols.len(), self.out_w, self.wq, self.out_h * self.out_w);
        if w == 0 {
            return;
        }
        for (src, dst) in t.chunks_exact(w).zip(y.chunks_exact_mut(positions)) {
            // The grid rows the columns cross, each from its first column in `cols` to
            // its last kept one.
            let mut j = cols.start;
            while j < cols.end {
                let (oy, ox) = (j / wq, j % wq);
                let end = ((oy + 1) * wq).min(cols.end);
                // (A part may start among the last row's discarded columns: nothing to keep.)
                let keep = out_w.min(ox + (end - j)).saturating_sub(ox);
                if keep > 0 {
                    dst[oy * out_w + ox..][..keep].copy_from_slice(&src[j - cols.start..][..keep]);
                }
                j = end;
            }
        }
    }
}

/// The bytes of B's panels copied at a time: they stay in L1 while every strip of A
/// passes over them, and a shallow product (a 1x1 convolution of 16 channels) still
/// makes one call for many panels.
const PANELS_BYTES: usize = 24 << 10;

/// The most phases whose use is tracked (strides up to 4 by 4); past them every phase is
/// written.
const MAX_PHASES: usize = 16;
