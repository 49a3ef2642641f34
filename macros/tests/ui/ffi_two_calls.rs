use rivet_macros::ort_ffi;

struct Table {
    GetA: fn() -> u32,
    GetB: fn() -> u32,
}

struct Api {
    ort: Table,
}

impl Api {
    #[ort_ffi]
    fn both(&self) -> u32 {
        (self.ort.GetA)() + (self.ort.GetB)()
    }
}

fn main() {}
