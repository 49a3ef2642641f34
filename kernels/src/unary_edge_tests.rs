//! Special values, memory layouts and panics of the unary kernels.

use crate::unary_tests::all_ops;
use crate::{Level, UnaryOp};

/// Same bits, or both NaN: NaN payloads and signs are not part of the
/// contract (x86 propagates the first operand's NaN, and LLVM may commute).
fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn apply1(level: Level, op: UnaryOp, x: f32) -> f32 {
    let mut y = [0.0];
    op.apply_at(level, &[x], &mut y);
    y[0]
}

/// The special values, at every level this CPU has.
#[test]
fn special_values() {
    for level in Level::supported() {
        special_values_at(level);
    }
}

fn special_values_at(level: Level) {
    use UnaryOp::*;
    let apply1 = |op, x| apply1(level, op, x);
    let (inf, nan) = (f32::INFINITY, f32::NAN);
    for op in all_ops() {
        if matches!(op, ThresholdedRelu { .. }) {
            assert_eq!(apply1(op, nan), 0.0, "ThresholdedRelu(NaN) is 0, as in ORT");
        } else {
            assert!(apply1(op, nan).is_nan(), "{op:?}(NaN) must be NaN");
        }
    }
    // inf * 0 in the defining formula gives NaN, as in ORT.
    for (op, x) in [(Softsign, inf), (Softsign, -inf), (HardSwish, -inf), (Mish, -inf), (Gelu, -inf), (GeluTanh, -inf)]
    {
        assert!(apply1(op, x).is_nan(), "{op:?}({x}) must be NaN");
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
        (HardSwish, inf, inf),
        (Elu { alpha: 1.0 }, -inf, -1.0),
        (Celu { alpha: 2.0 }, -inf, -2.0),
        (Mish, inf, inf),
        (Gelu, inf, inf),
        (Gelu, -1e30, 0.0),
        (GeluTanh, inf, inf),
        (GeluTanh, 1e30, 1e30),
    ];
    for (op, x, want) in cases {
        assert_eq!(apply1(op, x), want, "{level:?} {op:?}({x:e})");
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

/// Inputs for the layout tests: specials (NaN, infinities, signed zeros,
/// subnormals, huge and overflowing magnitudes) among a spread of finite
/// values.
fn mixed(n: usize) -> Vec<f32> {
    let specials =
        [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 1e-40, 1e30, -1e-45, -1e30, 88.9, -104.5, 0.0, f32::MAX];
    (0..n)
        .map(|i| {
            if i % 7 == 5 {
                specials[(i / 7) % specials.len()]
            } else {
                ((i as f32) * 0.618_034).sin() * (1.0 + (i % 13) as f32 * 3.0)
            }
        })
        .collect()
}

/// At every level: `apply`, `apply_inplace` and one-element calls agree bit
/// for bit (NaNs as NaNs), for every length up to 67 (vector bodies of 4, 8 and 16 lanes,
/// unrolled, and every tail) and a long one, also on unaligned sub-slices.
#[test]
fn layouts_agree_bitwise() {
    let lens: Vec<usize> = (0..=67).chain([1000]).collect();
    for level in Level::supported() {
        for op in all_ops() {
            for &n in &lens {
                let x = mixed(n);
                let mut y = vec![0.0; n];
                op.apply_at(level, &x, &mut y);
                let mut z = x.clone();
                op.apply_inplace_at(level, &mut z);
                for i in 0..n {
                    let single = apply1(level, op, x[i]);
                    assert!(same(y[i], z[i]), "{level:?} {op:?} in place, n={n}, i={i}");
                    assert!(same(y[i], single), "{level:?} {op:?} single, n={n}, i={i}");
                }
                if n > 3 {
                    let mut w = vec![0.0; n - 3];
                    op.apply_at(level, &x[3..], &mut w);
                    for (a, b) in w.iter().zip(&y[3..]) {
                        assert!(same(*a, *b), "{level:?} {op:?} offset, n={n}");
                    }
                }
            }
        }
    }
}

/// Long inputs of moderate values with one special value: blocks without it
/// may take a kernel's fast path (`map_guarded!`), the block with it the
/// safe one; every element still matches its one-element call bit for bit.
#[test]
fn guarded_blocks_agree() {
    for level in Level::supported() {
        for op in all_ops() {
            for (n, at, special) in [(1000, 600, f32::NAN), (777, 3, f32::INFINITY), (600, 599, -100.0), (300, 0, 88.0)]
            {
                let mut x: Vec<f32> = (0..n).map(|i| ((i as f32) * 0.618_034).sin() * 40.0).collect();
                x[at] = special;
                let mut y = vec![0.0; n];
                op.apply_at(level, &x, &mut y);
                let mut z = x.clone();
                op.apply_inplace_at(level, &mut z);
                for i in 0..n {
                    let single = apply1(level, op, x[i]);
                    assert!(same(y[i], single), "{level:?} {op:?} n={n}, x={:e}", x[i]);
                    assert!(same(z[i], single), "{level:?} {op:?} in place n={n}, x={:e}", x[i]);
                }
            }
        }
    }
}

/// The public entry points run the detected level; the AVX2 and AVX-512
/// builds evaluate the same fused operations, so they agree bit for bit
/// (the portable build may differ in the last bit, within the bounds).
#[test]
fn levels_agree() {
    let x = mixed(1000);
    let levels = Level::supported();
    for op in all_ops() {
        let mut want = vec![0.0; x.len()];
        op.apply(&x, &mut want);
        let mut got = vec![0.0; x.len()];
        op.apply_at(Level::detected(), &x, &mut got);
        assert!(want.iter().zip(&got).all(|(a, b)| same(*a, *b)), "{op:?} detected level");
        if levels.contains(&Level::Avx512) {
            op.apply_at(Level::Avx2, &x, &mut want);
            op.apply_at(Level::Avx512, &x, &mut got);
            for (i, (a, b)) in want.iter().zip(&got).enumerate() {
                assert!(same(*a, *b), "{op:?} avx2 vs avx512 at x = {:e}", x[i]);
            }
        }
    }
}

#[test]
#[should_panic(expected = "lengths differ")]
fn apply_length_mismatch_panics() {
    UnaryOp::Relu.apply(&[1.0, 2.0], &mut [0.0]);
}
