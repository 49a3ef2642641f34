//! Convolutions and pools (1-D, 2-D, 3-D, grouped, transposed, MaxPool indices, 8-bit
//! pools) match ORT's CPU EP on Rivet alone; split convolutions and packed filters give
//! one thread's bits (split from e2e_nn.rs).

mod common;

use common::nn::{dims, one_input, x, Case};
use common::{assert_matches_ort, check_matches_ort, sweep};
use rivet::harness::{self, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT};

fn conv_cases() -> Vec<Case> {
    let mut c = Vec::new();
    type Attrs = Vec<(&'static str, Attr)>;
    /// (name, X shape, W shape, attributes, with bias)
    type ConvCase = (&'static str, [i64; 4], [i64; 4], Attrs, bool);
    let convs: Vec<ConvCase> = vec![
        ("3x3 pad 1", [2, 4, 9, 9], [6, 4, 3, 3], vec![("pads", Attr::Ints(vec![1, 1, 1, 1]))], true),
        (
            "stride 2 dilation 2",
            [1, 3, 11, 10],
            [4, 3, 3, 2],
            vec![("strides", Attr::Ints(vec![2, 2])), ("dilations", Attr::Ints(vec![2, 2]))],
            false,
        ),
        ("group 2", [1, 4, 7, 7], [6, 2, 3, 3], vec![("group", Attr::Int(2))], true),
        (
            "depthwise SAME_UPPER",
            [1, 4, 8, 8],
            [4, 1, 3, 3],
            vec![("group", Attr::Int(4)), ("auto_pad", Attr::Str("SAME_UPPER".into()))],
            false,
        ),
        ("pointwise", [2, 8, 5, 5], [3, 8, 1, 1], vec![], true),
        (
            "SAME_LOWER stride 2",
            [1, 2, 7, 6],
            [2, 2, 3, 3],
            vec![("auto_pad", Attr::Str("SAME_LOWER".into())), ("strides", Attr::Ints(vec![2, 2]))],
            false,
        ),
    ];
    for (name, xs, ws, attrs, bias) in convs {
        for sym in [false, true] {
            let mut b = ModelBuilder::new(21).input("x", FLOAT, &dims(&xs, sym)).input(
                "w",
                FLOAT,
                &ws.iter().map(|&d| Dim::Fixed(d)).collect::<Vec<_>>(),
            );
            let mut ins = vec!["x", "w"];
            let mut inputs = vec![x("x", &xs, 31), x("w", &ws, 32)];
            if bias {
                b = b.input("b", FLOAT, &[Dim::Fixed(ws[0])]);
                ins.push("b");
                inputs.push(x("b", &[ws[0]], 33));
            }
            let model = b.node_with("Conv", "conv", &ins, &["y"], &attrs).output("y", FLOAT, None).build();
            c.push(Case { name: format!("Conv {name} symbolic={sym}"), model, inputs });
        }
    }
    let pools: Vec<(&str, &str, Attrs)> = vec![
        (
            "MaxPool 3x3 s2 p1",
            "MaxPool",
            vec![
                ("kernel_shape", Attr::Ints(vec![3, 3])),
                ("strides", Attr::Ints(vec![2, 2])),
                ("pads", Attr::Ints(vec![1, 1, 1, 1])),
            ],
        ),
        (
            "MaxPool ceil dilated",
            "MaxPool",
            vec![
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("strides", Attr::Ints(vec![2, 2])),
                ("ceil_mode", Attr::Int(1)),
                ("dilations", Attr::Ints(vec![2, 1])),
            ],
        ),
        (
            "AveragePool pads excluded",
            "AveragePool",
            vec![("kernel_shape", Attr::Ints(vec![3, 3])), ("pads", Attr::Ints(vec![1, 1, 1, 1]))],
        ),
        (
            "AveragePool pads counted",
            "AveragePool",
            vec![
                ("kernel_shape", Attr::Ints(vec![3, 2])),
                ("pads", Attr::Ints(vec![1, 0, 1, 1])),
                ("count_include_pad", Attr::Int(1)),
            ],
        ),
        (
            "AveragePool ceil SAME_UPPER",
            "AveragePool",
            vec![
                ("kernel_shape", Attr::Ints(vec![2, 2])),
                ("strides", Attr::Ints(vec![2, 2])),
                ("auto_pad", Attr::Str("SAME_UPPER".into())),
            ],
        ),
        // One window over each 9x8 plane and one row and column of padding after it
        // (Inception-v1's last pool): the whole-plane path.
        (
            "AveragePool whole plane padded after",
            "AveragePool",
            vec![("kernel_shape", Attr::Ints(vec![10, 9])), ("pads", Attr::Ints(vec![0, 0, 1, 1]))],
        ),
        (
            "AveragePool whole plane padded after, pads counted",
            "AveragePool",
            vec![
                ("kernel_shape", Attr::Ints(vec![10, 9])),
                ("pads", Attr::Ints(vec![0, 0, 1, 1])),
                ("count_include_pad", Attr::Int(1)),
            ],
        ),
    ];
    for (name, op, attrs) in pools {
        for sym in [false, true] {
            c.push(one_input(name, 21, op, &attrs, &[2, 3, 9, 8], sym));
        }
    }
    c
}

#[test]
fn convolutions_and_pools_match_ort() {
    let all = conv_cases();
    let failures: Vec<String> =
        all.iter().filter_map(|c| check_matches_ort(&c.model, &c.inputs, 1e-4, 1e-5, &c.name).err()).collect();
    assert!(failures.is_empty(), "{} of {} cases differ:\n{}", failures.len(), all.len(), failures.join("\n"));
}

/// ConvTranspose (1-D and 2-D: strides, dilations, pads, groups, output_padding,
/// output_shape, auto_pad, bias) and Shape/Size against ORT's CPU EP.
#[test]
fn conv_transpose_and_shape_ops_match_ort() {
    use rivet::model::INT64;
    struct Case {
        x: Vec<i64>,
        w: Vec<i64>,
        attrs: Vec<(&'static str, Attr)>,
        bias: bool,
    }
    let cases = [
        Case { x: vec![1, 2, 3, 3], w: vec![2, 3, 3, 3], attrs: vec![], bias: true },
        Case {
            x: vec![2, 2, 3, 4],
            w: vec![2, 2, 2, 3],
            attrs: vec![("strides", Attr::Ints(vec![2, 3]))],
            bias: false,
        },
        Case {
            x: vec![1, 4, 3, 3],
            w: vec![4, 1, 3, 3],
            attrs: vec![
                ("group", Attr::Int(2)),
                ("dilations", Attr::Ints(vec![2, 1])),
                ("pads", Attr::Ints(vec![1, 0, 2, 1])),
            ],
            bias: true,
        },
        Case {
            x: vec![1, 1, 3, 3],
            w: vec![1, 2, 3, 3],
            attrs: vec![("strides", Attr::Ints(vec![3, 2])), ("output_padding", Attr::Ints(vec![1, 1]))],
            bias: false,
        },
        Case {
            x: vec![1, 1, 3, 3],
            w: vec![1, 2, 3, 3],
            attrs: vec![("strides", Attr::Ints(vec![3, 2])), ("output_shape", Attr::Ints(vec![10, 8]))],
            bias: false,
        },
        Case {
            x: vec![1, 1, 3, 3],
            w: vec![1, 2, 3, 3],
            attrs: vec![("strides", Attr::Ints(vec![2, 2])), ("auto_pad", Attr::Str("SAME_UPPER".into()))],
            bias: true,
        },
        Case { x: vec![1, 2, 5], w: vec![2, 3, 3], attrs: vec![("strides", Attr::Ints(vec![2]))], bias: true },
    ];
    for (k, c) in cases.iter().enumerate() {
        let dims = |v: &[i64]| v.iter().map(|&d| d.into()).collect::<Vec<Dim>>();
        let out_c = c.w[1]
            * c.attrs.iter().find(|(n, _)| *n == "group").map_or(1, |(_, a)| match a {
                Attr::Int(g) => *g,
                _ => 1,
            });
        let mut m = ModelBuilder::new(11).input("x", FLOAT, &dims(&c.x)).input("w", FLOAT, &dims(&c.w));
        let mut names = vec!["x", "w"];
        let mut inputs = vec![
            HostTensor::f32(
                "x",
                &c.x,
                harness::values(k as u64, c.x.iter().product::<i64>() as usize, -1.0, 1.0)
                    .into_iter()
                    .map(|v| v as f32)
                    .collect(),
            ),
            HostTensor::f32(
                "w",
                &c.w,
                harness::values(k as u64 + 9, c.w.iter().product::<i64>() as usize, -1.0, 1.0)
                    .into_iter()
                    .map(|v| v as f32)
                    .collect(),
            ),
        ];
        if c.bias {
            m = m.input("b", FLOAT, &[out_c.into()]);
            names.push("b");
            inputs.push(HostTensor::f32("b", &[out_c], (0..out_c).map(|v| v as f32 * 0.5).collect()));
        }
        let model = m.node_with("ConvTranspose", "ct", &names, &["y"], &c.attrs).output("y", FLOAT, None).build();
        assert_matches_ort(&model, &inputs, 1e-5, 1e-5, &format!("ConvTranspose case {k}"));
    }
    for (start, end) in [(0i64, None), (1, None), (-2, Some(-1)), (5, Some(9))] {
        let mut attrs = vec![("start", Attr::Int(start))];
        if let Some(e) = end {
            attrs.push(("end", Attr::Int(e)));
        }
        let model = ModelBuilder::new(15)
            .input("x", FLOAT, &["N".into(), 3.into(), "W".into()])
            .node_with("Shape", "shape", &["x"], &["s"], &attrs)
            .node("Size", "size", &["x"], &["n"])
            .output("s", INT64, None)
            .output("n", INT64, None)
            .build();
        let inputs = [HostTensor::f32("x", &[2, 3, 4], vec![0.0; 24])];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("Shape {start}..{end:?} and Size"));
    }
}

/// 1-D Conv, MaxPool and AveragePool ([N, C, W], run as height 1) against ORT.
#[test]
fn one_dimensional_conv_and_pools_match_ort() {
    let x: Vec<f32> = harness::values(31, 2 * 3 * 9, -1.0, 1.0).into_iter().map(|v| v as f32).collect();
    let w: Vec<f32> = harness::values(32, 4 * 3 * 3, -1.0, 1.0).into_iter().map(|v| v as f32).collect();
    let convs: [Vec<(&str, Attr)>; 4] = [
        vec![],
        vec![("strides", Attr::Ints(vec![2])), ("pads", Attr::Ints(vec![1, 2]))],
        vec![("dilations", Attr::Ints(vec![2]))],
        vec![("auto_pad", Attr::Str("SAME_UPPER".into())), ("strides", Attr::Ints(vec![2]))],
    ];
    for (k, attrs) in convs.iter().enumerate() {
        let model = ModelBuilder::new(13)
            .input("x", FLOAT, &[2.into(), 3.into(), 9.into()])
            .input("w", FLOAT, &[4.into(), 3.into(), 3.into()])
            .node_with("Conv", "conv", &["x", "w"], &["y"], attrs)
            .output("y", FLOAT, None)
            .build();
        let inputs = [HostTensor::f32("x", &[2, 3, 9], x.clone()), HostTensor::f32("w", &[4, 3, 3], w.clone())];
        assert_matches_ort(&model, &inputs, 1e-5, 1e-5, &format!("Conv 1-D case {k}"));
    }
    for op in ["MaxPool", "AveragePool"] {
        for attrs in [
            vec![("kernel_shape", Attr::Ints(vec![3]))],
            vec![
                ("kernel_shape", Attr::Ints(vec![2])),
                ("strides", Attr::Ints(vec![2])),
                ("pads", Attr::Ints(vec![1, 0])),
            ],
        ] {
            let model = ModelBuilder::new(13)
                .input("x", FLOAT, &[2.into(), 3.into(), 9.into()])
                .node_with(op, "pool", &["x"], &["y"], &attrs)
                .output("y", FLOAT, None)
                .build();
            assert_matches_ort(
                &model,
                &[HostTensor::f32("x", &[2, 3, 9], x.clone())],
                1e-6,
                1e-6,
                &format!("{op} 1-D {attrs:?}"),
            );
        }
    }
}

/// MaxPool's Indices output (flattened over the whole input) against ORT.
#[test]
fn max_pool_indices_match_ort() {
    use rivet::model::INT64;
    let x: Vec<f32> = harness::values(41, 2 * 2 * 5 * 5, -1.0, 1.0).into_iter().map(|v| v as f32).collect();
    for attrs in [
        vec![("kernel_shape", Attr::Ints(vec![2, 2]))],
        vec![
            ("kernel_shape", Attr::Ints(vec![3, 3])),
            ("strides", Attr::Ints(vec![2, 2])),
            ("pads", Attr::Ints(vec![1, 1, 1, 1])),
        ],
        vec![("kernel_shape", Attr::Ints(vec![2, 2])), ("dilations", Attr::Ints(vec![2, 2]))],
        vec![("kernel_shape", Attr::Ints(vec![2, 3])), ("storage_order", Attr::Int(1))],
    ] {
        let model = ModelBuilder::new(12)
            .input("x", FLOAT, &[2.into(), 2.into(), 5.into(), 5.into()])
            .node_with("MaxPool", "pool", &["x"], &["y", "i"], &attrs)
            .output("y", FLOAT, None)
            .output("i", INT64, None)
            .build();
        assert_matches_ort(
            &model,
            &[HostTensor::f32("x", &[2, 2, 5, 5], x.clone())],
            0.0,
            0.0,
            &format!("MaxPool indices {attrs:?}"),
        );
    }
}

/// MaxPool on uint8 and int8 (opset 12+) against ORT.
#[test]
fn max_pool_on_8_bit_integers_matches_ort() {
    use ort::value::TensorElementType as E;
    use rivet::model::{INT8, UINT8};
    for (t, e, lo) in [(UINT8, E::Uint8, 0.0), (INT8, E::Int8, -100.0)] {
        let x: Vec<f64> = harness::values(51, 2 * 5 * 5, lo, 120.0).into_iter().map(f64::round).collect();
        let model = ModelBuilder::new(12)
            .input("x", t, &[1.into(), 2.into(), 5.into(), 5.into()])
            .node_with(
                "MaxPool",
                "pool",
                &["x"],
                &["y"],
                &[
                    ("kernel_shape", Attr::Ints(vec![3, 3])),
                    ("strides", Attr::Ints(vec![2, 2])),
                    ("pads", Attr::Ints(vec![1, 1, 1, 1])),
                ],
            )
            .output("y", t, None)
            .build();
        let inputs = [HostTensor::typed("x", e, &[1, 2, 5, 5], x)];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("MaxPool {e:?}"));
    }
}

/// 3-D Conv, ConvTranspose, MaxPool (with Indices, both storage orders) and AveragePool
/// ([N, C, D, H, W]) against ORT.
#[test]
fn three_dimensional_conv_and_pools_match_ort() {
    use rivet::model::INT64;
    let xs = [2i64, 4, 5, 6, 5];
    let xv = |seed| -> Vec<f32> { harness::values(seed, 1200, -1.0, 1.0).into_iter().map(|v| v as f32).collect() };
    let dims = |s: &[i64]| s.iter().map(|&d| d.into()).collect::<Vec<Dim>>();
    let convs: [Vec<(&str, Attr)>; 4] = [
        vec![],
        vec![("strides", Attr::Ints(vec![2, 1, 2])), ("pads", Attr::Ints(vec![1, 0, 1, 0, 2, 1]))],
        vec![("dilations", Attr::Ints(vec![1, 2, 1])), ("group", Attr::Int(2))],
        vec![("auto_pad", Attr::Str("SAME_LOWER".into())), ("strides", Attr::Ints(vec![2, 2, 2]))],
    ];
    for (k, attrs) in convs.iter().enumerate() {
        let group = if k == 2 { 2 } else { 1 };
        let ws = [6i64, 4 / group, 3, 2, 3];
        let n = ws.iter().product::<i64>() as usize;
        let w: Vec<f32> = harness::values(52, n, -1.0, 1.0).into_iter().map(|v| v as f32).collect();
        let model = ModelBuilder::new(13)
            .input("x", FLOAT, &dims(&xs))
            .input("w", FLOAT, &dims(&ws))
            .input("b", FLOAT, &[6.into()])
            .node_with("Conv", "conv", &["x", "w", "b"], &["y"], attrs)
            .output("y", FLOAT, None)
            .build();
        let inputs = [
            HostTensor::f32("x", &xs, xv(51)),
            HostTensor::f32("w", &ws, w),
            HostTensor::f32("b", &[6], vec![0.5, -1.0, 0.0, 2.0, 0.25, -0.5]),
        ];
        assert_matches_ort(&model, &inputs, 1e-5, 1e-5, &format!("Conv 3-D case {k}"));
    }
    let transposes: [Vec<(&str, Attr)>; 3] = [
        vec![],
        vec![("strides", Attr::Ints(vec![2, 1, 2])), ("pads", Attr::Ints(vec![1, 0, 0, 0, 1, 1]))],
        vec![("output_shape", Attr::Ints(vec![10, 7, 11])), ("strides", Attr::Ints(vec![2, 1, 2]))],
    ];
    for (k, attrs) in transposes.iter().enumerate() {
        let ws = [4i64, 3, 2, 2, 3];
        let n = ws.iter().product::<i64>() as usize;
        let w: Vec<f32> = harness::values(53, n, -1.0, 1.0).into_iter().map(|v| v as f32).collect();
        let model = ModelBuilder::new(13)
            .input("x", FLOAT, &dims(&xs))
            .input("w", FLOAT, &dims(&ws))
            .node_with("ConvTranspose", "convt", &["x", "w"], &["y"], attrs)
            .output("y", FLOAT, None)
            .build();
        let inputs = [HostTensor::f32("x", &xs, xv(54)), HostTensor::f32("w", &ws, w)];
        assert_matches_ort(&model, &inputs, 1e-5, 1e-5, &format!("ConvTranspose 3-D case {k}"));
    }
    let pools: [Vec<(&str, Attr)>; 4] = [
        vec![("kernel_shape", Attr::Ints(vec![2, 2, 2]))],
        vec![
            ("kernel_shape", Attr::Ints(vec![3, 2, 3])),
            ("strides", Attr::Ints(vec![2, 2, 1])),
            ("pads", Attr::Ints(vec![1, 0, 1, 1, 1, 0])),
            ("ceil_mode", Attr::Int(1)),
        ],
        vec![("kernel_shape", Attr::Ints(vec![2, 2, 2])), ("dilations", Attr::Ints(vec![2, 1, 2]))],
        // Ceil mode without padding: the last windows along D and W run past the input.
        vec![
            ("kernel_shape", Attr::Ints(vec![2, 2, 2])),
            ("strides", Attr::Ints(vec![2, 2, 2])),
            ("ceil_mode", Attr::Int(1)),
        ],
    ];
    for attrs in &pools {
        for count_pad in [0, 1] {
            let mut a = attrs.clone();
            a.push(("count_include_pad", Attr::Int(count_pad)));
            let model = ModelBuilder::new(19)
                .input("x", FLOAT, &dims(&xs))
                .node_with("AveragePool", "pool", &["x"], &["y"], &a)
                .output("y", FLOAT, None)
                .build();
            let what = format!("AveragePool 3-D {a:?}");
            assert_matches_ort(&model, &[HostTensor::f32("x", &xs, xv(55))], 1e-6, 1e-6, &what);
        }
        for order in [0, 1] {
            let mut a = attrs.clone();
            a.push(("storage_order", Attr::Int(order)));
            let model = ModelBuilder::new(12)
                .input("x", FLOAT, &dims(&xs))
                .node_with("MaxPool", "pool", &["x"], &["y", "i"], &a)
                .output("y", FLOAT, None)
                .output("i", INT64, None)
                .build();
            let what = format!("MaxPool 3-D with indices {a:?}");
            assert_matches_ort(&model, &[HostTensor::f32("x", &xs, xv(56))], 0.0, 0.0, &what);
        }
    }
}

/// A convolution large enough to split over ORT's pool by output rows (a group per
/// task split too) matches ORT, with bias, and gives the same bits on one thread and on
/// all of them.
#[test]
fn a_convolution_split_over_threads_matches_one_thread_bit_for_bit() {
    for (group, c_in, c_out) in [(1i64, 16i64, 32i64), (2, 64, 64)] {
        let (xs, ws) = ([1i64, c_in, 33, 30], [c_out, c_in / group, 3, 3]);
        let n = |s: &[i64]| s.iter().product::<i64>() as usize;
        let vals = |seed, len| harness::values(seed, len, -1.0, 1.0).into_iter().map(|v| v as f32).collect();
        let dims = |s: &[i64]| s.iter().map(|&d| d.into()).collect::<Vec<Dim>>();
        let model = ModelBuilder::new(13)
            .input("x", FLOAT, &dims(&xs))
            .input("w", FLOAT, &dims(&ws))
            .input("b", FLOAT, &[c_out.into()])
            .node_with(
                "Conv",
                "conv",
                &["x", "w", "b"],
                &["y"],
                &[("pads", Attr::Ints(vec![1, 1, 1, 1])), ("group", Attr::Int(group))],
            )
            .output("y", FLOAT, None)
            .build();
        let inputs = [
            HostTensor::f32("x", &xs, vals(71, n(&xs))),
            HostTensor::f32("w", &ws, vals(72, n(&ws))),
            HostTensor::f32("b", &[c_out], vals(73, c_out as usize)),
        ];
        assert_matches_ort(&model, &inputs, 1e-5, 1e-5, &format!("Conv split over threads, group {group}"));
        let (one, all) = (common::rivet_run_at(&model, &inputs, 1, 1), common::rivet_run_at(&model, &inputs, 0, 1));
        assert!(common::same_first_output_bits(&one, &all), "group {group}");
    }
}

/// Constant filters are packed once and kept across Runs: a first Run whose output has
/// one position (a matrix-vector product) must not leave a packing that larger Runs
/// cannot use; every Run of one session matches ORT.
#[test]
fn conv_filters_packed_once_serve_runs_of_every_size() {
    let w: Vec<f32> = sweep(8 * 4 * 9, -1.0, 1.0, false);
    let model = ModelBuilder::new(17)
        .input("x", FLOAT, &[Dim::from(1), Dim::from(4), Dim::from("H"), Dim::from("W")])
        .initializer("w", &[8, 4, 3, 3], w)
        .node("Conv", "conv", &["x", "w"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let opts = harness::SessionOpts { no_fallback: true, ..Default::default() };
    let mut rivet = harness::session(common::env(), &model, harness::Arm::Rivet, &opts).expect("Rivet session");
    let mut ort = common::ort_session(&model);
    for (run, side) in [3i64, 6, 3, 9, 6].into_iter().enumerate() {
        let inputs = [x("x", &[1, 4, side, side], run as u64)];
        let want = harness::run(&mut ort, &inputs).expect("ORT run");
        let got = harness::run(&mut rivet, &inputs).unwrap_or_else(|e| panic!("Run {run} ({side}x{side}): {e}"));
        harness::compare(&got, &want, 1e-4, 1e-5).unwrap_or_else(|e| panic!("Run {run} ({side}x{side}): {e}"));
    }
}
