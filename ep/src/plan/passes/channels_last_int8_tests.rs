use super::*;
use crate::graph::{dtype, Dim, NodeDesc, ValueDesc};
use crate::plan::passes::test_graphs::{build_without, graph, node, v};

fn typed(name: &str, elem_type: i32, dims: &[usize]) -> ValueDesc {
    ValueDesc { elem_type, ..v(name, &dims.iter().map(|&d| Dim::Fixed(d)).collect::<Vec<_>>()) }
}

/// x -> c1 -> a; a -> c2 -> b; (a, b) -> add -> s; s -> c3 -> y; a -> dq -> f: QLinearConv
/// 3x3 of `m` channels on 8x8, com.microsoft QLinearAdd, DequantizeLinear. `dq` reads `a`
/// when `dq_reads_a`, else `b`... (see the cases).
fn qgraph(m: usize, extra_reader: Option<&str>) -> (GraphDesc, Vec<String>) {
    let u8v = |n: &str, c: usize| typed(n, dtype::UINT8, &[1, c, 8, 8]);
    let (x, a, b, s, y) = (u8v("x", 64), u8v("a", m), u8v("b", m), u8v("s", m), u8v("y", m));
    let scale = |n: &str| typed(n, dtype::FLOAT, &[]);
    let zero = |n: &str| typed(n, dtype::UINT8, &[]);
    let mut inputs = vec![x.clone()];
    let mut conv = |name: &str, input: &ValueDesc, c: usize, out: &ValueDesc| {
        let w = typed(&format!("{name}_w"), dtype::INT8, &[m, c, 3, 3]);
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
        n.attrs = vec![("pads".into(), crate::graph::AttrValue::Ints(vec![1; 4]))];
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
        let f = typed("f", dtype::FLOAT, &[1, m, 8, 8]);
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
