//! Resize, Upsample, GridSample, AffineGrid and Col2Im allocate nothing in a steady-state
//! Run (the probe build's counting allocator, inside real ORT): their tables and
//! intermediates live in the step's scratch, on one thread and split over two.

use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT, FLOAT16, INT64, UINT8};
use rivet::probe_reader::ProbeReader;

fn x(name: &str, shape: &[i64]) -> HostTensor {
    let n: i64 = shape.iter().product();
    HostTensor::f32(name, shape, harness::values(1, n as usize, -2.0, 2.0).into_iter().map(|v| v as f32).collect())
}

fn fixed(shape: &[i64]) -> Vec<Dim> {
    shape.iter().map(|&d| Dim::Fixed(d)).collect()
}

fn s(v: &str) -> Attr {
    Attr::Str(v.into())
}

fn resize_case(shape: &[i64], scales: Vec<f32>, attrs: &[(&str, Attr)]) -> (Vec<u8>, Vec<HostTensor>) {
    let model = ModelBuilder::new(19)
        .input("x", FLOAT, &fixed(shape))
        .initializer("scales", &[scales.len() as i64], scales)
        .node_with("Resize", "r", &["x", "", "scales"], &["y"], attrs)
        .output("y", FLOAT, None)
        .build();
    (model, vec![x("x", shape)])
}

fn cases() -> Vec<(&'static str, Vec<u8>, Vec<HostTensor>)> {
    let big = [1, 8, 64, 64];
    let mut c = vec![];
    let (m, i) = resize_case(&big, vec![1.0, 1.0, 2.0, 2.0], &[("mode", s("nearest"))]);
    c.push(("nearest 2x (plane kernel, split)", m, i));
    let (m, i) = resize_case(&big, vec![1.0, 1.0, 2.0, 2.0], &[("mode", s("linear"))]);
    c.push(("bilinear 2x (plane kernel, split)", m, i));
    let (m, i) = resize_case(&big, vec![1.0, 1.0, 1.5, 0.75], &[("mode", s("cubic"))]);
    c.push(("cubic (passes)", m, i));
    let (m, i) =
        resize_case(&[2, 3, 8, 8], vec![1.0, 2.0, 0.5, 0.5], &[("mode", s("linear")), ("antialias", Attr::Int(1))]);
    c.push(("antialias over three axes (passes)", m, i));
    // Sizes fed at Run: the shape is inferred every Run.
    let model = ModelBuilder::new(19)
        .input("x", FLOAT, &fixed(&[1, 2, 6, 6]))
        .input("sizes", INT64, &fixed(&[4]))
        .node_with("Resize", "r", &["x", "", "", "sizes"], &["y"], &[("mode", s("linear"))])
        .output("y", FLOAT, None)
        .build();
    let sizes = HostTensor::typed("sizes", E::Int64, &[4], vec![1.0, 2.0, 12.0, 9.0]);
    c.push(("sizes at Run", model, vec![x("x", &[1, 2, 6, 6]), sizes]));
    let model = ModelBuilder::new(19)
        .input("x", FLOAT, &fixed(&[1, 2, 6, 6]))
        .initializer("scales", &[4], vec![1.0, 1.0, 2.0, 1.5])
        .node_with("Cast", "h", &["x"], &["xh"], &[("to", Attr::Int(FLOAT16 as i64))])
        .node_with("Resize", "r", &["xh", "", "scales"], &["yh"], &[("mode", s("linear"))])
        .node_with("Cast", "f", &["yh"], &["y"], &[("to", Attr::Int(FLOAT as i64))])
        .output("y", FLOAT, None)
        .build();
    c.push(("float16 linear", model, vec![x("x", &[1, 2, 6, 6])]));
    let model = ModelBuilder::new(19)
        .input("x", UINT8, &fixed(&[1, 2, 6, 6]))
        .initializer("scales", &[4], vec![1.0, 1.0, 2.0, 1.5])
        .node_with("Resize", "r", &["x", "", "scales"], &["y"], &[("mode", s("nearest"))])
        .output("y", UINT8, None)
        .build();
    c.push(("uint8 nearest", model, vec![HostTensor::typed("x", E::Uint8, &[1, 2, 6, 6], vec![7.0; 72])]));
    let model = ModelBuilder::new(20)
        .input("x", FLOAT, &fixed(&[1, 4, 16, 16]))
        .input("grid", FLOAT, &fixed(&[1, 32, 32, 2]))
        .node_with("GridSample", "g", &["x", "grid"], &["y"], &[("mode", s("cubic"))])
        .output("y", FLOAT, None)
        .build();
    c.push(("GridSample", model, vec![x("x", &[1, 4, 16, 16]), x("grid", &[1, 32, 32, 2])]));
    let model = ModelBuilder::new(20)
        .input("theta", FLOAT, &fixed(&[2, 2, 3]))
        .initializer_i64("size", &[4], vec![2, 3, 16, 16])
        .node_with("AffineGrid", "a", &["theta", "size"], &["y"], &[])
        .output("y", FLOAT, None)
        .build();
    c.push(("AffineGrid", model, vec![x("theta", &[2, 2, 3])]));
    let model = ModelBuilder::new(18)
        .input("x", FLOAT, &fixed(&[1, 18, 25]))
        .initializer_i64("image", &[2], vec![5, 5])
        .initializer_i64("block", &[2], vec![3, 3])
        .node_with("Col2Im", "c", &["x", "image", "block"], &["y"], &[("pads", Attr::Ints(vec![1, 1, 1, 1]))])
        .output("y", FLOAT, None)
        .build();
    c.push(("Col2Im", model, vec![x("x", &[1, 18, 25])]));
    c
}

#[test]
fn steady_state_runs_allocate_nothing() {
    let path = rivet::paths::rivet_probe_lib().expect("probe build");
    let env = harness::environment_with(&path).expect("ORT with the probe plugin");
    let probe = ProbeReader::open(&path).expect("probe exports");
    for (name, model, inputs) in cases() {
        for threads in [1, 2] {
            let opts = SessionOpts { no_fallback: true, intra_threads: Some(threads), ..Default::default() };
            let mut s = harness::session(env, &model, Arm::Rivet, &opts).unwrap_or_else(|e| panic!("{name}: {e}"));
            let inputs = harness::prepare(&inputs).expect("inputs");
            harness::time_runs(&mut s, &inputs, 3, 0).unwrap_or_else(|e| panic!("{name}: {e}"));
            let before = probe.global();
            harness::time_runs(&mut s, &inputs, 0, 4).expect("runs");
            let d = probe.global().since(&before);
            assert_eq!(d.total().allocs, 0, "{name} at {threads} threads: {d:#?}");
            assert_eq!(d.runs, 4, "{name}");
        }
    }
}
