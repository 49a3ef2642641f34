//! Scaled dot-product attention (ONNX Attention, opset 23): multi-head, grouped-query and
//! multi-query heads, an additive bias (mask, causal, padding), softcap, a key/value cache.
//!
//! Q, K and V come as `[B, H, S, d]` or as `[B, S, H * d]`; either way one head's row of
//! one position is `d` contiguous elements, which is all the loops need.

pub mod chain;

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

/// The element types attention runs in: f32 (products through the packed SGEMM) and f64
/// (plain loops; float64 models are for accuracy, not speed).
pub trait AttnFloat:
    Copy
    + Default
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::AddAssign
    + std::ops::MulAssign
    + 'static
{
    const NEG_INFINITY: Self;
    const ONE: Self;
    fn from_f32(v: f32) -> Self;
    fn exp(self) -> Self;
    fn tanh(self) -> Self;
    fn max(self, b: Self) -> Self;
    /// Softmax of each row of `n` elements of `s` in place; a row of only -inf gives NaN,
    /// as the definition does (0 / 0).
    fn softmax_rows(s: &mut [Self], n: usize) {
        s.chunks_exact_mut(n.max(1)).for_each(softmax_row)
    }
    /// `c = alpha * a * op(b)` for row-major `a` m×k and `b` k×n (n×k with `trans_b`).
    #[allow(clippy::too_many_arguments)]
    fn matmul(
        m: usize,
        n: usize,
        k: usize,
        alpha: Self,
        a: &[Self],
        b: &[Self],
        trans_b: bool,
        scratch: &mut crate::gemm::GemmScratch,
        c: &mut [Self],
    );
}

impl AttnFloat for f32 {
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
    const ONE: f32 = 1.0;
    fn from_f32(v: f32) -> f32 {
        v
    }
    fn exp(self) -> f32 {
        f32::exp(self)
    }
    fn tanh(self) -> f32 {
        f32::tanh(self)
    }
    fn max(self, b: f32) -> f32 {
        f32::max(self, b)
    }
    /// In 16 lanes, `e^x` on the unary kernel's vectorised build, one call for all rows.
    fn softmax_rows(s: &mut [f32], n: usize) {
        crate::norm::softmax_rows_in_place(s, n)
    }
    fn matmul(
        m: usize,
        n: usize,
        k: usize,
        alpha: f32,
        a: &[f32],
        b: &[f32],
        trans_b: bool,
        scratch: &mut crate::gemm::GemmScratch,
        c: &mut [f32],
    ) {
        crate::gemm::gemm_with(scratch, m, n, k, alpha, a, false, b, trans_b, 0.0, c);
    }
}

impl AttnFloat for f64 {
    const NEG_INFINITY: f64 = f64::NEG_INFINITY;
    const ONE: f64 = 1.0;
    fn from_f32(v: f32) -> f64 {
        f64::from(v)
    }
    fn exp(self) -> f64 {
        f64::exp(self)
    }
    fn tanh(self) -> f64 {
        f64::tanh(self)
    }
    fn max(self, b: f64) -> f64 {
        f64::max(self, b)
    }
    fn matmul(
        m: usize,
        n: usize,
        k: usize,
        alpha: f64,
        a: &[f64],
        b: &[f64],
        trans_b: bool,
        _: &mut crate::gemm::GemmScratch,
        c: &mut [f64],
    ) {
        for i in 0..m {
            for j in 0..n {
                let at = |p: usize| if trans_b { b[j * k + p] } else { b[p * n + j] };
                let acc: f64 = (0..k).map(|p| a[i * k + p] * at(p)).sum();
                c[i * n + j] = alpha * acc;
            }
        }
    }
}

/// The inputs of one attention call.
pub struct AttnInputs<'a, T> {
    pub q: &'a [T],
    pub k: &'a [T],
    pub v: &'a [T],
    pub past_key: Option<&'a [T]>,
    pub past_value: Option<&'a [T]>,
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

/// One task's scratch: one head's Q, K, V, scores and output, packed contiguous, and the
/// products' packing buffers. Each grows to the largest it has needed.
#[derive(Debug, Default)]
pub struct AttnScratch<T> {
    q: Vec<T>,
    k: Vec<T>,
    v: Vec<T>,
    s: Vec<T>,
    y: Vec<T>,
    gemm: crate::gemm::GemmScratch,
}

fn sized<T: AttnFloat>(v: &mut Vec<T>, len: usize) -> &mut [T] {
    if v.len() < len {
        v.resize(len, T::default());
    }
    &mut v[..len]
}

/// Adds the bias of query `i` of head `h` in batch `b` to its row of scores:
/// `bias(b, h, i, row)`.
pub type AttnBias<'a, T> = &'a (dyn Fn(usize, usize, usize, &mut [T]) + Sync);

/// The elements of `out` that one group (a batch's key/value head and the query heads it
/// serves) writes, when each group's are one contiguous run (`[B, H, S, d]` outputs and
/// the scores), so that [`attention_groups`] can split them: `None` for `[B, S, H * d]`
/// and for the caches.
pub fn group_len(d: &AttnDims, out: AttnOut) -> Option<usize> {
    let group = d.q_heads / d.kv_heads.max(1);
    match out {
        AttnOut::Y if !d.q_3d => Some(group * d.q_len * d.v_head),
        AttnOut::Scores(_) => Some(group * d.q_len * d.total()),
        _ => None,
    }
}

/// Computes `out` into `y`. `bias(b, h, i, row)` adds the bias of query `i` to its row of
/// scores, one per key (mask and padding; -inf excludes); `None` when there is none. Each head's products are matrix products through
/// the packed SGEMM; its rows are packed contiguous first.
#[allow(clippy::too_many_arguments)]
pub fn attention<T: AttnFloat>(
    d: &AttnDims,
    p: AttnParams,
    x: &AttnInputs<'_, T>,
    bias: Option<AttnBias<'_, T>>,
    out: AttnOut,
    scratch: &mut AttnScratch<T>,
    y: &mut [T],
) {
    attention_groups(d, p, x, bias, out, scratch, 0..d.batch * d.kv_heads, y);
}

/// [`attention`] of groups `groups` only (group `b * kv_heads + kh`: batch `b`'s key/value
/// head `kh` and its query heads), for an output whose groups are contiguous
/// ([`group_len`]); `y` is their part of it. Each group is computed as `attention`
/// computes it, so a split gives the same bits. Panics for an output without groups
/// unless `groups` covers them all.
#[allow(clippy::too_many_arguments)]
pub fn attention_groups<T: AttnFloat>(
    d: &AttnDims,
    p: AttnParams,
    x: &AttnInputs<'_, T>,
    bias: Option<AttnBias<'_, T>>,
    out: AttnOut,
    scratch: &mut AttnScratch<T>,
    groups: std::ops::Range<usize>,
    y: &mut [T],
) {
    let (kv_heads, total) = (d.kv_heads.max(1), d.total());
    // Where group `groups.start` starts in the whole output.
    let base = match group_len(d, out) {
        Some(len) => groups.start * len,
        None => {
            assert!(groups == (0..d.batch * d.kv_heads), "attention: this output is not split by groups");
            0
        }
    };
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
                        y[dst..dst + width].copy_from_slice(row_of(d, new, past, b, h, j, width));
                    }
                }
            }
            return;
        }
        AttnOut::Y | AttnOut::Scores(_) => {}
    }
    let stage = match out {
        AttnOut::Scores(m) => m,
        _ => 3,
    };
    let group = d.q_heads / kv_heads;
    let AttnScratch { q, k, v, s, y: yh, gemm } = scratch;
    let (q, k, v) = (sized(q, d.q_len * d.head), sized(k, total * d.head), sized(v, total * d.v_head));
    let (s, yh) = (sized(s, d.q_len * total), sized(yh, d.q_len * d.v_head));
    // A head's rows are read in place where they are one run already ([B, H, S, d], no
    // cache), else gathered into the scratch first.
    let kv_in_place = !d.kv_3d && d.past_len == 0;
    for g in groups {
        let (b, kh) = (g / kv_heads, g % kv_heads);
        let (k, v): (&[T], &[T]) = if kv_in_place {
            let (kr, vr) = (d.kv_row(b, kh, 0, d.head), d.kv_row(b, kh, 0, d.v_head));
            (&x.k[kr..][..total * d.head], &x.v[vr..][..total * d.v_head])
        } else {
            for j in 0..total {
                k[j * d.head..][..d.head].copy_from_slice(row_of(d, x.k, x.past_key, b, kh, j, d.head));
                v[j * d.v_head..][..d.v_head].copy_from_slice(row_of(d, x.v, x.past_value, b, kh, j, d.v_head));
            }
            (&k[..], &v[..])
        };
        for h in kh * group..(kh + 1) * group {
            let q: &[T] = if d.q_3d {
                for i in 0..d.q_len {
                    q[i * d.head..][..d.head].copy_from_slice(&x.q[d.q_row(b, h, i)..][..d.head]);
                }
                q
            } else {
                &x.q[d.q_row(b, h, 0)..][..d.q_len * d.head]
            };
            T::matmul(d.q_len, total, d.head, T::from_f32(p.scale), q, k, true, gemm, s);
            for (i, row) in s.chunks_mut(total.max(1)).enumerate() {
                if stage >= 1 {
                    if let Some(bias) = bias {
                        bias(b, h, i, row);
                    }
                    if p.causal {
                        // Keys after the query's own position (offset by the cache).
                        row.iter_mut().skip(i + d.past_len + 1).for_each(|e| *e = T::NEG_INFINITY);
                    }
                }
                if stage >= 2 && p.softcap > 0.0 {
                    let cap = T::from_f32(p.softcap);
                    row.iter_mut().for_each(|e| *e = cap * (*e / cap).tanh());
                }
            }
            if stage >= 3 {
                T::softmax_rows(s, total);
            }
            if let AttnOut::Scores(_) = out {
                let at = (b * d.q_heads + h) * d.q_len * total - base;
                y[at..at + d.q_len * total].copy_from_slice(s);
                continue;
            }
            if !d.q_3d {
                // The head's output rows are one run of Y: written in place.
                let at = (b * d.q_heads + h) * d.q_len * d.v_head - base;
                T::matmul(d.q_len, d.v_head, total, T::ONE, s, v, false, gemm, &mut y[at..][..d.q_len * d.v_head]);
                continue;
            }
            T::matmul(d.q_len, d.v_head, total, T::ONE, s, v, false, gemm, yh);
            for i in 0..d.q_len {
                let at = if d.q_3d {
                    ((b * d.q_len + i) * d.q_heads + h) * d.v_head
                } else {
                    ((b * d.q_heads + h) * d.q_len + i) * d.v_head
                } - base;
                y[at..at + d.v_head].copy_from_slice(&yh[i * d.v_head..][..d.v_head]);
            }
        }
    }
}

/// Row `j` of the keys (or values) after the cache: from the cache, then the new ones.
#[allow(clippy::too_many_arguments)]
fn row_of<'a, T>(
    d: &AttnDims,
    new: &'a [T],
    past: Option<&'a [T]>,
    b: usize,
    h: usize,
    j: usize,
    width: usize,
) -> &'a [T] {
    if j < d.past_len {
        &past.expect("a cache")[d.cache_row(b, h, j, width, d.past_len)..][..width]
    } else {
        &new[d.kv_row(b, h, j - d.past_len, width)..][..width]
    }
}

/// Softmax in place; a row of only -inf gives NaN, as the definition does (0 / 0).
fn softmax_row<T: AttnFloat>(s: &mut [T]) {
    let max = s.iter().copied().fold(T::NEG_INFINITY, T::max);
    let mut sum = T::default();
    for v in s.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    let inv = T::ONE / sum;
    s.iter_mut().for_each(|v| *v *= inv);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Groups of heads computed apart (as the tasks of a split compute them, each in its
    /// own scratch) give the whole call's bits, for the output and the scores.
    #[test]
    fn groups_computed_apart_give_the_whole_bits() {
        let d = AttnDims {
            batch: 2,
            q_heads: 4,
            kv_heads: 2,
            q_len: 20,
            kv_len: 30,
            past_len: 5,
            head: 24,
            v_head: 40,
            q_3d: false,
            kv_3d: true,
        };
        let vals = |n: usize, seed: u32| -> Vec<f32> {
            (0..n)
                .map(|i| ((i as u32).wrapping_mul(2_654_435_761).wrapping_add(seed) >> 8) as f32 / 8e6 - 1.0)
                .collect()
        };
        let (q, k, v) = (vals(2 * 4 * 20 * 24, 1), vals(2 * 30 * 2 * 24, 2), vals(2 * 30 * 2 * 40, 3));
        let (pk, pv) = (vals(2 * 2 * 5 * 24, 4), vals(2 * 2 * 5 * 40, 5));
        let x = AttnInputs { q: &q, k: &k, v: &v, past_key: Some(&pk), past_value: Some(&pv) };
        let p = AttnParams { scale: 0.2, softcap: 0.0, causal: true };
        let bias = |b: usize, h: usize, i: usize, row: &mut [f32]| {
            row.iter_mut().enumerate().for_each(|(j, e)| *e += ((b + h + i + j) % 5) as f32 * 0.1)
        };
        for out in [AttnOut::Y, AttnOut::Scores(3), AttnOut::Scores(1)] {
            let len = group_len(&d, out).expect("4-D output and scores have groups");
            let mut whole = vec![f32::NAN; 4 * len];
            attention(&d, p, &x, Some(&bias), out, &mut AttnScratch::default(), &mut whole);
            let mut parts = vec![f32::NAN; 4 * len];
            for groups in [0..1, 1..3, 3..4] {
                let part = &mut parts[groups.start * len..groups.end * len];
                attention_groups(&d, p, &x, Some(&bias), out, &mut AttnScratch::default(), groups, part);
            }
            let same = whole.iter().zip(&parts).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{out:?}: groups apart differ from the whole");
            assert!(whole.iter().all(|v| !v.is_nan()), "{out:?}: left unwritten");
        }
        // [B, S, H * d] interleaves the groups: not split.
        assert_eq!(group_len(&AttnDims { q_3d: true, ..d }, AttnOut::Y), None);
    }

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
        let mut s = AttnScratch::default();
        attention(&d, p, &x, None, AttnOut::Y, &mut s, &mut y);
        let (w0, w1) = (1f32.exp() / (1f32.exp() + 1.0), 1.0 / (1f32.exp() + 1.0));
        assert!((y[0] - (10.0 * w0 + 20.0 * w1)).abs() < 1e-5, "{}", y[0]);
        // A -inf bias on key 0 leaves only key 1; causal with q_len 1 and no cache masks key 1.
        attention(&d, p, &x, Some(&|_, _, _, row: &mut [f32]| row[0] += f32::NEG_INFINITY), AttnOut::Y, &mut s, &mut y);
        assert_eq!(y[0], 20.0);
        let causal = AttnParams { causal: true, ..p };
        attention(&d, causal, &x, Some(&|_, _, _, _: &mut [f32]| {}), AttnOut::Y, &mut s, &mut y);
        assert_eq!(y[0], 10.0);
    }
}
