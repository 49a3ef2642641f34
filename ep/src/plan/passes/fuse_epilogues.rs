//! Epilogue fusion: a float32 Conv, MatMul or Gemm folds the chain of nodes that only
//! post-process its output into its own store of C (`Epilogue`), in this order: an Add of
//! a per-column bias (MatMul, Gemm), an activation (any unary op, or Clip), an Add of a
//! residual of the output's shape, and an activation after it. So Conv + Add + Relu in a
//! ResNet block, or MatMul + Add + Gelu in a transformer's MLP, is one step that writes its
//! output once, instead of three passes over it.
//!
//! A node is folded only when the product's output is read by that node alone (and is not
//! an output of the fused subgraph), and the Add's other operand is computed before the
//! product. A bias must be declared `[n]` (ones before it allowed) with `n` the product's
//! declared last dimension; a residual declared with the product's declared shape, dim by
//! dim (a Run whose tensors differ fails naming the Add).

use super::{ready_before, sole_reader};
use crate::error::Result;
use crate::graph::{Dim, GraphDesc};
use crate::plan::{Plan, Slot, Step, ValueId};
use crate::registry::Kernel;
use rivet_kernels::nn::Activation;
use rivet_kernels::BinaryOp;

/// How far a chain has got; each part may come only after the ones before it.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Stage {
    Product,
    Bias,
    Act,
    Residual,
    After,
}

pub fn run(plan: &mut Plan, _graph: &GraphDesc) -> Result<()> {
    let mut removed = vec![false; plan.steps.len()];
    let mut absorbed_into: Vec<usize> = (0..plan.steps.len()).collect();
    for p in 0..plan.steps.len() {
        if removed[p] || !is_product(&plan.steps[p]) {
            continue;
        }
        let mut stage = Stage::Product;
        loop {
            // SiLU: a Sigmoid of the output and a Mul of the output by it, both folded.
            if stage < Stage::Act || stage == Stage::Residual {
                if let Some((sig, mul)) = silu_at(plan, &removed, p) {
                    let names = [sig, mul].map(|t| (plan.steps[t].node_name.clone(), plan.steps[t].op_type.clone()));
                    let output = plan.steps[mul].output;
                    let step = &mut plan.steps[p];
                    let e = step.epilogue.get_or_insert_with(Default::default);
                    if stage < Stage::Act {
                        e.act = Some(Activation::Silu);
                        stage = Stage::Act;
                    } else {
                        e.after = Some(Activation::Silu);
                        stage = Stage::After;
                    }
                    e.folded.extend(names);
                    step.output = output;
                    for t in [sig, mul] {
                        removed[t] = true;
                        absorbed_into[t] = p;
                    }
                    continue;
                }
            }
            let Some((t, part, view)) = next_part(plan, &removed, p, stage) else { break };
            let folded = &plan.steps[t];
            let (name, op, output) = (folded.node_name.clone(), folded.op_type.clone(), folded.output);
            let names = folded.epilogue.as_ref().map(|e| e.folded.clone()).unwrap_or_default();
            let step = &mut plan.steps[p];
            let e = step.epilogue.get_or_insert_with(Default::default);
            stage = match part {
                Part::Bias(b) => {
                    e.bias = Some(b);
                    Stage::Bias
                }
                Part::Act(a) if stage < Stage::Act => {
                    e.act = Some(a);
                    Stage::Act
                }
                Part::Act(a) => {
                    e.after = Some(a);
                    Stage::After
                }
                Part::Residual(r) => {
                    e.residual = Some(r);
                    Stage::Residual
                }
            };
            e.folded.push((name, op));
            e.folded.extend(names);
            match view {
                // The view now reshapes the activated product into the activation's value.
                Some(w) => plan.steps[w].output = output,
                None => step.output = output,
            }
            removed[t] = true;
            absorbed_into[t] = p;
        }
    }
    super::drop_steps(plan, &removed, &absorbed_into);
    Ok(())
}

fn is_product(step: &Step) -> bool {
    !step.typed && matches!(step.kernel, Kernel::Conv { .. } | Kernel::MatMul { .. } | Kernel::Gemm { .. })
}

/// One node a product can fold.
enum Part {
    Bias(ValueId),
    Act(Activation),
    Residual(ValueId),
}

/// The node that may be folded next into product step `p` (at `stage`), if any, with the
/// shape-only step (Reshape, Flatten, Squeeze, Unsqueeze, Identity) between them when an
/// activation is read through one: an activation commutes with a reshape, so it folds
/// into the product and the view then reshapes the activated output. (ORT hands in a 3-D
/// MatMul + Add as Reshape, Gemm, Reshape.) Only an activation folds through a view: a
/// bias and a residual are checked against the product's own shape.
fn next_part(plan: &Plan, removed: &[bool], p: usize, stage: Stage) -> Option<(usize, Part, Option<usize>)> {
    let v = plan.steps[p].output;
    if !matches!(plan.values[v].slot, Slot::Buffer(_)) || stage == Stage::After {
        return None;
    }
    let t = sole_reader(plan, removed, p, v)?;
    let w = &plan.steps[t];
    let through_view = w.may_view(&plan.values)
        && !w.typed
        && matches!(plan.values[w.output].slot, Slot::Buffer(_))
        && (stage < Stage::Act || stage == Stage::Residual);
    if through_view {
        let u = sole_reader(plan, removed, t, w.output)?;
        let (u, part) = activation_part(plan, u, w.output)?;
        return Some((u, part, Some(t)));
    }
    next_direct(plan, removed, p, stage, t).map(|(t, part)| (t, part, None))
}

/// For step `u` reading `v` alone: the activation it is, if it is a plain float32 one
/// (it may bring the names of nodes folded into it, no other work).
fn activation_part(plan: &Plan, u: usize, v: ValueId) -> Option<(usize, Part)> {
    let step = &plan.steps[u];
    let names_only = step.epilogue.as_ref().is_none_or(|e| e.is_names_only());
    if step.typed || !step.params.is_empty() || !names_only || step.inputs[..] != [v] {
        return None;
    }
    match step.kernel {
        Kernel::Unary(op) => Some((u, Part::Act(Activation::Unary(op)))),
        Kernel::Clip { min, max } => Some((u, Part::Act(Activation::Clip { min, max }))),
        _ => None,
    }
}

/// `next_part` for the product's sole reader `t` itself.
fn next_direct(plan: &Plan, removed: &[bool], p: usize, stage: Stage, t: usize) -> Option<(usize, Part)> {
    let v = plan.steps[p].output;
    let step = &plan.steps[t];
    // A step may bring the names of nodes folded into it before (a Gelu made of five), but
    // no work of its own.
    let names_only = step.epilogue.as_ref().is_none_or(|e| e.is_names_only());
    if step.typed || !step.params.is_empty() || !names_only {
        return None;
    }
    let act = |a: Activation| (stage < Stage::Act || stage == Stage::Residual).then_some((t, Part::Act(a)));
    match step.kernel {
        Kernel::Unary(op) => act(Activation::Unary(op)),
        Kernel::Clip { min, max } => act(Activation::Clip { min, max }),
        Kernel::Binary(BinaryOp::Add) if step.inputs.len() == 2 => {
            let other = if step.inputs[0] == v { step.inputs[1] } else { step.inputs[0] };
            if other == v || !ready_before(plan, removed, other, p) {
                return None;
            }
            let product = &plan.steps[p];
            if stage == Stage::Product && has_columns(plan, product) && is_bias(plan, other, v) {
                Some((t, Part::Bias(other)))
            } else if stage < Stage::Residual && same_declared(plan, other, v) {
                Some((t, Part::Residual(other)))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// For product step `p` whose output `v` (a buffer) is read exactly by a Sigmoid of `v`
/// and a Mul of `v` by that Sigmoid's output, which nothing else reads: the two steps.
fn silu_at(plan: &Plan, removed: &[bool], p: usize) -> Option<(usize, usize)> {
    let v = plan.steps[p].output;
    if !matches!(plan.values[v].slot, Slot::Buffer(_)) {
        return None;
    }
    let plain = |s: &Step| !s.typed && s.params.is_empty() && s.epilogue.is_none();
    let readers: Vec<usize> =
        (0..plan.steps.len()).filter(|&i| !removed[i] && i != p && plan.steps[i].reads().any(|r| r == v)).collect();
    let [a, b] = readers[..] else { return None };
    let is_sigmoid = |i: usize| {
        let s = &plan.steps[i];
        plain(s) && matches!(s.kernel, Kernel::Unary(rivet_kernels::UnaryOp::Sigmoid)) && s.inputs[..] == [v]
    };
    let (sig, mul) = if is_sigmoid(a) {
        (a, b)
    } else if is_sigmoid(b) {
        (b, a)
    } else {
        return None;
    };
    let g = plan.steps[sig].output;
    let m = &plan.steps[mul];
    let pair = m.inputs[..] == [v, g] || m.inputs[..] == [g, v];
    if !(plain(m) && matches!(m.kernel, Kernel::Binary(BinaryOp::Mul)) && pair) {
        return None;
    }
    // The Sigmoid's output is a buffer read by the Mul alone, which runs after it.
    let g_readers = (0..plan.steps.len()).filter(|&i| !removed[i] && plan.steps[i].reads().any(|r| r == g)).count();
    (matches!(plan.values[g].slot, Slot::Buffer(_)) && g_readers == 1 && sig < mul).then_some((sig, mul))
}

/// Whether the product's output's last axis is its columns (n): a Gemm, or a MatMul whose
/// B is declared a matrix (by a vector B, the last axis is A's rows; a Conv's are
/// positions).
fn has_columns(plan: &Plan, product: &Step) -> bool {
    match product.kernel {
        Kernel::Gemm { .. } => true,
        Kernel::MatMul { .. } => plan.values[product.inputs[1]].declared.as_ref().is_some_and(|d| d.len() >= 2),
        _ => false,
    }
}

/// Whether `b` is declared `[.., 1, n]` with `n` the product output `v`'s declared last
/// dimension, of no higher rank than `v`.
fn is_bias(plan: &Plan, b: ValueId, v: ValueId) -> bool {
    let (Some(bd), Some(vd)) = (&plan.values[b].declared, &plan.values[v].declared) else { return false };
    let (Some(Dim::Fixed(n)), Some(Dim::Fixed(last))) = (vd.last(), bd.last()) else { return false };
    n == last && bd.len() <= vd.len() && bd[..bd.len() - 1].iter().all(|d| *d == Dim::Fixed(1))
}

/// Whether `a` and `b` are declared with the same dims (fixed and equal, or the same
/// named symbol).
fn same_declared(plan: &Plan, a: ValueId, b: ValueId) -> bool {
    let (Some(ad), Some(bd)) = (&plan.values[a].declared, &plan.values[b].declared) else { return false };
    let same = |x: &Dim, y: &Dim| match (x, y) {
        (Dim::Fixed(x), Dim::Fixed(y)) => x == y,
        (Dim::Symbolic(x), Dim::Symbolic(y)) => !x.is_empty() && x == y,
        _ => false,
    };
    ad.len() == bd.len() && ad.iter().zip(bd).all(|(x, y)| same(x, y))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{Dim, GraphDesc, NodeDesc};
    use crate::plan::passes::test_graphs::{graph, lowered_then, node, v};
    use rivet_kernels::UnaryOp;

    fn f(n: usize) -> Dim {
        Dim::Fixed(n)
    }

    /// x[4, 8] · w[8, 6] -> (+ b[6]) -> Gelu -> (+ r[4, 6]) -> Relu, with `extra` nodes.
    fn mlp(nodes: &[&str], extra: Vec<NodeDesc>, outputs: &[&str]) -> GraphDesc {
        let (x, w, b, r) = (v("x", &[f(4), f(8)]), v("w", &[f(8), f(6)]), v("b", &[f(6)]), v("r", &[f(4), f(6)]));
        let y = |name: &str| v(name, &[f(4), f(6)]);
        let mut all = vec![node("mm", "MatMul", 13, &[x.clone(), w.clone()], y("y0"))];
        let mut last = "y0".to_string();
        for (i, &op) in nodes.iter().enumerate() {
            let out = format!("y{}", i + 1);
            let n = match op {
                "AddBias" => node("add_b", "Add", 14, &[y(&last), b.clone()], y(&out)),
                "AddRes" => node("add_r", "Add", 14, &[r.clone(), y(&last)], y(&out)),
                _ => node(&format!("act{i}"), op, if op == "Gelu" { 20 } else { 14 }, &[y(&last)], y(&out)),
            };
            all.push(n);
            last = out;
        }
        all.extend(extra);
        graph(all, vec![x, w, b, r], outputs.iter().map(|o| y(o)).collect())
    }

    fn fused(g: &GraphDesc) -> Plan {
        lowered_then(g, run)
    }

    #[test]
    fn bias_activation_residual_and_activation_fold_into_the_matmul() {
        let g = mlp(&["AddBias", "Gelu", "AddRes", "Relu"], vec![], &["y4"]);
        let plan = fused(&g);
        assert_eq!(plan.steps.len(), 1);
        let e = plan.steps[0].epilogue.as_deref().expect("fused");
        let id = |name: &str| plan.values.iter().position(|x| x.name == name);
        assert_eq!((e.bias, e.residual), (id("b"), id("r")));
        assert_eq!(e.act, Some(Activation::Unary(UnaryOp::Gelu)));
        assert_eq!(e.after, Some(Activation::Unary(UnaryOp::Relu)));
        assert_eq!(e.folded.len(), 4);
        assert_eq!(plan.values[plan.steps[0].output].name, "y4");
        // The residual's first reader is now the fused step.
        assert_eq!(plan.values[id("r").unwrap()].first_reader.map(|r| r.0), Some(0));
    }

    #[test]
    fn a_sigmoid_and_a_mul_by_it_fold_as_silu_and_a_residual_may_follow() {
        let y = |name: &str| v(name, &[f(4), f(6)]);
        let silu = |mul_first: bool| {
            let sig = node("sig", "Sigmoid", 13, &[y("y0")], y("g"));
            let ins = if mul_first { [y("g"), y("y0")] } else { [y("y0"), y("g")] };
            let mul = node("mul", "Mul", 14, &ins, y("s"));
            let add = node("add_r", "Add", 14, &[y("s"), v("r", &[f(4), f(6)])], y("z"));
            mlp(&[], vec![sig, mul, add], &["z"])
        };
        for mul_first in [false, true] {
            let plan = fused(&silu(mul_first));
            assert_eq!(plan.steps.len(), 1, "{mul_first}");
            let e = plan.steps[0].epilogue.as_deref().expect("fused");
            assert_eq!(e.act, Some(Activation::Silu));
            assert!(e.residual.is_some());
            assert_eq!(e.folded.len(), 3);
        }
        // The Sigmoid's output also read elsewhere: nothing of the pair folds.
        let mut g = silu(false);
        g.nodes.push(node("neg", "Neg", 13, &[y("g")], y("n")));
        g.outputs.push(y("n"));
        let plan = fused(&g);
        assert!(plan.steps.iter().all(|s| s.epilogue.as_ref().is_none_or(|e| e.act != Some(Activation::Silu))));
        // A Mul by another value: not SiLU.
        let sig = node("sig", "Sigmoid", 13, &[y("y0")], y("g"));
        let mul = node("mul", "Mul", 14, &[y("y0"), v("r", &[f(4), f(6)])], y("s"));
        let plan = fused(&mlp(&[], vec![sig, mul], &["s", "g"]));
        assert_eq!(plan.steps.len(), 3);
        // A Mul by something made from the Sigmoid, not by the Sigmoid itself: not SiLU.
        let sig = node("sig", "Sigmoid", 13, &[y("y0")], y("g"));
        let neg = node("neg", "Neg", 13, &[y("g")], y("h"));
        let mul = node("mul", "Mul", 14, &[y("y0"), y("h")], y("s"));
        let plan = fused(&mlp(&[], vec![sig, neg, mul], &["s"]));
        assert_eq!(plan.steps.len(), 4);
    }

    #[test]
    fn a_chain_stops_where_the_order_or_the_readers_do_not_allow() {
        // Two activations in a row: the second stays a step.
        assert_eq!(fused(&mlp(&["Relu", "Relu"], vec![], &["y2"])).steps.len(), 2);
        // A bias after the activation is not a bias (it is a residual only if shaped so).
        assert_eq!(fused(&mlp(&["Relu", "AddBias"], vec![], &["y2"])).steps.len(), 2);
        // The product's output is also a subgraph output: nothing folds.
        assert_eq!(fused(&mlp(&["Relu"], vec![], &["y0", "y1"])).steps.len(), 2);
        // Read by a second node: nothing folds.
        let y = v("y0", &[f(4), f(6)]);
        let other = node("neg", "Neg", 13, &[y], v("z", &[f(4), f(6)]));
        assert_eq!(fused(&mlp(&["Relu"], vec![other], &["y1", "z"])).steps.len(), 3);
    }

    #[test]
    fn a_matmul_by_a_vector_takes_an_addend_of_its_rows_as_a_residual_not_a_bias() {
        // x[4, 8] · w[8] is [4]: an Add of b[4] adds per row of A, not per column.
        let (x, w, b) = (v("x", &[f(4), f(8)]), v("w", &[f(8)]), v("b", &[f(4)]));
        let g = GraphDesc {
            nodes: vec![
                node("mm", "MatMul", 13, &[x.clone(), w.clone()], v("y0", &[f(4)])),
                node("add", "Add", 14, &[v("y0", &[f(4)]), b.clone()], v("y1", &[f(4)])),
            ],
            inputs: vec![x, w, b],
            constant_inputs: vec![],
            outputs: vec![v("y1", &[f(4)])],
            constants: vec![],
        };
        let plan = fused(&g);
        let e = plan.steps[0].epilogue.as_deref().expect("fused");
        assert_eq!((e.bias.is_none(), e.residual.is_some()), (true, true), "{e:?}");
    }

    #[test]
    fn a_residual_computed_after_the_product_is_not_folded() {
        // r2 = Neg(x2) is computed after the MatMul: the Add cannot run inside it.
        let (x, w) = (v("x", &[f(4), f(8)]), v("w", &[f(8), f(6)]));
        let y = |name: &str| v(name, &[f(4), f(6)]);
        let g = GraphDesc {
            nodes: vec![
                node("mm", "MatMul", 13, &[x.clone(), w.clone()], y("y0")),
                node("neg", "Neg", 13, &[y("x2")], y("r2")),
                node("add", "Add", 14, &[y("y0"), y("r2")], y("y1")),
            ],
            inputs: vec![x, w, y("x2")],
            constant_inputs: vec![],
            outputs: vec![y("y1")],
            constants: vec![],
        };
        assert_eq!(fused(&g).steps.len(), 3);
    }

    /// Gemm -> Reshape -> Relu (ORT's form of a 3-D MatMul + Add): the Relu folds into
    /// the Gemm, and the Reshape then writes the Relu's value; a residual after the Reshape
    /// does not fold through it.
    #[test]
    fn an_activation_folds_through_a_reshape() {
        use crate::plan::passes::test_graphs::i64_const;
        let (x, w) = (v("x", &[f(4), f(8)]), v("w", &[f(8), f(6)]));
        let flat = [f(1), f(4), f(6)];
        let reshape =
            || node("rs", "Reshape", 14, &[v("y0", &[f(4), f(6)]), i64_const("shape", &[1, 4, 6])], v("y1", &flat));
        let g = |last: NodeDesc, out: &str| GraphDesc {
            nodes: vec![node("gemm", "Gemm", 13, &[x.clone(), w.clone()], v("y0", &[f(4), f(6)])), reshape(), last],
            inputs: vec![x.clone(), w.clone(), v("r", &flat)],
            constant_inputs: vec![],
            outputs: vec![v(out, &flat)],
            constants: vec![],
        };
        let plan = fused(&g(node("relu", "Relu", 14, &[v("y1", &flat)], v("y2", &flat)), "y2"));
        assert_eq!(plan.steps.len(), 2);
        let e = plan.steps[0].epilogue.as_deref().expect("fused");
        assert_eq!(e.act, Some(Activation::Unary(UnaryOp::Relu)));
        assert_eq!(plan.values[plan.steps[0].output].name, "y0");
        assert_eq!(plan.values[plan.steps[1].output].name, "y2", "the Reshape writes the Relu's value");
        let plan = fused(&g(node("add", "Add", 14, &[v("y1", &flat), v("r", &flat)], v("y2", &flat)), "y2"));
        assert_eq!(plan.steps.len(), 3);
    }
}
