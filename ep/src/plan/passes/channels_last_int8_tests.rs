use super::*;
use crate::graph::{dtype, Dim, NodeDesc, ValueDesc};
use crate::plan::passes::test_graphs::{build_without, graph, node, v};

fn typed(name: &str, elem_type: i32, dims: &[usize]) -> ValueDesc {
    ValueDesc { elem_type, ..v(name, &dims.iter().map(|&d| Dim::Fixed(d)).collect::<Vec<_>>()) }
}

/// x -> c1 -> a; a -> c2 -> b; (a, b) -> add -> s; s -> c3 -> y: QLinearConv 3x3 of `m`
/// channels on 8x8 and com.microsoft QLinearAdd; with `extra_reader`, a DequantizeLinear
/// of that value too (a graph output).
fn qgraph(m: usize, extra_reader: Option<&str>) -> (GraphDesc, Vec<String>) {
    qgraph_of(1, 8, m, extra_reader)
}

/// [`qgraph`] on a batch of `n` planes of `hw` x `hw`.
fn qgraph_of(n: usize, hw: usize, m: usize, extra_reader: Option<&str>) -> (GraphDesc, Vec<String>) {
    qgraph_last(n, hw, m, extra_reader, (3, 1))
}

/// [`qgraph_of`] with c3's window `k` x `k` at stride `s` (padded by `k / 2`).
fn qgraph_last(
    n: usize,
    hw: usize,
    m: usize,
    extra_reader: Option<&str>,
    (k3, s3): (usize, usize),
) -> (GraphDesc, Vec<String>) {
    let u8v = |name: &str, c: usize| typed(name, dtype::UINT8, &[n, c, hw, hw]);
    let (x, a, b, s) = (u8v("x", 64), u8v("a", m), u8v("b", m), u8v("s", m));
    let out = (hw + 2 * (k3 / 2) - k3) / s3 + 1;
    let y = typed("y", dtype::UINT8, &[n, m, out, out]);
    let scale = |n: &str| typed(n, dtype::FLOAT, &[]);
    let zero = |n: &str| typed(n, dtype::UINT8, &[]);
    let mut inputs = vec![x.clone()];
    let mut conv = |name: &str, input: &ValueDesc, c: usize, out: &ValueDesc| {
        let (k, stride) = if name == "c3" { (k3, s3) } else { (3, 1) };
        let w = typed(&format!("{name}_w"), dtype::INT8, &[m, c, k, k]);
        let (sx, zx, sw, zw, sy, zy) = (
            scale(&format!("{name}_sx")),
            zero(&format!("{name}_zx")),
            typed(&format!("{name}_sw"), dtype::FLOAT, &[m]),
            typed(&format!("{name}_zw"), dtype::INT8, &[m]),
            scale(&format!("{name}_sy")),
            zero(&format!("{name}_zy")),
        );
        inputs.extend([w.clone(), sx.clone(), zx.clone(), sw.clone(), zw.clone(), sy.clone(), zy.clone()]);
        let mut n = node(name, "QLinearConv", 10, &[input.clone(), sx, zx, w, sw, zw, sy, zy], out.clone());
        n.attrs = vec![
            ("pads".into(), crate::graph::AttrValue::Ints(vec![k as i64 / 2; 4])),
            ("strides".into(), crate::graph::AttrValue::Ints(vec![stride as i64; 2])),
        ];
        n
    };
    let c1 = conv("c1", &x, 64, &a);
    let c2 = conv("c2", &a, m, &b);
    let c3 = conv("c3", &s, m, &y);
    let (sa, za, sb, zb, sc, zc) = (scale("sa"), zero("za"), scale("sb"), zero("zb"), scale("sc"), zero("zc"));
    inputs.extend([sa.clone(), za.clone(), sb.clone(), zb.clone(), sc.clone(), zc.clone()]);
    let mut add = node("add", "QLinearAdd", 1, &[a.clone(), sa, za, b.clone(), sb, zb, sc, zc], s.clone());
    add.domain = "com.microsoft".into();
    let mut nodes: Vec<NodeDesc> = vec![c1, c2, add, c3];
    let mut outputs = vec![y];
    if let Some(read) = extra_reader {
        let (sd, zd) = (scale("sd"), zero("zd"));
        inputs.extend([sd.clone(), zd.clone()]);
        let f = typed("f", dtype::FLOAT, &[n, m, hw, hw]);
        let src = [&a, &b, &s].into_iter().find(|t| t.name == read).expect("a value of the graph").clone();
        nodes.push(node("dq", "DequantizeLinear", 13, &[src, sd, zd], f.clone()));
        outputs.push(f);
    }
    let g = graph(nodes, inputs, outputs);
    (g, vec!["a".into(), "b".into(), "s".into()])
}

/// The names of the values the pass marks.
fn marked(g: &GraphDesc) -> Vec<String> {
    let plan = build_without(g, "channels_last_int8");
    let marks = marks(&plan);
    let mut names: Vec<String> =
        plan.values.iter().zip(marks).filter(|(_, m)| *m).map(|(v, _)| v.name.clone()).collect();
    names.sort();
    names
}

#[test]
fn values_between_convolutions_and_additions_go_channels_last_and_others_stay() {
    if !rivet_kernels::qgemm::vnni_supported() {
        // Without VNNI no convolution runs faster channels last: nothing is marked.
        assert!(marked(&qgraph(64, None).0).is_empty());
        return;
    }
    let (g, between) = qgraph(64, None);
    assert_eq!(marked(&g), between, "a, b and s: written and read by steps that take them");
    // A DequantizeLinear reading one keeps it channels first (and only it).
    let (g, _) = qgraph(64, Some("b"));
    assert_eq!(marked(&g), ["a", "s"], "b has a reader that does not take channels last");
    let (g, _) = qgraph(64, Some("s"));
    assert_eq!(marked(&g), ["a", "b"]);
    // 32 output channels: the products run faster on the phase planes; the addition
    // alone gains nothing.
    assert!(marked(&qgraph(32, None).0).is_empty());
}

#[test]
fn marked_steps_run_ops_that_store_channels_last() {
    if !rivet_kernels::qgemm::vnni_supported() {
        return;
    }
    let (g, _) = qgraph(64, None);
    let plan = build_without(&g, "");
    let before = build_without(&g, "channels_last_int8");
    // Every step reading or writing a marked value has another op; the others keep theirs.
    let marks = marks(&before);
    for (s, t) in plan.steps.iter().zip(&before.steps) {
        let touches = marks[s.output] || s.inputs.iter().any(|&v| marks[v]);
        assert_eq!(s.op != t.op, touches, "step {}", s.node_name);
    }
}

/// A value the plan must keep channels first though convolutions and additions read it:
/// a graph output, one read as another convolution's weights, one read by an addition
/// that broadcasts (found by review: none of these had a test).
#[test]
fn graph_outputs_weights_and_broadcast_operands_stay_channels_first() {
    if !rivet_kernels::qgemm::vnni_supported() {
        return;
    }
    let value = |g: &GraphDesc, name: &str| -> ValueDesc {
        let all = g.nodes.iter().flat_map(|n| n.outputs.iter().flatten()).chain(&g.inputs);
        all.into_iter().find(|v| v.name == name).expect("a value of the graph").clone()
    };
    // `a` also a graph output.
    let (mut g, _) = qgraph(64, None);
    g.outputs.push(value(&g, "a"));
    assert_eq!(marked(&g), ["b", "s"], "a graph output");
    // `a` (a batch of 64 planes of 3x3) also the weights of a convolution of `b` (64 to
    // 64 channels, 3x3: one that takes channels last on its input).
    let (mut g, _) = qgraph_of(64, 3, 64, None);
    let scale = typed("c4_s", dtype::FLOAT, &[]);
    let zero = typed("c4_z", dtype::UINT8, &[]);
    g.inputs.extend([scale.clone(), zero.clone()]);
    let out = typed("c4_y", dtype::UINT8, &[64, 64, 3, 3]);
    let (a, b) = (value(&g, "a"), value(&g, "b"));
    let inputs = [b, scale.clone(), zero.clone(), a, scale.clone(), zero.clone(), scale, zero];
    let mut c4 = node("c4", "QLinearConv", 10, &inputs, out.clone());
    c4.attrs = vec![("pads".into(), crate::graph::AttrValue::Ints(vec![1; 4]))];
    g.nodes.push(c4);
    g.outputs.push(out);
    assert_eq!(marked(&g), ["b", "s"], "a read as weights");
    // `b` also read by an addition that broadcasts a per-channel operand.
    let (mut g, _) = qgraph(64, None);
    let per_channel = typed("pc", dtype::UINT8, &[1, 64, 1, 1]);
    let (s2, z2) = (typed("s2", dtype::FLOAT, &[]), typed("z2", dtype::UINT8, &[]));
    g.inputs.extend([per_channel.clone(), s2.clone(), z2.clone()]);
    let t = typed("t", dtype::UINT8, &[1, 64, 8, 8]);
    let b = value(&g, "b");
    let ins = [b, s2.clone(), z2.clone(), per_channel, s2.clone(), z2.clone(), s2, z2];
    let mut add = node("add2", "QLinearAdd", 1, &ins, t.clone());
    add.domain = "com.microsoft".into();
    g.nodes.push(add);
    g.outputs.push(t);
    assert_eq!(marked(&g), ["a", "s"], "b read by a broadcasting addition");
}

/// A strided 1x1 convolution (ResNet's downsampling) takes its input channels last at a
/// depth of 64, so the addition before it keeps its layout; a 1x1 one of stride 1 at that
/// depth stays on the planes, and so its input stays channels first.
#[test]
fn a_strided_pointwise_reader_keeps_an_addition_channels_last() {
    if !rivet_kernels::qgemm::vnni_supported() {
        return;
    }
    let (g, between) = qgraph_last(1, 8, 64, None, (1, 2));
    assert_eq!(marked(&g), between, "s is read by a 1x1 convolution of stride 2");
    let (g, _) = qgraph_last(1, 8, 64, None, (1, 1));
    assert_eq!(marked(&g), ["a", "b"], "s is read by a 1x1 convolution of stride 1 and depth 64");
}

/// A MaxPool of a graph input (channels first, as ResNet-18's stem writes it) into
/// [`qgraph`]'s first convolution: the pool takes either layout, so its output goes
/// channels last with the values after it; read by a DequantizeLinear too, it stays.
#[test]
fn a_max_pool_writes_channels_last_for_its_readers() {
    if !rivet_kernels::qgemm::vnni_supported() {
        return;
    }
    for extra in [false, true] {
        let (mut g, mut between) = qgraph(64, None);
        let px = typed("px", dtype::UINT8, &[1, 64, 8, 8]);
        let x = typed("x0", dtype::UINT8, &[1, 64, 16, 16]);
        for v in g.nodes[0].inputs.iter_mut().flatten().filter(|v| v.name == "x") {
            *v = px.clone();
        }
        g.inputs[0] = x.clone();
        let mut pool = node("pool", "MaxPool", 12, &[x], px.clone());
        pool.attrs = vec![
            ("kernel_shape".into(), crate::graph::AttrValue::Ints(vec![3, 3])),
            ("strides".into(), crate::graph::AttrValue::Ints(vec![2, 2])),
            ("pads".into(), crate::graph::AttrValue::Ints(vec![1; 4])),
        ];
        g.nodes.insert(0, pool);
        if extra {
            let (sd, zd) = (typed("sd", dtype::FLOAT, &[]), typed("zd", dtype::UINT8, &[]));
            let f = typed("f", dtype::FLOAT, &[1, 64, 8, 8]);
            g.inputs.extend([sd.clone(), zd.clone()]);
            g.nodes.push(node("dq", "DequantizeLinear", 13, &[px, sd, zd], f.clone()));
            g.outputs.push(f);
        } else {
            between.push("px".into());
            between.sort();
        }
        assert_eq!(marked(&g), between, "a DequantizeLinear reads the pool's output: {extra}");
    }
}

/// [`qgraph`]'s last convolution read by a com.microsoft QLinearGlobalAveragePool (the
/// graph's output): the convolution's output goes channels last too; with the
/// attribute `channels_last` set (its input `[N, H, W, C]` by declaration) it does not.
#[test]
fn a_global_average_reads_a_convolution_channels_last() {
    if !rivet_kernels::qgemm::vnni_supported() {
        return;
    }
    for attr in [false, true] {
        let (mut g, mut between) = qgraph(64, None);
        let y = g.outputs[0].clone();
        let out = typed("g", dtype::UINT8, if attr { &[1, 64, 8, 1] } else { &[1, 64, 1, 1] });
        let (s, z) = (typed("sg", dtype::FLOAT, &[]), typed("zg", dtype::UINT8, &[]));
        g.inputs.extend([s.clone(), z.clone()]);
        let mut gap = node("gap", "QLinearGlobalAveragePool", 1, &[y, s.clone(), z.clone(), s, z], out.clone());
        gap.domain = "com.microsoft".into();
        if attr {
            gap.attrs = vec![("channels_last".into(), crate::graph::AttrValue::Int(1))];
        }
        g.nodes.push(gap);
        g.outputs = vec![out];
        if !attr {
            between.push("y".into());
            between.sort();
        }
        assert_eq!(marked(&g), between, "the attribute channels_last: {attr}");
    }
}
