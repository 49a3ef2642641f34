//! Whole real models on Rivet alone against ORT's CPU EP: the CNNs the pinned onnx wheel
//! ships (`bench::LIGHT_MODELS`, timed by `cargo xtask bench --case model_`), and the
//! project's own exported CNNs and transformers (`rivet::real_models`, `--case real_`).

mod common;

use common::{ort_session, rivet_session};
use rivet::bench::{light_model, LIGHT_MODELS};
use rivet::harness;
use rivet::real_models::{real_model, REAL_MODELS};

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

/// Root mean square of a tensor's values.
fn rms(t: &harness::HostTensor) -> f64 {
    (t.data.iter().map(|v| v * v).sum::<f64>() / t.data.len().max(1) as f64).sqrt()
}

/// Every float output finite and not constant: refilled weights that blew up or
/// collapsed would make the comparison with ORT vacuous.
fn assert_informative(name: &str, outputs: &[harness::HostTensor]) {
    for t in outputs.iter().filter(|t| t.elem == ort::value::TensorElementType::Float32) {
        assert!(t.data.iter().all(|v| v.is_finite()), "{name}: output {} is not finite", t.name);
        let (lo, hi) = t.data.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        assert!(hi - lo > 1e-3 * hi.abs().max(lo.abs()), "{name}: output {} is constant ({lo}..{hi})", t.name);
    }
}

/// Each stored model, refilled, on Rivet alone against ORT's CPU EP. Tolerance per
/// output: rtol 1e-4 and atol 1e-4 of the output's RMS (atol scaled so that the CNNs'
/// logits, RMS 0.02, are held as tightly as the unit-scale hidden states). Both sides sum
/// in float32 in their own orders, over dot products of up to 4,608 terms and up to 50
/// layers; the worst model here (vit_small, gpt2_small, llama_small) reaches 0.021 of this
/// tolerance, about 2e-6 of the RMS. Broken kernels fail it: LayerNormalization with 100x
/// its epsilon (gpt2_small logits off by 2e-4 of the RMS), GlobalAveragePool dividing by
/// one more than the window (resnet18 off by 2%).
fn check_real_models(stems: &[&str]) {
    for stem in stems {
        let (model, inputs) = real_model(stem).expect("the stored real models");
        let mut rivet = rivet_session(&model);
        let assigned = rivet::ort_extra::graph_assignment(&rivet).expect("assignment");
        if let Some((ep, node, op)) = assigned.iter().find(|(ep, _, _)| ep != harness::RIVET_EP) {
            panic!("{stem}: node {node} ({op}) ran on {ep}");
        }
        let want = harness::run(&mut ort_session(&model), &inputs).expect("ORT run");
        assert_informative(stem, &want);
        let got = harness::run(&mut rivet, &inputs).expect("Rivet run");
        assert_eq!(got.len(), want.len(), "{stem}: outputs");
        let mut worst = 0.0f64;
        for (g, w) in got.iter().zip(&want) {
            let score = harness::compare(std::slice::from_ref(g), std::slice::from_ref(w), 1e-4, 1e-4 * rms(w))
                .unwrap_or_else(|e| panic!("{stem}: {e}"));
            worst = worst.max(score);
        }
        eprintln!("{stem}: worst difference {worst:.3} of the tolerance");
    }
}

/// The CNNs and the tiny transformers; the small ones in a second test so the two run
/// side by side.
#[test]
fn the_project_s_cnns_and_tiny_transformers_match_ort_on_rivet_alone() {
    let stems: Vec<&str> = REAL_MODELS.iter().copied().filter(|s| !s.contains("_small")).collect();
    check_real_models(&stems);
}

#[test]
fn the_project_s_small_transformers_match_ort_on_rivet_alone() {
    let stems: Vec<&str> = REAL_MODELS.iter().copied().filter(|s| s.contains("_small")).collect();
    assert!(!stems.is_empty());
    check_real_models(&stems);
}
