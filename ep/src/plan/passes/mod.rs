//! The plan compiler: lowering, then named passes over the plan, in order.
//!
//! `lower` turns the claimed nodes into steps; each pass of `PASSES` then rewrites or
//! annotates the plan. A new pass (fusion, pre-packing, aliasing, constant folding) is a
//! file here with a `run(&mut Plan, &GraphDesc) -> Result<()>` and its tests, plus one line
//! in `PASSES` at the place its inputs are ready: a pass that adds, removes or merges
//! steps goes before `share_buffers`, which numbers the buffers of the final steps.

use crate::error::Result;
use crate::graph::GraphDesc;
use crate::plan::Plan;

pub mod fix_shapes;
pub mod fuse_epilogues;
pub mod lower;
pub mod mark_constant_weights;
pub mod share_buffers;
#[cfg(test)]
pub(crate) mod test_graphs;

/// One pass of the plan compiler.
pub struct Pass {
    /// What the pass is called in errors and in `PASSES`.
    pub name: &'static str,
    pub run: fn(&mut Plan, &GraphDesc) -> Result<()>,
}

/// The passes after lowering, in the order they run.
pub const PASSES: &[Pass] = &[
    Pass { name: "fuse_epilogues", run: fuse_epilogues::run },
    Pass { name: "share_buffers", run: share_buffers::run },
    Pass { name: "fix_shapes", run: fix_shapes::run },
    Pass { name: "mark_constant_weights", run: mark_constant_weights::run },
];

impl Plan {
    /// Builds the plan for a fused subgraph: lowering, then every pass of `PASSES`. Fails
    /// if a node is not runnable (it should not have been claimed), the graph does not
    /// hang together, or its declared shapes contradict each other.
    pub fn build(name: &str, graph: &GraphDesc) -> Result<Plan> {
        let mut plan = lower::run(name, graph)?;
        for pass in PASSES {
            (pass.run)(&mut plan, graph)?;
        }
        plan.units = crate::plan::NodeUnit::of_steps(&plan.steps);
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_passes_run_in_their_documented_order() {
        let names: Vec<&str> = PASSES.iter().map(|p| p.name).collect();
        assert_eq!(names, ["fuse_epilogues", "share_buffers", "fix_shapes", "mark_constant_weights"]);
    }
}
