//! Scaled dot-product attention (ONNX Attention, opset 23): multi-head, grouped-query and
//! multi-query heads, an additive bias (mask, causal, padding), softcap, a key/value cache.
//!
//! Q, K and V come as `[B, H, S, d]` or as `[B, S, H * d]`; either way one head's row of
//! one position is `d` contiguous elements, which is all the loops need.

/// Sizes of one attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnDims {
    pub batch: usize,
    pub q_heads: usize,
    pub kv_heads: usize,
    pub q_len: usize,
    /// Positions in K and V (the new ones, after the cache).
    pub kv_len: usize,
    /// Positions in the cache (`past_key` / `past_value`).
    pub past_len: usize,
    pub head: usize,
    pub v_head: usize,
    /// Q and Y in the `[B, S, H * d]` layout (else `[B, H, S, d]`); K and V likewise.
    pub q_3d: bool,
    pub kv_3d: bool,
}

impl AttnDims {
    pub fn total(&self) -> usize {
        self.past_len + self.kv_len
    }

    fn q_row(&self, b: usize, h: usize, i: usize) -> usize {
        if self.q_3d {
            ((b * self.q_len + i) * self.q_heads + h) * self.head
        } else {
            ((b * self.q_heads + h) * self.q_len + i) * self.head
        }
    }

    /// Offset of a new key (or value, with `width` = its head size) row.
    fn kv_row(&self, b: usize, h: usize, j: usize, width: usize) -> usize {
        if self.kv_3d {
            ((b * self.kv_len + j) * self.kv_heads + h) * width
        } else {
            ((b * self.kv_heads + h) * self.kv_len + j) * width
        }
    }

    fn cache_row(&self, b: usize, h: usize, j: usize, width: usize, len: usize) -> usize {
        ((b * self.kv_heads + h) * len + j) * width
    }
}

/// Which output to compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttnOut {
    Y,
    /// The cache after this step, `[B, Hkv, total, d]`.
    PresentKey,
    PresentValue,
    /// `Q K^T` scaled (mode 0), plus the bias (1), after softcap (2), after softmax (3):
    /// `[B, Hq, Sq, total]`.
    Scores(u8),
}

/// The inputs of one attention call.
pub struct AttnInputs<'a> {
    pub q: &'a [f32],
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub past_key: Option<&'a [f32]>,
    pub past_value: Option<&'a [f32]>,
}

/// Attention parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnParams {
    pub scale: f32,
    /// 0: none.
    pub softcap: f32,
    /// Mask key positions after the query's own (offset by the cache length).
    pub causal: bool,
}

/// Computes `out` into `y`. `bias(b, h, i, j)` is the additive bias of query `i` and key
/// `j` (mask and padding; -inf excludes); `scores` is scratch of at least `total` elements.
pub fn attention(
    d: &AttnDims,
    p: AttnParams,
    x: &AttnInputs<'_>,
    bias: &dyn Fn(usize, usize, usize, usize) -> f32,
    out: AttnOut,
    scores: &mut [f32],
    y: &mut [f32],
) {
    let total = d.total();
    match out {
        AttnOut::PresentKey | AttnOut::PresentValue => {
            let (new, past, width) = match out {
                AttnOut::PresentKey => (x.k, x.past_key, d.head),
                _ => (x.v, x.past_value, d.v_head),
            };
            for b in 0..d.batch {
                for h in 0..d.kv_heads {
                    for j in 0..total {
                        let dst = d.cache_row(b, h, j, width, total);
                        let src = if j < d.past_len {
                            &past.expect("a cache")[d.cache_row(b, h, j, width, d.past_len)..][..width]
                        } else {
                            &new[d.kv_row(b, h, j - d.past_len, width)..][..width]
                        };
                        y[dst..dst + width].copy_from_slice(src);
                    }
                }
            }
            return;
        }
        AttnOut::Y | AttnOut::Scores(_) => {}
    }
    let group = d.q_heads / d.kv_heads.max(1);
    let scores = &mut scores[..total];
    let key = |b: usize, kh: usize, j: usize| -> &[f32] {
        if j < d.past_len {
            &x.past_key.expect("a cache")[d.cache_row(b, kh, j, d.head, d.past_len)..][..d.head]
        } else {
            &x.k[d.kv_row(b, kh, j - d.past_len, d.head)..][..d.head]
        }
    };
    let value = |b: usize, kh: usize, j: usize| -> &[f32] {
        if j < d.past_len {
            &x.past_value.expect("a cache")[d.cache_row(b, kh, j, d.v_head, d.past_len)..][..d.v_head]
        } else {
            &x.v[d.kv_row(b, kh, j - d.past_len, d.v_head)..][..d.v_head]
        }
    };
    for b in 0..d.batch {
        for h in 0..d.q_heads {
            let kh = h / group.max(1);
            for i in 0..d.q_len {
                let q = &x.q[d.q_row(b, h, i)..][..d.head];
                for (j, s) in scores.iter_mut().enumerate() {
                    *s = dot(q, key(b, kh, j)) * p.scale;
                }
                let stage = match out {
                    AttnOut::Scores(m) => m,
                    _ => 3,
                };
                if stage >= 1 {
                    for (j, s) in scores.iter_mut().enumerate() {
                        let masked = p.causal && j > i + d.past_len;
                        *s += if masked { f32::NEG_INFINITY } else { bias(b, h, i, j) };
                    }
                }
                if stage >= 2 && p.softcap > 0.0 {
                    scores.iter_mut().for_each(|s| *s = p.softcap * (*s / p.softcap).tanh());
                }
                if stage >= 3 {
                    softmax_row(scores);
                }
                if let AttnOut::Scores(_) = out {
                    let at = ((b * d.q_heads + h) * d.q_len + i) * total;
                    y[at..at + total].copy_from_slice(scores);
                    continue;
                }
                let at = if d.q_3d {
                    ((b * d.q_len + i) * d.q_heads + h) * d.v_head
                } else {
                    ((b * d.q_heads + h) * d.q_len + i) * d.v_head
                };
                let row = &mut y[at..at + d.v_head];
                row.iter_mut().for_each(|v| *v = 0.0);
                for (j, &w) in scores.iter().enumerate() {
                    for (o, &v) in row.iter_mut().zip(value(b, kh, j)) {
                        *o += w * v;
                    }
                }
            }
        }
    }
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Four partial sums: lets the compiler vectorise without reassociating one chain.
    let mut acc = [0.0f32; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..4 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// Softmax in place; a row of only -inf gives NaN, as the definition does (0 / 0).
fn softmax_row(s: &mut [f32]) {
    let max = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for v in s.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let inv = 1.0 / sum;
    s.iter_mut().for_each(|v| *v *= inv);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One head, two keys: softmax weights by hand.
    #[test]
    fn one_head_by_hand() {
        let d = AttnDims {
            batch: 1,
            q_heads: 1,
            kv_heads: 1,
            q_len: 1,
            kv_len: 2,
            past_len: 0,
            head: 2,
            v_head: 1,
            q_3d: false,
            kv_3d: false,
        };
        let x =
            AttnInputs { q: &[1.0, 0.0], k: &[1.0, 0.0, 0.0, 1.0], v: &[10.0, 20.0], past_key: None, past_value: None };
        let p = AttnParams { scale: 1.0, softcap: 0.0, causal: false };
        let mut y = [0.0];
        let mut s = [0.0; 2];
        attention(&d, p, &x, &|_, _, _, _| 0.0, AttnOut::Y, &mut s, &mut y);
        let (w0, w1) = (1f32.exp() / (1f32.exp() + 1.0), 1.0 / (1f32.exp() + 1.0));
        assert!((y[0] - (10.0 * w0 + 20.0 * w1)).abs() < 1e-5, "{}", y[0]);
        // A -inf bias on key 0 leaves only key 1; causal with q_len 1 and no cache masks key 1.
        attention(&d, p, &x, &|_, _, _, j| if j == 0 { f32::NEG_INFINITY } else { 0.0 }, AttnOut::Y, &mut s, &mut y);
        assert_eq!(y[0], 20.0);
        let causal = AttnParams { causal: true, ..p };
        attention(&d, causal, &x, &|_, _, _, _| 0.0, AttnOut::Y, &mut s, &mut y);
        assert_eq!(y[0], 10.0);
    }
}
