//! The phase planes' convolution product against the same tiles on other B layouts, in
//! one process, interleaved (the machines here drift 30% between runs):
//! `cargo run --release -p rivet-kernels --example qconv_paths [C M HW [K]]` (input channels,
//! output channels, input height = width, kernel (3); padded to keep the size; default ResNet-18's 64 ->
//! 64 on 56x56). Prints the median microseconds of 31 rounds of: the product on the
//! planes (u8 and i32 outputs), on a pre-packed im2col, the planes' packing, plain packed
//! operands of the same shape, and the panels' copies alone (a product of no rows).
use rivet_kernels::conv::Window3d;
use rivet_kernels::qgemm::{qgemm, ConvPlanes, QOut, QPackedA, QPackedB, Requant};
use std::time::Instant;
fn main() {
    let d: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (c, m, hw, kk) = match d[..] {
        [c, m, hw] => (c, m, hw, 3),
        [c, m, hw, kk] => (c, m, hw, kk),
        _ => (64, 64, 56, 3),
    };
    let g = Window3d {
        input: [1, hw, hw],
        out: [1, hw, hw],
        kernel: [1, kk, kk],
        stride: [1; 3],
        dilation: [1; 3],
        pad_begin: [0, kk / 2, kk / 2],
    };
    let x: Vec<u8> = (0..c * hw * hw).map(|i| (i * 7 % 251) as u8).collect();
    let w: Vec<i8> = (0..m * c * kk * kk).map(|i| ((i * 5 % 241) as i32 - 120) as i8).collect();
    let mut a = QPackedA::new();
    a.pack_conv_weights(&w, m, c, kk * kk, &[0]);
    let scale = vec![0.0001f32; m];
    let n = hw * hw;
    let mut y = vec![0u8; m * n];
    let mut y32 = vec![0i32; m * n];
    let mut planes = ConvPlanes::new();
    planes.pack(&x, c, &g, 3);
    let mut im = QPackedB::new();
    im.pack_conv_input(&x, c, &g, 3);
    let rq = Requant { scale: &scale, per_row: true, bias: None, zy: 7 };
    let ops = 2.0 * (m * c * kk * kk * n) as f64;
    let (k, aa, bb) = (
        c * kk * kk,
        (0..m * c * kk * kk).map(|i| (i * 7 % 251) as u8).collect::<Vec<u8>>(),
        (0..c * kk * kk * n).map(|i| ((i * 5 % 241) as i32 - 120) as i8).collect::<Vec<i8>>(),
    );
    let mut pa = QPackedA::new();
    pa.pack(&aa, m, k, k, &[17]);
    let mut pb = QPackedB::new();
    pb.pack(&bb, k, n, n, &[3]);
    let names = [
        "planes u8",
        "planes i32",
        "im2col-packed u8",
        "im2col-packed i32",
        "pack planes",
        "plain gemm i32",
        "convA x plainB",
        "plainA x im2col",
        "panel copies only",
    ];
    let mut scratch = rivet_kernels::qgemm::ProductScratch::default();
    let mut res = vec![vec![]; names.len()];
    for _ in 0..31 {
        for (i, r) in res.iter_mut().enumerate() {
            let t = Instant::now();
            match i {
                0 => planes.product(&a, QOut::U8(&mut y, rq)),
                1 => planes.product(&a, QOut::I32(&mut y32)),
                2 => qgemm(&a, &im, 0..n, QOut::U8(&mut y, rq), n),
                3 => qgemm(&a, &im, 0..n, QOut::I32(&mut y32), n),
                4 => planes.pack(&x, c, &g, 3),
                5 => qgemm(&pa, &pb, 0..n, QOut::I32(&mut y32), n),
                6 => qgemm(&a, &pb, 0..n, QOut::I32(&mut y32), n),
                7 => qgemm(&pa, &im, 0..n, QOut::I32(&mut y32), n),
                _ => planes.product_rows(&a, 0..0, QOut::I32(&mut y32), &mut scratch),
            }
            r.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    for (i, r) in res.iter_mut().enumerate() {
        r.sort_by(f64::total_cmp);
        println!("{:20} {:8.1} us  {:6.1} GOP/s", names[i], r[15], ops / r[15] / 1e3);
    }
}
