//! Marks the plugin NODELETE: ORT unloads an EP library when it is unregistered, even
//! while sessions that use it are alive; their later calls into Rivet (Compute, release
//! callbacks) would then jump into unmapped code. With `-z nodelete`, dlclose leaves the
//! code mapped, and re-registering the same file reuses it.
fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
    }
}
