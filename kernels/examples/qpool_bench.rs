//! Kernel-only timing of the 8-bit max pool (`conv::max_pool_ints`) on the windows the
//! int8 CNNs have: `cargo run --release -p rivet-kernels --example qpool_bench`. Prints
//! us per call (median of 31) and a hash of the output (to compare builds).
use rivet_kernels::conv::max_pool_ints;
#[path = "timing/mod.rs"]
mod timing;

fn main() {
    // (planes, input size, kernel, stride, padding): ResNet-18's, SqueezeNet's, and a
    // 3x3 of stride 1 (Inception's).
    for (c, hw, k, s, p) in
        [(64, 112, 3, 2, 1), (64, 111, 3, 2, 0), (128, 55, 3, 2, 0), (192, 27, 3, 1, 1), (64, 56, 2, 2, 0)]
    {
        let out = (hw + 2 * p - k) / s + 1;
        let g = timing::square_window(hw, k, s, p);
        assert_eq!(g.out[2], out);
        let x: Vec<u8> = (0..c * hw * hw).map(|i| (i * 7919 % 251) as u8).collect();
        let mut y = vec![0u8; c * out * out];
        let mut row = Vec::new();
        let t = timing::median_us(|| max_pool_ints(&x, c, &g, &mut y, &mut row));
        let hash = timing::hash_bytes(&y);
        println!("{c:4} x {hw:3}x{hw:<3} k{k} s{s} p{p}: {t:7.1} us  {hash:016x}");
    }
}
