use rivet_macros::ort_ffi;

#[allow(non_snake_case)]
struct Table {
    GetA: fn() -> u32,
}

struct Api {
    ort: Table,
}

impl Api {
    // A second call through a copy of the member would go uncounted.
    #[ort_ffi]
    fn twice(&self) -> u32 {
        let again = self.ort.GetA;
        (self.ort.GetA)() + again()
    }
}

fn main() {}
