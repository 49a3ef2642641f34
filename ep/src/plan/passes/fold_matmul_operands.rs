//! MatMul operand folding: what the exporters put around attention's `Q · K^T` goes into
//! the float32 MatMul step itself.
//!
//! * **A Transpose feeding B.** B's last two axes swapped is the same product read with
//!   `trans_b` (the GEMM packs op(B) from B stored `[.., n, k]`). So the Transpose's perm
//!   loses that swap: a perm that becomes the identity (Llama's `[0, 1, 3, 2]` of K) drops
//!   the Transpose, any other becomes the cheaper one left (BERT's `[0, 2, 3, 1]` of
//!   `[b, s, h, d]` becomes `[0, 2, 1, 3]`, runs of `d` contiguous, no element-wise
//!   transpose of each head). The GEMM sums op(B) in the same order either way, so the
//!   bits are the unfused nodes', except in a product of one row (a decode step's
//!   `q · K^T`): its matrix-vector path takes dot products of B's rows in 16 lanes where
//!   the untransposed B is summed row after row, so the last bits may differ (within the
//!   GEMM's tested bounds).
//! * **A scalar scale of the output.** A Mul or Div of the product by a constant scalar
//!   becomes the first part of its epilogue (`Epilogue::scale`), applied to each complete
//!   sum as the op would: the bits of the unfused nodes.
//!
//! Each fold needs the folded value to be a buffer read by that one step (not an output of
//! the fused subgraph), and runs before `fuse_epilogues`, so a bias or activation after the
//! scale still folds.

use super::{drop_steps, scalar_constant, sole_reader};
use crate::error::Result;
use crate::graph::GraphDesc;
use crate::plan::{Plan, Slot};
use crate::registry::{Axes, Kernel};
use rivet_kernels::nn::Scale;
use rivet_kernels::BinaryOp;

pub fn run(plan: &mut Plan, graph: &GraphDesc) -> Result<()> {
    let mut removed = vec![false; plan.steps.len()];
    let mut absorbed_into: Vec<usize> = (0..plan.steps.len()).collect();
    for m in 0..plan.steps.len() {
        let step = &plan.steps[m];
        if step.typed || step.epilogue.is_some() || !matches!(step.kernel, Kernel::MatMul { .. }) {
            continue;
        }
        if let Some((t, perm)) = transpose_of_b(plan, &removed, m) {
            let Kernel::MatMul { trans_b } = plan.steps[m].kernel else { unreachable!("checked above") };
            plan.steps[m].kernel = Kernel::MatMul { trans_b: !trans_b };
            if perm.iter().enumerate().all(|(i, &p)| i == p) {
                let (name, op, source) = {
                    let s = &plan.steps[t];
                    (s.node_name.clone(), s.op_type.clone(), s.inputs[0])
                };
                let step = &mut plan.steps[m];
                step.inputs[1] = source;
                step.epilogue.get_or_insert_with(Default::default).folded.push((name, op));
                removed[t] = true;
                absorbed_into[t] = m;
            } else {
                let b = plan.steps[t].output;
                let perm: Vec<i64> = perm.iter().map(|&p| p as i64).collect();
                plan.steps[t].kernel = Kernel::Transpose(Axes::new(&perm).expect("rank <= 8"));
                if let Some(d) = plan.values[b].declared.as_mut() {
                    let r = d.len();
                    d.swap(r - 2, r - 1);
                }
            }
        }
        if let Some((s, scale)) = scale_of_output(plan, graph, &removed, m) {
            let (name, op, output) = {
                let st = &plan.steps[s];
                (st.node_name.clone(), st.op_type.clone(), st.output)
            };
            let step = &mut plan.steps[m];
            step.output = output;
            let e = step.epilogue.get_or_insert_with(Default::default);
            e.scale = Some(scale);
            e.folded.push((name, op));
            removed[s] = true;
            absorbed_into[s] = m;
        }
    }
    drop_steps(plan, &removed, &absorbed_into);
    Ok(())
}

/// For MatMul step `m` whose B is a float32 Transpose's buffer read by `m` alone: that
/// step, and its perm (normalised) with the last two entries swapped.
fn transpose_of_b(plan: &Plan, removed: &[bool], m: usize) -> Option<(usize, Vec<usize>)> {
    let b = plan.steps[m].inputs[1];
    if !matches!(plan.values[b].slot, Slot::Buffer(_)) || plan.steps[m].inputs[0] == b {
        return None;
    }
    let t = (0..m).find(|&i| !removed[i] && plan.steps[i].output == b)?;
    let step = &plan.steps[t];
    let Kernel::Transpose(perm) = step.kernel else { return None };
    if step.typed || !step.params.is_empty() || step.epilogue.is_some() || sole_reader(plan, removed, t, b) != Some(m) {
        return None;
    }
    let rank = plan.values[step.inputs[0]].declared.as_ref().map(|d| d.len())?;
    let mut p: Vec<usize> = if perm.len == 0 {
        (0..rank).rev().collect()
    } else {
        let p = perm.as_slice();
        if p.len() != rank {
            return None;
        }
        p.iter().map(|&a| if a < 0 { (a + rank as i64) as usize } else { a as usize }).collect()
    };
    if rank < 2 || p.iter().any(|&a| a >= rank) {
        return None;
    }
    p.swap(rank - 2, rank - 1);
    Some((t, p))
}

/// For MatMul step `m` whose output is a buffer read only by a float32 Mul or Div by a
/// constant scalar (the divisor, for a Div): that step and the scale.
fn scale_of_output(plan: &Plan, graph: &GraphDesc, removed: &[bool], m: usize) -> Option<(usize, Scale)> {
    let v = plan.steps[m].output;
    let fresh = plan.steps[m].epilogue.as_ref().is_none_or(|e| e.is_names_only());
    if !fresh || !matches!(plan.values[v].slot, Slot::Buffer(_)) {
        return None;
    }
    let s = sole_reader(plan, removed, m, v)?;
    let step = &plan.steps[s];
    if step.typed || !step.params.is_empty() || step.epilogue.is_some() || step.inputs.len() != 2 {
        return None;
    }
    let (op, other) = match (step.kernel, step.inputs[0] == v) {
        (Kernel::Binary(BinaryOp::Mul), true) => (BinaryOp::Mul, step.inputs[1]),
        (Kernel::Binary(BinaryOp::Mul), false) => (BinaryOp::Mul, step.inputs[0]),
        (Kernel::Binary(BinaryOp::Div), true) => (BinaryOp::Div, step.inputs[1]),
        _ => return None,
    };
    // The scalar must not broadcast the product to a higher rank.
    let (Some(vd), Some(od)) = (&plan.values[v].declared, &plan.values[other].declared) else { return None };
    if other == v || od.len() > vd.len() {
        return None;
    }
    let c = scalar_constant(plan, graph, other)?;
    Some((s, if op == BinaryOp::Mul { Scale::Mul(c) } else { Scale::Div(c) }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::Dim;
    use crate::plan::passes::test_graphs::{f32_scalar, lowered_then, node, v};

    /// `q [1, h, s, d] · Transpose(k [1, s, h, d], perm) · scale`, the attention scores.
    fn scores(perm: &[i64], k_dims: &[usize], scale_op: &str, scale: f32) -> GraphDesc {
        let f = |d: &[usize]| d.iter().map(|&n| Dim::Fixed(n)).collect::<Vec<_>>();
        let (q, kv) = (v("q", &f(&[1, 2, 3, 4])), v("k", &f(k_dims)));
        let kt = v("kt", &f(&[1, 2, 4, 3]));
        let mut t = node("t", "Transpose", 13, std::slice::from_ref(&kv), kt.clone());
        t.attrs.push(("perm".into(), crate::graph::AttrValue::Ints(perm.to_vec())));
        let s = v("s", &f(&[1, 2, 3, 3]));
        let y = v("y", &f(&[1, 2, 3, 3]));
        GraphDesc {
            nodes: vec![
                t,
                node("mm", "MatMul", 13, &[q.clone(), kt], s.clone()),
                node("scale", scale_op, 14, &[s, f32_scalar("c", scale)], y.clone()),
            ],
            inputs: vec![q, kv, f32_scalar("c", scale)],
            constant_inputs: vec![false, false, true],
            outputs: vec![y],
            constants: vec![],
        }
    }

    fn folded(g: &GraphDesc) -> Plan {
        lowered_then(g, run)
    }

    #[test]
    fn a_last_axes_transpose_and_a_scale_fold_into_the_matmul() {
        let plan = folded(&scores(&[0, 1, 3, 2], &[1, 2, 3, 4], "Mul", 0.5));
        assert_eq!(plan.steps.len(), 1);
        let mm = &plan.steps[0];
        assert_eq!(mm.kernel, Kernel::MatMul { trans_b: true });
        assert_eq!(mm.epilogue.as_ref().unwrap().scale, Some(Scale::Mul(0.5)));
        assert_eq!(plan.values[mm.inputs[1]].name, "k");
        assert_eq!(plan.values[mm.output].name, "y");
        let names: Vec<&str> = mm.epilogue.as_ref().unwrap().folded.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["t", "scale"]);
    }

    #[test]
    fn a_heads_transpose_keeps_the_rest_of_its_perm() {
        // k [1, s, h, d] -> [1, h, d, s]: left [0, 2, 1, 3] to [1, h, s, d].
        let plan = folded(&scores(&[0, 2, 3, 1], &[1, 3, 2, 4], "Div", 4.0));
        assert_eq!(plan.steps.len(), 2);
        let Kernel::Transpose(p) = plan.steps[0].kernel else { panic!("{:?}", plan.steps[0].kernel) };
        assert_eq!(p.as_slice(), [0, 2, 1, 3]);
        let kt = plan.steps[0].output;
        let dims: Vec<Dim> = plan.values[kt].declared.clone().unwrap().to_vec();
        assert_eq!(dims, [1, 2, 3, 4].map(Dim::Fixed), "declared as the Transpose now writes it");
        assert_eq!(plan.steps[1].kernel, Kernel::MatMul { trans_b: true });
        assert_eq!(plan.steps[1].epilogue.as_ref().unwrap().scale, Some(Scale::Div(4.0)));
    }

    #[test]
    fn a_division_by_any_constant_folds_as_a_division() {
        let plan = folded(&scores(&[0, 1, 3, 2], &[1, 2, 3, 4], "Div", 3.0));
        assert_eq!(plan.steps.len(), 1);
        assert_eq!(plan.steps[0].epilogue.as_ref().unwrap().scale, Some(Scale::Div(3.0)));
    }
}
