use rivet_macros::dispatch_phase;

static NOT_A_PHASE: u32 = 3;

// A user phase is a path to a `static UserPhase`; anything else is a type error here.
#[dispatch_phase(self::NOT_A_PHASE)]
fn parse() {}

fn main() {
    parse();
}
