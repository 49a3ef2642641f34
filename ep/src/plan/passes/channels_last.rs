//! Channels-last storage inside inverted residual blocks (MobileNetV2, EfficientNet): a
//! 1x1 convolution whose output only a depthwise convolution reads writes it channels
//! last (`[N, H, W, C]` under its `[N, C, H, W]` shape), and the depthwise convolution
//! reads it so; when the depthwise output, in turn, is read only by a 1x1 convolution,
//! it goes channels last too. The 1x1 convolutions then run as products over positions
//! whose rows are that layout, and the depthwise kernel (which computes channels last,
//! 16 channels a vector) no longer transposes its input in and its output back
//! (`channels_last_conv`). No value outside such a pair changes layout, and no other
//! step reads one that does.
//!
//! A pair is marked only where the plan's shapes are fixed, the 1x1 convolution's filters
//! are constant, its epilogue adds no residual (which is NCHW) and its product is one the
//! NCHW paths also run as a GEMM (`channels_last_conv::takes_pointwise`), and the depthwise
//! window runs on the channels-last kernels on this CPU (`depthwise::takes_nhwc`); a
//! depthwise output goes channels last only when its epilogue is an activation alone.

use super::sole_reader;
use crate::error::Result;
use crate::graph::GraphDesc;
use crate::plan::{Plan, Step, ValueId};
use crate::registry::{ChannelsLast, Kernel};
use crate::shapes;
use rivet_kernels::conv::Window3d;
use rivet_kernels::depthwise;

pub fn run(plan: &mut Plan, _graph: &GraphDesc) -> Result<()> {
    let mut marks = vec![ChannelsLast::default(); plan.steps.len()];
    let none = vec![false; plan.steps.len()];
    for d in 0..plan.steps.len() {
        let Some((g, channels)) = depthwise_conv(plan, d) else { continue };
        if !depthwise::takes_nhwc(&g, channels) {
            continue;
        }
        // Its input from a 1x1 convolution that nothing else reads.
        let a = plan.steps[d].inputs[0];
        let Some(p) = plan.steps.iter().position(|s| s.output == a) else { continue };
        let residual = plan.steps[p].epilogue.as_ref().is_some_and(|e| e.residual.is_some());
        if !intermediate(plan, a) || sole_reader(plan, &none, p, a) != Some(d) || !pointwise(plan, p) || residual {
            continue;
        }
        marks[p].output = true;
        marks[d].input = true;
        // Its output into a 1x1 convolution that nothing else reads.
        let b = plan.steps[d].output;
        let act_only = plan.steps[d]
            .epilogue
            .as_ref()
            .is_none_or(|e| e.scale.is_none() && e.bias.is_none() && e.residual.is_none() && e.after.is_none());
        let Some(q) = sole_reader(plan, &none, d, b) else { continue };
        if act_only && intermediate(plan, b) && plan.steps[q].inputs[0] == b && pointwise(plan, q) {
            marks[d].output = true;
            marks[q].input = true;
        }
    }
    for (step, mark) in plan.steps.iter_mut().zip(marks) {
        if let Kernel::Conv { channels_last, .. } = &mut step.kernel {
            *channels_last = mark;
        }
    }
    Ok(())
}

/// A float32 value of the plan's own buffers, whole (not a part written in place).
fn intermediate(plan: &Plan, v: ValueId) -> bool {
    super::float_buffer(plan, v) && plan.values[v].part.is_none()
}

/// The window and channels of step `d` when it is a float32 depthwise convolution (one
/// filter a channel) of fixed shapes with constant filters.
fn depthwise_conv(plan: &Plan, d: usize) -> Option<(Window3d, usize)> {
    let step = &plan.steps[d];
    let (g, xs) = window(plan, step)?;
    let Kernel::Conv { group, .. } = step.kernel else { return None };
    let out_c = plan.fixed.as_ref()?.shapes[step.output].get(1).copied()?;
    (group > 1 && group == xs[1] && out_c == xs[1]).then_some((g, xs[1]))
}

/// Whether step `p` is a float32 1x1 convolution of one group (stride 1, no padding) of
/// fixed shapes with constant filters.
fn pointwise(plan: &Plan, p: usize) -> bool {
    let step = &plan.steps[p];
    let out_c = plan.fixed.as_ref().and_then(|f| f.shapes[step.output].get(1).copied());
    matches!(step.kernel, Kernel::Conv { group: 1, .. })
        && window(plan, step).is_some_and(|(g, xs)| {
            g.is_pointwise()
                && out_c.is_some_and(|n| crate::channels_last_conv::takes_pointwise(g.positions(), xs[1], n))
        })
}

/// A float32 Conv step's window and input shape, when its shapes are fixed and its
/// filters constant.
fn window(plan: &Plan, step: &Step) -> Option<(Window3d, crate::graph::Shape)> {
    let Kernel::Conv { window, .. } = step.kernel else { return None };
    let fixed = plan.fixed.as_ref()?;
    let (xs, ws) = (&fixed.shapes[step.inputs[0]], &fixed.shapes[*step.inputs.get(1)?]);
    if step.typed || !step.constant_weights || xs.len() != 4 || ws.len() != 4 {
        return None;
    }
    if plan.values[step.output].elem_type != crate::graph::dtype::FLOAT {
        return None;
    }
    let (g, _) = shapes::window_3d(&window, shapes::spatial(xs), shapes::spatial(ws)).ok()?;
    Some((g, xs.clone()))
}

#[cfg(test)]
#[path = "channels_last_tests.rs"]
mod tests;
