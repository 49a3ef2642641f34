//! The quantization ops allocate nothing per steady-state Run (counted by the probe
//! build's CountingAllocator inside real ORT): their working memory is the step's
//! `OpScratch`, sized on the first Run.

use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT, INT32, INT8, UINT8};
use rivet::probe_reader::ProbeReader;

use ort::value::TensorElementType as E;

fn constant(b: ModelBuilder, name: &str, code: i32, shape: &[i64], bytes: Vec<u8>) -> ModelBuilder {
    b.node_with(
        "Constant",
        &format!("const_{name}"),
        &[],
        &[name],
        &[("value", Attr::Tensor(code, shape.to_vec(), bytes))],
    )
}

fn dims(s: &[i64]) -> Vec<Dim> {
    s.iter().map(|&d| d.into()).collect()
}

fn bytes(n: usize, seed: usize) -> Vec<u8> {
    (0..n).map(|i| ((i * 37 + seed * 11) % 256) as u8).collect()
}

fn ints(elem: E, n: usize, seed: usize) -> Vec<f64> {
    bytes(n, seed).into_iter().map(|b| if elem == E::Int8 { b as i8 as f64 } else { b as f64 }).collect()
}

/// (name, model, inputs)
fn cases() -> Vec<(&'static str, Vec<u8>, Vec<HostTensor>)> {
    let x: Vec<f32> = (0..2 * 3 * 8).map(|i| (i as f32 - 20.0) * 0.37).collect();
    let q_axis = {
        let b = ModelBuilder::new(21).input("x", FLOAT, &dims(&[2, 3, 8])).initializer("s", &[3], vec![0.1, 0.2, 0.3]);
        constant(b, "z", INT8, &[3], vec![1, 0, 255])
            .node_with("QuantizeLinear", "q", &["x", "s", "z"], &["y"], &[("axis", Attr::Int(1))])
            .output("y", INT8, None)
            .build()
    };
    let dq_blocked = ModelBuilder::new(21)
        .input("x", UINT8, &dims(&[2, 3, 8]))
        .initializer("s", &[2, 3, 2], (0..12).map(|i| 0.01 * (i + 1) as f32).collect())
        .node_with(
            "DequantizeLinear",
            "q",
            &["x", "s"],
            &["y"],
            &[("axis", Attr::Int(2)), ("block_size", Attr::Int(4))],
        )
        .output("y", FLOAT, None)
        .build();
    let dynamic = ModelBuilder::new(11)
        .input("x", FLOAT, &dims(&[2, 3, 8]))
        .node("DynamicQuantizeLinear", "q", &["x"], &["y", "s", "z"])
        .output("y", UINT8, None)
        .output("s", FLOAT, None)
        .output("z", UINT8, None)
        .build();
    let mm_integer = {
        let b = ModelBuilder::new(10).input("a", UINT8, &dims(&[2, 5, 40])).input("b", INT8, &dims(&[40, 70]));
        constant(constant(b, "za", UINT8, &[], vec![128]), "zb", INT8, &[70], bytes(70, 3))
            .node("MatMulInteger", "q", &["a", "b", "za", "zb"], &["y"])
            .output("y", INT32, None)
            .build()
    };
    let qlinear_mm = {
        let b = ModelBuilder::new(10)
            .input("a", UINT8, &dims(&[5, 40]))
            .input("b", UINT8, &dims(&[40, 9]))
            .initializer("sa", &[], vec![0.02])
            .initializer("sb", &[9], (0..9).map(|i| 0.01 + 0.001 * i as f32).collect())
            .initializer("sy", &[], vec![0.3]);
        let b = constant(constant(b, "za", UINT8, &[], vec![120]), "zb", UINT8, &[9], bytes(9, 4));
        constant(b, "zy", UINT8, &[], vec![100])
            .node("QLinearMatMul", "q", &["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], &["y"])
            .output("y", UINT8, None)
            .build()
    };
    let qlinear_conv = {
        let b = ModelBuilder::new(10)
            .input("x", UINT8, &dims(&[1, 4, 9, 9]))
            .input("w", INT8, &dims(&[6, 2, 3, 3]))
            .initializer("sx", &[], vec![0.02])
            .initializer("sw", &[6], (0..6).map(|i| 0.003 + 0.001 * i as f32).collect())
            .initializer("sy", &[], vec![0.05]);
        let b = constant(constant(b, "zx", UINT8, &[], vec![110]), "zw", INT8, &[6], vec![0; 6]);
        let b = constant(
            constant(b, "zy", UINT8, &[], vec![120]),
            "bias",
            INT32,
            &[6],
            (0..6i32).flat_map(|i| (i * 100 - 250).to_le_bytes()).collect(),
        );
        b.node_with(
            "QLinearConv",
            "q",
            &["x", "sx", "zx", "w", "sw", "zw", "sy", "zy", "bias"],
            &["y"],
            &[("group", Attr::Int(2)), ("pads", Attr::Ints(vec![1, 1, 1, 1])), ("strides", Attr::Ints(vec![2, 1]))],
        )
        .output("y", UINT8, None)
        .build()
    };
    let xf = HostTensor::f32("x", &[2, 3, 8], x);
    vec![
        ("QuantizeLinear per axis", q_axis, vec![xf.clone()]),
        (
            "DequantizeLinear blocked",
            dq_blocked,
            vec![HostTensor::typed("x", E::Uint8, &[2, 3, 8], ints(E::Uint8, 48, 1))],
        ),
        ("DynamicQuantizeLinear", dynamic, vec![xf]),
        (
            "MatMulInteger",
            mm_integer,
            vec![
                HostTensor::typed("a", E::Uint8, &[2, 5, 40], ints(E::Uint8, 400, 5)),
                HostTensor::typed("b", E::Int8, &[40, 70], ints(E::Int8, 2800, 6)),
            ],
        ),
        (
            "QLinearMatMul",
            qlinear_mm,
            vec![
                HostTensor::typed("a", E::Uint8, &[5, 40], ints(E::Uint8, 200, 7)),
                HostTensor::typed("b", E::Uint8, &[40, 9], ints(E::Uint8, 360, 8)),
            ],
        ),
        (
            "QLinearConv",
            qlinear_conv,
            vec![
                HostTensor::typed("x", E::Uint8, &[1, 4, 9, 9], ints(E::Uint8, 324, 9)),
                HostTensor::typed("w", E::Int8, &[6, 2, 3, 3], ints(E::Int8, 108, 10)),
            ],
        ),
    ]
}

#[test]
fn quantization_ops_allocate_nothing_per_steady_state_run() {
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    let probe = ProbeReader::open(&path).expect("probe exports");
    for (name, model, inputs) in cases() {
        let opts = SessionOpts { no_fallback: true, record_assignment: true, ..Default::default() };
        let mut s = harness::session(env, &model, Arm::Rivet, &opts).expect("session");
        let inputs = harness::prepare(&inputs).expect("inputs");
        harness::time_runs(&mut s, &inputs, 3, 0).expect("warm-up");
        let before = probe.global();
        harness::time_runs(&mut s, &inputs, 0, 4).expect("runs");
        let d = probe.global().since(&before);
        assert_eq!(d.runs, 4, "{name}");
        assert_eq!(d.total().allocs, 0, "{name}: {} allocations in 4 Runs: {d:#?}", d.total().allocs);
    }
}
