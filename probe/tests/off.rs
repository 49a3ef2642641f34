//! Without the feature the runtime is inert and the macros expand to the code they were
//! given: zero-sized guards without `Drop`, counters at their defaults after real work,
//! log arguments never evaluated.
#![cfg(not(feature = "probe"))]

use rivet_probe::{dispatch_phase, ort_ffi, staging_log, Counters, FfiSite, Phase, PhaseGuard, UserPhase};

static PARSE: UserPhase = UserPhase::new("parse");

#[dispatch_phase(TensorBind)]
fn bind(x: &[u32]) -> u32 {
    x.iter().sum()
}

#[dispatch_phase(crate::PARSE)]
fn parse(s: &str) -> usize {
    s.len()
}

#[allow(non_snake_case)]
struct Table {
    Get: fn() -> u32,
}
struct Api {
    ort: Table,
}
impl Api {
    #[ort_ffi]
    fn get(&self) -> u32 {
        (self.ort.Get)()
    }
}

#[test]
fn guards_and_sites_are_zero_sized_without_drop() {
    assert_eq!(std::mem::size_of::<PhaseGuard>(), 0);
    assert!(!std::mem::needs_drop::<PhaseGuard>());
    assert_eq!(std::mem::size_of::<FfiSite>(), 0);
    const { assert!(!rivet_probe::ENABLED) };
}

#[test]
fn counters_stay_at_their_defaults_after_real_work() {
    let api = Api { ort: Table { Get: || 7 } };
    assert_eq!(bind(&[1, 2]) + parse("ab") as u32 + api.get(), 12);
    let _g = PhaseGuard::enter_user(&PARSE);
    assert_eq!(rivet_probe::snapshot(), Counters::default());
    assert_eq!(rivet_probe::global_snapshot(), Counters::default());
    assert!(rivet_probe::ffi_sites().is_empty() && rivet_probe::user_phase_names().is_empty());
    assert!(!rivet_probe::allocations_counted());
    let _ = Phase::ALL;
}

static EVALUATED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

#[test]
fn a_disabled_log_evaluates_nothing() {
    staging_log!("value {}", EVALUATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    assert_eq!(EVALUATED.load(std::sync::atomic::Ordering::Relaxed), 0);
}
