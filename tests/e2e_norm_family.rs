//! The softmax and normalization families on the `ops::Op` seam: half-precision nodes
//! with several outputs (each output of the half type cast back from float32), on static
//! and symbolic shapes, and a bad parameter shape at Run naming the node and its input,
//! the session still usable after.

mod common;

use common::{env, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT, FLOAT16, INT64};

const BFLOAT16: i32 = 16;

fn dims(d: &[i64], symbolic: bool) -> Vec<Dim> {
    d.iter().enumerate().map(|(i, &n)| if symbolic && i == 0 { Dim::Sym("n".into()) } else { n.into() }).collect()
}

/// SoftmaxCrossEntropyLoss on float16 / bfloat16 with its loss and log_prob outputs both
/// of the half type, fed and read through Casts, against ORT's float32 result.
#[test]
fn half_softmax_cross_entropy_casts_both_outputs_back() {
    let (x_dims, t_dims) = ([3i64, 5], [3i64]);
    let inputs = [
        HostTensor::typed("x", E::Float32, &x_dims, harness::values(5, 15, -2.0, 2.0)),
        HostTensor::typed("target", E::Int64, &t_dims, vec![4.0, 0.0, 2.0]),
    ];
    for half in [FLOAT16, BFLOAT16] {
        for symbolic in [false, true] {
            for reduction in ["none", "mean"] {
                let attrs = [("reduction", Attr::Str(reduction.into()))];
                let with_casts = ModelBuilder::new(13)
                    .input("x", FLOAT, &dims(&x_dims, symbolic))
                    .input("target", INT64, &dims(&t_dims, symbolic))
                    .node_with("Cast", "to_half", &["x"], &["h"], &[("to", Attr::Int(half as i64))])
                    .node_with("SoftmaxCrossEntropyLoss", "sce", &["h", "target"], &["hl", "hp"], &attrs)
                    .node_with("Cast", "loss_back", &["hl"], &["loss"], &[("to", Attr::Int(FLOAT as i64))])
                    .node_with("Cast", "prob_back", &["hp"], &["log_prob"], &[("to", Attr::Int(FLOAT as i64))])
                    .output("loss", FLOAT, None)
                    .output("log_prob", FLOAT, None)
                    .build();
                let plain = ModelBuilder::new(13)
                    .input("x", FLOAT, &dims(&x_dims, symbolic))
                    .input("target", INT64, &dims(&t_dims, symbolic))
                    .node_with("SoftmaxCrossEntropyLoss", "sce", &["x", "target"], &["loss", "log_prob"], &attrs)
                    .output("loss", FLOAT, None)
                    .output("log_prob", FLOAT, None)
                    .build();
                let mut rivet = harness::session(env(), &with_casts, Arm::Rivet, &strict()).expect("Rivet session");
                let mut ort = common::ort_session(&plain);
                let got = harness::run(&mut rivet, &inputs).expect("Rivet run");
                let want = harness::run(&mut ort, &inputs).expect("ORT run");
                let rtol = if half == FLOAT16 { 4e-3 } else { 3e-2 };
                let what = format!("type {half} symbolic {symbolic} {reduction}");
                harness::compare(&got, &want, rtol, rtol / 4.0).unwrap_or_else(|e| panic!("{what}: {e}"));
            }
        }
    }
}

/// BatchNormalization in training mode on float16 with Y and the running mean and
/// variance all of the half type: each within the half's precision of the float32 node
/// (ORT's CPU EP has no training kernel to compare with).
#[test]
fn half_training_batch_norm_casts_every_output_back() {
    let (n, c, s) = (2i64, 3i64, 4i64);
    let names = ["x", "scale", "bias", "mean", "var"];
    let shapes = [vec![n, c, s], vec![c], vec![c], vec![c], vec![c]];
    let inputs: Vec<HostTensor> = names
        .iter()
        .zip(&shapes)
        .enumerate()
        .map(|(k, (name, d))| {
            let lo = if *name == "var" { 0.5 } else { -1.5 };
            HostTensor::typed(
                name,
                E::Float32,
                d,
                harness::values(k as u64 + 11, d.iter().product::<i64>() as usize, lo, 2.0),
            )
        })
        .collect();
    let attrs = [("training_mode", Attr::Int(1)), ("momentum", Attr::Float(0.8))];
    let outs = ["y", "running_mean", "running_var"];
    for symbolic in [false, true] {
        let model = |half: Option<i32>| {
            let mut b = ModelBuilder::new(15);
            for (name, d) in names.iter().zip(&shapes) {
                b = b.input(name, FLOAT, &dims(d, symbolic && *name == "x"));
            }
            let (ins, bn_outs): (Vec<String>, Vec<String>) = match half {
                Some(h) => {
                    for name in names {
                        b = b.node_with(
                            "Cast",
                            &format!("{name}_half"),
                            &[name],
                            &[&format!("h_{name}")],
                            &[("to", Attr::Int(h as i64))],
                        );
                    }
                    (names.iter().map(|n| format!("h_{n}")).collect(), outs.iter().map(|o| format!("h_{o}")).collect())
                }
                None => (names.iter().map(|n| n.to_string()).collect(), outs.iter().map(|o| o.to_string()).collect()),
            };
            let ins: Vec<&str> = ins.iter().map(String::as_str).collect();
            let bn: Vec<&str> = bn_outs.iter().map(String::as_str).collect();
            b = b.node_with("BatchNormalization", "bn", &ins, &bn, &attrs);
            if half.is_some() {
                for (o, h) in outs.iter().zip(&bn) {
                    b = b.node_with("Cast", &format!("{o}_back"), &[h], &[o], &[("to", Attr::Int(FLOAT as i64))]);
                }
            }
            for o in outs {
                b = b.output(o, FLOAT, None);
            }
            b.build()
        };
        let mut plain = harness::session(env(), &model(None), Arm::Rivet, &strict()).expect("float32 session");
        let want = harness::run(&mut plain, &inputs).expect("float32 run");
        let mut halved = harness::session(env(), &model(Some(FLOAT16)), Arm::Rivet, &strict()).expect("half session");
        let got = harness::run(&mut halved, &inputs).expect("half run");
        assert_eq!(got.len(), 3);
        harness::compare(&got, &want, 4e-3, 1e-3).unwrap_or_else(|e| panic!("symbolic {symbolic}: {e}"));
    }
}

/// A LayerNormalization whose scale does not fit the normalized axes at Run: an error
/// naming the node and the parameter; the session then runs good input.
#[test]
fn layer_norm_bad_scale_at_run_names_the_node_and_the_session_goes_on() {
    let sym = |name: &str| Dim::Sym(name.into());
    let model = ModelBuilder::new(17)
        .input("x", FLOAT, &[sym("n"), sym("d")])
        .input("s", FLOAT, &[sym("k")])
        .node_with("LayerNormalization", "ln", &["x", "s"], &["y"], &[("axis", Attr::Int(-1))])
        .output("y", FLOAT, None)
        .build();
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let x = HostTensor::f32("x", &[2, 4], harness::values(3, 8, -1.0, 1.0).iter().map(|&v| v as f32).collect());
    let err = harness::run(&mut rivet, &[x.clone(), HostTensor::f32("s", &[3], vec![1.0; 3])]).expect_err("3 of 4");
    assert!(err.contains("node 'ln' (LayerNormalization)") && err.contains("parameter 's' of shape [3]"), "{err}");
    let ok = harness::run(&mut rivet, &[x, HostTensor::f32("s", &[4], vec![1.0; 4])]).expect("runs");
    // Each row normalized: zero mean.
    for row in ok[0].data.chunks(4) {
        assert!(row.iter().sum::<f64>().abs() < 1e-5, "{row:?}");
    }
}
