use super::*;
use crate::data::Data;
use crate::exec::TensorIn;
use crate::graph::{NodeDesc, Shape, ValueDesc};
use crate::plan::passes::test_graphs::{build_without, i64_const, node, run_one, v};

/// How the test graph writes the rotation.
#[derive(Clone)]
struct Form {
    x: Vec<usize>,
    cos: Vec<usize>,
    /// The Slices' axis, the upper Slice's end, the lower's end (h: half of the last axis).
    axis: i64,
    upper_end: i64,
    split: Option<usize>,
    /// The Slices' steps given (1).
    steps: bool,
    /// Each binary node reads its operands the other way round.
    swapped: bool,
    /// The Concat joins [x[..h], -x[h..]] instead.
    concat_lower_first: bool,
    /// The leading dims of x declared symbolic.
    symbolic: bool,
}

fn form(x: &[usize], cos: &[usize]) -> Form {
    Form {
        x: x.to_vec(),
        cos: cos.to_vec(),
        axis: -1,
        upper_end: i64::MAX,
        split: None,
        steps: true,
        swapped: false,
        concat_lower_first: false,
        symbolic: false,
    }
}

/// A fused input: its declared value, its shape at Run and its data.
type Input = (ValueDesc, Vec<usize>, Vec<f32>, Vec<i64>);

/// The decomposed rotation of `f` and its fused inputs.
fn chain(f: &Form) -> (GraphDesc, Vec<Input>) {
    let d = *f.x.last().unwrap();
    let h = f.split.unwrap_or(d / 2) as i64;
    let dims = |s: &[usize], sym: bool| -> Vec<Dim> {
        s.iter()
            .enumerate()
            .map(|(i, &n)| if sym && i + 1 < s.len() { Dim::Symbolic(format!("s{i}")) } else { Dim::Fixed(n) })
            .collect()
    };
    let mut half = f.x.clone();
    *half.last_mut().unwrap() = h as usize;
    let t = |name: &str, s: &[usize]| v(name, &dims(s, false));
    let x = v("x", &dims(&f.x, f.symbolic));
    let (cos, sin) = (v("cos", &dims(&f.cos, false)), v("sin", &dims(&f.cos, false)));
    let pair = |a: &ValueDesc, b: &ValueDesc| if f.swapped { [b.clone(), a.clone()] } else { [a.clone(), b.clone()] };
    let consts = |tag: &str, start: i64, end: i64| {
        let mut c = vec![i64_const(&format!("{tag}s"), &[start]), i64_const(&format!("{tag}e"), &[end])];
        c.push(i64_const(&format!("{tag}a"), &[f.axis]));
        if f.steps {
            c.push(i64_const(&format!("{tag}t"), &[1]));
        }
        c
    };
    let (hi, lo) = (consts("hi", h, f.upper_end), consts("lo", 0, h));
    let mut nodes: Vec<NodeDesc> = Vec::new();
    let slice_in = |c: &[ValueDesc]| std::iter::once(x.clone()).chain(c.iter().cloned()).collect::<Vec<_>>();
    nodes.push(node("slice_hi", "Slice", 13, &slice_in(&hi), t("u", &half)));
    nodes.push(node("neg", "Neg", 13, &[t("u", &half)], t("n", &half)));
    nodes.push(node("slice_lo", "Slice", 13, &slice_in(&lo), t("l", &half)));
    let joined = match f.concat_lower_first {
        true => [t("l", &half), t("n", &half)],
        false => [t("n", &half), t("l", &half)],
    };
    let mut cat = node("cat", "Concat", 13, &joined, t("c", &f.x));
    cat.attrs.push(("axis".into(), AttrValue::Int(-1)));
    nodes.push(cat);
    nodes.push(node("mul_cos", "Mul", 14, &pair(&x, &cos), t("a", &f.x)));
    nodes.push(node("mul_sin", "Mul", 14, &pair(&t("c", &f.x), &sin), t("b", &f.x)));
    nodes.push(node("add", "Add", 14, &pair(&t("a", &f.x), &t("b", &f.x)), t("y", &f.x)));
    let seeded = |k: u32, n: usize| -> Vec<f32> {
        let mut s = 0x9e37_79b9u32.wrapping_mul(k);
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                (s >> 8) as f32 / (1u32 << 24) as f32 * 6.0 - 3.0
            })
            .collect()
    };
    let n = |s: &[usize]| s.iter().product::<usize>();
    let mut inputs: Vec<Input> = vec![
        (x.clone(), f.x.clone(), seeded(1, n(&f.x)), vec![]),
        (cos, f.cos.clone(), seeded(2, n(&f.cos)), vec![]),
        (sin, f.cos.clone(), seeded(3, n(&f.cos)), vec![]),
    ];
    for c in hi.into_iter().chain(lo) {
        let Some(crate::graph::Constant::I64(d)) = c.constant.clone() else { unreachable!() };
        inputs.push((c, vec![1], vec![], d));
    }
    let values: Vec<ValueDesc> = inputs.iter().map(|i| i.0.clone()).collect();
    let constant_inputs = values.iter().map(|i| i.constant.is_some()).collect();
    let g = GraphDesc { nodes, inputs: values, constant_inputs, outputs: vec![t("y", &f.x)], constants: vec![] };
    (g, inputs)
}

fn run(plan: &Plan, inputs: &[Input]) -> Result<Vec<f32>> {
    let tensors: Vec<TensorIn<'_>> = inputs
        .iter()
        .map(|(v, s, f, i)| match v.elem_type {
            dtype::INT64 => TensorIn { elem_type: dtype::INT64, shape: Shape::from_slice(s), data: Data::I64(i) },
            _ => TensorIn { elem_type: dtype::FLOAT, shape: Shape::from_slice(s), data: Data::F32(f) },
        })
        .collect();
    run_one(plan, &tensors)
}

/// The chain fuses into one step with the unfused plan's bits.
fn fuses(f: &Form) {
    let (g, inputs) = chain(f);
    let fused = Plan::build("p", &g).unwrap();
    let kinds: Vec<(&str, usize)> =
        fused.steps.iter().map(|s| (s.op_type.as_str(), s.epilogue.as_ref().map_or(0, |e| e.folded.len()))).collect();
    assert_eq!(kinds, [("Slice", 6)], "x {:?} cos {:?}", f.x, f.cos);
    let unfused = build_without(&g, "fuse_rope");
    assert!(unfused.steps.len() >= 7);
    let (a, b) = (run(&fused, &inputs).unwrap(), run(&unfused, &inputs).unwrap());
    assert!(!a.is_empty() && a.iter().any(|v| *v != 0.0));
    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a), bits(&b), "x {:?} cos {:?}", f.x, f.cos);
}

#[test]
fn the_rotate_half_chain_becomes_one_step_with_the_unfused_bits() {
    // Llama's prefill ([1, heads, seq, d] by [1, 1, seq, d]), a decode step, rank 3.
    fuses(&form(&[1, 4, 10, 32], &[1, 1, 10, 32]));
    fuses(&form(&[2, 3, 1, 16], &[2, 1, 1, 16]));
    fuses(&form(&[5, 7, 8], &[7, 8]));
    let variants: [fn(&mut Form); 5] =
        [|f| f.axis = 3, |f| f.upper_end = 32, |f| f.steps = false, |f| f.swapped = true, |f| f.symbolic = true];
    for change in variants {
        let mut f = form(&[1, 4, 10, 32], &[1, 1, 10, 32]);
        change(&mut f);
        fuses(&f);
    }
}

#[test]
fn other_chains_are_left_as_they_are() {
    let left = |f: &Form| {
        let (g, _) = chain(f);
        let plan = Plan::build("p", &g).unwrap();
        assert!(plan.steps.len() >= 7, "{:?}", plan.steps.iter().map(|s| &s.op_type).collect::<Vec<_>>());
    };
    let changes: [fn(&mut Form); 4] = [
        // Halves cut elsewhere, the halves joined the other way.
        |f| f.split = Some(8),
        |f| f.concat_lower_first = true,
        // Along another axis.
        |f| f.axis = 2,
        // cos and sin broadcast along the last axis.
        |f| f.cos = vec![1, 1, 10, 1],
    ];
    for change in changes {
        let mut f = form(&[1, 4, 10, 32], &[1, 1, 10, 32]);
        change(&mut f);
        left(&f);
    }
    // Rank 9: the step's rows are walked with inline arrays of 8 axes (found by review).
    left(&form(&[1, 1, 1, 1, 1, 2, 2, 10, 32], &[1, 1, 10, 32]));
    // The rotated half is also an output of the subgraph.
    let (mut g, _) = chain(&form(&[1, 4, 10, 32], &[1, 1, 10, 32]));
    g.outputs.push(g.nodes[3].outputs[0].clone().unwrap());
    assert!(Plan::build("p", &g).unwrap().steps.len() >= 7);
}
