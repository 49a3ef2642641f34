//! Attribute macros that make dispatch cost countable, over the `rivet-probe` runtime.
//!
//! - `#[dispatch_phase(Phase)]` runs a function's body inside a probe phase guard;
//!   `dispatch_phase_block!(Phase, { .. })` does the same for a block.
//! - `#[ort_ffi]` marks a wrapper that makes exactly one ORT API call, and counts that
//!   call where it is made.
//! - `staging_log!(fmt, args..)` formats only when tracing is on.
//!
//! The expansions name the runtime as `::rivet_probe`; `crate = "path"` names another
//! path (a re-export, in the manner of serde's `#[serde(crate = "...")]`). Without the
//! `probe` feature each expands to the code it was given (the log to a closure that
//! type-checks its arguments and is never called). Arguments are validated either way,
//! so a mistake is caught in both builds.
//!
//! The examples below run with the feature on and off: `rivet_probe::ENABLED` says
//! which.

mod expand;
mod parse;

use proc_macro::TokenStream;

/// The build's choice: expand the probe hooks or return code untouched.
const PROBE: bool = cfg!(feature = "probe");

/// Charges the function's work (calls, ORT calls, statuses, allocations, time) to a
/// phase: one of Rivet's seven by name (`CallbackEntry`, `MetadataQuery`, `TensorBind`,
/// `Allocate`, `DispatchLookup`, `KernelInvoke`, `StatusCrossing`), or a path to a
/// `static` [`UserPhase`](../rivet_probe/struct.UserPhase.html) of your own. Phases
/// nest: work in an inner phase is charged to it alone. Not for `const fn` or
/// `async fn` (a compile error says why).
///
/// ```
/// use rivet_macros::dispatch_phase;
/// use rivet_probe::{snapshot, Phase};
///
/// #[dispatch_phase(TensorBind)]
/// fn bind(x: &[f32]) -> usize {
///     x.len()
/// }
///
/// mod phases {
///     pub static PARSE: rivet_probe::UserPhase = rivet_probe::UserPhase::new("parse");
/// }
///
/// #[dispatch_phase(phases::PARSE)]
/// fn parse(s: &str) -> usize {
///     s.split(',').count()
/// }
///
/// let before = snapshot();
/// assert_eq!(bind(&[1.0, 2.0]) + parse("a,b,c"), 5);
/// let d = snapshot().since(&before);
/// let on = rivet_probe::ENABLED as u64;
/// assert_eq!(d.phase(Phase::TensorBind).calls, on);
/// assert_eq!(d.user_phases.iter().map(|p| p.calls).sum::<u64>(), on);
/// assert_eq!(rivet_probe::user_phase_names(), if rivet_probe::ENABLED { vec!["parse"] } else { vec![] });
/// ```
///
/// Through a re-export, name its path:
///
/// ```
/// mod facade {
///     pub use rivet_probe as probe;
/// }
/// #[rivet_macros::dispatch_phase(Allocate, crate = "facade::probe")]
/// fn make() -> Vec<u8> {
///     vec![0; 4]
/// }
/// assert_eq!(make().len(), 4);
/// ```
#[proc_macro_attribute]
pub fn dispatch_phase(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::dispatch_phase_attr(attr.into(), item.into(), PROBE).into()
}

/// `#[dispatch_phase]` for a block: `dispatch_phase_block!(Phase, { .. })`, or
/// `dispatch_phase_block!(Phase, crate = "path", { .. })`. The block's value is the
/// macro's value.
///
/// ```
/// use rivet_macros::dispatch_phase_block;
/// use rivet_probe::{snapshot, Phase};
///
/// let before = snapshot();
/// let n = dispatch_phase_block!(KernelInvoke, { (1..=4).sum::<u32>() });
/// assert_eq!(n, 10);
/// let calls = snapshot().since(&before).phase(Phase::KernelInvoke).calls;
/// assert_eq!(calls, rivet_probe::ENABLED as u64);
/// ```
#[proc_macro]
pub fn dispatch_phase_block(input: TokenStream) -> TokenStream {
    expand::dispatch_phase_block(input.into(), PROBE).into()
}

/// Marks a wrapper around exactly one ORT API member call, `(self.ort.Member)(..)` (an
/// `OrtApi` member: upper-case first letter) or `(self.ep.member)(..)` (an `OrtEpApi`
/// member). With the probe, a counting site is put beside that call, so every call is
/// counted where it happens (per member: `rivet_probe::ffi_sites`), in a loop as often
/// as it runs, not at all when the wrapper returns before it. Rejected at compile time:
/// no call or two, a member used as a value (a copied function pointer would be called
/// uncounted), a member inside another macro's arguments (`assert!(..)`: its tokens
/// cannot be counted).
///
/// ```
/// use rivet_macros::ort_ffi;
///
/// #[allow(non_snake_case)]
/// struct Table {
///     GetAnswer: fn(u32) -> u32,
/// }
/// struct Api {
///     ort: Table,
/// }
/// impl Api {
///     #[ort_ffi]
///     fn answer(&self, tries: u32) -> u32 {
///         let mut last = 0;
///         for i in 0..tries {
///             last = (self.ort.GetAnswer)(i);
///         }
///         last
///     }
/// }
///
/// let api = Api { ort: Table { GetAnswer: |i| i + 40 } };
/// assert_eq!(api.answer(3), 42);
/// let calls = rivet_probe::thread_ffi_sites();
/// let expect: Vec<(&str, u64)> = if rivet_probe::ENABLED { vec![("GetAnswer", 3)] } else { vec![] };
/// assert_eq!(calls, expect);
/// ```
#[proc_macro_attribute]
pub fn ort_ffi(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::ort_ffi(attr.into(), item.into(), PROBE).into()
}

/// `staging_log!("format", args..)`: printed to stderr only with the probe and
/// `RIVET_TRACE=1`. Otherwise its arguments are type-checked and never evaluated.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
///
/// static EVALUATED: AtomicU32 = AtomicU32::new(0);
/// fn costly() -> u32 {
///     EVALUATED.fetch_add(1, Ordering::Relaxed)
/// }
///
/// rivet_macros::staging_log!("value {}", costly());
/// if std::env::var_os("RIVET_TRACE").is_none() {
///     // Tracing is off: the argument was not evaluated.
///     assert_eq!(EVALUATED.load(Ordering::Relaxed), 0);
/// }
/// ```
#[proc_macro]
pub fn staging_log(input: TokenStream) -> TokenStream {
    expand::staging_log(input.into(), PROBE).into()
}
