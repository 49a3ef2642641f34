//! The Rivet harness: loads ONNX Runtime and the Rivet plugin, builds models in memory,
//! runs them on Rivet and on ORT's own CPU EP, and compares. Used by the `rivet` CLI and
//! by the end-to-end tests.

pub mod bench;
pub mod callgrind;
pub mod harness;
pub mod int8_models;
pub mod model;
pub mod ort_extra;
pub mod paths;
pub mod probe_reader;
pub mod profile;
pub mod real_models;
