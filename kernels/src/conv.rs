//! Convolution (im2col + the packed GEMM), transposed convolution and max / average
//! pooling over NC + 1 to 3 spatial axes. 1-D and 2-D ops run as 3-D ones whose leading
//! spatial axes have size 1 (loops of one turn).

use crate::gemm::{pack_a, pack_a_bf16, Bias, Epilogue, Gemm, GemmScratch, PackedA};
use std::ops::Range;

/// Geometry of a window op over one (depth × height × width) plane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window3d {
    pub input: [usize; 3],
    pub out: [usize; 3],
    pub kernel: [usize; 3],
    pub stride: [usize; 3],
    pub dilation: [usize; 3],
    /// Padding before each spatial axis.
    pub pad_begin: [usize; 3],
}

impl Window3d {
    /// A test window on `dims` spatial axes (the leading ones of size 1), with `extra`
    /// outputs past the floor count (ceil mode); `None` when the kernel does not fit.
    #[cfg(test)]
    pub(crate) fn cube(
        dims: usize,
        len: usize,
        k: usize,
        stride: usize,
        dil: usize,
        pad: usize,
        extra: usize,
    ) -> Option<Self> {
        let span = dil * (k - 1) + 1;
        if len + 2 * pad < span {
            return None;
        }
        let out = (len + 2 * pad - span) / stride + 1 + extra;
        let pick =
            |v: usize, one: usize| -> [usize; 3] { std::array::from_fn(|a| if a + dims >= 3 { v } else { one }) };
        Some(Window3d {
            input: pick(len, 1),
            out: pick(out, 1),
            kernel: pick(k, 1),
            stride: pick(stride, 1),
            dilation: pick(dil, 1),
            pad_begin: pick(pad, 0),
        })
    }

    /// Input index along axis `a` of tap `k` for output `o`, or `None` in the padding.
    #[inline(always)]
    pub(crate) fn source(&self, a: usize, o: usize, k: usize) -> Option<usize> {
        (o * self.stride[a] + k * self.dilation[a]).checked_sub(self.pad_begin[a]).filter(|&i| i < self.input[a])
    }

    /// Whether tap `k` of output `o` along axis `a` lies in the input or its declared
    /// padding (not past it, as a ceil-mode window can).
    #[cfg(test)]
    #[inline(always)]
    pub(crate) fn in_padded(&self, a: usize, o: usize, k: usize, pad_end: usize) -> bool {
        o * self.stride[a] + k * self.dilation[a] < self.pad_begin[a] + self.input[a] + pad_end
    }

    pub fn plane(&self) -> usize {
        self.input.iter().product()
    }

    pub fn positions(&self) -> usize {
        self.out.iter().product()
    }

    /// Whether it is a 1x1 window of stride 1 with no padding: the output is the input's
    /// plane, and a convolution on it is one product with the input as its right operand.
    pub fn is_pointwise(&self) -> bool {
        self.kernel == [1; 3] && self.stride == [1; 3] && self.pad_begin == [0; 3] && self.out == self.input
    }

    /// Input offset within a plane of tap `k` of output `o`, or `None` in the padding.
    #[inline(always)]
    pub(crate) fn tap(&self, o: [usize; 3], k: [usize; 3]) -> Option<usize> {
        let z = self.source(0, o[0], k[0])?;
        let y = self.source(1, o[1], k[1])?;
        let x = self.source(2, o[2], k[2])?;
        Some((z * self.input[1] + y) * self.input[2] + x)
    }
}

/// How a window op pads its input (ONNX `auto_pad`, with the explicit `pads`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// `pads`: begins, then ends, per (depth, height, width).
    Explicit([usize; 6]),
    Valid,
    SameUpper,
    SameLower,
}

/// The geometry of a window op on an `input` plane (depth, height, width) with kernel
/// `k`, and the padding after each axis. `ceil`: ceil mode (with explicit padding).
pub fn window_geometry(
    input: [usize; 3],
    k: [usize; 3],
    strides: [usize; 3],
    dilations: [usize; 3],
    padding: Padding,
    ceil: bool,
) -> Result<(Window3d, [usize; 3]), String> {
    let mut out = [0usize; 3];
    let mut begin = [0usize; 3];
    let mut end = [0usize; 3];
    for a in 0..3 {
        let (n, s, d) = (input[a], strides[a], dilations[a]);
        let span = d * (k[a].max(1) - 1) + 1;
        match padding {
            Padding::Explicit(_) | Padding::Valid => {
                let (pb, pe) = match padding {
                    Padding::Explicit(p) => (p[a], p[a + 3]),
                    _ => (0, 0),
                };
                let padded = n + pb + pe;
                if padded < span {
                    return Err(format!("window {span} is larger than the padded input {padded}"));
                }
                let mut o = if ceil { (padded - span).div_ceil(s) + 1 } else { (padded - span) / s + 1 };
                // A last window that would start in the end padding is dropped.
                if ceil && (o - 1) * s >= n + pb {
                    o -= 1;
                }
                (out[a], begin[a], end[a]) = (o, pb, pe);
            }
            Padding::SameUpper | Padding::SameLower => {
                let o = n.div_ceil(s);
                let total = ((o.max(1) - 1) * s + span).saturating_sub(n);
                let small = total / 2;
                let (pb, pe) =
                    if padding == Padding::SameUpper { (small, total - small) } else { (total - small, small) };
                (out[a], begin[a], end[a]) = (o, pb, pe);
            }
        }
    }
    Ok((Window3d { input, out, kernel: k, stride: strides, dilation: dilations, pad_begin: begin }, end))
}

/// Every (output position, its index) of a window op, in output order.
pub(crate) fn outputs(g: &Window3d) -> impl Iterator<Item = [usize; 3]> + '_ {
    (0..g.out[0]).flat_map(move |d| (0..g.out[1]).flat_map(move |h| (0..g.out[2]).map(move |w| [d, h, w])))
}

/// Every tap of a window, in (d, h, w) order.
pub(crate) fn taps(g: &Window3d) -> impl Iterator<Item = [usize; 3]> + '_ {
    (0..g.kernel[0]).flat_map(move |d| (0..g.kernel[1]).flat_map(move |h| (0..g.kernel[2]).map(move |w| [d, h, w])))
}

/// im2col of `channels` planes of one image for the output rows `rows` (an output row is
/// one (od, oy) pair, `od * out_h + oy`): rows of the matrix are (channel, kd, ky, kx),
/// columns the positions of those output rows. Each output row's in-range columns are
/// found once, so the inner loop is a plain (strided or contiguous) copy.
fn im2col(x: &[f32], channels: usize, g: &Window3d, rows: Range<usize>, col: &mut [f32]) {
    let plane = g.plane();
    let [_, in_h, in_w] = g.input;
    let [_, out_h, out_w] = g.out;
    let positions = rows.len() * out_w;
    let sx = g.stride[2];
    let mut row = 0;
    for c in 0..channels {
        let src = &x[c * plane..(c + 1) * plane];
        for k in taps(g) {
            let dst = &mut col[row * positions..(row + 1) * positions];
            // Output columns whose input column is in range: x = ox*sx + off - pad >= 0 and < in_w.
            let off = k[2] * g.dilation[2];
            let lo = g.pad_begin[2].saturating_sub(off).div_ceil(sx).min(out_w);
            let hi =
                if in_w + g.pad_begin[2] > off { (in_w + g.pad_begin[2] - off).div_ceil(sx).min(out_w) } else { 0 }
                    .max(lo);
            for (r, out) in rows.clone().zip(dst.chunks_exact_mut(out_w.max(1))) {
                let (od, oy) = (r / out_h, r % out_h);
                let (Some(zz), Some(yy)) = (g.source(0, od, k[0]), g.source(1, oy, k[1])) else {
                    out.fill(0.0);
                    continue;
                };
                out[..lo].fill(0.0);
                out[hi..].fill(0.0);
                if lo == hi {
                    // This width tap reads no input for any output (a wide dilation or
                    // padding on a narrow row): the start below would underflow.
                    continue;
                }
                let line = &src[(zz * in_h + yy) * in_w..][..in_w];
                let x0 = lo * sx + off - g.pad_begin[2];
                if sx == 1 {
                    out[lo..hi].copy_from_slice(&line[x0..x0 + (hi - lo)]);
                } else {
                    for (j, o) in out[lo..hi].iter_mut().enumerate() {
                        *o = line[x0 + j * sx];
                    }
                }
            }
            row += 1;
        }
    }
}

/// The im2col matrix of a group's input planes for the output rows from `first_row` on,
/// never written whole: the GEMM packs each block of it straight from the input
/// ([`Im2col::span`]), so a 3x3 convolution does not write and read back a matrix nine
/// times its input (7 MB for 64 channels at 56x56).
#[derive(Clone, Copy, Debug)]
pub struct Im2col<'a> {
    pub x: &'a [f32],
    pub g: &'a Window3d,
    pub first_row: usize,
}

impl Im2col<'_> {
    /// Row `p` of the matrix (channel, kd, ky, kx), columns `j0..j0 + out.len()`: what
    /// [`im2col`] writes there, with the same values.
    #[inline(always)]
    pub fn span(&self, p: usize, j0: usize, out: &mut [f32]) {
        let g = self.g;
        let [_, in_h, in_w] = g.input;
        let [_, out_h, out_w] = g.out;
        let [_, kh, kw] = g.kernel;
        let taps_n = g.kernel[0] * kh * kw;
        let (c, t) = (p / taps_n, p % taps_n);
        let k = [t / (kh * kw), t / kw % kh, t % kw];
        let plane = g.plane();
        let src = &self.x[c * plane..][..plane];
        let sx = g.stride[2];
        let off = k[2] * g.dilation[2];
        let lo = g.pad_begin[2].saturating_sub(off).div_ceil(sx).min(out_w);
        let hi =
            if in_w + g.pad_begin[2] > off { (in_w + g.pad_begin[2] - off).div_ceil(sx).min(out_w) } else { 0 }.max(lo);
        let (mut j, end, mut at) = (j0, j0 + out.len(), 0);
        while j < end {
            let (r, ox0) = (self.first_row + j / out_w, j % out_w);
            let len = (out_w - ox0).min(end - j);
            let dst = &mut out[at..at + len];
            let (od, oy) = (r / out_h, r % out_h);
            match (g.source(0, od, k[0]), g.source(1, oy, k[1])) {
                (Some(zz), Some(yy)) if lo < hi => {
                    // Columns ox0..ox0 + len of this output row: zero outside lo..hi.
                    let (a, b) = (lo.clamp(ox0, ox0 + len), hi.clamp(ox0, ox0 + len));
                    dst[..a - ox0].fill(0.0);
                    dst[b - ox0..].fill(0.0);
                    if a < b {
                        let line = &src[(zz * in_h + yy) * in_w..][..in_w];
                        let x0 = a * sx + off - g.pad_begin[2];
                        let inside = &mut dst[a - ox0..b - ox0];
                        if sx == 1 {
                            inside.copy_from_slice(&line[x0..x0 + (b - a)]);
                        } else {
                            inside.iter_mut().enumerate().for_each(|(i, o)| *o = line[x0 + i * sx]);
                        }
                    }
                }
                _ => dst.fill(0.0),
            }
            j += len;
            at += len;
        }
    }
}

/// One group's convolution for the output rows `rows` only (see [`im2col`]): `x` holds the
/// group's `in_c` input planes, `w` its `out_c` filters, and `y` gets `[out_c, positions of
/// those rows]` (no bias). Disjoint row ranges are independent, so threads can split one
/// convolution by handing each its own range, `col` and scratch; every range computes its
/// elements exactly as the whole convolution does.
#[allow(clippy::too_many_arguments)]
pub fn conv_rows(
    x: &[f32],
    w: &[f32],
    in_c: usize,
    out_c: usize,
    g: &Window3d,
    rows: Range<usize>,
    y: &mut [f32],
    col: &mut Vec<f32>,
    scratch: &mut GemmScratch,
    filters: Option<&PackedA>,
) {
    let kk = in_c * g.kernel.iter().product::<usize>();
    let positions = rows.len() * g.out[2];
    if implicit(out_c, positions) {
        let source = Im2col { x, g, first_row: rows.start };
        return source_product(scratch, out_c, positions, kk, w, filters, source, y, Epilogue::default());
    }
    if col.len() < kk * positions {
        col.resize(kk * positions, 0.0);
    }
    let col = &mut col[..kk * positions];
    im2col(x, in_c, g, rows, col);
    filter_product(scratch, out_c, positions, kk, w, filters, col, y, Epilogue::default());
}

/// Whether an m×n filter product packs its im2col blocks straight from the input (a
/// matrix-vector product reads its operand unpacked, so it needs the matrix written).
fn implicit(m: usize, n: usize) -> bool {
    m > 1 && n > 1
}

/// `y = w · im2col` with the im2col matrix read from `source` block by block.
#[allow(clippy::too_many_arguments)]
fn source_product(
    scratch: &mut GemmScratch,
    m: usize,
    n: usize,
    k: usize,
    w: &[f32],
    filters: Option<&PackedA>,
    source: Im2col<'_>,
    y: &mut [f32],
    epilogue: Epilogue<'_>,
) {
    let g = Gemm { packed_a: filters, epilogue, im2col: Some(source), ..Gemm::new(m, n, k, w, false, &[], false) };
    g.compute(scratch, 0..m, 0..n, y);
}

/// `y = w · col` (`w` [m, k], `col` [k, n]), with `w` from `filters` when it was packed.
#[allow(clippy::too_many_arguments)]
fn filter_product(
    scratch: &mut GemmScratch,
    m: usize,
    n: usize,
    k: usize,
    w: &[f32],
    filters: Option<&PackedA>,
    col: &[f32],
    y: &mut [f32],
    epilogue: Epilogue<'_>,
) {
    let g = Gemm { packed_a: filters, epilogue, ..Gemm::new(m, n, k, w, false, col, false) };
    g.compute(scratch, 0..m, 0..n, y);
}

/// Packs each group's filters (`w` [out_c, in_c / group, kernel...]) once, for convolutions
/// with this window: `filters` then holds one [`PackedA`] per group, reused by every Run
/// (`conv`, `conv_rows`) while the weights are the same.
/// With `bf16`, each group's filters are rounded to bfloat16 strips where this CPU has
/// the kernel (`pack_a_bf16`): the products then round the input as they run.
pub fn pack_filters(
    w: &[f32],
    in_c: usize,
    out_c: usize,
    group: usize,
    g: &Window3d,
    bf16: bool,
    filters: &mut Vec<PackedA>,
) {
    let (cg, mg) = (in_c / group, out_c / group);
    let kk = cg * g.kernel.iter().product::<usize>();
    filters.resize_with(group, PackedA::new);
    for (gi, packed) in filters.iter_mut().enumerate() {
        let w = &w[gi * mg * kk..][..mg * kk];
        if !(bf16 && pack_a_bf16(packed, mg, kk, w)) {
            pack_a(packed, mg, g.positions(), kk, w, false);
        }
    }
}

/// Convolution of `x` [batch, in_c, (d, h,) w] with `w` [out_c, in_c / group, (kd, kh,) kw]
/// plus optional `bias` [out_c], into `y` [batch, out_c, (od, oh,) ow], then `epilogue`'s
/// activation, residual (the whole output's addend) and second activation, fused into the
/// product's store (its own bias is not used: `bias` is the row bias). `col` is scratch
/// the caller keeps (it grows to the largest im2col matrix and is then reused).
#[allow(clippy::too_many_arguments)]
pub fn conv(
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    batch: usize,
    in_c: usize,
    out_c: usize,
    group: usize,
    g: &Window3d,
    y: &mut [f32],
    col: &mut Vec<f32>,
    scratch: &mut GemmScratch,
    filters: Option<&[PackedA]>,
    epilogue: &Epilogue<'_>,
) {
    let (cg, mg) = (in_c / group, out_c / group);
    let kk = cg * g.kernel.iter().product::<usize>();
    let positions = g.positions();
    let plane = g.plane();
    let is_pointwise = g.is_pointwise();
    if !is_pointwise && !implicit(mg, positions) && col.len() < kk * positions {
        col.resize(kk * positions, 0.0);
    }
    for n in 0..batch {
        for gi in 0..group {
            let xs = &x[(n * in_c + gi * cg) * plane..(n * in_c + (gi + 1) * cg) * plane];
            let ws = &w[gi * mg * kk..(gi + 1) * mg * kk];
            let ys = &mut y[(n * out_c + gi * mg) * positions..(n * out_c + (gi + 1) * mg) * positions];
            let packed = filters.map(|f| &f[gi]);
            // The bias and the rest of the epilogue, for this group's block of channels.
            let block = (n * out_c + gi * mg) * positions..(n * out_c + (gi + 1) * mg) * positions;
            let epilogue = Epilogue {
                bias: bias.map_or(Bias::None, |b| Bias::Rows(&b[gi * mg..][..mg])),
                residual: epilogue.residual.map(|r| &r[block]),
                ..*epilogue
            };
            if is_pointwise {
                filter_product(scratch, mg, positions, kk, ws, packed, xs, ys, epilogue);
            } else if implicit(mg, positions) {
                let source = Im2col { x: xs, g, first_row: 0 };
                source_product(scratch, mg, positions, kk, ws, packed, source, ys, epilogue);
            } else {
                let col = &mut col[..kk * positions];
                im2col(xs, cg, g, 0..g.out[0] * g.out[1], col);
                filter_product(scratch, mg, positions, kk, ws, packed, col, ys, epilogue);
            }
        }
    }
}

pub use crate::pool::{lp_pool, max_pool, max_pool_indices, max_pool_ints, pool, Pool};

/// For a 1x1 window with a stride past 1 and no padding, with outputs, whose every output
/// reads inside the input: the same window on the input's subsampled planes (stride 1, the output's
/// size), where the convolution is a pointwise one. ([`subsample`] makes those planes.)
pub fn subsampled(g: &Window3d) -> Option<Window3d> {
    let inside = (0..3).all(|a| g.out[a] > 0 && (g.out[a] - 1) * g.stride[a] < g.input[a]);
    (g.kernel == [1; 3] && g.pad_begin == [0; 3] && g.stride != [1; 3] && inside).then_some(Window3d {
        input: g.out,
        stride: [1; 3],
        dilation: [1; 3],
        ..*g
    })
}

/// The inputs a strided 1x1 window reads (see [`subsampled`]) of `planes` planes of `x`,
/// into `y` (`planes` planes of the output's size).
pub fn subsample(x: &[f32], planes: usize, g: &Window3d, y: &mut [f32]) {
    let ([_, in_h, in_w], [out_d, out_h, out_w], [sd, sh, sw]) = (g.input, g.out, g.stride);
    let (plane, positions) = (g.plane(), g.positions());
    for (src, dst) in x.chunks_exact(plane).zip(y.chunks_exact_mut(positions)).take(planes) {
        for (zd, dz) in dst.chunks_exact_mut(out_h * out_w).enumerate().take(out_d) {
            for (zh, row) in dz.chunks_exact_mut(out_w).enumerate() {
                let from = &src[(zd * sd * in_h + zh * sh) * in_w..];
                row.iter_mut().enumerate().for_each(|(zw, o)| *o = from[zw * sw]);
            }
        }
    }
}

/// For a window whose kernel is its stride on every axis (ViT's 16x16 patches at stride
/// 16), more than one tap, no padding or dilation, with outputs: the pointwise window on
/// the output's planes that the convolution is on its input's patches, each patch's taps
/// made channels (tap `t = (kd * kh + ky) * kw + kx` of input channel `c` is channel
/// `c * taps + t`, the filters' own order; [`gather_patches`] makes those planes). Every
/// output reads inside the input (a kernel equal to the stride without padding tiles it).
pub fn patchified(g: &Window3d) -> Option<Window3d> {
    let inside = (0..3).all(|a| g.out[a] > 0 && g.out[a] * g.stride[a] <= g.input[a]);
    let plain = g.pad_begin == [0; 3] && g.dilation == [1; 3];
    (g.kernel == g.stride && g.kernel != [1; 3] && plain && inside).then_some(Window3d {
        input: g.out,
        kernel: [1; 3],
        stride: [1; 3],
        ..*g
    })
}

/// The patches a [`patchified`] window reads, of `planes` planes of `x`, into `y`: per
/// input plane, one plane of the output's size per tap. Each input row a patch row reads
/// is `out_w` patches of `kw` taps, transposed into the `kw` taps' planes in 16x16
/// register blocks.
pub fn gather_patches(x: &[f32], planes: usize, g: &Window3d, y: &mut [f32]) {
    let ([_, in_h, in_w], [out_d, out_h, out_w], [kd, kh, kw]) = (g.input, g.out, g.kernel);
    let (plane, positions, taps) = (g.plane(), g.positions(), kd * kh * kw);
    assert!(x.len() >= planes * plane && y.len() >= planes * taps * positions, "gather_patches: lengths");
    for (src, dst) in x.chunks_exact(plane).zip(y.chunks_exact_mut(taps * positions)).take(planes) {
        for zd in 0..out_d {
            for (dz, zh, dy) in
                (0..kd).flat_map(|dz| (0..out_h).flat_map(move |zh| (0..kh).map(move |dy| (dz, zh, dy))))
            {
                let row = &src[((zd * kd + dz) * in_h + zh * kh + dy) * in_w..][..out_w * kw];
                let first = (dz * kh + dy) * kw * positions + (zd * out_h + zh) * out_w;
                crate::movement::transpose_block(row, (out_w, kw, kw), &mut dst[first..], positions);
            }
        }
    }
}

mod transpose;
pub use transpose::{conv_transpose, ConvTransposeDims};

#[cfg(test)]
mod tests {
    #[test]
    fn a_strided_pointwise_window_reads_its_subsampled_input() {
        let (g, _) =
            window_geometry([1, 5, 7], [1, 1, 1], [1, 2, 3], [1; 3], Padding::Explicit([0; 6]), false).unwrap();
        let sub = subsampled(&g).expect("strided 1x1");
        assert_eq!((sub.input, sub.out, sub.stride), ([1, 3, 3], [1, 3, 3], [1; 3]));
        assert!(sub.is_pointwise());
        let x: Vec<f32> = (0..2 * 35).map(|i| i as f32).collect();
        let mut y = vec![f32::NAN; 2 * 9];
        subsample(&x, 2, &g, &mut y);
        let want = |p: usize| (0..3).flat_map(move |r| (0..3).map(move |c| (p * 35 + 2 * r * 7 + 3 * c) as f32));
        assert_eq!(y, want(0).chain(want(1)).collect::<Vec<_>>());
        // Stride 1, padding, an output past the input or no outputs: not this path.
        let none = |input: [usize; 3], stride: [usize; 3], pads: [usize; 6]| {
            let (g, _) = window_geometry(input, [1; 3], stride, [1; 3], Padding::Explicit(pads), false).unwrap();
            subsampled(&g)
        };
        assert!(none([1, 5, 7], [1; 3], [0; 6]).is_none());
        assert!(none([1, 5, 7], [1, 2, 2], [0, 1, 0, 0, 0, 0]).is_none());
        assert!(none([1, 5, 7], [1, 2, 2], [0, 0, 0, 0, 0, 2]).is_none());
        assert!(none([1, 5, 7], [1, 2, 2], [0, 0, 0, 0, 0, 1]).is_some(), "the last output reads inside");
        let empty = Window3d { input: [1, 0, 7], out: [1, 0, 4], stride: [1, 2, 2], ..g };
        assert!(subsampled(&empty).is_none());
    }

    /// A window whose kernel is its stride reads its patches' taps as channels of a
    /// pointwise window on the output's planes: the gathered planes against the index
    /// definition, on 2 and 3 spatial axes, with input rows and columns past the last patch.
    #[test]
    fn a_window_tiled_by_its_kernel_reads_its_patches_as_channels() {
        for (input, kernel) in [([1, 9, 35], [1, 4, 16]), ([5, 6, 7], [2, 3, 2]), ([1, 32, 32], [1, 16, 16])] {
            let (g, _) = window_geometry(input, kernel, kernel, [1; 3], Padding::Explicit([0; 6]), false).unwrap();
            let sub = patchified(&g).expect("a kernel equal to its stride");
            assert!(sub.is_pointwise() && sub.input == g.out && sub.out == g.out);
            let (plane, positions, taps) = (g.plane(), g.positions(), kernel.iter().product::<usize>());
            let x: Vec<f32> = (0..2 * plane).map(|i| i as f32).collect();
            let mut y = vec![f32::NAN; 2 * taps * positions];
            gather_patches(&x, 2, &g, &mut y);
            for (i, &v) in y.iter().enumerate() {
                let (q, t, p) = (i / (taps * positions), i / positions % taps, i % positions);
                let (zd, zh, zw) = (p / (g.out[1] * g.out[2]), p / g.out[2] % g.out[1], p % g.out[2]);
                let (dz, dy, dx) = (t / (kernel[1] * kernel[2]), t / kernel[2] % kernel[1], t % kernel[2]);
                let at = ((zd * kernel[0] + dz) * input[1] + zh * kernel[1] + dy) * input[2] + zw * kernel[2] + dx;
                assert_eq!(v, x[q * plane + at], "plane {q} tap {t} position {p} of {input:?} by {kernel:?}");
            }
        }
        // Padding, a dilation, a stride other than the kernel or a 1x1 kernel: not this path.
        let none = |kernel: [usize; 3], stride: [usize; 3], dil: [usize; 3], pads: [usize; 6]| {
            let (g, _) = window_geometry([1, 8, 8], kernel, stride, dil, Padding::Explicit(pads), false).unwrap();
            patchified(&g)
        };
        assert!(none([1, 2, 2], [1, 2, 2], [1; 3], [0; 6]).is_some());
        assert!(none([1, 2, 2], [1, 2, 2], [1; 3], [0, 1, 1, 0, 1, 1]).is_none());
        assert!(none([1, 2, 2], [1, 2, 2], [1, 2, 2], [0; 6]).is_none());
        assert!(none([1, 2, 2], [1, 1, 2], [1; 3], [0; 6]).is_none());
        assert!(none([1; 3], [1; 3], [1; 3], [0; 6]).is_none());
    }

    use super::*;

    /// A cube window (`dims` spatial axes; the leading ones of size 1 otherwise).
    fn geom(dims: usize, in_len: usize, k: usize, stride: usize, pad: usize, dil: usize) -> Window3d {
        Window3d::cube(dims, in_len, k, stride, dil, pad, 0).expect("the kernel fits")
    }

    #[test]
    fn the_im2col_packed_from_the_input_gives_the_written_matrix_s_bits() {
        // Strides, dilations, padding wider than a tap reads, rows from the middle, and
        // blocks wider than the packing line (56 * 12 = 672 columns).
        for (dims, len, k, stride, pad, dil) in
            [(2, 56, 3, 1, 1, 1), (2, 9, 3, 2, 1, 1), (2, 5, 5, 1, 4, 2), (3, 6, 3, 1, 1, 1), (1, 40, 7, 3, 3, 1)]
        {
            let g = geom(dims, len, k, stride, pad, dil);
            let (in_c, out_c) = (3, 20);
            let kk = in_c * g.kernel.iter().product::<usize>();
            let x = crate::test_values(in_c * g.plane(), 1);
            let w = crate::test_values(out_c * kk, 2);
            let all = g.out[0] * g.out[1];
            for rows in [0..all, all / 3..all] {
                let positions = rows.len() * g.out[2];
                let mut col = vec![0.0; kk * positions];
                im2col(&x, in_c, &g, rows.clone(), &mut col);
                let mut want = vec![0.0; out_c * positions];
                let s = &mut GemmScratch::new();
                filter_product(s, out_c, positions, kk, &w, None, &col, &mut want, Epilogue::default());
                let mut got = vec![f32::NAN; out_c * positions];
                let source = Im2col { x: &x, g: &g, first_row: rows.start };
                source_product(s, out_c, positions, kk, &w, None, source, &mut got, Epilogue::default());
                let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{dims}-D len {len} k {k} stride {stride} pad {pad} dil {dil} rows {rows:?}");
            }
        }
    }

    #[test]
    fn conv_matches_the_direct_sum_in_one_two_and_three_dims() {
        for dims in [1, 2, 3] {
            for (group, stride, pad, dil) in [(1, 1, 1, 1), (2, 2, 0, 1), (4, 1, 2, 2), (1, 1, 0, 1)] {
                let (batch, in_c, out_c, len, k) = (2, 4, 8, if dims == 3 { 5 } else { 7 }, 3);
                let g = geom(dims, len, k, stride, pad, dil);
                let (plane, taps_n) = (g.plane(), g.kernel.iter().product::<usize>());
                let x: Vec<f32> = (0..batch * in_c * plane).map(|i| ((i * 7 % 17) as f32 - 8.0) * 0.1).collect();
                let cg = in_c / group;
                let w: Vec<f32> = (0..out_c * cg * taps_n).map(|i| ((i * 5 % 13) as f32 - 6.0) * 0.1).collect();
                let bias: Vec<f32> = (0..out_c).map(|i| i as f32 * 0.5).collect();
                let positions = g.positions();
                let mut y = vec![0.0; batch * out_c * positions];
                let (mut col, mut scratch) = (Vec::new(), GemmScratch::new());
                conv(
                    &x,
                    &w,
                    Some(&bias),
                    batch,
                    in_c,
                    out_c,
                    group,
                    &g,
                    &mut y,
                    &mut col,
                    &mut scratch,
                    None,
                    &Default::default(),
                );
                // A residual and Relus fused: the unfused chain's bits.
                let res: Vec<f32> = (0..y.len()).map(|i| ((i * 3 % 11) as f32 - 5.0) * 0.2).collect();
                let relu = Some(crate::Activation::Unary(crate::UnaryOp::Relu));
                let epilogue = Epilogue { act: relu, residual: Some(&res), after: relu, ..Epilogue::default() };
                let mut fused = vec![f32::NAN; y.len()];
                conv(
                    &x,
                    &w,
                    Some(&bias),
                    batch,
                    in_c,
                    out_c,
                    group,
                    &g,
                    &mut fused,
                    &mut col,
                    &mut scratch,
                    None,
                    &epilogue,
                );
                let want = y.iter().zip(&res).map(|(&v, &r)| (v.max(0.0) + r).max(0.0));
                assert!(
                    fused.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{dims}-D group {group} fused"
                );
                let mg = out_c / group;
                for n in 0..batch {
                    for m in 0..out_c {
                        let gi = m / mg;
                        for (i, o) in outputs(&g).enumerate() {
                            let mut s = f64::from(bias[m]);
                            for c in 0..cg {
                                for (t, k) in taps(&g).enumerate() {
                                    if let Some(at) = g.tap(o, k) {
                                        let xv = x[(n * in_c + gi * cg + c) * plane + at];
                                        let wv = w[(m * cg + c) * taps_n + t];
                                        s += f64::from(xv) * f64::from(wv);
                                    }
                                }
                            }
                            let got = y[(n * out_c + m) * positions + i];
                            assert!((f64::from(got) - s).abs() < 1e-4, "{dims}-D group {group}: {got} vs {s}");
                        }
                    }
                }
            }
        }
    }

    /// Row ranges of one convolution give the whole output's bits.
    #[test]
    fn row_ranges_give_the_whole_convolution() {
        for dims in [2, 3] {
            let g = geom(dims, 9, 3, 1, 1, 1);
            let (in_c, out_c) = (20, 16); // 180 or 540 deep: 540 takes several depth blocks
            let x: Vec<f32> = (0..in_c * g.plane()).map(|i| ((i * 7 % 19) as f32 - 9.0) * 0.1).collect();
            let w: Vec<f32> =
                (0..out_c * in_c * g.kernel.iter().product::<usize>()).map(|i| (i % 5) as f32 - 2.0).collect();
            let (mut col, mut scratch) = (Vec::new(), GemmScratch::new());
            let positions = g.positions();
            let mut run = |filters: Option<&[PackedA]>| {
                let mut y = vec![0.0; out_c * positions];
                conv(&x, &w, None, 1, in_c, out_c, 1, &g, &mut y, &mut col, &mut scratch, filters, &Default::default());
                y
            };
            let whole = run(None);
            // The filters packed once give the same bits, whole and by rows.
            let mut filters = Vec::new();
            pack_filters(&w, in_c, out_c, 1, &g, false, &mut filters);
            let packed = run(Some(&filters));
            assert!(packed.iter().zip(&whole).all(|(a, b)| a.to_bits() == b.to_bits()), "packed filters");
            // Filters packed for a convolution of one output position (a matrix-vector
            // product, which needs no packing) serve a larger one later.
            let one = Window3d { out: [1, 1, 1], ..g };
            let mut from_one = Vec::new();
            pack_filters(&w, in_c, out_c, 1, &one, false, &mut from_one);
            let again = run(Some(&from_one));
            assert!(again.iter().zip(&whole).all(|(a, b)| a.to_bits() == b.to_bits()), "filters packed at 1 position");
            let (rows, out_w) = (g.out[0] * g.out[1], g.out[2]);
            for cut in [1, 4, rows - 1] {
                for range in [0..cut, cut..rows] {
                    for f in [None, Some(&filters[0])] {
                        let mut part = vec![0.0; out_c * range.len() * out_w];
                        conv_rows(&x, &w, in_c, out_c, &g, range.clone(), &mut part, &mut col, &mut scratch, f);
                        let n = range.len() * out_w;
                        for m in 0..out_c {
                            let want = &whole[m * positions + range.start * out_w..][..n];
                            assert!(part[m * n..][..n].iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn pools_count_padding_as_asked() {
        let g = geom(2, 3, 2, 2, 1, 1); // out 2x2, windows reach into the padding
        let x: Vec<f32> = (1..=9).map(|v| v as f32).collect();
        let mut y = vec![0.0; 4];
        pool(&x, 1, &g, Pool::Max, [0, 1, 1], &mut y);
        assert_eq!(y, [1.0, 3.0, 7.0, 9.0]);
        pool(&x, 1, &g, Pool::Average { count_pad: false }, [0, 1, 1], &mut y);
        assert_eq!(y, [1.0, 2.5, 5.5, 7.0]);
        pool(&x, 1, &g, Pool::Average { count_pad: true }, [0, 1, 1], &mut y);
        assert_eq!(y, [0.25, 1.25, 2.75, 7.0]);
        // 3-D: a 2x2x2 cube of 1..=8 pooled whole.
        let g = geom(3, 2, 2, 1, 0, 1);
        let x: Vec<f32> = (1..=8).map(|v| v as f32).collect();
        let mut y = vec![0.0; 1];
        pool(&x, 1, &g, Pool::Average { count_pad: false }, [0; 3], &mut y);
        assert_eq!(y, [4.5]);
        let mut idx = vec![0i64; 1];
        max_pool_indices(&x, 1, &g, false, &mut idx);
        assert_eq!(idx, [7]);
        // Column-major (storage_order 1): (z, y, x) is at (x * H + y) * D + z, so a maximum
        // at z 1, y 0, x 0 (row-major 4) is at 1.
        let mut x2 = x.clone();
        x2[4] = 100.0;
        max_pool_indices(&x2, 1, &g, true, &mut idx);
        assert_eq!(idx, [1]);
    }
}

#[cfg(test)]
#[path = "conv_bf16_tests.rs"]
mod bf16_tests;
