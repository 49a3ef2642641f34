use rivet_macros::dispatch_phase;

#[dispatch_phase]
fn bind() {}

fn main() {
    bind();
}
