//! ORT's contrib ops (`com.microsoft`, written by its offline optimizer) against ORT's CPU
//! EP, every node on Rivet (fallback off): QuickGelu on static and symbolic shapes.

mod common;

use common::{assert_matches_ort, rivet_session};
use rivet::harness::{self, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT};

fn quick_gelu(alpha: Option<f32>, dims: &[Dim]) -> Vec<u8> {
    let attrs: Vec<(&str, Attr)> = alpha.iter().map(|&a| ("alpha", Attr::Float(a))).collect();
    ModelBuilder::new(17)
        .input("x", FLOAT, dims)
        .node_in_domain_with("com.microsoft", "QuickGelu", "qg", &["x"], &["y"], &attrs)
        .output("y", FLOAT, None)
        .build()
}

#[test]
fn quick_gelu_matches_ort() {
    let x = common::sweep(96, -30.0, 30.0, true);
    for alpha in [None, Some(1.0), Some(-0.5)] {
        for dims in [vec![Dim::from(4), 24.into()], vec!["n".into(), "c".into()]] {
            let model = quick_gelu(alpha, &dims);
            // ORT's sigmoid is off by some 1e-6 below -16, as for Swish.
            assert_matches_ort(&model, &[HostTensor::f32("x", &[4, 24], x.clone())], 1e-6, 1e-5, &format!("{alpha:?}"));
        }
    }
}

/// Without `alpha` the node computes x * sigmoid(1.702 x) (not Swish's alpha 1), pinned
/// against the formula rather than ORT. (ORT hands the EP the schema's default as an
/// attribute, so this pins the alpha Rivet reads and its use.)
#[test]
fn quick_gelu_without_alpha_is_x_sigmoid_1_702_x() {
    let x: Vec<f32> = vec![-2.0, -0.5, 0.0, 0.25, 1.0, 3.0];
    let mut s = rivet_session(&quick_gelu(None, &["n".into()]));
    let got = harness::run(&mut s, &[HostTensor::f32("x", &[6], x.clone())]).expect("runs");
    for (&v, &y) in x.iter().zip(&got[0].data) {
        let want = f64::from(v) / (1.0 + (-1.702 * f64::from(v)).exp());
        assert!((y - want).abs() <= 1e-6, "QuickGelu({v}) = {y}, want {want}");
    }
}
