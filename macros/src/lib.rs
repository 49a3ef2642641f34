//! Attribute macros that make Rivet's dispatch cost countable.
//!
//! - `#[dispatch_phase(Phase)]` runs a function's body inside a probe phase guard;
//!   `dispatch_phase!(Phase, { .. })` does the same for a block.
//! - `#[ort_ffi]` marks a wrapper that makes exactly one ORT API call and counts it.
//! - `staging_log!(fmt, args..)` formats only when tracing is on.
//!
//! Without the `probe` feature each expands to the code it was given (the log to a
//! closure that type-checks its arguments and is never called). Arguments are validated
//! either way, so a mistake is caught in both builds.

mod expand;
mod parse;

use proc_macro::TokenStream;

/// The build's choice: expand the probe hooks or return code untouched.
const PROBE: bool = cfg!(feature = "probe");

#[proc_macro_attribute]
pub fn dispatch_phase(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::dispatch_phase_attr(attr.into(), item.into(), PROBE).into()
}

#[proc_macro]
pub fn dispatch_phase_block(input: TokenStream) -> TokenStream {
    expand::dispatch_phase_block(input.into(), PROBE).into()
}

#[proc_macro_attribute]
pub fn ort_ffi(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::ort_ffi(attr.into(), item.into(), PROBE).into()
}

#[proc_macro]
pub fn staging_log(input: TokenStream) -> TokenStream {
    expand::staging_log(input.into(), PROBE).into()
}
