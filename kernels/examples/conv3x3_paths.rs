//! A 3x3 stride-1 convolution on its float32 paths, Winograd F(2x2, 3x3), F(4x4, 3x3)
//! and the direct kernel (with its zero-padded copy), in one process, interleaved (the
//! machines here drift 30% between runs): `cargo run --release -p rivet-kernels --example
//! conv3x3_paths [CIN COUT HW]...` (default YOLO's 32 -> 32 on 40x40). For each layer,
//! the median microseconds a call of each path over 21 rounds, and the path the plugin
//! takes (`winograd::fits`, `winograd::side`).

use rivet_kernels::direct::{pack_filters, pad_planes, source, Direct};
use rivet_kernels::nn::Epilogue;
use rivet_kernels::winograd::{self, Filters, Scratch, Winograd};

#[path = "timing/mod.rs"]
mod timing;

fn main() {
    let d: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let layers: Vec<[usize; 3]> =
        if d.len() >= 3 { d.chunks_exact(3).map(|l| [l[0], l[1], l[2]]).collect() } else { vec![[32, 32, 40]] };
    for [cin, cout, hw] in layers {
        let g = timing::square_window(hw, 3, 1, 1);
        let x: Vec<f32> = (0..cin * hw * hw).map(|i| ((i * 7919) % 1000) as f32 / 1000.0 - 0.5).collect();
        let w: Vec<f32> = (0..cout * cin * 9).map(|i| ((i * 104729) % 1000) as f32 / 1000.0 - 0.5).collect();
        let bias = vec![0.1f32; cout];
        let epilogue = Epilogue { bias: rivet_kernels::Bias::Rows(&bias), ..Epilogue::default() };
        let (mut f2, mut f4) = (Filters::default(), Filters::default());
        winograd::transform_filters_side(&w, cout, cin, &g, 2, &mut f2);
        winograd::transform_filters_side(&w, cout, cin, &g, 4, &mut f4);
        let wino2 = Winograd { x: &x, g: &g, filters: &f2, epilogue };
        let wino4 = Winograd { x: &x, g: &g, filters: &f4, epilogue };
        let (th2, th4) = (wino2.tiles()[0], wino4.tiles()[0]);
        let mut s = Scratch::default();
        let mut packed = Vec::new();
        pack_filters(&w, cout, 1, cin * 9, &mut packed);
        let mut aligned = rivet_kernels::lines::Aligned::default();
        aligned.assign(&packed);
        let src = source(&g, cin);
        let (mut padded, mut carry) = (Vec::new(), Vec::new());
        let (mut yw, mut yd) = (vec![0.0f32; cout * g.positions()], vec![0.0f32; cout * g.positions()]);
        let (mut tw, mut t4, mut td) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..21 {
            tw.push(timing::best_us(1, 5, || assert!(wino2.run(0..th2, &mut yw, &mut s))));
            t4.push(timing::best_us(1, 5, || assert!(wino4.run(0..th4, &mut yw, &mut s))));
            td.push(timing::best_us(1, 5, || {
                pad_planes(&x, cin, &g, src, &mut padded);
                let run = Direct {
                    x: &padded,
                    src,
                    cg: cin,
                    g: &g,
                    w: &aligned,
                    bias: Some(&bias),
                    epilogue: Epilogue::default(),
                };
                run.run(0..cout, &mut yd, &mut carry);
            }));
        }
        let median = |t: &mut Vec<f64>| {
            t.sort_by(f64::total_cmp);
            t[t.len() / 2]
        };
        let (w_us, w4_us, d_us) = (median(&mut tw), median(&mut t4), median(&mut td));
        let chosen = match (winograd::fits(&g, cin, cout), winograd::side(&g, cin, cout)) {
            (false, _) => "direct",
            (true, 2) => "F2",
            _ => "F4",
        };
        println!(
            "{cin:4}->{cout:<4} on {hw:3}: F2 {w_us:8.1} us, F4 {w4_us:8.1} us, direct {d_us:8.1} us; F4/F2 {:.2}, F2/direct {:.2} (takes {chosen})",
            w4_us / w_us,
            w_us / d_us
        );
    }
}
