//! Kernel-only timing of the fused attention step (`attention::chain`) and of its parts
//! run apart (packing K and V, Q · K^T with the scale, Softmax, P · V), per Run of `H`
//! heads of `S` tokens by `D` over `L` keys (default `S`; K stored as the exporters leave
//! it, `[L, D]`): `cargo run --release -p rivet-kernels --example att_parts H S D [L]`
//! (ViT-S: 6 197 64; a decode step over 64 keys: 8 1 32 64).
use rivet_kernels::attention::chain::{Chain, ChainScratch};
use rivet_kernels::nn::{self, Epilogue, Gemm, GemmScratch, PackedB, Scale};
use std::time::Instant;

fn main() {
    let d: Vec<usize> = std::env::args().skip(1).map(|s| s.parse().expect("a number")).collect();
    let (h, s, dd, l) = match d[..] {
        [h, s, dd] => (h, s, dd, s),
        [h, s, dd, l] => (h, s, dd, l),
        _ => (6, 197, 64, 197),
    };
    let q: Vec<f32> = (0..h * s * dd).map(|i| ((i * 7 % 13) as f32 - 6.0) * 0.1).collect();
    let k: Vec<f32> = (0..h * l * dd).map(|i| ((i * 5 % 11) as f32 - 5.0) * 0.1).collect();
    let v: Vec<f32> = (0..h * l * dd).map(|i| ((i * 3 % 7) as f32 - 3.0) * 0.1).collect();
    let mut out = vec![0.0f32; h * s * dd];
    let (q_at, k_at, v_at) = (move |i: usize| i * s * dd, move |i: usize| i * l * dd, move |i: usize| i * l * dd);
    let chain = Chain {
        count: h,
        s,
        l,
        d: dd,
        dv: dd,
        q: &q,
        k: &k,
        v: &v,
        q_at: &q_at,
        k_at: &k_at,
        v_at: &v_at,
        trans_k: true,
        trans_v: false,
        scale: Some(Scale::Mul(0.125)),
        mask: None,
    };
    let mut cs = ChainScratch::default();
    let items = chain.items();
    let mut gs = GemmScratch::new();
    let mut pk = PackedB::new();
    let mut pv = PackedB::new();
    let mut sc = vec![0.0f32; s * l];
    let mut pr = vec![0.0f32; s * l];
    for round in 0..5 {
        let reps = 50;
        let t = Instant::now();
        for _ in 0..reps {
            chain.run(0..items, &mut out, &mut cs);
        }
        let whole = t.elapsed().as_secs_f64() / reps as f64 * 1e6;
        let (mut tp, mut tqk, mut tsm, mut tpv) = (0.0, 0.0, 0.0, 0.0);
        for _ in 0..reps {
            for i in 0..h {
                let t = Instant::now();
                nn::pack_b(&mut pk, s, l, dd, &k[i * l * dd..][..l * dd], true);
                nn::pack_b(&mut pv, s, dd, l, &v[i * l * dd..][..l * dd], false);
                tp += t.elapsed().as_secs_f64();
                let t = Instant::now();
                let ep = Epilogue { scale: Some(Scale::Mul(0.125)), ..Epilogue::default() };
                Gemm {
                    packed_b: Some(&pk),
                    epilogue: ep,
                    ..Gemm::new(s, l, dd, &q[i * s * dd..][..s * dd], false, &k[i * l * dd..][..l * dd], true)
                }
                .compute(&mut gs, 0..s, 0..l, &mut sc);
                tqk += t.elapsed().as_secs_f64();
                let t = Instant::now();
                nn::softmax(&sc, &mut pr, s, l, 1, false);
                tsm += t.elapsed().as_secs_f64();
                let t = Instant::now();
                Gemm { packed_b: Some(&pv), ..Gemm::new(s, dd, l, &pr, false, &v[i * l * dd..][..l * dd], false) }
                    .compute(&mut gs, 0..s, 0..dd, &mut out[i * s * dd..][..s * dd]);
                tpv += t.elapsed().as_secs_f64();
            }
        }
        let f = 1e6 / reps as f64;
        println!(
            "round {round}: chain {whole:.1} us | pack {:.1} qk {:.1} softmax {:.1} pv {:.1}",
            tp * f,
            tqk * f,
            tsm * f,
            tpv * f
        );
    }
}
