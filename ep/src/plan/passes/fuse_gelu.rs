//! Gelu fusion: the two forms that exporters write out for opsets before 20 become one
//! Gelu or GeluTanh step (the unary kernel's vectorised ones), which `fuse_epilogues` then
//! folds into the MatMul, Gemm or Conv before it. In a transformer's MLP that is four to
//! nine passes over the widest activation gone.
//!
//! * The erf form (BERT, ViT, Whisper): `x · 0.5 · (1 + erf(x / √2))`, as Div (or Mul by
//!   1/√2), Erf, Add 1 and two Muls by x and 0.5 in any of their groupings.
//! * The tanh form (GPT-2's and T5's NewGELU):
//!   `x · 0.5 · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`, with x³ as `x · (x · x)` or
//!   `Pow(x, 3)`, and the same tail.
//!
//! The chain's values must be buffers each read by the next node alone, its constants
//! float32 scalars of those values (to f32 rounding), and its result declared with x's
//! shape. The new step keeps the last node's name and lists the others as folded
//! (`Epilogue::folded` with nothing else), so a Run still counts every node. The bits are
//! not the chain's: the kernel rounds once where the chain rounds at every node (both
//! within the unary kernels' pinned bounds of the exact value).

use super::{drop_steps, scalar_constant, sole_reader};
use crate::error::Result;
use crate::graph::GraphDesc;
use crate::plan::{Plan, Slot, ValueId};
use crate::registry::Kernel;
use rivet_kernels::{BinaryOp, UnaryOp};

pub fn run(plan: &mut Plan, graph: &GraphDesc) -> Result<()> {
    let mut removed = vec![false; plan.steps.len()];
    let mut absorbed_into: Vec<usize> = (0..plan.steps.len()).collect();
    for e in 0..plan.steps.len() {
        let Some(chain) = gelu_at(plan, graph, &removed, e) else { continue };
        let end = chain.end;
        let names: Vec<(String, String)> =
            chain.folded.iter().map(|&s| (plan.steps[s].node_name.clone(), plan.steps[s].op_type.clone())).collect();
        let step = &mut plan.steps[end];
        step.kernel = Kernel::Unary(chain.kernel);
        step.inputs = smallvec::smallvec![chain.x];
        step.epilogue.get_or_insert_with(Default::default).folded.extend(names);
        for &s in &chain.folded {
            removed[s] = true;
            absorbed_into[s] = end;
        }
    }
    drop_steps(plan, &removed, &absorbed_into);
    Ok(())
}

/// A Gelu chain found from its Erf or Tanh step.
struct Chain {
    /// Gelu's input.
    x: ValueId,
    /// The last step, which becomes the Gelu.
    end: usize,
    /// The other steps, in plan order.
    folded: Vec<usize>,
    /// Gelu (the erf form) or GeluTanh (the tanh form).
    kernel: UnaryOp,
}

/// The float32 binary step `s` of `op` reading `v` and another value: that value.
fn other_operand(plan: &Plan, s: usize, op: BinaryOp, v: ValueId) -> Option<ValueId> {
    let step = &plan.steps[s];
    let plain = !step.typed && step.params.is_empty() && step.epilogue.is_none() && step.inputs.len() == 2;
    if !plain || step.kernel != Kernel::Binary(op) {
        return None;
    }
    match step.inputs[..] {
        [a, b] if a == v && b != v => Some(b),
        [a, b] if b == v && a != v => Some(a),
        _ => None,
    }
}

/// Whether `v` is a float32 scalar constant equal to `want` rounded to f32.
fn is_scalar(plan: &Plan, graph: &GraphDesc, v: ValueId, want: f64) -> bool {
    scalar_constant(plan, graph, v).is_some_and(|c| c == want as f32)
}

/// The step after `s`: the one step that reads `s`'s output (a buffer), if only one does.
fn next(plan: &Plan, removed: &[bool], s: usize) -> Option<usize> {
    let v = plan.steps[s].output;
    matches!(plan.values[v].slot, Slot::Buffer(_)).then(|| sole_reader(plan, removed, s, v)).flatten()
}

/// The step whose output is `v`, if a step (not removed, before `before`) writes it and
/// `v` is read by step `reader` alone.
fn producer(plan: &Plan, removed: &[bool], v: ValueId, before: usize, reader: usize) -> Option<usize> {
    let d = (0..before).find(|&i| !removed[i] && plan.steps[i].output == v)?;
    let s = &plan.steps[d];
    let plain = !s.typed && s.epilogue.is_none() && s.params.is_empty();
    (plain && next(plan, removed, d) == Some(reader)).then_some(d)
}

/// The Erf form's head, `erf(x / √2)` (or `erf(x · 1/√2)`), from its Erf step `e`: x and
/// the steps before the Erf.
fn erf_head(plan: &Plan, graph: &GraphDesc, removed: &[bool], e: usize) -> Option<(ValueId, Vec<usize>)> {
    let d = producer(plan, removed, plan.steps[e].inputs[0], e, e)?;
    let ds = &plan.steps[d];
    let x = match (ds.kernel, &ds.inputs[..]) {
        (Kernel::Binary(BinaryOp::Div), &[x, c]) if is_scalar(plan, graph, c, std::f64::consts::SQRT_2) => x,
        (Kernel::Binary(BinaryOp::Mul), &[a, b]) => {
            let half_sqrt2 = std::f64::consts::FRAC_1_SQRT_2;
            if is_scalar(plan, graph, b, half_sqrt2) {
                a
            } else if is_scalar(plan, graph, a, half_sqrt2) {
                b
            } else {
                return None;
            }
        }
        _ => return None,
    };
    Some((x, vec![d]))
}

/// The tanh form's head, `tanh(√(2/π) · (x + 0.044715 · x³))` with x³ as `x · (x · x)`
/// (either order) or `Pow(x, 3)`, from its Tanh step `e`: x and the steps before the Tanh.
fn tanh_head(plan: &Plan, graph: &GraphDesc, removed: &[bool], e: usize) -> Option<(ValueId, Vec<usize>)> {
    let scaled = producer(plan, removed, plan.steps[e].inputs[0], e, e)?;
    let s = &plan.steps[scaled];
    let (&[p, q], Kernel::Binary(BinaryOp::Mul)) = (&s.inputs[..], s.kernel) else { return None };
    let sqrt_2_pi = (2.0 / std::f64::consts::PI).sqrt();
    let inner = if is_scalar(plan, graph, p, sqrt_2_pi) {
        q
    } else if is_scalar(plan, graph, q, sqrt_2_pi) {
        p
    } else {
        return None;
    };
    // x + 0.044715 · x³
    let sum = producer(plan, removed, inner, scaled, scaled)?;
    let &[p, q] = &plan.steps[sum].inputs[..] else { return None };
    if plan.steps[sum].kernel != Kernel::Binary(BinaryOp::Add) {
        return None;
    }
    let term_of = |v: ValueId| producer(plan, removed, v, sum, sum);
    let (x, term) = match (term_of(q), term_of(p)) {
        (Some(t), _) if plan.steps[t].kernel == Kernel::Binary(BinaryOp::Mul) => (p, t),
        (_, Some(t)) if plan.steps[t].kernel == Kernel::Binary(BinaryOp::Mul) => (q, t),
        _ => return None,
    };
    let &[p, q] = &plan.steps[term].inputs[..] else { return None };
    let cube = if is_scalar(plan, graph, p, 0.044715) {
        q
    } else if is_scalar(plan, graph, q, 0.044715) {
        p
    } else {
        return None;
    };
    let c = producer(plan, removed, cube, term, term)?;
    let cs = &plan.steps[c];
    let mut steps = vec![c, term, sum, scaled];
    match (cs.kernel, &cs.inputs[..]) {
        (Kernel::Binary(BinaryOp::Pow), &[b, three]) if b == x && is_scalar(plan, graph, three, 3.0) => {}
        (Kernel::Binary(BinaryOp::Mul), &[a, b]) if a == x || b == x => {
            // x · (x · x): the square read by this Mul alone.
            let square = if a == x { b } else { a };
            let sq = producer(plan, removed, square, c, c)?;
            if plan.steps[sq].kernel != Kernel::Binary(BinaryOp::Mul) || plan.steps[sq].inputs[..] != [x, x] {
                return None;
            }
            steps.push(sq);
        }
        _ => return None,
    }
    Some((x, steps))
}

fn gelu_at(plan: &Plan, graph: &GraphDesc, removed: &[bool], e: usize) -> Option<Chain> {
    let step = &plan.steps[e];
    if removed[e] || step.typed || step.epilogue.is_some() || step.inputs.len() != 1 {
        return None;
    }
    let (x, head, kernel) = match step.kernel {
        Kernel::Unary(UnaryOp::Erf) => {
            let (x, head) = erf_head(plan, graph, removed, e)?;
            (x, head, UnaryOp::Gelu)
        }
        Kernel::Unary(UnaryOp::Tanh) => {
            let (x, head) = tanh_head(plan, graph, removed, e)?;
            (x, head, UnaryOp::GeluTanh)
        }
        _ => return None,
    };
    // 1 + erf(..) (or tanh), then · x and · 0.5 in some grouping.
    let a = next(plan, removed, e)?;
    let one = other_operand(plan, a, BinaryOp::Add, plan.steps[e].output)?;
    if !is_scalar(plan, graph, one, 1.0) {
        return None;
    }
    let sum = plan.steps[a].output;
    let m1 = next(plan, removed, a)?;
    let with_sum = other_operand(plan, m1, BinaryOp::Mul, sum)?;
    let (end, mut folded) = if with_sum == x {
        // (x · (1 + erf)) · 0.5
        let m2 = next(plan, removed, m1)?;
        let half = other_operand(plan, m2, BinaryOp::Mul, plan.steps[m1].output)?;
        (is_scalar(plan, graph, half, 0.5)).then_some((m2, vec![e, a, m1]))?
    } else if is_scalar(plan, graph, with_sum, 0.5) {
        // ((1 + erf) · 0.5) · x
        let m2 = next(plan, removed, m1)?;
        (other_operand(plan, m2, BinaryOp::Mul, plan.steps[m1].output)? == x).then_some((m2, vec![e, a, m1]))?
    } else {
        // (x · 0.5) · (1 + erf): the half of x read by this Mul alone.
        let h = (0..m1).find(|&i| !removed[i] && plan.steps[i].output == with_sum)?;
        let half = other_operand(plan, h, BinaryOp::Mul, x)?;
        if !is_scalar(plan, graph, half, 0.5) || next(plan, removed, h) != Some(m1) {
            return None;
        }
        (m1, vec![h, e, a])
    };
    folded.extend(head);
    folded.sort_unstable();
    // The result has x's declared shape: no scalar of a higher rank broadcast it.
    let (xd, yd) = (&plan.values[x].declared, &plan.values[plan.steps[end].output].declared);
    (xd.is_some() && xd == yd).then_some(Chain { x, end, folded, kernel })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Dim;
    use crate::plan::passes::test_graphs::{f32_scalar, lowered_then, node, v};

    /// Relu(x) -> the erf chain in one of its groupings -> y.
    fn chain(grouping: usize, sqrt2: f32) -> GraphDesc {
        let d = [Dim::Fixed(2), Dim::Fixed(8)];
        let (x, r) = (v("x", &d), v("r", &d));
        let c = |name: &str, x: f32| f32_scalar(name, x);
        let mut nodes = vec![
            node("relu", "Relu", 14, std::slice::from_ref(&x), r.clone()),
            node("div", "Div", 14, &[r.clone(), c("sqrt2", sqrt2)], v("q", &d)),
            node("erf", "Erf", 13, &[v("q", &d)], v("e", &d)),
            node("add", "Add", 14, &[c("one", 1.0), v("e", &d)], v("s", &d)),
        ];
        match grouping {
            0 => {
                nodes.push(node("mx", "Mul", 14, &[r.clone(), v("s", &d)], v("t", &d)));
                nodes.push(node("mh", "Mul", 14, &[v("t", &d), c("half", 0.5)], v("y", &d)));
            }
            1 => {
                nodes.push(node("mh", "Mul", 14, &[v("s", &d), c("half", 0.5)], v("t", &d)));
                nodes.push(node("mx", "Mul", 14, &[r.clone(), v("t", &d)], v("y", &d)));
            }
            _ => {
                nodes.insert(1, node("mh", "Mul", 14, &[c("half", 0.5), r.clone()], v("h", &d)));
                nodes.push(node("mx", "Mul", 14, &[v("h", &d), v("s", &d)], v("y", &d)));
            }
        }
        let inputs = vec![x, c("sqrt2", sqrt2), c("one", 1.0), c("half", 0.5)];
        GraphDesc {
            nodes,
            inputs,
            constant_inputs: vec![false, true, true, true],
            outputs: vec![v("y", &d)],
            constants: vec![],
        }
    }

    fn fused(g: &GraphDesc) -> Plan {
        lowered_then(g, run)
    }

    #[test]
    fn every_grouping_of_the_erf_chain_becomes_one_gelu() {
        for grouping in 0..3 {
            let plan = fused(&chain(grouping, std::f32::consts::SQRT_2));
            let kernels: Vec<Kernel> = plan.steps.iter().map(|s| s.kernel).collect();
            assert_eq!(kernels[1..], [Kernel::Unary(UnaryOp::Gelu)], "grouping {grouping}");
            let gelu = &plan.steps[1];
            assert_eq!(plan.values[gelu.inputs[0]].name, "r");
            assert_eq!(plan.values[gelu.output].name, "y");
            assert_eq!(gelu.epilogue.as_ref().unwrap().folded.len(), 4, "the other four nodes are counted");
        }
    }

    #[test]
    fn another_constant_leaves_the_chain() {
        let plan = fused(&chain(0, 1.5));
        assert_eq!(plan.steps.len(), 6);
    }

    /// MatMul -> Add(bias) -> the chain: one step, the Gelu in its epilogue, all seven
    /// nodes named (so counted).
    #[test]
    fn the_gelu_then_folds_into_the_product_before_it() {
        let d = [Dim::Fixed(2), Dim::Fixed(8)];
        let mut g = chain(0, std::f32::consts::SQRT_2);
        let (w, bias) = (v("w", &[Dim::Fixed(8), Dim::Fixed(8)]), v("bias", &[Dim::Fixed(8)]));
        g.nodes[0] = node("mm", "MatMul", 13, &[v("x", &d), w.clone()], v("p", &d));
        g.nodes.insert(1, node("bias_add", "Add", 14, &[v("p", &d), bias.clone()], v("r", &d)));
        g.inputs.extend([w, bias]);
        g.constant_inputs.extend([true, true]);
        let mut plan = fused(&g);
        crate::plan::passes::fuse_epilogues::run(&mut plan, &g).unwrap();
        assert_eq!(plan.steps.len(), 1);
        let e = plan.steps[0].epilogue.as_ref().unwrap();
        assert_eq!(e.act, Some(rivet_kernels::nn::Activation::Unary(UnaryOp::Gelu)));
        assert!(e.bias.is_some());
        assert_eq!(e.folded.len(), 6);
    }

    /// GPT-2's NewGELU, x³ as x · (x · x) and as Pow(x, 3): one GeluTanh step naming the
    /// eight (or seven) other nodes.
    #[test]
    fn the_tanh_form_becomes_one_gelu_tanh() {
        let d = [Dim::Fixed(2), Dim::Fixed(8)];
        let c = |name: &str, x: f32| f32_scalar(name, x);
        for pow in [false, true] {
            let (x, r) = (v("x", &d), v("r", &d));
            let mut nodes = vec![node("relu", "Relu", 14, std::slice::from_ref(&x), r.clone())];
            if pow {
                nodes.push(node("cube", "Pow", 15, &[r.clone(), c("three", 3.0)], v("x3", &d)));
            } else {
                nodes.push(node("sq", "Mul", 14, &[r.clone(), r.clone()], v("x2", &d)));
                nodes.push(node("cube", "Mul", 14, &[r.clone(), v("x2", &d)], v("x3", &d)));
            }
            nodes.extend([
                node("term", "Mul", 14, &[c("k", 0.044715), v("x3", &d)], v("t", &d)),
                node("sum", "Add", 14, &[r.clone(), v("t", &d)], v("u", &d)),
                node("scale", "Mul", 14, &[c("s2pi", 0.797_884_6), v("u", &d)], v("w", &d)),
                node("tanh", "Tanh", 13, &[v("w", &d)], v("th", &d)),
                node("one", "Add", 14, &[c("one", 1.0), v("th", &d)], v("a", &d)),
                node("mx", "Mul", 14, &[r.clone(), v("a", &d)], v("m", &d)),
                node("mh", "Mul", 14, &[c("half", 0.5), v("m", &d)], v("y", &d)),
            ]);
            let inputs =
                vec![x, c("three", 3.0), c("k", 0.044715), c("s2pi", 0.797_884_6), c("one", 1.0), c("half", 0.5)];
            let g = GraphDesc {
                nodes,
                inputs,
                constant_inputs: vec![false, true, true, true, true, true],
                outputs: vec![v("y", &d)],
                constants: vec![],
            };
            let plan = fused(&g);
            let kernels: Vec<Kernel> = plan.steps.iter().map(|s| s.kernel).collect();
            assert_eq!(kernels[1..], [Kernel::Unary(UnaryOp::GeluTanh)], "pow {pow}");
            assert_eq!(plan.values[plan.steps[1].inputs[0]].name, "r");
            assert_eq!(plan.steps[1].epilogue.as_ref().unwrap().folded.len(), if pow { 7 } else { 8 });
        }
    }
}
