//! RNN, GRU, LSTM, ReverseSequence and MaxUnpool allocate nothing per steady-state Run
//! (their working memory lives in the step's scratch), counted by the probe build's
//! CountingAllocator inside real ORT.

use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, ModelBuilder, FLOAT, INT32, INT64};
use rivet::probe_reader::ProbeReader;

fn f(name: &str, dims: &[i64], seed: u64) -> HostTensor {
    let n = dims.iter().product::<i64>() as usize;
    HostTensor::f32(name, dims, harness::values(seed, n, -0.5, 0.5).into_iter().map(|v| v as f32).collect())
}

/// A bidirectional layer with every input and output, batch 3 (the GEMM path, not GEMV).
fn recurrent(op: &str, gates: i64) -> (Vec<u8>, Vec<HostTensor>) {
    let (s, b, i, h) = (6, 3, 5, 8);
    let w = f("W", &[2, gates * h, i], 1).data.iter().map(|&v| v as f32).collect();
    let r = f("R", &[2, gates * h, h], 2).data.iter().map(|&v| v as f32).collect();
    let bias = f("B", &[2, 2 * gates * h], 3).data.iter().map(|&v| v as f32).collect();
    let lstm = op == "LSTM";
    let mut m = ModelBuilder::new(14)
        .input("X", FLOAT, &[s.into(), b.into(), i.into()])
        .input("L", INT32, &[b.into()])
        .input("H0", FLOAT, &[2.into(), b.into(), h.into()])
        .initializer("W", &[2, gates * h, i], w)
        .initializer("R", &[2, gates * h, h], r)
        .initializer("B", &[2, 2 * gates * h], bias)
        .output("Y", FLOAT, None)
        .output("Y_h", FLOAT, None);
    let mut ins = vec!["X", "W", "R", "B", "L", "H0"];
    let mut outs = vec!["Y", "Y_h"];
    if lstm {
        m = m.input("C0", FLOAT, &[2.into(), b.into(), h.into()]).output("Y_c", FLOAT, None);
        ins.push("C0");
        outs.push("Y_c");
    }
    let attrs = [("hidden_size", Attr::Int(h)), ("direction", Attr::Str("bidirectional".into()))];
    let model = m.node_with(op, "rec", &ins, &outs, &attrs).build();
    let mut inputs = vec![
        f("X", &[s, b, i], 4),
        HostTensor::typed("L", E::Int32, &[b], vec![6.0, 2.0, 4.0]),
        f("H0", &[2, b, h], 5),
    ];
    if lstm {
        inputs.push(f("C0", &[2, b, h], 6));
    }
    (model, inputs)
}

#[test]
fn the_recurrent_layers_and_movements_allocate_nothing_per_steady_state_run() {
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    let probe = ProbeReader::open(&path).expect("probe exports");
    let reverse = ModelBuilder::new(10)
        .input("x", FLOAT, &[5.into(), 3.into(), 2.into()])
        .input("lens", INT64, &[3.into()])
        .output("y", FLOAT, None)
        .node_with("ReverseSequence", "rev", &["x", "lens"], &["y"], &[])
        .build();
    let reverse_in = vec![f("x", &[5, 3, 2], 1), HostTensor::typed("lens", E::Int64, &[3], vec![5.0, 0.0, 2.0])];
    let unpool = ModelBuilder::new(11)
        .input("x", FLOAT, &[1.into(), 1.into(), 2.into(), 2.into()])
        .input("i", INT64, &[1.into(), 1.into(), 2.into(), 2.into()])
        .output("y", FLOAT, None)
        .node_with(
            "MaxUnpool",
            "up",
            &["x", "i"],
            &["y"],
            &[("kernel_shape", Attr::Ints(vec![2, 2])), ("strides", Attr::Ints(vec![2, 2]))],
        )
        .build();
    let unpool_in =
        vec![f("x", &[1, 1, 2, 2], 2), HostTensor::typed("i", E::Int64, &[1, 1, 2, 2], vec![0.0, 3.0, 9.0, 14.0])];
    let mut cases = vec![("ReverseSequence", reverse, reverse_in), ("MaxUnpool", unpool, unpool_in)];
    for (op, gates) in [("RNN", 1), ("GRU", 3), ("LSTM", 4)] {
        let (m, i) = recurrent(op, gates);
        cases.push((op, m, i));
    }
    for (name, model, inputs) in cases {
        let opts = SessionOpts { no_fallback: true, record_assignment: true, ..Default::default() };
        let mut s = harness::session(env, &model, Arm::Rivet, &opts).expect("session");
        let inputs = harness::prepare(&inputs).expect("inputs");
        harness::time_runs(&mut s, &inputs, 3, 0).expect("warm-up");
        let before = probe.global();
        harness::time_runs(&mut s, &inputs, 0, 4).expect("runs");
        let d = probe.global().since(&before);
        assert_eq!(d.total().allocs, 0, "{name}: {} allocations in 4 Runs: {d:#?}", d.total().allocs);
        assert_eq!(d.runs, 4, "{name}");
    }
}
