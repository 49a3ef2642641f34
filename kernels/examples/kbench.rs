//! Kernel-only timing of every unary op (and Add) at every supported level:
//! `cargo run --release -p rivet-kernels --example kbench [FILTER] [--mixed]`.
//!
//! Prints ns per element (best of several batches) at 4 Ki and 1 Mi elements.
//! Inputs are in [0.1, 3) like the A/B benchmark's, or in [-6, 6) with
//! `--mixed`.

use rivet_kernels::{binary_f32_at, BinaryOp, Broadcast, Level, UnaryOp};
use std::time::Instant;

fn ops() -> Vec<(&'static str, UnaryOp)> {
    use UnaryOp::*;
    vec![
        ("Relu", Relu),
        ("Sigmoid", Sigmoid),
        ("Tanh", Tanh),
        ("Erf", Erf),
        ("Exp", Exp),
        ("Log", Log),
        ("Sqrt", Sqrt),
        ("Abs", Abs),
        ("Neg", Neg),
        ("Reciprocal", Reciprocal),
        ("Floor", Floor),
        ("Ceil", Ceil),
        ("Softplus", Softplus),
        ("Softsign", Softsign),
        ("HardSigmoid", HardSigmoid { alpha: 0.2, beta: 0.5 }),
        ("HardSwish", HardSwish),
        ("LeakyRelu", LeakyRelu { alpha: 0.01 }),
        ("Elu", Elu { alpha: 1.0 }),
        ("Selu", Selu { alpha: 1.673_263_2, gamma: 1.050_701 }),
        ("Celu", Celu { alpha: 1.0 }),
        ("ThresholdedRelu", ThresholdedRelu { alpha: 1.0 }),
        ("Mish", Mish),
        ("Gelu", Gelu),
        ("GeluTanh", GeluTanh),
    ]
}

/// Best ns per element of `f` over batches of about 2 ms.
fn time(n: usize, mut f: impl FnMut()) -> f64 {
    let reps = (2_000_000 / n).max(1);
    let mut best = f64::INFINITY;
    for _ in 0..15 {
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / (reps * n) as f64);
    }
    best
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mixed = args.iter().any(|a| a == "--mixed");
    let filter = args.iter().find(|a| !a.starts_with("--")).cloned().unwrap_or_default().to_lowercase();
    let levels = Level::supported();
    print!("{:<16}", "op");
    for n in ["4k", "1m"] {
        for l in &levels {
            print!("{:>12}", format!("{}/{n}", l.name()));
        }
    }
    println!("   (ns/element)");
    let (lo, hi) = if mixed { (-6.0, 6.0) } else { (0.1, 3.0) };
    let input = |n: usize| -> Vec<f32> {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                (lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)) as f32
            })
            .collect()
    };
    for (name, op) in ops() {
        if !name.to_lowercase().contains(&filter) {
            continue;
        }
        print!("{name:<16}");
        for n in [4096, 1 << 20] {
            let x = input(n);
            let mut y = vec![0.0f32; n];
            for &l in &levels {
                print!("{:>12.3}", time(n, || op.apply_at(l, &x, &mut y)));
            }
        }
        println!();
    }
    if "add".contains(&filter) {
        print!("{:<16}", "Add");
        for n in [4096, 1 << 20] {
            let (a, b) = (input(n), input(n));
            let mut y = vec![0.0f32; n];
            let plan = Broadcast::new(&[n], &[n]).expect("same shape");
            for &l in &levels {
                print!("{:>12.3}", time(n, || binary_f32_at(l, BinaryOp::Add, &plan, &a, &b, &mut y, 0)));
            }
        }
        println!();
        // Bytes moved per second by Add (read a and b, write y) against a
        // memcpy of the same size (read x, write y), alternating, best of
        // each, at 1 Mi on the detected level.
        let n = 1 << 20;
        let (a, b) = (input(n), input(n));
        let mut y = vec![0.0f32; n];
        let plan = Broadcast::new(&[n], &[n]).expect("same shape");
        let (mut add, mut copy) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..5 {
            add = add.min(time(n, || binary_f32_at(Level::detected(), BinaryOp::Add, &plan, &a, &b, &mut y, 0)));
            copy = copy.min(time(n, || y.copy_from_slice(std::hint::black_box(&a))));
        }
        println!(
            "Add/memcpy bytes per second at 1 Mi: {:.0}% ({:.1} vs {:.1} GB/s)",
            100.0 * (12.0 / add) / (8.0 / copy),
            12.0 / add,
            8.0 / copy
        );
        print!("{:<16}", "memcpy");
        for n in [4096, 1 << 20] {
            let x = input(n);
            let mut y = vec![0.0f32; n];
            for _ in &levels {
                print!("{:>12.3}", time(n, || y.copy_from_slice(std::hint::black_box(&x))));
            }
        }
        println!();
    }
}
