//! Whole-plan tests: `Plan::build` with every pass, and a plan run.

use super::*;
use crate::graph::{dtype, Dim, GraphDesc, Shape};
use crate::graph::{NodeDesc, ValueDesc};
use crate::shapes;

fn v(name: &str, dims: &[Dim]) -> ValueDesc {
    ValueDesc {
        name: name.into(),
        elem_type: dtype::FLOAT,
        dims: Some(dims.iter().cloned().collect()),
        constant: None,
        at_run_ok: false,
    }
}

fn relu_chain(n: usize, dims: &[Dim]) -> GraphDesc {
    let nodes = (0..n)
        .map(|i| NodeDesc {
            name: format!("r{i}"),
            op_type: "Relu".into(),
            domain: String::new(),
            since_version: 14,
            inputs: vec![Some(v(&format!("v{i}"), dims))],
            outputs: vec![Some(v(&format!("v{}", i + 1), dims))],
            attrs: vec![],
        })
        .collect();
    GraphDesc {
        nodes,
        inputs: vec![v("v0", dims)],
        constant_inputs: vec![],
        outputs: vec![v(&format!("v{n}"), dims)],
        constants: vec![],
    }
}

/// Conv(x, w) with `w` a fused input, constant or not.
fn conv(constant_w: bool) -> GraphDesc {
    let f = |n: usize| Dim::Fixed(n);
    let node = NodeDesc {
        name: "conv".into(),
        op_type: "Conv".into(),
        domain: String::new(),
        since_version: 11,
        inputs: vec![Some(v("x", &[f(1), f(2), f(5), f(5)])), Some(v("w", &[f(3), f(2), f(3), f(3)]))],
        outputs: vec![Some(v("y", &[f(1), f(3), f(3), f(3)]))],
        attrs: vec![],
    };
    GraphDesc {
        nodes: vec![node],
        inputs: vec![v("x", &[f(1), f(2), f(5), f(5)]), v("w", &[f(3), f(2), f(3), f(3)])],
        constant_inputs: vec![false, constant_w],
        outputs: vec![v("y", &[f(1), f(3), f(3), f(3)])],
        constants: vec![],
    }
}

#[test]
fn conv_filters_from_a_constant_initializer_are_marked_for_packing_once() {
    for constant in [true, false] {
        let plan = Plan::build("p", &conv(constant)).unwrap();
        assert_eq!(plan.steps.len(), 1);
        assert_eq!(plan.steps[0].constant_weights, constant);
    }
}

#[test]
fn a_chain_reuses_two_buffers() {
    let plan = Plan::build("p", &relu_chain(100, &[Dim::Fixed(8)])).unwrap();
    assert_eq!(plan.buffer_types.len(), 2);
    assert_eq!(Plan::build("p", &relu_chain(2, &[Dim::Fixed(8)])).unwrap().buffer_types.len(), 1);
    assert_eq!(Plan::build("p", &relu_chain(1, &[Dim::Fixed(8)])).unwrap().buffer_types.len(), 0);
}

#[test]
fn static_inputs_fix_every_shape_at_compile_and_symbolic_ones_do_not() {
    let plan = Plan::build("p", &relu_chain(3, &[Dim::Fixed(2), Dim::Fixed(4)])).unwrap();
    let fixed = plan.fixed.expect("static");
    assert!(fixed.shapes.iter().all(|s| s.as_slice() == [2, 4]));
    let sym = Plan::build("p", &relu_chain(3, &[Dim::Symbolic("N".into()), Dim::Fixed(4)])).unwrap();
    assert!(sym.fixed.is_none());
}

/// A static declaration of another size than the op computes is not an error (ORT runs
/// with the kernel's shape too); one of another rank is left to Run, where a Run that
/// reaches the node fails naming it: the model's own shape inference can disagree with
/// the op in a branch that never runs, and that must not fail the session.
#[test]
fn contradictory_static_declarations_are_checked_at_run_naming_the_node() {
    let mut g = relu_chain(2, &[Dim::Fixed(4)]);
    g.nodes[1].outputs[0].as_mut().unwrap().dims = Some([Dim::Fixed(5)].into_iter().collect());
    let plan = Plan::build("p", &g).unwrap();
    assert!(plan.fixed.expect("sizes may differ").shapes.iter().all(|s| s.as_slice() == [4]));
    g.nodes[1].outputs[0].as_mut().unwrap().dims = Some([Dim::Fixed(4), Dim::Fixed(1)].into_iter().collect());
    let plan = Plan::build("p", &g).unwrap();
    assert!(plan.fixed.is_none());
    let mut shapes = vec![Shape::new(); plan.values.len()];
    shapes[plan.inputs[0]] = Shape::from_slice(&[4]);
    let (s, _) = shapes::infer(&plan.values, &plan.steps[0], &shapes, &[]).unwrap();
    shapes[plan.steps[0].output] = s;
    let err = shapes::infer(&plan.values, &plan.steps[1], &shapes, &[]).unwrap_err();
    assert_eq!(err.message, "node 'r1' (Relu) output 'v2': computed shape [4] but the model declares [4, 1]");
}

/// A symbolic Run keeps a same-shape step's output shape from the Run before and skips
/// copying and checking it while the input's shape stays the same. A Run that fails
/// the check must leave nothing behind that a later Run would take as checked: the
/// same bad shape fails every time, and good shapes keep running.
#[test]
fn symbolic_same_shape_steps_check_again_after_a_failed_run() {
    use crate::data::Data;
    use crate::exec::{execute, RunState, Serial, TensorIn};
    use crate::plan::passes::test_graphs::OneOutput as Out;
    // No declared shapes but the last output's: rank 2.
    let mut g = relu_chain(2, &[]);
    for value in
        g.inputs.iter_mut().chain(g.nodes.iter_mut().flat_map(|n| n.inputs.iter_mut().chain(&mut n.outputs)).flatten())
    {
        value.dims = None;
    }
    let rank2 = Some([Dim::Symbolic("M".into()), Dim::Fixed(1)].into_iter().collect());
    g.nodes[1].outputs[0].as_mut().unwrap().dims = rank2.clone();
    g.outputs[0].dims = rank2;
    let plan = Plan::build("p", &g).unwrap();
    assert!(plan.fixed.is_none());
    let mut state = RunState::new(&plan);
    let x = [-1.0f32, 2.0, -3.0, 4.0];
    let mut run = |shape: &[usize]| {
        let data = Data::F32(&x[..shape.iter().product::<usize>()]);
        let inputs = [TensorIn { elem_type: dtype::FLOAT, shape: shape.iter().copied().collect(), data }];
        let mut y = Vec::new();
        execute(&plan, &mut state, &inputs, &mut Out(Some(&mut y)), &Serial::default()).map_err(|e| e.message)
    };
    // A scalar first: the output shapes of a new state must not pass for `[]`.
    let scalar = "node 'r1' (Relu) output 'v2': computed shape [] but the model declares [M, 1]";
    assert_eq!(run(&[]), Err(scalar.to_string()));
    let bad = "node 'r1' (Relu) output 'v2': computed shape [4] but the model declares [M, 1]".to_string();
    assert_eq!(run(&[4, 1]), Ok(()));
    assert_eq!(run(&[4]), Err(bad.clone()));
    assert_eq!(run(&[4]), Err(bad));
    assert_eq!(run(&[4, 1]), Ok(()));
    assert_eq!(run(&[2, 1]), Ok(()));
}
