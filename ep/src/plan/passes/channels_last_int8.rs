//! Channels-last storage of 8-bit activations between quantized convolutions: a uint8 or
//! int8 `[N, C, H, W]` value goes channels last (`[N, H, W, C]` data under its declared
//! shape) when the step that writes it and every step that reads it take that layout
//! (`Op::channels_last_use`: QLinearConv of one group on a product with 64 output
//! channels or more, and com.microsoft QLinearAdd of equal shapes, which relays an input
//! stored otherwise), and at least one of them runs faster so. QLinearConv's
//! channels-last product (`qgemm::nhwc`) then reads its input and writes its output as
//! stored, with no transposes; on the phase planes each padded 64 -> 64 3x3 convolution
//! on 56x56 copied every panel of its input, and its grid's unused columns cost
//! products.
//!
//! A value with another reader (a pool, a DequantizeLinear, a graph output), written in
//! place into a larger one, or of shapes the plan does not fix stays channels first. The
//! pass changes no step or buffer, only which ops the steps run (`Op::with_channels_last`).

use crate::error::Result;
use crate::graph::{dtype, GraphDesc};
use crate::plan::{Plan, Slot, ValueId};
use crate::registry::Kernel;

pub fn run(plan: &mut Plan, _graph: &GraphDesc) -> Result<()> {
    let marked = marks(plan);
    for step in plan.steps.iter_mut() {
        let inputs = step.inputs.iter().enumerate().take(32).filter(|&(_, &v)| marked[v]);
        let inputs = inputs.fold(0u32, |m, (k, _)| m | 1 << k);
        let output = marked[step.output];
        if inputs == 0 && !output {
            continue;
        }
        let op = step.op.as_ref().expect("a step that reads or writes a marked value runs an op");
        step.op = Some(op.with_channels_last(inputs, output).expect("the op takes channels last"));
    }
    Ok(())
}

/// Which values go channels last.
pub(crate) fn marks(plan: &Plan) -> Vec<bool> {
    let mut marked = vec![false; plan.values.len()];
    let Some(fixed) = plan.fixed.as_ref() else { return marked };
    // Each step's use of channels-last data (`None`: it takes none).
    let uses: Vec<Option<bool>> = plan
        .steps
        .iter()
        .map(|s| {
            let op = s.op.as_ref().filter(|_| matches!(s.kernel, Kernel::Op) && s.epilogue.is_none() && !s.view)?;
            let shapes: smallvec::SmallVec<[&[usize]; 9]> = s.inputs.iter().map(|&v| &fixed.shapes[v][..]).collect();
            op.channels_last_use(&shapes, &fixed.shapes[s.output])
        })
        .collect();
    for (p, step) in plan.steps.iter().enumerate() {
        let v = step.output;
        let Some(mut faster) = uses[p] else { continue };
        if !byte_image(plan, v) {
            continue;
        }
        let mut read = false;
        let takes = plan.steps.iter().enumerate().all(|(r, s)| {
            if !s.reads().any(|x| x == v) {
                return true;
            }
            read = true;
            let Some(use_r) = uses[r] else { return false };
            let mask = s.op.as_ref().map_or(0, |op| op.channels_last_inputs());
            faster |= use_r;
            !s.params.contains(&v)
                && s.inputs.iter().enumerate().all(|(k, &x)| x != v || (k < 32 && mask & (1 << k) != 0))
        });
        marked[v] = takes && read && faster;
    }
    marked
}

/// An 8-bit `[N, C, H, W]` value of the plan's own buffers, whole, of fixed shape.
fn byte_image(plan: &Plan, v: ValueId) -> bool {
    let value = &plan.values[v];
    matches!(value.slot, Slot::Buffer(_))
        && matches!(value.elem_type, dtype::UINT8 | dtype::INT8)
        && value.part.is_none()
        && plan.fixed.as_ref().is_some_and(|f| f.shapes[v].len() == 4)
}

#[cfg(test)]
#[path = "channels_last_int8_tests.rs"]
mod tests;
