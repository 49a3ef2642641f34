#![deny(unused_must_use)]

use rivet_probe::{Phase, PhaseGuard};

fn main() {
    // Dropped at once: the phase would be empty.
    PhaseGuard::enter(Phase::TensorBind);
}
