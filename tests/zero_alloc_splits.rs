//! The splits of decode-step products (one row by a packed constant B, split by columns)
//! and of Attention (by groups of heads) allocate nothing in Rivet per steady-state Run,
//! at one thread and at two, and do split (a ParallelFor per Run).

use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT};
use rivet::probe_reader::ProbeReader;

fn vals(seed: u64, n: usize) -> Vec<f32> {
    harness::values(seed, n, -1.0, 1.0).into_iter().map(|v| v as f32).collect()
}

fn d(v: &[i64]) -> Vec<Dim> {
    v.iter().map(|&x| x.into()).collect()
}

/// A model and its inputs.
type Case = (Vec<u8>, Vec<HostTensor>);

fn len(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

/// `y = x · w` with a constant `w` (`[k, n]`), `x` of shape `xs` (one row in all).
fn matmul(xs: &[i64], k: i64, n: i64) -> Case {
    let model = ModelBuilder::new(17)
        .input("x", FLOAT, &d(xs))
        .initializer("w", &[k, n], vals(2, (k * n) as usize))
        .node("MatMul", "mm", &["x", "w"], &["y"])
        .output("y", FLOAT, None)
        .build();
    (model, vec![HostTensor::f32("x", xs, vals(1, len(xs)))])
}

fn attention(causal: bool, mask: bool) -> Case {
    let (qs, ks, ms) = ([2i64, 8, 48, 32], [2i64, 4, 48, 32], [1i64, 1, 48, 48]);
    let mut b = ModelBuilder::new(23).input("q", FLOAT, &d(&qs)).input("k", FLOAT, &d(&ks)).input("v", FLOAT, &d(&ks));
    let mut names = vec!["q", "k", "v"];
    let mut inputs = vec![
        HostTensor::f32("q", &qs, vals(3, len(&qs))),
        HostTensor::f32("k", &ks, vals(4, len(&ks))),
        HostTensor::f32("v", &ks, vals(5, len(&ks))),
    ];
    if mask {
        b = b.input("m", FLOAT, &d(&ms));
        names.push("m");
        inputs.push(HostTensor::f32("m", &ms, vals(6, len(&ms))));
    }
    let model = b
        .node_with("Attention", "attn", &names, &["y"], &[("is_causal", Attr::Int(causal as i64))])
        .output("y", FLOAT, None)
        .build();
    (model, inputs)
}

#[test]
fn one_row_products_and_attention_split_and_allocate_nothing_per_steady_state_run() {
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    let probe = ProbeReader::open(&path).expect("probe exports");
    let gemm = ModelBuilder::new(13)
        .input("x", FLOAT, &d(&[1, 512]))
        .initializer("w", &[1024, 512], vals(7, 1024 * 512))
        .initializer("c", &[1024], vals(8, 1024))
        .node_with("Gemm", "gemm", &["x", "w", "c"], &["y"], &[("transB", Attr::Int(1)), ("beta", Attr::Float(0.5))])
        .output("y", FLOAT, None)
        .build();
    let cases: Vec<(&str, Case)> = vec![
        ("matmul 1x512 by a constant 512x1024", matmul(&[1, 512], 512, 1024)),
        ("matmul [1,1,512] by a constant 512x1000", matmul(&[1, 1, 512], 512, 1000)),
        ("gemm 1x512 by a constant 1024x512^T, C", (gemm, vec![HostTensor::f32("x", &[1, 512], vals(1, 512))])),
        ("attention GQA causal", attention(true, false)),
        ("attention GQA mask", attention(false, true)),
    ];
    let mut checked = 0;
    for (name, (model, inputs)) in &cases {
        for threads in [1, 2] {
            let opts = SessionOpts { no_fallback: true, intra_threads: Some(threads), ..Default::default() };
            let mut s = harness::session(env, model, Arm::Rivet, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
            let prepared = harness::prepare(inputs).expect("inputs");
            harness::time_runs(&mut s, &prepared, 3, 0).expect("warm-up");
            let before = probe.global();
            let runs = 4;
            harness::time_runs(&mut s, &prepared, 0, runs).expect("runs");
            let delta = probe.global().since(&before);
            assert_eq!(delta.runs, runs as u64, "{name} t{threads}");
            assert_eq!(
                delta.total().allocs,
                0,
                "{name} t{threads}: {} allocations in {runs} Runs",
                delta.total().allocs
            );
            // 3 ORT calls per input and 2 for the output per Run; the rest are ParallelFors.
            let per_run = 3 * inputs.len() as u64 + 2;
            let parallel_for = delta.total().ffi_calls - per_run * runs as u64;
            assert!(parallel_for >= runs as u64, "{name} t{threads}: not split ({parallel_for} ParallelFor calls)");
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * cases.len());
}
