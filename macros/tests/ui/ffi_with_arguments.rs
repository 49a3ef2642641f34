use rivet_macros::ort_ffi;

#[ort_ffi(GetA)]
fn get() {}

fn main() {}
