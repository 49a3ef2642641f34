//! Each misuse of the macros is a compile error at a precise span (`tests/ui/*.stderr`).
//! Regenerate after an intended change with `TRYBUILD=overwrite cargo test -p rivet-macros --test ui`.

#[test]
fn misuse_is_reported_where_it_happens() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
