//! Pre-pack marking: Conv steps whose filters never change, and MatMul and Gemm steps
//! whose B never changes (a fused input that is a constant initializer, or a constant the
//! plan holds), are marked, so a Run packs them once for the GEMM and reuses them instead
//! of packing them again each Run. Family ops (`Kernel::Op`) get the same fact for each
//! of their inputs (`Step::constant_inputs`), handed to their Run.

use crate::error::Result;
use crate::graph::GraphDesc;
use crate::plan::{Plan, Slot};
use crate::registry::Kernel;

pub fn run(plan: &mut Plan, graph: &GraphDesc) -> Result<()> {
    let constant_inputs = &graph.constant_inputs;
    let is_constant = |slot: &Slot| match *slot {
        Slot::Const(_) => true,
        Slot::Input(i) => constant_inputs.get(i).copied().unwrap_or(false),
        Slot::Output(_) | Slot::Buffer(_) => false,
    };
    for step in &mut plan.steps {
        if matches!(step.kernel, Kernel::Op) {
            step.constant_inputs = (step.inputs.iter().take(32).enumerate())
                .filter(|&(_, &id)| is_constant(&plan.values[id].slot))
                .fold(0, |mask, (k, _)| mask | 1 << k);
        }
        if matches!(step.kernel, Kernel::Conv { .. } | Kernel::MatMul { .. } | Kernel::Gemm { .. }) && !step.typed {
            step.constant_weights = is_constant(&plan.values[step.inputs[1]].slot);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Dim;
    use crate::plan::passes::lower;
    use crate::plan::passes::test_graphs::{conv, relu_chain};

    #[test]
    fn only_conv_filters_from_a_constant_initializer_are_marked() {
        for constant in [true, false] {
            let g = conv(constant);
            let mut plan = lower::run("p", &g).unwrap();
            assert!(!plan.steps[0].constant_weights, "lowering marks nothing");
            run(&mut plan, &g).unwrap();
            assert_eq!(plan.steps[0].constant_weights, constant);
        }
        let g = relu_chain(2, &[Dim::Fixed(4)]);
        let mut plan = lower::run("p", &g).unwrap();
        run(&mut plan, &g).unwrap();
        assert!(plan.steps.iter().all(|s| !s.constant_weights));
    }
}
