use super::*;
use crate::data::Data;
use crate::exec::TensorIn;
use crate::graph::{AttrValue, Dim, GraphDesc, NodeDesc, Shape, ValueDesc};
use crate::plan::passes::test_graphs::{build_without, node, run_one, v};

fn f(n: usize) -> Dim {
    Dim::Fixed(n)
}

/// A block: x `[n, c, h, w]` -> 1x1 to `e` channels (+ Clip) -> depthwise k x k of
/// `stride` (+ Clip) -> 1x1 to `c` channels -> y, each 1x1 with a bias; `se` adds a
/// second reader of the depthwise output (a ReduceMean), summed into y.
struct Block {
    n: usize,
    c: usize,
    e: usize,
    hw: usize,
    k: usize,
    stride: usize,
    se: bool,
}

fn block(b: &Block) -> (GraphDesc, Vec<(ValueDesc, Vec<usize>)>) {
    let out = (b.hw + 2 * (b.k / 2) - b.k) / b.stride + 1;
    let x = v("x", &[f(b.n), f(b.c), f(b.hw), f(b.hw)]);
    let e1 = v("e1", &[f(b.n), f(b.e), f(b.hw), f(b.hw)]);
    let e2 = v("e2", &[f(b.n), f(b.e), f(b.hw), f(b.hw)]);
    let d1 = v("d1", &[f(b.n), f(b.e), f(out), f(out)]);
    let d2 = v("d2", &[f(b.n), f(b.e), f(out), f(out)]);
    let y = v("y", &[f(b.n), f(b.c), f(out), f(out)]);
    let weights = [
        (v("w1", &[f(b.e), f(b.c), f(1), f(1)]), vec![b.e, b.c, 1, 1]),
        (v("b1", &[f(b.e)]), vec![b.e]),
        (v("wd", &[f(b.e), f(1), f(b.k), f(b.k)]), vec![b.e, 1, b.k, b.k]),
        (v("bd", &[f(b.e)]), vec![b.e]),
        (v("w2", &[f(b.c), f(b.e), f(1), f(1)]), vec![b.c, b.e, 1, 1]),
        (v("b2", &[f(b.c)]), vec![b.c]),
    ];
    let w = |i: usize| weights[i].0.clone();
    let clip = |name: &str, a: &ValueDesc, o: &ValueDesc| {
        let mut n = node(name, "Clip", 6, std::slice::from_ref(a), o.clone());
        n.attrs = vec![("min".into(), AttrValue::Float(0.0)), ("max".into(), AttrValue::Float(6.0))];
        n
    };
    let mut dw = node("dw", "Conv", 11, &[e2.clone(), w(2), w(3)], d1.clone());
    let p = (b.k / 2) as i64;
    dw.attrs = vec![
        ("group".into(), AttrValue::Int(b.e as i64)),
        ("kernel_shape".into(), AttrValue::Ints(vec![b.k as i64; 2])),
        ("strides".into(), AttrValue::Ints(vec![b.stride as i64; 2])),
        ("pads".into(), AttrValue::Ints(vec![p; 4])),
    ];
    let project_out = if b.se { v("p", &[f(b.n), f(b.c), f(out), f(out)]) } else { y.clone() };
    let mut nodes: Vec<NodeDesc> = vec![
        node("expand", "Conv", 11, &[x.clone(), w(0), w(1)], e1.clone()),
        clip("clip1", &e1, &e2),
        dw,
        clip("clip2", &d1, &d2),
        node("project", "Conv", 11, &[d2.clone(), w(4), w(5)], project_out.clone()),
    ];
    if b.se {
        // A second reader of d2: its mean over the channels, added to the projection.
        let m = v("m", &[f(b.n), f(1), f(out), f(out)]);
        let mut mean = node("mean", "ReduceMean", 13, std::slice::from_ref(&d2), m.clone());
        mean.attrs = vec![("axes".into(), AttrValue::Ints(vec![1]))];
        nodes.push(mean);
        nodes.push(node("add", "Add", 14, &[project_out, m], y.clone()));
    }
    let mut inputs = vec![(x, vec![b.n, b.c, b.hw, b.hw])];
    inputs.extend(weights.iter().cloned());
    let values: Vec<ValueDesc> = inputs.iter().map(|i| i.0.clone()).collect();
    let constant_inputs = (0..values.len()).map(|i| i > 0).collect();
    let g = GraphDesc { nodes, inputs: values, constant_inputs, outputs: vec![y], constants: vec![] };
    (g, inputs)
}

use rivet_kernels::test_values as values;

fn run_plan(plan: &Plan, inputs: &[(ValueDesc, Vec<usize>)]) -> Vec<f32> {
    let data: Vec<Vec<f32>> =
        inputs.iter().enumerate().map(|(i, (_, s))| values(s.iter().product(), 11 + i as u64)).collect();
    let tensors: Vec<TensorIn<'_>> = inputs
        .iter()
        .zip(&data)
        .map(|((_, s), d)| TensorIn {
            elem_type: crate::graph::dtype::FLOAT,
            shape: Shape::from_slice(s),
            data: Data::F32(d),
        })
        .collect();
    run_one(plan, &tensors).unwrap()
}

/// The marks of the three convolutions, in order.
fn marks(plan: &Plan) -> Vec<ChannelsLast> {
    plan.steps
        .iter()
        .filter_map(|s| match s.kernel {
            Kernel::Conv { channels_last, .. } => Some(channels_last),
            _ => None,
        })
        .collect()
}

fn cl(input: bool, output: bool) -> ChannelsLast {
    ChannelsLast { input, output }
}

fn takes(b: &Block) -> bool {
    let out = (b.hw + 2 * (b.k / 2) - b.k) / b.stride + 1;
    let g = Window3d {
        input: [1, b.hw, b.hw],
        out: [1, out, out],
        kernel: [1, b.k, b.k],
        stride: [1, b.stride, b.stride],
        dilation: [1; 3],
        pad_begin: [0, b.k / 2, b.k / 2],
    };
    depthwise::takes_nhwc(&g, b.e)
}

/// The block's three convolutions go channels last between them, with the values of
/// the plan without the pass (each path sums in the same order: the same bits).
#[test]
fn an_inverted_residual_block_goes_channels_last_with_the_same_values() {
    for b in [
        Block { n: 1, c: 16, e: 64, hw: 14, k: 3, stride: 1, se: false },
        Block { n: 2, c: 24, e: 144, hw: 28, k: 5, stride: 2, se: false },
        Block { n: 1, c: 8, e: 48, hw: 7, k: 3, stride: 2, se: false },
        Block { n: 1, c: 16, e: 32, hw: 56, k: 3, stride: 1, se: true },
    ] {
        let (g, inputs) = block(&b);
        let plan = Plan::build("p", &g).unwrap();
        let unmarked = build_without(&g, "channels_last");
        assert!(marks(&unmarked).iter().all(|m| !m.any()));
        if !takes(&b) {
            assert!(marks(&plan).iter().all(|m| !m.any()), "this CPU has no channels-last kernel");
            continue;
        }
        let want = if b.se {
            [cl(false, true), cl(true, false), cl(false, false)]
        } else {
            [cl(false, true), cl(true, true), cl(true, false)]
        };
        assert_eq!(marks(&plan), want, "c {} e {} hw {} k {} s {}", b.c, b.e, b.hw, b.k, b.stride);
        let (got, expected) = (run_plan(&plan, &inputs), run_plan(&unmarked, &inputs));
        assert!(got.iter().any(|v| *v != 0.0));
        let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&expected), "c {} e {} hw {} k {} s {}", b.c, b.e, b.hw, b.k, b.stride);
    }
}

/// Nothing changes layout where the depthwise channels are not whole blocks of 16, or
/// where the expansion's output is read by another step too.
#[test]
fn other_blocks_keep_their_layout() {
    let (g, _) = block(&Block { n: 1, c: 8, e: 24, hw: 14, k: 3, stride: 1, se: false });
    assert!(marks(&Plan::build("p", &g).unwrap()).iter().all(|m| !m.any()));
    let (mut g, _) = block(&Block { n: 1, c: 16, e: 32, hw: 14, k: 3, stride: 1, se: false });
    // e2 read by a second step, which adds it (averaged) to y.
    let e2 = v("e2", &[f(1), f(32), f(14), f(14)]);
    let m = v("m2", &[f(1), f(1), f(14), f(14)]);
    let mut mean = node("mean2", "ReduceMean", 13, std::slice::from_ref(&e2), m.clone());
    mean.attrs = vec![("axes".into(), AttrValue::Ints(vec![1]))];
    g.nodes.push(mean);
    let y = g.outputs[0].clone();
    let y2 = v("y2", &[f(1), f(16), f(14), f(14)]);
    let mut s = node("slice_free_add", "Add", 14, &[y.clone(), m], y2.clone());
    s.name = "add2".into();
    g.nodes.push(s);
    g.outputs = vec![y2];
    assert!(marks(&Plan::build("p", &g).unwrap()).iter().all(|m| !m.any()));
}

/// Found by review: a depthwise output that the fused node also returns stays NCHW (and
/// its projection reads it so), a 1x1 convolution from or to one channel is not marked
/// (the NCHW paths sum it in another order), and the bf16 precision puts every
/// convolution back.
#[test]
fn returned_values_one_channel_projections_and_bf16_stay_nchw() {
    let b = Block { n: 1, c: 16, e: 64, hw: 14, k: 3, stride: 1, se: false };
    if !takes(&b) {
        return;
    }
    let (mut g, _) = block(&b);
    g.outputs.push(v("d2", &[f(1), f(64), f(14), f(14)]));
    let plan = Plan::build("p", &g).unwrap();
    assert_eq!(marks(&plan), [cl(false, true), cl(true, false), cl(false, false)]);
    // One channel into the expansion and out of the projection: neither is a product the
    // NCHW paths run as a GEMM over its channels, so nothing is marked.
    let (g1, _) = block(&Block { c: 1, ..b });
    assert!(marks(&Plan::build("p", &g1).unwrap()).iter().all(|m| !m.any()));
    let (g2, _) = block(&b);
    let mut plan = Plan::build("p", &g2).unwrap();
    assert!(marks(&plan).iter().all(|m| m.any()));
    plan.use_bf16();
    assert!(marks(&plan).iter().all(|m| !m.any()));
}
