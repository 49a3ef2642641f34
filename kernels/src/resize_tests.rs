//! The fused plane kernels against the per-axis passes, and the tables against values
//! worked by hand from the ONNX formulas.

use super::*;

fn params(interp: Interp, coord: Coord) -> Params {
    Params { interp, coord, antialias: false, exclude_outside: false }
}

/// The table of an axis: (indices, weights, taps).
fn table(p: &Params, len_in: usize, len_out: usize) -> (Vec<usize>, Vec<f32>, usize) {
    let a = Axis { len_in, len_out, scale: len_out as f64 / len_in as f64, roi: (0.0, 1.0) };
    let taps = tap_count(p, a.scale);
    let (mut idx, mut w, mut c) = (vec![0; taps * len_out], vec![0.0; taps * len_out], vec![0.0; taps]);
    axis_taps(p, &a, &mut idx, &mut w, &mut c);
    (idx, w, taps)
}

/// Resizes `[planes, h, w]` with the general passes: rows first, then columns.
fn general(p: &Params, x: &[f32], planes: usize, h: usize, w: usize, oh: usize, ow: usize) -> Vec<f32> {
    let (ri, rw, rt) = table(p, h, oh);
    let (ci, cw, ct) = table(p, w, ow);
    let mut mid = vec![0.0; planes * oh * w];
    pass(x, h, w, Table { taps: rt, idx: &ri, w: &rw }, 0.0, &mut mid);
    let mut y = vec![0.0; planes * oh * ow];
    pass(&mid, w, 1, Table { taps: ct, idx: &ci, w: &cw }, 0.0, &mut y);
    y
}

fn input(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 37 % 101) as f32) * 0.25 - 7.0).collect()
}

#[test]
fn nearest_planes_match_the_passes_for_integer_and_fractional_factors() {
    let p = params(Interp::Nearest(Nearest::RoundPreferFloor), Coord::Asymmetric);
    // Doubled rows of 4, 8, 9, 16 and 21 columns: the pairs path in runs of 8 and the rest.
    let cases = [(3, 4, 6, 8), (2, 8, 4, 16), (3, 9, 6, 18), (2, 16, 4, 32), (5, 21, 10, 42)];
    for &(h, w, oh, ow) in cases.iter().chain(&[(3, 4, 9, 12), (5, 3, 7, 5), (4, 6, 2, 3)]) {
        let x = input(2 * h * w);
        let (rows, _, _) = table(&p, h, oh);
        let (cols, _, _) = table(&p, w, ow);
        let mut y = vec![f32::NAN; 2 * oh * ow];
        nearest_planes(&x, h, w, &rows, &cols, repeat_factor(w, &cols), &mut y);
        assert_eq!(y, general(&p, &x, 2, h, w, oh, ow), "{h}x{w} -> {oh}x{ow}");
    }
    // 2x asymmetric nearest is a repeat; 3 -> 5 is not.
    assert_eq!(repeat_factor(4, &table(&p, 4, 8).0), Some(2));
    assert_eq!(repeat_factor(3, &table(&p, 3, 5).0), None);
}

#[test]
fn bilinear_planes_match_the_passes() {
    for coord in [Coord::HalfPixel, Coord::AlignCorners, Coord::Asymmetric, Coord::PytorchHalfPixel] {
        let p = params(Interp::Linear, coord);
        for &(h, w, oh, ow) in &[(3, 4, 6, 8), (4, 4, 3, 5), (2, 7, 5, 1)] {
            let x = input(3 * h * w);
            let (ri, rw, _) = table(&p, h, oh);
            let (ci, cw, _) = table(&p, w, ow);
            let mut y = vec![f32::NAN; 3 * oh * ow];
            bilinear_planes(&x, h, w, Table { taps: 2, idx: &ri, w: &rw }, Table { taps: 2, idx: &ci, w: &cw }, &mut y);
            let want = general(&p, &x, 3, h, w, oh, ow);
            for (a, b) in y.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{coord:?} {h}x{w} -> {oh}x{ow}: {a} vs {b}");
            }
        }
    }
}

#[test]
fn tables_follow_the_onnx_formulas() {
    // Linear, half_pixel, 2 -> 4: x_ori = (j + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25.
    let (idx, w, taps) = table(&params(Interp::Linear, Coord::HalfPixel), 2, 4);
    assert_eq!(taps, 2);
    assert_eq!(idx, [0, 0, 0, 1, 0, 1, 1, 1]);
    assert_eq!(w, [0.25, 0.75, 0.75, 0.25, 0.25, 0.75, 0.75, 0.25]);
    // Nearest round_prefer_ceil, asymmetric, 4 -> 8: x_ori = j / 2, halves round up.
    let (idx, _, _) = table(&params(Interp::Nearest(Nearest::RoundPreferCeil), Coord::Asymmetric), 4, 8);
    assert_eq!(idx, [0, 1, 1, 2, 2, 3, 3, 3]);
    // Cubic weights of one output index sum to 1.
    let (_, w, taps) = table(&params(Interp::Cubic { a: -0.75 }, Coord::HalfPixel), 4, 3);
    assert_eq!(taps, 4);
    for c in w.chunks(4) {
        assert!((c.iter().sum::<f32>() - 1.0).abs() < 1e-6);
    }
    // Crop outside the input marks the index.
    let p = params(Interp::Linear, Coord::TfCropAndResize);
    let a = Axis { len_in: 4, len_out: 3, scale: 0.75, roi: (0.5, 1.5) };
    let (mut idx, mut w, mut c) = (vec![0; 6], vec![0.0; 6], vec![0.0; 2]);
    axis_taps(&p, &a, &mut idx, &mut w, &mut c);
    assert_eq!((idx[0], idx[4]), (1, OUTSIDE));
    // A same-length half_pixel axis is the identity.
    let (idx, w, taps) = table(&params(Interp::Linear, Coord::HalfPixel), 5, 5);
    assert!(is_identity(5, taps, &idx, &w));
}

#[test]
fn the_any_type_gather_matches_the_plane_kernel() {
    let p = params(Interp::Nearest(Nearest::RoundPreferCeil), Coord::HalfPixel);
    let (h, w, oh, ow) = (5, 4, 3, 9);
    let x = input(2 * h * w);
    let (rows, _, _) = table(&p, h, oh);
    let (cols, _, _) = table(&p, w, ow);
    let mut planes = vec![0.0; 2 * oh * ow];
    nearest_planes(&x, h, w, &rows, &cols, None, &mut planes);
    let mut any = vec![0.0; 2 * oh * ow];
    nearest_nd(&x, &[2, h, w], &[&[0, 1], &rows, &cols], &mut any);
    assert_eq!(any, planes);
}
