//! Quantized versions of the project's real models, made as a user makes them: the float
//! model refilled (`real_models`), then ORT's own quantization tool
//! (`tests/models/quantize_real.py`, `onnxruntime.quantization` from the pinned wheel)
//! run on it through the project's Python. The results go to `target/int8-models/`,
//! named by a hash of the float model, the script and the pinned wheels
//! (`requirements.txt`), and are made again only when one changes (a few seconds each).
//! Nothing is downloaded.

use std::path::PathBuf;
use std::process::Command;

use crate::harness::HostTensor;

/// How a model is quantized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// QDQ, uint8 activations calibrated on 4 seeded inputs, int8 weights per channel.
    Static,
    /// The same quantization in the QOperator format: QLinearConv, com.microsoft
    /// QLinearAdd, QLinearGlobalAveragePool and QGemm.
    QOperator,
    /// MatMulInteger with uint8 activations quantized at Run, int8 weights.
    Dynamic,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Static => "static",
            Mode::QOperator => "qoperator",
            Mode::Dynamic => "dynamic",
        }
    }
}

/// The quantized set: the CNNs statically (QDQ and QOperator), the transformers
/// dynamically.
pub const INT8_MODELS: [(&str, Mode); 6] = [
    ("resnet18_op17", Mode::Static),
    ("mobilenet_v2_op17", Mode::Static),
    ("resnet18_op17", Mode::QOperator),
    ("mobilenet_v2_op17", Mode::QOperator),
    ("bert_tiny_op17", Mode::Dynamic),
    ("gpt2_tiny_prefill_op17", Mode::Dynamic),
];

/// The Python with the pinned onnxruntime: `RIVET_PYTHON` (set by `cargo xtask`), else
/// the project's `.venv`.
fn python() -> PathBuf {
    std::env::var_os("RIVET_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::paths::workspace_root().join(".venv/bin/python"))
}

/// FNV-1a over `parts`.
fn hash(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for p in parts {
        for &b in *p {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

/// `stem` of `real_models` quantized with `mode`, and its inputs.
pub fn quantized(stem: &str, mode: Mode) -> Result<(Vec<u8>, Vec<HostTensor>), String> {
    let root = crate::paths::workspace_root();
    let script_path = root.join("tests/models/quantize_real.py");
    let script = std::fs::read(&script_path).map_err(|e| format!("{}: {e}", script_path.display()))?;
    let (float, inputs) = crate::real_models::real_model(stem)?;
    let dir = root.join("target/int8-models");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // The pinned wheels (the quantizer's version) are part of the key too.
    let pins = std::fs::read(root.join("requirements.txt")).unwrap_or_default();
    let key = hash(&[&float, &script, &pins, mode.name().as_bytes()]);
    let out = dir.join(format!("{stem}_{}_{key:016x}.onnx", mode.name()));
    if !out.exists() {
        // The float model under a name of this maker's own; the script writes `out`
        // through a temporary file and a rename, so concurrent makers do not collide.
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let nth = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let src = dir.join(format!("{stem}_{key:016x}_{}_{nth}.float.onnx", std::process::id()));
        std::fs::write(&src, &float).map_err(|e| format!("{}: {e}", src.display()))?;
        let made = Command::new(python()).arg(&script_path).arg(mode.name()).arg(&src).arg(&out).output();
        let _ = std::fs::remove_file(&src);
        let made = made.map_err(|e| format!("{stem}: could not start {}: {e}", python().display()))?;
        if !made.status.success() {
            return Err(format!("{stem}: quantizing failed: {}", String::from_utf8_lossy(&made.stderr)));
        }
    }
    let model = std::fs::read(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    Ok((model, inputs))
}
