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

/// Where a plane's outputs go: i32 sums (ConvInteger), or requantized with the channel's
/// bias, scale and the output's zero point.
pub enum QDwOut<'a> {
    I32(&'a mut [i32]),
    U8(&'a mut [u8], DwRequant),
    I8(&'a mut [i8], DwRequant),
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

    /// Channel `ch`'s plane `x` (input zero point `zx`) on window `g` into `out` (the
    /// plane's outputs, row after row). `scratch` holds the padded plane.
    pub fn plane<T: Q8>(&self, x: &[T], zx: i32, ch: usize, g: &Window3d, out: QDwOut<'_>, scratch: &mut Vec<u8>) {
        assert!(Self::fits(g), "qgemm: the window does not take the depthwise path");
        assert!(ch < self.channels() && self.kh == g.kernel[1], "qgemm: the filters differ from the window");
        assert!(x.len() >= g.plane(), "qgemm: the plane is shorter than its shape");
        let [_, in_h, in_w] = g.input;
        let [_, out_h, out_w] = g.out;
        let (sh, sw) = (g.stride[1], g.stride[2]);
        let (dh, dw) = (g.dilation[1], g.dilation[2]);
        let (pt, pl) = (g.pad_begin[1], g.pad_begin[2]);
        // The padded rows and columns the windows reach, and the input's place in them.
        let rows = ((out_h - 1) * sh + (self.kh - 1) * dh + 1).max(pt + in_h);
        let cols = ((out_w - 1) * sw + (MAX_KW - 1) * dw + 1).max(pl + in_w);
        let stride = cols + SLACK;
        let pad = (zx + T::TO_UNSIGNED) as u8;
        scratch.clear();
        scratch.resize(rows * stride, pad);
        for (ih, row) in x[..g.plane()].chunks_exact(in_w).enumerate() {
            let dst = &mut scratch[(ih + pt) * stride + pl..][..in_w];
            for (d, &v) in dst.iter_mut().zip(row) {
                *d = v.unsigned();
            }
        }
        let zx_u = zx + T::TO_UNSIGNED;
        let dwords = &self.rows[ch * self.kh..(ch + 1) * self.kh];
        let base = (0i32).wrapping_sub(zx_u.wrapping_mul(self.sums[ch]));
        let job = Job { padded: scratch, stride, dwords, base, out_h, out_w, sh, sw, dh, dw };
        crate::arch::qdw_plane(&job, out);
    }
}

/// One plane's work, for the kernel in `arch`.
pub(crate) struct Job<'a> {
    /// The padded plane, unsigned, `stride` bytes a row.
    pub padded: &'a [u8],
    pub stride: usize,
    /// Per kernel row: its taps' signed weights as one dword.
    pub dwords: &'a [i32],
    /// `-zx·Σw'`: added to every output's sum.
    pub base: i32,
    pub out_h: usize,
    pub out_w: usize,
    pub sh: usize,
    pub sw: usize,
    pub dh: usize,
    pub dw: usize,
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

/// Output `(oy, ox)`'s sum in plain integers (the path off x86, where it never runs:
/// [`supported`] is false there).
pub(crate) fn sum_at(job: &Job<'_>, oy: usize, ox: usize) -> i32 {
    let mut s = job.base;
    for (r, &dword) in job.dwords.iter().enumerate() {
        let w = dword.to_le_bytes();
        for (q, &wq) in w.iter().enumerate() {
            let x = job.padded[(oy * job.sh + r * job.dh) * job.stride + ox * job.sw + q * job.dw];
            s = s.wrapping_add(x as i32 * wq as i8 as i32);
        }
    }
    s
}

/// The plane in plain integers (see [`sum_at`]).
pub(crate) fn plane_portable(job: &Job<'_>, out: QDwOut<'_>) {
    let at = |i: usize| sum_at(job, i / job.out_w, i % job.out_w);
    match out {
        QDwOut::I32(y) => y.iter_mut().enumerate().for_each(|(i, o)| *o = at(i)),
        QDwOut::U8(y, rq) => y.iter_mut().enumerate().for_each(|(i, o)| *o = requantize_sum(at(i), rq)),
        QDwOut::I8(y, rq) => y.iter_mut().enumerate().for_each(|(i, o)| *o = requantize_sum(at(i), rq)),
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
        for ch in 0..channels {
            let plane = &tx[ch * g.plane()..(ch + 1) * g.plane()];
            let want = naive(&x[ch * g.plane()..], zx, &w[ch * taps..], zw, g);
            let mut y = vec![i32::MIN; p + 3];
            dw.plane(plane, zx, ch, g, QDwOut::I32(&mut y[..p]), &mut scratch);
            assert_eq!(&y[..p], &want[..], "i32 {g:?} channel {ch}, x from {}", X::MIN);
            assert_eq!(&y[p..], &[i32::MIN; 3], "past the plane {g:?}");
            // Requantized: scales that put values past both ends, and a NaN one.
            for scale in [0.003f32, 0.07, f32::NAN] {
                let rq = DwRequant { bias: ch as i32 * 1000 - 1500, scale, zy: 9 };
                let mut y = vec![7u8; p + 1];
                dw.plane(plane, zx, ch, g, QDwOut::U8(&mut y[..p], rq), &mut scratch);
                let want_u8: Vec<u8> = want.iter().map(|&s| requantize_sum::<u8>(s, rq)).collect();
                assert_eq!(&y[..p], &want_u8[..], "u8 {g:?} channel {ch} scale {scale}");
                assert_eq!(y[p], 7, "past the plane {g:?}");
                let mut y = vec![7i8; p];
                let rq = DwRequant { zy: -5, ..rq };
                dw.plane(plane, zx, ch, g, QDwOut::I8(&mut y, rq), &mut scratch);
                let want_i8: Vec<i8> = want.iter().map(|&s| requantize_sum::<i8>(s, rq)).collect();
                assert_eq!(y, want_i8, "i8 {g:?} channel {ch} scale {scale}");
            }
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
