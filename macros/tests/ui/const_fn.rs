use rivet_macros::{dispatch_phase, ort_ffi};

#[dispatch_phase(TensorBind)]
const fn bind() -> u32 {
    1
}

#[ort_ffi]
const fn call() -> u32 {
    2
}

fn main() {
    let _ = bind() + call();
}
