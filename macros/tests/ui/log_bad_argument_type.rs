use rivet_macros::staging_log;

struct NoDisplay;

fn main() {
    // A disabled log still type-checks its arguments.
    staging_log!("value {}", NoDisplay);
}
