//! Kernel-only timing of a quantized convolution on the phase planes (QLinearConv's
//! path): `cargo run --release -p rivet-kernels --example qconv_bench [C M HW K S]`
//! (input channels, output channels, input height = width, kernel, stride; default the
//! 64 -> 64 3x3 of ResNet-18's first stage). Prints the median microseconds of the
//! planes' packing and of the product requantized to u8, and the product's GOP/s; then
//! the product into outputs out of cache (eight, in turn), as a model's layer writes them.
//! `RIVET_AMX=off` for the VNNI tiles.

use rivet_kernels::qgemm::{
    conv_nhwc, conv_taps, from_channels_last, to_channels_last, ConvPlanes, ConvTaps, QOut, QPackedA, QPackedB, Requant,
};

#[path = "timing/mod.rs"]
mod timing;

use timing::median_us;

fn main() {
    let d: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (c, m, hw, k, s) = match d[..] {
        [c, m, hw, k, s] => (c, m, hw, k, s),
        _ => (64, 64, 56, 3, 1),
    };
    let out = (hw + 2 * (k / 2) - k) / s + 1;
    let g = timing::square_window(hw, k, s, k / 2);
    assert_eq!(g.out[2], out);
    let x: Vec<u8> = (0..c * hw * hw).map(|i| (i * 7 % 251) as u8).collect();
    let w: Vec<i8> = (0..m * c * k * k).map(|i| ((i * 5 % 241) as i32 - 120) as i8).collect();
    let mut a = QPackedA::new();
    a.pack_conv_weights(&w, m, c, k * k, &[0]);
    let scale = vec![0.0001f32; m];
    let mut y = vec![0u8; m * out * out];
    let mut planes = ConvPlanes::new();
    let pack = median_us(|| planes.pack(&x, c, &g, 3));
    let rq = Requant { scale: &scale, per_row: true, bias: None, zy: 7 };
    let product = median_us(|| planes.product(&a, QOut::U8(&mut y, rq)));
    // The same into outputs that are out of cache (eight, used in turn).
    let mut ys = vec![vec![0u8; m * out * out]; 8];
    let mut turn = 0;
    let cold = median_us(|| {
        turn = (turn + 1) % ys.len();
        planes.product(&a, QOut::U8(&mut ys[turn], rq))
    });
    let ops = 2.0 * (m * c * k * k * out * out) as f64;
    println!(
        "{c}->{m} {k}x{k}/{s} on {hw}: pack {pack:.1} us, product {product:.1} us ({:.0} GOP/s)",
        ops / product / 1e3
    );
    println!("  into cold outputs: product {cold:.1} us");
    // Channels last: the same values, the weights packed as B, the positions as rows.
    let xt: Vec<u8> = (0..c * hw * hw).map(|i| x[(i % c) * hw * hw + i / c]).collect();
    let mut b = QPackedB::new();
    b.pack_nhwc_weights(&w, m, c, k * k, &[0]);
    let mut scratch = QPackedA::new();
    let rq = Requant { scale: &scale, per_row: false, bias: None, zy: 7 };
    let p = out * out;
    let nhwc = median_us(|| conv_nhwc(&xt, c, &g, 3, &b, 0..p, QOut::U8(&mut y, rq), &mut scratch));
    println!("  channels last: product with its im2col {nhwc:.1} us ({:.0} GOP/s)", ops / nhwc / 1e3);
    if ConvTaps::fits(&g, c) {
        let mut taps = ConvTaps::new();
        taps.prepare(&g, c);
        let direct = median_us(|| conv_taps(&xt, 3, &taps, &b, 0..p, QOut::U8(&mut y, rq), &mut scratch));
        println!("  channels last, through its taps: {direct:.1} us ({:.0} GOP/s)", ops / direct / 1e3);
    }
    let im2col = median_us(|| scratch.pack_nhwc_rows(&xt, c, &g, 3, 0..p, false));
    println!("  its im2col alone (every row at once): {im2col:.1} us");
    let mut xt2 = xt.clone();
    let mut yt = vec![0u8; m * p];
    let tin = median_us(|| to_channels_last(&x, c, hw * hw, &mut xt2));
    let tout = median_us(|| from_channels_last(&y, m, p, &mut yt));
    println!("  its transposes: input {tin:.1} us, output {tout:.1} us");
}
