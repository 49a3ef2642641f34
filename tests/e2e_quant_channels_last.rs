//! QLinearConv on the channels-last product (`qgemm::nhwc`) and the values the plan keeps
//! channels last between quantized convolutions and additions
//! (`passes::channels_last_int8`), against ORT's CPU EP, every output compared exactly.

mod common;

use common::quant::{constant_node, dims, ints, len, matches_ort_if_it_runs, tensor, One};
use common::{assert_matches_ort, ort_session};
use rivet::harness::{self, HostTensor};
use rivet::model::{Attr, ModelBuilder, FLOAT, INT32, INT8, UINT8};

/// QLinearConv -> QLinearConv -> com.microsoft QLinearAdd (of both convolutions' outputs)
/// -> QLinearConv, 64 channels of 3x3 on 10x10, a batch of 2: the values between them go
/// channels last (`passes::channels_last_int8`). With `add_out` the addition's output is
/// the graph's (channels first: both its inputs relaid), else the last convolution's. The
/// addition's scales are equal, so that ORT's kernel and the three ops' arithmetic agree.
fn channels_last_chain(add_out: bool) -> (Vec<u8>, Vec<HostTensor>) {
    channels_last_chain_to(add_out, (3, 1), false)
}

/// [`channels_last_chain`] with c3's window `k3` x `k3` at stride `s3` (padded by `k3 / 2`),
/// and with `gap` a com.microsoft QLinearGlobalAveragePool of c3's output as the graph's.
fn channels_last_chain_to(add_out: bool, (k3, s3): (i64, i64), gap: bool) -> (Vec<u8>, Vec<HostTensor>) {
    let xs = [2i64, 64, 10, 10];
    let ws = [64i64, 64, 3, 3];
    let mut b = ModelBuilder::new(13).domain_opset("com.microsoft", 1).input("x", UINT8, &dims(&xs));
    b = constant_node(b, "s_act", FLOAT, &[], &[0.05]);
    b = constant_node(b, "z_act", UINT8, &[], &[100.0]);
    for (i, name) in ["c1", "c2", "c3"].into_iter().enumerate() {
        let ws = if name == "c3" { [64, 64, k3, k3] } else { ws };
        b = constant_node(b, &format!("{name}_w"), INT8, &ws, &ints(INT8, 60 + i as u64, len(&ws)));
        let sw: Vec<f64> = (0..64).map(|k| 0.0005 + 0.00001 * k as f64).collect();
        b = constant_node(b, &format!("{name}_sw"), FLOAT, &[64], &sw);
        b = constant_node(b, &format!("{name}_zw"), INT8, &[64], &[0.0; 64]);
        let bias: Vec<f64> = (0..64).map(|k| (k * 37 % 200) as f64 - 100.0).collect();
        b = constant_node(b, &format!("{name}_b"), INT32, &[64], &bias);
    }
    let conv = |b: ModelBuilder, name: &str, x: &str, y: &str| {
        let ins = [
            x,
            "s_act",
            "z_act",
            &format!("{name}_w"),
            &format!("{name}_sw"),
            &format!("{name}_zw"),
            "s_act",
            "z_act",
            &format!("{name}_b"),
        ];
        let (k, stride) = if name == "c3" { (k3, s3) } else { (3, 1) };
        let attrs = [("pads", Attr::Ints(vec![k / 2; 4])), ("strides", Attr::Ints(vec![stride; 2]))];
        b.node_with("QLinearConv", name, &ins, &[y], &attrs)
    };
    b = conv(b, "c1", "x", "a");
    b = conv(b, "c2", "a", "bb");
    b = add_of(b, "a", "bb", "s");
    if add_out {
        b = b.output("s", UINT8, None);
    } else {
        b = conv(b, "c3", "s", "y");
        if gap {
            let ins = ["y", "s_act", "z_act", "s_act", "z_act"];
            b = b.node_in_domain_with("com.microsoft", "QLinearGlobalAveragePool", "gap", &ins, &["g"], &[]);
            b = b.output("g", UINT8, None);
        } else {
            b = b.output("y", UINT8, None);
        }
    }
    (b.build(), vec![tensor("x", UINT8, &xs, ints(UINT8, 59, len(&xs)))])
}

/// com.microsoft QLinearAdd `y = a + b`, every scale `s_act` and zero point `z_act`.
fn add_of(b: ModelBuilder, a: &str, bb: &str, y: &str) -> ModelBuilder {
    let ins = [a, "s_act", "z_act", bb, "s_act", "z_act", "s_act", "z_act"];
    b.node_in_domain_with("com.microsoft", "QLinearAdd", "add", &ins, &[y], &[])
}

#[test]
fn quantized_convolutions_and_additions_between_them_store_channels_last_as_ort_computes() {
    for add_out in [false, true] {
        let (model, inputs) = channels_last_chain(add_out);
        for threads in [1, 2] {
            let want = common::rivet_run_at(&model, &inputs, threads, 2);
            let what =
                format!("channels-last chain (the addition's output the graph's: {add_out}) at {threads} threads");
            assert_matches_ort(&model, &inputs, 0.0, 0.0, &what);
            let again = common::rivet_run_at(&model, &inputs, threads, 1);
            assert!(common::same_first_output_bits(&want, &again), "{what}: Runs differ");
        }
    }
}

/// The chain ending in a 1x1 convolution of stride 2 (ResNet's downsampling), which takes
/// the addition's channels-last output at a depth of 64 (`channels_last_native`).
#[test]
fn a_strided_pointwise_convolution_reads_a_channels_last_addition_as_ort_computes() {
    let (model, inputs) = channels_last_chain_to(false, (1, 2), false);
    assert_matches_ort(&model, &inputs, 0.0, 0.0, "chain into a 1x1 of stride 2");
}

/// The chain ending in a QLinearGlobalAveragePool of the last convolution's output, which
/// it reads channels last (ResNet-18's head).
#[test]
fn a_global_average_of_channels_last_data_computes_as_ort() {
    let (model, inputs) = channels_last_chain_to(false, (3, 1), true);
    assert_matches_ort(&model, &inputs, 0.0, 0.0, "chain into QLinearGlobalAveragePool");
}

/// An 8-bit MaxPool between channels-last neighbours: `x` (or, with `conv_first`, a 3x3
/// QLinearConv of it) -> MaxPool 3x3 stride 2 -> a 3x3 QLinearConv and a QLinearAdd of
/// the pool's and the convolution's outputs (the graph's output). The pool's output goes
/// channels last (ResNet-18's first stage), and with `conv_first` its input too.
fn pool_chain(conv_first: bool) -> (Vec<u8>, Vec<HostTensor>) {
    let xs = [2i64, 64, 12, 12];
    let ws = [64i64, 64, 3, 3];
    let mut b = ModelBuilder::new(13).domain_opset("com.microsoft", 1).input("x", UINT8, &dims(&xs));
    b = constant_node(b, "s_act", FLOAT, &[], &[0.05]);
    b = constant_node(b, "z_act", UINT8, &[], &[100.0]);
    b = constant_node(b, "sw", FLOAT, &[], &[0.0007]);
    b = constant_node(b, "zw", INT8, &[], &[0.0]);
    let conv = |b: ModelBuilder, name: &str, x: &str, y: &str, seed: u64| {
        let b = constant_node(b, &format!("{name}_w"), INT8, &ws, &ints(INT8, seed, len(&ws)));
        let ins = [x, "s_act", "z_act", &format!("{name}_w"), "sw", "zw", "s_act", "z_act"];
        b.node_with("QLinearConv", name, &ins, &[y], &[("pads", Attr::Ints(vec![1; 4]))])
    };
    let pooled = if conv_first { "a" } else { "x" };
    if conv_first {
        b = conv(b, "c1", "x", "a", 90);
    }
    let attrs = [
        ("kernel_shape", Attr::Ints(vec![3, 3])),
        ("strides", Attr::Ints(vec![2, 2])),
        ("pads", Attr::Ints(vec![1; 4])),
    ];
    b = b.node_with("MaxPool", "pool", &[pooled], &["p"], &attrs);
    b = conv(b, "c2", "p", "bb", 91);
    b = add_of(b, "p", "bb", "s");
    (b.output("s", UINT8, None).build(), vec![tensor("x", UINT8, &xs, ints(UINT8, 89, len(&xs)))])
}

#[test]
fn a_channels_last_max_pool_computes_as_ort() {
    for conv_first in [false, true] {
        let (model, inputs) = pool_chain(conv_first);
        assert_matches_ort(
            &model,
            &inputs,
            0.0,
            0.0,
            &format!("MaxPool between convolutions (a conv first: {conv_first})"),
        );
    }
}

/// QLinearConv shaped for the channels-last product read through its taps (a uint8 input
/// of 64 channels, 144 positions, 128 output channels) but with weights whose zero points
/// are not 0: they need the rows' sums, so the product runs on its im2col (found by
/// review: nothing checked that these go there).
#[test]
fn channels_last_convolutions_with_weight_zero_points_match_ort() {
    let (xs, ws) = ([1i64, 64, 12, 12], [128i64, 64, 3, 3]);
    let mut compared = 0;
    for (wt, per_channel) in [(UINT8, false), (UINT8, true), (INT8, false), (INT8, true)] {
        let n = if per_channel { 128 } else { 1 };
        let zw: Vec<f64> =
            (0..n).map(|k| if wt == UINT8 { 120.0 + (k % 9) as f64 } else { (k % 7) as f64 - 3.0 }).collect();
        let zw = if wt == INT8 && !per_channel { vec![5.0] } else { zw };
        let sw: Vec<f64> = (0..n).map(|k| 0.0005 + 0.00001 * k as f64).collect();
        let sshape: Vec<i64> = if per_channel { vec![128] } else { vec![] };
        let model = One::new(13)
            .input("x", UINT8, &dims(&xs))
            .constant("sx", FLOAT, &[], &[0.05])
            .constant("zx", UINT8, &[], &[100.0])
            .constant("w", wt, &ws, &ints(wt, 71, len(&ws)))
            .constant("sw", FLOAT, &sshape, &sw)
            .constant("zw", wt, &sshape, &zw)
            .constant("sy", FLOAT, &[], &[0.1])
            .constant("zy", UINT8, &[], &[110.0])
            .node("QLinearConv", &[("pads", Attr::Ints(vec![1; 4]))], &[("y", UINT8)]);
        let inputs = [tensor("x", UINT8, &xs, ints(UINT8, 72, len(&xs)))];
        let what = format!("QLinearConv {wt} weights, zero points {:?}..", &zw[..zw.len().min(3)]);
        compared += usize::from(matches_ort_if_it_runs(&model, &inputs, &what));
    }
    assert!(compared >= 2, "only {compared} cases ran on ORT");
}

/// One session whose weights are a graph input, run with other weights on each Run: the
/// channels-last product packs them again every time (found by review: every test ran
/// each session with the same weights).
#[test]
fn channels_last_convolutions_repack_weights_given_at_each_run() {
    let (xs, ws) = ([1i64, 64, 12, 12], [128i64, 64, 3, 3]);
    let model = One::new(13)
        .input("x", UINT8, &dims(&xs))
        .constant("sx", FLOAT, &[], &[0.05])
        .constant("zx", UINT8, &[], &[100.0])
        .input("w", INT8, &dims(&ws))
        .constant("sw", FLOAT, &[], &[0.001])
        .constant("zw", INT8, &[], &[0.0])
        .constant("sy", FLOAT, &[], &[0.1])
        .constant("zy", UINT8, &[], &[110.0])
        .node("QLinearConv", &[("pads", Attr::Ints(vec![1; 4]))], &[("y", UINT8)]);
    let mut rivet = common::rivet_session(&model);
    let mut ort = ort_session(&model);
    for seed in [80, 81, 82] {
        let inputs =
            [tensor("x", UINT8, &xs, ints(UINT8, 79, len(&xs))), tensor("w", INT8, &ws, ints(INT8, seed, len(&ws)))];
        let got = harness::run(&mut rivet, &inputs).expect("Rivet runs");
        let want = harness::run(&mut ort, &inputs).expect("ORT runs");
        harness::compare(&got, &want, 0.0, 0.0).unwrap_or_else(|e| panic!("weights of seed {seed}: {e}"));
    }
}
