//! Where the ORT library and the Rivet plugin are. `cargo xtask` sets the variables;
//! without them we look where `cargo xtask setup` and `cargo build --release` put things.

use std::path::{Path, PathBuf};

/// The workspace root (this package's manifest directory).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `libonnxruntime.so.1.32.0` from the project's `.venv`, or `ORT_DYLIB_PATH`.
pub fn ort_dylib() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH") {
        return Ok(PathBuf::from(p));
    }
    let lib = workspace_root().join(".venv/lib");
    let found = std::fs::read_dir(&lib).ok().and_then(|entries| {
        entries
            .flatten()
            .map(|e| e.path().join("site-packages/onnxruntime/capi/libonnxruntime.so.1.32.0"))
            .find(|p| p.exists())
    });
    found.ok_or_else(|| {
        format!(
            "ONNX Runtime 1.32.0 was not found under {}: run `cargo xtask setup` (or set ORT_DYLIB_PATH)",
            lib.display()
        )
    })
}

/// The real CNNs the pinned `onnx` wheel ships (`onnx/backend/test/data/light`: their
/// weights are ConstantOfShape nodes, which ORT folds into initializers), found beside
/// the ORT library's site-packages.
pub fn light_models_dir() -> Result<PathBuf, String> {
    let ort = ort_dylib()?;
    let site = ort.ancestors().nth(3).ok_or("the ORT library path is too short")?;
    existing(site.join("onnx/backend/test/data/light"), "install requirements.txt (`cargo xtask setup`)")
}

fn existing(p: PathBuf, hint: &str) -> Result<PathBuf, String> {
    if p.exists() {
        Ok(p)
    } else {
        Err(format!("{} does not exist: {hint}", p.display()))
    }
}

/// The production plugin: `RIVET_EP_LIB` or `target/release/librivet_ep.so`.
pub fn rivet_lib() -> Result<PathBuf, String> {
    match std::env::var_os("RIVET_EP_LIB") {
        Some(p) => existing(PathBuf::from(p), "RIVET_EP_LIB points nowhere"),
        None => existing(target_dir().join("release/librivet_ep.so"), "run `cargo build --release -p rivet-ep`"),
    }
}

/// The plugin built with `--features probe`: `RIVET_EP_PROBE_LIB` or
/// `target/probe/release/librivet_ep.so`.
pub fn rivet_probe_lib() -> Result<PathBuf, String> {
    match std::env::var_os("RIVET_EP_PROBE_LIB") {
        Some(p) => existing(PathBuf::from(p), "RIVET_EP_PROBE_LIB points nowhere"),
        None => existing(
            target_dir().join("probe/release/librivet_ep.so"),
            "run `cargo build --release -p rivet-ep --features probe-allocator --target-dir target/probe`",
        ),
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| workspace_root().join("target"))
}

/// True when `p` looks like a shared library path.
pub fn is_library(p: &Path) -> bool {
    p.extension().is_some_and(|e| e == "so") || p.to_string_lossy().contains(".so.")
}
