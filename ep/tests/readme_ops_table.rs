//! The README's op table is generated from the registry. `RIVET_BLESS=1 cargo test -p
//! rivet-ep --test readme_ops_table` rewrites it; otherwise a stale table fails.

const START: &str = "<!-- ops-table:start -->\n";
const END: &str = "<!-- ops-table:end -->";

#[test]
fn readme_op_table_matches_the_registry() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let readme = std::fs::read_to_string(&path).expect("README.md");
    let (head, rest) = readme.split_once(START).expect("README has the ops-table start marker");
    let (current, tail) = rest.split_once(END).expect("README has the ops-table end marker");
    let generated = rivet_ep::registry::markdown_table();
    if current == generated {
        return;
    }
    if std::env::var_os("RIVET_BLESS").is_some() {
        std::fs::write(&path, format!("{head}{START}{generated}{END}{tail}")).expect("write README.md");
        return;
    }
    panic!("README.md's op table is stale: run `RIVET_BLESS=1 cargo test -p rivet-ep --test readme_ops_table`");
}
