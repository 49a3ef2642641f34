//! With the probe: a step on the typed path (here a Cast) and a family op's step (here
//! DepthToSpace) run their kernels inside `kernel_invoke`, not `dispatch_lookup`
//! (issue 18: a 64x64 Einsum showed 2.27 ms of dispatch_lookup and no kernel_invoke);
//! each node runs inside its own node scope.
#![cfg(feature = "probe")]

use rivet_ep::data::{Data, DataMut};
use rivet_ep::exec::{execute, Outputs, RunState, Serial, TensorIn};
use rivet_ep::graph::{dtype, AttrValue, Dim, GraphDesc, NodeDesc, ValueDesc};
use rivet_ep::plan::Plan;
use rivet_ep::probe::{self, Phase};

struct Out<'a> {
    ints: Option<&'a mut Vec<i32>>,
    floats: Option<&'a mut Vec<f32>>,
}
impl<'a> Outputs<'a> for Out<'a> {
    fn alloc(&mut self, _index: usize, shape: &[usize], elem_type: i32) -> rivet_ep::error::Result<DataMut<'a>> {
        let n = shape.iter().product();
        Ok(match elem_type {
            dtype::INT32 => {
                let v = self.ints.take().expect("one int output");
                v.resize(n, 0);
                DataMut::I32(&mut v[..])
            }
            _ => {
                let v = self.floats.take().expect("one float output");
                v.resize(n, 0.0);
                DataMut::F32(&mut v[..])
            }
        })
    }
}

fn v(n: &str, t: i32, dims: &[usize]) -> ValueDesc {
    ValueDesc {
        name: n.into(),
        elem_type: t,
        dims: Some(dims.iter().map(|&d| Dim::Fixed(d)).collect()),
        constant: None,
        at_run_ok: false,
    }
}

#[test]
fn typed_and_family_steps_run_inside_kernel_invoke() {
    let node = |op: &str, name: &str, i: ValueDesc, o: ValueDesc, attrs: Vec<(String, AttrValue)>| NodeDesc {
        name: name.into(),
        since_version: if op == "Cast" { 21 } else { 13 },
        op_type: op.into(),
        domain: String::new(),
        inputs: vec![Some(i)],
        outputs: vec![Some(o)],
        attrs,
    };
    let x = v("x", dtype::FLOAT, &[1, 4, 2, 2]);
    let graph = GraphDesc {
        constant_inputs: Vec::new(),
        nodes: vec![
            node(
                "Cast",
                "cast",
                x.clone(),
                v("y", dtype::INT32, &[1, 4, 2, 2]),
                vec![("to".into(), AttrValue::Int(6))],
            ),
            node(
                "DepthToSpace",
                "d2s",
                x.clone(),
                v("z", dtype::FLOAT, &[1, 1, 4, 4]),
                vec![("blocksize".into(), AttrValue::Int(2))],
            ),
        ],
        inputs: vec![x],
        outputs: vec![v("y", dtype::INT32, &[1, 4, 2, 2]), v("z", dtype::FLOAT, &[1, 1, 4, 4])],
        constants: vec![],
    };
    let plan = Plan::build("p", &graph).unwrap();
    assert_eq!(plan.units.len(), 2);
    let mut state = RunState::new(&plan);
    let data: Vec<f32> = (0..16).map(|i| i as f32 + 0.25).collect();
    let inputs =
        [TensorIn { elem_type: dtype::FLOAT, shape: [1, 4, 2, 2].into_iter().collect(), data: Data::F32(&data) }];
    let (mut y, mut z) = (Vec::new(), Vec::new());
    let before = probe::snapshot();
    {
        let mut out = Out { ints: Some(&mut y), floats: Some(&mut z) };
        execute(&plan, &mut state, &inputs, &mut out, &Serial::default()).unwrap();
    }
    let d = probe::snapshot().since(&before);
    assert_eq!(y, (0..16).collect::<Vec<i32>>());
    assert_eq!(z[..4], [0.25, 4.25, 1.25, 5.25]);
    assert_eq!(d.phase(Phase::DispatchLookup).calls, 2);
    assert_eq!(d.phase(Phase::KernelInvoke).calls, 2, "{d:#?}");
}
