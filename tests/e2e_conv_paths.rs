//! The convolution paths chosen by shape match ORT's CPU EP: 3x3 stride-1 convolutions on
//! the Winograd kernel (with their fused bias, activation and residual, split over the
//! pool with one thread's bits), strided 1x1 convolutions run on their subsampled input
//! (1-D, 2-D and 3-D, batched, with a residual), and grouped 1x1 convolutions on the GEMM.

mod common;

use common::{assert_matches_ort, conv_chain, count, fixed, rivet_run_at, same_first_output_bits, vals};
use rivet::harness::HostTensor;
use rivet::model::{Attr, ModelBuilder, FLOAT};

/// 3x3 convolutions of stride 1 (the Winograd kernel's, on AVX-512): odd and even planes,
/// one block of tile rows and several, symmetric, asymmetric and no padding, batches.
#[test]
fn winograd_convolutions_match_ort() {
    // (x shape, output channels, pads: top, left, bottom, right)
    // Each takes the kernel: at least 100 tiles, or 36 and 64 output channels.
    let cases: [([i64; 4], i64, [i64; 4]); 7] = [
        ([1, 16, 22, 22], 16, [1, 1, 1, 1]),
        ([2, 32, 13, 27], 64, [1, 1, 1, 1]),
        ([1, 24, 26, 22], 64, [0, 0, 0, 0]),
        ([1, 17, 15, 40], 33, [2, 1, 0, 2]),
        ([1, 16, 70, 30], 40, [1, 1, 1, 1]),
        ([1, 64, 7, 37], 64, [1, 2, 1, 0]),
        ([3, 16, 21, 21], 16, [3, 3, 0, 5]),
    ];
    for (xs, out_c, pads) in cases {
        let ws = [out_c, xs[1], 3, 3];
        let oh = xs[2] + pads[0] + pads[2] - 2;
        let ow = xs[3] + pads[1] + pads[3] - 2;
        let out = [xs[0], out_c, oh, ow];
        let attrs = [("pads", Attr::Ints(pads.to_vec())), ("kernel_shape", Attr::Ints(vec![3, 3]))];
        let (model, inputs) = conv_chain(&xs, &ws, &attrs, &out, 40);
        assert_matches_ort(&model, &inputs, 1e-4, 1e-4, &format!("3x3 Conv chain {xs:?} -> {out_c}, pads {pads:?}"));
    }
}

/// A Winograd convolution large enough to split over the pool by output channels (split
/// by its shape: the tasks run in turn on one thread) gives the same bits on one thread
/// as on all of them, and matches ORT. (That a split gives the unsplit bits is
/// `products::tests::split_convolutions_give_the_unsplit_bits_on_every_path`.)
#[test]
fn a_split_winograd_convolution_gives_one_threads_bits() {
    let (xs, ws, out) = ([1i64, 64, 56, 56], [128i64, 64, 3, 3], [1i64, 128, 56, 56]);
    let attrs = [("pads", Attr::Ints(vec![1, 1, 1, 1]))];
    let (model, inputs) = conv_chain(&xs, &ws, &attrs, &out, 50);
    assert_matches_ort(&model, &inputs, 1e-4, 1e-4, "3x3 Conv chain 64 -> 128 on 56x56");
    let (one, all) = (rivet_run_at(&model, &inputs, 1, 1), rivet_run_at(&model, &inputs, 0, 1));
    assert!(same_first_output_bits(&one, &all), "threads change the bits");
}

/// 1x1 convolutions of stride past 1: 1-D, 2-D (square and mixed strides, an input
/// whose last row and column no output reads) and 3-D, batched, fused with a residual.
#[test]
fn strided_pointwise_convolutions_match_ort() {
    // (x shape, output channels, strides)
    let cases: Vec<(Vec<i64>, i64, Vec<i64>)> = vec![
        (vec![2, 32, 14, 14], 48, vec![2, 2]),
        (vec![1, 16, 9, 11], 20, vec![3, 2]),
        (vec![1, 64, 28, 28], 128, vec![2, 2]),
        (vec![2, 24, 21], 40, vec![2]),
        (vec![1, 8, 5, 6, 7], 16, vec![2, 2, 2]),
        (vec![1, 16, 10, 10], 32, vec![1, 2]),
    ];
    for (xs, out_c, strides) in cases {
        let mut ws = vec![out_c, xs[1]];
        ws.extend(std::iter::repeat_n(1, xs.len() - 2));
        let mut out = vec![xs[0], out_c];
        out.extend(xs[2..].iter().zip(&strides).map(|(&n, &s)| (n - 1) / s + 1));
        let attrs = [("strides", Attr::Ints(strides.clone()))];
        let (model, inputs) = conv_chain(&xs, &ws, &attrs, &out, 60);
        assert_matches_ort(
            &model,
            &inputs,
            1e-5,
            1e-5,
            &format!("1x1 Conv chain {xs:?} -> {out_c}, strides {strides:?}"),
        );
    }
}

/// Convolutions whose kernel is their stride (ViT's patches, ConvNeXt's 4x4 stem) run as
/// pointwise convolutions of their patches' taps (`conv::patchified`): 1-D, 2-D and 3-D,
/// batched, square and not, input rows and columns past the last patch, planes for the
/// transposed product and for the plain one, fused with a residual.
#[test]
fn patch_convolutions_match_ort() {
    // (x shape, output channels, kernel = strides)
    let cases: Vec<(Vec<i64>, i64, Vec<i64>)> = vec![
        (vec![1, 3, 224, 224], 192, vec![16, 16]),
        (vec![2, 3, 64, 64], 96, vec![4, 4]),
        (vec![1, 5, 19, 37], 24, vec![3, 5]),
        (vec![2, 4, 50], 16, vec![5]),
        (vec![1, 2, 4, 6, 7], 8, vec![2, 3, 3]),
    ];
    for (xs, out_c, kernel) in cases {
        let mut ws = vec![out_c, xs[1]];
        ws.extend(&kernel);
        let mut out = vec![xs[0], out_c];
        out.extend(xs[2..].iter().zip(&kernel).map(|(&n, &k)| n / k));
        let attrs = [("kernel_shape", Attr::Ints(kernel.clone())), ("strides", Attr::Ints(kernel.clone()))];
        let (model, inputs) = conv_chain(&xs, &ws, &attrs, &out, 70);
        assert_matches_ort(&model, &inputs, 1e-4, 1e-5, &format!("Conv chain {xs:?} -> {out_c}, patches {kernel:?}"));
    }
}

/// Inputs the Winograd transforms cannot carry (an inf would become `inf - inf`, values
/// near `f32::MAX` overflow inside them) take another path: the outputs are ORT's, infs
/// where ORT has them and no NaN.
#[test]
fn winograd_shaped_convolutions_of_inf_and_huge_inputs_match_ort() {
    // Whole on one thread, and split over the pool by output channels.
    for (xs, ws) in [([1i64, 16, 20, 20], [64i64, 16, 3, 3]), ([1, 64, 56, 56], [128, 64, 3, 3])] {
        let model = ModelBuilder::new(17)
            .input("x", FLOAT, &fixed(&xs))
            .initializer("w", &ws, vec![0.01; count(&ws)])
            .node_with("Conv", "conv", &["x", "w"], &["y"], &[("pads", Attr::Ints(vec![1, 1, 1, 1]))])
            .output("y", FLOAT, None)
            .build();
        let plane = (xs[2] * xs[3]) as usize;
        let last_rows = plane - 3 * xs[3] as usize;
        for (what, at, value) in
            [("an inf", 3 * plane + 10 * 20 + 10, f32::INFINITY), ("3e38", 5 * plane + last_rows, 3e38)]
        {
            let mut data = vals(80, count(&xs));
            data[at] = value;
            data[at + plane] = value;
            let inputs = [HostTensor::f32("x", &xs, data)];
            assert_matches_ort(&model, &inputs, 1e-4, 1e-4, &format!("3x3 Conv {xs:?} of {what}"));
        }
    }
}

/// Grouped 1x1 convolutions (ShuffleNet's: a few dozen channels a group) on the GEMM, one
/// product per group with its filters packed once, fused with a residual.
#[test]
fn grouped_pointwise_convolutions_match_ort() {
    // (x shape, output channels, groups)
    for (xs, out_c, group) in [([1i64, 272, 14, 14], 68i64, 4i64), ([2, 68, 14, 14], 272, 4), ([1, 96, 7, 7], 48, 3)] {
        let ws = [out_c, xs[1] / group, 1, 1];
        let out = [xs[0], out_c, xs[2], xs[3]];
        let attrs = [("group", Attr::Int(group))];
        let (model, inputs) = conv_chain(&xs, &ws, &attrs, &out, 90);
        assert_matches_ort(
            &model,
            &inputs,
            1e-5,
            1e-5,
            &format!("grouped 1x1 Conv chain {xs:?} -> {out_c}, {group} groups"),
        );
    }
}

/// 1x1 convolutions of small planes (7x7, 14x14, a 3x5 plane, a 16x16 one at the limit,
/// batched, 1-D), run as the transposed product `Y^T = X^T W^T`, fused with their bias,
/// Relu, residual Add and Clip; one split over the pool by output channels gives one
/// thread's bits.
#[test]
fn pointwise_convolutions_of_small_planes_match_ort() {
    // (x shape, output channels)
    let cases: Vec<(Vec<i64>, i64)> = vec![
        (vec![1, 160, 7, 7], 960),
        (vec![2, 96, 14, 14], 24),
        (vec![1, 64, 3, 5], 40),
        (vec![1, 48, 16, 16], 100),
        (vec![3, 33, 20], 17),
    ];
    for (xs, out_c) in cases {
        let mut ws = vec![out_c, xs[1]];
        ws.extend(std::iter::repeat_n(1, xs.len() - 2));
        let mut out = xs.clone();
        out[1] = out_c;
        let (model, inputs) = conv_chain(&xs, &ws, &[], &out, 100);
        assert_matches_ort(&model, &inputs, 1e-5, 1e-5, &format!("1x1 Conv chain {xs:?} -> {out_c}"));
        let (one, all) = (rivet_run_at(&model, &inputs, 1, 1), rivet_run_at(&model, &inputs, 0, 1));
        assert!(same_first_output_bits(&one, &all), "threads change the bits of {xs:?} -> {out_c}");
    }
}

/// Depthwise 3x3 and 5x5 convolutions of small planes (the channels-last kernel on
/// AVX-512, whole blocks of 16 channels): strides 1 and 2, "same" and asymmetric padding,
/// dilation, batches whose split crosses an image, channel counts that are not whole
/// blocks (the row paths), fused with their bias, Relu, residual Add and Clip.
#[test]
fn depthwise_convolutions_of_small_planes_match_ort() {
    // (x shape, kernel, stride, dilation, pads: top, left, bottom, right)
    type Case = ([i64; 4], i64, i64, i64, [i64; 4]);
    let cases: [Case; 8] = [
        ([1, 672, 14, 14], 5, 1, 1, [2, 2, 2, 2]),
        ([1, 1152, 7, 7], 5, 1, 1, [2, 2, 2, 2]),
        ([1, 672, 14, 14], 5, 2, 1, [2, 2, 2, 2]),
        ([2, 240, 28, 28], 3, 2, 1, [1, 1, 1, 1]),
        ([3, 48, 9, 11], 3, 1, 1, [0, 1, 2, 0]),
        ([1, 32, 12, 12], 3, 1, 2, [2, 2, 2, 2]),
        ([1, 40, 7, 7], 3, 1, 1, [1, 1, 1, 1]),
        ([1, 64, 5, 5], 5, 2, 1, [2, 2, 2, 2]),
    ];
    for (xs, k, s, d, pads) in cases {
        let c = xs[1];
        let ws = [c, 1, k, k];
        let span = d * (k - 1) + 1;
        let oh = (xs[2] + pads[0] + pads[2] - span) / s + 1;
        let ow = xs[3] + pads[1] + pads[3] - span;
        let out = [xs[0], c, oh, ow / s + 1];
        let attrs = [
            ("group", Attr::Int(c)),
            ("pads", Attr::Ints(pads.to_vec())),
            ("strides", Attr::Ints(vec![s, s])),
            ("dilations", Attr::Ints(vec![d, d])),
        ];
        let (model, inputs) = conv_chain(&xs, &ws, &attrs, &out, 110);
        let what = format!("depthwise {k}x{k} s{s} d{d} Conv chain {xs:?} pads {pads:?}");
        assert_matches_ort(&model, &inputs, 1e-5, 1e-5, &what);
        let (one, all) = (rivet_run_at(&model, &inputs, 1, 1), rivet_run_at(&model, &inputs, 0, 1));
        assert!(same_first_output_bits(&one, &all), "threads change the bits of {what}");
    }
}

/// SqueezeNet's fire module and DenseNet's growing block: 1x1 and 3x3 convolutions
/// joined by a Concat, one more convolution (of its Sigmoid, as DenseNet's of its
/// normalised features) and that joined again (the first part at an offset), pooled. With a batch
/// of one the Concats are views (each convolution writes its part of the outermost
/// output in place); with a batch of two they copy. A part is read again after the
/// outer join (a GlobalAveragePool of the first branch) and the joined output through a
/// Flatten view: all match ORT, and the threads do not change the bits.
#[test]
fn concats_written_in_place_match_ort() {
    for n in [1i64, 2] {
        let x = [n, 8, 10, 10];
        let w = |o: i64, i: i64, k: i64| vals((o * 31 + i * 7 + k) as u64, (o * i * k * k) as usize);
        let pad1 = [("pads", Attr::Ints(vec![1, 1, 1, 1]))];
        let model = ModelBuilder::new(17)
            .input("x", FLOAT, &fixed(&x))
            .initializer("ws", &[4, 8, 1, 1], w(4, 8, 1))
            .initializer("w1", &[6, 4, 1, 1], w(6, 4, 1))
            .initializer("w3", &[6, 4, 3, 3], w(6, 4, 3))
            .initializer("wg", &[4, 12, 3, 3], w(4, 12, 3))
            .initializer("bg", &[4], vals(9, 4))
            .node("Conv", "squeeze", &["x", "ws"], &["s0"])
            .node("Relu", "squeeze_relu", &["s0"], &["s"])
            .node("Conv", "expand1", &["s", "w1"], &["a0"])
            .node("Relu", "expand1_relu", &["a0"], &["a"])
            .node_with("Conv", "expand3", &["s", "w3"], &["b0"], &pad1)
            .node("Relu", "expand3_relu", &["b0"], &["b"])
            .node_with("Concat", "fire", &["a", "b"], &["c"], &[("axis", Attr::Int(1))])
            .node("Sigmoid", "grow_in", &["c"], &["cs"])
            .node_with("Conv", "grow", &["cs", "wg", "bg"], &["e"], &pad1)
            .node_with("Concat", "block", &["e", "c"], &["d"], &[("axis", Attr::Int(-3))])
            .node_with(
                "MaxPool",
                "pool",
                &["d"],
                &["p"],
                &[("kernel_shape", Attr::Ints(vec![2, 2])), ("strides", Attr::Ints(vec![2, 2]))],
            )
            .node("GlobalAveragePool", "gap", &["a"], &["g"])
            .node("Flatten", "flat", &["d"], &["f0"])
            .node("Relu", "flat_relu", &["f0"], &["f"])
            .output("p", FLOAT, None)
            .output("g", FLOAT, None)
            .output("f", FLOAT, None)
            .build();
        let inputs = vec![HostTensor::f32("x", &x, vals(5, count(&x)))];
        let what = format!("fire and growing block, batch {n}");
        assert_matches_ort(&model, &inputs, 1e-5, 1e-5, &what);
        let (one, all) = (rivet_run_at(&model, &inputs, 1, 2), rivet_run_at(&model, &inputs, 0, 2));
        assert_eq!(one, all, "threads change the bits of {what}");
    }
}
