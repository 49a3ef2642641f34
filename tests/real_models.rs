//! Whole real models on Rivet alone against ORT's CPU EP: the CNNs the pinned onnx wheel
//! ships (`bench::LIGHT_MODELS`, timed by `cargo xtask bench --case model_`).

mod common;

use common::{ort_session, rivet_session};
use rivet::bench::{light_model, LIGHT_MODELS};
use rivet::harness;

#[test]
fn the_light_cnns_match_ort_on_rivet_alone() {
    for (name, input) in LIGHT_MODELS {
        let (model, inputs) = light_model(name, input).expect("the onnx wheel's light models");
        let mut rivet = rivet_session(&model);
        let assigned = rivet::ort_extra::graph_assignment(&rivet).expect("assignment");
        assert!(assigned.iter().all(|(ep, _, _)| ep == harness::RIVET_EP), "{name}: not all on Rivet");
        let want = harness::run(&mut ort_session(&model), &inputs).expect("ORT run");
        let got = harness::run(&mut rivet, &inputs).expect("Rivet run");
        harness::compare(&got, &want, 1e-3, 1e-4).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}
