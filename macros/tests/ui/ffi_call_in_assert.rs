use rivet_macros::ort_ffi;

#[allow(non_snake_case)]
struct Table {
    GetA: fn() -> u32,
    GetB: fn() -> u32,
}

struct Api {
    ort: Table,
}

impl Api {
    // A call inside a macro's tokens is invisible to the probe.
    #[ort_ffi]
    fn checked(&self) -> u32 {
        assert!((self.ort.GetB)() > 0);
        (self.ort.GetA)()
    }
}

fn main() {}
