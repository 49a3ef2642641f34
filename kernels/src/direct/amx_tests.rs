use super::*;
use crate::conv::{window_geometry, Padding};
use crate::direct::tests::values;
use crate::gemm::{Activation, Epilogue};
use crate::UnaryOp;

fn rounded(v: &[f32]) -> Vec<f32> {
    v.iter().map(|&x| f32::from_bits((to_bf16(x) as u32) << 16)).collect()
}

/// A convolution summed in f64 by its definition, then the epilogue: the reference.
fn naive(g: &Window3d, x: &[f32], w: &[f32], cg: usize, bias: Option<&[f32]>, ep: Epilogue<'_>, y: &mut [f32]) {
    let ([_, in_h, in_w], [_, out_h, out_w], [_, kh, kw]) = (g.input, g.out, g.kernel);
    let mg = y.len() / (out_h * out_w);
    for m in 0..mg {
        for oy in 0..out_h {
            for ox in 0..out_w {
                let mut sum = 0f64;
                for c in 0..cg {
                    for ky in 0..kh {
                        for kx in 0..kw {
                            let iy = (oy * g.stride[1] + ky * g.dilation[1]) as isize - g.pad_begin[1] as isize;
                            let ix = (ox * g.stride[2] + kx * g.dilation[2]) as isize - g.pad_begin[2] as isize;
                            if (0..in_h as isize).contains(&iy) && (0..in_w as isize).contains(&ix) {
                                let v = x[c * in_h * in_w + iy as usize * in_w + ix as usize] as f64;
                                sum += v * w[((m * cg + c) * kh + ky) * kw + kx] as f64;
                            }
                        }
                    }
                }
                y[(m * out_h + oy) * out_w + ox] = sum as f32;
            }
        }
    }
    let ep = Epilogue { bias: bias.map_or(crate::gemm::Bias::None, crate::gemm::Bias::Rows), ..ep };
    ep.apply_rows(y, out_h * out_w, 0..mg);
}

/// The AMX kernel against sums in f64 of the same operands rounded to bfloat16 (the
/// products are then exact; only the order of the float sums differs), whole and
/// split after one block and after two (the same bits), fused epilogue or not.
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
    if !amx::bf16_tiles() {
        return;
    }
    let pads = Padding::Explicit([0, pad[0], pad[1], 0, pad[2], pad[3]]);
    let (g, _) = window_geometry([1, hw[0], hw[1]], [1, k[0], k[1]], [1, s[0], s[1]], [1, d, d], pads, false).unwrap();
    let (cg, mg, taps) = (in_c / group, out_c / group, k[0] * k[1]);
    assert!(fits_amx(&g, cg, mg));
    let (kk, positions) = (cg * taps, g.positions());
    let x = values(in_c * g.plane(), 1);
    let w = values(out_c * kk, 2);
    let bias = values(out_c, 3);
    let residual: &'static [f32] = Box::leak(values(out_c * positions, 4).into_boxed_slice());
    let (xr, wr) = (rounded(&x), rounded(&w));
    let mut packed_amx = Vec::new();
    pack_filters_amx(&w, out_c, group, cg, taps, &mut packed_amx);
    assert_eq!(packed_amx.len(), packed_len_amx(out_c, group, cg, taps));
    for fused in [false, true] {
        let ep = |block: Range<usize>| -> Epilogue<'static> {
            if !fused {
                return Epilogue::default();
            }
            let relu = Some(Activation::Unary(UnaryOp::Relu));
            let clip = Some(Activation::Clip { min: 0.0, max: 0.5 });
            Epilogue { act: relu, residual: Some(&residual[block]), after: clip, ..Epilogue::default() }
        };
        let len = out_c * positions;
        let (mut want, mut got) = (vec![f32::NAN; len], vec![f32::NAN; len]);
        let (mut split1, mut split2) = (vec![f32::NAN; len], vec![f32::NAN; len]);
        let (mut pairs, mut carry) = (Vec::new(), Vec::new());
        for gi in 0..group {
            let block = gi * mg * positions..(gi + 1) * mg * positions;
            let bias = Some(&bias[gi * mg..][..mg]);
            let (xg, xrg) = (&x[gi * cg * g.plane()..][..cg * g.plane()], &xr[gi * cg * g.plane()..][..cg * g.plane()]);
            naive(&g, xrg, &wr[gi * mg * kk..][..mg * kk], cg, bias, ep(block.clone()), &mut want[block.clone()]);
            // NaN wherever the rounding does not write: no valid output may read it.
            pairs.clear();
            pairs.resize(amx_planes_len(cg, &g) + 100, f32::NAN);
            let planes = amx_planes(xg, cg, &g, &mut pairs);
            let per_group = packed_len_amx(out_c, group, cg, taps) / group;
            let w = &packed_amx[gi * per_group..][..per_group];
            let run = Direct { x: planes, src: pair_source(&g), cg, g: &g, w, bias, epilogue: ep(block.clone()) };
            run.run_amx(0..mg, &mut got[block.clone()], &mut carry);
            for (cut, split) in [(BLOCK, &mut split1), (2 * BLOCK, &mut split2)] {
                let cut = cut.min(mg);
                let (a, b) = split[block.clone()].split_at_mut(cut * positions);
                run.run_amx(0..cut, a, &mut carry);
                if cut < mg {
                    run.run_amx(cut..mg, b, &mut carry);
                }
            }
        }
        for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
            assert!((a - b).abs() <= 4e-7 * kk as f32 * (1.0 + b.abs()), "{i}: amx {a} float on rounded {b}");
        }
        let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&split1), "a split after one block changed the bits");
        assert_eq!(bits(&got), bits(&split2), "a split after two blocks changed the bits");
    }
}

#[test]
fn amx_convs_sum_the_rounded_operands_as_the_float_kernel_does() {
    check(16, 32, 1, [10, 11], [3, 3], [1, 1], 1, [1, 1, 1, 1]);
    check(64, 128, 2, [7, 7], [3, 3], [1, 1], 1, [1, 1, 1, 1]);
    check(40, 48, 1, [11, 8], [3, 3], [1, 1], 2, [2, 2, 1, 2]);
    check(32, 16, 1, [6, 6], [3, 1], [1, 1], 1, [0; 4]);
    check(16, 80, 1, [1, 40], [1, 5], [1, 1], 1, [0, 2, 0, 2]);
    check(96, 72, 1, [14, 14], [1, 1], [1, 1], 1, [0; 4]);
    // Bands of output rows: 13 rows of a 42-wide padded plane each.
    check(16, 35, 1, [40, 40], [3, 3], [1, 1], 1, [1, 1, 1, 1]);
    check(24, 64, 1, [9, 60], [5, 5], [1, 1], 1, [2, 2, 2, 2]);
}

/// Strides through the phases of the padded planes: 2 each way (even and odd sizes and
/// paddings), 2 one way, 3, a dilated one, and 1x1 at stride 2.
#[test]
fn strided_amx_convs_read_the_phases() {
    check(32, 64, 1, [14, 14], [3, 3], [2, 2], 1, [1, 1, 1, 1]);
    check(16, 48, 1, [15, 13], [3, 3], [2, 2], 1, [1, 0, 1, 1]);
    check(64, 32, 2, [9, 12], [5, 5], [2, 1], 1, [2, 2, 2, 2]);
    check(20, 16, 1, [17, 11], [3, 3], [3, 3], 2, [2, 1, 0, 2]);
    check(48, 40, 1, [20, 20], [1, 1], [2, 2], 1, [0; 4]);
    check(16, 32, 1, [40, 40], [3, 3], [2, 2], 1, [1, 1, 1, 1]);
    // Found by review: a vertical stride alone, no horizontal padding (the rounding's
    // whole-plane shortcut wrote the rows into one phase).
    check(32, 32, 1, [8, 8], [3, 3], [2, 1], 1, [0; 4]);
    check(16, 16, 1, [6, 5], [1, 1], [2, 1], 1, [0; 4]);
}

#[test]
fn deep_amx_convs_add_their_groups_of_steps() {
    // 150 pairs of 3x3 (10 chunks by 9 taps, 90 steps) and 2100 channels of 1x1 (66
    // chunks): two groups of steps and more.
    check(300, 20, 1, [6, 5], [3, 3], [1, 1], 1, [1, 0, 1, 1]);
    check(2100, 48, 1, [5, 5], [1, 1], [1, 1], 1, [0; 4]);
}

/// A stem on the tiles with its kernel's columns folded into its channels, against the
/// f64 sums of the rounded operands, whole and split after one block (the same bits).
#[allow(clippy::too_many_arguments)]
fn check_folded(in_c: usize, out_c: usize, hw: [usize; 2], k: [usize; 2], s: [usize; 2], d: usize, pad: [usize; 4]) {
    if !amx::bf16_tiles() {
        return;
    }
    let pads = Padding::Explicit([0, pad[0], pad[1], 0, pad[2], pad[3]]);
    let (g, _) = window_geometry([1, hw[0], hw[1]], [1, k[0], k[1]], [1, s[0], s[1]], [1, d, d], pads, false).unwrap();
    // The products fold where the folded channels fill a chunk; the kernel takes fewer.
    assert_eq!(folds(&g, in_c, out_c, 1), in_c * k[1] >= 16, "{in_c}->{out_c} {k:?} folds");
    let (kk, positions) = (in_c * k[0] * k[1], g.positions());
    let x = values(in_c * g.plane(), 1);
    let w = values(out_c * kk, 2);
    let bias = values(out_c, 3);
    let mut want = vec![f32::NAN; out_c * positions];
    let relu = Epilogue { act: Some(Activation::Unary(UnaryOp::Relu)), ..Epilogue::default() };
    naive(&g, &rounded(&x), &rounded(&w), in_c, Some(&bias), relu, &mut want);
    let f = folded(&g);
    let mut packed = Vec::new();
    pack_filters_amx(&fold_filters(&w, out_c, in_c, &g), out_c, 1, in_c * k[1], k[0], &mut packed);
    let mut planes = vec![f32::NAN; amx_planes_len(in_c * k[1], &f) + 77];
    let planes = amx_planes_folded(&x, in_c, &g, &mut planes);
    let run = Direct {
        x: planes,
        src: pair_source(&f),
        cg: in_c * k[1],
        g: &f,
        w: &packed,
        bias: Some(&bias),
        epilogue: relu,
    };
    let (mut got, mut split, mut band) = (vec![f32::NAN; want.len()], vec![f32::NAN; want.len()], Vec::new());
    run.run_amx(0..out_c, &mut got, &mut band);
    let (a, b) = split.split_at_mut(BLOCK * positions);
    run.run_amx(0..BLOCK, a, &mut band);
    run.run_amx(BLOCK..out_c, b, &mut band);
    for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
        assert!((a - b).abs() <= 4e-7 * kk as f32 * (1.0 + b.abs()), "{i}: folded {a} f64 on rounded {b}");
    }
    let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&got), bits(&split), "a split changed the bits");
}

/// ResNet's and GoogLeNet's 7x7 stem at stride 2, AlexNet's 11x11 at stride 4 (3 * 11
/// folded channels: two chunks of pairs' worth of taps), SqueezeNet's 3x3 at stride 2
/// (9 folded channels: the products keep it on the float kernel, the tiles take it), a
/// stride-1 one with uneven padding and a dilated one.
#[test]
fn stems_fold_their_kernel_columns_into_channels() {
    check_folded(3, 64, [30, 30], [7, 7], [2, 2], 1, [3, 3, 3, 3]);
    check_folded(3, 48, [39, 39], [11, 11], [4, 4], 1, [0; 4]);
    check_folded(3, 64, [23, 23], [3, 3], [2, 2], 1, [0; 4]);
    check_folded(4, 32, [17, 21], [3, 5], [1, 1], 1, [1, 2, 0, 1]);
    check_folded(3, 16, [20, 20], [3, 3], [1, 1], 2, [2, 2, 2, 2]);
    check_folded(2, 40, [16, 300], [3, 7], [2, 3], 1, [1, 3, 1, 3]);
}

#[test]
fn amx_planes_and_their_pairs_start_on_64_bytes() {
    // Widths whose pair planes are no multiple of 16 words: the planes still start on a
    // boundary and every pair after them too (so a 1x1 convolution's tile rows are one
    // access each).
    for (hw, k, s) in [(7, 1, 1), (13, 3, 2), (28, 1, 2), (9, 3, 1)] {
        let p = k / 2;
        let pads = Padding::Explicit([0, p, p, 0, p, p]);
        let (g, _) = window_geometry([1, hw, hw], [1, k, k], [1, s, s], [1, 1, 1], pads, false).expect("a window");
        assert_eq!(amx_pair_len(&g) % 16, 0, "{hw} {k} {s}");
        // Buffers already long enough, from allocations of several sizes (so of several
        // starts modulo 64 bytes).
        let x = vec![1.0; 5 * hw * hw];
        let bufs: Vec<Vec<f32>> = (0..16).map(|i| vec![0f32; amx_planes_len(5, &g) + 16 + 3 * i]).collect();
        for (i, mut buf) in bufs.into_iter().enumerate() {
            let start = buf.as_ptr() as usize;
            let planes = amx_planes(&x, 5, &g, &mut buf);
            assert_eq!(planes.as_ptr() as usize % 64, 0, "{hw} {k} {s} buffer {i}");
            assert!(planes.as_ptr() as usize - start < 64, "in the buffer's own memory");
        }
    }
}
