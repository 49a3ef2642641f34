use rivet_macros::dispatch_phase;

#[dispatch_phase(TensorBind, Allocate)]
fn bind() {}

fn main() {
    bind();
}
