//! Kernel-only timing of the integer depthwise convolution (`qgemm::depthwise`) on
//! MobileNetV2's int8 layers: `cargo run --release -p rivet-kernels --example qdw_bench`.
//! Prints us per call (median of 31) for all of a layer's channels, uint8 in and out, and a
//! hash of the output's bytes (to compare builds); with `I32` set, also the i32 sums' time.
use rivet_kernels::qgemm::depthwise::{DwRequants, QDepthwise, QDwPlanes};
#[path = "timing/mod.rs"]
mod timing;

fn main() {
    if !rivet_kernels::qgemm::depthwise::supported() {
        println!("no AVX-512 VNNI with VBMI here");
        return;
    }
    let layers = [
        (32, 112, 1),
        (96, 112, 2),
        (144, 56, 1),
        (144, 56, 2),
        (192, 28, 1),
        (192, 28, 2),
        (384, 14, 1),
        (576, 14, 1),
        (576, 14, 2),
        (960, 7, 1),
    ];
    for (c, hw, s) in layers {
        let out = (hw + 2 - 3) / s + 1;
        let g = timing::square_window(hw, 3, s, 1);
        assert_eq!(g.out[2], out);
        let (plane, p) = (hw * hw, out * out);
        let x: Vec<u8> = (0..c * plane).map(|i| (i * 7 % 251) as u8).collect();
        let mut dw = QDepthwise::new();
        assert!(dw.pack(c, &g, |ch, t| ((ch * 9 + t) * 5 % 241) as i32 - 120));
        let scales: Vec<f32> = (0..c).map(|ch| 0.001 + ch as f32 * 1e-6).collect();
        let bias: Vec<i32> = (0..c).map(|ch| ch as i32 * 3 - 100).collect();
        let rq = DwRequants { bias: Some(&bias), scales: &scales, zy: 7 };
        let mut y = vec![0u8; c * p];
        let mut scratch = Vec::new();
        let t = timing::median_us(|| dw.planes(&x, 3, 0..c, c, &g, QDwPlanes::U8(&mut y, rq), &mut scratch));
        if std::env::var_os("I32").is_some() {
            let mut y32 = vec![0i32; c * p];
            let t32 = timing::median_us(|| dw.planes(&x, 3, 0..c, c, &g, QDwPlanes::I32(&mut y32), &mut scratch));
            println!("  i32 sums: {t32:7.1} us");
        }
        let hash = timing::hash_bytes(&y);
        println!("{c:4} ch {hw:3}x{hw:<3} s{s}: {t:7.1} us  {:6.1} ns a plane  {hash:016x}", t * 1e3 / c as f64);
    }
}
