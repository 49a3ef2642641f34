use super::*;
use crate::data::Data;
use crate::exec::TensorIn;
use crate::graph::{AttrValue, NodeDesc, Shape, ValueDesc};
use crate::plan::passes::test_graphs::{build_without, f32_scalar, i64_const, node, run_one, v};

/// How the test graph writes the norm.
#[derive(Clone)]
struct Form {
    x: Vec<usize>,
    /// The weight's shape.
    w: Vec<usize>,
    /// `Mul(x, x)` for the squares, else `Pow(x, 2)`.
    square_by_mul: bool,
    /// 0: `Div(1, root)` then `Mul(x, ·)`; 1: `Reciprocal` then `Mul`; 2: `Div(x, root)`.
    divide: u8,
    /// ReduceMean's axis, and its opset (18 on: the axes as an input).
    axis: i64,
    reduce_opset: i32,
    keepdims: Option<i64>,
    /// The Muls read their operands the other way round.
    swapped: bool,
    /// x's last dim symbolic in the declared shapes.
    symbolic: bool,
    /// eps declared of this shape (one element), and the output declared of this shape
    /// (else x's).
    eps: Vec<usize>,
    y: Option<Vec<usize>>,
}

fn form(x: &[usize], w: &[usize]) -> Form {
    Form {
        x: x.to_vec(),
        w: w.to_vec(),
        square_by_mul: false,
        divide: 0,
        axis: -1,
        reduce_opset: 13,
        keepdims: None,
        swapped: false,
        symbolic: false,
        eps: vec![],
        y: None,
    }
}

const EPS: f32 = 1e-6;

/// Each fused input's shape and data, in order.
type Inputs = Vec<(Vec<usize>, Vec<f32>)>;

/// The decomposed norm of `f`, and the data of its fused inputs, in order.
fn chain(f: &Form) -> (GraphDesc, Inputs) {
    let r = f.x.len();
    let dims = |s: &[usize], sym: bool| -> Vec<Dim> {
        s.iter()
            .enumerate()
            .map(|(i, &n)| if sym && i + 1 == s.len() { Dim::Symbolic("d".into()) } else { Dim::Fixed(n) })
            .collect()
    };
    let x = v("x", &dims(&f.x, f.symbolic));
    let mut kept = f.x.clone();
    kept[r - 1] = 1;
    let t = |name: &str, s: &[usize]| v(name, &dims(s, false));
    let w = v("w", &dims(&f.w, false));
    let (two, one) = (f32_scalar("two", 2.0), f32_scalar("one", 1.0));
    let mut eps = f32_scalar("eps", EPS);
    eps.dims = Some(f.eps.iter().map(|&n| Dim::Fixed(n)).collect());
    let pair = |a: &ValueDesc, b: &ValueDesc| if f.swapped { [b.clone(), a.clone()] } else { [a.clone(), b.clone()] };
    let mut nodes: Vec<NodeDesc> = Vec::new();
    nodes.push(match f.square_by_mul {
        true => node("sq", "Mul", 14, &[x.clone(), x.clone()], t("s", &f.x)),
        false => node("sq", "Pow", 15, &[x.clone(), two.clone()], t("s", &f.x)),
    });
    let mut inputs = vec![x.clone(), w.clone(), two, eps.clone(), one.clone()];
    let mut mean = match f.reduce_opset {
        o if o < 18 => {
            let mut m = node("mean", "ReduceMean", o, &[t("s", &f.x)], t("m", &kept));
            m.attrs.push(("axes".into(), AttrValue::Ints(vec![f.axis])));
            m
        }
        o => {
            let axes = i64_const("axes", &[f.axis]);
            inputs.push(axes.clone());
            node("mean", "ReduceMean", o, &[t("s", &f.x), axes], t("m", &kept))
        }
    };
    if let Some(k) = f.keepdims {
        mean.attrs.push(("keepdims".into(), AttrValue::Int(k)));
    }
    nodes.push(mean);
    nodes.push(node("add", "Add", 14, &pair(&t("m", &kept), &eps), t("a", &kept)));
    nodes.push(node("sqrt", "Sqrt", 13, &[t("a", &kept)], t("q", &kept)));
    match f.divide {
        0 => {
            nodes.push(node("div", "Div", 14, &[one, t("q", &kept)], t("i", &kept)));
            nodes.push(node("mul", "Mul", 14, &pair(&x, &t("i", &kept)), t("n", &f.x)));
        }
        1 => {
            nodes.push(node("rec", "Reciprocal", 13, &[t("q", &kept)], t("i", &kept)));
            nodes.push(node("mul", "Mul", 14, &pair(&x, &t("i", &kept)), t("n", &f.x)));
        }
        _ => nodes.push(node("div", "Div", 14, &[x.clone(), t("q", &kept)], t("n", &f.x))),
    }
    let y = t("y", f.y.as_deref().unwrap_or(&f.x));
    nodes.push(node("mulw", "Mul", 14, &pair(&t("n", &f.x), &w), y.clone()));
    let mut data = vec![];
    for (i, input) in inputs.iter().enumerate() {
        let shape: Vec<usize> = match i {
            0 => f.x.clone(),
            1 => f.w.clone(),
            3 => f.eps.clone(),
            5 => vec![1],
            _ => vec![],
        };
        let n: usize = shape.iter().product();
        let mut s = 0x9e37_79b9u32.wrapping_mul(i as u32 + 1);
        let values = match &input.constant {
            Some(crate::graph::Constant::F32(c)) => c.clone(),
            _ => (0..n)
                .map(|_| {
                    s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                    (s >> 8) as f32 / (1u32 << 24) as f32 * 6.0 - 3.0
                })
                .collect(),
        };
        data.push((shape, values));
    }
    let constant_inputs = inputs.iter().map(|i| i.constant.is_some()).collect();
    let g = GraphDesc { nodes, inputs, constant_inputs, outputs: vec![y], constants: vec![] };
    (g, data)
}

fn run(plan: &Plan, data: &[(Vec<usize>, Vec<f32>)]) -> Result<Vec<f32>> {
    let axes = [-1i64];
    let inputs: Vec<TensorIn<'_>> = data
        .iter()
        .enumerate()
        .map(|(i, (s, d))| match i {
            5 => TensorIn { elem_type: dtype::INT64, shape: Shape::from_slice(s), data: Data::I64(&axes) },
            _ => TensorIn { elem_type: dtype::FLOAT, shape: Shape::from_slice(s), data: Data::F32(d) },
        })
        .collect();
    run_one(plan, &inputs)
}

/// `x / sqrt(mean(x²) + eps) * w` in float64, row by row.
fn reference(x: &[f32], w: &[f32], d: usize) -> Vec<f64> {
    x.chunks(d)
        .flat_map(|row| {
            let ms = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / d as f64;
            let inv = 1.0 / (ms + f64::from(EPS)).sqrt();
            row.iter().zip(w.iter().cycle()).map(move |(&v, &s)| f64::from(v) * inv * f64::from(s)).collect::<Vec<_>>()
        })
        .collect()
}

/// The chain becomes one RMSNormalization step whose output matches the unfused plan's
/// to a few float32 roundings, and both match float64.
fn fuses(f: &Form) {
    let (g, data) = chain(f);
    let fused = Plan::build("p", &g).unwrap();
    let kinds: Vec<(&str, usize)> =
        fused.steps.iter().map(|s| (s.op_type.as_str(), s.epilogue.as_ref().map_or(0, |e| e.folded.len()))).collect();
    let folded = if f.divide == 2 { 5 } else { 6 };
    assert_eq!(kinds, [(if f.square_by_mul { "Mul" } else { "Pow" }, folded)], "{:?}", f.x);
    let unfused = build_without(&g, "fuse_rms_norm");
    assert!(unfused.steps.len() >= 6);
    let (a, b) = (run(&fused, &data).unwrap(), run(&unfused, &data).unwrap());
    let d = *f.x.last().unwrap();
    let want = reference(&data[0].1, &data[1].1, d);
    assert_eq!(a.len(), want.len());
    for ((&a, &b), &e) in a.iter().zip(&b).zip(&want) {
        // Three roundings apart at most, each within 2^-24 of the value.
        let tol = 4.0 * e.abs() * f64::from(f32::EPSILON) + 1e-30;
        assert!((f64::from(a) - e).abs() <= tol, "fused {a} against {e} ({:?})", f.x);
        assert!((f64::from(b) - e).abs() <= tol, "unfused {b} against {e} ({:?})", f.x);
    }
}

#[test]
fn the_decomposed_forms_become_one_step() {
    fuses(&form(&[2, 5, 24], &[24]));
    fuses(&form(&[7, 33], &[1, 33]));
    fuses(&form(&[1, 1, 256], &[256]));
    let variants: [fn(&mut Form); 7] = [
        |f| f.square_by_mul = true,
        |f| f.divide = 1,
        |f| f.divide = 2,
        |f| f.swapped = true,
        |f| f.axis = 2,
        |f| f.reduce_opset = 18,
        |f| f.keepdims = Some(1),
    ];
    for change in variants {
        let mut f = form(&[3, 4, 40], &[40]);
        change(&mut f);
        fuses(&f);
    }
}

#[test]
fn other_chains_are_left_as_they_are() {
    let left = |f: &Form| {
        let (g, _) = chain(f);
        let plan = Plan::build("p", &g).unwrap();
        assert!(plan.steps.len() >= 6, "{:?}", plan.steps.iter().map(|s| &s.op_type).collect::<Vec<_>>());
    };
    let changes: [fn(&mut Form); 7] = [
        // Not over the last axis, or not kept.
        |f| f.axis = 1,
        |f| f.keepdims = Some(0),
        // An eps of more axes than x (it broadcasts the output to [1, 3, 4, 40]), and an
        // output declared otherwise than x (found by review).
        |f| f.eps = vec![1, 1, 1, 1],
        |f| f.y = Some(vec![1, 3, 4, 40]),
        // A weight that broadcasts x further, or of one element.
        |f| f.w = vec![3, 1, 40],
        |f| f.w = vec![1],
        // The axis' length known only at Run.
        |f| f.symbolic = true,
    ];
    for change in changes {
        let mut f = form(&[3, 4, 40], &[40]);
        change(&mut f);
        left(&f);
    }
    // The mean is also an output of the subgraph.
    let (mut g, _) = chain(&form(&[3, 4, 40], &[40]));
    g.outputs.push(g.nodes[1].outputs[0].clone().unwrap());
    assert!(Plan::build("p", &g).unwrap().steps.len() >= 6);
}
