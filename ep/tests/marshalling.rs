//! The marshalling layer (reading inputs, shapes and data, allocating and writing
//! outputs, splitting work into chunks) against a fake `OrtApi`. Runs in the normal test
//! suite and under Miri: `cargo xtask miri`.

mod fake_ort;

use fake_ort::*;
use ort_sys::OrtKernelContext;
use rivet_ep::exec::RunState;
use rivet_ep::graph::GraphDesc;
use rivet_ep::plan::Plan;

fn run_once(api: &rivet_ep::abi::api::Api, p: &Plan, c: &FakeCtx) -> rivet_ep::error::Result<()> {
    let mut state = RunState::new(p);
    run(api, p, &mut state, (c as *const FakeCtx).cast_mut().cast::<OrtKernelContext>())
}

fn output(c: &FakeCtx, i: usize) -> (Vec<i64>, Vec<f32>) {
    let o = &c.outputs.borrow()[i];
    (o.shape.clone(), o.data.clone())
}

#[test]
fn a_scalar_input_arrives_as_a_null_shape_pointer() {
    let p = plan(2, 1, &[]);
    let c = ctx(2, &[]);
    run_once(&api(), &p, &c).unwrap();
    assert_eq!(output(&c, 0), (vec![], vec![0.0])); // relu(-1 + 0)
}

#[test]
fn zero_sized_tensors_touch_no_data() {
    let p = plan(2, 2, &[0, 3]);
    let c = ctx(2, &[0, 3]);
    run_once(&api(), &p, &c).unwrap();
    assert_eq!(output(&c, 0), (vec![0, 3], vec![]));
}

#[test]
fn rank_nine_shapes_spill_out_of_the_inline_storage() {
    let dims = [1, 1, 2, 1, 1, 1, 1, 2, 3];
    let p = plan(1, 2, &dims);
    let c = ctx(1, &dims);
    run_once(&api(), &p, &c).unwrap();
    let (shape, data) = output(&c, 0);
    assert_eq!(shape, dims.iter().map(|&d| d as i64).collect::<Vec<_>>());
    assert_eq!(data, vec![0.0; 12]);
}

#[test]
fn broadcast_inputs_of_different_shapes() {
    let graph = GraphDesc {
        constant_inputs: Vec::new(),
        nodes: vec![{
            let mut n = node("Mul", "mul", &["a", "b"], "y", &[2, 1, 3]);
            n.inputs[1] = Some(value("b", &[3]));
            n.outputs[0] = Some(value("y", &[2, 1, 3]));
            n
        }],
        inputs: vec![value("a", &[2, 1, 3]), value("b", &[3])],
        outputs: vec![value("y", &[2, 1, 3])],
        constants: vec![],
    };
    let p = Plan::build("fused", &graph).unwrap();
    let c = FakeCtx {
        inputs: vec![
            FakeTensor { shape: vec![2, 1, 3], data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0] },
            FakeTensor { shape: vec![3], data: vec![10.0, 100.0, 1000.0] },
        ],
        outputs: std::cell::RefCell::new(vec![FakeTensor { shape: vec![], data: vec![] }]),
    };
    run_once(&api(), &p, &c).unwrap();
    assert_eq!(output(&c, 0).1, vec![10.0, 200.0, 3000.0, 40.0, 500.0, 6000.0]);
}

#[test]
fn two_outputs_are_both_written() {
    let p = two_output_plan();
    let c = ctx(2, &[4]);
    c.outputs.borrow_mut().push(FakeTensor { shape: vec![], data: vec![] });
    run_once(&api(), &p, &c).unwrap();
    assert_eq!(output(&c, 0).1, vec![-1.0; 4]);
    assert_eq!(output(&c, 1).1, vec![0.0; 4]);
}

#[test]
fn large_outputs_are_split_into_chunks_through_parallel_for() {
    // Above the parallel threshold: the chunk path builds disjoint slices from raw parts.
    let len = rivet_ep::exec::PARALLEL_MIN_LEN + 7;
    let p = plan(1, 1, &[len]);
    let c = FakeCtx {
        inputs: vec![FakeTensor { shape: vec![len as i64], data: (0..len).map(|i| i as f32 - 5.0).collect() }],
        outputs: std::cell::RefCell::new(vec![FakeTensor { shape: vec![], data: vec![] }]),
    };
    run_once(&api(), &p, &c).unwrap();
    let (_, data) = output(&c, 0);
    assert_eq!(data.len(), len);
    assert!(data.iter().enumerate().all(|(i, &v)| v == (i as f32 - 5.0).max(0.0)));
}

#[test]
fn the_api_23_route_reads_the_same_inputs() {
    let old = rivet_ep::abi::api::Api::from_tables_version(&FAKE_ORT, &FAKE_EP, 23);
    for dims in [vec![], vec![0, 2], vec![2, 3]] {
        let p = plan(2, 1, &dims);
        let c = ctx(2, &dims);
        run_once(&old, &p, &c).unwrap();
        let n: usize = dims.iter().product();
        assert_eq!(output(&c, 0).1, vec![0.0; n]);
    }
}
