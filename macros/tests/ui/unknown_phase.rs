use rivet_macros::dispatch_phase;

#[dispatch_phase(Tensorbind)]
fn bind() {}

fn main() {
    bind();
}
