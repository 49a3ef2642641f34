//! NonMaxSuppression, ReverseSequence and MaxUnpool against ORT's CPU EP, on Rivet
//! alone: static and symbolic shapes, optional inputs fed at Run or constant, ties, and
//! bad inputs (an error naming the node, the session still usable). Integer outputs are
//! compared exactly.

mod common;

use common::{assert_matches_ort, env, ort_session, rivet_session};
use ort::value::TensorElementType as E;
use rivet::harness::{self, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, BOOL, FLOAT, INT32, INT64};

fn floats(seed: u64, n: usize, lo: f64, hi: f64) -> Vec<f32> {
    harness::values(seed, n, lo, hi).into_iter().map(|v| v as f32).collect()
}

/// Boxes that overlap a lot (corners in a 10x10 field, sides 1..4), in either corner
/// order, or as centers and sizes.
fn boxes(seed: u64, batches: usize, n: usize, center: bool) -> Vec<f32> {
    let v = floats(seed, batches * n * 4, 0.0, 1.0);
    v.chunks_exact(4)
        .flat_map(|c| {
            let (y, x, h, w) = (c[0] * 10.0, c[1] * 10.0, 1.0 + c[2] * 3.0, 1.0 + c[3] * 3.0);
            if center {
                [x, y, w, h]
            } else if c[2] < 0.5 {
                [y, x, y + h, x + w]
            } else {
                [y + h, x + w, y, x]
            }
        })
        .collect()
}

/// Scores on a grid of 8 values, so many are equal (ties go to the lower box index).
fn scores(seed: u64, n: usize) -> Vec<f32> {
    floats(seed, n, 0.0, 1.0).into_iter().map(|v| (v * 8.0).floor() / 8.0).collect()
}

struct Nms {
    batches: usize,
    classes: usize,
    boxes: usize,
    center: bool,
    symbolic: bool,
    /// The optional inputs as graph inputs (fed at Run), else initializers.
    at_run: bool,
    score_threshold: bool,
    opset: i64,
}

impl Nms {
    fn model(&self, max: i64, iou: f32, score: f32) -> Vec<u8> {
        let (b, c, n) = (self.batches as i64, self.classes as i64, self.boxes as i64);
        let (bd, nd): (Dim, Dim) = if self.symbolic { ("B".into(), "N".into()) } else { (b.into(), n.into()) };
        let mut m = ModelBuilder::new(self.opset).input("boxes", FLOAT, &[bd.clone(), nd.clone(), 4.into()]).input(
            "scores",
            FLOAT,
            &[bd, c.into(), nd],
        );
        let mut ins = vec!["boxes", "scores", "max", "iou"];
        if self.at_run {
            m = m.input("max", INT64, &[1.into()]).input("iou", FLOAT, &[1.into()]);
        } else {
            m = m.initializer_i64("max", &[1], vec![max]).initializer("iou", &[1], vec![iou]);
        }
        if self.score_threshold {
            ins.push("score");
            m = if self.at_run {
                m.input("score", FLOAT, &[1.into()])
            } else {
                m.initializer("score", &[1], vec![score])
            };
        }
        let attrs = [("center_point_box", Attr::Int(self.center as i64))];
        m.output("selected", INT64, None).node_with("NonMaxSuppression", "nms", &ins, &["selected"], &attrs).build()
    }

    fn inputs(&self, seed: u64, max: i64, iou: f32, score: f32) -> Vec<HostTensor> {
        let (b, c, n) = (self.batches, self.classes, self.boxes);
        let mut v = vec![
            HostTensor::f32("boxes", &[b as i64, n as i64, 4], boxes(seed, b, n, self.center)),
            HostTensor::f32("scores", &[b as i64, c as i64, n as i64], scores(seed + 1, b * c * n)),
        ];
        if self.at_run {
            v.push(HostTensor::typed("max", E::Int64, &[1], vec![max as f64]));
            v.push(HostTensor::f32("iou", &[1], vec![iou]));
            if self.score_threshold {
                v.push(HostTensor::f32("score", &[1], vec![score]));
            }
        }
        v
    }
}

#[test]
fn non_max_suppression_matches_ort_with_ties_and_every_option() {
    env();
    for center in [false, true] {
        for score_threshold in [false, true] {
            for at_run in [false, true] {
                for (max, iou, score) in [(3, 0.3, 0.4), (100, 0.0, 0.0), (0, 0.5, 0.0), (2, 1.0, 0.9), (5, 0.6, 0.5)] {
                    let c = Nms {
                        batches: 2,
                        classes: 3,
                        boxes: 40,
                        center,
                        symbolic: false,
                        at_run,
                        score_threshold,
                        opset: 11,
                    };
                    let what = format!("center {center} score {score_threshold} at_run {at_run} max {max} iou {iou}");
                    assert_matches_ort(&c.model(max, iou, score), &c.inputs(5, max, iou, score), 0.0, 0.0, &what);
                }
            }
        }
    }
    let c = Nms {
        batches: 1,
        classes: 1,
        boxes: 30,
        center: false,
        symbolic: false,
        at_run: true,
        score_threshold: true,
        opset: 10,
    };
    assert_matches_ort(&c.model(4, 0.4, 0.2), &c.inputs(9, 4, 0.4, 0.2), 0.0, 0.0, "opset 10");
}

#[test]
fn non_max_suppression_on_symbolic_shapes_and_identical_boxes() {
    env();
    let c = Nms {
        batches: 2,
        classes: 2,
        boxes: 10,
        center: false,
        symbolic: true,
        at_run: true,
        score_threshold: false,
        opset: 11,
    };
    let model = c.model(0, 0.0, 0.0);
    let mut rivet = rivet_session(&model);
    let mut ort = ort_session(&model);
    for (b, n, seed) in [(2, 10, 1), (1, 50, 2), (3, 7, 3), (1, 0, 4)] {
        let c = Nms { batches: b, boxes: n, ..c };
        let ins = c.inputs(seed, 6, 0.45, 0.0);
        let want = harness::run(&mut ort, &ins).expect("ORT runs");
        let got = harness::run(&mut rivet, &ins).expect("Rivet runs");
        harness::compare(&got, &want, 0.0, 0.0).unwrap_or_else(|e| panic!("{b}x{n}: {e}"));
    }
    // Ten identical boxes with equal scores: the first is kept.
    let ins = vec![
        HostTensor::f32("boxes", &[1, 10, 4], [0.0, 0.0, 1.0, 1.0].repeat(10)),
        HostTensor::f32("scores", &[1, 2, 10], vec![0.9; 20]),
        HostTensor::typed("max", E::Int64, &[1], vec![3.0]),
        HostTensor::f32("iou", &[1], vec![0.5]),
    ];
    let got = harness::run(&mut rivet, &ins).expect("Rivet runs");
    assert_eq!(got[0].data, [0.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
    harness::compare(&got, &harness::run(&mut ort, &ins).expect("ORT runs"), 0.0, 0.0).expect("as ORT");
}

#[test]
fn non_max_suppression_bad_inputs_name_the_node() {
    env();
    let c = Nms {
        batches: 1,
        classes: 1,
        boxes: 6,
        center: false,
        symbolic: true,
        at_run: true,
        score_threshold: false,
        opset: 11,
    };
    let model = c.model(0, 0.0, 0.0);
    let mut s = rivet_session(&model);
    let mut bad = c.inputs(1, 3, 0.5, 0.0);
    bad[1] = HostTensor::f32("scores", &[1, 1, 5], vec![0.5; 5]);
    let err = harness::run(&mut s, &bad).expect_err("scores for 5 boxes of 6").to_string();
    assert!(err.contains("'nms'") && err.contains("scores must be"), "{err}");
    let err = harness::run(&mut s, &c.inputs(1, 3, 1.5, 0.0)).expect_err("an IoU above 1").to_string();
    assert!(err.contains("'nms'") && err.contains("iou_threshold 1.5"), "{err}");
    let got = harness::run(&mut s, &c.inputs(1, 3, 0.5, 0.0)).expect("still runs");
    let want = harness::run(&mut ort_session(&model), &c.inputs(1, 3, 0.5, 0.0)).expect("ORT runs");
    harness::compare(&got, &want, 0.0, 0.0).expect("as ORT");
}

fn reverse_model(elem: i32, dims: &[Dim], time_axis: i64, batch: Dim) -> Vec<u8> {
    let attrs = [("time_axis", Attr::Int(time_axis)), ("batch_axis", Attr::Int(1 - time_axis))];
    ModelBuilder::new(10)
        .input("x", elem, dims)
        .input("lens", INT64, &[batch])
        .output("y", elem, None)
        .node_with("ReverseSequence", "rev", &["x", "lens"], &["y"], &attrs)
        .build()
}

#[test]
fn reverse_sequence_matches_ort_for_both_axes_and_types() {
    env();
    for (elem, e) in [(FLOAT, E::Float32), (INT32, E::Int32), (INT64, E::Int64), (BOOL, E::Bool)] {
        for time_axis in [0, 1] {
            let (t, b) = (6, 4);
            let shape: Vec<i64> = if time_axis == 0 { vec![t, b, 3] } else { vec![b, t, 3] };
            let dims: Vec<Dim> = shape.iter().map(|&d| d.into()).collect();
            let model = reverse_model(elem, &dims, time_axis, b.into());
            let n = (t * b * 3) as usize;
            let x: Vec<f64> = harness::values(3, n, 0.0, 50.0)
                .into_iter()
                .map(|v| if elem == BOOL { (v > 25.0) as u8 as f64 } else { v.floor() })
                .collect();
            let ins = vec![
                HostTensor::typed("x", e, &shape, x),
                HostTensor::typed("lens", E::Int64, &[b], vec![6.0, 0.0, 3.0, 1.0]),
            ];
            assert_matches_ort(&model, &ins, 0.0, 0.0, &format!("type {elem} time_axis {time_axis}"));
        }
    }
}

#[test]
fn reverse_sequence_on_symbolic_shapes_and_bad_lengths() {
    env();
    let model = reverse_model(FLOAT, &["B".into(), "T".into(), "C".into()], 1, "B".into());
    let mut rivet = rivet_session(&model);
    let mut ort = ort_session(&model);
    for (b, t, c) in [(3, 5, 2), (1, 9, 1), (4, 2, 3)] {
        let lens: Vec<f64> = (0..b).map(|i| ((i * 7 + 2) % (t + 1)) as f64).collect();
        let ins = vec![
            HostTensor::f32("x", &[b as i64, t as i64, c], floats(1, b * t * c as usize, -1.0, 1.0)),
            HostTensor::typed("lens", E::Int64, &[b as i64], lens),
        ];
        let want = harness::run(&mut ort, &ins).expect("ORT runs");
        harness::compare(&harness::run(&mut rivet, &ins).expect("Rivet runs"), &want, 0.0, 0.0).expect("as ORT");
    }
    let bad =
        vec![HostTensor::f32("x", &[2, 3, 1], vec![1.0; 6]), HostTensor::typed("lens", E::Int64, &[2], vec![4.0, 1.0])];
    let err = harness::run(&mut rivet, &bad).expect_err("a length past the sequence").to_string();
    assert!(err.contains("'rev'") && err.contains("sequence_lens value 4"), "{err}");
    let ok = vec![
        HostTensor::f32("x", &[2, 3, 1], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        HostTensor::typed("lens", E::Int64, &[2], vec![3.0, 2.0]),
    ];
    assert_eq!(harness::run(&mut rivet, &ok).expect("still runs")[0].data, [3.0, 2.0, 1.0, 5.0, 4.0, 6.0]);
}

/// MaxUnpool of `x` (pooled `[n, c, spatial...]`) with indices that MaxPool could give:
/// one distinct position per value in each (n, c) plane of the output.
fn unpool_inputs(pooled: &[i64], out_spatial: &[i64], seed: u64, with_shape: bool) -> Vec<HostTensor> {
    let (n, c) = (pooled[0], pooled[1]);
    let per_plane: i64 = pooled[2..].iter().product();
    let plane: i64 = out_spatial.iter().product();
    let mut idx = Vec::new();
    for p in 0..n * c {
        // A stride through the plane that visits distinct positions.
        let step = (plane / per_plane.max(1)).max(1);
        for k in 0..per_plane {
            idx.push((p * plane + (k * step + (seed as i64 + k) % step) % plane) as f64);
        }
    }
    let count = (n * c * per_plane) as usize;
    let mut v = vec![
        HostTensor::f32("x", pooled, floats(seed, count, -2.0, 2.0)),
        HostTensor::typed("i", E::Int64, pooled, idx),
    ];
    if with_shape {
        let shape: Vec<f64> = [n, c].iter().chain(out_spatial).map(|&d| d as f64).collect();
        v.push(HostTensor::typed("shape", E::Int64, &[shape.len() as i64], shape));
    }
    v
}

fn unpool_model(opset: i64, dims: &[Dim], rank: usize, attrs: &[(&str, Attr)], with_shape: bool) -> Vec<u8> {
    let mut m = ModelBuilder::new(opset).input("x", FLOAT, dims).input("i", INT64, dims);
    let mut ins = vec!["x", "i"];
    if with_shape {
        m = m.input("shape", INT64, &[(rank as i64).into()]);
        ins.push("shape");
    }
    m.output("y", FLOAT, None).node_with("MaxUnpool", "unpool", &ins, &["y"], attrs).build()
}

#[test]
fn max_unpool_matches_ort_with_and_without_output_shape() {
    env();
    let k2s2 = vec![("kernel_shape", Attr::Ints(vec![2, 2])), ("strides", Attr::Ints(vec![2, 2]))];
    let k3s2p = vec![
        ("kernel_shape", Attr::Ints(vec![3, 3])),
        ("strides", Attr::Ints(vec![2, 2])),
        ("pads", Attr::Ints(vec![1, 1, 0, 1])),
    ];
    let k3_1d = vec![("kernel_shape", Attr::Ints(vec![3]))];
    type Case<'a> = (&'a [(&'a str, Attr)], Vec<i64>, Vec<i64>);
    let cases: [Case; 3] = [
        (&k2s2, vec![2, 3, 4, 5], vec![8, 10]),
        (&k3s2p, vec![1, 2, 4, 4], vec![8, 7]),
        (&k3_1d, vec![2, 2, 6], vec![8]),
    ];
    for opset in [9, 11, 22] {
        for (attrs, pooled, out) in &cases {
            let dims: Vec<Dim> = pooled.iter().map(|&d| d.into()).collect();
            let model = unpool_model(opset, &dims, pooled.len(), attrs, false);
            let what = format!("opset {opset} {pooled:?}");
            assert_matches_ort(&model, &unpool_inputs(pooled, out, 1, false), 0.0, 0.0, &what);
            if opset >= 11 {
                // A larger output than the pooled shape gives (as for a MaxPool input of odd size).
                let big: Vec<i64> = out.iter().map(|d| d + 1).collect();
                let model = unpool_model(opset, &dims, pooled.len(), attrs, true);
                assert_matches_ort(
                    &model,
                    &unpool_inputs(pooled, &big, 2, true),
                    0.0,
                    0.0,
                    &format!("{what} output_shape"),
                );
            }
        }
    }
}

#[test]
fn max_unpool_on_symbolic_shapes_and_bad_indices() {
    env();
    let attrs = [("kernel_shape", Attr::Ints(vec![2, 2])), ("strides", Attr::Ints(vec![2, 2]))];
    let model = unpool_model(11, &["N".into(), 2.into(), "H".into(), "W".into()], 4, &attrs, false);
    let mut rivet = rivet_session(&model);
    let mut ort = ort_session(&model);
    for (n, h, w) in [(1, 2, 3), (3, 4, 1)] {
        let ins = unpool_inputs(&[n, 2, h, w], &[2 * h, 2 * w], 3, false);
        let want = harness::run(&mut ort, &ins).expect("ORT runs");
        harness::compare(&harness::run(&mut rivet, &ins).expect("Rivet runs"), &want, 0.0, 0.0).expect("as ORT");
    }
    let mut bad = unpool_inputs(&[1, 2, 2, 2], &[4, 4], 3, false);
    bad[1].data[3] = 32.0;
    let err = harness::run(&mut rivet, &bad).expect_err("an index past the output").to_string();
    assert!(err.contains("'unpool'") && err.contains("index 32"), "{err}");
    let ins = unpool_inputs(&[1, 2, 2, 2], &[4, 4], 3, false);
    harness::compare(
        &harness::run(&mut rivet, &ins).expect("still runs"),
        &harness::run(&mut ort, &ins).unwrap(),
        0.0,
        0.0,
    )
    .expect("as ORT");
}
