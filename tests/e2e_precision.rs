//! The provider option `precision`: `fp32` (the default) and `bf16`, where MatMul and Gemm
//! by a constant B multiply bfloat16 operands with float32 sums on AVX-512 BF16.

mod common;

use common::{env, ort_session, rivet_run_at, strict, vals};
use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT};

fn with_precision(value: &str) -> SessionOpts {
    SessionOpts { provider_options: vec![("Rivet.precision".into(), value.into())], ..strict() }
}

/// AMX tiles, as the plugin finds them (CPUID leaf 7: AMX-BF16 and AMX-TILE).
fn has_amx() -> bool {
    has_bf16() && std::env::var("RIVET_AMX").map_or(true, |v| v != "off" && v != "0") && {
        let leaf7 = std::arch::x86_64::__cpuid_count(7, 0);
        leaf7.edx & (1 << 22) != 0 && leaf7.edx & (1 << 24) != 0
    }
}

fn has_bf16() -> bool {
    std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bf16")
}

/// A projection with a bias and Gelu (a MatMul by a constant, 64 x 256 x 384, its
/// epilogue fused), then a Gemm by a constant stored transposed (64 x 384 x 40, with C).
fn projections() -> (Vec<u8>, Vec<HostTensor>) {
    let (m, k, n, n2) = (64i64, 256i64, 384i64, 40i64);
    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &common::fixed(&[m, k]))
        .initializer("w", &[k, n], vals(1, (k * n) as usize))
        .initializer("b", &[n], vals(2, n as usize))
        .initializer("w2", &[n2, n], vals(3, (n2 * n) as usize))
        .initializer("c2", &[n2], vals(4, n2 as usize))
        .node("MatMul", "proj", &["x", "w"], &["h0"])
        .node("Add", "bias", &["h0", "b"], &["h1"])
        .node("Gelu", "act", &["h1"], &["h"])
        .node_with("Gemm", "head", &["h", "w2", "c2"], &["y"], &[("transB", Attr::Int(1))])
        .output("y", FLOAT, None)
        .build();
    (model, vec![HostTensor::f32("x", &[m, k], vals(5, (m * k) as usize))])
}

#[test]
fn a_bad_precision_fails_session_creation_naming_the_option_and_its_values() {
    let (model, _) = projections();
    let err = harness::session(env(), &model, Arm::Rivet, &with_precision("fp16")).expect_err("fp16 is no value");
    assert!(err.contains("precision") && err.contains("'fp16'") && err.contains("fp32, bf16"), "{err}");
}

#[test]
fn fp32_given_explicitly_is_the_default_bit_for_bit() {
    let (model, inputs) = projections();
    let default = rivet_run_at(&model, &inputs, 1, 2);
    let mut s = harness::session(env(), &model, Arm::Rivet, &with_precision("fp32")).expect("session");
    let fp32 = harness::run(&mut s, &inputs).expect("runs");
    assert!(common::same_first_output_bits(&default, &fp32));
}

#[test]
fn bf16_products_are_float_results_to_bfloat16_accuracy_the_same_at_any_thread_count() {
    let (model, inputs) = projections();
    let want = harness::run(&mut ort_session(&model), &inputs).expect("ORT runs");
    let run = |threads: usize| {
        let opts = SessionOpts { intra_threads: Some(threads), ..with_precision("bf16") };
        let mut s = harness::session(env(), &model, Arm::Rivet, &opts).expect("bf16 session");
        (0..3).map(|_| harness::run(&mut s, &inputs).expect("runs")).last().expect("a Run")
    };
    let one = run(1);
    let err = rivet::real_models::relative_error(&one, &want).expect("same shapes");
    if !has_bf16() {
        // The option then changes nothing (and says so in ORT's log).
        assert!(common::same_first_output_bits(&one, &rivet_run_at(&model, &inputs, 1, 1)));
        eprintln!("no AVX-512 BF16 here: bf16 ran as fp32");
        return;
    }
    // Operands rounded to 8 significant bits: an error of about 2^-9 per term, not
    // float32's 2^-24 (so the products did run in bfloat16), and far below a wrong
    // product's, which is off by about the RMS.
    assert!(err > 1e-4 && err < 2e-2, "bf16 error {err:e} of the RMS");
    assert!(common::same_first_output_bits(&one, &run(2)), "two threads split the products with the same bits");
}

#[test]
fn a_product_of_depth_zero_runs_as_in_fp32() {
    // Found by review: packing a [0, 64] weight as bfloat16 panicked inside Compute.
    let model = ModelBuilder::new(21)
        .input("a", FLOAT, &common::fixed(&[4, 0]))
        .initializer("w", &[0, 64], vec![])
        .node("MatMul", "empty", &["a", "w"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let inputs = [HostTensor::f32("a", &[4, 0], vec![])];
    let mut s = harness::session(env(), &model, Arm::Rivet, &with_precision("bf16")).expect("session");
    let out = harness::run(&mut s, &inputs).expect("runs");
    assert_eq!(out[0].shape, vec![4, 64]);
    assert!(out[0].data.iter().all(|&v| v == 0.0));
}

/// A convolution by constant filters (bias and Relu fused): `k`x`k` at stride `s`,
/// `in_c` -> `out_c` channels on `hw` x `hw`, padding `k / 2`.
fn conv(in_c: i64, out_c: i64, hw: i64, k: i64, s: i64) -> (Vec<u8>, Vec<HostTensor>) {
    let pads = Attr::Ints(vec![k / 2; 4]);
    let strides = Attr::Ints(vec![s; 2]);
    let model = ModelBuilder::new(17)
        .input("x", FLOAT, &common::fixed(&[1, in_c, hw, hw]))
        .initializer("w", &[out_c, in_c, k, k], vals(6, (out_c * in_c * k * k) as usize))
        .initializer("b", &[out_c], vals(7, out_c as usize))
        .node_with("Conv", "conv", &["x", "w", "b"], &["h"], &[("pads", pads), ("strides", strides)])
        .node("Relu", "act", &["h"], &["y"])
        .output("y", FLOAT, None)
        .build();
    (model, vec![HostTensor::f32("x", &[1, in_c, hw, hw], vals(8, (in_c * hw * hw) as usize))])
}

/// Each of the convolutions bf16 takes, on its kernel: a 3x3 on the direct kernel, a 1x1
/// of a small plane on the transposed GEMM, a deep 1x1 of a large plane on the GEMM by
/// bfloat16 filters (on a CPU with AMX tiles, all three and the 3x3 and 5x5 ones at
/// stride 2 on the AMX direct kernel); then a 7x7 stem (3 input channels), bfloat16 on
/// AMX tiles (its kernel's columns folded into its channels) and float32 elsewhere, and a
/// 3x3 stem, which stays float32 everywhere.
#[test]
fn bf16_convolutions_are_float_results_to_bfloat16_accuracy_the_same_at_any_thread_count() {
    if !has_bf16() {
        return;
    }
    for (in_c, out_c, hw, k, s, bf16) in [
        (32, 64, 20, 3, 1, true),
        (96, 64, 14, 1, 1, true),
        (128, 64, 24, 1, 1, true),
        (64, 96, 29, 3, 2, true),
        (48, 40, 16, 5, 2, true),
        (3, 32, 30, 7, 2, has_amx()),
        (3, 32, 30, 3, 1, false),
    ] {
        let (model, inputs) = conv(in_c, out_c, hw, k, s);
        let want = harness::run(&mut ort_session(&model), &inputs).expect("ORT runs");
        let run = |threads: usize| {
            let opts = SessionOpts { intra_threads: Some(threads), ..with_precision("bf16") };
            let mut s = harness::session(env(), &model, Arm::Rivet, &opts).expect("bf16 session");
            (0..3).map(|_| harness::run(&mut s, &inputs).expect("runs")).last().expect("a Run")
        };
        let one = run(1);
        let err = rivet::real_models::relative_error(&one, &want).expect("same shapes");
        let case = format!("{in_c}->{out_c} {k}x{k} s{s} on {hw}x{hw}");
        if bf16 {
            assert!(err > 1e-4 && err < 2e-2, "{case}: bf16 error {err:e} of the RMS");
        } else {
            assert!(err < 1e-5, "{case}: error {err:e} of the RMS: a shallow convolution stays float32");
        }
        assert!(common::same_first_output_bits(&one, &run(2)), "{case}: two threads, other bits");
    }
}

/// Found by review: a stem's kernel follows its input's width (the float wide tiles from
/// 16 outputs a row, another kernel below: the float narrow tiles, or on AMX the folded
/// bf16 tiles), and its filters, packed on the first Run for one, were read as the
/// other's layout on the next (a panic, or inf). Each Run now packs for its own kernel:
/// every size in every order within bfloat16's error.
#[test]
fn a_convolution_that_changes_kernels_with_its_input_size_packs_for_each() {
    if !has_bf16() {
        return;
    }
    let dims = vec![Dim::from(1), Dim::from(3), Dim::from("H"), Dim::from("W")];
    let model = ModelBuilder::new(17)
        .input("x", FLOAT, &dims)
        .initializer("w", &[32, 3, 3, 3], vals(6, 32 * 27))
        .node_with(
            "Conv",
            "stem",
            &["x", "w"],
            &["y"],
            &[("pads", Attr::Ints(vec![1; 4])), ("strides", Attr::Ints(vec![2, 2]))],
        )
        .output("y", FLOAT, None)
        .build();
    let mut ort = ort_session(&model);
    for sizes in [[24, 64, 24], [64, 24, 64]] {
        let mut s = harness::session(env(), &model, Arm::Rivet, &with_precision("bf16")).expect("bf16 session");
        for hw in sizes {
            let inputs = [HostTensor::f32("x", &[1, 3, hw, hw], vals(8, (3 * hw * hw) as usize))];
            let want = harness::run(&mut ort, &inputs).expect("ORT runs");
            let got = harness::run(&mut s, &inputs).unwrap_or_else(|e| panic!("{sizes:?} at {hw}: {e}"));
            let err = rivet::real_models::relative_error(&got, &want).expect("same shapes");
            assert!(err < 2e-2, "{sizes:?} at {hw}: error {err:e} of the RMS");
        }
    }
}
