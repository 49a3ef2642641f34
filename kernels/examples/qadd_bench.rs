//! Kernel-only timing of the quantized addition (com.microsoft QLinearAdd on equal
//! shapes, `qgemm::add_requantize`): dividing by C's scale against multiplying by its
//! checked reciprocal, interleaved in one process: `cargo run --release -p rivet-kernels
//! --example qadd_bench [N]` (default 64 x 56 x 56, ResNet-18's first additions). Prints
//! the median microseconds of each, the check's, and whether the outputs are the same.

use rivet_kernels::qgemm::{add_reciprocal, add_requantize};
use std::time::Instant;

#[path = "timing/mod.rs"]
mod timing;

fn main() {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(64 * 56 * 56);
    let a: Vec<u8> = (0..n).map(|i| (i * 7 % 251) as u8).collect();
    let b: Vec<u8> = (0..n).map(|i| (i * 13 % 241) as u8).collect();
    let (pa, pb, py) = ((0.0213f32, 3), (0.0187f32, 131), (0.0342f32, 7));
    let t = Instant::now();
    let recip = add_reciprocal::<u8>(pa, pb, py);
    let check = t.elapsed().as_secs_f64() * 1e6;
    let (mut y0, mut y1) = (vec![0u8; n], vec![0u8; n]);
    let (mut td, mut tr) = (Vec::new(), Vec::new());
    for _ in 0..21 {
        td.push(timing::best_us(1, 20, || add_requantize(&a, &b, pa, pb, py, None, &mut y0)));
        tr.push(timing::best_us(1, 20, || add_requantize(&a, &b, pa, pb, py, recip, &mut y1)));
    }
    let median = |t: &mut Vec<f64>| {
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    println!(
        "{n} elements: divided {:.1} us, by the reciprocal {:.1} us (check {check:.0} us, reciprocal {recip:?}), same outputs: {}",
        median(&mut td),
        median(&mut tr),
        y0 == y1
    );
}
