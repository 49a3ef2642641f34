//! A Run that fails its shape checks returns an error naming the node, never panics, and
//! leaves the session as it was: the next good Run matches ORT. Pinned for a step whose
//! buffer is not float32 (the step's buffer is out of the state while the step runs) and
//! for a shape with more than 2^48 elements written into an intermediate.

mod common;

use common::{env, ort_session, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{Attr, ModelBuilder, BOOL, FLOAT, INT64};

fn bad_then_good(model: &[u8], bad: &[HostTensor], node: &str, why: &str, good: &[HostTensor]) {
    let mut rivet = harness::session(env(), model, Arm::Rivet, &strict()).expect("Rivet session");
    let want = harness::run(&mut ort_session(model), good).expect("ORT runs");
    let got = harness::run(&mut rivet, good).expect("a good Run first");
    harness::compare(&got, &want, 0.0, 0.0).expect("matches ORT");
    let err = harness::run(&mut rivet, bad).expect_err("the bad input fails");
    assert!(err.contains(node) && err.contains(why), "{err}");
    let got = harness::run(&mut rivet, good).expect("the session still runs");
    harness::compare(&got, &want, 0.0, 0.0).expect("matches ORT after the error");
}

fn ints(name: &str, shape: &[i64], v: &[i64]) -> HostTensor {
    HostTensor::typed(name, E::Int64, shape, v.iter().map(|&x| x as f64).collect())
}

#[test]
fn an_int64_comparison_feeding_a_step_runs_again_after_a_bad_shape() {
    // Equal's bool output is an intermediate buffer (Not reads it).
    let model = ModelBuilder::new(13)
        .input("a", INT64, &["n".into(), "m".into()])
        .input("b", INT64, &["p".into(), "q".into()])
        .node("Equal", "eq", &["a", "b"], &["e"])
        .node("Not", "not", &["e"], &["y"])
        .output("y", BOOL, None)
        .build();
    let a = ints("a", &[2, 4], &[1, 2, 3, 4, 5, 6, 7, 8]);
    let good = [a.clone(), ints("b", &[2, 4], &[1, 0, 3, 0, 5, 0, 7, 0])];
    let bad = [a, ints("b", &[2, 3], &[1, 2, 3, 4, 5, 6])];
    bad_then_good(&model, &bad, "node 'eq' (Equal)", "broadcast", &good);
}

#[test]
fn split_sizes_past_2_48_elements_are_an_error_then_the_session_runs() {
    // Sizes [-1, 5] add up to the axis (4) but name a part of 2^64 - 1 elements; the part
    // is an intermediate (Concat reads it).
    let model = ModelBuilder::new(13)
        .input("x", FLOAT, &[4.into()])
        .input("s", INT64, &[2.into()])
        .node("Split", "split", &["x", "s"], &["a", "b"])
        .node_with("Concat", "cat", &["b", "a"], &["y"], &[("axis", Attr::Int(0))])
        .output("y", FLOAT, None)
        .build();
    let x = HostTensor::f32("x", &[4], vec![1.0, 2.0, 3.0, 4.0]);
    let good = [x.clone(), ints("s", &[2], &[1, 3])];
    let bad = [x, ints("s", &[2], &[-1, 5])];
    bad_then_good(&model, &bad, "node 'split' (Split)", "2^48 elements", &good);
}

#[test]
fn a_global_pool_over_an_empty_plane_is_an_error_then_the_session_runs() {
    for op in ["GlobalAveragePool", "GlobalMaxPool"] {
        let model = ModelBuilder::new(13)
            .input("x", FLOAT, &["n".into(), "c".into(), "h".into(), "w".into()])
            .node(op, "gp", &["x"], &["y"])
            .output("y", FLOAT, None)
            .build();
        let good = [HostTensor::f32("x", &[1, 2, 2, 2], vec![1.0, -2.0, 3.0, 4.0, 0.5, 6.0, -7.0, 8.0])];
        let bad = [HostTensor::f32("x", &[1, 2, 0, 4], vec![])];
        bad_then_good(&model, &bad, &format!("node 'gp' ({op}) input 0"), "empty spatial extent", &good);
    }
}
