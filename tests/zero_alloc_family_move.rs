//! The families moved onto `ops::Op` (issue 14) allocate nothing in Rivet per
//! steady-state Run (counted by the probe build's CountingAllocator inside real ORT):
//! Concat of many inputs, Slice (constant and int32 parameters at Run), the float32,
//! half, float64 and integer reductions, a half comparison, Pad, Split, Where and Expand
//! at Run, on static and symbolic shapes.

use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, Dim, ModelBuilder, BOOL, DOUBLE, FLOAT, FLOAT16, INT32, INT64};
use rivet::probe_reader::ProbeReader;

fn vals(seed: u64, n: usize) -> Vec<f32> {
    harness::values(seed, n, -1.0, 1.0).into_iter().map(|v| v as f32).collect()
}

fn sym() -> Dim {
    Dim::Sym("N".into())
}

/// `x` (f32 [4, 6], its first axis `N` when `symbolic`) through `op`, its other inputs
/// initializers.
fn one(op: &str, opset: i64, symbolic: bool, init: &[(&str, Vec<i64>)], attrs: &[(&str, Attr)]) -> Vec<u8> {
    let rows = if symbolic { sym() } else { 4.into() };
    let mut b = ModelBuilder::new(opset).input("x", FLOAT, &[rows, 6.into()]);
    let mut names = vec!["x"];
    for (name, v) in init {
        b = b.initializer_i64(name, &[v.len() as i64], v.clone());
        names.push(name);
    }
    b.node_with(op, "op", &names, &["y"], attrs).output("y", FLOAT, None).build()
}

#[test]
fn the_moved_families_allocate_nothing_per_steady_state_run() {
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    let probe = ProbeReader::open(&path).expect("probe exports");
    let x = || HostTensor::f32("x", &[4, 6], vals(1, 24));
    let mut cases: Vec<(String, Vec<u8>, Vec<HostTensor>)> = Vec::new();
    for symbolic in [false, true] {
        // Twelve parts from four fused inputs (a fused node of more than eight inputs binds
        // them on the heap, whatever it runs).
        let names: Vec<String> = (0..4).map(|k| format!("x{k}")).collect();
        let mut b = ModelBuilder::new(13);
        let mut inputs = vec![];
        for n in &names {
            b = b.input(n, FLOAT, &[if symbolic { sym() } else { 2.into() }, 3.into()]);
            inputs.push(HostTensor::f32(n, &[2, 3], vals(2, 6)));
        }
        let refs: Vec<&str> = names.iter().cycle().take(12).map(String::as_str).collect();
        let concat = b.node_with("Concat", "op", &refs, &["y"], &[("axis", Attr::Int(0))]).output("y", FLOAT, None);
        cases.push((format!("Concat of 12 (symbolic {symbolic})"), concat.build(), inputs));
        let slice = one("Slice", 13, symbolic, &[("s", vec![1, 0]), ("e", vec![3, 6]), ("a", vec![0, 1])], &[]);
        cases.push((format!("Slice (symbolic {symbolic})"), slice, vec![x()]));
        let mean = one("ReduceMean", 13, symbolic, &[], &[("axes", Attr::Ints(vec![1]))]);
        cases.push((format!("ReduceMean (symbolic {symbolic})"), mean, vec![x()]));
        let pad = one("Pad", 13, symbolic, &[("p", vec![1, 0, 0, 2])], &[]);
        cases.push((format!("Pad (symbolic {symbolic})"), pad, vec![x()]));
    }
    let slice_at_run = ModelBuilder::new(13)
        .input("x", FLOAT, &[sym(), 6.into()])
        .input("s", INT32, &[1.into()])
        .input("e", INT32, &[1.into()])
        .node("Slice", "op", &["x", "s", "e"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let int = |n: &str, v: f64| HostTensor::typed(n, E::Int32, &[1], vec![v]);
    cases.push(("Slice at Run".into(), slice_at_run, vec![x(), int("s", 1.0), int("e", -1.0)]));
    let half = ModelBuilder::new(13)
        .input("x", FLOAT, &[sym(), 6.into()])
        .node_with("Cast", "to_half", &["x"], &["h"], &[("to", Attr::Int(FLOAT16 as i64))])
        .node_with("ReduceSum", "sum", &["h"], &["hs"], &[("keepdims", Attr::Int(1))])
        .node("Greater", "gt", &["h", "hs"], &["y"])
        .output("y", BOOL, None)
        .build();
    cases.push(("ReduceSum and Greater on float16".into(), half, vec![x()]));
    let split = ModelBuilder::new(13)
        .input("x", FLOAT, &[sym(), 6.into()])
        .node_with("Split", "op", &["x"], &["a", "b", "c"], &[("axis", Attr::Int(1))])
        .output("a", FLOAT, None)
        .output("b", FLOAT, None)
        .output("c", FLOAT, None)
        .build();
    cases.push(("Split".into(), split, vec![x()]));
    let where_expand = ModelBuilder::new(13)
        .input("x", FLOAT, &[sym(), 6.into()])
        .input("shape", INT64, &[3.into()])
        .initializer("zero", &[1], vec![0.0])
        .node("Greater", "gt", &["x", "zero"], &["c"])
        .node("Where", "pick", &["c", "x", "zero"], &["w"])
        .node("Expand", "grow", &["w", "shape"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let shape = HostTensor::typed("shape", E::Int64, &[3], vec![2.0, 4.0, 6.0]);
    cases.push(("Greater, Where and Expand at Run".into(), where_expand, vec![x(), shape]));
    // The reductions off the float32 kernel: float64 and integers (L2 and the logs
    // through f64), their working memory in the op's scratch.
    for (op, t) in [("ReduceMax", DOUBLE), ("ReduceLogSumExp", DOUBLE), ("ReduceL2", INT32), ("ReduceMin", INT64)] {
        let model = ModelBuilder::new(13)
            .input("x", FLOAT, &[sym(), 6.into()])
            .node_with("Cast", "to", &["x"], &["t"], &[("to", Attr::Int(t as i64))])
            .node_with(op, "op", &["t"], &["y"], &[("axes", Attr::Ints(vec![1]))])
            .output("y", t, None)
            .build();
        cases.push((format!("{op} on type {t}"), model, vec![x()]));
    }
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
