use super::*;
use crate::conv::{window_geometry, Padding};
use crate::direct::tests::values;
use crate::direct::{pack_filters, pad_planes, source};
use crate::gemm::{Activation, Epilogue};
use crate::UnaryOp;
use std::ops::Range;

fn rounded(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| f32::from_bits((to_bf16(x) as u32) << 16)).collect()
}

/// The bf16 kernel against the float one on the same operands rounded to bfloat16 (the
/// products are then exact in both; only the order of the float sums differs), whole and
/// split after the first block (the same bits), fused epilogue or not.
#[allow(clippy::too_many_arguments)]
fn check(
    in_c: usize,
    out_c: usize,
    group: usize,
    hw: [usize; 2],
    k: [usize; 2],
    s: [usize; 2],
    d: usize,
    pad: [usize; 4],
) {
    if !crate::gemm::bf16_supported() {
        return;
    }
    let pads = Padding::Explicit([0, pad[0], pad[1], 0, pad[2], pad[3]]);
    let (g, _) = window_geometry([1, hw[0], hw[1]], [1, k[0], k[1]], [1, s[0], s[1]], [1, d, d], pads, false).unwrap();
    let (cg, mg, taps) = (in_c / group, out_c / group, k[0] * k[1]);
    let (kk, positions, blocks) = (cg * taps, g.positions(), (out_c / group).div_ceil(BLOCK));
    let x = values(in_c * g.plane(), 1);
    let w = values(out_c * kk, 2);
    let bias = values(out_c, 3);
    let residual: &'static [f32] = Box::leak(values(out_c * positions, 4).into_boxed_slice());
    let (xr, wr) = (rounded(&x), rounded(&w));
    let (mut packed, mut packed_bf16) = (Vec::new(), Vec::new());
    pack_filters(&wr, out_c, group, kk, &mut packed);
    pack_filters_bf16(&w, out_c, group, cg, taps, &mut packed_bf16);
    assert_eq!(packed_bf16.len(), packed_len_bf16(out_c, group, cg, taps));
    for fused in [false, true] {
        let ep = |block: Range<usize>| -> Epilogue<'static> {
            if !fused {
                return Epilogue::default();
            }
            let relu = Some(Activation::Unary(UnaryOp::Relu));
            let clip = Some(Activation::Clip { min: 0.0, max: 0.5 });
            Epilogue { act: relu, residual: Some(&residual[block]), after: clip, ..Epilogue::default() }
        };
        let (mut want, mut got, mut split) =
            (vec![f32::NAN; out_c * positions], vec![f32::NAN; out_c * positions], vec![f32::NAN; out_c * positions]);
        let (mut padded, mut pairs, mut carry) = (Vec::new(), Vec::new(), Vec::new());
        for gi in 0..group {
            let block = gi * mg * positions..(gi + 1) * mg * positions;
            let bias = Some(&bias[gi * mg..][..mg]);
            let (xg, xrg) = (&x[gi * cg * g.plane()..][..cg * g.plane()], &xr[gi * cg * g.plane()..][..cg * g.plane()]);
            let src = source(&g, cg);
            let xs: &[f32] = if src.copy {
                pad_planes(xrg, cg, &g, src, &mut padded);
                &padded
            } else {
                xrg
            };
            let w = &packed[gi * blocks * kk * BLOCK..][..blocks * kk * BLOCK];
            let float = Direct { x: xs, src, cg, g: &g, w, bias, epilogue: ep(block.clone()) };
            float.run(0..mg, &mut want[block.clone()], &mut carry);
            pair_planes(xg, cg, &g, &mut pairs);
            let per_group = blocks * cg.div_ceil(2) * taps * BLOCK;
            let w = &packed_bf16[gi * per_group..][..per_group];
            let run = Direct { x: &pairs, src: pair_source(&g), cg, g: &g, w, bias, epilogue: ep(block.clone()) };
            run.run_bf16(0..mg, &mut got[block.clone()], &mut carry);
            let cut = BLOCK.min(mg);
            let (a, b) = split[block].split_at_mut(cut * positions);
            run.run_bf16(0..cut, a, &mut carry);
            run.run_bf16(cut..mg, b, &mut carry);
        }
        for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 4e-7 * kk as f32 * (1.0 + b.abs()), "{i}: bf16 {a} float on rounded {b}");
        }
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&split), "a split changed the bits");
    }
}

#[test]
fn bf16_convs_sum_the_rounded_operands_as_the_float_kernel_does() {
    check(16, 32, 1, [10, 11], [3, 3], [1, 1], 1, [1, 1, 1, 1]);
    check(9, 64, 1, [9, 13], [3, 3], [2, 2], 1, [1, 1, 1, 1]);
    check(8, 20, 1, [12, 12], [5, 5], [2, 2], 1, [2, 1, 2, 0]);
    check(13, 48, 1, [11, 8], [3, 3], [1, 2], 2, [2, 2, 1, 2]);
    check(32, 16, 1, [6, 6], [3, 1], [1, 1], 1, [0; 4]);
    check(64, 128, 2, [7, 7], [3, 3], [1, 1], 1, [1, 1, 1, 1]);
    check(16, 80, 1, [1, 40], [1, 5], [1, 1], 1, [0, 2, 0, 2]);
    check(64, 16, 1, [7, 7], [1, 1], [1, 1], 1, [0; 4]);
    check(96, 72, 1, [14, 14], [1, 1], [1, 1], 1, [0; 4]);
    check(35, 130, 1, [3, 3], [1, 1], [2, 2], 1, [0; 4]);
}

#[test]
fn deep_bf16_convs_carry_their_sums_between_chunks() {
    // 2100 input channels of 1x1 (1050 pairs) and 300 of 3x3 (1350 pair-taps): two
    // chunks each.
    check(2100, 48, 1, [5, 5], [1, 1], [1, 1], 1, [0; 4]);
    check(300, 20, 1, [6, 5], [3, 3], [2, 2], 1, [1, 0, 1, 1]);
}

/// The vector rounding of the input planes gives `to_bf16`'s bits (ties to even, NaN
/// kept, subnormals to signed zero), an odd channel count's last plane zero above.
#[test]
fn pair_planes_round_as_to_bf16_does() {
    let (g, _) =
        window_geometry([1, 5, 37], [1, 3, 3], [1; 3], [1; 3], Padding::Explicit([0, 1, 1, 0, 1, 1]), false).unwrap();
    let mut x = values(3 * g.plane(), 9);
    let specials =
        [f32::NAN, f32::INFINITY, -0.0, 1e-40, -1e-40, f32::from_bits(0x3f80_8000), f32::from_bits(0x3f81_8000)];
    for (i, v) in specials.into_iter().enumerate() {
        x[i * 29] = v;
        x[g.plane() + 40 + i] = v;
    }
    let mut planes = Vec::new();
    pair_planes(&x, 3, &g, &mut planes);
    let src = pair_source(&g);
    assert_eq!(planes.len(), 2 * src.rows * src.cols);
    let plane = src.rows * src.cols;
    for c in 0..4 {
        for yy in 0..src.rows {
            for xx in 0..src.cols {
                let word = planes[(c / 2) * plane + yy * src.cols + xx].to_bits();
                let got = if c % 2 == 0 { word & 0xffff } else { word >> 16 };
                let inside = (1..=5).contains(&yy) && (1..=37).contains(&xx) && c < 3;
                let want = if inside { to_bf16(x[c * g.plane() + (yy - 1) * 37 + xx - 1]) as u32 } else { 0 };
                assert_eq!(got, want, "channel {c} at {yy},{xx}");
            }
        }
    }
    assert_eq!(to_bf16(1e-40), 0);
    assert_eq!(to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80, "a tie rounds to even");
    assert_eq!(to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82, "a tie rounds to even");
}
