//! The production plugin exports exactly ORT's two entry points; the probe build adds
//! only the probe's C exports.

use std::path::Path;
use std::process::Command;

fn exported(lib: &Path) -> Vec<String> {
    let out = Command::new("nm").args(["-D", "--defined-only"]).arg(lib).output().expect("nm (binutils) runs");
    assert!(out.status.success(), "nm failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let (_addr, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
            // Text (code) and data symbols the library defines.
            matches!(kind, "T" | "D" | "B" | "R").then(|| name.to_string())
        })
        .collect();
    names.sort();
    names
}

#[test]
fn production_library_exports_only_the_ort_entry_points() {
    let lib = rivet::paths::rivet_lib().expect("production plugin built");
    assert_eq!(exported(&lib), ["CreateEpFactories", "ReleaseEpFactory"]);
}

#[test]
fn probe_library_adds_only_the_probe_exports() {
    let lib = rivet::paths::rivet_probe_lib().expect("probe plugin built");
    assert_eq!(
        exported(&lib),
        [
            "CreateEpFactories",
            "ReleaseEpFactory",
            "rivet_probe_cost_ns",
            "rivet_probe_ffi_site",
            "rivet_probe_node_count",
            "rivet_probe_node_name",
            "rivet_probe_node_stats",
            "rivet_probe_nodes_reset",
            "rivet_probe_num_phases",
            "rivet_probe_phase_name",
            "rivet_probe_reset",
            "rivet_probe_snapshot",
            "rivet_probe_timeline_start",
            "rivet_probe_timeline_write",
        ]
    );
}
