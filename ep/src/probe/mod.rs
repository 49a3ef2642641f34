//! The dispatch probe, from the `rivet-probe` runtime crate: Rivet's code names it as
//! `crate::probe`, the macros' expansions as `::rivet_probe`.

pub use rivet_probe::*;
