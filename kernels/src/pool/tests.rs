//! The pools against their tap-by-tap definition, at every instruction-set level.

use super::*;
use crate::conv::{outputs, taps};
use crate::Level;

/// The pools as they were, tap by tap: the definition the fast `pool` must match bit for
/// bit.
fn reference(x: &[f32], planes: usize, g: &Window3d, pool: Pool, pad_end: [usize; 3], y: &mut [f32]) {
    let (plane, positions) = (g.plane(), g.positions());
    for p in 0..planes {
        let src = &x[p * plane..(p + 1) * plane];
        let dst = &mut y[p * positions..(p + 1) * positions];
        for (i, o) in outputs(g).enumerate() {
            let mut acc = if pool == Pool::Max { f32::NEG_INFINITY } else { 0.0 };
            let (mut count, mut padded) = (0usize, 0usize);
            for k in taps(g) {
                match g.tap(o, k) {
                    Some(at) => {
                        let v = src[at];
                        acc = match pool {
                            Pool::Max => {
                                if v > acc || v.is_nan() {
                                    v
                                } else {
                                    acc
                                }
                            }
                            Pool::Average { .. } => acc + v,
                        };
                        count += 1;
                        padded += 1;
                    }
                    None => {
                        if (0..3).all(|a| g.in_padded(a, o[a], k[a], pad_end[a])) {
                            padded += 1;
                        }
                    }
                }
            }
            dst[i] = match pool {
                Pool::Max => acc,
                Pool::Average { count_pad: true } => acc / padded.max(1) as f32,
                Pool::Average { count_pad: false } => acc / count.max(1) as f32,
            };
        }
    }
}

/// Test values in [-2, 2).
fn values(n: usize, seed: u64) -> Vec<f32> {
    crate::test_values(n, seed).into_iter().map(|v| 2.0 * v).collect()
}

/// `pool` at `level`'s build.
fn pool_at(level: Level, x: &[f32], planes: usize, g: &Window3d, mode: Pool, pad_end: [usize; 3], y: &mut [f32]) {
    crate::arch::pool(crate::arch::isa_at(level), x, planes, g, mode, pad_end, y)
}

fn same_bits(got: &[f32], want: &[f32]) -> bool {
    got.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()))
}

#[test]
fn every_window_matches_the_tap_by_tap_definition_bit_for_bit_at_every_level() {
    let mut checked = 0;
    for level in Level::supported() {
        for (dims, len) in [(1, 41), (2, 37), (2, 70), (3, 5)] {
            // 2-D rows of 37 and 70 outputs: chunks of 16 lanes inside the row and at
            // its ends, with a masked tail; and planes of more rows than run together.
            for k in 1..=3 {
                for stride in 1..=3 {
                    for dil in 1..=2 {
                        for pad in 0..k {
                            // floor and ceil mode: one more output past the floor count.
                            for extra in 0..2 {
                                let Some(g) = Window3d::cube(dims, len, k, stride, dil, pad, extra) else {
                                    continue;
                                };
                                let pad_end = g.pad_begin;
                                let planes = 3;
                                let mut x = values(planes * g.plane(), (k * 7 + stride * 3 + dil) as u64);
                                // A NaN early in a plane and one late; zeros of both signs
                                // side by side, so a tie's winner shows in the sign.
                                let n = x.len();
                                x[g.plane() + 1] = f32::NAN;
                                x[n - 3] = f32::NAN;
                                for (i, v) in x.iter_mut().enumerate().skip(5).step_by(11) {
                                    *v = if i % 2 == 0 { 0.0 } else { -0.0 };
                                }
                                for mode in
                                    [Pool::Max, Pool::Average { count_pad: false }, Pool::Average { count_pad: true }]
                                {
                                    let mut want = vec![0.0; planes * g.positions()];
                                    let mut got = vec![f32::NAN; planes * g.positions()];
                                    reference(&x, planes, &g, mode, pad_end, &mut want);
                                    pool_at(level, &x, planes, &g, mode, pad_end, &mut got);
                                    assert!(same_bits(&got, &want), "{level:?} {mode:?} {g:?}: {got:?} != {want:?}");
                                    checked += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    assert!(checked > 500, "{checked}");
}

/// Windows covering the whole plane, unpadded, take `whole_plane` at every level and give
/// the definition's bits: 37 planes (two steps of 16 and a part), 1-D to 3-D, a NaN and
/// signed zeros among the values; a padded one, or one of two outputs, is refused.
#[test]
fn whole_plane_windows_take_their_path_with_the_definitions_bits() {
    for (dims, len) in [(1, 9), (2, 7), (3, 3)] {
        let g = Window3d::cube(dims, len, len, 1, 1, 0, 0).unwrap();
        let planes = 37;
        let mut x = values(planes * g.plane(), len as u64);
        x[3 * g.plane() + 2] = f32::NAN;
        for (i, v) in x.iter_mut().enumerate().skip(4).step_by(13) {
            *v = if i % 2 == 0 { 0.0 } else { -0.0 };
        }
        for mode in [Pool::Max, Pool::Average { count_pad: false }, Pool::Average { count_pad: true }] {
            let mut want = vec![0.0; planes];
            reference(&x, planes, &g, mode, [0; 3], &mut want);
            assert!(whole_plane(&x, planes, &g, mode, [0; 3], &mut vec![0.0; planes]), "{g:?}");
            for level in Level::supported() {
                let mut got = vec![f32::NAN; planes];
                pool_at(level, &x, planes, &g, mode, [0; 3], &mut got);
                assert!(same_bits(&got, &want), "{level:?} {mode:?} {g:?}: {got:?} != {want:?}");
            }
        }
    }
    // One window over a plane with padding or taps after it (Inception-v1's 7x7 on 6x6
    // planes padded by one after): count_pad divides by the taps in the padded input.
    for (input, kernel, pad_end) in
        [([1, 6, 6], [1, 7, 7], [0, 1, 1]), ([1, 3, 5], [1, 5, 6], [0, 1, 0]), ([2, 2, 3], [3, 2, 3], [0; 3])]
    {
        let g = Window3d { input, out: [1; 3], kernel, stride: [1; 3], dilation: [1; 3], pad_begin: [0; 3] };
        let planes = 19;
        let mut x = values(planes * g.plane(), 5);
        x[g.plane() + 1] = -0.0;
        for mode in [Pool::Max, Pool::Average { count_pad: false }, Pool::Average { count_pad: true }] {
            let mut want = vec![0.0; planes];
            reference(&x, planes, &g, mode, pad_end, &mut want);
            assert!(whole_plane(&x, planes, &g, mode, pad_end, &mut vec![0.0; planes]), "{g:?}");
            for level in Level::supported() {
                let mut got = vec![f32::NAN; planes];
                pool_at(level, &x, planes, &g, mode, pad_end, &mut got);
                assert!(same_bits(&got, &want), "{level:?} {mode:?} {g:?} {pad_end:?}: {got:?} != {want:?}");
            }
        }
    }
    let padded = Window3d::cube(2, 7, 7, 8, 1, 1, 0).unwrap();
    let two = Window3d::cube(2, 8, 7, 1, 1, 0, 0).unwrap();
    // One output whose window misses the plane's last row and column (stride 2).
    let short = Window3d { input: [1, 7, 7], out: [1; 3], kernel: [1, 6, 6], stride: [1, 2, 2], ..padded };
    let short = Window3d { pad_begin: [0; 3], ..short };
    for g in [padded, two, short] {
        assert!(g.positions() > 1 || g.pad_begin != [0; 3] || g.kernel != g.input, "{g:?}");
        let (x, mut y) = (values(2 * g.plane(), 1), vec![0.0; 2 * g.positions()]);
        assert!(!whole_plane(&x, 2, &g, Pool::Max, g.pad_begin, &mut y), "{g:?}");
    }
}

/// The light CNNs' windows on small planes (stride 1, and stride 2 with 3 taps or
/// more) take the flat path of the builds without AVX-512 (a window it refuses still
/// gets the right bits from the row path, only slower, so the bit-for-bit tests cannot
/// see it).
#[test]
fn small_windows_take_the_flat_path() {
    // (input size, kernel, stride, pad, one more output as ceil mode gives)
    let windows = [
        (7, 3, 1, 1, 0),
        (14, 3, 1, 1, 0),
        (28, 3, 1, 1, 0),
        (28, 3, 1, 0, 0),
        (13, 3, 1, 1, 0),
        (35, 5, 1, 2, 0),
        (27, 3, 2, 0, 1),
        (13, 3, 2, 0, 1),
        (14, 3, 2, 1, 0),
    ];
    for (hw, k, s, p, extra) in windows {
        let g = Window3d::cube(2, hw, k, s, 1, p, extra).unwrap();
        let x = values(4 * g.plane(), 5);
        for mode in [Pool::Max, Pool::Average { count_pad: false }, Pool::Average { count_pad: true }] {
            let mut y = vec![0.0; 4 * g.positions()];
            let pad_end = [0, p + extra * s, p + extra * s];
            assert!(pool_flat(&x, 4, &g, mode, pad_end, &mut y), "{hw} k{k} s{s} p{p} {mode:?}");
        }
    }
}

/// Max windows whose taps tie (values from -1, -0 and +0 only: most windows' maximum
/// is a zero of either sign) keep the first tap in (h, w) order at every level; and a
/// single NaN anywhere in a plane wins every window that reads it. (The AVX-512 build
/// takes each input row's maxima once and then the rows', and finds NaNs as it
/// reads at width stride 2; changing the rows' order or missing the one position a
/// chunk reads past its pair of vectors failed here, not in the random-valued test.)
#[test]
fn ties_and_a_nan_anywhere_give_the_definitions_tap_at_every_level() {
    let mut checked = 0;
    for (len, k, stride, pad, extra) in
        [(37, 3, 2, 0, 0), (37, 3, 2, 1, 1), (33, 3, 2, 0, 0), (70, 2, 2, 0, 0), (70, 3, 2, 1, 0), (37, 3, 1, 1, 0)]
    {
        let g = Window3d::cube(2, len, k, stride, 1, pad, extra).unwrap();
        let pad_end = [0, pad + extra * stride, pad + extra * stride];
        let ties: Vec<f32> = (0..2 * g.plane()).map(|i| [-1.0, -0.0, 0.0][(i * 2_654_435_761) % 7 % 3]).collect();
        let mut cases = vec![ties.clone()];
        for at in (0..g.plane()).filter(|i| i % len == len - 1 || i % len == 32 || i % 29 == 0) {
            let mut x = ties.clone();
            x[g.plane() + at] = f32::NAN;
            cases.push(x);
        }
        for x in cases {
            let mut want = vec![0.0; 2 * g.positions()];
            reference(&x, 2, &g, Pool::Max, pad_end, &mut want);
            for level in Level::supported() {
                let mut got = vec![0.0; 2 * g.positions()];
                pool_at(level, &x, 2, &g, Pool::Max, pad_end, &mut got);
                assert!(same_bits(&got, &want), "{level:?} {g:?}");
                checked += 1;
            }
        }
    }
    assert!(checked > 200, "{checked}");
}

/// Planes wide enough that the AVX-512 build takes their output rows in several bands
/// (each band's input rows' maxima held at once, the rows at a band's edge read again)
/// give the definition's bits, ties, NaNs and all; so does a plane of more output rows
/// than that path takes. A window whose width cannot be counted in vectors is refused
/// without a panic (found by review: a divide by zero).
#[test]
fn wide_planes_in_bands_of_rows_give_the_definitions_bits() {
    // (kernel, stride, pad, dilation, height, width); the last has more output rows than
    // that path takes (1024), so another path runs it.
    let windows = [
        (3, 2, 1, 1, 81, 1000),
        (3, 1, 0, 1, 81, 1000),
        (2, 2, 0, 1, 81, 1000),
        (3, 2, 0, 2, 81, 1000),
        (3, 1, 1, 1, 1100, 20),
    ];
    for (k, stride, pad, dil, h, w) in windows {
        let span = (k - 1) * dil + 1;
        let out = |len: usize| (len + 2 * pad - span) / stride + 1;
        let g = Window3d {
            input: [1, h, w],
            out: [1, out(h), out(w)],
            kernel: [1, k, k],
            stride: [1, stride, stride],
            dilation: [1, dil, dil],
            pad_begin: [0, pad, pad],
        };
        let mut x: Vec<f32> = (0..2 * g.plane()).map(|i| [-1.0, -0.0, 0.0][(i * 2_654_435_761) % 7 % 3]).collect();
        x[g.plane() + 17 * w + 501.min(w - 1)] = f32::NAN;
        let mut want = vec![0.0; 2 * g.positions()];
        reference(&x, 2, &g, Pool::Max, [0, pad, pad], &mut want);
        for level in Level::supported() {
            let mut got = vec![0.0; 2 * g.positions()];
            pool_at(level, &x, 2, &g, Pool::Max, [0, pad, pad], &mut got);
            assert!(same_bits(&got, &want), "{level:?} {g:?}");
        }
    }
}

#[test]
fn a_window_too_wide_to_count_in_vectors_is_refused_without_a_panic() {
    let g = Window3d {
        input: [1, 1, 1],
        out: [1, 1, usize::MAX],
        kernel: [1; 3],
        stride: [1; 3],
        dilation: [1; 3],
        pad_begin: [0; 3],
    };
    for level in Level::supported() {
        pool_at(level, &[], 0, &g, Pool::Max, [0, 0, usize::MAX - 1], &mut []);
    }
}

#[test]
fn all_negative_windows_with_signed_zeros_keep_the_first_tap_at_every_level() {
    // A 3x3 window whose maximum is a zero: the first zero in (h, w) order wins.
    let g = Window3d::cube(2, 20, 3, 1, 1, 0, 0).unwrap();
    let mut x = vec![-1.0f32; g.plane()];
    x[1] = -0.0; // (0, 1)
    x[20] = 0.0; // (1, 0): later in (h, w) order, earlier in (w, h)
    let mut want = vec![0.0; g.positions()];
    reference(&x, 1, &g, Pool::Max, [0; 3], &mut want);
    assert_eq!(want[0].to_bits(), (-0.0f32).to_bits());
    for level in Level::supported() {
        let mut got = vec![0.0; g.positions()];
        pool_at(level, &x, 1, &g, Pool::Max, [0; 3], &mut got);
        assert!(same_bits(&got, &want), "{level:?}");
    }
    // Two zeros in one row, strides 1 and 2 (padded): the first in w order wins.
    for stride in [1, 2] {
        let g = Window3d::cube(2, 20, 3, stride, 1, 1, 0).unwrap();
        let mut x = vec![-1.0f32; g.plane()];
        (x[2 * 20 + 3], x[2 * 20 + 4]) = (-0.0, 0.0);
        let mut want = vec![0.0; g.positions()];
        reference(&x, 1, &g, Pool::Max, [1; 3], &mut want);
        assert!(want.iter().any(|v| v.to_bits() == (-0.0f32).to_bits()), "stride {stride}");
        for level in Level::supported() {
            let mut got = vec![0.0; g.positions()];
            pool_at(level, &x, 1, &g, Pool::Max, [1; 3], &mut got);
            assert!(same_bits(&got, &want), "{level:?} stride {stride}");
        }
    }
}

#[test]
fn a_window_of_2_pow_24_taps_divides_by_its_exact_count_at_every_level() {
    // Found by review: the AVX-512 build's divisor (d × h) × w, in f32, rounded twice
    // past 2^24 (50331648 for 50331652): such kernels take the portable rows.
    let kh = (1usize << 24) + 1;
    let g = Window3d {
        input: [1, 1, 3],
        out: [1, 1, 1],
        kernel: [1, kh, 3],
        stride: [1; 3],
        dilation: [1; 3],
        pad_begin: [0, kh - 1, 0],
    };
    let x = [1.37f32, 2.0, 4.0];
    let mode = Pool::Average { count_pad: true };
    let mut want = [0.0];
    reference(&x, 1, &g, mode, [0; 3], &mut want);
    for level in Level::supported() {
        let mut got = [0.0];
        pool_at(level, &x, 1, &g, mode, [0; 3], &mut got);
        assert_eq!(got[0].to_bits(), want[0].to_bits(), "{level:?}");
    }
}

#[test]
fn an_empty_input_gives_empty_windows_as_the_definition_does() {
    let g = Window3d {
        input: [1, 0, 3],
        out: [1, 2, 3],
        kernel: [1, 3, 3],
        stride: [1; 3],
        dilation: [1; 3],
        pad_begin: [0, 1, 1],
    };
    for mode in [Pool::Max, Pool::Average { count_pad: false }, Pool::Average { count_pad: true }] {
        let (mut want, mut got) = (vec![1.0; 6], vec![2.0; 6]);
        reference(&[], 1, &g, mode, [0, 1, 1], &mut want);
        pool(&[], 1, &g, mode, [0, 1, 1], &mut got);
        assert_eq!(got, want, "{mode:?}");
    }
}

#[test]
fn a_dilation_near_2_pow_63_gives_the_definition_without_a_panic() {
    // Found by review: the AVX-512 rows' test of a chunk inside the row wrapped and a
    // plain load indexed the row at 2^63 - 8.
    use crate::conv::{window_geometry, Padding};
    let big = (1usize << 63) - 8;
    for stride in [1, 2] {
        let pads = Padding::Explicit([0, 0, 0, 0, 0, big]);
        let (g, pad_end) = window_geometry([1, 1, 1], [1, 1, 2], [1, 1, stride], [1, 1, big], pads, false).unwrap();
        assert_eq!(g.out, [1, 1, 1]);
        for level in Level::supported() {
            for mode in [Pool::Max, Pool::Average { count_pad: false }] {
                let (mut want, mut got) = ([0.0], [0.0]);
                reference(&[3.0], 1, &g, mode, pad_end, &mut want);
                pool_at(level, &[3.0], 1, &g, mode, pad_end, &mut got);
                assert_eq!(got[0].to_bits(), want[0].to_bits(), "{level:?} {mode:?} stride {stride}");
            }
        }
    }
}

#[test]
fn small_integer_max_pools_are_the_integer_maximum_of_their_windows() {
    // uint8 and int8 with their extremes, 3x3 stride 2 padded (ResNet's), 2x2 stride 2,
    // and a plane large enough for several chunks; planes of every size left over.
    let vals = |n: usize, seed: u64| -> Vec<i32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                (s >> 56) as i32
            })
            .collect()
    };
    // (One scratch row for all the cases, as a plan keeps it: a wider case's leftovers
    // must not show in a narrower one.)
    let (mut rows_u8, mut rows_i8) = (Vec::new(), Vec::new());
    // Then for the AVX-512 VBMI path: rows of several 64-output vectors at strides 1 and
    // 2, the widest kernel it takes (8) and one past it, windows whose rows all lie in the
    // padding, and a 1-D window.
    // Windows it refuses (width stride 3, dilation 2, 3-D: found by review) take the old
    // loop, with the same results.
    for (dims, side, k, stride, dilation, pad, planes) in [
        (2, 9, 3, 2, 1, 1, 3),
        (2, 8, 2, 2, 1, 0, 2),
        (2, 112, 3, 2, 1, 1, 5),
        (2, 5, 3, 1, 1, 1, 1),
        (2, 150, 3, 1, 1, 1, 2),
        (2, 140, 3, 2, 1, 1, 1),
        (2, 20, 8, 2, 1, 3, 2),
        (2, 20, 9, 1, 1, 4, 1),
        (2, 4, 2, 2, 1, 2, 2),
        (1, 200, 4, 2, 1, 1, 3),
        (2, 22, 3, 3, 1, 2, 2),
        (2, 30, 3, 1, 2, 1, 2),
        (3, 10, 2, 2, 1, 1, 2),
    ] {
        let g = Window3d::cube(dims, side, k, stride, dilation, pad, 0).unwrap();
        let n = planes * g.plane();
        // Random bytes, the first three rows of each plane 0 (windows whose maximum is
        // the least value) and every 7th element 255.
        let u: Vec<u8> = vals(n, 3)
            .into_iter()
            .enumerate()
            .map(|(i, v)| match (i % g.plane() < 3 * side, i % 7) {
                (true, _) => 0,
                (false, 0) => 255,
                _ => v as u8,
            })
            .collect();
        let mut want = vec![0u8; planes * g.positions()];
        max_pool(&u, planes, &g, &mut want);
        let mut got = vec![7u8; want.len()];
        max_pool_ints(&u, planes, &g, &mut got, &mut rows_u8);
        assert_eq!(got, want, "u8 side {side} k {k} stride {stride}");
        let i: Vec<i8> = u.iter().map(|&v| (v as i32 - 128) as i8).collect();
        // (A window with no input gives the least value; `max_pool` leaves it as it was.)
        let mut want = vec![i8::MIN; planes * g.positions()];
        max_pool(&i, planes, &g, &mut want);
        let mut got = vec![7i8; want.len()];
        max_pool_ints(&i, planes, &g, &mut got, &mut rows_i8);
        assert_eq!(got, want, "i8 side {side} k {k} stride {stride}");
    }
}

/// Clean test values: no NaN and no zero of either sign.
#[cfg(target_arch = "x86_64")]
fn clean_values(n: usize, seed: u64) -> Vec<f32> {
    values(n, seed).into_iter().map(|v| if v == 0.0 || v.is_nan() { 0.25 } else { v }).collect()
}

/// Max windows of width stride 2 with 2 or 3 taps and up to 3 rows, or 1 on rows of 16
/// outputs or more with 2 to 5 taps and up to 5 rows (YOLO's SPPF pools 5x5/1) take the
/// AVX-512 build's columns-first path, which merges a window's
/// taps in another order than (h, w): on planes with no NaN and no -0 it gives the
/// definition's bits and leaves no plane to the in-order paths. Rectangular planes of 1
/// to 3 chunks a row, the first vector masked by the padding or not, ceil mode, row
/// dilation and row strides 1 to 3.
#[cfg(target_arch = "x86_64")]
#[test]
fn stride_1_and_2_max_windows_columns_first_give_the_definitions_bits() {
    use super::x86::{columns::Columns, PLANES_IN_ORDER};
    let mut taken = 0;
    for (in_h, in_w) in [(5, 9), (13, 13), (27, 40), (9, 70)] {
        for (kh, kw, sh, dh, sw) in (1..=5).flat_map(|kh| {
            (2..=5).flat_map(move |kw| {
                (1..=3).flat_map(move |sh| (1..=2).flat_map(move |dh| (1..=2).map(move |sw| (kh, kw, sh, dh, sw))))
            })
        }) {
            for (pt, pl, extra) in (0..kh).flat_map(|pt| (0..kw).flat_map(move |pl| (0..2).map(move |e| (pt, pl, e)))) {
                let span = (kh - 1) * dh + 1;
                if in_h + 2 * pt < span {
                    continue;
                }
                let g = Window3d {
                    input: [1, in_h, in_w],
                    out: [1, (in_h + 2 * pt - span) / sh + 1 + extra, (in_w + 2 * pl - kw) / sw + 1 + extra],
                    kernel: [1, kh, kw],
                    stride: [1, sh, sw],
                    dilation: [1, dh, 1],
                    pad_begin: [0, pt, pl],
                };
                if sw == 1 && g.out[2] < 16 || sw == 2 && (kh > 3 || kw > 3) {
                    // Small planes of width stride 1 stay on the flat same-size path, and
                    // windows past 3x3 at width stride 2 on the others.
                    assert!(Columns::new(&g).is_none(), "{g:?}");
                    continue;
                }
                assert!(Columns::new(&g).is_some(), "{g:?}");
                let pad_end = [0, pt + extra * sh, pl + extra * sw];
                let x = clean_values(3 * g.plane(), (in_w + kh * 5 + kw * 3 + sh) as u64);
                let mut want = vec![0.0; 3 * g.positions()];
                reference(&x, 3, &g, Pool::Max, pad_end, &mut want);
                for level in Level::supported() {
                    let mut got = vec![f32::NAN; 3 * g.positions()];
                    PLANES_IN_ORDER.with(|n| n.set(0));
                    pool_at(level, &x, 3, &g, Pool::Max, pad_end, &mut got);
                    assert!(same_bits(&got, &want), "{level:?} {g:?}: {got:?} != {want:?}");
                    assert_eq!(PLANES_IN_ORDER.with(|n| n.get()), 0, "{g:?}");
                }
                taken += 1;
            }
        }
    }
    assert!(taken > 500, "{taken}");
}

/// A NaN or a -0 anywhere a window reads (a -0 can tie a +0, whose first in (h, w) order
/// must win) leaves that plane, and only it, to the in-order paths, with the definition's
/// bits; at every position of planes whose rows have 1 to 3 chunks, padded or not.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_nan_or_a_negative_zero_a_window_reads_leaves_its_plane_to_the_in_order_paths() {
    use super::x86::PLANES_IN_ORDER;
    if !Level::supported().contains(&Level::Avx512) {
        return;
    }
    let mut checked = 0;
    let windows = [
        (13, 3, 2, 0, 0),
        (13, 3, 2, 1, 1),
        (14, 2, 2, 0, 0),
        (15, 2, 2, 0, 1),
        (37, 3, 2, 1, 0),
        (40, 3, 2, 0, 1),
        (18, 3, 1, 1, 0),
        (33, 2, 1, 0, 1),
        (20, 5, 1, 2, 0),
        (17, 4, 1, 1, 1),
    ];
    for (len, k, stride, pad, extra) in windows {
        let g = Window3d::cube(2, len, k, stride, 1, pad, extra).unwrap();
        let pad_end = [0, pad + stride * extra, pad + stride * extra];
        let mut read = vec![false; g.plane()];
        for o in outputs(&g) {
            for t in taps(&g) {
                if let Some(at) = g.tap(o, t) {
                    read[at] = true;
                }
            }
        }
        let clean = clean_values(3 * g.plane(), len as u64);
        for at in (0..g.plane()).filter(|&at| read[at]) {
            for v in [f32::NAN, -0.0] {
                // A +0 beside the -0, so that a tie between them decides some windows.
                let mut x = clean.clone();
                x[g.plane() + at] = v;
                if let Some(z) = x.get_mut(g.plane() + at + len - 1).filter(|_| at + len - 1 < g.plane()) {
                    *z = 0.0;
                }
                let mut want = vec![0.0; 3 * g.positions()];
                reference(&x, 3, &g, Pool::Max, pad_end, &mut want);
                let mut got = vec![f32::NAN; 3 * g.positions()];
                PLANES_IN_ORDER.with(|n| n.set(0));
                pool_at(Level::Avx512, &x, 3, &g, Pool::Max, pad_end, &mut got);
                assert!(same_bits(&got, &want), "{g:?} {v} at {at}");
                assert_eq!(PLANES_IN_ORDER.with(|n| n.get()), 1, "{g:?} {v} at {at}");
                checked += 1;
            }
        }
    }
    assert!(checked > 1000, "{checked}");
}

/// Planes that each hold a -0 or a NaN (a min-pool written -MaxPool(-x) after a Relu has
/// a -0 in every plane) go to the in-order paths as one run, their setup made once, with
/// the definition's bits; a clean plane after them pools columns first again.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_run_of_planes_with_nan_or_negative_zero_goes_in_order_in_one_call() {
    use super::x86::{PLANES_IN_ORDER, RUNS_IN_ORDER};
    if !Level::supported().contains(&Level::Avx512) {
        return;
    }
    for (len, k, stride, pad) in [(20, 5, 1, 2), (19, 4, 1, 0), (27, 3, 2, 0), (18, 3, 1, 1)] {
        let g = Window3d::cube(2, len, k, stride, 1, pad, 0).unwrap();
        let pad_end = [0, pad, pad];
        let planes = 5;
        let mut x = clean_values(planes * g.plane(), len as u64);
        // Planes 0-2 a -0, a NaN and a -0 in their middle; planes 3-4 clean.
        for (p, v) in [(0, -0.0), (1, f32::NAN), (2, -0.0)] {
            x[p * g.plane() + g.plane() / 2] = v;
        }
        let mut want = vec![0.0; planes * g.positions()];
        reference(&x, planes, &g, Pool::Max, pad_end, &mut want);
        let mut got = vec![f32::NAN; planes * g.positions()];
        PLANES_IN_ORDER.with(|n| n.set(0));
        RUNS_IN_ORDER.with(|n| n.set(0));
        pool_at(Level::Avx512, &x, planes, &g, Pool::Max, pad_end, &mut got);
        assert!(same_bits(&got, &want), "{g:?}");
        assert_eq!(PLANES_IN_ORDER.with(|n| n.get()), 3, "{g:?}");
        assert_eq!(RUNS_IN_ORDER.with(|n| n.get()), 1, "{g:?}");
    }
}

/// Fewer planes in x or y than asked for pool those they hold and leave the rest, at every
/// level, as the in-order paths always did (found by review: the columns-first path
/// sliced x past its end); a row dilation of 0 is refused by that path, not divided by.
#[test]
fn short_inputs_pool_the_planes_they_hold() {
    let g = Window3d {
        input: [1, 9, 20],
        out: [1, 4, 10],
        kernel: [1, 3, 3],
        stride: [1, 2, 2],
        dilation: [1; 3],
        pad_begin: [0; 3],
    };
    let x = values(2 * g.plane() + 7, 3);
    let mut want = vec![0.5; 3 * g.positions()];
    reference(&x, 2, &g, Pool::Max, [0; 3], &mut want);
    for level in Level::supported() {
        let mut got = vec![0.5; 3 * g.positions()];
        pool_at(level, &x, 3, &g, Pool::Max, [0; 3], &mut got);
        assert!(same_bits(&got, &want), "{level:?}");
        let mut short = vec![0.5; g.positions() + 3];
        pool_at(level, &x, 3, &g, Pool::Max, [0; 3], &mut short);
        assert!(same_bits(&short[..g.positions()], &want[..g.positions()]), "{level:?}");
    }
    #[cfg(target_arch = "x86_64")]
    for dilation in [[1, 0, 1], [0, 1, 1]] {
        assert!(super::x86::columns::Columns::new(&Window3d { dilation, ..g }).is_none());
    }
}
