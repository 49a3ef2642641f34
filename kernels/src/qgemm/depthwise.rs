//! An 8-bit depthwise convolution (one filter a channel) in integers, one plane at a
//! time, on AVX-512 VNNI with VBMI.
//!
//! The float route (the input's differences from its zero point as floats, the float
//! depthwise kernel, the float sums requantized) makes three passes over each plane and
//! moves four bytes an element; MobileNetV2's int8 depthwise layers took 1.8x ORT's time
//! that way. Here each kernel row's taps (up to four) are one dword of signed weights,
//! and for 16 outputs of an output row the input bytes under those taps are gathered
//! from one 64-byte load of the padded input row by one `vpermb` (output `i`'s dword:
//! bytes `i · sw + q · dw`, `q < 4`, the bytes past the window meeting zero weights), so
//! a kernel row is one `vpdpbusd` for 16 outputs. The input is copied once into a plane
//! padded with its zero point (unsigned: an int8 input is shifted by 128 with its zero
//! point), so the sum over padded taps is `Σ x·w' - zx·Σw'` with `w' = w - zw`: exact
//! integers, the same as the float route's (which holds them exactly too), requantized
//! the same way.

use super::{QInt, Q8};
use crate::conv::Window3d;

/// Kernel rows of at most this many taps (one dword).
const MAX_KW: usize = 4;
/// Kernel heights up to this (the x86 kernel holds a weight vector a row).
pub(crate) const MAX_KH: usize = 7;
/// Bytes read past an output row's last window (one 64-byte load from its start).
const SLACK: usize = 64;

/// A depthwise convolution's weights in kernel-row dwords: per channel, `kh` dwords of
/// its taps' signed differences from the zero point (zero past `kw`), and their sum.
#[derive(Debug, Default, Clone)]
pub struct QDepthwise {
    rows: Vec<i32>,
    sums: Vec<i32>,
    kh: usize,
}

/// One channel's requantization: `y = requantize((sum + bias) · scale) + zy`.
#[derive(Clone, Copy, Debug)]
pub struct DwRequant {
    pub bias: i32,
    pub scale: f32,
    pub zy: i32,
}

impl QDepthwise {
    pub fn new() -> QDepthwise {
        QDepthwise::default()
    }

    /// Whether window `g` takes this path on this CPU: one depth plane, a kernel of at
    /// most 4 taps a row and 7 rows, and 16 outputs' windows within one 64-byte load.
    pub fn fits(g: &Window3d) -> bool {
        let two_d = g.input[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1 && g.pad_begin[0] == 0;
        let (kh, kw) = (g.kernel[1], g.kernel[2]);
        let reach = 15 * g.stride[2] + (MAX_KW - 1) * g.dilation[2];
        two_d
            && (1..=MAX_KH).contains(&kh)
            && (1..=MAX_KW).contains(&kw)
            && reach < 64
            && g.plane() > 0
            && g.positions() > 0
            && supported()
    }

    /// Packs `channels` filters of window `g`'s kernel: `diff(ch, t)` is tap `t`'s
    /// (height-major) weight less its zero point. False (and nothing kept) when the
    /// kernel is larger than the path takes or a difference is outside int8's range:
    /// such weights take the float route.
    pub fn pack(&mut self, channels: usize, g: &Window3d, diff: impl Fn(usize, usize) -> i32) -> bool {
        let (kh, kw) = (g.kernel[1], g.kernel[2]);
        self.rows.clear();
        self.sums.clear();
        self.kh = kh;
        if g.kernel[0] != 1 || !(1..=MAX_KH).contains(&kh) || !(1..=MAX_KW).contains(&kw) {
            return false;
        }
        for ch in 0..channels {
            let mut sum = 0i32;
            for r in 0..kh {
                let mut bytes = [0u8; 4];
                for (q, b) in bytes.iter_mut().enumerate().take(kw) {
                    let d = diff(ch, r * kw + q);
                    let Ok(v) = i8::try_from(d) else {
                        self.rows.clear();
                        self.sums.clear();
                        return false;
                    };
                    *b = v as u8;
                    sum += d;
                }
                self.rows.push(i32::from_le_bytes(bytes));
            }
            self.sums.push(sum);
        }
        true
    }

    /// Channels packed.
    pub fn channels(&self) -> usize {
        self.sums.len()
    }

    /// Planes `planes` of a depthwise convolution on window `g` (plane `pl` is channel
    /// `pl % c`), their inputs `x` back to back (input zero point `zx`), into `out` (their
    /// outputs, plane after plane). `scratch` holds the padded plane: its padding is
    /// written once a call and each plane's rows are copied into it in turn (a call a
    /// plane, its padding and set-up each time, with one row of 7 outputs a vector: 92 ns
    /// a 7x7 plane; now 59-68).
    #[allow(clippy::too_many_arguments)]
    pub fn planes<T: Q8>(
        &self,
        x: &[T],
        zx: i32,
        planes: std::ops::Range<usize>,
        c: usize,
        g: &Window3d,
        out: QDwPlanes<'_>,
        scratch: &mut Vec<u8>,
    ) {
        self.planes_on(x, zx, planes, c, g, out, scratch, crate::arch::qdw_planes)
    }

    /// [`planes`](Self::planes) on `kernel` (the CPU's, or the portable one in tests).
    #[allow(clippy::too_many_arguments)]
    fn planes_on<T: Q8>(
        &self,
        x: &[T],
        zx: i32,
        planes: std::ops::Range<usize>,
        c: usize,
        g: &Window3d,
        out: QDwPlanes<'_>,
        scratch: &mut Vec<u8>,
        kernel: fn(&Planes<'_, T>, &mut [u8], QDwPlanes<'_>),
    ) {
        assert!(Self::fits(g), "qgemm: the window does not take the depthwise path");
        assert!(c > 0 && c <= self.channels() && self.kh == g.kernel[1], "qgemm: the filters differ from the window");
        let (plane, p, n) = (g.plane(), g.positions(), planes.len());
        assert!(x.len() >= n * plane, "qgemm: the planes are shorter than their shape");
        assert!(out.len() >= n * p, "qgemm: the output is shorter than its planes");
        let [_, in_h, in_w] = g.input;
        let [_, out_h, out_w] = g.out;
        let (sh, sw) = (g.stride[1], g.stride[2]);
        let (dh, dw) = (g.dilation[1], g.dilation[2]);
        let (pt, pl) = (g.pad_begin[1], g.pad_begin[2]);
        // The padded rows and columns the windows reach, and the input's place in them;
        // rows back to back (a window's 64-byte load reads on into the next rows, whose
        // bytes no lane of the gather takes), with one load's slack past the last.
        let rows = ((out_h - 1) * sh + (self.kh - 1) * dh + 1).max(pt + in_h);
        let stride = ((out_w - 1) * sw + (MAX_KW - 1) * dw + 1).max(pl + in_w);
        let ahead = rows_per_vector(out_w, sh * stride, sw, dw);
        let order: [u8; 64] = std::array::from_fn(|b| {
            let (lane, q) = (b / 4, b % 4);
            let (r, col) = (lane / out_w, lane % out_w);
            if r < ahead {
                (r * sh * stride + col * sw + q * dw) as u8
            } else {
                0
            }
        });
        let zx_u = zx + T::TO_UNSIGNED;
        scratch.clear();
        scratch.resize(rows * stride + SLACK, zx_u as u8);
        let geo = Geometry { stride, out_h, out_w, sh, sw, dh, dw, order, ahead };
        let job = Planes {
            x,
            planes,
            c,
            in_w,
            plane,
            p,
            at: pt * stride + pl,
            rows: &self.rows,
            sums: &self.sums,
            kh: self.kh,
            zx_u,
            geo,
        };
        kernel(&job, scratch, out);
    }
}

/// How many output rows one vector of 16 outputs covers: as many whole rows of `out_w`
/// as fit in 16 lanes (a 7x7 plane's rows two at a time, where one row left 9 lanes
/// idle) and whose windows stay within one 64-byte load (`row_step` bytes a row apart).
fn rows_per_vector(out_w: usize, row_step: usize, sw: usize, dw: usize) -> usize {
    let reach = |k: usize| (k - 1) * row_step + (out_w - 1) * sw + (MAX_KW - 1) * dw;
    let mut k = (16 / out_w).max(1);
    while k > 1 && reach(k) >= 64 {
        k -= 1;
    }
    k
}

/// Each channel's requantization for [`QDepthwise::planes`]: `bias[ch]` (none: 0),
/// `scales[ch]`, the output's zero point.
#[derive(Clone, Copy, Debug)]
pub struct DwRequants<'a> {
    pub bias: Option<&'a [i32]>,
    pub scales: &'a [f32],
    pub zy: i32,
}

/// Where [`QDepthwise::planes`] puts its planes' outputs.
pub enum QDwPlanes<'a> {
    I32(&'a mut [i32]),
    U8(&'a mut [u8], DwRequants<'a>),
    I8(&'a mut [i8], DwRequants<'a>),
}

impl QDwPlanes<'_> {
    fn len(&self) -> usize {
        match self {
            QDwPlanes::I32(y) => y.len(),
            QDwPlanes::U8(y, _) => y.len(),
            QDwPlanes::I8(y, _) => y.len(),
        }
    }
}

/// A plane's padded layout and the vectors its outputs take, for the kernel in `arch`.
#[derive(Clone, Copy)]
pub(crate) struct Geometry {
    /// Bytes a padded row (rows back to back, a 64-byte load's slack past the last).
    pub stride: usize,
    pub out_h: usize,
    pub out_w: usize,
    pub sh: usize,
    pub sw: usize,
    pub dh: usize,
    pub dw: usize,
    /// The gather: byte `4 i + q` is lane `i`'s tap `q` from the load at its vector's
    /// first output (lane `i` is row `i / out_w`, column `i % out_w` of the vector's rows;
    /// zero past `ahead` rows).
    pub order: [u8; 64],
    /// Output rows a vector covers: one when a row is wider than 8 outputs (then 16
    /// consecutive outputs of a row).
    pub ahead: usize,
}

/// One call's planes, for the kernel in `arch`.
pub(crate) struct Planes<'a, T> {
    /// The planes' inputs, back to back.
    pub x: &'a [T],
    /// Their indices: plane `pl` is channel `pl % c`.
    pub planes: std::ops::Range<usize>,
    pub c: usize,
    pub in_w: usize,
    /// Elements of an input plane and of an output plane.
    pub plane: usize,
    pub p: usize,
    /// Where the input's first element goes in the padded plane.
    pub at: usize,
    /// Per channel, `kh` dwords of its kernel rows' signed weights, and their sum.
    pub rows: &'a [i32],
    pub sums: &'a [i32],
    pub kh: usize,
    /// The input's zero point, made unsigned.
    pub zx_u: i32,
    pub geo: Geometry,
}

impl<T> Planes<'_, T> {
    /// Channel `ch`'s kernel-row dwords.
    pub fn dwords(&self, ch: usize) -> &[i32] {
        &self.rows[ch * self.kh..(ch + 1) * self.kh]
    }

    /// `-zx·Σw'` of channel `ch`: added to every output's sum.
    pub fn base(&self, ch: usize) -> i32 {
        (0i32).wrapping_sub(self.zx_u.wrapping_mul(self.sums[ch]))
    }
}

/// Channel `ch`'s requantization.
pub(crate) fn requant_of(r: &DwRequants<'_>, ch: usize) -> DwRequant {
    DwRequant { bias: r.bias.map_or(0, |b| b[ch]), scale: r.scales[ch], zy: r.zy }
}

/// Whether this CPU has the path's instructions (AVX-512 VNNI and VBMI).
pub fn supported() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            super::vnni_supported() && std::arch::is_x86_feature_detected!("avx512vbmi")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// The planes in plain integers (the path off x86, where it never runs: [`supported`] is
/// false there).
pub(crate) fn planes_portable<T: Q8>(job: &Planes<'_, T>, padded: &mut [u8], out: QDwPlanes<'_>) {
    let g = job.geo;
    let mut out = out;
    for (i, at_plane) in job.planes.clone().enumerate() {
        let ch = at_plane % job.c;
        for (r, row) in job.x[i * job.plane..][..job.plane].chunks_exact(job.in_w).enumerate() {
            for (d, &v) in padded[job.at + r * g.stride..][..job.in_w].iter_mut().zip(row) {
                *d = v.unsigned();
            }
        }
        let sum_at = |o: usize| {
            let (oy, ox) = (o / g.out_w, o % g.out_w);
            let mut s = job.base(ch);
            for (r, &dword) in job.dwords(ch).iter().enumerate() {
                for (q, &wq) in dword.to_le_bytes().iter().enumerate() {
                    let x = padded[(oy * g.sh + r * g.dh) * g.stride + ox * g.sw + q * g.dw];
                    s = s.wrapping_add(x as i32 * wq as i8 as i32);
                }
            }
            s
        };
        let at = i * job.p..(i + 1) * job.p;
        match &mut out {
            QDwPlanes::I32(y) => y[at].iter_mut().enumerate().for_each(|(o, v)| *v = sum_at(o)),
            QDwPlanes::U8(y, r) => {
                let rq = requant_of(r, ch);
                y[at].iter_mut().enumerate().for_each(|(o, v)| *v = requantize_sum(sum_at(o), rq))
            }
            QDwPlanes::I8(y, r) => {
                let rq = requant_of(r, ch);
                y[at].iter_mut().enumerate().for_each(|(o, v)| *v = requantize_sum(sum_at(o), rq))
            }
        }
    }
}

/// Requantizes one output's sum as the float route does (`qgemm::requantize`).
#[inline(always)]
pub(crate) fn requantize_sum<T: QInt>(sum: i32, rq: DwRequant) -> T {
    super::requantize::<T>(sum.wrapping_add(rq.bias) as f32 * rq.scale, rq.zy)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn byte(seed: &mut u64) -> i32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (*seed >> 56) as i32
    }

    /// The definition: `Σ (x - zx)(w - zw)` over the in-range taps.
    fn naive(x: &[i32], zx: i32, w: &[i32], zw: i32, g: &Window3d) -> Vec<i32> {
        let [_, in_h, in_w] = g.input;
        let [_, out_h, out_w] = g.out;
        let (kh, kw) = (g.kernel[1], g.kernel[2]);
        let mut y = vec![0; out_h * out_w];
        for oy in 0..out_h {
            for ox in 0..out_w {
                let mut s = 0;
                for r in 0..kh {
                    for q in 0..kw {
                        let iy = (oy * g.stride[1] + r * g.dilation[1]) as isize - g.pad_begin[1] as isize;
                        let ix = (ox * g.stride[2] + q * g.dilation[2]) as isize - g.pad_begin[2] as isize;
                        if iy >= 0 && ix >= 0 && (iy as usize) < in_h && (ix as usize) < in_w {
                            s += (x[iy as usize * in_w + ix as usize] - zx) * (w[r * kw + q] - zw);
                        }
                    }
                }
                y[oy * out_w + ox] = s;
            }
        }
        y
    }

    fn case<X: Q8>(g: &Window3d, seed: &mut u64) {
        let channels = 3;
        let x: Vec<i32> = (0..channels * g.plane()).map(|_| byte(seed) + X::MIN).collect();
        let taps = g.kernel[1] * g.kernel[2];
        // (Weights whose differences from a small zero point stay within int8; the
        // extremes -128 and 127 among them.)
        let zw = byte(seed) % 9 - 4;
        let mut w: Vec<i32> = (0..channels * taps).map(|_| (byte(seed) - 128).clamp(-124, 123)).collect();
        (w[0], w[taps - 1]) = (zw - 128, zw + 127);
        let zx = byte(seed) + X::MIN;
        let tx: Vec<X> = x.iter().map(|&v| X::from_i32(v)).collect();
        let mut dw = QDepthwise::new();
        assert!(dw.pack(channels, g, |ch, t| w[ch * taps + t] - zw), "{g:?}");
        // A difference outside int8: refused, nothing kept.
        let mut refused = QDepthwise::new();
        assert!(!refused.pack(channels, g, |ch, t| if ch == 2 && t == taps - 1 { 128 } else { 0 }));
        assert_eq!(refused.channels(), 0);
        let mut scratch = Vec::new();
        let p = g.positions();
        // Planes 1 to 2 · channels - 1 of two images (plane `pl` is channel `pl % channels`).
        let planes = 1..2 * channels;
        let n = planes.len();
        let xs: Vec<X> =
            planes.clone().flat_map(|pl| tx[(pl % channels) * g.plane()..][..g.plane()].to_vec()).collect();
        let want: Vec<i32> = planes
            .clone()
            .flat_map(|pl| {
                let ch = pl % channels;
                naive(&x[ch * g.plane()..], zx, &w[ch * taps..], zw, g)
            })
            .collect();
        let mut y = vec![i32::MIN; n * p + 3];
        dw.planes(&xs, zx, planes.clone(), channels, g, QDwPlanes::I32(&mut y[..n * p]), &mut scratch);
        assert_eq!(&y[..n * p], &want[..], "i32 {g:?}, x from {}", X::MIN);
        assert_eq!(&y[n * p..], &[i32::MIN; 3], "past the planes {g:?}");
        // The portable kernel (the path off x86), on the same layout.
        let mut y = vec![i32::MIN; n * p];
        let out = QDwPlanes::I32(&mut y);
        dw.planes_on(&xs, zx, planes.clone(), channels, g, out, &mut scratch, planes_portable);
        assert_eq!(y, want, "portable i32 {g:?}, x from {}", X::MIN);
        // Requantized: scales that put values past both ends, and a NaN one.
        for scale in [0.003f32, 0.07, f32::NAN] {
            let bias: Vec<i32> = (0..channels as i32).map(|ch| ch * 1000 - 1500).collect();
            let scales: Vec<f32> = (0..channels).map(|ch| scale * (1.0 + ch as f32 / 8.0)).collect();
            let rqs = DwRequants { bias: Some(&bias), scales: &scales, zy: 9 };
            let rq = |i: usize, zy: i32| {
                let ch = (planes.start + i / p) % channels;
                DwRequant { bias: bias[ch], scale: scales[ch], zy }
            };
            let mut y = vec![7u8; n * p + 1];
            dw.planes(&xs, zx, planes.clone(), channels, g, QDwPlanes::U8(&mut y[..n * p], rqs), &mut scratch);
            let want_u8: Vec<u8> = want.iter().enumerate().map(|(i, &s)| requantize_sum::<u8>(s, rq(i, 9))).collect();
            assert_eq!(&y[..n * p], &want_u8[..], "u8 {g:?} scale {scale}");
            assert_eq!(y[n * p], 7, "past the planes {g:?}");
            let mut y = vec![7u8; n * p];
            let out = QDwPlanes::U8(&mut y, rqs);
            dw.planes_on(&xs, zx, planes.clone(), channels, g, out, &mut scratch, planes_portable);
            assert_eq!(y, want_u8, "portable u8 {g:?} scale {scale}");
            let mut y = vec![7i8; n * p];
            let rqs = DwRequants { bias: None, zy: -5, ..rqs };
            dw.planes(&xs, zx, planes.clone(), channels, g, QDwPlanes::I8(&mut y, rqs), &mut scratch);
            let want_i8: Vec<i8> = want
                .iter()
                .enumerate()
                .map(|(i, &s)| requantize_sum::<i8>(s, DwRequant { bias: 0, ..rq(i, -5) }))
                .collect();
            assert_eq!(y, want_i8, "i8 {g:?} scale {scale}");
        }
    }

    #[test]
    fn integer_depthwise_planes_give_the_definitions_sums_and_bytes() {
        if !supported() {
            return;
        }
        let mut seed = 3;
        // (dims, len, kernel, stride, dilation, pad): MobileNetV2's 3x3 at strides 1 and
        // 2, rows narrower and wider than 16 outputs, 1x1, 2x2, 4-wide kernels, dilation,
        // no padding, a 1-D window.
        for (dims, len, k, s, d, p) in [
            (2, 9, 3, 1, 1, 1),
            (2, 20, 3, 2, 1, 1),
            (2, 35, 3, 1, 1, 1),
            (2, 7, 1, 1, 1, 0),
            (2, 8, 2, 2, 1, 0),
            (2, 11, 4, 1, 1, 2),
            (2, 13, 3, 1, 2, 2),
            (2, 17, 3, 3, 1, 0),
            (1, 40, 3, 1, 1, 1),
            // Rows of at most 8 outputs, several a vector: MobileNetV2's 7x7 at stride 1
            // and 14 -> 7 at stride 2 (rows two at a time, an odd count), 4 a vector, and
            // rows whose windows let fewer rows share a load (5 -> 3 at stride 3 of a
            // 4-wide kernel).
            (2, 7, 3, 1, 1, 1),
            (2, 14, 3, 2, 1, 1),
            (2, 4, 3, 1, 1, 1),
            (2, 13, 4, 3, 1, 0),
            (2, 6, 2, 1, 3, 0),
            // Input rows wider than one 64-byte copy (MobileNetV2's 112 at stride 2, and
            // 70 at stride 1).
            (2, 112, 3, 2, 1, 1),
            (2, 70, 3, 1, 1, 1),
        ] {
            let g = Window3d::cube(dims, len, k, s, d, p, 0).expect("a window");
            assert!(QDepthwise::fits(&g), "{g:?}");
            case::<u8>(&g, &mut seed);
            case::<i8>(&g, &mut seed);
        }
        // Kernels 5 to 7 rows high (3 wide, padded), and one of 8 rows, refused.
        for kh in [5, 6, 7] {
            let g = Window3d {
                input: [1, 12, 10],
                out: [1, 12 + 2 * (kh / 2) + 1 - kh, 10],
                kernel: [1, kh, 3],
                stride: [1; 3],
                dilation: [1; 3],
                pad_begin: [0, kh / 2, 1],
            };
            assert!(QDepthwise::fits(&g), "{g:?}");
            case::<u8>(&g, &mut seed);
            case::<i8>(&g, &mut seed);
        }
        // One output a row, kernel rows 4 wide dilated by 4: rows share a load only while
        // their windows' reach stays under 64 bytes (found by review: `>= 64` made `> 64`
        // went unseen).
        let g = Window3d {
            input: [1, 8, 11],
            out: [1, 10, 1],
            kernel: [1, 3, 4],
            stride: [1, 1, 3],
            dilation: [1, 4, 4],
            pad_begin: [0, 7, 2],
        };
        assert!(QDepthwise::fits(&g), "{g:?}");
        case::<u8>(&g, &mut seed);
        case::<i8>(&g, &mut seed);
        assert_eq!(rows_per_vector(1, 61, 1, 1), 1, "a reach of exactly 64");
        assert_eq!(rows_per_vector(1, 60, 1, 1), 2, "a reach of 63");
        let g = Window3d {
            input: [1, 12, 10],
            out: [1, 5, 10],
            kernel: [1, 8, 3],
            stride: [1; 3],
            dilation: [1; 3],
            pad_begin: [0, 0, 1],
        };
        assert!(!QDepthwise::fits(&g) && !QDepthwise::new().pack(1, &g, |_, _| 1), "an 8-row kernel taken");
        // A window wider than the path takes, and strides whose 16 windows pass a load.
        let g = Window3d::cube(2, 12, 5, 1, 1, 2, 0).expect("a window");
        assert!(!QDepthwise::fits(&g));
        assert!(!QDepthwise::new().pack(1, &g, |_, _| 1), "a 5-wide kernel packed");
        let g = Window3d::cube(2, 80, 3, 4, 2, 1, 0).expect("a window");
        assert!(!QDepthwise::fits(&g), "15 · 4 + 3 · 2 reaches past 63");
    }
}
