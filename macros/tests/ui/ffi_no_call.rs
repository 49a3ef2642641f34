use rivet_macros::ort_ffi;

struct Api;

impl Api {
    #[ort_ffi]
    fn nothing(&self) -> usize {
        42
    }
}

fn main() {
    let _ = Api.nothing();
}
