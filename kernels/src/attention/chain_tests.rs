use super::*;
use crate::test_values;

/// The unfused nodes: each matrix's whole products (B unpacked), the mask added to the
/// whole scores, Softmax over them.
fn unfused(c: &Chain<'_>) -> Vec<f32> {
    let (s, l, d, dv) = (c.s, c.l, c.d, c.dv);
    let mut out = vec![0.0f32; c.count * s * dv];
    let mut scratch = GemmScratch::new();
    for i in 0..c.count {
        let (q, k, v) = (&c.q[(c.q_at)(i)..][..s * d], &c.k[(c.k_at)(i)..][..l * d], &c.v[(c.v_at)(i)..][..l * dv]);
        let mut scores = vec![0.0f32; s * l];
        let epilogue = Epilogue { scale: c.scale, ..Epilogue::default() };
        Gemm { epilogue, ..Gemm::new(s, l, d, q, false, k, c.trans_k) }.compute(&mut scratch, 0..s, 0..l, &mut scores);
        if let Some(m) = &c.mask {
            for r in 0..s {
                for j in 0..l {
                    scores[r * l + j] += m.data[(m.head)(i) + r * m.row + j * m.col];
                }
            }
        }
        let mut probs = vec![0.0f32; s * l];
        crate::norm::softmax(&scores, &mut probs, s, l, 1, false);
        let o = &mut out[i * s * dv..][..s * dv];
        Gemm::new(s, dv, l, &probs, false, v, c.trans_v).compute(&mut scratch, 0..s, 0..dv, o);
    }
    out
}

/// All items, and the items split in two at every item boundary, against the unfused
/// nodes' bits.
fn check(count: usize, (s, l, d, dv): (usize, usize, usize, usize), trans: (bool, bool), mask: Option<(usize, usize)>) {
    let q = test_values(count * s * d, 1).iter().map(|x| x * 3.0).collect::<Vec<_>>();
    let k = test_values(count * l * d, 2);
    let v = test_values(count * l * dv, 3);
    // A mask of one matrix for every head: rows of l terms, or one term a row.
    let m = test_values(s * l, 4).iter().map(|x| if *x < -0.8 { f32::NEG_INFINITY } else { *x }).collect::<Vec<_>>();
    let (q_at, k_at, v_at) = (move |i: usize| i * s * d, move |i: usize| i * l * d, move |i: usize| i * l * dv);
    let head = |_: usize| 0;
    let chain = Chain {
        count,
        s,
        l,
        d,
        dv,
        q: &q,
        k: &k,
        v: &v,
        q_at: &q_at,
        k_at: &k_at,
        v_at: &v_at,
        trans_k: trans.0,
        trans_v: trans.1,
        scale: Some(Scale::Div(8.0)),
        mask: mask.map(|(row, col)| Mask { data: &m, head: &head, row, col }),
    };
    let want = unfused(&chain);
    let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    let mut scratch = ChainScratch::default();
    let items = chain.items();
    let mut got = vec![f32::NAN; want.len()];
    chain.run(0..items, &mut got, &mut scratch);
    assert_eq!(bits(&got), bits(&want), "{count} x {s} x {l} x {d} x {dv}, all items");
    for cut in 1..items {
        let at = chain.item_start(cut);
        let mut got = vec![f32::NAN; want.len()];
        let (a, b) = got.split_at_mut(at);
        chain.run(0..cut, a, &mut scratch);
        chain.run(cut..items, b, &mut ChainScratch::default());
        assert_eq!(bits(&got), bits(&want), "{count} x {s} x {l} x {d} x {dv}, split at item {cut}");
    }
}

#[test]
fn strips_give_the_unfused_nodes_bits() {
    // ViT's heads (several strips), masks of every broadcast, tiny and odd sizes.
    check(2, (197, 197, 64, 64), (false, false), None);
    check(3, (150, 300, 16, 24), (true, false), Some((300, 1)));
    check(2, (129, 260, 8, 5), (true, true), Some((0, 1)));
    check(2, (113, 300, 8, 8), (false, false), Some((1, 0)));
    check(1, (1, 7, 4, 3), (true, false), Some((7, 1)));
    check(4, (3, 5, 2, 1), (false, true), None);
    check(1, (17, 1, 3, 4), (false, false), None);
    // A last strip of one row, joined to the one before.
    for s in 90..120 {
        if s % shape_only(s, 300).strip_rows() == 1 {
            check(2, (s, 300, 8, 8), (true, false), Some((300, 1)));
        }
    }
}

/// A chain of `s` query rows and `l` keys with no data: its strips only.
fn shape_only(s: usize, l: usize) -> Chain<'static> {
    fn zero(_: usize) -> usize {
        0
    }
    Chain {
        count: 1,
        s,
        l,
        d: 1,
        dv: 1,
        q: &[],
        k: &[],
        v: &[],
        q_at: &zero,
        k_at: &zero,
        v_at: &zero,
        trans_k: false,
        trans_v: false,
        scale: None,
        mask: None,
    }
}

#[test]
fn a_strip_of_one_row_joins_the_strip_before() {
    let r = shape_only(100, 1000).strip_rows();
    assert!(r >= 2 && r * 1000 <= STRIP_FLOATS, "{r} rows");
    let one_more = shape_only(r + 1, 1000);
    assert_eq!(one_more.strips(), 1, "{r} + 1 rows: one strip");
    assert_eq!(one_more.rows(0, 1), 0..r + 1);
    let two_more = shape_only(r + 2, 1000);
    assert_eq!(two_more.strips(), 2);
    assert_eq!(two_more.rows(1, 2), r..r + 2);
    assert_eq!(two_more.item_start(1), r);
    assert_eq!(two_more.item_start(2), r + 2);
}
