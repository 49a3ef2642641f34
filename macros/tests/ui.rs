//! Each misuse of the macros is a compile error at a precise span (`tests/ui/*.stderr`),
//! the same in both builds: `cargo test -p rivet-macros` and `... --features probe`.
//! Regenerate after an intended change with `TRYBUILD=overwrite cargo test -p rivet-macros --test ui`
//! (and again with `--features probe`).

#[test]
fn misuse_is_reported_where_it_happens() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
