//! The wide direct tiles: shallow convolutions (depth <= 64, rows of >= 16
//! outputs) through ORT, fused Conv + bias + Relu + Add + Clip, against ORT's CPU EP and
//! at one thread against all (splits by channel blocks give the same bits).

mod common;

use common::{assert_matches_ort, conv_chain, rivet_run_at, same_first_output_bits};
use rivet::model::Attr;

/// A case: the input's shape, output channels, kernel, strides, dilations and pads (top,
/// left, bottom, right).
type Case = ([i64; 4], i64, [i64; 2], [i64; 2], [i64; 2], [i64; 4]);

#[test]
fn stem_like_convs_match_ort_and_one_threads_bits() {
    let cases: [Case; 8] = [
        ([1, 3, 65, 67], 32, [3, 3], [2, 2], [1, 1], [1, 1, 1, 1]),
        ([2, 3, 19, 40], 24, [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
        ([1, 2, 20, 33], 20, [5, 5], [1, 1], [1, 1], [2, 0, 1, 3]),
        ([1, 4, 9, 70], 40, [4, 4], [2, 2], [1, 2], [0, 0, 0, 0]),
        ([1, 3, 112, 112], 64, [3, 3], [2, 2], [1, 1], [0, 0, 1, 1]),
        ([1, 1, 30, 47], 17, [7, 7], [1, 2], [1, 1], [3, 3, 3, 3]),
        ([1, 8, 8, 16], 16, [2, 4], [1, 1], [2, 1], [0, 0, 0, 0]),
        ([1, 3, 5, 4], 32, [3, 3], [1, 1], [1, 1], [1, 8, 1, 8]),
    ];
    for (xs, out_c, k, s, d, pads) in cases {
        let ws = [out_c, xs[1], k[0], k[1]];
        let oh = (xs[2] + pads[0] + pads[2] - d[0] * (k[0] - 1) - 1) / s[0] + 1;
        let ow = (xs[3] + pads[1] + pads[3] - d[1] * (k[1] - 1) - 1) / s[1] + 1;
        let out = [xs[0], out_c, oh, ow];
        let attrs = [
            ("pads", Attr::Ints(pads.to_vec())),
            ("strides", Attr::Ints(s.to_vec())),
            ("dilations", Attr::Ints(d.to_vec())),
            ("kernel_shape", Attr::Ints(k.to_vec())),
        ];
        let (model, inputs) = conv_chain(&xs, &ws, &attrs, &out, 70);
        let what = format!("{xs:?} -> {out_c} k{k:?} s{s:?} d{d:?} pads {pads:?}");
        assert_matches_ort(&model, &inputs, 1e-4, 1e-4, &what);
        let (one, all) = (rivet_run_at(&model, &inputs, 1, 1), rivet_run_at(&model, &inputs, 0, 2));
        assert!(same_first_output_bits(&one, &all), "{what}: threads change the bits");
    }
}
