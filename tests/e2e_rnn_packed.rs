//! RNN, GRU and LSTM with constant W and R (initializers), which Rivet packs once and
//! shares between Runs: the outputs are bit-identical to the same layer with W and R fed
//! as graph inputs (packed per Run), from a fresh session whose first Runs race from
//! several threads at once, over batches and sequences of different lengths.

mod common;

use ort::value::DynValue;
use rivet::harness::{self, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, FLOAT};
use rivet::ort_extra::{run_shared, RawOutput};

const HIDDEN: i64 = 24;
const INPUT: i64 = 10;

fn vals(seed: u64, n: usize) -> Vec<f32> {
    harness::values(seed, n, -0.6, 0.6).into_iter().map(|v| v as f32).collect()
}

/// The weights of a bidirectional layer of `gates` gates: W, R, B.
fn weights(gates: i64) -> [(&'static str, Vec<i64>, Vec<f32>); 3] {
    let gh = gates * HIDDEN;
    let dims = [vec![2, gh, INPUT], vec![2, gh, HIDDEN], vec![2, 2 * gh]];
    let n = |d: &[i64]| d.iter().product::<i64>() as usize;
    let [w, r, b] = dims;
    let (wv, rv, bv) = (vals(1, n(&w)), vals(2, n(&r)), vals(3, n(&b)));
    [("W", w, wv), ("R", r, rv), ("B", b, bv)]
}

/// X `[S, N, INPUT]` symbolic; W, R, B initializers (`constant`) or graph inputs.
fn model(op: &str, gates: i64, constant: bool) -> Vec<u8> {
    let mut m = ModelBuilder::new(14)
        .input("X", FLOAT, &[Dim::from("S"), Dim::from("N"), Dim::from(INPUT)])
        .output("Y", FLOAT, None);
    for (name, dims, data) in weights(gates) {
        m = if constant {
            m.initializer(name, &dims, data)
        } else {
            m.input(name, FLOAT, &dims.iter().map(|&d| Dim::from(d)).collect::<Vec<_>>())
        };
    }
    let attrs = [("hidden_size", Attr::Int(HIDDEN)), ("direction", Attr::Str("bidirectional".into()))];
    m.node_with(op, "rec", &["X", "W", "R", "B"], &["Y"], &attrs).build()
}

/// X for `seq` steps of `batch`, and (for the model with weight inputs) W, R, B.
fn inputs(gates: i64, seq: usize, batch: usize, seed: u64, with_weights: bool) -> Vec<(String, DynValue)> {
    let mut t =
        vec![HostTensor::f32("X", &[seq as i64, batch as i64, INPUT], vals(seed, seq * batch * INPUT as usize))];
    if with_weights {
        t.extend(weights(gates).map(|(name, dims, data)| HostTensor::f32(name, &dims, data)));
    }
    harness::prepare(&t).unwrap().into_values()
}

fn run(session: &ort::session::Session, values: &[(String, DynValue)]) -> Vec<RawOutput> {
    let refs: Vec<(&str, &DynValue)> = values.iter().map(|(n, v)| (n.as_str(), v)).collect();
    run_shared(session, &refs, &["Y"]).expect("run")
}

fn same(a: &[RawOutput], b: &[RawOutput]) -> bool {
    a[0].shape == b[0].shape && a[0].data.iter().zip(&b[0].data).all(|(x, y)| x.to_bits() == y.to_bits())
}

#[test]
fn constant_weights_packed_once_give_the_per_run_bits_under_concurrent_first_runs() {
    common::env();
    for (op, gates) in [("LSTM", 4), ("GRU", 3), ("RNN", 1)] {
        let cases: Vec<(usize, usize, u64)> = (0..6).map(|t| (1 + t % 4, 1 + (t * 3) % 5, 10 + t as u64)).collect();
        // The bits with W and R packed per Run.
        let per_run = common::rivet_session(&model(op, gates, false));
        let want: Vec<Vec<RawOutput>> =
            cases.iter().map(|&(s, n, seed)| run(&per_run, &inputs(gates, s, n, seed, true))).collect();
        // A fresh session: every thread's first Run races to pack the weights.
        let packed = common::rivet_session(&model(op, gates, true));
        let feeds: Vec<_> = cases.iter().map(|&(s, n, seed)| inputs(gates, s, n, seed, false)).collect();
        std::thread::scope(|scope| {
            for (t, values) in feeds.iter().enumerate() {
                let (packed, want) = (&packed, &want[t]);
                scope.spawn(move || {
                    for i in 0..50 {
                        assert!(same(&run(packed, values), want), "{op} thread {t} Run {i}: bits differ");
                    }
                });
            }
        });
    }
}
