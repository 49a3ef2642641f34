//! Kernel-only timing of one LSTM direction (the project's lstm_tiny: 32 steps, batch 2,
//! 64 inputs and hidden units, or `seq batch input hidden` as arguments), with W and R
//! packed once as for constant weights:
//! `cargo run --release -p rivet-kernels --example rnn_bench [seq batch input hidden]`.

use rivet_kernels::rnn::{Act, Cell, PackedWeights, Recurrence, RnnScratch};
use std::time::Instant;

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (seq, batch, input, hidden) = match args[..] {
        [s, b, i, h] => (s, b, i, h),
        _ => (32, 2, 64, 64),
    };
    let g = 4 * hidden;
    let v = |n: usize, s: usize| -> Vec<f32> {
        (0..n).map(|i| (((i * 7919 + s) % 1000) as f32 / 1000.0 - 0.5) * 0.2).collect()
    };
    let (x, w, r, b) = (v(seq * batch * input, 1), v(g * input, 2), v(g * hidden, 3), v(2 * g, 4));
    let lens = vec![seq; batch];
    let mut packed = PackedWeights::default();
    packed.pack(Cell::Lstm { input_forget: false }, input, hidden, &w, &r);
    let rec = Recurrence {
        cell: Cell::Lstm { input_forget: false },
        seq,
        batch,
        input,
        hidden,
        batch_major: false,
        x: &x,
        w: &w,
        r: &r,
        bias: Some(&b),
        peephole: None,
        lens: &lens,
        reverse: false,
        acts: [Act::Sigmoid, Act::Tanh, Act::Tanh],
        clip: None,
        packed: Some(&packed),
    };
    let mut s = RnnScratch::default();
    let mut best = f64::MAX;
    for _ in 0..7 {
        let iters = 200;
        let t = Instant::now();
        for _ in 0..iters {
            s.reset_state(batch, hidden);
            rec.run(&mut s, None);
        }
        best = best.min(t.elapsed().as_secs_f64() / iters as f64);
    }
    println!("LSTM seq {seq} batch {batch} {input}->{hidden}: {:.1} us per direction", best * 1e6);
}
