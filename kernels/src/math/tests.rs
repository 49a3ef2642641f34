//! Unit tests of the building blocks, for both the fused (`F = true`, run
//! here through libm's `fmaf`) and the unfused variants.

use super::erf::{erfc_split, neg_square};
use super::*;
use crate::reference;

const ULP1: f64 = 1.192_092_895_507_812_5e-7;

#[test]
fn ln2_split_is_exact_enough() {
    let hi = f64::from(LN2_HI);
    // n * LN2_HI exact for |n| <= 256: LN2_HI has at most 15 significant bits.
    assert_eq!(LN2_HI.to_bits() & 0x1ff, 0);
    let sum = hi + f64::from(LN2_LO);
    assert!((sum - std::f64::consts::LN_2).abs() < 1e-13);
}

/// erf: at most 1.5e-7 absolute error against the f64 erf (not rounded to
/// f32) on a dense grid, and exactly ±1 far out.
fn erf_abs_error<const F: bool>() {
    let mut worst = 0.0f64;
    for i in 0..=240_000 {
        let x = -6.0 + i as f32 * (12.0 / 240_000.0);
        let err = (f64::from(erf::<F>(x)) - reference::erf(f64::from(x))).abs();
        worst = worst.max(err);
    }
    assert!(worst <= 1.5e-7, "erf<{F}> max abs error {worst:e}");
    assert_eq!(erf::<F>(4.0), 1.0);
    assert_eq!(erf::<F>(-1e30), -1.0);
    assert_eq!(erf::<F>(f32::INFINITY), 1.0);
}

#[test]
fn erf_abs_error_both() {
    erf_abs_error::<false>();
    erf_abs_error::<true>();
}

/// The erfc used by Gelu keeps its relative accuracy while the result is a
/// normal f32: within 4 * 2^-23 relative error.
fn erfc_rel_error<const F: bool>() {
    let mut worst = 0.0f64;
    for i in 0..=200_000 {
        let a = i as f32 * (9.1 / 200_000.0);
        let got = f64::from(erfc_split::<F>(a, neg_square::<F>(a, 1.0)));
        let want = reference::erfc(f64::from(a));
        worst = worst.max((got / want - 1.0).abs());
    }
    assert!(worst <= 4.0 * ULP1, "erfc<{F}> max rel error {worst:e}");
}

#[test]
fn erfc_rel_error_both() {
    erfc_rel_error::<false>();
    erfc_rel_error::<true>();
}

fn edges<const F: bool>() {
    assert_eq!(exp::<F>(0.0), 1.0);
    assert_eq!(exp::<F>(89.0), f32::INFINITY);
    assert!(exp::<F>(88.72).is_finite());
    assert_eq!(exp::<F>(-104.0), 0.0);
    assert!(exp::<F>(-103.0) > 0.0); // subnormal, not flushed
    assert_eq!(exp_small::<F, 6>(-104.0), 0.0);
    assert_eq!(exp_small::<F, 6>(0.0), 1.0);
    assert_eq!(exp_small::<F, 6>(-f32::INFINITY), 0.0);
    assert!(exp_small::<F, 6>(-103.0) > 0.0);
    assert!(exp_small::<F, 6>(f32::NAN).is_nan() && exp::<F>(f32::NAN).is_nan());
    assert_eq!(expm1_neg::<F>(-0.0).to_bits(), (-0.0f32).to_bits());
    assert_eq!(expm1_neg::<F>(0.0).to_bits(), 0.0f32.to_bits());
    assert_eq!(expm1_neg::<F>(1e30).to_bits(), 0.0f32.to_bits());
    assert_eq!(expm1_neg::<F>(-1e30), -1.0);
    assert_eq!(expm1_neg::<F>(-f32::INFINITY), -1.0);
    assert!(expm1_neg::<F>(f32::NAN).is_nan());
    assert_eq!(ln::<F>(1.0), 0.0);
    assert_eq!(ln::<F>(f32::from_bits(1)), -103.278_93);
    assert_eq!(ln_1p::<F>(1e-30), 1e-30);
    assert_eq!(ln_1p::<F>(f32::INFINITY), f32::INFINITY);
}

#[test]
fn edges_both() {
    edges::<false>();
    edges::<true>();
}

/// `exp` and `exp_small` agree wherever both apply, through the subnormals.
#[test]
fn exp_variants_agree() {
    for i in 0..=20_000 {
        let x = -104.0 + i as f32 * (174.0 / 20_000.0);
        assert_eq!(exp::<true>(x).to_bits(), exp_small::<true, 6>(x).to_bits(), "{x}");
        assert_eq!(exp::<false>(x).to_bits(), exp_small::<false, 6>(x).to_bits(), "{x}");
    }
}

/// The unclamped `exp_fast` equals `exp` and `exp_small` wherever it may be
/// used.
#[test]
fn exp_fast_matches_exp() {
    for i in 0..=200_000 {
        let x = -87.0 + i as f32 * (174.0 / 200_000.0);
        for x in [x, x.next_up(), x.next_down()] {
            if x.abs() <= 87.0 {
                assert_eq!(exp_fast::<true, 6>(x).to_bits(), exp::<true>(x).to_bits(), "{x}");
                assert_eq!(exp_fast::<false, 6>(x).to_bits(), exp::<false>(x).to_bits(), "{x}");
            }
            if x.abs() <= 87.0 && x <= 70.0 {
                assert_eq!(exp_fast::<true, 6>(x).to_bits(), exp_small::<true, 6>(x).to_bits(), "{x}");
                assert_eq!(exp_fast::<true, 5>(x).to_bits(), exp_small::<true, 5>(x).to_bits(), "{x}");
                assert_eq!(exp_fast::<false, 5>(x).to_bits(), exp_small::<false, 5>(x).to_bits(), "{x}");
            }
        }
    }
}
