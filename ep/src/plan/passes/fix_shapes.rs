//! Shape fixing: when every input of the fused node is static, every value's shape and
//! every binary step's broadcast are inferred once here, so a Run only checks its inputs.

use crate::error::Result;
use crate::graph::{GraphDesc, Shape};
use crate::plan::{FixedShapes, Plan};
use crate::shapes;

pub fn run(plan: &mut Plan, _graph: &GraphDesc) -> Result<()> {
    plan.fixed = fixed_shapes(plan)?;
    Ok(())
}

/// Infers every shape at Compile when the inputs are fully static. An error here is a
/// model whose declared shapes contradict each other.
fn fixed_shapes(plan: &Plan) -> Result<Option<FixedShapes>> {
    let mut shapes = vec![Shape::new(); plan.values.len()];
    for &id in &plan.inputs {
        match shapes::fixed(&plan.values[id].declared) {
            Some(s) => shapes[id] = s,
            None => return Ok(None),
        }
    }
    for (id, shape, _) in &plan.constants {
        shapes[*id].clone_from(shape);
    }
    if plan.steps.iter().any(|s| !s.params.is_empty()) {
        return Ok(None); // shapes that depend on data known only at Run
    }
    let mut broadcasts = Vec::with_capacity(plan.steps.len());
    for step in &plan.steps {
        let (shape, b) = if step.op.is_some() {
            // A family op may read constant inputs' data (Resize's scales, say).
            let data: Vec<_> = step
                .inputs
                .iter()
                .map(|&id| match plan.values[id].slot {
                    crate::plan::Slot::Const(c) => Some(plan.constants[c].2.view()),
                    _ => None,
                })
                .collect();
            match shapes::op_shape(&plan.values, step, &shapes, &data)? {
                Some(s) => (s, None),
                None => return Ok(None), // its shape depends on data known only at Run
            }
        } else {
            shapes::infer_shape(&plan.values, step, &shapes, &[])?
        };
        if shapes::check_declared(&plan.values, step, &shape).is_err() {
            // The model's own shape inference gives another rank (it happens in the
            // untaken branch of an If, say): infer at Run, where a Run that reaches
            // this node fails naming it.
            return Ok(None);
        }
        shapes[step.output] = shape;
        broadcasts.push(b);
    }
    Ok(Some(FixedShapes { shapes, broadcasts }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Dim;
    use crate::plan::passes::lower;
    use crate::plan::passes::test_graphs::{conv, relu_chain};

    fn fixed(graph: &GraphDesc) -> Option<FixedShapes> {
        let mut plan = lower::run("p", graph).unwrap();
        assert!(plan.fixed.is_none(), "lowering fixes nothing");
        run(&mut plan, graph).unwrap();
        plan.fixed
    }

    #[test]
    fn static_inputs_fix_every_shape_and_a_symbolic_one_none() {
        let f = fixed(&conv(false)).expect("static");
        let shapes: Vec<&[usize]> = f.shapes.iter().map(|s| s.as_slice()).collect();
        assert_eq!(shapes, [&[1, 2, 5, 5][..], &[3, 2, 3, 3], &[1, 3, 3, 3]]);
        assert!(fixed(&relu_chain(2, &[Dim::Symbolic("N".into())])).is_none());
    }

    #[test]
    fn a_binary_step_gets_its_broadcast() {
        use crate::plan::passes::test_graphs::{node, v};
        let (a, b) = (v("a", &[Dim::Fixed(2), Dim::Fixed(3)]), v("b", &[Dim::Fixed(3)]));
        let y = v("y", &[Dim::Fixed(2), Dim::Fixed(3)]);
        let g = crate::graph::GraphDesc {
            nodes: vec![node("add", "Add", 14, &[a.clone(), b.clone()], y.clone())],
            inputs: vec![a, b],
            constant_inputs: vec![],
            outputs: vec![y],
            constants: vec![],
        };
        let f = fixed(&g).expect("static");
        assert_eq!(f.shapes[2].as_slice(), [2, 3]);
        assert!(f.broadcasts[0].is_some());
    }
}
