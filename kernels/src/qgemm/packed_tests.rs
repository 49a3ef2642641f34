use super::nhwc::ConvTaps;
use super::packed::{portable, Place};
use super::*;

/// A reproducible pseudo-random value in `0..256`.
fn byte(seed: &mut u64) -> i32 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (*seed >> 56) as i32
}

fn naive(a: &[i32], b: &[i32], (m, n, k): (usize, usize, usize), za: &[i32], zb: &[i32]) -> Vec<i32> {
    let at = |z: &[i32], i: usize| if z.len() == 1 { z[0] } else { z[i] };
    let mut c = vec![0; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).map(|p| (a[i * k + p] - at(za, i)) * (b[p * n + j] - at(zb, j))).sum();
        }
    }
    c
}

/// Runs one case with operands of types `A` and `B`, on the dispatched kernel and on the
/// portable one, over the whole width and over a split at a panel.
fn case<A: Q8, B: Q8>(m: usize, n: usize, k: usize, per_row: bool, per_col: bool, seed: &mut u64) {
    let val = |seed: &mut u64, t_min: i32| byte(seed) + t_min;
    let a: Vec<i32> = (0..m * k).map(|_| val(seed, A::MIN)).collect();
    let b: Vec<i32> = (0..k * n).map(|_| val(seed, B::MIN)).collect();
    let za: Vec<i32> = (0..if per_row { m } else { 1 }).map(|_| val(seed, A::MIN)).collect();
    let zb: Vec<i32> = (0..if per_col { n } else { 1 }).map(|_| val(seed, B::MIN)).collect();
    let (ta, tb): (Vec<A>, Vec<B>) =
        (a.iter().map(|&v| A::from_i32(v)).collect(), b.iter().map(|&v| B::from_i32(v)).collect());
    let mut pa = QPackedA::new();
    pa.pack(&ta, m, k, k, &za);
    let mut pb = QPackedB::new();
    pb.pack(&tb, k, n, n, &zb);
    let want = naive(&a, &b, (m, n, k), &za, &zb);
    let label = format!("{m}x{n}x{k} {} x {} per_row {per_row} per_col {per_col}", A::MIN, B::MIN);
    let mut c = vec![i32::MIN; m * n];
    qgemm(&pa, &pb, 0..n, QOut::I32(&mut c), n);
    assert_eq!(c, want, "dispatched {label}");
    let mut c = vec![i32::MIN; m * n];
    portable(&pa, 0..m, &pb, 0..n, &mut QOut::I32(&mut c), Place { ldc: n, kept: None });
    assert_eq!(c, want, "portable {label}");
    if n > NR {
        // Two column blocks, each into its own part of C (stride n).
        let mut c = vec![i32::MIN; m * n];
        qgemm(&pa, &pb, 0..NR, QOut::I32(&mut c), n);
        qgemm(&pa, &pb, NR..n, QOut::I32(&mut c[NR..]), n);
        assert_eq!(c, want, "split {label}");
    }
}

#[test]
fn packed_products_match_the_definition_for_every_signedness_and_zero_point_layout() {
    let mut seed = 7;
    // (29, 250, 256): blocks of three panels (96 columns) over three strips, the last
    // block's last panel partial.
    let shapes = [
        (1, 1, 1),
        (1, 40, 3),
        (2, 33, 65),
        (3, 17, 4),
        (14, 32, 64),
        (15, 70, 129),
        (29, 64, 300),
        (5, 100, 1000),
        (29, 250, 256),
        // On AMX-INT8 tiles where the CPU has them (8 rows or more, deeper than 128):
        // two strips and one, whole and partial chunks, several panels a configuration.
        (28, 130, 576),
        (43, 300, 129),
    ];
    for &(m, n, k) in &shapes {
        for (per_row, per_col) in [(false, false), (true, false), (false, true), (true, true)] {
            case::<u8, i8>(m, n, k, per_row, per_col, &mut seed);
            case::<u8, u8>(m, n, k, per_row, per_col, &mut seed);
            case::<i8, i8>(m, n, k, per_row, per_col, &mut seed);
            case::<i8, u8>(m, n, k, per_row, per_col, &mut seed);
        }
    }
}

#[test]
fn extreme_operands_sum_exactly() {
    // Every product at its largest magnitude, over a long depth: 255 · 255 · 20 000 and
    // (-128) · (-128) terms stay inside i32 and come out exact.
    let (m, n, k) = (3, 35, 20_000);
    for (a, b, za, zb) in [(255u8, 0u8, 0, 255), (0, 255, 255, 0)] {
        let (ta, tb) = (vec![a; m * k], vec![b; k * n]);
        let (mut pa, mut pb) = (QPackedA::new(), QPackedB::new());
        pa.pack(&ta, m, k, k, &[za]);
        pb.pack(&tb, k, n, n, &[zb]);
        let mut c = vec![0; m * n];
        qgemm(&pa, &pb, 0..n, QOut::I32(&mut c), n);
        let want = (a as i32 - za) * (b as i32 - zb) * k as i32;
        assert!(c.iter().all(|&v| v == want), "{a} {b}: {} != {want}", c[0]);
    }
    let (ta, tb) = (vec![-128i8; m * k], vec![-128i8; k * n]);
    let (mut pa, mut pb) = (QPackedA::new(), QPackedB::new());
    pa.pack(&ta, m, k, k, &[0]);
    pb.pack(&tb, k, n, n, &[0]);
    let mut c = vec![0; m * n];
    qgemm(&pa, &pb, 0..n, QOut::I32(&mut c), n);
    assert!(c.iter().all(|&v| v == 128 * 128 * k as i32));
}

/// A convolution of `channels` channels of type `X` by weights of type `W` on the
/// product against the direct definition.
fn conv_case<X: Q8, W: Q8>(g: &crate::conv::Window3d, channels: usize, seed: &mut u64) {
    conv_case_of::<X, W>(g, channels, 5, seed)
}

/// [`conv_case`] with `cout` output channels.
fn conv_case_of<X: Q8, W: Q8>(g: &crate::conv::Window3d, channels: usize, cout: usize, seed: &mut u64) {
    let (plane, p) = (g.plane(), g.positions());
    let taps: usize = g.kernel.iter().product();
    let x: Vec<i32> = (0..channels * plane).map(|_| byte(seed) + X::MIN).collect();
    let w: Vec<i32> = (0..cout * channels * taps).map(|_| byte(seed) + W::MIN).collect();
    let zx = byte(seed) + X::MIN;
    let zw: Vec<i32> = (0..cout).map(|_| byte(seed) + W::MIN).collect();
    let mut want = vec![0i32; cout * p];
    for m in 0..cout {
        for (pos, o) in crate::conv::outputs(g).enumerate() {
            let mut acc = 0;
            for c in 0..channels {
                for (t, tap) in crate::conv::taps(g).enumerate() {
                    let xv = g.tap(o, tap).map_or(zx, |i| x[c * plane + i]);
                    acc += (xv - zx) * (w[(m * channels + c) * taps + t] - zw[m]);
                }
            }
            want[m * p + pos] = acc;
        }
    }
    let tx: Vec<X> = x.iter().map(|&v| X::from_i32(v)).collect();
    let tw: Vec<W> = w.iter().map(|&v| W::from_i32(v)).collect();
    let (mut pa, mut pb) = (QPackedA::new(), QPackedB::new());
    pa.pack_conv_weights(&tw, cout, channels, taps, &zw);
    pb.pack_conv_input(&tx, channels, g, zx);
    let mut c = vec![0; cout * p];
    qgemm(&pa, &pb, 0..p, QOut::I32(&mut c), p);
    assert_eq!(c, want, "{g:?}, {channels} channels, x from {} w from {}", X::MIN, W::MIN);
    nhwc_case(g, (&tx, &tw), (channels, cout), (zx, &zw), &want);
    if !ConvPlanes::fits(g) {
        return;
    }
    // Without the im2col: the same sums, and the same bytes requantized. The planes hold
    // another window's pack first (the words are not cleared between packs: every word a
    // product reads must be this pack's).
    let mut planes = ConvPlanes::new();
    let stale_g = crate::conv::Window3d::cube(2, 13, 3, 1, 1, 1, 0).expect("a window");
    planes.pack(&vec![X::from_i32(X::MAX); channels * stale_g.plane()], channels, &stale_g, X::MIN);
    planes.pack(&tx, channels, g, zx);
    let mut c = vec![0; cout * p];
    planes.product(&pa, QOut::I32(&mut c));
    assert_eq!(c, want, "implicit {g:?}, {channels} channels, x from {} w from {}", X::MIN, W::MIN);
    let scale: Vec<f32> = (0..cout).map(|i| 0.002 * (i + 1) as f32).collect();
    let bias: Vec<i32> = (0..cout).map(|i| i as i32 * 37 - 50).collect();
    let rq = Requant { scale: &scale, per_row: true, bias: Some(&bias), zy: 3 };
    let (mut y, mut z) = (vec![0u8; cout * p], vec![1u8; cout * p]);
    qgemm(&pa, &pb, 0..p, QOut::U8(&mut y, rq), p);
    planes.product(&pa, QOut::U8(&mut z, rq));
    assert_eq!(y, z, "implicit u8 {g:?}, {channels} channels");
    let (mut y, mut z) = (vec![0i8; cout * p], vec![1i8; cout * p]);
    qgemm(&pa, &pb, 0..p, QOut::I8(&mut y, rq), p);
    planes.product(&pa, QOut::I8(&mut z, rq));
    assert_eq!(y, z, "implicit i8 {g:?}, {channels} channels");
}

#[test]
fn convolutions_pack_into_the_product_of_their_definition() {
    let mut seed = 11;
    // Block copies (stride 1, same width) with padding and dilation; rows with strides;
    // 1 to 3 spatial axes.
    let shapes = [
        (2, 7, 3, 1, 1, 1),
        (2, 9, 3, 2, 1, 0),
        (1, 12, 5, 1, 2, 3),
        (3, 4, 2, 1, 1, 1),
        (2, 8, 3, 1, 2, 2),
        (2, 6, 5, 1, 1, 2),
        (3, 5, 3, 1, 1, 1),
        // 1x1 (a grid as wide as the output), strided 1x1, stride 3, 1-D windows wider
        // than a panel.
        (2, 7, 1, 1, 1, 0),
        (2, 9, 1, 2, 1, 0),
        (2, 11, 3, 3, 1, 1),
        (2, 10, 7, 2, 1, 3),
        (1, 70, 3, 1, 1, 1),
        (1, 75, 4, 2, 3, 2),
    ];
    for (dims, len, kk, stride, dil, pad) in shapes {
        let g = crate::conv::Window3d::cube(dims, len, kk, stride, dil, pad, 0).expect("fits");
        for channels in [1, 3, 4, 8, 9] {
            conv_case::<u8, i8>(&g, channels, &mut seed);
        }
        conv_case::<i8, u8>(&g, 6, &mut seed);
        conv_case::<u8, u8>(&g, 4, &mut seed);
        conv_case::<i8, i8>(&g, 5, &mut seed);
    }
    // A window wider than tall, with different strides, dilations and pads on its axes.
    let g = crate::conv::Window3d {
        input: [1, 6, 40],
        out: [1, 3, 19],
        kernel: [1, 3, 4],
        stride: [1, 2, 2],
        dilation: [1, 1, 2],
        pad_begin: [0, 1, 2],
    };
    for channels in [2, 7] {
        conv_case::<u8, i8>(&g, channels, &mut seed);
    }
    // Padded above and below only (a 3x1 window): its planes go in as one run each,
    // between rows of padding; with a channel count off the quads, and on it.
    let g = crate::conv::Window3d {
        input: [1, 6, 9],
        out: [1, 6, 9],
        kernel: [1, 3, 1],
        stride: [1; 3],
        dilation: [1; 3],
        pad_begin: [0, 1, 0],
    };
    for channels in [3, 8] {
        conv_case::<u8, i8>(&g, channels, &mut seed);
        conv_case::<i8, u8>(&g, channels, &mut seed);
    }
    // A pad wider than the strided outputs reach: a width tap whose first output in the
    // input lies past the last output (found by review: the im2col sliced its input row
    // from before its start and panicked).
    let g = crate::conv::Window3d {
        input: [1, 7, 2],
        out: [1, 15, 1],
        kernel: [1, 3, 6],
        stride: [1, 1, 3],
        dilation: [1; 3],
        pad_begin: [0, 5, 5],
    };
    conv_case::<u8, i8>(&g, 3, &mut seed);
}

/// Convolutions whose products run on AMX-INT8 tiles where the CPU has them (8 output
/// channels or more, depth past 128): packed with their im2col and on the phase planes
/// (`ConvPlanes::panels_of`), 3x3 padded, 1x1 at stride 2, two and three strips.
#[test]
fn convolutions_on_the_tiles_pack_into_the_product_of_their_definition() {
    let mut seed = 13;
    let g = crate::conv::Window3d::cube(2, 9, 3, 1, 1, 1, 0).expect("fits");
    conv_case_of::<u8, i8>(&g, 40, 30, &mut seed);
    conv_case_of::<i8, u8>(&g, 17, 28, &mut seed);
    let g = crate::conv::Window3d::cube(2, 10, 1, 2, 1, 0, 0).expect("fits");
    conv_case_of::<u8, i8>(&g, 144, 29, &mut seed);
}

#[test]
fn requantized_outputs_are_the_sums_requantized_per_row_or_per_column() {
    let mut seed = 5;
    // Rows sharing a zero point, and each its own (a convolution's weights per channel:
    // the stores' general terms).
    let shapes = [(1, 1, 3), (3, 40, 17), (15, 70, 129), (29, 33, 64), (29, 250, 256)];
    for (&(m, n, k), per_row_za) in shapes.iter().flat_map(|s| [(s, false), (s, true)]) {
        let a: Vec<u8> = (0..m * k).map(|_| byte(&mut seed) as u8).collect();
        let b: Vec<i8> = (0..k * n).map(|_| (byte(&mut seed) - 128) as i8).collect();
        let (mut pa, mut pb) = (QPackedA::new(), QPackedB::new());
        let za: Vec<i32> = if per_row_za { (0..m).map(|i| 90 + i as i32 % 20).collect() } else { vec![100] };
        pa.pack(&a, m, k, k, &za);
        pb.pack(&b, k, n, n, &[3]);
        let mut acc = vec![0; m * n];
        qgemm(&pa, &pb, 0..n, QOut::I32(&mut acc), n);
        // Scales that put some values past each end of the range, ties and a NaN scale.
        let scales: Vec<f32> =
            (0..m.max(n)).map(|i| if i == 2 { f32::NAN } else { 0.0005 * (i % 7 + 1) as f32 }).collect();
        let bias: Vec<i32> = (0..m).map(|i| (i as i32 - 5) * 9001).collect();
        for per_row in [false, true] {
            let scale = if per_row { &scales[..m] } else { &scales[..n] };
            let rq = Requant { scale, per_row, bias: per_row.then_some(&bias[..]), zy: 7 };
            let want = |i: usize, j: usize| {
                let b = if per_row { bias[i] } else { 0 };
                acc[i * n + j].wrapping_add(b) as f32 * scale[if per_row { i } else { j }]
            };
            let mut y = vec![0u8; m * n];
            qgemm(&pa, &pb, 0..n, QOut::U8(&mut y, rq), n);
            let want_u8: Vec<u8> = (0..m * n).map(|o| requantize::<u8>(want(o / n, o % n), 7)).collect();
            assert_eq!(y, want_u8, "u8 {m}x{n}x{k} per_row {per_row}");
            let mut y = vec![0u8; m * n];
            portable(&pa, 0..m, &pb, 0..n, &mut QOut::U8(&mut y, rq), Place { ldc: n, kept: None });
            assert_eq!(y, want_u8, "portable u8 {m}x{n}x{k} per_row {per_row}");
            let mut y = vec![0i8; m * n];
            qgemm(&pa, &pb, 0..n, QOut::I8(&mut y, rq), n);
            let want_i8: Vec<i8> = (0..m * n).map(|o| requantize::<i8>(want(o / n, o % n), 7)).collect();
            assert_eq!(y, want_i8, "i8 {m}x{n}x{k} per_row {per_row}");
        }
    }
}

#[test]
fn empty_depths_widths_channels_and_planes_give_their_products() {
    // Depth 0: every sum is 0 (and requantizes to zy plus nothing).
    let (mut pa, mut pb) = (QPackedA::new(), QPackedB::new());
    pa.pack::<u8>(&[], 3, 0, 0, &[7]);
    pb.pack::<i8>(&[], 0, 5, 5, &[2]);
    let mut c = vec![1; 15];
    qgemm(&pa, &pb, 0..5, QOut::I32(&mut c), 5);
    assert_eq!(c, [0; 15]);
    let mut c = vec![1; 15];
    portable(&pa, 0..3, &pb, 0..5, &mut QOut::I32(&mut c), Place { ldc: 5, kept: None });
    assert_eq!(c, [0; 15]);
    // Width 0: nothing to write.
    pb.pack::<i8>(&[], 4, 0, 0, &[0]);
    pa.pack::<u8>(&[1; 8], 2, 4, 4, &[0]);
    qgemm(&pa, &pb, 0..0, QOut::I32(&mut []), 0);
    // A convolution of no input channels: 0; of an empty plane with padding: the
    // padding's zero point everywhere, so 0.
    for (channels, len, pad) in [(0, 4, 0), (1, 0, 1)] {
        let g = crate::conv::Window3d {
            input: [1, len, 3],
            out: [1, len + 2 * pad, 3],
            kernel: [1; 3],
            stride: [1; 3],
            dilation: [1; 3],
            pad_begin: [0, pad, 0],
        };
        let p = g.positions();
        pa.pack_conv_weights::<i8>(&vec![3; 2 * channels], 2, channels, 1, &[1]);
        pb.pack_conv_input::<u8>(&vec![9; channels * g.plane()], channels, &g, 9);
        let mut c = vec![1; 2 * p];
        qgemm(&pa, &pb, 0..p, QOut::I32(&mut c), p);
        assert_eq!(c, vec![0; 2 * p], "{channels} channels, plane {len}x3");
    }
}

/// A product split by rows (whole strips a task, the last one short) gives the whole
/// product's rows, as sums and requantized per row.
#[test]
fn products_split_by_rows_give_the_whole_products_rows() {
    let mut seed = 23;
    let (m, n, k) = (3 * MR + 5, 45, 70);
    let a: Vec<u8> = (0..m * k).map(|_| byte(&mut seed) as u8).collect();
    let b: Vec<i8> = (0..k * n).map(|_| (byte(&mut seed) - 128) as i8).collect();
    let za: Vec<i32> = (0..m).map(|i| (i % 3) as i32 * 40).collect();
    let (mut pa, mut pb) = (QPackedA::new(), QPackedB::new());
    pa.pack(&a, m, k, k, &za);
    pb.pack(&b, k, n, n, &[5]);
    let mut whole = vec![0; m * n];
    qgemm(&pa, &pb, 0..n, QOut::I32(&mut whole), n);
    let scale: Vec<f32> = (0..m).map(|i| 0.0003 * (i % 4 + 1) as f32).collect();
    let bias: Vec<i32> = (0..m).map(|i| i as i32 * 101 - 900).collect();
    let rq = Requant { scale: &scale, per_row: true, bias: Some(&bias), zy: 9 };
    let mut whole_u8 = vec![0u8; m * n];
    qgemm(&pa, &pb, 0..n, QOut::U8(&mut whole_u8, rq), n);
    for split in [MR, 2 * MR, 3 * MR] {
        let (mut c, mut y) = (vec![0; m * n], vec![0u8; m * n]);
        let (c0, c1) = c.split_at_mut(split * n);
        qgemm_rows(&pa, 0..split, &pb, 0..n, QOut::I32(c0), n);
        qgemm_rows(&pa, split..m, &pb, 0..n, QOut::I32(c1), n);
        assert_eq!(c, whole, "split at {split}");
        let (y0, y1) = y.split_at_mut(split * n);
        qgemm_rows(&pa, 0..split, &pb, 0..n, QOut::U8(y0, rq), n);
        qgemm_rows(&pa, split..m, &pb, 0..n, QOut::U8(y1, rq), n);
        assert_eq!(y, whole_u8, "requantized, split at {split}");
        let mut p = vec![0; m * n];
        portable(&pa, split..m, &pb, 0..n, &mut QOut::I32(&mut p[..(m - split) * n]), Place { ldc: n, kept: None });
        assert_eq!(p[..(m - split) * n], whole[split * n..], "portable, split at {split}");
    }
}

/// A convolution without its im2col split by output channels (whole strips a task, each
/// with its own scratch) gives the whole product's rows, on a grid wider than the output
/// (3x3, padded) and on one that is not (1x1).
#[test]
fn implicit_products_split_by_rows_give_the_whole_products_rows() {
    let mut seed = 31;
    // (16 channels: the 3x3 product is 144 deep, on AMX-INT8 tiles where the CPU has them.)
    let (cout, channels) = (2 * MR + 3, 16);
    for (k, pad) in [(3, 1), (1, 0)] {
        let g = crate::conv::Window3d::cube(2, 9, k, 1, 1, pad, 0).expect("fits");
        let (taps, p) = (k * k, g.positions());
        let x: Vec<u8> = (0..channels * g.plane()).map(|_| byte(&mut seed) as u8).collect();
        let w: Vec<i8> = (0..cout * channels * taps).map(|_| (byte(&mut seed) - 128) as i8).collect();
        let mut pa = QPackedA::new();
        pa.pack_conv_weights(&w, cout, channels, taps, &[0]);
        let mut planes = ConvPlanes::new();
        planes.pack(&x, channels, &g, 17);
        let scale: Vec<f32> = (0..cout).map(|i| 0.0004 * (i % 5 + 1) as f32).collect();
        let rq = Requant { scale: &scale, per_row: true, bias: None, zy: 2 };
        let mut whole = vec![0u8; cout * p];
        planes.product(&pa, QOut::U8(&mut whole, rq));
        let mut parts = vec![0u8; cout * p];
        let (y0, y1) = parts.split_at_mut(MR * p);
        let (mut s0, mut s1) = (ProductScratch::default(), ProductScratch::default());
        planes.product_rows(&pa, MR..cout, QOut::U8(y1, rq), &mut s1);
        planes.product_rows(&pa, 0..MR, QOut::U8(y0, rq), &mut s0);
        assert_eq!(parts, whole, "{k}x{k}");
        // By grid columns: each task's part in its scratch, then placed.
        for tasks in [2, 3, 5] {
            let mut y = vec![0u8; cout * p];
            let mut out = QOut::U8(&mut y, rq);
            let mut seen = 0;
            for i in (0..tasks).rev() {
                let cols = planes.grid_part(i, tasks);
                seen += cols.len();
                let mut s = ProductScratch::default();
                planes.product_part(&pa, cols.clone(), &out, &mut s);
                planes.place_part(cols, &s, &mut out);
            }
            assert_eq!(y, whole, "{k}x{k} in {tasks} parts by columns");
            assert!(seen >= p, "the parts cover the grid");
        }
    }
    // A dilated 1-D window whose second part starts among the last grid row's discarded
    // columns (grid 36 of 27 outputs: part 32..36 keeps nothing). Found by review: the
    // placing sliced past the output and panicked.
    let g = crate::conv::Window3d {
        input: [1, 1, 31],
        out: [1, 1, 27],
        kernel: [1, 1, 4],
        stride: [1; 3],
        dilation: [1, 1, 3],
        pad_begin: [0, 0, 4],
    };
    let (taps, p) = (4, g.positions());
    let x: Vec<u8> = (0..channels * g.plane()).map(|_| byte(&mut seed) as u8).collect();
    let w: Vec<i8> = (0..cout * channels * taps).map(|_| (byte(&mut seed) - 128) as i8).collect();
    let mut pa = QPackedA::new();
    pa.pack_conv_weights(&w, cout, channels, taps, &[0]);
    let mut planes = ConvPlanes::new();
    planes.pack(&x, channels, &g, 17);
    let mut whole = vec![0i32; cout * p];
    planes.product(&pa, QOut::I32(&mut whole));
    for tasks in 2..=4 {
        let mut y = vec![0i32; cout * p];
        let mut out = QOut::I32(&mut y);
        for i in 0..tasks {
            let cols = planes.grid_part(i, tasks);
            let mut s = ProductScratch::default();
            planes.product_part(&pa, cols.clone(), &out, &mut s);
            planes.place_part(cols, &s, &mut out);
        }
        assert_eq!(y, whole, "dilated 1-D in {tasks} parts by columns");
    }
}

/// Products placed on a grid's kept columns (`Kept`: the first `out_w` of each `wq`, as
/// the phase planes' product stores a padded convolution's outputs) write exactly the
/// whole product's kept columns, one after the other, and nothing past them: on the
/// dispatched kernel (the VNNI tiles' compressed stores where the CPU has them) and on
/// the portable one, as i32 and requantized, from grid columns that start mid-row.
#[test]
fn products_on_kept_grid_columns_write_the_kept_columns_of_the_whole_product() {
    use super::packed::{qgemm_placed, Kept};
    let mut seed = 17;
    // (rows, grid columns, depth, wq, out_w, first grid column): grids narrower and
    // wider than a panel, one kept column a row, none discarded, a start mid-row.
    let cases = [
        (14, 96, 16, 58, 56, 0),
        (17, 70, 9, 9, 7, 0),
        (3, 45, 33, 5, 1, 0),
        (29, 64, 64, 40, 40, 0),
        (5, 100, 20, 34, 32, 13),
        (15, 33, 4, 3, 2, 7),
    ];
    for (m, n, k, wq, out_w, at) in cases {
        let a: Vec<u8> = (0..m * k).map(|_| byte(&mut seed) as u8).collect();
        let b: Vec<i8> = (0..k * n).map(|_| (byte(&mut seed) - 128) as i8).collect();
        let (mut pa, mut pb) = (QPackedA::new(), QPackedB::new());
        pa.pack(&a, m, k, k, &[90]);
        pb.pack(&b, k, n, n, &[-3]);
        let kept = Kept { wq, out_w, at };
        let cols: Vec<usize> = (0..n).filter(|&j| (at + j) % wq < out_w).collect();
        let width = cols.len();
        let place = Place { ldc: width + 3, kept: Some(kept) };
        let label = format!("{m}x{n}x{k} grid {wq} keeping {out_w} from {at}");
        // The whole product, and its kept columns.
        let mut full = vec![0; m * n];
        qgemm(&pa, &pb, 0..n, QOut::I32(&mut full), n);
        let kept_of = |v: &[i32], fill: i32| -> Vec<i32> {
            let mut out = vec![fill; m * place.ldc];
            for i in 0..m {
                for (o, &j) in cols.iter().enumerate() {
                    out[i * place.ldc + o] = v[i * n + j];
                }
            }
            out
        };
        let want = kept_of(&full, i32::MIN);
        let mut c = vec![i32::MIN; m * place.ldc];
        qgemm_placed(&pa, 0..m, &pb, 0..n, QOut::I32(&mut c), place);
        assert_eq!(c, want, "dispatched {label}");
        let mut c = vec![i32::MIN; m * place.ldc];
        portable(&pa, 0..m, &pb, 0..n, &mut QOut::I32(&mut c), place);
        assert_eq!(c, want, "portable {label}");
        // Requantized: the whole product's bytes at the kept columns.
        let scale: Vec<f32> = (0..m).map(|i| 0.0007 * (i % 5 + 1) as f32).collect();
        let bias: Vec<i32> = (0..m).map(|i| i as i32 * 301 - 900).collect();
        let rq = Requant { scale: &scale, per_row: true, bias: Some(&bias), zy: 5 };
        let mut y = vec![0u8; m * n];
        qgemm(&pa, &pb, 0..n, QOut::U8(&mut y, rq), n);
        let want = kept_of(&y.iter().map(|&v| v as i32).collect::<Vec<_>>(), 77);
        let mut z = vec![77u8; m * place.ldc];
        qgemm_placed(&pa, 0..m, &pb, 0..n, QOut::U8(&mut z, rq), place);
        assert_eq!(z.iter().map(|&v| v as i32).collect::<Vec<_>>(), want, "dispatched u8 {label}");
        let mut z = vec![77u8; m * place.ldc];
        portable(&pa, 0..m, &pb, 0..n, &mut QOut::U8(&mut z, rq), place);
        assert_eq!(z.iter().map(|&v| v as i32).collect::<Vec<_>>(), want, "portable u8 {label}");
        let mut y = vec![0i8; m * n];
        qgemm(&pa, &pb, 0..n, QOut::I8(&mut y, rq), n);
        let want = kept_of(&y.iter().map(|&v| v as i32).collect::<Vec<_>>(), -7);
        let mut z = vec![-7i8; m * place.ldc];
        qgemm_placed(&pa, 0..m, &pb, 0..n, QOut::I8(&mut z, rq), place);
        assert_eq!(z.iter().map(|&v| v as i32).collect::<Vec<_>>(), want, "dispatched i8 {label}");
    }
}

/// The channels-last product (`nhwc`) of a convolution whose NCHW sums are `want`: the
/// same sums transposed, whole and split into two row ranges, in blocks of one strip and
/// of the default size; requantized per column (scale and bias per output channel) as
/// the NCHW product requantizes per row.
fn nhwc_case<X: Q8, W: Q8>(
    g: &crate::conv::Window3d,
    (tx, tw): (&[X], &[W]),
    (channels, cout): (usize, usize),
    (zx, zw): (i32, &[i32]),
    want: &[i32],
) {
    let (plane, p) = (g.plane(), g.positions());
    let taps: usize = g.kernel.iter().product();
    let label = format!("nhwc {g:?}, {channels} channels, x from {} w from {}", X::MIN, W::MIN);
    let xt: Vec<X> = (0..plane * channels).map(|i| tx[(i % channels) * plane + i / channels]).collect();
    let want_t: Vec<i32> = (0..p * cout).map(|i| want[(i % cout) * p + i / cout]).collect();
    // Weights packed after another pack (the buffers reused).
    let mut pb = QPackedB::new();
    pb.pack_nhwc_weights(&[W::from_i32(W::MAX); 3 * 5 * 2], 3, 5, 2, &[W::MIN]);
    pb.pack_nhwc_weights(tw, cout, channels, taps, zw);
    let mut scratch = QPackedA::new();
    for block in [MR, 2 * MR, 1000 * MR] {
        let mut c = vec![i32::MIN; p * cout];
        super::nhwc::conv_nhwc_blocks(&xt, channels, g, zx, &pb, 0..p, QOut::I32(&mut c), &mut scratch, block);
        assert_eq!(c, want_t, "{label}, blocks of {block}");
    }
    let half = (p / 2).next_multiple_of(MR).min(p);
    let mut c = vec![i32::MIN; p * cout];
    let (lo, hi) = c.split_at_mut(half * cout);
    conv_nhwc(&xt, channels, g, zx, &pb, 0..half, QOut::I32(lo), &mut scratch);
    conv_nhwc(&xt, channels, g, zx, &pb, half..p, QOut::I32(hi), &mut scratch);
    assert_eq!(c, want_t, "{label}, split at {half}");
    let scale: Vec<f32> = (0..cout).map(|i| 0.002 * (i + 1) as f32).collect();
    let bias: Vec<i32> = (0..cout).map(|i| i as i32 * 37 - 50).collect();
    taps_case(g, (&xt, tw), (channels, cout), zx, (&scale, &bias), &label);
    for (scale, bias) in [(&scale[..], Some(&bias[..])), (&scale[..1], None)] {
        let rq = Requant { scale, per_row: false, bias, zy: 3 };
        let at = |v: &[f32], i: usize| if v.len() == 1 { v[0] } else { v[i] };
        let expect = |i: usize| {
            let o = i % cout;
            let v = want_t[i].wrapping_add(bias.map_or(0, |b| b[o])) as f32 * at(scale, o);
            (requantize::<u8>(v, 3), requantize::<i8>(v, 3))
        };
        let mut y = vec![0u8; p * cout];
        conv_nhwc(&xt, channels, g, zx, &pb, 0..p, QOut::U8(&mut y, rq), &mut scratch);
        let mut z = vec![0i8; p * cout];
        conv_nhwc(&xt, channels, g, zx, &pb, 0..p, QOut::I8(&mut z, rq), &mut scratch);
        for i in 0..p * cout {
            assert_eq!((y[i], z[i]), expect(i), "{label}, requantized, element {i}");
        }
    }
}

#[test]
fn byte_transposes_match_the_definition_on_every_edge() {
    let mut seed = 17;
    // (Eights of rows by 64s of columns on the AVX-512 build where the CPU has it, with
    // the edges around them.)
    for (rows, cols) in
        [(1, 1), (8, 8), (7, 9), (16, 24), (17, 33), (3, 64), (64, 5), (0, 4), (8, 64), (24, 130), (130, 70), (9, 128)]
    {
        let x: Vec<u8> = (0..rows * cols).map(|_| byte(&mut seed) as u8).collect();
        let xi: Vec<i8> = x.iter().map(|&b| b as i8).collect();
        let mut y = vec![0u8; rows * cols];
        let mut yi = vec![0i8; rows * cols];
        to_channels_last(&x, rows, cols, &mut y);
        to_channels_last(&xi, rows, cols, &mut yi);
        for r in 0..rows {
            for c in 0..cols {
                assert_eq!(y[c * rows + r], x[r * cols + c], "{rows}x{cols} at {r}, {c}");
                assert_eq!(yi[c * rows + r], xi[r * cols + c], "i8 {rows}x{cols} at {r}, {c}");
            }
        }
        let mut z = vec![0u8; rows * cols];
        from_channels_last(&y, rows, cols, &mut z);
        assert_eq!(z, x, "{rows}x{cols} back");
    }
}

/// The channels-last product read through its taps (`ConvTaps`, uint8 images of whole
/// channel quads, weights' zero points 0) against the same product on its im2col: the
/// same sums and bytes, whole and split at a strip, after taps made for another window.
fn taps_case<X: Q8, W: Q8>(
    g: &crate::conv::Window3d,
    (xt, tw): (&[X], &[W]),
    (channels, cout): (usize, usize),
    zx: i32,
    (scale, bias): (&[f32], &[i32]),
    label: &str,
) {
    let Some(x) = (0..xt.len()).map(|i| (X::MIN == 0).then(|| xt[i].to_i32() as u8)).collect::<Option<Vec<u8>>>()
    else {
        return;
    };
    if !ConvTaps::fits(g, channels) || !vnni_supported() {
        return;
    }
    let (p, taps) = (g.positions(), g.kernel.iter().product::<usize>());
    // Zero points of 0 (as shifted): 0 for int8 weights, 128 for uint8.
    let mut pb = QPackedB::new();
    pb.pack_nhwc_weights(tw, cout, channels, taps, &[128 + W::MIN]);
    let mut scratch = QPackedA::new();
    let mut ct = ConvTaps::new();
    let other = crate::conv::Window3d::cube(2, 5, 3, 1, 1, 1, 0).expect("a window");
    ct.prepare(&other, 8);
    ct.prepare(g, channels);
    let mut want = vec![0i32; p * cout];
    conv_nhwc(&x, channels, g, zx, &pb, 0..p, QOut::I32(&mut want), &mut scratch);
    let mut got = vec![i32::MIN; p * cout];
    conv_taps(&x, zx, &ct, &pb, 0..p, QOut::I32(&mut got), &mut scratch);
    assert_eq!(got, want, "taps {label}");
    let half = (p / 2).next_multiple_of(MR).min(p);
    let mut got = vec![i32::MIN; p * cout];
    let (lo, hi) = got.split_at_mut(half * cout);
    conv_taps(&x, zx, &ct, &pb, 0..half, QOut::I32(lo), &mut scratch);
    conv_taps(&x, zx, &ct, &pb, half..p, QOut::I32(hi), &mut scratch);
    assert_eq!(got, want, "taps {label}, split at {half}");
    let rq = Requant { scale, per_row: false, bias: Some(bias), zy: 5 };
    let (mut y, mut z) = (vec![0u8; p * cout], vec![1u8; p * cout]);
    conv_nhwc(&x, channels, g, zx, &pb, 0..p, QOut::U8(&mut y, rq), &mut scratch);
    conv_taps(&x, zx, &ct, &pb, 0..p, QOut::U8(&mut z, rq), &mut scratch);
    assert_eq!(y, z, "taps u8 {label}");
}
