//! RoiAlign against ORT's CPU EP, on Rivet alone, compared exactly (Rivet keeps ORT's
//! order of float operations): avg and max (ORT's max of weighted corners), both
//! coordinate modes, opsets 10 / 16 / 22, fixed and adaptive sampling, rois partly or
//! wholly outside the image, reversed and tiny, a large case (the parallel path),
//! symbolic shapes, and bad inputs (an error naming the node, the session still usable).

mod common;

use common::{assert_matches_ort, env, ort_session, rivet_session};
use ort::value::TensorElementType as E;
use rivet::harness::{self, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT, INT64};

fn floats(seed: u64, n: usize, lo: f64, hi: f64) -> Vec<f32> {
    harness::values(seed, n, lo, hi).into_iter().map(|v| v as f32).collect()
}

struct Case {
    opset: i64,
    mode: &'static str,
    /// `None`: the attribute is left out (the opset's default).
    ctm: Option<&'static str>,
    sampling_ratio: i64,
    spatial_scale: f32,
    out: (i64, i64),
    symbolic: bool,
}

impl Case {
    fn model(&self) -> Vec<u8> {
        self.model_at(self.opset)
    }

    /// ORT's CPU EP has no RoiAlign-22 (its semantics are 16's, with bfloat16 added): the
    /// baseline for 22 is ORT on the same model at 16.
    fn baseline(&self) -> Vec<u8> {
        self.model_at(self.opset.min(16))
    }

    fn model_at(&self, opset: i64) -> Vec<u8> {
        let d = |name: &str, n: i64| -> Dim {
            if self.symbolic {
                name.into()
            } else {
                n.into()
            }
        };
        let mut attrs = vec![
            ("mode", Attr::Str(self.mode.into())),
            ("output_height", Attr::Int(self.out.0)),
            ("output_width", Attr::Int(self.out.1)),
            ("sampling_ratio", Attr::Int(self.sampling_ratio)),
            ("spatial_scale", Attr::Float(self.spatial_scale)),
        ];
        if let Some(m) = self.ctm {
            attrs.push(("coordinate_transformation_mode", Attr::Str(m.into())));
        }
        ModelBuilder::new(opset)
            .input("x", FLOAT, &[d("N", 2), d("C", 3), d("H", 9), d("W", 11)])
            .input("rois", FLOAT, &[d("R", 7), d("K", 4)])
            .input("bi", INT64, &[d("R", 7)])
            .output("y", FLOAT, None)
            .node_with("RoiAlign", "ra", &["x", "rois", "bi"], &["y"], &attrs)
            .build()
    }
}

/// Inputs for `r` rois over X `[n, c, h, w]` (coordinates in X's pixels divided by
/// `scale`): the first few are special (partly outside, wholly outside, reversed,
/// smaller than a pixel, on the last row), the rest random.
fn inputs(seed: u64, (n, c, h, w): (usize, usize, usize, usize), r: usize, scale: f32) -> Vec<HostTensor> {
    let (hf, wf) = (h as f32 / scale, w as f32 / scale);
    let special = [
        [-2.0, -3.0, wf * 0.5, hf * 0.6],
        [wf + 5.0, hf + 5.0, wf + 9.0, hf + 12.0],
        [wf * 0.8, hf * 0.7, wf * 0.2, hf * 0.1],
        [1.2, 1.3, 1.5, 1.4],
        [0.0, hf - 0.5, wf, hf + 0.5],
        [0.0, 0.0, wf, hf],
    ];
    let v = floats(seed, r * 4, -0.2, 1.2);
    let mut rois = Vec::with_capacity(r * 4);
    for k in 0..r {
        let b = match special.get(k) {
            Some(b) => *b,
            None => {
                let q = &v[k * 4..k * 4 + 4];
                let (x0, y0) = (q[0].min(q[2]) * wf, q[1].min(q[3]) * hf);
                [x0, y0, x0 + (q[2] - q[0]).abs() * wf, y0 + (q[3] - q[1]).abs() * hf]
            }
        };
        rois.extend_from_slice(&b);
    }
    let batch: Vec<f64> = (0..r).map(|k| ((k * 7 + seed as usize) % n) as f64).collect();
    vec![
        HostTensor::f32("x", &[n as i64, c as i64, h as i64, w as i64], floats(seed + 1, n * c * h * w, -3.0, 3.0)),
        HostTensor::f32("rois", &[r as i64, 4], rois),
        HostTensor::typed("bi", E::Int64, &[r as i64], batch),
    ]
}

/// Rivet on the case's model equals ORT on its baseline, exactly; every node on Rivet.
fn check(c: &Case, ins: &[HostTensor], what: &str) {
    if c.opset < 22 {
        return assert_matches_ort(&c.model(), ins, 0.0, 0.0, what);
    }
    let want = harness::run(&mut ort_session(&c.baseline()), ins).expect("ORT runs");
    let mut s = rivet_session(&c.model());
    let assigned = rivet::ort_extra::graph_assignment(&s).expect("assignment info");
    assert!(assigned.iter().all(|(ep, _, _)| ep == harness::RIVET_EP), "{what}: {assigned:?}");
    let got = harness::run(&mut s, ins).expect("Rivet runs");
    harness::compare(&got, &want, 0.0, 0.0).unwrap_or_else(|e| panic!("{what}: {e}"));
}

#[test]
fn roi_align_matches_ort_in_every_mode() {
    env();
    let mut seed = 0;
    for opset in [10, 16, 22] {
        let ctms: &[Option<&str>] =
            if opset == 10 { &[None] } else { &[None, Some("half_pixel"), Some("output_half_pixel")] };
        for &ctm in ctms {
            for mode in ["avg", "max"] {
                for sampling_ratio in [0, 2, 1] {
                    for (spatial_scale, out) in [(1.0, (3, 4)), (0.5, (2, 2)), (0.25, (1, 5))] {
                        seed += 1;
                        let c = Case { opset, mode, ctm, sampling_ratio, spatial_scale, out, symbolic: false };
                        let what = format!("opset {opset} {mode} {ctm:?} ratio {sampling_ratio} scale {spatial_scale}");
                        let ins = inputs(seed, (2, 3, 9, 11), 7, spatial_scale);
                        check(&c, &ins, &what);
                    }
                }
            }
        }
    }
}

#[test]
fn roi_align_large_runs_in_parallel_as_ort() {
    env();
    // 48 rois x 16 channels x 7x7 bins with adaptive grids: far past the parallel
    // threshold.
    for mode in ["avg", "max"] {
        let c = Case { opset: 16, mode, ctm: None, sampling_ratio: 0, spatial_scale: 0.5, out: (7, 7), symbolic: true };
        check(&c, &inputs(3, (2, 16, 40, 36), 48, 0.5), mode);
    }
}

#[test]
fn roi_align_on_symbolic_shapes() {
    env();
    let c = Case {
        opset: 22,
        mode: "avg",
        ctm: Some("output_half_pixel"),
        sampling_ratio: 2,
        spatial_scale: 1.0,
        out: (2, 3),
        symbolic: true,
    };
    let mut rivet = rivet_session(&c.model());
    let mut ort = ort_session(&c.baseline());
    for (dims, r, seed) in [((2, 3, 9, 11), 7, 1), ((1, 2, 4, 5), 12, 2), ((3, 1, 1, 1), 6, 3), ((2, 2, 6, 6), 0, 4)] {
        let ins = inputs(seed, dims, r, 1.0);
        let want = harness::run(&mut ort, &ins).expect("ORT runs");
        let got = harness::run(&mut rivet, &ins).expect("Rivet runs");
        harness::compare(&got, &want, 0.0, 0.0).unwrap_or_else(|e| panic!("{dims:?} x {r}: {e}"));
    }
}

#[test]
fn roi_align_bad_inputs_name_the_node() {
    env();
    let c =
        Case { opset: 16, mode: "max", ctm: None, sampling_ratio: 0, spatial_scale: 1.0, out: (2, 2), symbolic: true };
    let model = c.model();
    let mut s = rivet_session(&model);
    for b in [2.0, -1.0] {
        let mut bad = inputs(1, (2, 3, 9, 11), 7, 1.0);
        bad[2] = HostTensor::typed("bi", E::Int64, &[7], vec![0.0, 1.0, 0.0, b, 1.0, 0.0, 0.0]);
        let err = harness::run(&mut s, &bad).expect_err("a batch index outside [0, 2)").to_string();
        assert!(err.contains("'ra'") && err.contains(&format!("batch_indices value {b} at index 3")), "{err}");
    }
    let mut bad = inputs(1, (2, 3, 9, 11), 7, 1.0);
    bad[1] = HostTensor::f32("rois", &[7, 3], vec![1.0; 21]);
    let err = harness::run(&mut s, &bad).expect_err("rois of 3 numbers").to_string();
    assert!(err.contains("'ra'") && err.contains("rois must be [num_rois, 4]"), "{err}");
    let mut bad = inputs(1, (2, 3, 9, 11), 7, 1.0);
    bad[1] = HostTensor::f32("rois", &[1, 4], vec![0.0, 0.0, 1e9, 1e9]);
    bad[2] = HostTensor::typed("bi", E::Int64, &[1], vec![0.0]);
    let err = harness::run(&mut s, &bad).expect_err("a roi of absurd extent").to_string();
    assert!(err.contains("'ra'") && err.contains("samples per bin"), "{err}");
    let ins = inputs(1, (2, 3, 9, 11), 7, 1.0);
    let got = harness::run(&mut s, &ins).expect("still runs");
    let want = harness::run(&mut ort_session(&model), &ins).expect("ORT runs");
    harness::compare(&got, &want, 0.0, 0.0).expect("as ORT");
}

#[test]
fn roi_align_unsupported_attributes_are_not_claimed() {
    env();
    for (name, value) in [("mode", Attr::Str("min".into())), ("sampling_ratio", Attr::Int(-1))] {
        let m = ModelBuilder::new(16)
            .input("x", FLOAT, &[1.into(), 1.into(), 4.into(), 4.into()])
            .input("rois", FLOAT, &[1.into(), 4.into()])
            .input("bi", INT64, &[1.into()])
            .output("y", FLOAT, None)
            .node_with("RoiAlign", "ra", &["x", "rois", "bi"], &["y"], &[(name, value)])
            .build();
        let opts = common::strict();
        let r = harness::session(env(), &m, harness::Arm::Rivet, &opts);
        assert!(r.is_err(), "{name}: a strict Rivet session must refuse the node");
    }
}
