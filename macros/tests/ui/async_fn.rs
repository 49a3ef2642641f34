use rivet_macros::dispatch_phase;

#[dispatch_phase(KernelInvoke)]
async fn run() -> u32 {
    1
}

fn main() {
    let _ = run();
}
