//! Tests of broadcasting plans and the binary kernels.

use crate::{binary_f32, binary_f32_at, BinaryOp, Broadcast, BroadcastError, BroadcastKind, Level};

const OPS: [BinaryOp; 7] =
    [BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div, BinaryOp::Pow, BinaryOp::Max, BinaryOp::Min];

#[test]
fn out_shapes() {
    let ok: &[(&[usize], &[usize], &[usize])] = &[
        (&[], &[], &[]),
        (&[], &[3], &[3]),
        (&[3], &[], &[3]),
        (&[2, 3], &[3], &[2, 3]),
        (&[2, 1, 4], &[3, 1], &[2, 3, 4]),
        (&[3, 1], &[2, 1, 4], &[2, 3, 4]),
        (&[0, 3], &[1, 3], &[0, 3]),
        (&[0], &[0], &[0]),
        (&[1, 0], &[5, 1], &[5, 0]),
        (&[4, 1, 1], &[1, 5, 6], &[4, 5, 6]),
        (&[1, 1, 7], &[7], &[1, 1, 7]),
    ];
    for &(a, b, out) in ok {
        let p = Broadcast::new(a, b).unwrap_or_else(|e| panic!("{a:?} {b:?}: {e}"));
        assert_eq!(p.out_shape(), out, "{a:?} with {b:?}");
        assert_eq!(p.out_len(), out.iter().product::<usize>());
    }
}

#[test]
fn mismatch_errors() {
    let e = Broadcast::new(&[2, 3], &[4]).unwrap_err();
    assert_eq!(e, BroadcastError { a: vec![2, 3], b: vec![4], axis: 1 });
    assert_eq!(e.to_string(), "shapes [2, 3] and [4] cannot be broadcast (dimension -1: 3 vs 4)");
    let e = Broadcast::new(&[1, 2, 1], &[3, 3, 1]).unwrap_err();
    assert_eq!(e.axis, 1);
    assert_eq!(e.to_string(), "shapes [1, 2, 1] and [3, 3, 1] cannot be broadcast (dimension -2: 2 vs 3)");
    let e = Broadcast::new(&[3], &[7, 2, 4]).unwrap_err();
    assert_eq!(e.axis, 2);
    assert!(e.to_string().ends_with("(dimension -1: 3 vs 4)"));
    assert!(Broadcast::new(&[3], &[7, 2, 1]).is_ok());
    let e = Broadcast::new(&[0], &[2]).unwrap_err();
    assert_eq!(e.to_string(), "shapes [0] and [2] cannot be broadcast (dimension -1: 0 vs 2)");
    let boxed: Box<dyn std::error::Error> = Box::new(e);
    assert!(boxed.to_string().contains("cannot be broadcast"));
}

#[test]
fn kinds() {
    use BroadcastKind::*;
    let cases: &[(&[usize], &[usize], BroadcastKind)] = &[
        (&[2, 3], &[2, 3], SameShape),
        (&[2, 3], &[1, 2, 3], SameShape),
        (&[], &[], SameShape),
        (&[1], &[], SameShape),
        (&[], &[3], ScalarA),
        (&[1, 1], &[4, 5], ScalarA),
        (&[4, 5], &[1], ScalarB),
        (&[2, 3], &[3], General),
        (&[2, 1, 4], &[3, 1], General),
        (&[0, 3], &[1, 3], General),
    ];
    for &(a, b, kind) in cases {
        assert_eq!(Broadcast::new(a, b).unwrap().kind(), kind, "{a:?} with {b:?}");
    }
}

/// Deterministic inputs with a few special values mixed in.
fn data(n: usize, seed: u32) -> Vec<f32> {
    let specials = [f32::NAN, f32::INFINITY, -0.0, 2.0, 0.5];
    (0..n)
        .map(|i| {
            let h = (i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed.wrapping_mul(40_503));
            if h % 29 == 3 {
                specials[(h as usize / 29) % specials.len()]
            } else {
                (h % 2000) as f32 / 250.0 - 4.0
            }
        })
        .collect()
}

/// Naive reference: decode each flat output index into a multi-index and
/// map it into each input, clamping broadcast axes to 0.
fn naive(op: BinaryOp, sa: &[usize], sb: &[usize], a: &[f32], b: &[f32]) -> Vec<f32> {
    let plan = Broadcast::new(sa, sb).unwrap();
    let out = plan.out_shape().to_vec();
    let flat = |shape: &[usize], idx: &[usize]| {
        let lead = out.len() - shape.len();
        shape.iter().enumerate().fold(0, |acc, (j, &d)| {
            let i = if d == 1 { 0 } else { idx[lead + j] };
            acc * d + i
        })
    };
    (0..plan.out_len())
        .map(|k| {
            let mut idx = vec![0; out.len()];
            let mut rest = k;
            for d in (0..out.len()).rev() {
                idx[d] = rest % out[d];
                rest /= out[d];
            }
            op.scalar(a[flat(sa, &idx)], b[flat(sb, &idx)])
        })
        .collect()
}

fn same_bits(x: &[f32], y: &[f32]) -> bool {
    x.len() == y.len() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
}

/// Every level against the naive reference, bit for bit: whole outputs,
/// uneven chunks and every single-element range.
#[test]
fn binary_matches_naive_and_chunks() {
    let shapes: &[(&[usize], &[usize])] = &[
        (&[], &[]),
        (&[], &[5]),
        (&[7], &[]),
        (&[2, 3], &[2, 3]),
        (&[2, 3], &[3]),
        (&[3], &[2, 3]),
        (&[2, 1, 4], &[3, 1]),
        (&[3, 1], &[2, 1, 4]),
        (&[2, 3, 4, 5], &[3, 1, 1]),
        (&[2, 3, 4, 5], &[1, 3, 1, 5]),
        (&[4, 1, 6], &[1, 5, 1]),
        (&[1, 1, 9], &[4, 1, 1]),
        (&[5, 1, 1, 2], &[1, 3, 1, 2]),
        (&[17, 33], &[17, 1]),
        (&[1, 37], &[1, 37]),
        (&[0, 3], &[1, 3]),
        (&[6, 0], &[6, 1]),
    ];
    for level in Level::supported() {
        for &(sa, sb) in shapes {
            let plan = Broadcast::new(sa, sb).unwrap();
            let a = data(sa.iter().product(), 1);
            let b = data(sb.iter().product(), 2);
            let n = plan.out_len();
            for op in OPS {
                let want = naive(op, sa, sb, &a, &b);
                let mut whole = vec![0.0; n];
                binary_f32_at(level, op, &plan, &a, &b, &mut whole, 0);
                assert!(same_bits(&whole, &want), "{level:?} {op:?} {sa:?} {sb:?}");
                // Three uneven chunks (some may be empty for tiny outputs).
                let cuts = [0, n / 5, n / 5 + (n * 3) / 5 + 1, n];
                let cuts = cuts.map(|c| c.min(n));
                let mut chunked = vec![0.0; n];
                for w in cuts.windows(2) {
                    let (s, e) = (w[0], w[1].max(w[0]));
                    binary_f32_at(level, op, &plan, &a, &b, &mut chunked[s..e], s);
                }
                assert!(same_bits(&chunked, &whole), "{level:?} {op:?} {sa:?} {sb:?} chunked");
                // Every single-element range.
                for (k, w) in whole.iter().enumerate() {
                    let mut one = [0.0];
                    binary_f32_at(level, op, &plan, &a, &b, &mut one, k);
                    assert_eq!(one[0].to_bits(), w.to_bits(), "{level:?} {op:?} {sa:?} {sb:?} at {k}");
                }
            }
        }
    }
}

/// The contiguous, scalar-broadcast (either side) and row-broadcast fast
/// paths at every level and every length up to 67 (vector bodies and tails),
/// against the naive reference; the public entry point matches too.
#[test]
fn fast_paths_every_length() {
    for level in Level::supported() {
        for n in 0..=67usize {
            let cases: [(Vec<usize>, Vec<usize>); 5] = [
                (vec![n], vec![n]),
                (vec![n], vec![]),
                (vec![1], vec![n]),
                (vec![3, n], vec![n]),
                (vec![n, 3], vec![n, 1]),
            ];
            for (sa, sb) in &cases {
                let plan = Broadcast::new(sa, sb).unwrap();
                let a = data(sa.iter().product(), 3);
                let b = data(sb.iter().product(), 4);
                for op in OPS {
                    let want = naive(op, sa, sb, &a, &b);
                    let mut got = vec![0.0; plan.out_len()];
                    binary_f32_at(level, op, &plan, &a, &b, &mut got, 0);
                    assert!(same_bits(&got, &want), "{level:?} {op:?} {sa:?} {sb:?}");
                    binary_f32(op, &plan, &a, &b, &mut got, 0);
                    assert!(same_bits(&got, &want), "{op:?} {sa:?} {sb:?} (detected level)");
                }
            }
        }
    }
}

/// Long outputs, around the length where the byte-moving ops switch to 128-bit
/// vectors (`arch::dispatch::STREAM_MIN`), every level and fast path, against the
/// naive reference bit for bit.
#[test]
fn long_outputs_match_naive() {
    let m = crate::arch::STREAM_MIN;
    for level in Level::supported() {
        for n in [m - 1, m, 3 * m + 5] {
            let cases: [(Vec<usize>, Vec<usize>); 3] = [(vec![n], vec![n]), (vec![n], vec![]), (vec![], vec![n])];
            for (sa, sb) in &cases {
                let plan = Broadcast::new(sa, sb).unwrap();
                let a = data(sa.iter().product(), 5);
                let b = data(sb.iter().product(), 6);
                for op in OPS {
                    let want = naive(op, sa, sb, &a, &b);
                    let mut got = vec![0.0; plan.out_len()];
                    binary_f32_at(level, op, &plan, &a, &b, &mut got, 0);
                    assert!(same_bits(&got, &want), "{level:?} {op:?} {sa:?} {sb:?} n = {n}");
                }
            }
        }
    }
}

#[test]
fn max_min_propagate_nan() {
    let nan = f32::NAN;
    for op in [BinaryOp::Max, BinaryOp::Min] {
        assert!(op.scalar(nan, 1.0).is_nan() && op.scalar(1.0, nan).is_nan());
        assert!(op.scalar(nan, nan).is_nan());
        assert!(op.scalar(f32::INFINITY, nan).is_nan());
        let plan = Broadcast::new(&[4], &[4]).unwrap();
        let mut out = [0.0; 4];
        binary_f32(op, &plan, &[nan, 1.0, 2.0, nan], &[3.0, nan, 1.0, nan], &mut out, 0);
        assert!(out[0].is_nan() && out[1].is_nan() && out[3].is_nan(), "{op:?}");
        let plan = Broadcast::new(&[3], &[]).unwrap();
        binary_f32(op, &plan, &[1.0, 5.0, -2.0], &[nan], &mut out[..3], 0);
        assert!(out[..3].iter().all(|v| v.is_nan()), "{op:?} scalar NaN");
    }
    assert_eq!(BinaryOp::Max.scalar(-1.0, 3.0), 3.0);
    assert_eq!(BinaryOp::Min.scalar(-1.0, 3.0), -1.0);
    assert_eq!(BinaryOp::Max.scalar(f32::NEG_INFINITY, -3.0), -3.0);
}

#[test]
fn scalar_semantics() {
    assert_eq!(BinaryOp::Div.scalar(1.0, 0.0), f32::INFINITY);
    assert!(BinaryOp::Div.scalar(0.0, 0.0).is_nan());
    assert_eq!(BinaryOp::Pow.scalar(3.0, 2.0), 9.0);
    assert_eq!(BinaryOp::Pow.scalar(2.0, 0.5), 2f32.sqrt());
    assert_eq!(BinaryOp::Pow.scalar(-2.0, 3.0), -8.0);
    assert!(BinaryOp::Pow.scalar(-2.0, 0.5).is_nan());
    // Pow by a broadcast 2 takes the squaring fast path: same bits.
    let plan = Broadcast::new(&[5], &[1]).unwrap();
    let a = [1.5, -3.0, f32::NAN, 1e20, 4097.0];
    let mut out = [0.0; 5];
    binary_f32(BinaryOp::Pow, &plan, &a, &[2.0], &mut out, 0);
    for (x, y) in a.iter().zip(&out) {
        assert_eq!(y.to_bits(), BinaryOp::Pow.scalar(*x, 2.0).to_bits());
    }
    assert_eq!(out[3], f32::INFINITY);
}

#[test]
#[should_panic(expected = "`a` length")]
fn wrong_input_length_panics() {
    let plan = Broadcast::new(&[2, 3], &[3]).unwrap();
    binary_f32(BinaryOp::Add, &plan, &[0.0; 5], &[0.0; 3], &mut [0.0; 6], 0);
}

#[test]
#[should_panic(expected = "output range")]
fn out_of_range_panics() {
    let plan = Broadcast::new(&[2, 3], &[3]).unwrap();
    binary_f32(BinaryOp::Add, &plan, &[0.0; 6], &[0.0; 3], &mut [0.0; 4], 3);
}
