//! Every op Rivet claims matches ORT's CPU EP, on static and symbolic shapes, with CPU
//! fallback off and every node assigned to Rivet.

mod common;

use common::{assert_matches_ort, check_matches_ort, sweep};
use rivet::harness::HostTensor;
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT};

/// Tolerances: exact ops are compared to 1 ulp-ish; transcendental ones to the bound the
/// kernels pin plus ORT's own approximation error.
const EXACT: (f64, f64) = (1e-6, 0.0);
const TRANSCENDENTAL: (f64, f64) = (2e-5, 2e-6);

struct UnaryCase {
    op: &'static str,
    attrs: Vec<(&'static str, Attr)>,
    range: (f64, f64),
    tol: (f64, f64),
}

fn unary_cases() -> Vec<UnaryCase> {
    let c = |op, range, tol| UnaryCase { op, attrs: vec![], range, tol };
    let a = |op, attrs, range, tol| UnaryCase { op, attrs, range, tol };
    vec![
        c("Relu", (-5.0, 5.0), EXACT),
        c("Sigmoid", (-20.0, 20.0), TRANSCENDENTAL),
        c("Tanh", (-10.0, 10.0), TRANSCENDENTAL),
        c("Erf", (-5.0, 5.0), TRANSCENDENTAL),
        c("Exp", (-20.0, 20.0), TRANSCENDENTAL),
        c("Log", (-1.0, 100.0), TRANSCENDENTAL),
        c("Sqrt", (-1.0, 100.0), EXACT),
        c("Abs", (-5.0, 5.0), EXACT),
        c("Neg", (-5.0, 5.0), EXACT),
        c("Reciprocal", (-5.0, 5.0), EXACT),
        c("Floor", (-5.0, 5.0), EXACT),
        c("Ceil", (-5.0, 5.0), EXACT),
        c("Softplus", (-30.0, 30.0), TRANSCENDENTAL),
        c("Softsign", (-10.0, 10.0), EXACT),
        c("HardSigmoid", (-5.0, 5.0), EXACT),
        a("HardSigmoid", vec![("alpha", Attr::Float(0.3)), ("beta", Attr::Float(0.4))], (-5.0, 5.0), EXACT),
        c("HardSwish", (-6.0, 6.0), EXACT),
        c("LeakyRelu", (-5.0, 5.0), EXACT),
        a("LeakyRelu", vec![("alpha", Attr::Float(0.2))], (-5.0, 5.0), EXACT),
        c("Elu", (-10.0, 5.0), TRANSCENDENTAL),
        a("Elu", vec![("alpha", Attr::Float(0.5))], (-10.0, 5.0), TRANSCENDENTAL),
        c("Selu", (-10.0, 5.0), TRANSCENDENTAL),
        a("Selu", vec![("alpha", Attr::Float(1.5)), ("gamma", Attr::Float(1.1))], (-10.0, 5.0), TRANSCENDENTAL),
        c("Celu", (-10.0, 5.0), TRANSCENDENTAL),
        a("Celu", vec![("alpha", Attr::Float(2.0))], (-10.0, 5.0), TRANSCENDENTAL),
        c("ThresholdedRelu", (-3.0, 3.0), EXACT),
        a("ThresholdedRelu", vec![("alpha", Attr::Float(0.5))], (-3.0, 3.0), EXACT),
        c("Mish", (-10.0, 10.0), TRANSCENDENTAL),
        c("Gelu", (-6.0, 6.0), TRANSCENDENTAL),
        a("Gelu", vec![("approximate", Attr::Str("tanh".into()))], (-6.0, 6.0), TRANSCENDENTAL),
        c("Identity", (-5.0, 5.0), EXACT),
    ]
}

/// (opset the model imports, x declared dims, x actual shape)
fn shape_variants() -> Vec<(&'static str, Vec<Dim>, Vec<i64>)> {
    vec![
        ("static", vec![Dim::from(4), Dim::from(5), Dim::from(13)], vec![4, 5, 13]),
        ("symbolic", vec![Dim::from("N"), Dim::from(5), Dim::from("W")], vec![3, 5, 17]),
    ]
}

fn opset_for(op: &str) -> i64 {
    match op {
        "Celu" => 12,
        _ => 21,
    }
}

#[test]
fn every_unary_op_matches_ort() {
    let mut checked = 0;
    let mut failures = Vec::new();
    for case in unary_cases() {
        for (variant, declared, shape) in shape_variants() {
            let n: i64 = shape.iter().product();
            let model = ModelBuilder::new(opset_for(case.op))
                .input("x", FLOAT, &declared)
                .node_with(case.op, "node0", &["x"], &["y"], &case.attrs)
                .output("y", FLOAT, None)
                .build();
            let x = sweep(n as usize, case.range.0, case.range.1, true);
            let inputs = [HostTensor::f32("x", &shape, x)];
            let what = format!("{} {:?} ({variant})", case.op, case.attrs);
            if let Err(e) = check_matches_ort(&model, &inputs, case.tol.0, case.tol.1, &what) {
                failures.push(e);
            }
            checked += 1;
        }
    }
    assert!(failures.is_empty(), "{} of {checked} cases differ from ORT:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(checked, 2 * 31);
}

/// (variant, a declared, a actual, b declared, b actual)
type BinaryShapes = (&'static str, Vec<Dim>, Vec<i64>, Vec<Dim>, Vec<i64>);

#[test]
fn every_binary_op_matches_ort_with_broadcasting() {
    let shapes: Vec<BinaryShapes> = vec![
        ("same", vec![2.into(), 3.into(), 4.into()], vec![2, 3, 4], vec![2.into(), 3.into(), 4.into()], vec![2, 3, 4]),
        ("trailing", vec![2.into(), 3.into(), 4.into()], vec![2, 3, 4], vec![4.into()], vec![4]),
        ("both", vec![2.into(), 1.into(), 4.into()], vec![2, 1, 4], vec![3.into(), 1.into()], vec![3, 1]),
        ("scalar", vec![2.into(), 3.into()], vec![2, 3], vec![], vec![]),
        ("symbolic", vec!["N".into(), 3.into(), 4.into()], vec![5, 3, 4], vec![1.into(), 4.into()], vec![1, 4]),
    ];
    let ops = [
        ("Add", (-5.0, 5.0), EXACT),
        ("Sub", (-5.0, 5.0), EXACT),
        ("Mul", (-5.0, 5.0), EXACT),
        ("Div", (-5.0, 5.0), EXACT),
        ("Pow", (0.0, 3.0), TRANSCENDENTAL),
        ("Max", (-5.0, 5.0), EXACT),
        ("Min", (-5.0, 5.0), EXACT),
    ];
    for (op, range, tol) in ops {
        for (variant, da, sa, db, sb) in &shapes {
            let model = ModelBuilder::new(21)
                .input("a", FLOAT, da)
                .input("b", FLOAT, db)
                .node(op, "node0", &["a", "b"], &["y"])
                .output("y", FLOAT, None)
                .build();
            let na: i64 = sa.iter().product();
            let nb: i64 = sb.iter().product();
            let a: Vec<f32> =
                rivet::harness::values(1, na as usize, range.0, range.1).into_iter().map(|v| v as f32).collect();
            let mut b: Vec<f32> =
                rivet::harness::values(2, nb as usize, range.0, range.1).into_iter().map(|v| v as f32).collect();
            if op == "Max" || op == "Min" {
                if let Some(first) = b.first_mut() {
                    *first = f32::NAN; // NaN propagates like ORT's
                }
            }
            let inputs = [HostTensor::f32("a", sa, a), HostTensor::f32("b", sb, b)];
            assert_matches_ort(&model, &inputs, tol.0, tol.1, &format!("{op} ({variant})"));
        }
    }
}

#[test]
fn a_chain_with_initializers_runs_as_one_fused_node() {
    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &["N".into(), 8.into()])
        .initializer("w", &[8], (0..8).map(|i| i as f32 * 0.25).collect())
        .node("Mul", "mul", &["x", "w"], &["xw"])
        .node("Sigmoid", "sig", &["xw"], &["s"])
        .node("Add", "add", &["s", "x"], &["y"])
        .node("Relu", "relu", &["y"], &["z"])
        .output("y", FLOAT, None)
        .output("z", FLOAT, None)
        .build();
    let x = sweep(6 * 8, -4.0, 4.0, false);
    assert_matches_ort(&model, &[HostTensor::f32("x", &[6, 8], x)], TRANSCENDENTAL.0, TRANSCENDENTAL.1, "chain");
}

#[test]
fn large_tensors_use_the_thread_pool_and_still_match() {
    // 1 Mi elements: above the parallel threshold, so chunks run through ParallelFor.
    let model = ModelBuilder::new(21)
        .input("x", FLOAT, &[1024.into(), 1024.into()])
        .input("b", FLOAT, &[1024.into()])
        .node("Tanh", "tanh", &["x"], &["t"])
        .node("Add", "add", &["t", "b"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let x = sweep(1 << 20, -3.0, 3.0, false);
    let b = sweep(1024, -1.0, 1.0, false);
    assert_matches_ort(
        &model,
        &[HostTensor::f32("x", &[1024, 1024], x), HostTensor::f32("b", &[1024], b)],
        TRANSCENDENTAL.0,
        TRANSCENDENTAL.1,
        "1 Mi tanh+add",
    );
}

#[test]
fn zero_sized_and_scalar_tensors() {
    for (declared, shape) in [(vec![Dim::from(0), Dim::from(3)], vec![0i64, 3]), (vec![], vec![])] {
        let model = ModelBuilder::new(21)
            .input("x", FLOAT, &declared)
            .node("Exp", "exp", &["x"], &["y"])
            .output("y", FLOAT, None)
            .build();
        let n: i64 = shape.iter().product();
        assert_matches_ort(&model, &[HostTensor::f32("x", &shape, vec![0.5; n as usize])], 1e-6, 0.0, "edge shapes");
    }
}

#[test]
fn an_input_of_unknown_rank_is_not_taken_for_a_scalar() {
    // Found by the conformance runner (ReduceLogSum's expanded cases): a value with no
    // shape was read as rank 0 and every real input was then "the wrong shape".
    let model = ModelBuilder::new(21)
        .input_unshaped("x", FLOAT)
        .node("Log", "log", &["x"], &["y"])
        .output("y", FLOAT, None)
        .build();
    for shape in [vec![5i64], vec![2, 3], vec![]] {
        let n: i64 = shape.iter().product();
        let x = sweep(n as usize, 0.5, 3.0, false);
        assert_matches_ort(&model, &[HostTensor::f32("x", &shape, x)], TRANSCENDENTAL.0, TRANSCENDENTAL.1, "unshaped");
    }
}
