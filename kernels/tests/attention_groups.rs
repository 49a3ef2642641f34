//! Attention computed by groups of heads (as the ep's split computes them, each
//! task in its own scratch) against the whole call, bit for bit, over every output that
//! has groups and the inputs that change a group's work.

use rivet_kernels::attention::{
    attention, attention_groups, group_len, AttnBias, AttnDims, AttnInputs, AttnOut, AttnParams, AttnScratch,
};

fn vals(n: usize, seed: u32) -> Vec<f32> {
    (0..n).map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) as f32 / 8e6 - 1.0).collect()
}

#[test]
fn every_grouped_output_split_by_groups_gives_the_whole_bits() {
    let mut checked = 0;
    for batch in [1, 3] {
        for (q_heads, kv_heads) in [(4, 4), (6, 2), (4, 1)] {
            for (q_3d, kv_3d) in [(false, false), (false, true), (true, true)] {
                for past_len in [0, 5] {
                    for (causal, softcap) in [(false, 0.0), (true, 0.0), (true, 2.5)] {
                        for mask in [None, Some("heads"), Some("nonpad")] {
                            let d = AttnDims {
                                batch,
                                q_heads,
                                kv_heads,
                                q_len: 7,
                                kv_len: 9,
                                past_len,
                                head: 16,
                                v_head: 24,
                                q_3d,
                                kv_3d,
                            };
                            let total = d.total();
                            let q = vals(batch * q_heads * d.q_len * d.head, 1);
                            let k = vals(batch * kv_heads * d.kv_len * d.head, 2);
                            let v = vals(batch * kv_heads * d.kv_len * d.v_head, 3);
                            let pk = vals(batch * kv_heads * past_len * d.head, 4);
                            let pv = vals(batch * kv_heads * past_len * d.v_head, 5);
                            let past = past_len > 0;
                            let x = AttnInputs {
                                q: &q,
                                k: &k,
                                v: &v,
                                past_key: past.then_some(&pk[..]),
                                past_value: past.then_some(&pv[..]),
                            };
                            let p = AttnParams { scale: 0.3, softcap, causal };
                            // A [B, 1, Sq, total] mask (broadcast over heads), or a batch's
                            // padding (-inf past its length), as the ep's bias adds them.
                            let m = vals(batch * d.q_len * total, 6);
                            let heads_bias = |b: usize, _h: usize, i: usize, row: &mut [f32]| {
                                row.iter_mut().enumerate().for_each(|(j, e)| *e += m[(b * d.q_len + i) * total + j])
                            };
                            let nonpad_bias = |b: usize, _h: usize, _i: usize, row: &mut [f32]| {
                                let keep = (total - b * 2).max(1).min(row.len());
                                row[keep..].iter_mut().for_each(|e| *e += f32::NEG_INFINITY)
                            };
                            let bias: Option<AttnBias<'_, f32>> = match mask {
                                Some("heads") => Some(&heads_bias),
                                Some(_) => Some(&nonpad_bias),
                                None => None,
                            };
                            for out in [
                                AttnOut::Y,
                                AttnOut::Scores(0),
                                AttnOut::Scores(1),
                                AttnOut::Scores(2),
                                AttnOut::Scores(3),
                            ] {
                                // [B, S, H * d] interleaves the groups' Y: the ep keeps it whole.
                                let Some(len) = group_len(&d, out) else {
                                    assert!(q_3d && out == AttnOut::Y);
                                    continue;
                                };
                                let groups = batch * kv_heads;
                                let mut whole = vec![f32::NAN; groups * len];
                                attention(&d, p, &x, bias, out, &mut AttnScratch::default(), &mut whole);
                                // The ep's partition at 2 tasks, then every group alone, a
                                // scratch reused across calls (as a task's is across Runs).
                                let per_task = groups.div_ceil(2);
                                let mut scratch = AttnScratch::default();
                                let parts: Vec<Vec<std::ops::Range<usize>>> = vec![
                                    (0..groups).step_by(per_task).map(|s| s..(s + per_task).min(groups)).collect(),
                                    (0..groups).map(|g| g..g + 1).collect(),
                                ];
                                for split in parts {
                                    let mut got = vec![f32::NAN; groups * len];
                                    for r in split {
                                        let part = &mut got[r.start * len..r.end * len];
                                        attention_groups(&d, p, &x, bias, out, &mut scratch, r, part);
                                    }
                                    let same = got.iter().zip(&whole).all(|(a, b)| a.to_bits() == b.to_bits());
                                    assert!(same, "{d:?} {p:?} mask {mask:?} {out:?}");
                                    checked += 1;
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    // Per (batch, heads, layout, cache, causal/softcap, mask): 5 outputs (4 with Q 3-D), 2 splits.
    assert_eq!(checked, 2 * 3 * 2 * 3 * 3 * (2 * 5 + 4) * 2);
}
