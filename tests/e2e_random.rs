//! The random generators on Rivet alone (fallback off): RandomUniform, RandomNormal,
//! RandomUniformLike, RandomNormalLike and Bernoulli. ORT's CPU EP draws from its own
//! generator, so nothing here compares with it: a seeded node must give what ONNX's
//! reference implementation gives (numpy's `RandomState(seed)`; the values below are
//! `onnx.reference.ReferenceEvaluator`'s), the same on every Run and on static and
//! symbolic shapes; an unseeded one must draw anew each Run; a probability outside
//! [0, 1] is an error naming the node, after which the session still runs.

mod common;

use common::{env, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, DOUBLE, FLOAT, INT64};

fn session(model: &[u8]) -> ort::session::Session {
    harness::session(env(), model, Arm::Rivet, &strict()).expect("Rivet claims every node")
}

/// One generator node `op` (no input, or `x` shaped `shape`) into `y` of `out` type.
fn model(op: &str, attrs: &[(&str, Attr)], x: Option<(&[i64], bool)>, out: i32) -> Vec<u8> {
    let mut m = ModelBuilder::new(22);
    let ins: &[&str] = if x.is_some() { &["x"] } else { &[] };
    if let Some((shape, symbolic)) = x {
        let dims: Vec<Dim> = shape
            .iter()
            .enumerate()
            .map(|(k, &d)| if symbolic { format!("d{k}").as_str().into() } else { d.into() })
            .collect();
        m = m.input("x", FLOAT, &dims);
    }
    m.node_with(op, "draw", ins, &["y"], attrs).output("y", out, None).build()
}

fn run(model: &[u8], inputs: &[HostTensor]) -> Vec<f64> {
    let mut s = session(model);
    let first = harness::run(&mut s, inputs).expect("runs");
    let again = harness::run(&mut s, inputs).expect("runs again");
    assert_eq!(first[0].data, again[0].data, "a seeded node draws the same on every Run");
    first[0].data.clone()
}

fn probabilities(shape: &[i64]) -> HostTensor {
    let n = shape.iter().product::<i64>() as usize;
    HostTensor::f32("x", shape, (0..n).map(|k| (k as f64 / (n - 1) as f64) as f32).collect())
}

#[test]
fn seeded_draws_are_the_reference_implementations() {
    let f = |v: f64| Attr::Float(v as f32);
    let uniform = model(
        "RandomUniform",
        &[("shape", Attr::Ints(vec![2, 3])), ("seed", f(5.0)), ("low", f(-2.5)), ("high", f(7.25))],
        None,
        FLOAT,
    );
    let want = [
        -0.33556652069091797,
        5.989640235900879,
        -0.48448824882507324,
        6.456456184387207,
        2.2620091438293457,
        3.4645028114318848,
    ];
    assert_eq!(run(&uniform, &[]), want);
    // A range that float32 rounds (1.0 - 0.1), in float64: the reference subtracts its
    // float32 attributes in float32. A seed in (-1, 0) is 0, as `int(seed)` makes it.
    let uniform = model(
        "RandomUniform",
        &[
            ("shape", Attr::Ints(vec![3])),
            ("seed", f(-0.5)),
            ("low", f(0.1)),
            ("high", f(1.0)),
            ("dtype", Attr::Int(11)),
        ],
        None,
        DOUBLE,
    );
    assert_eq!(run(&uniform, &[]), [0.5939321419399748, 0.7436704141738504, 0.6424870255835968]);
    let normal = model(
        "RandomNormal",
        &[
            ("shape", Attr::Ints(vec![5])),
            ("seed", f(9.0)),
            ("mean", f(3.0)),
            ("scale", f(0.1)),
            ("dtype", Attr::Int(11)),
        ],
        None,
        DOUBLE,
    );
    let want = [3.000110855472873, 2.971045592643526, 2.8883933680304903, 2.9987117243062236, 2.9621638530154057];
    assert_eq!(run(&normal, &[]), want);
    for symbolic in [false, true] {
        let x = probabilities(&[3, 4]);
        let like = model("RandomNormalLike", &[("seed", f(4.0))], Some((&[3, 4], symbolic)), FLOAT);
        let want = [
            0.050561707466840744,
            0.4999513328075409,
            -0.9959089159965515,
            0.6935985088348389,
            -0.418301522731781,
            -1.584577202796936,
            -0.6477067470550537,
            0.5985751748085022,
            0.33225002884864807,
            -1.1474766731262207,
            0.6186696887016296,
            -0.08798693120479584,
        ];
        assert_eq!(run(&like, std::slice::from_ref(&x)), want);
        let bernoulli =
            model("Bernoulli", &[("seed", f(11.0)), ("dtype", Attr::Int(7))], Some((&[3, 4], symbolic)), INT64);
        assert_eq!(run(&bernoulli, &[x]), [0., 0., 0., 0., 0., 0., 1., 1., 0., 0., 1., 1.]);
    }
}

#[test]
fn unseeded_draws_differ_from_run_to_run_and_follow_their_law() {
    let shape = [64i64, 64];
    let uniform = model(
        "RandomUniformLike",
        &[("low", Attr::Float(2.0)), ("high", Attr::Float(3.0))],
        Some((&shape, true)),
        FLOAT,
    );
    let normal = model("RandomNormal", &[("shape", Attr::Ints(shape.to_vec()))], None, FLOAT);
    let x = probabilities(&shape);
    for (m, inputs, (lo, hi), (mean, sd)) in
        [(&uniform, vec![x], (2.0, 3.0), (2.5, 0.2887)), (&normal, vec![], (-6.0, 6.0), (0.0, 1.0))]
    {
        let mut s = session(m);
        let a = harness::run(&mut s, &inputs).expect("runs")[0].data.clone();
        let b = harness::run(&mut s, &inputs).expect("runs")[0].data.clone();
        assert_ne!(a, b, "an unseeded node draws anew each Run");
        let n = a.len() as f64;
        let m1 = a.iter().sum::<f64>() / n;
        let sd1 = (a.iter().map(|v| (v - m1) * (v - m1)).sum::<f64>() / n).sqrt();
        // 4096 draws: the mean's standard error is sd / 64; these bounds are 6 of them.
        assert!((m1 - mean).abs() < 6.0 * sd / 64.0 && (sd1 / sd - 1.0).abs() < 0.1, "mean {m1}, sd {sd1}");
        assert!(a.iter().all(|v| (lo..hi).contains(v)), "a draw outside [{lo}, {hi})");
    }
}

#[test]
fn a_probability_outside_zero_to_one_names_the_node_and_the_session_runs_on() {
    let m = model("Bernoulli", &[("seed", Attr::Float(1.0))], Some((&[2, 3], false)), FLOAT);
    let mut s = session(&m);
    for bad in [1.5f32, -0.25, f32::NAN] {
        let x = HostTensor::f32("x", &[2, 3], vec![0.5, 0.5, bad, 0.5, 0.5, 0.5]);
        let err = harness::run(&mut s, &[x]).expect_err("a bad probability fails");
        assert!(err.contains("draw") && err.contains("outside [0, 1]"), "{err}");
    }
    let x = HostTensor::typed("x", E::Float32, &[2, 3], vec![0.0, 1.0, 0.0, 1.0, 1.0, 0.0]);
    let y = harness::run(&mut s, &[x]).expect("the session still runs");
    assert_eq!(y[0].data, [0.0, 1.0, 0.0, 1.0, 1.0, 0.0], "p = 0 never draws 1, p = 1 always does");
}
