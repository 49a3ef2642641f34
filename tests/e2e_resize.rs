//! Resize, Upsample, GridSample, AffineGrid and Col2Im match ORT's CPU EP on Rivet alone
//! (fallback off), on static and symbolic shapes, with their parameters as constants or
//! fed at Run; bad inputs fail naming the node and the session keeps working.

mod common;

use common::{assert_matches_ort, env, rivet_session, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT, FLOAT16, INT32, INT64, INT8, UINT8};

const TOL: (f64, f64) = (1e-5, 1e-5);

fn x(name: &str, shape: &[i64], seed: u64) -> HostTensor {
    let n: i64 = shape.iter().product();
    let data = harness::values(seed, n as usize, -3.0, 3.0).into_iter().map(|v| v as f32).collect();
    HostTensor::f32(name, shape, data)
}

fn dims(shape: &[i64], symbolic: bool) -> Vec<Dim> {
    shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if symbolic && i == 0 { Dim::Sym("N".into()) } else { Dim::Fixed(d) })
        .collect()
}

fn s(v: &str) -> Attr {
    Attr::Str(v.into())
}

/// How a Resize gets its target.
enum Target {
    Scales(Vec<f32>),
    Sizes(Vec<i64>),
}

/// A Resize of `shape` at `opset` with constant scales or sizes (and roi when given).
fn resize(
    opset: i64,
    shape: &[i64],
    target: &Target,
    roi: Option<Vec<f32>>,
    attrs: &[(&str, Attr)],
    sym: bool,
) -> Vec<u8> {
    let mut b = ModelBuilder::new(opset).input("x", FLOAT, &dims(shape, sym));
    let roi_name = match roi {
        Some(r) => {
            b = b.initializer("roi", &[r.len() as i64], r);
            "roi"
        }
        None => "",
    };
    let ins: Vec<&str> = match target {
        Target::Scales(v) => {
            b = b.initializer("scales", &[v.len() as i64], v.clone());
            vec!["x", roi_name, "scales"]
        }
        Target::Sizes(v) => {
            b = b.initializer_i64("sizes", &[v.len() as i64], v.clone());
            vec!["x", roi_name, "", "sizes"]
        }
    };
    b.node_with("Resize", "resize", &ins, &["y"], attrs).output("y", FLOAT, None).build()
}

fn check_resize(what: &str, opset: i64, shape: &[i64], target: Target, roi: Option<Vec<f32>>, attrs: &[(&str, Attr)]) {
    for sym in [false, true] {
        let model = resize(opset, shape, &target, roi.clone(), attrs, sym);
        assert_matches_ort(&model, &[x("x", shape, 3)], TOL.0, TOL.1, &format!("{what} symbolic={sym}"));
    }
}

#[test]
fn nearest_modes_match_ort() {
    let up = || Target::Scales(vec![1.0, 1.0, 2.0, 2.0]);
    check_resize("nearest 2x half_pixel", 19, &[2, 3, 5, 7], up(), None, &[("mode", s("nearest"))]);
    let yolo =
        [("mode", s("nearest")), ("coordinate_transformation_mode", s("asymmetric")), ("nearest_mode", s("floor"))];
    check_resize("nearest 2x asymmetric floor (opset 11)", 11, &[1, 4, 6, 6], up(), Some(vec![]), &yolo);
    // Large enough to be split over threads.
    check_resize("nearest 2x, 8 planes of 64x64", 13, &[1, 8, 64, 64], up(), None, &yolo);
    for nm in ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"] {
        for ctm in ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"] {
            let attrs = [("mode", s("nearest")), ("nearest_mode", s(nm)), ("coordinate_transformation_mode", s(ctm))];
            check_resize(
                &format!("nearest {nm} {ctm} 3x5 -> 7x4"),
                13,
                &[1, 2, 3, 5],
                Target::Sizes(vec![1, 2, 7, 4]),
                None,
                &attrs,
            );
        }
    }
    check_resize("nearest x1.5 then x0.5", 13, &[1, 1, 4, 6], Target::Scales(vec![1.0, 1.0, 1.5, 0.5]), None, &[]);
}

#[test]
fn linear_and_cubic_match_ort() {
    let lin = |ctm: &str| vec![("mode", s("linear")), ("coordinate_transformation_mode", s(ctm))];
    check_resize(
        "bilinear 2x half_pixel",
        19,
        &[2, 3, 5, 7],
        Target::Scales(vec![1.0, 1.0, 2.0, 2.0]),
        None,
        &lin("half_pixel"),
    );
    check_resize(
        "bilinear align_corners to 9x13",
        13,
        &[1, 3, 5, 7],
        Target::Sizes(vec![1, 3, 9, 13]),
        None,
        &lin("align_corners"),
    );
    // ORT maps align_corners coordinates in float32 (Rivet in float64): 1e-5 apart here.
    for sym in [false, true] {
        let model = resize(13, &[1, 4, 48, 64], &Target::Sizes(vec![1, 4, 96, 128]), None, &lin("align_corners"), sym);
        let what = format!("bilinear align_corners large symbolic={sym}");
        assert_matches_ort(&model, &[x("x", &[1, 4, 48, 64], 3)], 1e-4, 1e-4, &what);
    }
    check_resize(
        "linear pytorch_half_pixel down",
        13,
        &[1, 2, 8, 9],
        Target::Sizes(vec![1, 2, 3, 1]),
        None,
        &lin("pytorch_half_pixel"),
    );
    check_resize(
        "linear asymmetric",
        13,
        &[1, 2, 4, 5],
        Target::Scales(vec![1.0, 1.0, 2.5, 1.5]),
        None,
        &lin("asymmetric"),
    );
    check_resize(
        "trilinear 5-D",
        13,
        &[1, 2, 3, 4, 5],
        Target::Scales(vec![1.0, 1.0, 2.0, 1.5, 0.6]),
        None,
        &lin("half_pixel"),
    );
    check_resize(
        "linear antialias down",
        18,
        &[1, 2, 12, 10],
        Target::Sizes(vec![1, 2, 5, 3]),
        None,
        &[("mode", s("linear")), ("antialias", Attr::Int(1))],
    );
    let crop = vec![0.0, 0.0, 0.2, 0.1, 1.0, 1.0, 0.9, 1.2];
    let attrs = [
        ("mode", s("linear")),
        ("coordinate_transformation_mode", s("tf_crop_and_resize")),
        ("extrapolation_value", Attr::Float(7.5)),
    ];
    check_resize("tf_crop_and_resize", 13, &[1, 2, 6, 6], Target::Sizes(vec![1, 2, 4, 5]), Some(crop), &attrs);
    for (a, ex) in [(-0.75, 0), (-0.5, 1)] {
        let attrs = [("mode", s("cubic")), ("cubic_coeff_a", Attr::Float(a)), ("exclude_outside", Attr::Int(ex))];
        check_resize(
            &format!("cubic a={a} exclude={ex}"),
            13,
            &[1, 2, 6, 7],
            Target::Scales(vec![1.0, 1.0, 1.7, 0.8]),
            None,
            &attrs,
        );
    }
    check_resize(
        "cubic antialias down",
        18,
        &[1, 1, 9, 9],
        Target::Sizes(vec![1, 1, 4, 4]),
        None,
        &[("mode", s("cubic")), ("antialias", Attr::Int(1))],
    );
}

#[test]
fn axes_and_aspect_ratio_policies_match_ort() {
    for policy in ["stretch", "not_larger", "not_smaller"] {
        for axes in [vec![2, 3], vec![3, 2]] {
            let attrs =
                [("mode", s("nearest")), ("axes", Attr::Ints(axes.clone())), ("keep_aspect_ratio_policy", s(policy))];
            let what = format!("sizes {policy} axes {axes:?}");
            check_resize(&what, 18, &[1, 2, 4, 6], Target::Sizes(vec![7, 5]), None, &attrs);
        }
    }
    // (ORT keeps the aspect ratio wrongly for negative axes; stretch it takes.)
    let attrs = [("mode", s("nearest")), ("axes", Attr::Ints(vec![-1, -2]))];
    check_resize("sizes axes [-1, -2]", 18, &[1, 2, 4, 6], Target::Sizes(vec![7, 5]), None, &attrs);
    let attrs = [("mode", s("linear")), ("axes", Attr::Ints(vec![3]))];
    check_resize("scales on one axis", 19, &[2, 2, 3, 4], Target::Scales(vec![1.75]), None, &attrs);
}

#[test]
fn sizes_and_scales_fed_at_run_match_ort() {
    for sym in [false, true] {
        let model = ModelBuilder::new(13)
            .input("x", FLOAT, &dims(&[1, 2, 5, 6], sym))
            .input("sizes", INT64, &[Dim::Fixed(4)])
            .node_with("Resize", "resize", &["x", "", "", "sizes"], &["y"], &[("mode", s("linear"))])
            .output("y", FLOAT, None)
            .build();
        for sizes in [[1.0, 2.0, 10.0, 12.0], [1.0, 2.0, 3.0, 4.0]] {
            let ins = [x("x", &[1, 2, 5, 6], 5), HostTensor::typed("sizes", E::Int64, &[4], sizes.to_vec())];
            assert_matches_ort(&model, &ins, TOL.0, TOL.1, &format!("sizes {sizes:?} at Run symbolic={sym}"));
        }
        let model = ModelBuilder::new(13)
            .input("x", FLOAT, &dims(&[1, 2, 5, 6], sym))
            .input("scales", FLOAT, &[Dim::Fixed(4)])
            .node_with("Resize", "resize", &["x", "", "scales"], &["y"], &[("mode", s("nearest"))])
            .output("y", FLOAT, None)
            .build();
        let ins = [x("x", &[1, 2, 5, 6], 5), HostTensor::f32("scales", &[4], vec![1.0, 1.0, 2.0, 3.0])];
        assert_matches_ort(&model, &ins, TOL.0, TOL.1, &format!("scales at Run symbolic={sym}"));
    }
}

/// One session, the sizes changed from Run to Run and back: each Run's tap tables are its
/// own (the step keeps the last Run's tables for a Run of the same geometry).
#[test]
fn one_session_follows_the_sizes_from_run_to_run() {
    for mode in ["nearest", "linear"] {
        let model = ModelBuilder::new(13)
            .input("x", FLOAT, &[Dim::Fixed(1), Dim::Fixed(3), Dim::Sym("H".into()), Dim::Sym("W".into())])
            .input("sizes", INT64, &[Dim::Fixed(4)])
            .node_with("Resize", "resize", &["x", "", "", "sizes"], &["y"], &[("mode", s(mode))])
            .output("y", FLOAT, None)
            .build();
        let (mut rivet, mut ort) = (rivet_session(&model), common::ort_session(&model));
        for (i, (h, w, oh, ow)) in
            [(5, 6, 10, 12), (5, 6, 7, 9), (4, 9, 8, 18), (5, 6, 10, 12), (4, 9, 8, 18)].into_iter().enumerate()
        {
            let ins = [
                x("x", &[1, 3, h, w], i as u64),
                HostTensor::typed("sizes", E::Int64, &[4], vec![1.0, 3.0, oh as f64, ow as f64]),
            ];
            let want = harness::run(&mut ort, &ins).expect("ORT runs");
            let got = harness::run(&mut rivet, &ins).expect("Rivet runs");
            if let Err(e) = harness::compare(&got, &want, TOL.0, TOL.1) {
                panic!("{mode}, Run {i} ({h}x{w} -> {oh}x{ow}): {e}");
            }
        }
    }
}

#[test]
fn resize_10_and_upsample_match_ort() {
    for mode in ["nearest", "linear"] {
        for sym in [false, true] {
            let shape = [1, 3, 4, 5];
            let model = |opset: i64, op: &str| {
                ModelBuilder::new(opset)
                    .input("x", FLOAT, &dims(&shape, sym))
                    .initializer("scales", &[4], vec![1.0, 1.0, 2.0, 3.0])
                    .node_with(op, "n", &["x", "scales"], &["y"], &[("mode", s(mode))])
                    .output("y", FLOAT, None)
                    .build()
            };
            let what = format!("{mode} symbolic={sym}");
            // Resize-10 also shrinks (nearest then rounds up a fractional coordinate).
            let down = ModelBuilder::new(10)
                .input("x", FLOAT, &dims(&[1, 2, 7, 9], sym))
                .initializer("scales", &[4], vec![1.0, 1.0, 0.6, 0.45])
                .node_with("Resize", "n", &["x", "scales"], &["y"], &[("mode", s(mode))])
                .output("y", FLOAT, None)
                .build();
            assert_matches_ort(&down, &[x("x", &[1, 2, 7, 9], 1)], TOL.0, TOL.1, &format!("Resize-10 down {what}"));
            assert_matches_ort(&model(10, "Resize"), &[x("x", &shape, 1)], TOL.0, TOL.1, &format!("Resize-10 {what}"));
            assert_matches_ort(
                &model(9, "Upsample"),
                &[x("x", &shape, 1)],
                TOL.0,
                TOL.1,
                &format!("Upsample-9 {what}"),
            );
            let up7 = ModelBuilder::new(7)
                .input("x", FLOAT, &dims(&shape, sym))
                .node_with(
                    "Upsample",
                    "n",
                    &["x"],
                    &["y"],
                    &[("mode", s(mode)), ("scales", Attr::Floats(vec![1.0, 1.0, 2.0, 2.0]))],
                )
                .output("y", FLOAT, None)
                .build();
            assert_matches_ort(&up7, &[x("x", &shape, 1)], TOL.0, TOL.1, &format!("Upsample-7 {what}"));
        }
    }
}

/// A detector's neck: a convolution, its map upsampled 2x (nearest), joined with a
/// finer map along the channels.
#[test]
fn conv_resize_concat_chain_matches_ort() {
    for sym in [false, true] {
        let w: Vec<f32> = harness::values(9, 4 * 3 * 3 * 3, -0.5, 0.5).into_iter().map(|v| v as f32).collect();
        let model = ModelBuilder::new(13)
            .input("x", FLOAT, &dims(&[1, 3, 10, 12], sym))
            .input("fine", FLOAT, &dims(&[1, 2, 20, 24], sym))
            .initializer("w", &[4, 3, 3, 3], w)
            .initializer("scales", &[4], vec![1.0, 1.0, 2.0, 2.0])
            .node_with("Conv", "conv", &["x", "w"], &["c"], &[("pads", Attr::Ints(vec![1, 1, 1, 1]))])
            .node_with("Resize", "up", &["c", "", "scales"], &["u"], &[("mode", s("nearest"))])
            .node_with("Concat", "cat", &["u", "fine"], &["y"], &[("axis", Attr::Int(1))])
            .output("y", FLOAT, None)
            .build();
        let ins = [x("x", &[1, 3, 10, 12], 2), x("fine", &[1, 2, 20, 24], 4)];
        assert_matches_ort(&model, &ins, 1e-4, 1e-5, &format!("conv -> resize -> concat symbolic={sym}"));
    }
}

#[test]
fn grid_sample_matches_ort() {
    for sym in [false, true] {
        for (opset, modes) in [(16, ["nearest", "bilinear", "bicubic"]), (20, ["nearest", "linear", "cubic"])] {
            for mode in modes {
                for pad in ["zeros", "border", "reflection"] {
                    for align in [0, 1] {
                        let model = ModelBuilder::new(opset)
                            .input("x", FLOAT, &dims(&[2, 3, 5, 6], sym))
                            .input("grid", FLOAT, &dims(&[2, 4, 7, 2], sym))
                            .node_with(
                                "GridSample",
                                "gs",
                                &["x", "grid"],
                                &["y"],
                                &[("mode", s(mode)), ("padding_mode", s(pad)), ("align_corners", Attr::Int(align))],
                            )
                            .output("y", FLOAT, None)
                            .build();
                        let grid: Vec<f32> =
                            harness::values(7, 2 * 4 * 7 * 2, -1.3, 1.3).into_iter().map(|v| v as f32).collect();
                        let ins = [x("x", &[2, 3, 5, 6], 1), HostTensor::f32("grid", &[2, 4, 7, 2], grid)];
                        let what = format!("GridSample-{opset} {mode} {pad} align={align} symbolic={sym}");
                        assert_matches_ort(&model, &ins, 1e-4, 1e-5, &what);
                    }
                }
            }
        }
        for mode in ["nearest", "linear"] {
            let model = ModelBuilder::new(20)
                .input("x", FLOAT, &dims(&[1, 2, 3, 4, 5], sym))
                .input("grid", FLOAT, &dims(&[1, 2, 3, 4, 3], sym))
                .node_with(
                    "GridSample",
                    "gs",
                    &["x", "grid"],
                    &["y"],
                    &[("mode", s(mode)), ("padding_mode", s("border"))],
                )
                .output("y", FLOAT, None)
                .build();
            let grid: Vec<f32> = harness::values(8, 2 * 3 * 4 * 3, -1.2, 1.2).into_iter().map(|v| v as f32).collect();
            let ins = [x("x", &[1, 2, 3, 4, 5], 1), HostTensor::f32("grid", &[1, 2, 3, 4, 3], grid)];
            assert_matches_ort(&model, &ins, 1e-4, 1e-5, &format!("volumetric {mode} symbolic={sym}"));
        }
    }
}

#[test]
fn affine_grid_and_col2im_match_ort() {
    for sym in [false, true] {
        for (theta, size) in [(vec![2, 2, 3], vec![2, 3, 5, 7]), (vec![2, 3, 4], vec![2, 3, 4, 5, 6])] {
            for align in [0, 1] {
                let model = ModelBuilder::new(20)
                    .input("theta", FLOAT, &dims(&theta, sym))
                    .initializer_i64("size", &[size.len() as i64], size.clone())
                    .node_with("AffineGrid", "ag", &["theta", "size"], &["g"], &[("align_corners", Attr::Int(align))])
                    .output("g", FLOAT, None)
                    .build();
                let what = format!("AffineGrid {size:?} align={align} symbolic={sym}");
                assert_matches_ort(&model, &[x("theta", &theta, 2)], 1e-5, 1e-5, &what);
            }
        }
        // 2 channels of 3x3 blocks over a 6x7 image, stride 2, dilation (1, 2), pads 1.
        let attrs = [
            ("strides", Attr::Ints(vec![2, 2])),
            ("dilations", Attr::Ints(vec![1, 2])),
            ("pads", Attr::Ints(vec![1, 1, 1, 1])),
        ];
        // Positions: (6 + 2 - 3) / 2 + 1 = 3 rows, (7 + 2 - 5) / 2 + 1 = 3 columns.
        let model = ModelBuilder::new(18)
            .input("x", FLOAT, &dims(&[2, 18, 9], sym))
            .initializer_i64("image", &[2], vec![6, 7])
            .initializer_i64("block", &[2], vec![3, 3])
            .node_with("Col2Im", "c2i", &["x", "image", "block"], &["y"], &attrs)
            .output("y", FLOAT, None)
            .build();
        assert_matches_ort(&model, &[x("x", &[2, 18, 9], 3)], 1e-5, 1e-5, &format!("Col2Im symbolic={sym}"));
    }
}

#[test]
fn bad_sizes_and_grids_name_the_node_and_the_session_keeps_working() {
    let model = ModelBuilder::new(13)
        .input("x", FLOAT, &[Dim::Fixed(1), Dim::Fixed(1), Dim::Fixed(2), Dim::Fixed(2)])
        .input("sizes", INT64, &[Dim::Fixed(4)])
        .node_with("Resize", "the_resize", &["x", "", "", "sizes"], &["y"], &[])
        .output("y", FLOAT, None)
        .build();
    let mut s = rivet_session(&model);
    let xin = HostTensor::f32("x", &[1, 1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]);
    let negative = [xin.clone(), HostTensor::typed("sizes", E::Int64, &[4], vec![1.0, 1.0, -4.0, 4.0])];
    let err = harness::run(&mut s, &negative).expect_err("a negative size");
    assert!(err.contains("'the_resize'") && err.contains("size -4"), "{err}");
    let good = [xin, HostTensor::typed("sizes", E::Int64, &[4], vec![1.0, 1.0, 4.0, 4.0])];
    let out = harness::run(&mut s, &good).expect("the session still works");
    assert_eq!(out[0].shape, [1, 1, 4, 4]);
    assert_eq!(&out[0].data[..4], &[1.0, 1.0, 2.0, 2.0]);

    let model = ModelBuilder::new(16)
        .input("x", FLOAT, &[Dim::Sym("N".into()), Dim::Fixed(1), Dim::Fixed(2), Dim::Fixed(2)])
        .input("grid", FLOAT, &[Dim::Sym("M".into()), Dim::Fixed(1), Dim::Fixed(1), Dim::Fixed(2)])
        .node_with("GridSample", "the_sampler", &["x", "grid"], &["y"], &[])
        .output("y", FLOAT, None)
        .build();
    let mut s = rivet_session(&model);
    let bad = [x("x", &[1, 1, 2, 2], 1), HostTensor::f32("grid", &[2, 1, 1, 2], vec![0.0; 4])];
    let err = harness::run(&mut s, &bad).expect_err("batch 1 against a grid of batch 2");
    assert!(err.contains("'the_sampler'") && err.contains("grid must be"), "{err}");
    let good = [
        HostTensor::f32("x", &[1, 1, 2, 2], vec![1.0, 2.0, 3.0, 4.0]),
        HostTensor::f32("grid", &[1, 1, 1, 2], vec![0.0; 2]),
    ];
    let out = harness::run(&mut s, &good).expect("the session still works");
    assert_eq!(out[0].data, [2.5]);
}

#[test]
fn float16_and_integer_types_match_ort() {
    let modes: [&[(&str, Attr)]; 4] = [
        &[("mode", s("nearest"))],
        &[("mode", s("linear"))],
        &[("mode", s("cubic"))],
        &[("mode", s("linear")), ("coordinate_transformation_mode", s("align_corners"))],
    ];
    for sym in [false, true] {
        for attrs in modes {
            // float16 between two casts (the harness feeds and reads float32).
            let model = ModelBuilder::new(19)
                .input("x", FLOAT, &dims(&[1, 2, 5, 6], sym))
                .initializer("scales", &[4], vec![1.0, 1.0, 2.0, 1.5])
                .node_with("Cast", "to_half", &["x"], &["h"], &[("to", Attr::Int(FLOAT16 as i64))])
                .node_with("Resize", "resize", &["h", "", "scales"], &["r"], attrs)
                .node_with("Cast", "to_float", &["r"], &["y"], &[("to", Attr::Int(FLOAT as i64))])
                .output("y", FLOAT, None)
                .build();
            let what = format!("float16 {:?} symbolic={sym}", attrs[attrs.len() - 1].1);
            assert_matches_ort(&model, &[x("x", &[1, 2, 5, 6], 4)], 2e-3, 2e-3, &what);
        }
        for (t, e) in [(INT8, E::Int8), (UINT8, E::Uint8), (INT32, E::Int32)] {
            let model = ModelBuilder::new(19)
                .input("x", t, &dims(&[1, 3, 4, 5], sym))
                .initializer_i64("sizes", &[4], vec![1, 3, 9, 7])
                .node_with("Resize", "resize", &["x", "", "", "sizes"], &["y"], &[("mode", s("nearest"))])
                .output("y", t, None)
                .build();
            let data = (0..60).map(|i| f64::from((i * 7 % 100) as u8)).collect();
            let ins = [HostTensor::typed("x", e, &[1, 3, 4, 5], data)];
            assert_matches_ort(&model, &ins, 0.0, 0.0, &format!("{e:?} nearest symbolic={sym}"));
        }
    }
}

#[test]
fn what_rivet_does_not_run_is_not_claimed_and_says_why() {
    let session_error = |model: &[u8]| match harness::session(env(), model, harness::Arm::Rivet, &strict()) {
        Ok(_) => panic!("the session should fail with fallback off"),
        Err(e) => e,
    };
    // Linear on uint8 (ORT rounds in ways Rivet does not follow).
    let model = ModelBuilder::new(19)
        .input("x", UINT8, &[1.into(), 1.into(), 2.into(), 2.into()])
        .initializer("scales", &[4], vec![1.0, 1.0, 2.0, 2.0])
        .node_with("Resize", "u8_linear", &["x", "", "scales"], &["y"], &[("mode", s("linear"))])
        .output("y", UINT8, None)
        .build();
    let err = session_error(&model);
    assert!(err.contains("node 'u8_linear' (Resize)") && err.contains("uint8"), "{err}");
    // Antialias is for linear and cubic.
    let model = ModelBuilder::new(19)
        .input("x", FLOAT, &[1.into(), 1.into(), 4.into(), 4.into()])
        .initializer("scales", &[4], vec![1.0, 1.0, 0.5, 0.5])
        .node_with("Resize", "aa_nearest", &["x", "", "scales"], &["y"], &[("antialias", Attr::Int(1))])
        .output("y", FLOAT, None)
        .build();
    let err = session_error(&model);
    assert!(err.contains("node 'aa_nearest' (Resize)") && err.contains("antialias"), "{err}");
}
