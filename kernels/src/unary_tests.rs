//! Accuracy and consistency tests of the unary kernels against the f64
//! references.

use crate::UnaryOp;

/// Smallest positive subnormal f32 (2^-149).
const TINY: f64 = 1.401_298_464_324_817e-45;
/// Smallest normal f32 (2^-126): relative errors of subnormal results are
/// measured against it.
const MIN_NORMAL: f64 = 1.175_494_350_822_287_5e-38;
/// One f32 ulp at 1.0 (2^-23).
const ULP1: f64 = 1.192_092_895_507_812_5e-7;

/// Pinned error bound per op: `|apply(x) - reference(x)| <= abs + rel * |reference(x)|`
/// for every swept `x`, where `reference` is the f64 result rounded to f32 and
/// infinities count as ±2^128 (so a result next to the overflow threshold is
/// judged by its relative error). NaN must match NaN exactly.
///
/// `abs = TINY` only forgives the last subnormal bit; larger `abs` terms are
/// for ops whose error is naturally absolute (erf, and the erf/ulp(1)-limited
/// parts of Gelu and HardSwish).
const BOUNDS: &[(&str, f64, f64)] = &[
    ("Relu", 0.0, 0.0),
    ("Sigmoid", 0.0, 2.5 * ULP1),
    ("Tanh", 0.0, 2.0 * ULP1),
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
fn all_ops() -> Vec<UnaryOp> {
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
    let (_, abs, rel) = BOUNDS
        .iter()
        .find(|(k, _, _)| *k == n)
        .unwrap_or_else(|| panic!("no bound pinned for {n}"));
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

/// Worst ratio `error / allowed` of `op.apply` against `reference_op.reference`
/// over `xs` (a NaN mismatch counts as infinity), with the input where it
/// occurs. Passing means a ratio <= 1.
fn worst(op: &UnaryOp, reference_op: &UnaryOp, xs: &[f32], (abs, rel): (f64, f64)) -> (f64, f32) {
    const TWO_128: f64 = 3.402_823_669_209_385e38;
    let fin = |v: f64| if v.is_infinite() { TWO_128.copysign(v) } else { v };
    let mut ys = vec![0.0; xs.len()];
    op.apply(xs, &mut ys);
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

#[test]
fn sweep_within_pinned_bounds() {
    let xs = sweep_inputs();
    for op in all_ops() {
        let (ratio, x) = worst(&op, &op, &xs, bound(&op));
        assert!(ratio <= 1.0, "{op:?}: error {ratio:.3} x the pinned bound at x = {x:e}");
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
    for (used, intended) in pairs {
        let (ratio, _) = worst(&used, &intended, &xs, bound(&intended));
        assert!(ratio > 1.0, "{used:?} passed as {intended:?}");
    }
}

fn apply1(op: UnaryOp, x: f32) -> f32 {
    let mut y = [0.0];
    op.apply(&[x], &mut y);
    y[0]
}

#[test]
fn special_values() {
    use UnaryOp::*;
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    for op in all_ops() {
        assert!(apply1(op, nan).is_nan(), "{op:?}(NaN) must be NaN");
    }
    let cases = [
        (Relu, -1.0, 0.0),
        (Sigmoid, -1000.0, 0.0),
        (Sigmoid, 1000.0, 1.0),
        (Sigmoid, -inf, 0.0),
        (Sigmoid, inf, 1.0),
        (Tanh, inf, 1.0),
        (Tanh, -inf, -1.0),
        (Tanh, 1e-40, 1e-40),
        (Erf, -inf, -1.0),
        (Exp, -inf, 0.0),
        (Exp, 100.0, inf),
        (Log, 0.0, -inf),
        (Log, inf, inf),
        (Softplus, -inf, 0.0),
        (Softplus, inf, inf),
        (Softplus, 1e30, 1e30),
        (Softsign, inf, 1.0),
        (Softsign, -inf, -1.0),
        (HardSwish, inf, inf),
        (HardSwish, -inf, 0.0),
        (Elu { alpha: 1.0 }, -inf, -1.0),
        (Celu { alpha: 2.0 }, -inf, -2.0),
        (Mish, -inf, 0.0),
        (Mish, inf, inf),
        (Gelu, -inf, 0.0),
        (Gelu, inf, inf),
        (Gelu, -1e30, 0.0),
        (GeluTanh, -inf, 0.0),
        (GeluTanh, inf, inf),
        (GeluTanh, 1e30, 1e30),
    ];
    for (op, x, want) in cases {
        assert_eq!(apply1(op, x), want, "{op:?}({x:e})");
    }
    for x in [-1.0, -1e-40, -inf] {
        assert!(apply1(Log, x).is_nan() && apply1(Sqrt, x).is_nan(), "Log/Sqrt({x})");
    }
    // Sign of zero for rounding.
    let bits = |op, x| apply1(op, x).to_bits();
    assert_eq!(bits(Floor, -0.0), (-0.0f32).to_bits());
    assert_eq!(bits(Ceil, -0.5), (-0.0f32).to_bits());
    assert_eq!(bits(Ceil, 0.5), 1.0f32.to_bits());
    assert_eq!(bits(Floor, -0.5), (-1.0f32).to_bits());
    assert_eq!(bits(Floor, 0.999_999_94), 0.0f32.to_bits());
    assert_eq!(bits(Floor, -8_388_607.5), (-8_388_608.0f32).to_bits());
    assert_eq!(bits(Ceil, 1e30), 1e30f32.to_bits());
}

/// Inputs for the layout tests: specials and a spread of finite values.
fn mixed(n: usize) -> Vec<f32> {
    let specials = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 1e-40, 1e30];
    (0..n)
        .map(|i| {
            if i % 11 == 5 {
                specials[(i / 11) % specials.len()]
            } else {
                ((i as f32) * 0.618_034).sin() * (1.0 + (i % 13) as f32 * 3.0)
            }
        })
        .collect()
}

/// `apply`, `apply_inplace` and one-element calls agree bit for bit, for
/// lengths that exercise the vector body and every tail length.
#[test]
fn layouts_agree_bitwise() {
    for op in all_ops() {
        for n in [0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 64, 1000] {
            let x = mixed(n);
            let mut y = vec![0.0; n];
            op.apply(&x, &mut y);
            let mut z = x.clone();
            op.apply_inplace(&mut z);
            for i in 0..n {
                let single = apply1(op, x[i]);
                assert_eq!(y[i].to_bits(), z[i].to_bits(), "{op:?} in place, n={n}, i={i}");
                assert_eq!(y[i].to_bits(), single.to_bits(), "{op:?} single, n={n}, i={i}");
            }
            // Unaligned sub-slices.
            if n > 3 {
                let mut w = vec![0.0; n - 3];
                op.apply(&x[3..], &mut w);
                for (a, b) in w.iter().zip(&y[3..]) {
                    assert_eq!(a.to_bits(), b.to_bits(), "{op:?} offset, n={n}");
                }
            }
        }
    }
}

#[test]
#[should_panic(expected = "lengths differ")]
fn apply_length_mismatch_panics() {
    UnaryOp::Relu.apply(&[1.0, 2.0], &mut [0.0]);
}
