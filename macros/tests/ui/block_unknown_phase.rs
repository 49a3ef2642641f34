use rivet_macros::dispatch_phase_block;

fn main() {
    let x = dispatch_phase_block!(KernelInvocation, { 1 + 1 });
    let _ = x;
}
