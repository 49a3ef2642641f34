//! [`max_bytes_avx512`]: the 8-bit (uint8 and int8) MaxPool of a quantized model, 64
//! outputs a vector.

use std::arch::x86_64::*;

use crate::conv::Window3d;

/// Max pooling of 8-bit integers (see `pool::max_pool_ints`; `signed`: int8, else
/// uint8) on 2-D windows of width stride 1 or 2, width dilation 1 and up to
/// [`INT_TAPS`] width taps, 64 outputs a vector: for each output row, the maximum of its
/// in-range input rows (64 bytes a masked load) goes into `rows` at the row's padding
/// (the least value around it), then each width tap is one load of that row at the tap's
/// offset (stride 1) or two loads and a `vpermt2b` that keeps the even bytes (stride 2).
/// An int8 input is compared as uint8 with its top bit flipped (the same order), flipped
/// back as it is stored. The least value stands for the padding and for taps past the
/// input, so a window with no input gives it, as `max_pool_ints` defines. Returns false,
/// writing nothing, for windows it does not take.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
pub(crate) fn max_bytes_avx512(
    x: &[u8],
    signed: bool,
    planes: usize,
    g: &Window3d,
    y: &mut [u8],
    rows: &mut [u8],
) -> bool {
    use crate::arch::mem::{load64_bytes, load_first_bytes, store_first_bytes64};
    let in_w = g.input[2];
    let [_, out_h, out_w] = g.out;
    let (kw, sw, pad) = (g.kernel[2], g.stride[2], g.pad_begin[2]);
    if !max_bytes_fits(g) || rows.len() < max_bytes_row_len(g) {
        return false;
    }
    let (plane, positions) = (g.plane(), g.positions());
    rows.fill(0);
    let flip = _mm512_set1_epi8(if signed { i8::MIN } else { 0 });
    let evens = {
        let idx: [u8; 64] = std::array::from_fn(|i| (2 * i) as u8);
        load64_bytes(&idx)
    };
    for (src, dst) in x.chunks_exact(plane).zip(y.chunks_exact_mut(positions)).take(planes) {
        for zh in 0..out_h {
            // The window's in-range input rows' maximum into `rows[pad..pad + in_w]`.
            let mut col = 0;
            while col < in_w {
                let n = (in_w - col).min(64);
                let mut m = _mm512_setzero_si512();
                for at in crate::pool::window_rows(g, 0, zh) {
                    let v = _mm512_xor_si512(load_first_bytes(&src[at + col..], n), flip);
                    m = _mm512_max_epu8(m, v);
                }
                store_first_bytes64(&mut rows[pad + col..], n, m);
                col += 64;
            }
            let row = &mut dst[zh * out_w..][..out_w];
            let mut zw = 0;
            while zw < out_w {
                let n = (out_w - zw).min(64);
                let mut m = _mm512_setzero_si512();
                for t in 0..kw {
                    let at = zw * sw + t;
                    let v = if sw == 1 {
                        load64_bytes(rows[at..at + 64].try_into().expect("64 bytes"))
                    } else {
                        let lo = load64_bytes(rows[at..at + 64].try_into().expect("64 bytes"));
                        let hi = load64_bytes(rows[at + 64..at + 128].try_into().expect("64 bytes"));
                        _mm512_permutex2var_epi8(lo, evens, hi)
                    };
                    m = _mm512_max_epu8(m, v);
                }
                store_first_bytes64(&mut row[zw..], n, _mm512_xor_si512(m, flip));
                zw += 64;
            }
        }
    }
    true
}

/// The most width taps [`max_bytes_avx512`] takes.
const INT_TAPS: usize = 8;

/// Whether [`max_bytes_avx512`] takes window `g`.
pub(crate) fn max_bytes_fits(g: &Window3d) -> bool {
    let two_d = g.input[0] == 1 && g.kernel[0] == 1 && g.out[0] == 1 && g.pad_begin[0] == 0;
    let (kw, sw) = (g.kernel[2], g.stride[2]);
    two_d
        && (1..=INT_TAPS).contains(&kw)
        && matches!(sw, 1 | 2)
        && g.dilation[2] == 1
        && g.plane() > 0
        && g.positions() > 0
}

/// Bytes of [`max_bytes_avx512`]'s row: every load of a row's last vector (up to
/// `64 · sw + 64` bytes from `sw` times its first output, plus a tap) inside it, past the
/// input the least value; and the input row's vectors from the padding on.
pub(crate) fn max_bytes_row_len(g: &Window3d) -> usize {
    let (in_w, out_w) = (g.input[2], g.out[2]);
    (out_w.next_multiple_of(64) * g.stride[2] + g.kernel[2] + 128).max(g.pad_begin[2] + in_w.next_multiple_of(64))
}
