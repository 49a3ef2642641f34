use rivet_macros::dispatch_phase;

#[dispatch_phase(TensorBind)]
struct NotAFunction;

fn main() {}
