use rivet_macros::staging_log;

fn main() {
    let n = 3;
    staging_log!(n);
}
