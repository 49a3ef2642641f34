//! RoiAlign allocates nothing per steady-state Run (small and past the parallel
//! threshold, avg and max), counted by the probe build's CountingAllocator inside real ORT.

use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, ModelBuilder, FLOAT, INT64};
use rivet::probe_reader::ProbeReader;

fn model(mode: &str, c: i64, hw: i64, r: i64) -> Vec<u8> {
    let attrs = [
        ("mode", Attr::Str(mode.into())),
        ("output_height", Attr::Int(7)),
        ("output_width", Attr::Int(7)),
        ("spatial_scale", Attr::Float(0.5)),
    ];
    ModelBuilder::new(16)
        .input("x", FLOAT, &[2.into(), c.into(), hw.into(), hw.into()])
        .input("rois", FLOAT, &[r.into(), 4.into()])
        .input("bi", INT64, &[r.into()])
        .output("y", FLOAT, None)
        .node_with("RoiAlign", "ra", &["x", "rois", "bi"], &["y"], &attrs)
        .build()
}

fn inputs(c: usize, hw: usize, r: usize) -> Vec<HostTensor> {
    let x = harness::values(1, 2 * c * hw * hw, -1.0, 1.0).into_iter().map(|v| v as f32).collect();
    let v = harness::values(2, r * 4, 0.0, 2.0 * hw as f64);
    let rois = v.chunks_exact(4).flat_map(|q| [q[0].min(q[2]), q[1].min(q[3]), q[0].max(q[2]), q[1].max(q[3])]);
    vec![
        HostTensor::f32("x", &[2, c as i64, hw as i64, hw as i64], x),
        HostTensor::f32("rois", &[r as i64, 4], rois.map(|v| v as f32).collect()),
        HostTensor::typed("bi", E::Int64, &[r as i64], (0..r).map(|k| (k % 2) as f64).collect()),
    ]
}

#[test]
fn roi_align_allocates_nothing_per_steady_state_run() {
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    let probe = ProbeReader::open(&path).expect("probe exports");
    for mode in ["avg", "max"] {
        for (c, hw, r) in [(2, 8, 3), (16, 32, 40)] {
            let opts = SessionOpts { no_fallback: true, record_assignment: true, ..Default::default() };
            let mut s =
                harness::session(env, &model(mode, c as i64, hw as i64, r as i64), Arm::Rivet, &opts).expect("session");
            let inputs = harness::prepare(&inputs(c, hw, r)).expect("inputs");
            harness::time_runs(&mut s, &inputs, 3, 0).expect("warm-up");
            let before = probe.global();
            harness::time_runs(&mut s, &inputs, 0, 4).expect("runs");
            let d = probe.global().since(&before);
            let what = format!("{mode} {c}x{hw}x{r}");
            assert_eq!(d.total().allocs, 0, "{what}: {} allocations in 4 Runs: {d:#?}", d.total().allocs);
            assert_eq!(d.runs, 4, "{what}");
        }
    }
}
