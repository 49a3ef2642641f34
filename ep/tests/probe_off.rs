//! Without the `probe` feature the probe compiles to nothing.
#![cfg(not(feature = "probe"))]

use rivet_ep::data::{Data, DataMut};
use rivet_ep::exec::{execute, Outputs, RunState, Serial, TensorIn};
use rivet_ep::graph::{dtype, Dim, GraphDesc, NodeDesc, ValueDesc};
use rivet_ep::plan::Plan;
use rivet_ep::probe::{self, Counters, Phase, PhaseGuard};

#[test]
fn the_guard_is_zero_sized_and_has_no_drop() {
    assert_eq!(std::mem::size_of::<PhaseGuard>(), 0);
    assert!(!std::mem::needs_drop::<PhaseGuard>());
    assert_eq!(std::mem::size_of::<probe::FfiSite>(), 0);
}

/// Hands out one output buffer.
struct Out<'a>(Option<&'a mut Vec<f32>>);
impl<'a> Outputs<'a> for Out<'a> {
    fn alloc(&mut self, _index: usize, shape: &[usize], elem_type: i32) -> rivet_ep::error::Result<DataMut<'a>> {
        assert_eq!(elem_type, dtype::FLOAT);
        let v = self.0.take().expect("one output");
        v.resize(shape.iter().product(), 0.0);
        Ok(DataMut::F32(&mut v[..]))
    }
}

#[test]
fn counters_stay_at_their_defaults_after_real_work() {
    let v = |n: &str| ValueDesc {
        name: n.into(),
        elem_type: dtype::FLOAT,
        dims: Some([Dim::Fixed(3)].into_iter().collect()),
        constant: None,
        at_run_ok: false,
    };
    let graph = GraphDesc {
        constant_inputs: Vec::new(),
        nodes: vec![NodeDesc {
            name: "relu".into(),
            op_type: "Relu".into(),
            domain: String::new(),
            since_version: 14,
            inputs: vec![Some(v("x"))],
            outputs: vec![Some(v("y"))],
            attrs: vec![],
        }],
        inputs: vec![v("x")],
        outputs: vec![v("y")],
        constants: vec![],
    };
    let plan = Plan::build("p", &graph).unwrap();
    let mut state = RunState::new(&plan);
    let x = [-1.0f32, 0.0, 2.0];
    let inputs = [TensorIn { elem_type: dtype::FLOAT, shape: [3].into_iter().collect(), data: Data::F32(&x) }];
    let mut y = Vec::new();
    let mut sink = Out(Some(&mut y));
    let serial = Serial::default();
    {
        let _g = PhaseGuard::enter(Phase::TensorBind);
        execute(&plan, &mut state, &inputs, &mut sink, &serial).unwrap();
    }
    assert_eq!(y, vec![0.0, 0.0, 2.0]);
    assert_eq!(probe::snapshot(), Counters::default());
    assert_eq!(probe::global_snapshot(), Counters::default());
    assert!(probe::ffi_sites().is_empty());
}
