//! DFT and STFT against ORT's CPU EP: real and complex signals, every signal axis,
//! dft_length padding and truncating, inverse, one-sided, opset 17's axis attribute and
//! opset 20's axis input, power-of-two and other lengths, float32 and float64; STFT with
//! and without a window and a frame length, one- and two-sided. Bad lengths at Run are
//! errors naming the node, and the session keeps working.

mod common;

use common::{assert_matches_ort, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, DOUBLE, FLOAT, INT64};

fn dims(s: &[i64]) -> Vec<Dim> {
    s.iter().map(|&d| d.into()).collect()
}

fn signal(t: i32, s: &[i64], seed: u64) -> HostTensor {
    let e = if t == FLOAT { E::Float32 } else { E::Float64 };
    HostTensor::typed("x", e, s, harness::values(seed, s.iter().product::<i64>() as usize, -1.0, 1.0))
}

/// A DFT node: opset 17 (axis attribute) or 20 (axis input), dft_length as a constant.
fn dft(opset: i64, t: i32, s: &[i64], axis: i64, length: Option<i64>, inverse: bool, onesided: bool) -> Vec<u8> {
    let mut m = ModelBuilder::new(opset).input("x", t, &dims(s));
    let mut ins = vec!["x"];
    if let Some(n) = length {
        m = m.initializer_i64("n", &[], vec![n]);
        ins.push("n");
    }
    let mut attrs = vec![("inverse", Attr::Int(inverse as i64)), ("onesided", Attr::Int(onesided as i64))];
    if opset < 20 {
        attrs.push(("axis", Attr::Int(axis)));
    } else {
        if length.is_none() {
            ins.push("");
        }
        m = m.initializer_i64("a", &[], vec![axis]);
        ins.push("a");
    }
    m.node_with("DFT", "dft", &ins, &["y"], &attrs).output("y", t, None).build()
}

#[test]
fn dft_matches_ort() {
    let mut k = 0;
    for t in [FLOAT, DOUBLE] {
        for (s, axis) in
            [(&[2i64, 16, 1][..], 1i64), (&[2, 12, 2][..], 1), (&[3, 5, 8, 2][..], 2), (&[3, 5, 8, 1][..], -3)]
        {
            for length in [None, Some(7), Some(20), Some(16)] {
                for (inverse, onesided) in [(false, false), (false, true), (true, false)] {
                    // One-sided needs a real signal (ONNX's shape inference refuses others).
                    if onesided && s[s.len() - 1] == 2 {
                        continue;
                    }
                    for opset in [17, 20] {
                        let model = dft(opset, t, s, axis, length, inverse, onesided);
                        let what = format!(
                            "DFT case {k}: opset {opset} {s:?} axis {axis} n {length:?} inverse {inverse} onesided {onesided}"
                        );
                        assert_matches_ort(&model, &[signal(t, s, 3)], 1e-4, 1e-5, &what);
                        k += 1;
                    }
                }
            }
        }
    }
    // A whisper-sized frame (400 points: not a power of two) and a long power of two.
    for n in [400, 1024] {
        let s = [1, n, 1];
        let what = format!("DFT of {n}");
        assert_matches_ort(&dft(17, DOUBLE, &s, 1, None, false, true), &[signal(DOUBLE, &s, 4)], 1e-9, 1e-9, &what);
        float32_against_ort_float64(
            &dft(17, FLOAT, &s, 1, None, false, true),
            &dft(17, DOUBLE, &s, 1, None, false, true),
            &[signal(FLOAT, &s, 4)],
            &[signal(DOUBLE, &s, 4)],
            &what,
        );
    }
}

/// Rivet's float32 result against ORT's float64 one: ORT's float32 DFT of a length that
/// is not a power of two sums the definition in float32 (400 points: errors of 8e-4 in
/// values of 10), where Rivet's transforms run in float64 (9e-7).
fn float32_against_ort_float64(
    f32_model: &[u8],
    f64_model: &[u8],
    f32_in: &[HostTensor],
    f64_in: &[HostTensor],
    what: &str,
) {
    let mut rivet = harness::session(common::env(), f32_model, Arm::Rivet, &strict()).expect("Rivet session");
    let mut ort = common::ort_session(f64_model);
    let got = harness::run(&mut rivet, f32_in).expect("Rivet run");
    let want = harness::run(&mut ort, f64_in).expect("ORT run");
    harness::compare(&got, &want, 1e-5, 2e-5).unwrap_or_else(|e| panic!("{what} float32 against float64: {e}"));
}

/// An STFT node: frame_step, and optionally a Hann-like window and a frame length.
fn stft(
    t: i32,
    s: &[i64],
    step: i64,
    window: Option<i64>,
    length: Option<i64>,
    onesided: bool,
) -> (Vec<u8>, Vec<HostTensor>) {
    let mut m = ModelBuilder::new(17).input("x", t, &dims(s)).initializer_i64("step", &[], vec![step]);
    let mut ins = vec!["x", "step"];
    let mut inputs = vec![signal(t, s, 5)];
    match window {
        Some(w) => {
            m = m.input("w", t, &dims(&[w]));
            let e = if t == FLOAT { E::Float32 } else { E::Float64 };
            let vals = (0..w).map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / w as f64).cos()).collect();
            inputs.push(HostTensor::typed("w", e, &[w], vals));
            ins.push("w");
        }
        None if length.is_some() => ins.push(""),
        None => {}
    }
    if let Some(n) = length {
        m = m.initializer_i64("len", &[], vec![n]);
        ins.push("len");
    }
    let model = m
        .node_with("STFT", "stft", &ins, &["y"], &[("onesided", Attr::Int(onesided as i64))])
        .output("y", t, None)
        .build();
    (model, inputs)
}

#[test]
fn stft_matches_ort() {
    // (Neither a window nor a frame length, one frame of the whole signal, is the ONNX
    // reference's conformance case; ORT 1.32 fails on it.)
    // Signal shape, frame step, window length, frame length, one-sided.
    type Case = (&'static [i64], i64, Option<i64>, Option<i64>, bool);
    let cases: [Case; 6] = [
        (&[1, 128, 1], 8, None, Some(16), true),
        (&[2, 128, 1], 8, Some(16), None, true),
        (&[2, 130, 1], 7, Some(16), Some(16), false),
        (&[1, 100, 2], 10, Some(20), None, false),
        (&[1, 1600, 1], 160, Some(400), Some(400), true),
        (&[1, 96, 1], 5, Some(24), None, true),
    ];
    for (k, &(s, step, window, length, onesided)) in cases.iter().enumerate() {
        let what = format!("STFT case {k}");
        let (model, inputs) = stft(DOUBLE, s, step, window, length, onesided);
        assert_matches_ort(&model, &inputs, 1e-9, 1e-9, &what);
        let (f32_model, f32_inputs) = stft(FLOAT, s, step, window, length, onesided);
        if window.is_some_and(|w| !(w as u64).is_power_of_two()) {
            float32_against_ort_float64(&f32_model, &model, &f32_inputs, &inputs, &what);
        } else {
            assert_matches_ort(&f32_model, &f32_inputs, 1e-4, 1e-4, &what);
        }
    }
}

/// A frame step of 0, a frame longer than the signal and a dft_length of 0, all fed at
/// Run: errors naming the node; the session then runs good input.
#[test]
fn bad_lengths_at_run_are_errors_naming_the_node() {
    let model = ModelBuilder::new(17)
        .input("x", FLOAT, &dims(&[1, 64, 1]))
        .input("step", INT64, &[])
        .input("len", INT64, &[])
        .node_with("STFT", "stft", &["x", "step", "", "len"], &["y"], &[])
        .output("y", FLOAT, None)
        .build();
    let mut s = harness::session(common::env(), &model, Arm::Rivet, &strict()).expect("Rivet session");
    let run = |s: &mut _, step: f64, len: f64| {
        let ins = [
            signal(FLOAT, &[1, 64, 1], 6),
            HostTensor::typed("step", E::Int64, &[], vec![step]),
            HostTensor::typed("len", E::Int64, &[], vec![len]),
        ];
        harness::run(s, &ins)
    };
    for (step, len, why) in [(0.0, 16.0, "frame_step 0"), (4.0, 65.0, "frame length 65")] {
        let err = run(&mut s, step, len).expect_err(why);
        assert!(err.contains("node 'stft' (STFT)") && err.contains(why), "{err}");
    }
    let good = run(&mut s, 8.0, 16.0).expect("good input after bad");
    assert_eq!(good[0].shape, vec![1, 7, 9, 2]);
    let model = ModelBuilder::new(17)
        .input("x", FLOAT, &dims(&[2, 8, 1]))
        .input("n", INT64, &[])
        .node("DFT", "dft", &["x", "n"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let mut s = harness::session(common::env(), &model, Arm::Rivet, &strict()).expect("Rivet session");
    let ins = [signal(FLOAT, &[2, 8, 1], 7), HostTensor::typed("n", E::Int64, &[], vec![0.0])];
    let err = harness::run(&mut s, &ins).expect_err("dft_length 0");
    assert!(err.contains("node 'dft' (DFT)") && err.contains("dft_length 0"), "{err}");
}
