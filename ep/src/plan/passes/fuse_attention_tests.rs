use super::*;
use crate::data::Data;
use crate::exec::TensorIn;
use crate::graph::{AttrValue, Dim, NodeDesc, Shape};
use crate::plan::passes::test_graphs::{build_without, f32_scalar, node, run_one, v};

/// How the test graph's chain is written.
#[derive(Clone)]
struct Form {
    q: Vec<usize>,
    k: Vec<usize>,
    v: Vec<usize>,
    /// The mask's shape, added to the scaled scores.
    mask: Option<Vec<usize>>,
    /// K is fed through a Transpose of its last two axes (else K is stored `[.., d, L]`).
    k_transposed: bool,
    softmax_axis: Option<i64>,
    softmax_opset: i32,
    /// The inputs' dims symbolic (the shapes known only at Run).
    symbolic: bool,
    /// The Add reads the mask first.
    mask_first: bool,
}

fn form(q: &[usize], k: &[usize], v: &[usize], mask: Option<&[usize]>) -> Form {
    Form {
        q: q.to_vec(),
        k: k.to_vec(),
        v: v.to_vec(),
        mask: mask.map(<[usize]>::to_vec),
        k_transposed: true,
        softmax_axis: None,
        softmax_opset: 13,
        symbolic: false,
        mask_first: false,
    }
}

/// `MatMul(q, Transpose(k)) / 8 (+ mask) -> Softmax -> MatMul(·, v)`.
fn chain(f: &Form) -> GraphDesc {
    let dims = |name: &str, s: &[usize]| {
        let d: Vec<Dim> = s
            .iter()
            .enumerate()
            .map(|(i, &n)| if f.symbolic { Dim::Symbolic(format!("{name}{i}")) } else { Dim::Fixed(n) })
            .collect();
        v(name, &d)
    };
    // The intermediates declared of their rank, with symbolic dims (ORT's inference
    // may know no more).
    let sym =
        |name: &str, rank: usize| v(name, &(0..rank).map(|i| Dim::Symbolic(format!("{name}{i}"))).collect::<Vec<_>>());
    let scores_rank = f.q.len().max(f.k.len());
    let masked_rank = scores_rank.max(f.mask.as_ref().map_or(0, Vec::len));
    let out_rank = masked_rank.max(f.v.len());
    let (q, k, vv) = (dims("q", &f.q), dims("k", &f.k), dims("v", &f.v));
    let mut nodes = Vec::new();
    let kt = if f.k_transposed {
        let mut t = node("t", "Transpose", 13, std::slice::from_ref(&k), sym("kt", f.k.len()));
        let r = f.k.len() as i64;
        let perm: Vec<i64> = (0..r - 2).chain([r - 1, r - 2]).collect();
        t.attrs.push(("perm".into(), AttrValue::Ints(perm)));
        nodes.push(t);
        sym("kt", f.k.len())
    } else {
        k.clone()
    };
    nodes.push(node("qk", "MatMul", 13, &[q.clone(), kt], sym("s", scores_rank)));
    nodes.push(node("scale", "Div", 14, &[sym("s", scores_rank), f32_scalar("c", 8.0)], sym("ss", scores_rank)));
    let mut inputs = vec![q, k, vv.clone(), f32_scalar("c", 8.0)];
    let softmax_in = match &f.mask {
        Some(m) => {
            let m = dims("m", m);
            let operands = match f.mask_first {
                true => [m.clone(), sym("ss", scores_rank)],
                false => [sym("ss", scores_rank), m.clone()],
            };
            nodes.push(node("mask", "Add", 14, &operands, sym("sm", masked_rank)));
            inputs.push(m);
            sym("sm", masked_rank)
        }
        None => sym("ss", scores_rank),
    };
    let mut sm = node("softmax", "Softmax", f.softmax_opset, &[softmax_in], sym("p", masked_rank));
    if let Some(a) = f.softmax_axis {
        sm.attrs.push(("axis".into(), AttrValue::Int(a)));
    }
    nodes.push(sm);
    nodes.push(node("pv", "MatMul", 13, &[sym("p", masked_rank), vv], sym("y", out_rank)));
    let constant_inputs = inputs.iter().map(|i| i.constant.is_some()).collect();
    GraphDesc { nodes, inputs, constant_inputs, outputs: vec![sym("y", out_rank)], constants: vec![] }
}

/// Runs `plan` on seeded inputs of the shapes `f` gives (the mask with some -inf).
fn run(plan: &Plan, f: &Form) -> Result<Vec<f32>> {
    let mut shapes = vec![f.q.clone(), f.k.clone(), f.v.clone(), vec![]];
    shapes.extend(f.mask.clone());
    let data: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut x = 0x9e37_79b9u32.wrapping_mul(i as u32 + 1);
            let n: usize = s.iter().product();
            (0..n)
                .map(|_| {
                    x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    let u = (x >> 8) as f32 / (1u32 << 24) as f32 * 6.0 - 3.0;
                    if i == 4 && u < -2.5 {
                        f32::NEG_INFINITY
                    } else if i == 3 {
                        8.0
                    } else {
                        u
                    }
                })
                .collect()
        })
        .collect();
    let inputs: Vec<TensorIn<'_>> = shapes
        .iter()
        .zip(&data)
        .map(|(s, d)| TensorIn { elem_type: dtype::FLOAT, shape: Shape::from_slice(s), data: Data::F32(d) })
        .collect();
    run_one(plan, &inputs)
}

/// The chain fuses into one step, and its output has the unfused plan's bits.
fn fuses_with_the_same_bits(f: &Form) {
    let g = chain(f);
    let fused = Plan::build("p", &g).unwrap();
    let kinds: Vec<&str> = fused.steps.iter().map(|s| s.op_type.as_str()).collect();
    assert_eq!(kinds, ["MatMul"], "{:?}", fused.steps.iter().map(|s| &s.kernel).collect::<Vec<_>>());
    assert!(fused.steps[0].op.is_some());
    let unfused = build_without(&g, "fuse_attention");
    assert!(unfused.steps.len() >= 3);
    let (a, b) = (run(&fused, f).unwrap(), run(&unfused, f).unwrap());
    assert!(!a.is_empty() && a.iter().any(|x| *x != 0.0));
    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a), bits(&b), "q {:?} k {:?} v {:?} mask {:?}", f.q, f.k, f.v, f.mask);
}

#[test]
fn the_chain_becomes_one_step_with_the_unfused_bits() {
    // Strips (ViT-like heads), without and with masks of each broadcast.
    fuses_with_the_same_bits(&form(&[1, 2, 70, 16], &[1, 2, 90, 16], &[1, 2, 90, 12], None));
    for mask in [&[1, 2, 70, 90][..], &[70, 90], &[1, 1, 1, 90], &[2, 1, 70, 1], &[]] {
        fuses_with_the_same_bits(&form(&[1, 2, 70, 16], &[1, 2, 90, 16], &[1, 2, 90, 12], Some(mask)));
    }
    // K and V shared by every head (broadcast), Q of one batch for two of K's.
    fuses_with_the_same_bits(&form(&[2, 3, 20, 8], &[2, 1, 30, 8], &[1, 1, 30, 4], Some(&[2, 1, 1, 30])));
    fuses_with_the_same_bits(&form(&[1, 3, 20, 8], &[2, 3, 30, 8], &[2, 3, 30, 4], None));
    // Rank 3 and 2, one query row (a decode step), shapes known only at Run.
    fuses_with_the_same_bits(&form(&[4, 33, 8], &[4, 17, 8], &[4, 17, 8], Some(&[4, 33, 17])));
    fuses_with_the_same_bits(&form(&[33, 8], &[17, 8], &[17, 5], None));
    fuses_with_the_same_bits(&form(&[1, 4, 1, 8], &[1, 4, 40, 8], &[1, 4, 40, 8], Some(&[1, 1, 1, 40])));
    let mut f = form(&[2, 2, 40, 8], &[2, 2, 50, 8], &[2, 2, 50, 8], Some(&[2, 1, 1, 50]));
    f.symbolic = true;
    fuses_with_the_same_bits(&f);
    // K stored `[.., d, L]` (no Transpose), Softmax's axis given as the last.
    let mut f = form(&[1, 2, 10, 8], &[1, 2, 8, 12], &[1, 2, 12, 8], None);
    f.k_transposed = false;
    fuses_with_the_same_bits(&f);
    for (axis, opset) in [(3, 13), (-1, 11), (3, 11)] {
        let mut f = form(&[1, 2, 10, 8], &[1, 2, 12, 8], &[1, 2, 12, 8], None);
        (f.softmax_axis, f.softmax_opset) = (Some(axis), opset);
        fuses_with_the_same_bits(&f);
    }
}

#[test]
fn a_mask_or_v_that_broadcasts_the_scores_further_runs_whole_with_the_same_bits() {
    // Scores [1, 2, 6, 9]; the mask makes them [3, 2, 6, 9].
    fuses_with_the_same_bits(&form(&[1, 2, 6, 4], &[1, 2, 9, 4], &[1, 2, 9, 5], Some(&[3, 1, 6, 9])));
    // V of three batches for scores of one.
    fuses_with_the_same_bits(&form(&[1, 2, 6, 4], &[1, 2, 9, 4], &[3, 2, 9, 5], None));
    fuses_with_the_same_bits(&form(&[6, 4], &[9, 4], &[2, 9, 5], Some(&[6, 9])));
}

#[test]
fn a_chain_is_left_alone_when_a_value_is_read_elsewhere_or_softmax_is_not_along_the_last_axis() {
    let f = form(&[1, 2, 10, 8], &[1, 2, 12, 8], &[1, 2, 12, 8], Some(&[1, 1, 1, 12]));
    let unfused = |g: &GraphDesc| Plan::build("p", g).unwrap().steps.iter().all(|s| s.op_type != "Softmax") as u8;
    assert_eq!(unfused(&chain(&f)), 1, "the chain fuses");
    // The probabilities are also an output of the subgraph.
    let mut g = chain(&f);
    g.outputs.push(g.nodes.iter().find(|n| n.op_type == "Softmax").unwrap().outputs[0].clone().unwrap());
    assert_eq!(unfused(&g), 0);
    // Softmax along the rows (axis 2), and LogSoftmax.
    let mut g = chain(&Form { softmax_axis: Some(2), ..f.clone() });
    assert_eq!(unfused(&g), 0);
    let sm = g.nodes.iter_mut().find(|n| n.op_type == "Softmax").unwrap();
    *sm = NodeDesc { op_type: "LogSoftmax".into(), attrs: vec![], ..sm.clone() };
    assert!(Plan::build("p", &g).unwrap().steps.len() > 1);
    // An opset-11 Softmax with its default axis (1) coerces to 2-D there.
    let g = chain(&Form { softmax_opset: 11, ..f.clone() });
    assert_eq!(unfused(&g), 0);
}

#[test]
fn the_fused_step_names_its_nodes_and_a_bad_shape_at_run_names_the_first() {
    let mut f = form(&[1, 2, 10, 8], &[1, 2, 12, 8], &[1, 2, 12, 8], Some(&[1, 1, 1, 12]));
    f.symbolic = true;
    let plan = Plan::build("p", &chain(&f)).unwrap();
    assert_eq!(plan.units.len(), 1);
    assert_eq!(plan.units[0].label, "qk (+t, +scale, +mask, +softmax, +pv)");
    let names: Vec<&str> = plan.steps[0].inputs.iter().map(|&i| plan.values[i].name.as_str()).collect();
    assert_eq!(names, ["q", "k", "v", "m"]);
    // V's rows are not K's.
    let bad = Form { v: vec![1, 2, 11, 8], ..f };
    let err = run(&plan, &bad).unwrap_err().message;
    assert!(err.starts_with("node 'qk' (MatMul): P · V: inner dimensions 12 and 11 differ"), "{err}");
    assert!(err.contains("'v' [1, 2, 11, 8]"), "{err}");
}

/// Found by review: a mask that adds an axis to the scores, with Softmax's axis given
/// (the rank to check is the Softmax input's); one query row a matrix with K or V a plain
/// matrix (unfused, those products take all rows at once: the tiles, not the
/// matrix-vector path).
#[test]
fn review_cases_keep_the_unfused_bits() {
    for opset in [13, 11] {
        let mut f = form(&[6, 4], &[9, 4], &[9, 5], Some(&[1, 6, 9]));
        (f.softmax_axis, f.softmax_opset) = (Some(2), opset);
        fuses_with_the_same_bits(&f);
    }
    fuses_with_the_same_bits(&form(&[4, 1, 8], &[17, 8], &[17, 5], None));
    fuses_with_the_same_bits(&form(&[4, 1, 8], &[4, 17, 8], &[17, 5], None));
    let mut f = form(&[4, 1, 8], &[8, 17], &[4, 17, 5], None);
    f.k_transposed = false;
    fuses_with_the_same_bits(&f);
    // The mask read first by the Add.
    let mut f = form(&[1, 2, 8, 4], &[1, 2, 12, 4], &[1, 2, 12, 4], Some(&[1, 1, 8, 12]));
    f.mask_first = true;
    fuses_with_the_same_bits(&f);
}
