//! The runtime with the feature on, without the counting allocator (this binary keeps
//! the system allocator): shards merge on read, exited threads keep their counts, user
//! phases, timing off unless asked for, lazy logs.
#![cfg(feature = "probe")]

use rivet_probe::{dispatch_phase, dispatch_phase_block, global_snapshot, snapshot, staging_log, Phase, PhaseGuard};

mod phases {
    pub static PARSE: rivet_probe::UserPhase = rivet_probe::UserPhase::new("parse");
}

#[dispatch_phase(phases::PARSE)]
fn parse(s: &str) -> usize {
    dispatch_phase_block!(KernelInvoke, { s.len() })
}

#[test]
fn shards_of_every_thread_are_merged_and_survive_the_threads_exit() {
    let before = global_snapshot();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..1000 {
                    let _g = PhaseGuard::enter(Phase::MetadataQuery);
                    rivet_probe::record_status();
                }
                snapshot()
            })
        })
        .collect();
    for t in threads {
        let mine = t.join().unwrap();
        assert_eq!(mine.phase(Phase::MetadataQuery).statuses, 1000, "each thread sees its own shard exactly");
    }
    // The threads have exited: their shards were folded into the retired counts.
    let d = global_snapshot().since(&before);
    assert!(d.phase(Phase::MetadataQuery).statuses >= 4000, "{d:#?}");
    assert_eq!(snapshot().phase(Phase::MetadataQuery).statuses, 0, "this thread did none of it");
}

#[test]
fn user_phases_count_beside_rivets_and_nest() {
    let before = snapshot();
    assert_eq!(parse("abc"), 3);
    let d = snapshot().since(&before);
    let k = rivet_probe::user_phase_names().iter().position(|n| *n == "parse").expect("registered");
    assert_eq!(d.user_phases[k].calls, 1);
    assert_eq!(d.phase(Phase::KernelInvoke).calls, 1);
    assert_eq!(d.total().calls, 2);
}

#[test]
fn phases_are_not_timed_unless_asked_for() {
    assert!(std::env::var_os("RIVET_PROFILE_DISPATCH").is_none(), "run without RIVET_PROFILE_DISPATCH");
    let before = snapshot();
    for _ in 0..100 {
        let _g = PhaseGuard::enter(Phase::KernelInvoke);
        std::hint::black_box((0..100u64).sum::<u64>());
    }
    let d = snapshot().since(&before);
    assert_eq!(d.phase(Phase::KernelInvoke).calls, 100);
    assert_eq!(d.total().ns, 0, "timed with timing off: {d:#?}");
}

#[test]
fn allocations_are_not_counted_without_the_counting_allocator() {
    let before = snapshot();
    let v = std::hint::black_box(vec![1u8; 100]);
    let d = snapshot().since(&before);
    drop(v);
    assert!(!rivet_probe::allocations_counted());
    assert!(!d.counts_allocations());
    assert_eq!(d.total().allocs, 0);
}

static EVALUATED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn costly() -> u32 {
    EVALUATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn a_log_with_tracing_off_evaluates_nothing() {
    assert!(std::env::var_os("RIVET_TRACE").is_none(), "run without RIVET_TRACE");
    staging_log!("value {}", costly());
    staging_log!(crate = "rivet_probe", "value {}", costly());
    assert_eq!(EVALUATED.load(std::sync::atomic::Ordering::Relaxed), 0);
}
