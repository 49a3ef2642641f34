//! Control flow (If, Loop, Scan) on Rivet.
//!
//! ORT partitions the bodies before the enclosing graph, so Rivet claims and compiles the
//! nodes inside each body; the control-flow node itself is claimed as a single node whose
//! kernel (from Rivet's kernel registry) is ORT's own If/Loop/Scan logic
//! (`OrtEpApi::CreateIfKernel` etc.), when every node of its bodies is Rivet's. A branch
//! reads the enclosing graph's values (the input `x`, and the initializers `W` of 576
//! elements and `B` of 25): outer-scope constants of any size must reach the branch's
//! compiled plan (they are no input of the fused node: ORT drops constant initializers
//! from fused inputs, and finds their data in the outer scope).

mod common;

use common::{assert_matches_ort, env, ort_session, strict};
use rivet::harness::{self, Arm, HostTensor, SessionOpts};
use rivet::model::{Attr, Dim, ModelBuilder, BOOL, FLOAT, INT64};

const C: i64 = 8;
const TOL: (f64, f64) = (1e-4, 1e-5);

/// A branch: Conv(x, W) -> `act` -> MatMul(·, B), all reading the enclosing graph.
fn branch(prefix: &str, act: &str) -> Vec<u8> {
    let (c, a, y) = (format!("{prefix}_c"), format!("{prefix}_a"), format!("{prefix}_y"));
    ModelBuilder::new(17)
        .node_with("Conv", &format!("{prefix}_conv"), &["x", "W"], &[&c], &[("pads", Attr::Ints(vec![1, 1, 1, 1]))])
        .node(act, &format!("{prefix}_act"), &[&c], &[&a])
        .node("MatMul", &format!("{prefix}_matmul"), &[&a, "B"], &[&y])
        .output(&y, FLOAT, None)
        .graph(prefix)
}

/// y = If(sum(x) > 0, then: MatMul(Relu(Conv(x, W)), B), else: MatMul(Sigmoid(Conv(x, W)), B)).
fn if_model(x_dims: &[Dim]) -> Vec<u8> {
    let w: Vec<f32> = harness::values(7, (C * C * 9) as usize, -0.3, 0.3).into_iter().map(|v| v as f32).collect();
    let b: Vec<f32> = harness::values(8, 25, -1.0, 1.0).into_iter().map(|v| v as f32).collect();
    ModelBuilder::new(17)
        .input("x", FLOAT, x_dims)
        .initializer("W", &[C, C, 3, 3], w)
        .initializer("B", &[5, 5], b)
        .initializer("zero", &[], vec![0.0])
        .node_with("ReduceSum", "sum", &["x"], &["s"], &[("keepdims", Attr::Int(0))])
        .node("Greater", "gt", &["s", "zero"], &["cond"])
        .value_info("cond", BOOL, &[])
        .node_with(
            "If",
            "if",
            &["cond"],
            &["y"],
            &[
                ("then_branch", Attr::Graph(branch("then", "Relu"))),
                ("else_branch", Attr::Graph(branch("else", "Sigmoid"))),
            ],
        )
        .output("y", FLOAT, None)
        .build()
}

fn x(n: i64, channels: i64, sign: f64, seed: u64) -> HostTensor {
    let data = harness::values(seed, (n * channels * 25) as usize, 0.0, 2.0);
    HostTensor::f32("x", &[n, channels, 5, 5], data.into_iter().map(|v| (sign * v) as f32).collect())
}

fn with_fallback() -> SessionOpts {
    SessionOpts { record_assignment: true, ..Default::default() }
}

/// With fallback on: the session builds, both branches match ORT alone, and every node
/// (the If and the nodes inside its branches) is assigned to Rivet.
#[test]
fn if_branches_reading_a_large_outer_weight_run_on_rivet() {
    for (what, dims) in [
        ("static", vec![Dim::Fixed(1), Dim::Fixed(C), Dim::Fixed(5), Dim::Fixed(5)]),
        ("symbolic", vec![Dim::Sym("N".into()), Dim::Fixed(C), Dim::Fixed(5), Dim::Fixed(5)]),
    ] {
        let model = if_model(&dims);
        let mut rivet = harness::session(env(), &model, Arm::Rivet, &with_fallback())
            .unwrap_or_else(|e| panic!("{what}: the Rivet session (fallback on) must build: {e}"));
        let assigned = rivet::ort_extra::graph_assignment(&rivet).expect("assignment info");
        for node in ["sum", "gt", "if", "then_conv", "then_act", "then_matmul", "else_conv", "else_act", "else_matmul"]
        {
            let ep = assigned.iter().find(|(_, n, _)| n == node).map(|(ep, _, _)| ep.as_str());
            assert_eq!(ep, Some(harness::RIVET_EP), "{what}: node {node} ran on {ep:?}; all: {assigned:?}");
        }

        let mut ort = ort_session(&model);
        for (branch, sign) in [("then", 1.0), ("else", -1.0)] {
            let n = if what == "symbolic" { 2 } else { 1 };
            let inputs = [x(n, C, sign, 3)];
            let want = harness::run(&mut ort, &inputs).expect("ORT run");
            let got = harness::run(&mut rivet, &inputs).unwrap_or_else(|e| panic!("{what} {branch}: Rivet run: {e}"));
            harness::compare(&got, &want, TOL.0, TOL.1).unwrap_or_else(|e| panic!("{what} {branch}: {e}"));
        }
    }
}

/// Bad data inside a branch: a clear error naming the branch's node, and the session
/// still runs good inputs afterwards.
#[test]
fn a_bad_input_inside_a_branch_names_the_node_and_the_session_survives() {
    let dims = [Dim::Sym("N".into()), Dim::Sym("C".into()), Dim::Fixed(5), Dim::Fixed(5)];
    let model = if_model(&dims);
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &with_fallback()).expect("Rivet session");
    let mut ort = ort_session(&model);
    let err = harness::run(&mut rivet, &[x(1, C - 3, 1.0, 4)]).expect_err("5 channels against a weight of 8");
    assert!(err.contains("then_conv"), "the error names the branch's node: {err}");
    let good = [x(1, C, 1.0, 5)];
    let want = harness::run(&mut ort, &good).expect("ORT run");
    let got = harness::run(&mut rivet, &good).expect("the session still runs");
    harness::compare(&got, &want, TOL.0, TOL.1).expect("after the error");
}

/// With fallback off: the whole model runs on Rivet (every node assigned to it, the If
/// too) and matches ORT alone on both branches, static and symbolic.
#[test]
fn with_fallback_off_an_if_model_runs_on_rivet_alone() {
    for (what, dims, n) in [
        ("static", vec![Dim::Fixed(1), Dim::Fixed(C), Dim::Fixed(5), Dim::Fixed(5)], 1),
        ("symbolic", vec![Dim::Sym("N".into()), Dim::Fixed(C), Dim::Fixed(5), Dim::Fixed(5)], 3),
    ] {
        let model = if_model(&dims);
        for (branch, sign) in [("then", 1.0), ("else", -1.0)] {
            assert_matches_ort(&model, &[x(n, C, sign, 9)], TOL.0, TOL.1, &format!("If {what} {branch}"));
        }
    }
}

/// y = If(sum(x) > 0, then: ReduceSum(Gelu(x)), else: ReduceSum(x)), the Gelu being
/// com.microsoft's contrib op, which Rivet does not claim.
fn if_with_an_unsupported_branch_node() -> Vec<u8> {
    let then = ModelBuilder::new(17)
        .node_in_domain("com.microsoft", "Gelu", "then_gelu", &["x"], &["g"])
        .node_with("ReduceSum", "then_sum", &["g"], &["d"], &[("keepdims", Attr::Int(0))])
        .output("d", FLOAT, None)
        .graph("then");
    let other = ModelBuilder::new(17)
        .node_with("ReduceSum", "else_sum", &["x"], &["r"], &[("keepdims", Attr::Int(0))])
        .output("r", FLOAT, None)
        .graph("else");
    ModelBuilder::new(17)
        .domain_opset("com.microsoft", 1)
        .input("x", FLOAT, &[Dim::Fixed(3), Dim::Fixed(3)])
        .initializer("zero", &[], vec![0.0])
        .node_with("ReduceSum", "sum", &["x"], &["s"], &[("keepdims", Attr::Int(0))])
        .node("Greater", "gt", &["s", "zero"], &["cond"])
        .node_with(
            "If",
            "if",
            &["cond"],
            &["y"],
            &[("then_branch", Attr::Graph(then)), ("else_branch", Attr::Graph(other))],
        )
        .output("y", FLOAT, None)
        .build()
}

/// A branch holding a node Rivet cannot run: the If is not claimed (ORT's CPU EP runs it
/// and that node, with fallback on); with fallback off the session fails with Rivet's
/// "cannot run" message naming the inner node.
#[test]
fn an_if_whose_branch_rivet_cannot_run_is_not_claimed() {
    let model = if_with_an_unsupported_branch_node();
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &with_fallback()).expect("fallback on");
    let assigned = rivet::ort_extra::graph_assignment(&rivet).expect("assignment info");
    let on = |node: &str| assigned.iter().find(|(_, n, _)| n == node).map(|(ep, _, _)| ep.clone());
    assert_eq!(on("if").as_deref(), Some(harness::ORT_CPU_EP), "{assigned:?}");
    assert_eq!(on("then_gelu").as_deref(), Some(harness::ORT_CPU_EP), "{assigned:?}");
    assert_eq!(on("else_sum").as_deref(), Some(harness::RIVET_EP), "{assigned:?}");
    let mut ort = ort_session(&model);
    for sign in [1.0f32, -1.0] {
        let m: Vec<f32> = [2.0, 1.0, 0.5, 0.0, 3.0, 1.0, 1.0, 0.0, 4.0].iter().map(|v| v * sign).collect();
        let inputs = [HostTensor::f32("x", &[3, 3], m)];
        let want = harness::run(&mut ort, &inputs).expect("ORT run");
        let got = harness::run(&mut rivet, &inputs).expect("Rivet run");
        harness::compare(&got, &want, TOL.0, TOL.1).expect("fallback on");
    }
    let err = match harness::session(env(), &model, Arm::Rivet, &strict()) {
        Ok(_) => panic!("a strict session cannot build: Rivet has no com.microsoft Gelu"),
        Err(e) => e,
    };
    assert!(err.contains("Rivet cannot run node 'then_gelu' (Gelu)"), "Rivet's own message for the inner node: {err}");
}

/// A Loop of M = 4 iterations: s <- s + x, scan output s * s (ORT concatenates the
/// per-iteration outputs through Rivet's helper). Runs on Rivet alone.
#[test]
fn a_loop_with_a_scan_output_runs_on_rivet_alone() {
    for (what, dims) in [("static", vec![Dim::Fixed(3)]), ("symbolic", vec![Dim::Sym("L".into())])] {
        let body = ModelBuilder::new(17)
            .input("i", INT64, &[])
            .input("c", BOOL, &[])
            .input("s", FLOAT, &dims)
            .node("Identity", "body_cond", &["c"], &["c_out"])
            .node("Add", "body_add", &["s", "x"], &["s_out"])
            .node("Mul", "body_mul", &["s_out", "s_out"], &["sq"])
            .output("c_out", BOOL, Some(&[]))
            .output("s_out", FLOAT, None)
            .output("sq", FLOAT, None)
            .graph("body");
        let model = ModelBuilder::new(17)
            .input("x", FLOAT, &dims)
            .input("s0", FLOAT, &dims)
            .initializer_i64("M", &[], vec![4])
            .node_with("Loop", "loop", &["M", "", "s0"], &["s_final", "squares"], &[("body", Attr::Graph(body))])
            .output("s_final", FLOAT, None)
            .output("squares", FLOAT, None)
            .build();
        let n = if what == "static" { 3 } else { 5 };
        let inputs = [
            HostTensor::f32("x", &[n], (0..n).map(|v| v as f32 * 0.5 - 1.0).collect()),
            HostTensor::f32("s0", &[n], (0..n).map(|v| 1.0 - v as f32).collect()),
        ];
        assert_matches_ort(&model, &inputs, TOL.0, TOL.1, &format!("Loop {what}"));
    }
}

/// A Scan (opset 11) over axis 1 of xs [2, T] with its scan output on axis 1: ORT
/// transposes both through Rivet's helper. s <- s + x_t, y_t = -s. Runs on Rivet alone.
#[test]
fn a_scan_over_axis_one_runs_on_rivet_alone() {
    let body = ModelBuilder::new(17)
        .input("s", FLOAT, &[Dim::Fixed(2)])
        .input("xt", FLOAT, &[Dim::Fixed(2)])
        .node("Add", "body_add", &["s", "xt"], &["s_out"])
        .node("Neg", "body_neg", &["s_out"], &["yt"])
        .output("s_out", FLOAT, None)
        .output("yt", FLOAT, None)
        .graph("body");
    for (what, t) in [("static", Dim::Fixed(4)), ("symbolic", Dim::Sym("T".into()))] {
        let model = ModelBuilder::new(17)
            .input("s0", FLOAT, &[Dim::Fixed(2)])
            .input("xs", FLOAT, &[Dim::Fixed(2), t])
            .node_with(
                "Scan",
                "scan",
                &["s0", "xs"],
                &["s_final", "ys"],
                &[
                    ("body", Attr::Graph(body.clone())),
                    ("num_scan_inputs", Attr::Int(1)),
                    ("scan_input_axes", Attr::Ints(vec![1])),
                    ("scan_output_axes", Attr::Ints(vec![1])),
                ],
            )
            .output("s_final", FLOAT, None)
            .output("ys", FLOAT, None)
            .build();
        let inputs = [
            HostTensor::f32("s0", &[2], vec![0.5, -1.0]),
            HostTensor::f32("xs", &[2, 4], vec![1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.25, 8.0]),
        ];
        assert_matches_ort(&model, &inputs, TOL.0, TOL.1, &format!("Scan {what}"));
    }
}

/// OptionalGetElement (opset 18) on a plain tensor returns it: float and int64, static and
/// symbolic, on Rivet alone. (Optional-typed inputs are not tensors and are not claimed:
/// the conformance cases with them stay unsupported.)
#[test]
fn optional_get_element_of_a_tensor_runs_on_rivet_alone() {
    for (what, dims, n) in [("static", vec![Dim::Fixed(4)], 4), ("symbolic", vec![Dim::Sym("N".into())], 6)] {
        let model = ModelBuilder::new(18)
            .input("x", FLOAT, &dims)
            .input("k", INT64, &dims)
            .node("OptionalGetElement", "get_x", &["x"], &["y"])
            .node("OptionalGetElement", "get_k", &["k"], &["z"])
            .output("y", FLOAT, None)
            .output("z", INT64, None)
            .build();
        let inputs = [
            HostTensor::f32("x", &[n], (0..n).map(|v| v as f32 - 1.5).collect()),
            HostTensor::typed(
                "k",
                ort::value::TensorElementType::Int64,
                &[n],
                (0..n).map(|v| (v * 7 - 3) as f64).collect(),
            ),
        ];
        assert_matches_ort(&model, &inputs, 0.0, 0.0, &format!("OptionalGetElement {what}"));
    }
}

/// y = Add(a, If(c, then: Mul(a, a), else: Abs(a))) with a = Neg(x) computed in the outer
/// graph: the If depends on `a` only through its branches (an implicit input), so Neg and
/// Add cannot be fused together around it (ORT rejects such a group: "nodes that cannot
/// be fused together"). Every node runs on Rivet, fallback on or off, and matches ORT.
#[test]
fn a_value_read_only_inside_a_branch_orders_the_partition() {
    let arm = |name: &str, op: &str, ins: &[&str]| {
        let y = format!("{name}_y");
        ModelBuilder::new(17).node(op, name, ins, &[&y]).output(&y, FLOAT, None).graph(name)
    };
    let model = ModelBuilder::new(17)
        .input("x", FLOAT, &[Dim::Sym("N".into()), Dim::Fixed(3)])
        .input("c", BOOL, &[])
        .node("Neg", "neg", &["x"], &["a"])
        .node_with(
            "If",
            "if",
            &["c"],
            &["t"],
            &[
                ("then_branch", Attr::Graph(arm("mul", "Mul", &["a", "a"]))),
                ("else_branch", Attr::Graph(arm("abs", "Abs", &["a"]))),
            ],
        )
        .node("Add", "add", &["a", "t"], &["y"])
        .output("y", FLOAT, None)
        .build();
    let inputs = |c: bool| {
        let x = harness::values(11, 6, -2.0, 2.0).into_iter().map(|v| v as f32).collect();
        [
            HostTensor::f32("x", &[2, 3], x),
            HostTensor::typed("c", ort::value::TensorElementType::Bool, &[], vec![f64::from(u8::from(c))]),
        ]
    };
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &with_fallback()).expect("Rivet session (fallback on)");
    let assigned = rivet::ort_extra::graph_assignment(&rivet).expect("assignment info");
    for node in ["neg", "if", "add", "mul", "abs"] {
        let ep = assigned.iter().find(|(_, n, _)| n == node).map(|(ep, _, _)| ep.as_str());
        assert_eq!(ep, Some(harness::RIVET_EP), "node {node} ran on {ep:?}; all: {assigned:?}");
    }
    let mut ort = ort_session(&model);
    for c in [true, false] {
        let want = harness::run(&mut ort, &inputs(c)).expect("ORT run");
        let got = harness::run(&mut rivet, &inputs(c)).expect("Rivet run");
        harness::compare(&got, &want, 0.0, 0.0).unwrap_or_else(|e| panic!("c = {c}: {e}"));
        assert_matches_ort(&model, &inputs(c), 0.0, 0.0, &format!("fallback off, c = {c}"));
    }
}
