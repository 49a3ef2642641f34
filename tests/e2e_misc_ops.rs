//! The op families of issue 17 against ORT's CPU EP, every node on Rivet (fallback off):
//! LpPool, Unique, CenterCropPad, Compress, the signal windows and MelWeightMatrix,
//! LpNormalization, MeanVarianceNormalization, Det, Scatter (opset 9-10),
//! TensorScatter, PRelu, Swish, DeformConv; Slice with int32 parameters and a Conv
//! whose input has no declared rank. Each on static and symbolic shapes, and a bad
//! input at Run: an error naming the node, then the same session runs again.

mod common;

use common::{assert_matches_ort, env, ort_session, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, BOOL, DOUBLE, FLOAT, INT32, INT64, UINT8};

fn elem(code: i32) -> E {
    match code {
        FLOAT => E::Float32,
        DOUBLE => E::Float64,
        INT32 => E::Int32,
        INT64 => E::Int64,
        UINT8 => E::Uint8,
        BOOL => E::Bool,
        _ => unreachable!(),
    }
}

fn dims(shape: &[i64], symbolic: bool) -> Vec<Dim> {
    shape.iter().enumerate().map(|(k, &d)| if symbolic { format!("d{k}").as_str().into() } else { d.into() }).collect()
}

fn vals(seed: u64, n: usize, lo: f64, hi: f64) -> Vec<f32> {
    harness::values(seed, n, lo, hi).into_iter().map(|v| v as f32).collect()
}

fn count(shape: &[i64]) -> usize {
    shape.iter().product::<i64>() as usize
}

/// A Constant node's tensor attribute of int32 values.
fn i32_tensor(dims: &[i64], v: &[i32]) -> Attr {
    Attr::Tensor(INT32, dims.to_vec(), v.iter().flat_map(|x| x.to_le_bytes()).collect())
}

/// Runs `bad` on a Rivet session of `model` expecting an error that names `node` and
/// contains `why`, then `good` on the same session against ORT.
fn bad_then_good(model: &[u8], bad: &[HostTensor], node: &str, why: &str, good: &[HostTensor]) {
    let mut rivet = harness::session(env(), model, Arm::Rivet, &strict()).expect("Rivet session");
    let err = harness::run(&mut rivet, bad).expect_err("the bad input fails");
    assert!(err.contains(node) && err.contains(why), "{err}");
    let got = harness::run(&mut rivet, good).expect("the session still runs");
    let want = harness::run(&mut ort_session(model), good).expect("ORT runs");
    harness::compare(&got, &want, 1e-5, 1e-6).expect("matches ORT after the error");
}

type Attrs = Vec<(&'static str, Attr)>;

/// x, w, attributes, offset_group, output (h, w).
type DeformCase = ([i64; 4], [i64; 4], Attrs, i64, [i64; 2]);

fn lp_pool_model(shape: &[i64], symbolic: bool, attrs: &[(&str, Attr)], opset: i64) -> Vec<u8> {
    ModelBuilder::new(opset)
        .input("x", FLOAT, &dims(shape, symbolic))
        .node_with("LpPool", "pool", &["x"], &["y"], attrs)
        .output("y", FLOAT, None)
        .build()
}

#[test]
fn lp_pool_matches_ort() {
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    let cases: Vec<(Vec<i64>, Attrs)> = vec![
        (vec![1, 2, 9], vec![("kernel_shape", ints(&[3])), ("p", Attr::Int(1))]),
        (vec![2, 3, 6, 7], vec![("kernel_shape", ints(&[2, 3]))]),
        (vec![1, 2, 7, 7], vec![("kernel_shape", ints(&[3, 3])), ("strides", ints(&[2, 2])), ("p", Attr::Int(3))]),
        (vec![1, 2, 6, 6], vec![("kernel_shape", ints(&[2, 2])), ("dilations", ints(&[2, 2]))]),
        (vec![1, 1, 5, 6], vec![("kernel_shape", ints(&[3, 3])), ("pads", ints(&[1, 0, 2, 1]))]),
        (vec![1, 2, 5, 5], vec![("kernel_shape", ints(&[2, 2])), ("auto_pad", Attr::Str("SAME_UPPER".into()))]),
        (
            vec![1, 2, 5, 5],
            vec![
                ("kernel_shape", ints(&[3, 2])),
                ("auto_pad", Attr::Str("SAME_LOWER".into())),
                ("strides", ints(&[2, 1])),
            ],
        ),
        (
            vec![1, 2, 7, 6],
            vec![("kernel_shape", ints(&[2, 2])), ("strides", ints(&[2, 2])), ("ceil_mode", Attr::Int(1))],
        ),
        (vec![1, 2, 4, 5, 4], vec![("kernel_shape", ints(&[2, 2, 2])), ("pads", ints(&[0, 1, 0, 1, 0, 1]))]),
    ];
    for (k, (shape, attrs)) in cases.iter().enumerate() {
        let x = HostTensor::f32("x", shape, vals(k as u64, count(shape), -2.0, 2.0));
        for symbolic in [false, true] {
            let model = lp_pool_model(shape, symbolic, attrs, 18);
            assert_matches_ort(
                &model,
                std::slice::from_ref(&x),
                1e-5,
                1e-6,
                &format!("LpPool {shape:?} {attrs:?} sym {symbolic}"),
            );
        }
    }
    // Opset 11 (no ceil_mode), and a window larger than the fed input: an error naming the node.
    let model = lp_pool_model(&[1, 1, 4, 4], true, &[("kernel_shape", ints(&[3, 3]))], 11);
    let bad = [HostTensor::f32("x", &[1, 1, 2, 4], vec![1.0; 8])];
    let good = [HostTensor::f32("x", &[1, 1, 4, 5], vals(9, 20, -1.0, 1.0))];
    bad_then_good(&model, &bad, "node 'pool' (LpPool)", "larger than the padded input", &good);
}

fn unique_model(t: i32, shape: Option<&[i64]>, attrs: &[(&str, Attr)]) -> Vec<u8> {
    let b = ModelBuilder::new(11);
    let b = match shape {
        Some(s) => b.input("x", t, &dims(s, true)),
        None => b.input_unshaped("x", t),
    };
    b.node_with("Unique", "uniq", &["x"], &["y", "first", "inverse", "counts"], attrs)
        .output("y", t, None)
        .output("first", INT64, None)
        .output("inverse", INT64, None)
        .output("counts", INT64, None)
        .build()
}

#[test]
fn unique_matches_ort_with_all_four_outputs() {
    let x1 = vec![2.0, 1.0, 1.0, 3.0, 4.0, 3.0, -0.0, 0.0, 2.0];
    let x2 = vec![1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 2.0, 3.0, 4.0, 1.0, 0.0, 0.0];
    for t in [FLOAT, INT64, DOUBLE] {
        for sorted in [0, 1] {
            let s = ("sorted", Attr::Int(sorted));
            let input = [HostTensor::typed("x", elem(t), &[9], x1.clone())];
            assert_matches_ort(&unique_model(t, Some(&[9]), std::slice::from_ref(&s)), &input, 0.0, 0.0, "Unique flat");
            let input = [HostTensor::typed("x", elem(t), &[3, 2, 2], x2.clone())];
            for axis in [0, 1, -1, 2] {
                let model = unique_model(t, Some(&[3, 2, 2]), &[s.clone(), ("axis", Attr::Int(axis))]);
                assert_matches_ort(&model, &input, 0.0, 0.0, &format!("Unique axis {axis} sorted {sorted}"));
            }
        }
    }
    // Only some outputs, and a static shape.
    let model = ModelBuilder::new(11)
        .input("x", FLOAT, &[6.into()])
        .node("Unique", "uniq", &["x"], &["y", "", "", "counts"])
        .output("y", FLOAT, None)
        .output("counts", INT64, None)
        .build();
    assert_matches_ort(
        &model,
        &[HostTensor::f32("x", &[6], vec![5.0, 5.0, 1.0, 5.0, 2.0, 1.0])],
        0.0,
        0.0,
        "two outputs",
    );
    // An axis past the rank of what is fed (the rank is not declared): an error naming the node.
    let model = unique_model(FLOAT, None, &[("axis", Attr::Int(2))]);
    let bad = [HostTensor::f32("x", &[4], vec![1.0, 2.0, 1.0, 0.0])];
    let good = [HostTensor::f32("x", &[3, 2, 2], x2.iter().map(|&v| v as f32).collect())];
    bad_then_good(&model, &bad, "node 'uniq' (Unique)", "axis 2 is out of range", &good);
}

#[test]
fn center_crop_pad_matches_ort_on_any_type() {
    for t in [FLOAT, INT64, UINT8, BOOL] {
        for (shape, target, axes) in [
            (vec![5i64, 4, 3], vec![3i64, 6, 3], None),
            (vec![5, 4, 3], vec![2, 7], Some(vec![0i64, 1])),
            (vec![5, 4, 3], vec![8, 1], Some(vec![-1, -3])),
            (vec![6], vec![3], None),
        ] {
            let data: Vec<f64> =
                (0..count(&shape)).map(|v| if t == BOOL { (v % 3 == 0) as u8 as f64 } else { v as f64 }).collect();
            let attrs: Vec<(&str, Attr)> = axes.iter().map(|a| ("axes", Attr::Ints(a.clone()))).collect();
            let n = target.len() as i64;
            for symbolic in [false, true] {
                // The shape as a constant (fixed at Compile) and fed at Run, int64 and int32.
                let constant = ModelBuilder::new(18)
                    .input("x", t, &dims(&shape, symbolic))
                    .initializer_i64("shape", &[n], target.clone())
                    .node_with("CenterCropPad", "ccp", &["x", "shape"], &["y"], &attrs)
                    .output("y", t, None)
                    .build();
                let x = HostTensor::typed("x", elem(t), &shape, data.clone());
                let what = format!("CenterCropPad {shape:?} -> {target:?} axes {axes:?} sym {symbolic}");
                assert_matches_ort(&constant, std::slice::from_ref(&x), 0.0, 0.0, &what);
                let fed = |st: i32| {
                    ModelBuilder::new(18)
                        .input("x", t, &dims(&shape, symbolic))
                        .input("shape", st, &[n.into()])
                        .node_with("CenterCropPad", "ccp", &["x", "shape"], &["y"], &attrs)
                        .output("y", t, None)
                        .build()
                };
                let s =
                    |st: i32| HostTensor::typed("shape", elem(st), &[n], target.iter().map(|&v| v as f64).collect());
                let inputs = [x.clone(), s(INT64)];
                assert_matches_ort(&fed(INT64), &inputs, 0.0, 0.0, &format!("{what} fed"));
                // ORT's CenterCropPad fails on an int32 shape: Rivet's gives what its int64 one does.
                let want = harness::run(&mut ort_session(&fed(INT64)), &inputs).expect("ORT runs");
                let mut rivet = harness::session(env(), &fed(INT32), Arm::Rivet, &strict()).expect("session");
                let got = harness::run(&mut rivet, &[x.clone(), s(INT32)]).expect("Rivet runs");
                harness::compare(&got, &want, 0.0, 0.0).expect("an int32 shape crops as an int64 one");
            }
        }
    }
    let model = ModelBuilder::new(18)
        .input("x", FLOAT, &["a".into(), "b".into()])
        .input("shape", INT64, &[2.into()])
        .node("CenterCropPad", "ccp", &["x", "shape"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let x = HostTensor::f32("x", &[3, 4], vals(1, 12, -1.0, 1.0));
    let bad = [x.clone(), HostTensor::typed("shape", E::Int64, &[2], vec![2.0, -1.0])];
    let good = [x, HostTensor::typed("shape", E::Int64, &[2], vec![5.0, 2.0])];
    bad_then_good(&model, &bad, "node 'ccp' (CenterCropPad)", "negative", &good);
}

#[test]
fn compress_matches_ort_on_any_type() {
    let shape = [3i64, 4];
    for t in [FLOAT, INT64, BOOL, DOUBLE] {
        let data: Vec<f64> = (0..12).map(|v| if t == BOOL { (v % 2) as f64 } else { v as f64 - 3.5 }).collect();
        for axis in [None, Some(0), Some(1), Some(-1)] {
            let attrs: Vec<(&str, Attr)> = axis.iter().map(|&a| ("axis", Attr::Int(a))).collect();
            let len = match axis {
                None => 12,
                Some(0) => 3,
                _ => 4,
            };
            for (symbolic, cond) in
                [(false, vec![1.0, 0.0, 1.0]), (true, vec![0.0, 1.0, 1.0, 0.0]), (true, vec![0.0; 2])]
            {
                let cond: Vec<f64> = cond.into_iter().take(len).collect();
                let model = ModelBuilder::new(11)
                    .input("x", t, &dims(&shape, symbolic))
                    .input("c", BOOL, &[if symbolic { "c".into() } else { (cond.len() as i64).into() }])
                    .node_with("Compress", "pick", &["x", "c"], &["y"], &attrs)
                    .output("y", t, None)
                    .build();
                let inputs = [
                    HostTensor::typed("x", elem(t), &shape, data.clone()),
                    HostTensor::typed("c", E::Bool, &[cond.len() as i64], cond.clone()),
                ];
                assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Compress {t} axis {axis:?} {cond:?}"));
            }
        }
    }
    // A constant condition: the output's shape is fixed at Compile.
    let model = ModelBuilder::new(11)
        .input("x", FLOAT, &[3.into(), 4.into()])
        .node_with("Constant", "cond", &[], &["c"], &[("value", Attr::Tensor(BOOL, vec![4], vec![1, 0, 0, 1]))])
        .node_with("Compress", "pick", &["x", "c"], &["y"], &[("axis", Attr::Int(1))])
        .output("y", FLOAT, None)
        .build();
    assert_matches_ort(
        &model,
        &[HostTensor::f32("x", &[3, 4], vals(2, 12, -1.0, 1.0))],
        0.0,
        0.0,
        "constant condition",
    );
    // A condition longer than the axis: an error naming the node.
    let model = ModelBuilder::new(11)
        .input("x", FLOAT, &["n".into()])
        .input("c", BOOL, &["m".into()])
        .node_with("Compress", "pick", &["x", "c"], &["y"], &[("axis", Attr::Int(0))])
        .output("y", FLOAT, None)
        .build();
    let x = HostTensor::f32("x", &[3], vec![1.0, 2.0, 3.0]);
    let bad = [x.clone(), HostTensor::typed("c", E::Bool, &[4], vec![1.0, 0.0, 1.0, 1.0])];
    let good = [x, HostTensor::typed("c", E::Bool, &[2], vec![0.0, 1.0])];
    bad_then_good(&model, &bad, "node 'pick' (Compress)", "4 entries for an axis of 3", &good);
}

#[test]
fn signal_windows_and_mel_weights_match_ort() {
    for op in ["HannWindow", "HammingWindow", "BlackmanWindow"] {
        for (periodic, out, st, size) in [
            (1, FLOAT, INT64, 10),
            (0, FLOAT, INT32, 10),
            (1, DOUBLE, INT32, 7),
            (0, DOUBLE, INT64, 33),
            (1, FLOAT, INT64, 1),
            (0, FLOAT, INT64, 1),
            (0, DOUBLE, INT64, 0),
        ] {
            let model = ModelBuilder::new(17)
                .input("size", st, &[])
                .node_with(
                    op,
                    "win",
                    &["size"],
                    &["y"],
                    &[("periodic", Attr::Int(periodic)), ("output_datatype", Attr::Int(out as i64))],
                )
                .output("y", out, None)
                .build();
            let inputs = [HostTensor::typed("size", elem(st), &[], vec![size as f64])];
            assert_matches_ort(&model, &inputs, 1e-6, 1e-7, &format!("{op} periodic {periodic} {out} size {size}"));
        }
    }
    // A constant size: the shape is fixed at Compile.
    let model = ModelBuilder::new(17)
        .initializer_i64("size", &[], vec![16])
        .input("x", FLOAT, &[16.into()])
        .node("HannWindow", "win", &["size"], &["w"])
        .node("Mul", "apply", &["x", "w"], &["y"])
        .output("y", FLOAT, None)
        .build();
    assert_matches_ort(&model, &[HostTensor::f32("x", &[16], vals(3, 16, -1.0, 1.0))], 1e-6, 1e-7, "windowed");
    for (bins, dft, rate, lo, hi, out) in [
        (8, 16, 8192, 0.0, 4096.0, FLOAT),
        (5, 64, 16000, 100.0, 7000.0, DOUBLE),
        (10, 512, 22050, 20.0, 11025.0, FLOAT),
    ] {
        let model = ModelBuilder::new(17)
            .input("bins", INT64, &[])
            .input("dft", INT64, &[])
            .input("rate", INT64, &[])
            .input("lo", FLOAT, &[])
            .input("hi", FLOAT, &[])
            .node_with(
                "MelWeightMatrix",
                "mel",
                &["bins", "dft", "rate", "lo", "hi"],
                &["y"],
                &[("output_datatype", Attr::Int(out as i64))],
            )
            .output("y", out, None)
            .build();
        let int = |n: &str, v: i64| HostTensor::typed(n, E::Int64, &[], vec![v as f64]);
        let inputs = [
            int("bins", bins),
            int("dft", dft),
            int("rate", rate),
            HostTensor::f32("lo", &[], vec![lo]),
            HostTensor::f32("hi", &[], vec![hi]),
        ];
        assert_matches_ort(&model, &inputs, 1e-6, 1e-7, &format!("MelWeightMatrix {bins} {dft} {rate}"));
    }
    let model = ModelBuilder::new(17)
        .input("size", INT64, &[])
        .node("BlackmanWindow", "win", &["size"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let bad = [HostTensor::typed("size", E::Int64, &[], vec![-3.0])];
    let good = [HostTensor::typed("size", E::Int64, &[], vec![5.0])];
    bad_then_good(&model, &bad, "node 'win' (BlackmanWindow)", "size -3", &good);
}

#[test]
fn lp_normalization_and_mvn_match_ort() {
    let shape = [2i64, 3, 4];
    let mut x = harness::values(4, 24, -3.0, 3.0);
    x[4..8].fill(0.0); // a zero vector along the last axis: zeros, as ORT gives
    for t in [FLOAT, DOUBLE] {
        for (p, axis) in [(2, -1), (1, -1), (2, 0), (1, 1), (2, 2)] {
            for symbolic in [false, true] {
                let model = ModelBuilder::new(13)
                    .input("x", t, &dims(&shape, symbolic))
                    .node_with(
                        "LpNormalization",
                        "lpn",
                        &["x"],
                        &["y"],
                        &[("p", Attr::Int(p)), ("axis", Attr::Int(axis))],
                    )
                    .output("y", t, None)
                    .build();
                let inputs = [HostTensor::typed("x", elem(t), &shape, x.clone())];
                assert_matches_ort(&model, &inputs, 1e-5, 1e-6, &format!("LpNormalization {t} p {p} axis {axis}"));
            }
        }
    }
    let shape4 = [2i64, 3, 2, 2];
    let mut x4 = harness::values(5, 24, -3.0, 3.0);
    x4[0] = 1e3;
    for t in [FLOAT] {
        for axes in [None, Some(vec![0i64, 2, 3]), Some(vec![1]), Some(vec![-1, -2]), Some(vec![0, 1, 2, 3])] {
            let attrs: Vec<(&str, Attr)> = axes.iter().map(|a| ("axes", Attr::Ints(a.clone()))).collect();
            for symbolic in [false, true] {
                let model = ModelBuilder::new(13)
                    .input("x", t, &dims(&shape4, symbolic))
                    .node_with("MeanVarianceNormalization", "mvn", &["x"], &["y"], &attrs)
                    .output("y", t, None)
                    .build();
                let inputs = [HostTensor::typed("x", elem(t), &shape4, x4.clone())];
                assert_matches_ort(&model, &inputs, 1e-4, 1e-5, &format!("MVN {t} axes {axes:?}"));
            }
        }
    }
    // An axis past the rank fed (no rank declared): an error naming the node.
    let model = ModelBuilder::new(13)
        .input_unshaped("x", FLOAT)
        .node_with("LpNormalization", "lpn", &["x"], &["y"], &[("axis", Attr::Int(2))])
        .output("y", FLOAT, None)
        .build();
    let bad = [HostTensor::f32("x", &[2, 2], vec![1.0; 4])];
    let good = [HostTensor::f32("x", &[2, 2, 3], vals(6, 12, -1.0, 1.0))];
    bad_then_good(&model, &bad, "node 'lpn' (LpNormalization)", "axis 2 is out of range", &good);
}

#[test]
fn det_matches_ort() {
    for t in [FLOAT] {
        for shape in [vec![3i64, 3], vec![2, 4, 4], vec![2, 1, 2, 2], vec![1, 1], vec![5, 5]] {
            let mut x = harness::values(7, count(&shape), -2.0, 2.0);
            if shape == [2, 4, 4] {
                // A singular matrix (two equal rows) and one whose first pivot is zero.
                let row: Vec<f64> = x[0..4].to_vec();
                x[4..8].copy_from_slice(&row);
                x[16] = 0.0;
            }
            for symbolic in [false, true] {
                let model = ModelBuilder::new(11)
                    .input("x", t, &dims(&shape, symbolic))
                    .node("Det", "det", &["x"], &["y"])
                    .output("y", t, None)
                    .build();
                let inputs = [HostTensor::typed("x", elem(t), &shape, x.clone())];
                assert_matches_ort(&model, &inputs, 1e-4, 1e-5, &format!("Det {t} {shape:?}"));
            }
        }
    }
    let model = ModelBuilder::new(11)
        .input("x", FLOAT, &["b".into(), "m".into(), "n".into()])
        .node("Det", "det", &["x"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let bad = [HostTensor::f32("x", &[1, 2, 3], vec![1.0; 6])];
    let good = [HostTensor::f32("x", &[2, 3, 3], vals(8, 18, -1.0, 1.0))];
    bad_then_good(&model, &bad, "node 'det' (Det)", "[..., M, M]", &good);
}

#[test]
fn deprecated_scatter_and_tensor_scatter_match_ort() {
    for axis in [None, Some(1), Some(-2)] {
        for opset in [9, 10] {
            let attrs: Vec<(&str, Attr)> = axis.iter().map(|&a| ("axis", Attr::Int(a))).collect();
            let model = ModelBuilder::new(opset)
                .input("data", FLOAT, &["a".into(), 3.into()])
                .input("i", INT64, &[2.into(), 2.into()])
                .input("u", FLOAT, &[2.into(), 2.into()])
                .node_with("Scatter", "scatter", &["data", "i", "u"], &["y"], &attrs)
                .output("y", FLOAT, None)
                .build();
            let inputs = [
                HostTensor::f32("data", &[3, 3], vals(9, 9, -1.0, 1.0)),
                HostTensor::typed("i", E::Int64, &[2, 2], vec![1.0, 0.0, 2.0, -1.0]),
                HostTensor::f32("u", &[2, 2], vec![10.0, 20.0, 30.0, 40.0]),
            ];
            assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Scatter-{opset} axis {axis:?}"));
        }
    }
    let ts = |mode: &str, with_indices: bool, symbolic: bool| {
        let mut b = ModelBuilder::new(24).input("past", FLOAT, &dims(&[2, 2, 5, 3], symbolic)).input(
            "update",
            FLOAT,
            &dims(&[2, 2, 2, 3], symbolic),
        );
        let mut ins = vec!["past", "update"];
        if with_indices {
            b = b.input("w", INT64, &dims(&[2], symbolic));
            ins.push("w");
        }
        b.node_with("TensorScatter", "kv", &ins, &["y"], &[("mode", Attr::Str(mode.into()))])
            .output("y", FLOAT, None)
            .build()
    };
    let past = HostTensor::f32("past", &[2, 2, 5, 3], vals(10, 60, -1.0, 1.0));
    let update = HostTensor::f32("update", &[2, 2, 2, 3], vals(11, 24, 2.0, 3.0));
    for symbolic in [false, true] {
        for (mode, w) in [("linear", vec![0.0, 3.0]), ("circular", vec![4.0, 1.0])] {
            let inputs = [past.clone(), update.clone(), HostTensor::typed("w", E::Int64, &[2], w.clone())];
            assert_matches_ort(&ts(mode, true, symbolic), &inputs, 0.0, 0.0, &format!("TensorScatter {mode} {w:?}"));
        }
        let inputs = [past.clone(), update.clone()];
        assert_matches_ort(&ts("linear", false, symbolic), &inputs, 0.0, 0.0, "TensorScatter without indices");
    }
    // On the third axis of a 3-D cache.
    let model = ModelBuilder::new(24)
        .input("past", FLOAT, &[2.into(), 3.into(), 4.into()])
        .input("update", FLOAT, &[2.into(), 3.into(), 2.into()])
        .input("w", INT64, &[2.into()])
        .node_with("TensorScatter", "kv", &["past", "update", "w"], &["y"], &[("axis", Attr::Int(2))])
        .output("y", FLOAT, None)
        .build();
    let inputs = [
        HostTensor::f32("past", &[2, 3, 4], vals(12, 24, -1.0, 1.0)),
        HostTensor::f32("update", &[2, 3, 2], vals(13, 12, 2.0, 3.0)),
        HostTensor::typed("w", E::Int64, &[2], vec![2.0, 1.0]),
    ];
    assert_matches_ort(&model, &inputs, 0.0, 0.0, "TensorScatter axis 2");
    let model = ts("linear", true, true);
    let bad = [past.clone(), update.clone(), HostTensor::typed("w", E::Int64, &[2], vec![4.0, 0.0])];
    let good = [past, update, HostTensor::typed("w", E::Int64, &[2], vec![3.0, 0.0])];
    bad_then_good(&model, &bad, "node 'kv' (TensorScatter)", "past the cache", &good);
}

#[test]
fn prelu_and_swish_match_ort() {
    let x_shape = [2i64, 3, 4];
    let x = HostTensor::f32("x", &x_shape, vals(14, 24, -3.0, 3.0));
    for slope in [vec![4i64], vec![3, 1], vec![1], vec![2, 3, 4], vec![1, 3, 4], vec![]] {
        for opset in [7, 9, 16] {
            for symbolic in [false, true] {
                let model = ModelBuilder::new(opset)
                    .input("x", FLOAT, &dims(&x_shape, symbolic))
                    .input("s", FLOAT, &dims(&slope, false))
                    .node("PRelu", "prelu", &["x", "s"], &["y"])
                    .output("y", FLOAT, None)
                    .build();
                let s = HostTensor::f32("s", &slope, vals(15, count(&slope), -1.0, 1.0));
                assert_matches_ort(&model, &[x.clone(), s], 0.0, 0.0, &format!("PRelu-{opset} slope {slope:?}"));
            }
        }
    }
    let model = ModelBuilder::new(16)
        .input("x", FLOAT, &["a".into(), "b".into()])
        .input("s", FLOAT, &["c".into()])
        .node("PRelu", "prelu", &["x", "s"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let xs = HostTensor::f32("x", &[2, 3], vals(16, 6, -1.0, 1.0));
    let bad = [xs.clone(), HostTensor::f32("s", &[2], vec![0.1, 0.2])];
    let good = [xs, HostTensor::f32("s", &[3], vec![0.1, 0.2, 0.3])];
    bad_then_good(&model, &bad, "node 'prelu' (PRelu)", "does not broadcast", &good);

    let sx = common::sweep(64, -30.0, 30.0, true);
    for alpha in [None, Some(1.5), Some(-0.5)] {
        let attrs: Vec<(&str, Attr)> = alpha.iter().map(|&a| ("alpha", Attr::Float(a))).collect();
        for symbolic in [false, true] {
            let model = ModelBuilder::new(24)
                .input("x", FLOAT, &dims(&[64], symbolic))
                .node_with("Swish", "swish", &["x"], &["y"], &attrs)
                .output("y", FLOAT, None)
                .build();
            assert_matches_ort(
                &model,
                &[HostTensor::f32("x", &[64], sx.clone())],
                1e-6,
                1e-5, // ORT's sigmoid is off by some 1e-6 below -16 (the exact Swish is near 1e-6 there)
                &format!("Swish {alpha:?}"),
            );
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn deform_model(
    x: &[i64],
    w: &[i64],
    off: &[i64],
    bias: bool,
    mask: Option<&[i64]>,
    attrs: &[(&str, Attr)],
    symbolic: bool,
    opset: i64,
) -> Vec<u8> {
    let mut b = ModelBuilder::new(opset)
        .input("x", FLOAT, &dims(x, symbolic))
        .input("w", FLOAT, &dims(w, false))
        .input("off", FLOAT, &dims(off, symbolic));
    let mut ins = vec!["x", "w", "off"];
    if bias {
        b = b.input("b", FLOAT, &[w[0].into()]);
        ins.push("b");
    }
    if let Some(m) = mask {
        if !bias {
            ins.push("");
        }
        b = b.input("m", FLOAT, &dims(m, symbolic));
        ins.push("m");
    }
    b.node_with("DeformConv", "deform", &ins, &["y"], attrs).output("y", FLOAT, None).build()
}

#[test]
fn deform_conv_matches_ort() {
    let ints = |v: &[i64]| Attr::Ints(v.to_vec());
    // (x, w, attrs, offset_group, output h w)
    let cases: Vec<DeformCase> = vec![
        ([1, 1, 4, 4], [1, 1, 2, 2], vec![], 1, [3, 3]),
        ([2, 2, 5, 5], [3, 2, 3, 3], vec![("pads", ints(&[1, 1, 1, 1]))], 1, [5, 5]),
        (
            [1, 4, 6, 5],
            [4, 2, 3, 2],
            vec![("group", Attr::Int(2)), ("offset_group", Attr::Int(2)), ("strides", ints(&[2, 1]))],
            2,
            [2, 4],
        ),
        ([1, 2, 7, 7], [2, 2, 2, 2], vec![("dilations", ints(&[2, 3])), ("pads", ints(&[0, 1, 1, 0]))], 2, [6, 5]),
    ];
    for (k, (x, w, attrs, og, [oh, ow])) in cases.into_iter().enumerate() {
        let mut attrs = attrs;
        if og == 2 && !attrs.iter().any(|a| a.0 == "offset_group") {
            attrs.push(("offset_group", Attr::Int(2)));
        }
        let taps = w[2] * w[3];
        let off = [x[0], og * taps * 2, oh, ow];
        let mask = [x[0], og * taps, oh, ow];
        let seed = k as u64 * 10;
        let base = vec![
            HostTensor::f32("x", &x, vals(seed, count(&x), -1.0, 1.0)),
            HostTensor::f32("w", &w, vals(seed + 1, count(&w), -1.0, 1.0)),
            HostTensor::f32("off", &off, vals(seed + 2, count(&off), -1.7, 1.7)),
        ];
        for (bias, with_mask) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut inputs = base.clone();
            if bias {
                inputs.push(HostTensor::f32("b", &[w[0]], vals(seed + 3, w[0] as usize, -1.0, 1.0)));
            }
            if with_mask {
                inputs.push(HostTensor::f32("m", &mask, vals(seed + 4, count(&mask), 0.0, 1.0)));
            }
            for (symbolic, opset) in [(false, 19), (true, 22)] {
                let model = deform_model(&x, &w, &off, bias, with_mask.then_some(&mask[..]), &attrs, symbolic, opset);
                let what = format!("DeformConv {x:?} {w:?} {attrs:?} bias {bias} mask {with_mask} sym {symbolic}");
                assert_matches_ort(&model, &inputs, 1e-4, 1e-5, &what);
            }
        }
    }
    // An offset of the wrong shape at Run: an error naming the node.
    let (x, w, off) = ([1i64, 1, 4, 4], [1i64, 1, 2, 2], [1i64, 8, 3, 3]);
    let model = deform_model(&x, &w, &off, false, None, &[], true, 19);
    let xs = HostTensor::f32("x", &x, vals(1, 16, -1.0, 1.0));
    let ws = HostTensor::f32("w", &w, vals(2, 4, -1.0, 1.0));
    let bad = [xs.clone(), ws.clone(), HostTensor::f32("off", &[1, 8, 2, 3], vec![0.0; 48])];
    let good = [xs, ws, HostTensor::f32("off", &off, vals(3, 72, -1.0, 1.0))];
    bad_then_good(&model, &bad, "node 'deform' (DeformConv)", "offset [1, 8, 2, 3] is not [1, 8, 3, 3]", &good);
}

/// Slice with int32 starts, ends, axes and steps, fed at Run and constant.
#[test]
fn slice_takes_int32_parameters() {
    let x = HostTensor::f32("x", &[4, 5], vals(17, 20, -1.0, 1.0));
    let (starts, ends, axes, steps) = ([1i32, -1], [4i32, -5], [0i32, 1], [2i32, -1]);
    for symbolic in [false, true] {
        let fed = ModelBuilder::new(13)
            .input("x", FLOAT, &dims(&[4, 5], symbolic))
            .input("starts", INT32, &[2.into()])
            .input("ends", INT32, &[2.into()])
            .input("axes", INT32, &[2.into()])
            .input("steps", INT32, &[2.into()])
            .node("Slice", "slice", &["x", "starts", "ends", "axes", "steps"], &["y"])
            .output("y", FLOAT, None)
            .build();
        let t = |n: &str, v: &[i32]| HostTensor::typed(n, E::Int32, &[2], v.iter().map(|&x| x as f64).collect());
        let inputs = [x.clone(), t("starts", &starts), t("ends", &ends), t("axes", &axes), t("steps", &steps)];
        assert_matches_ort(&fed, &inputs, 0.0, 0.0, &format!("Slice int32 fed sym {symbolic}"));
        let constant = ModelBuilder::new(13)
            .input("x", FLOAT, &dims(&[4, 5], symbolic))
            .node_with("Constant", "c0", &[], &["starts"], &[("value", i32_tensor(&[2], &starts))])
            .node_with("Constant", "c1", &[], &["ends"], &[("value", i32_tensor(&[2], &ends))])
            .node_with("Constant", "c2", &[], &["axes"], &[("value", i32_tensor(&[2], &axes))])
            .node("Slice", "slice", &["x", "starts", "ends", "axes"], &["y"])
            .output("y", FLOAT, None)
            .build();
        assert_matches_ort(
            &constant,
            std::slice::from_ref(&x),
            0.0,
            0.0,
            &format!("Slice int32 constant sym {symbolic}"),
        );
    }
}

/// A Conv or ConvTranspose whose input has no declared rank: the weight's rank fixes it.
#[test]
fn conv_of_an_input_of_unknown_rank_runs_on_rivet() {
    for (w_shape, x_shape) in [(vec![3i64, 2, 3, 3], vec![1i64, 2, 6, 5]), (vec![2, 2, 3], vec![2, 2, 7])] {
        let model = ModelBuilder::new(13)
            .input_unshaped("x", FLOAT)
            .initializer("w", &w_shape, vals(18, count(&w_shape), -1.0, 1.0))
            .node_with("Conv", "conv", &["x", "w"], &["y"], &[("pads", Attr::Ints(vec![1; 2 * (w_shape.len() - 2)]))])
            .output("y", FLOAT, None)
            .build();
        let x = HostTensor::f32("x", &x_shape, vals(19, count(&x_shape), -1.0, 1.0));
        assert_matches_ort(&model, &[x], 1e-5, 1e-5, &format!("Conv unknown rank, weight {w_shape:?}"));
        // An input of another rank than the weight's: an error naming the node.
        let bad = [HostTensor::f32("x", &[1, 2, 6], vec![0.0; 12])];
        let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
        if w_shape.len() == 4 {
            let err = harness::run(&mut rivet, &bad).expect_err("rank 3 for a 2-D conv");
            assert!(err.contains("node 'conv' (Conv)"), "{err}");
            let good = [HostTensor::f32("x", &x_shape, vals(20, count(&x_shape), -1.0, 1.0))];
            harness::run(&mut rivet, &good).expect("the session still runs");
        }
    }
    let model = ModelBuilder::new(13)
        .input_unshaped("x", FLOAT)
        .initializer("w", &[2, 3, 3, 3], vals(21, 54, -1.0, 1.0))
        .node_with("ConvTranspose", "deconv", &["x", "w"], &["y"], &[("strides", Attr::Ints(vec![2, 2]))])
        .output("y", FLOAT, None)
        .build();
    let x = HostTensor::f32("x", &[1, 2, 4, 3], vals(22, 24, -1.0, 1.0));
    assert_matches_ort(&model, &[x], 1e-5, 1e-5, "ConvTranspose unknown rank");
}
