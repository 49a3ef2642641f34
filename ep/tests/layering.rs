//! The op families sit below the core (ARCHITECTURE.md, "Layers"): a module under
//! `ep/src/ops/` may import only `data`, `graph`, `node_attrs`, `parallel`, `error` and
//! other `ops` modules. One that reaches up into the registry, the plan, shapes or exec
//! would bring back the import circle issue 14 removed.

use std::path::{Path, PathBuf};

const ALLOWED: &[&str] = &["data", "graph", "node_attrs", "parallel", "error", "ops"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The `crate::<module>` paths a source text names outside `//` comments and before its
/// `#[cfg(test)]` module (tests may drive the registry and the plan).
fn crate_modules(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines().take_while(|l| l.trim() != "#[cfg(test)]") {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            found.push(name);
            rest = after;
        }
    }
    found
}

#[test]
fn op_modules_import_nothing_above_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ops");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 50, "found the op modules ({})", files.len());
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("readable");
        for m in crate_modules(&text) {
            if !ALLOWED.contains(&m.as_str()) {
                bad.push(format!("{}: crate::{m}", f.strip_prefix(&root).unwrap_or(f).display()));
            }
        }
    }
    assert!(bad.is_empty(), "op modules reaching above the ops layer:\n{}", bad.join("\n"));
}

#[test]
fn the_scan_sees_imports() {
    let text = "use crate::shapes::ShapeText; // crate::plan in a comment\nlet x = crate::data::number_at(d, 0);\n\
                #[cfg(test)]\nmod tests { use crate::registry::Kernel; }";
    assert_eq!(crate_modules(text), ["shapes", "data"]);
}
