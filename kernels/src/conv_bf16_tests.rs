//! The convolution by filters packed as bfloat16 (`pack_filters(.., true, ..)`).

use super::*;
use crate::gemm::GemmScratch;

fn geom(dims: usize, in_len: usize, k: usize, stride: usize, pad: usize, dil: usize) -> Window3d {
    Window3d::cube(dims, in_len, k, stride, dil, pad, 0).expect("the kernel fits")
}

/// Filters packed as bfloat16: the convolution (im2col read straight from the input,
/// written for a one-position product, or the input itself for a 1x1) sums the
/// rounded operands as the float one does, and its row ranges give its bits.
#[test]
fn bf16_filters_sum_the_rounded_operands_and_split_by_rows() {
    if !crate::gemm::bf16_supported() {
        return;
    }
    let round =
        |v: &[f32]| -> Vec<f32> { v.iter().map(|&x| f32::from_bits((crate::gemm::to_bf16(x) as u32) << 16)).collect() };
    for (dims, len, k, pad, in_c, out_c) in
        [(2, 9, 3, 1, 21, 16), (2, 12, 1, 0, 35, 30), (1, 40, 5, 2, 7, 3), (2, 3, 3, 0, 9, 20)]
    {
        let g = geom(dims, len, k, 1, pad, 1);
        let x: Vec<f32> = (0..in_c * g.plane()).map(|i| ((i * 7 % 19) as f32 - 9.0) * 0.13).collect();
        let kk = in_c * g.kernel.iter().product::<usize>();
        let w: Vec<f32> = (0..out_c * kk).map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.07).collect();
        let (mut col, mut scratch) = (Vec::new(), GemmScratch::new());
        let positions = g.positions();
        let mut run = |x: &[f32], w: &[f32], filters: Option<&[PackedA]>| {
            let mut y = vec![0.0; out_c * positions];
            conv(x, w, None, 1, in_c, out_c, 1, &g, &mut y, &mut col, &mut scratch, filters, &Default::default());
            y
        };
        let want = run(&round(&x), &round(&w), None);
        let mut filters = Vec::new();
        pack_filters(&w, in_c, out_c, 1, &g, true, &mut filters);
        let got = run(&x, &w, Some(&filters));
        for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 1e-6 * kk as f32 * (1.0 + b.abs()), "{dims}-D {k}x{k} at {i}: {a} vs {b}");
        }
        // Packed again for float32 in the same buffers: float32's bits (found by
        // review: the bf16 mark stayed and the float layout was read as bfloat16).
        let float = run(&x, &w, None);
        let mut again = filters;
        pack_filters(&w, in_c, out_c, 1, &g, false, &mut again);
        let packed = run(&x, &w, Some(&again));
        assert!(packed.iter().zip(&float).all(|(a, b)| a.to_bits() == b.to_bits()), "repacked for float32");
        let mut filters = again;
        pack_filters(&w, in_c, out_c, 1, &g, true, &mut filters);
        let (rows, out_w) = (g.out[0] * g.out[1], g.out[2]);
        for range in [0..1, 1..rows] {
            let mut part = vec![0.0; out_c * range.len() * out_w];
            conv_rows(&x, &w, in_c, out_c, &g, range.clone(), &mut part, &mut col, &mut scratch, Some(&filters[0]));
            let n = range.len() * out_w;
            for m in 0..out_c {
                let whole = &got[m * positions + range.start * out_w..][..n];
                assert!(
                    part[m * n..][..n].iter().zip(whole).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "rows {range:?}"
                );
            }
        }
    }
}
