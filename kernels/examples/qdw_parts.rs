//! Timing of the quantized depthwise convolution's float route, step by step:
//! `cargo run --release -p rivet-kernels --example qdw_parts [C HW STRIDE]` (channels,
//! input height = width, stride of the 3x3 window; default MobileNetV2's 96 channels on
//! 112x112 at stride 2). The whole tensor at once, out of cache: the op runs it in chunks
//! that stay in L2.
#[path = "timing/mod.rs"]
mod timing;
fn main() {
    let d: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (c, hw, s) = match d[..] {
        [c, hw, s] => (c, hw, s),
        _ => (96, 112, 2),
    };
    let out = (hw + 2 - 3) / s + 1;
    let g = timing::square_window(hw, 3, s, 1);
    assert_eq!(g.out[2], out);
    let plane = hw * hw;
    let p = out * out;
    let x: Vec<u8> = (0..c * plane).map(|i| (i * 7 % 251) as u8).collect();
    let wf: Vec<f32> = (0..c * 9).map(|i| ((i * 5 % 241) as i32 - 120) as f32).collect();
    let mut xf = vec![0f32; c * plane];
    let mut yf = vec![0f32; c * p];
    let mut y = vec![0u8; c * p];
    let mut scratch = Vec::new();
    let none = rivet_kernels::Epilogue::default();
    let t1 = timing::median_us(|| rivet_kernels::qgemm::dequantize(&x, 1.0, 3, &mut xf));
    let t2 = timing::median_us(|| {
        rivet_kernels::depthwise::depthwise_planes(&xf, &wf, None, 0..c, c, &g, &mut yf, &none, &mut scratch)
    });
    let t3 = timing::median_us(|| {
        for ch in 0..c {
            rivet_kernels::qgemm::requantize_float_sums(
                &yf[ch * p..(ch + 1) * p],
                5,
                0.001,
                7,
                &mut y[ch * p..(ch + 1) * p],
            )
        }
    });
    println!("{c} ch {hw}x{hw} s{s}: dequantize {t1:.1} us, float depthwise {t2:.1} us, requantize {t3:.1} us");
}
