//! Accuracy and consistency tests of the unary kernels against the f64
//! references.

use crate::{Level, UnaryOp};

/// Smallest normal f32 (2^-126): relative errors of subnormal results are
/// measured against it.
const MIN_NORMAL: f64 = 1.175_494_350_822_287_5e-38;
/// One f32 ulp at 1.0 (2^-23).
const ULP1: f64 = 1.192_092_895_507_812_5e-7;

/// Pinned error bound per op (the maximum measured error is 50-90% of it):
///
/// `|apply(x) - reference(x)| <= abs + rel * max(|reference(x)|, MIN_NORMAL)`
///
/// for every swept `x`, where `reference` is the f64 result rounded to f32 and
/// infinities count as ±2^128 (so a result next to the overflow threshold is
/// judged by its relative error). NaN must match NaN exactly. `rel` is in
/// units of 2^-23, i.e. `1.0 * ULP1` is between 1 and 2 ulp of the result.
///
/// The `abs` terms cover errors that are absolute by nature:
/// * HardSigmoid / HardSwish: rounding of `alpha * x` before the cancellation
///   with `beta` (ONNX Runtime evaluates the same expression).
/// * Mish / Gelu: a subnormal intermediate (`e^x`, `erfc`) multiplied by `x`
///   (up to ~100x the last subnormal bit, i.e. < 2e-43).
/// * GeluTanh: `exp` of the rounded f32 argument `-2u`, `|u|` up to ~100, so
///   the relative error grows as the result vanishes (absolute stays < 3e-8).
const BOUNDS: &[(&str, f64, f64)] = &[
    ("Relu", 0.0, 0.0),
    ("Sigmoid", 0.0, 2.5 * ULP1),
    ("Tanh", 0.0, 2.5 * ULP1),
    ("Erf", 0.0, 2.5 * ULP1),
    ("Exp", 0.0, 1.5 * ULP1),
    ("Log", 0.0, 1.5 * ULP1),
    ("Sqrt", 0.0, 0.0),
    ("Abs", 0.0, 0.0),
    ("Neg", 0.0, 0.0),
    ("Reciprocal", 0.0, 0.0),
    ("Floor", 0.0, 0.0),
    ("Ceil", 0.0, 0.0),
    ("Softplus", 0.0, 2.5 * ULP1),
    ("Softsign", 0.0, 1.5 * ULP1),
    ("HardSigmoid", 0.5 * ULP1, 0.5 * ULP1),
    ("HardSwish", 1.0 * ULP1, 1.5 * ULP1),
    ("LeakyRelu", 0.0, 0.0),
    ("Elu", 0.0, 1.5 * ULP1),
    ("Selu", 0.0, 1.5 * ULP1),
    ("Celu", 0.0, 2.0 * ULP1),
    ("ThresholdedRelu", 0.0, 0.0),
    ("Mish", 2e-43, 2.5 * ULP1),
    ("Gelu", 2e-43, 4.0 * ULP1),
    ("GeluTanh", 3e-8, 2.5 * ULP1),
];

const SELU_ALPHA: f32 = 1.673_263_2;
const SELU_GAMMA: f32 = 1.050_701;

/// Every op, with ONNX default attributes and with a second attribute set.
pub(crate) fn all_ops() -> Vec<UnaryOp> {
    use UnaryOp::*;
    vec![
        Relu,
        Sigmoid,
        Tanh,
        Erf,
        Exp,
        Log,
        Sqrt,
        Abs,
        Neg,
        Reciprocal,
        Floor,
        Ceil,
        Softplus,
        Softsign,
        HardSigmoid { alpha: 0.2, beta: 0.5 },
        HardSigmoid { alpha: -0.7, beta: 0.1 },
        HardSwish,
        LeakyRelu { alpha: 0.01 },
        LeakyRelu { alpha: 0.3 },
        Elu { alpha: 1.0 },
        Elu { alpha: 0.35 },
        Selu { alpha: SELU_ALPHA, gamma: SELU_GAMMA },
        Selu { alpha: 2.0, gamma: 0.5 },
        Celu { alpha: 1.0 },
        Celu { alpha: 2.5 },
        Celu { alpha: 0.5 },
        ThresholdedRelu { alpha: 1.0 },
        ThresholdedRelu { alpha: -2.5 },
        Mish,
        Gelu,
        GeluTanh,
    ]
}

fn name(op: &UnaryOp) -> String {
    let dbg = format!("{op:?}");
    dbg.split(' ').next().unwrap_or_default().to_string()
}

fn bound(op: &UnaryOp) -> (f64, f64) {
    let n = name(op);
    let (_, abs, rel) = BOUNDS.iter().find(|(k, _, _)| *k == n).unwrap_or_else(|| panic!("no bound pinned for {n}"));
    (*abs, *rel)
}

/// Special values, then a dense sweep of [-20, 20], a coarse one of [-120, 120],
/// log-spaced magnitudes over the whole f32 range and the neighbourhood of 1.
fn sweep_inputs() -> Vec<f32> {
    let mut xs = vec![
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        0.0,
        -0.0,
        1e-40,
        -1e-40,
        1e-45,
        -1e-45,
        f32::MIN_POSITIVE,
        -f32::MIN_POSITIVE,
        1e30,
        -1e30,
        f32::MAX,
        f32::MIN,
        88.72,
        88.73,
        -87.33,
        -103.9,
        -104.0,
        0.5,
        -0.5,
        2.5,
        -2.5,
        8_388_607.5,
        -8_388_607.5,
    ];
    xs.extend((0..=20_000).map(|i| -20.0 + i as f32 * 0.002));
    xs.extend((0..=4_000).map(|i| -120.0 + i as f32 * 0.06));
    for i in 0..=1_660 {
        let m = 10f64.powf(-45.0 + f64::from(i) * 0.05) as f32;
        xs.extend([m, -m]);
    }
    for k in 1..=200 {
        let d = k as f32 * f32::EPSILON * 0.5;
        xs.extend([1.0 + d, 1.0 - d]);
    }
    xs
}

/// Worst ratio `error / allowed` of `op.apply_at(level)` against
/// `reference_op.reference` over `xs` (a NaN mismatch counts as infinity),
/// with the input where it occurs. Passing means a ratio <= 1.
fn worst(level: Level, op: &UnaryOp, reference_op: &UnaryOp, xs: &[f32], (abs, rel): (f64, f64)) -> (f64, f32) {
    const TWO_128: f64 = 3.402_823_669_209_385e38;
    let fin = |v: f64| {
        if v.is_infinite() {
            TWO_128.copysign(v)
        } else {
            v
        }
    };
    let mut ys = vec![0.0; xs.len()];
    op.apply_at(level, xs, &mut ys);
    let mut worst = (0.0, 0.0);
    for (&x, &y) in xs.iter().zip(&ys) {
        let want = reference_op.reference(f64::from(x));
        let got = f64::from(y);
        let ratio = if want.is_nan() || got.is_nan() {
            if want.is_nan() == got.is_nan() {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            let err = (fin(got) - fin(want)).abs();
            let allowed = abs + rel * fin(want).abs().max(MIN_NORMAL);
            if err == 0.0 {
                0.0
            } else if allowed == 0.0 {
                f64::INFINITY
            } else {
                err / allowed
            }
        };
        if ratio > worst.0 {
            worst = (ratio, x);
        }
    }
    worst
}

/// Every level this CPU has, each against the f64 reference.
#[test]
fn sweep_within_pinned_bounds() {
    let xs = sweep_inputs();
    for level in Level::supported() {
        for op in all_ops() {
            let (ratio, x) = worst(level, &op, &op, &xs, bound(&op));
            assert!(ratio <= 1.0, "{level:?} {op:?}: error {ratio:.3} x the pinned bound at x = {x:e}");
        }
    }
}

/// Prints the measured worst error of every op at every level as a fraction
/// of its pinned bound (`cargo test -p rivet-kernels -- --ignored --nocapture
/// error_report`).
#[test]
#[ignore]
fn error_report() {
    let xs = sweep_inputs();
    for op in all_ops() {
        let line: Vec<String> = Level::supported()
            .into_iter()
            .map(|level| {
                let (ratio, x) = worst(level, &op, &op, &xs, bound(&op));
                format!("{}: {ratio:.3} at {x:e}", level.name())
            })
            .collect();
        println!("{:<45} {}", format!("{op:?}"), line.join("   "));
    }
}

#[test]
fn bound_table_matches_ops() {
    let names: Vec<String> = all_ops().iter().map(name).collect();
    for (i, (n, abs, rel)) in BOUNDS.iter().enumerate() {
        assert!(names.iter().any(|m| m == n), "bound for unknown op {n}");
        assert!(BOUNDS[..i].iter().all(|(m, _, _)| m != n), "duplicate bound {n}");
        assert!(*abs <= ULP1 && *rel <= 4.0 * ULP1, "{n}: bound too loose");
    }
}

/// The checker is not vacuous: a kernel run with wrong attributes (or the
/// wrong formula) is caught against the reference of the intended op.
#[test]
fn sweep_detects_wrong_attributes() {
    use UnaryOp::*;
    let xs = sweep_inputs();
    let pairs = [
        (LeakyRelu { alpha: 0.02 }, LeakyRelu { alpha: 0.01 }),
        (HardSigmoid { alpha: 0.2, beta: 0.45 }, HardSigmoid { alpha: 0.2, beta: 0.5 }),
        (HardSigmoid { alpha: 0.25, beta: 0.5 }, HardSigmoid { alpha: 0.2, beta: 0.5 }),
        (Elu { alpha: 1.001 }, Elu { alpha: 1.0 }),
        (Selu { alpha: SELU_ALPHA, gamma: 1.05 }, Selu { alpha: SELU_ALPHA, gamma: SELU_GAMMA }),
        (Selu { alpha: 1.673_264, gamma: SELU_GAMMA }, Selu { alpha: SELU_ALPHA, gamma: SELU_GAMMA }),
        (Celu { alpha: 1.1 }, Celu { alpha: 1.0 }),
        (ThresholdedRelu { alpha: 1.5 }, ThresholdedRelu { alpha: 1.0 }),
        (GeluTanh, Gelu),
        (Gelu, GeluTanh),
        (Softplus, Mish),
        (Floor, Ceil),
    ];
    for level in Level::supported() {
        for (used, intended) in pairs {
            let (ratio, _) = worst(level, &used, &intended, &xs, bound(&intended));
            assert!(ratio > 1.0, "{level:?} {used:?} passed as {intended:?}");
        }
    }
}

/// Celu with a negative `alpha` (where `x / alpha > 0` matters): the f32
/// quotient `u = x / alpha` carries a rounding error that `e^u` magnifies by
/// `u`, as in ORT, so this is checked against the f64 formula evaluated at
/// that f32 `u`.
#[test]
fn celu_negative_alpha() {
    let alpha = -1.5f32;
    for level in Level::supported() {
        let xs = sweep_inputs();
        let mut ys = vec![0.0; xs.len()];
        UnaryOp::Celu { alpha }.apply_at(level, &xs, &mut ys);
        for (&x, &y) in xs.iter().zip(&ys) {
            if x.is_nan() {
                assert!(y.is_nan(), "{level:?} Celu(-1.5)(NaN) = {y:e}");
                continue;
            }
            let u = f64::from(x / alpha);
            let want = (f64::from(x).max(0.0) + (f64::from(alpha) * u.exp_m1()).min(0.0)) as f32;
            if want.is_nan() || y.is_nan() {
                assert_eq!(want.is_nan(), y.is_nan(), "{level:?} Celu(-1.5)({x:e}) = {y:e}, want {want:e}");
                continue;
            }
            let err = (f64::from(y) - f64::from(want)).abs();
            let allowed = 2.0 * ULP1 * f64::from(want).abs().max(MIN_NORMAL);
            assert!(err <= allowed || y == want, "{level:?} Celu(-1.5)({x:e}) = {y:e}, want {want:e}");
        }
    }
}
