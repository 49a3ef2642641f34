//! The families of e2e_misc_ops.rs allocate nothing in Rivet per steady-state Run
//! (counted by the probe build's CountingAllocator inside real ORT), on static shapes
//! and on shapes that come from data (Unique, Compress, the windows, MelWeightMatrix),
//! which are inferred at every Run.

use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, Dim, ModelBuilder, BOOL, FLOAT, INT64};
use rivet::probe_reader::ProbeReader;

fn vals(seed: u64, n: usize) -> Vec<f32> {
    harness::values(seed, n, -1.0, 1.0).into_iter().map(|v| v as f32).collect()
}

fn d(v: &[i64]) -> Vec<Dim> {
    v.iter().map(|&x| x.into()).collect()
}

fn one(op: &str, opset: i64, shape: &[i64], attrs: &[(&str, Attr)]) -> (Vec<u8>, Vec<HostTensor>) {
    let model = ModelBuilder::new(opset)
        .input("x", FLOAT, &d(shape))
        .node_with(op, "op", &["x"], &["y"], attrs)
        .output("y", FLOAT, None)
        .build();
    let n = shape.iter().product::<i64>() as usize;
    (model, vec![HostTensor::f32("x", shape, vals(1, n))])
}

#[test]
fn the_misc_families_allocate_nothing_per_steady_state_run() {
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    let probe = ProbeReader::open(&path).expect("probe exports");
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let mut cases: Vec<(&str, Vec<u8>, Vec<HostTensor>)> = vec![
        (
            "LpPool",
            one("LpPool", 18, &[1, 3, 16, 16], &[("kernel_shape", ints(&[3, 3])), ("pads", ints(&[1, 1, 1, 1]))]),
        ),
        ("LpNormalization", one("LpNormalization", 13, &[4, 64], &[])),
        ("MVN", one("MeanVarianceNormalization", 13, &[2, 3, 8, 8], &[])),
        ("Det", one("Det", 11, &[8, 5, 5], &[])),
        ("Swish", one("Swish", 24, &[256], &[])),
    ]
    .into_iter()
    .map(|(n, (m, i))| (n, m, i))
    .collect();
    let x = HostTensor::f32("x", &[64], vals(2, 64).into_iter().map(|v| (v * 4.0).round()).collect());
    let unique = ModelBuilder::new(11)
        .input("x", FLOAT, &d(&[64]))
        .node("Unique", "op", &["x"], &["y", "i", "inv", "c"])
        .output("y", FLOAT, None)
        .output("i", INT64, None)
        .output("inv", INT64, None)
        .output("c", INT64, None)
        .build();
    cases.push(("Unique", unique, vec![x.clone()]));
    let compress = ModelBuilder::new(11)
        .input("x", FLOAT, &d(&[64]))
        .input("c", BOOL, &d(&[64]))
        .node("Compress", "op", &["x", "c"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let cond = HostTensor::typed("c", E::Bool, &[64], (0..64).map(|k| (k % 3 == 0) as u8 as f64).collect());
    cases.push(("Compress", compress, vec![x.clone(), cond]));
    let ccp = ModelBuilder::new(18)
        .input("x", FLOAT, &d(&[8, 8]))
        .initializer_i64("s", &[2], vec![5, 11])
        .node("CenterCropPad", "op", &["x", "s"], &["y"])
        .output("y", FLOAT, None)
        .build();
    cases.push(("CenterCropPad", ccp, vec![HostTensor::f32("x", &[8, 8], vals(3, 64))]));
    let window = ModelBuilder::new(17)
        .input("n", INT64, &[])
        .node("HannWindow", "op", &["n"], &["y"])
        .output("y", FLOAT, None)
        .build();
    cases.push(("HannWindow", window, vec![HostTensor::typed("n", E::Int64, &[], vec![32.0])]));
    let mel = ModelBuilder::new(17)
        .input("a", INT64, &[])
        .input("b", INT64, &[])
        .input("r", INT64, &[])
        .input("lo", FLOAT, &[])
        .input("hi", FLOAT, &[])
        .node("MelWeightMatrix", "op", &["a", "b", "r", "lo", "hi"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let int = |n: &str, v: f64| HostTensor::typed(n, E::Int64, &[], vec![v]);
    let mel_in = vec![
        int("a", 8.0),
        int("b", 64.0),
        int("r", 16000.0),
        HostTensor::f32("lo", &[], vec![0.0]),
        HostTensor::f32("hi", &[], vec![8000.0]),
    ];
    cases.push(("MelWeightMatrix", mel, mel_in));
    let prelu = ModelBuilder::new(16)
        .input("x", FLOAT, &d(&[2, 3, 8]))
        .input("s", FLOAT, &d(&[3, 1]))
        .node("PRelu", "op", &["x", "s"], &["y"])
        .output("y", FLOAT, None)
        .build();
    cases.push((
        "PRelu",
        prelu,
        vec![HostTensor::f32("x", &[2, 3, 8], vals(4, 48)), HostTensor::f32("s", &[3, 1], vals(5, 3))],
    ));
    let ts = ModelBuilder::new(24)
        .input("p", FLOAT, &d(&[2, 1, 8, 4]))
        .input("u", FLOAT, &d(&[2, 1, 1, 4]))
        .input("w", INT64, &d(&[2]))
        .node_with("TensorScatter", "op", &["p", "u", "w"], &["y"], &[("mode", Attr::Str("circular".into()))])
        .output("y", FLOAT, None)
        .build();
    let ts_in = vec![
        HostTensor::f32("p", &[2, 1, 8, 4], vals(6, 64)),
        HostTensor::f32("u", &[2, 1, 1, 4], vals(7, 8)),
        HostTensor::typed("w", E::Int64, &[2], vec![7.0, 2.0]),
    ];
    cases.push(("TensorScatter", ts, ts_in));
    let deform = ModelBuilder::new(19)
        .input("x", FLOAT, &d(&[1, 2, 6, 6]))
        .input("w", FLOAT, &d(&[3, 2, 3, 3]))
        .input("o", FLOAT, &d(&[1, 18, 4, 4]))
        .node("DeformConv", "op", &["x", "w", "o"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let deform_in = vec![
        HostTensor::f32("x", &[1, 2, 6, 6], vals(8, 72)),
        HostTensor::f32("w", &[3, 2, 3, 3], vals(9, 54)),
        HostTensor::f32("o", &[1, 18, 4, 4], vals(10, 288)),
    ];
    cases.push(("DeformConv", deform, deform_in));
    // On the GEMM, one operand copied into order first (the step's state grows once).
    let einsum = ModelBuilder::new(12)
        .input("a", FLOAT, &d(&[3, 2, 16, 8]))
        .input("b", FLOAT, &d(&[2, 3, 24, 8]))
        .node_with("Einsum", "op", &["a", "b"], &["y"], &[("equation", Attr::Str("hbqd,bhkd->bhqk".into()))])
        .output("y", FLOAT, None)
        .build();
    let einsum_in =
        vec![HostTensor::f32("a", &[3, 2, 16, 8], vals(11, 768)), HostTensor::f32("b", &[2, 3, 24, 8], vals(12, 1152))];
    cases.push(("Einsum", einsum, einsum_in));
    // The transforms' plans (Bluestein's tables for 12 points) are made on the first Run.
    let dft = ModelBuilder::new(17)
        .input("x", FLOAT, &d(&[2, 12, 2]))
        .node_with("DFT", "op", &["x"], &["y"], &[("inverse", Attr::Int(1))])
        .output("y", FLOAT, None)
        .build();
    cases.push(("DFT", dft, vec![HostTensor::f32("x", &[2, 12, 2], vals(13, 48))]));
    let stft = ModelBuilder::new(17)
        .input("x", FLOAT, &d(&[1, 64, 1]))
        .initializer_i64("step", &[], vec![8])
        .input("w", FLOAT, &d(&[20]))
        .node("STFT", "op", &["x", "step", "w"], &["y"])
        .output("y", FLOAT, None)
        .build();
    cases.push((
        "STFT",
        stft,
        vec![HostTensor::f32("x", &[1, 64, 1], vals(14, 64)), HostTensor::f32("w", &[20], vals(15, 20))],
    ));
    for (name, model, inputs) in &cases {
        let opts = SessionOpts { no_fallback: true, intra_threads: Some(1), ..Default::default() };
        let mut s = harness::session(env, model, Arm::Rivet, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
        let inputs = harness::prepare(inputs).expect("inputs");
        harness::time_runs(&mut s, &inputs, 3, 0).expect("warm-up");
        let before = probe.global();
        harness::time_runs(&mut s, &inputs, 0, 4).expect("runs");
        let delta = probe.global().since(&before);
        assert_eq!(delta.runs, 4, "{name}");
        assert_eq!(delta.total().allocs, 0, "{name}: {} allocations in 4 Runs", delta.total().allocs);
    }
    assert_eq!(cases.len(), 16);
}
