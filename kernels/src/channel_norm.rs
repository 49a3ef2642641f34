//! Normalizations over channels and planes: BatchNormalization (inference),
//! InstanceNormalization, GroupNormalization, LRN across channels, and LayerNormalization's
//! per-row statistics. (Softmax and LayerNormalization itself are in `norm`.)

/// Inference batch normalization of `x` viewed as `[batch, channels, spatial]`.
#[allow(clippy::too_many_arguments)]
pub fn batch_norm(
    x: &[f32],
    scale: &[f32],
    bias: &[f32],
    mean: &[f32],
    var: &[f32],
    epsilon: f32,
    channels: usize,
    spatial: usize,
    y: &mut [f32],
) {
    assert_eq!(x.len(), y.len());
    for (block, (xs, ys)) in x.chunks(spatial.max(1)).zip(y.chunks_mut(spatial.max(1))).enumerate() {
        let ch = block % channels.max(1);
        let (g, sh) = batch_norm_terms(scale, bias, mean, var, epsilon, ch);
        for (o, &v) in ys.iter_mut().zip(xs) {
            *o = v * g + sh;
        }
    }
}

/// Channel `ch`'s factor and shift of inference BatchNormalization, `y = x · g + s`:
/// `g = scale / sqrt(var + epsilon)`, `s = bias - mean · g` (for [`batch_norm`] and for
/// the terms a fused chain starts from, so both round them alike).
#[inline]
pub fn batch_norm_terms(scale: &[f32], bias: &[f32], mean: &[f32], var: &[f32], epsilon: f32, ch: usize) -> (f32, f32) {
    let g = scale[ch] / (var[ch] + epsilon).sqrt();
    (g, bias[ch] - mean[ch] * g)
}

/// Instance normalization of `x` viewed as `[planes, spatial]`: each plane normalized to
/// zero mean and unit variance, then scaled and shifted by its channel's parameters;
/// plane `p` of `x` is plane `first + p` of the tensor (its channel `(first + p) %
/// channels`), so that a split over planes gives the whole's values. Built for the
/// widest instruction set (`arch::widest`): the same operations in the same order on
/// every build.
#[allow(clippy::too_many_arguments)]
pub fn instance_norm(
    x: &[f32],
    scale: &[f32],
    bias: &[f32],
    epsilon: f32,
    channels: usize,
    spatial: usize,
    first: usize,
    y: &mut [f32],
) {
    if spatial == 0 {
        return;
    }
    for (p, (xs, ys)) in x.chunks(spatial).zip(y.chunks_mut(spatial)).enumerate() {
        let c = (first + p) % channels;
        if !crate::arch::instance_plane(xs, ys, scale[c], bias[c], epsilon) {
            crate::arch::widest(
                #[inline(always)]
                || instance_plane(xs, ys, scale[c], bias[c], epsilon),
            );
        }
    }
}

/// One plane of [`instance_norm`], portable: the mean and the variance summed in float64
/// ([`lane_sum`]), then `(x - mean) * g + bias` in float32.
#[inline(always)]
fn instance_plane(xs: &[f32], ys: &mut [f32], scale: f32, bias: f32, epsilon: f32) {
    let n = xs.len() as f64;
    let mean = lane_sum(xs, |v| v) / n;
    let var = lane_sum(xs, |v| (v - mean) * (v - mean)) / n;
    let g = (f64::from(scale) / (var + f64::from(epsilon)).sqrt()) as f32;
    let mean = mean as f32;
    for (o, &v) in ys.iter_mut().zip(xs) {
        *o = (v - mean) * g + bias;
    }
}

/// The sum of `f(x[i])` in float64, `x[i]` widened: in 32 lanes (element `i` into lane
/// `i % 32`), then the lanes halved in a tree (lane `j` plus lane `j + half`) and the
/// rest in order. The lanes are independent chains of additions in vector registers,
/// where one running sum was a chain of dependent scalar additions (instance
/// normalization of `[1, 64, 56, 56]` took 4.6x ORT's time; with 8 lanes, which LLVM
/// kept in four two-lane registers, 1.5x). In float64 the order moves a plane's mean and
/// variance by a few ulp of float64, far below float32's.
#[inline(always)]
fn lane_sum(x: &[f32], f: impl Fn(f64) -> f64) -> f64 {
    const LANES: usize = 32;
    let (chunks, rest) = x.as_chunks::<LANES>();
    let mut acc = [0.0f64; LANES];
    for c in chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            *a += f(f64::from(v));
        }
    }
    let mut half = LANES / 2;
    while half > 0 {
        for j in 0..half {
            acc[j] += acc[j + half];
        }
        half /= 2;
    }
    rest.iter().fold(acc[0], |s, &v| s + f(f64::from(v)))
}

/// Local response normalization across channels of `x` viewed as
/// `[batch, channels, spatial]`: `y = x / (bias + alpha / size · Σ x²)^beta` over a
/// window of `size` channels. Vectorised plane by plane: the window's squares summed in
/// the output plane, then the power as two square roots for the common beta of 0.75
/// (2-3 ulp from powf) and one for 0.5, where every base of the plane is positive and
/// finite; powf otherwise.
#[allow(clippy::too_many_arguments)]
pub fn lrn(
    x: &[f32],
    batch: usize,
    channels: usize,
    spatial: usize,
    size: usize,
    alpha: f32,
    beta: f32,
    bias: f32,
    y: &mut [f32],
) {
    let before = (size - 1) / 2;
    let after = size - 1 - before;
    let k = alpha / size as f32;
    if spatial == 0 {
        return;
    }
    for n in 0..batch {
        let planes = &x[n * channels * spatial..][..channels * spatial];
        let outs = &mut y[n * channels * spatial..][..channels * spatial];
        for (c, out) in outs.chunks_exact_mut(spatial).enumerate() {
            // The window's sum of squares, plane by plane in channel order (each element's
            // sum in the order of the scalar definition), in the output plane.
            let (lo, hi) = (c.saturating_sub(before), (c + after).min(channels - 1));
            out.fill(0.0);
            for ch in lo..=hi {
                for (o, &v) in out.iter_mut().zip(&planes[ch * spatial..][..spatial]) {
                    *o += v * v;
                }
            }
            let xc = &planes[c * spatial..][..spatial];
            out.iter_mut().for_each(|o| *o = bias + k * *o);
            // The square roots where every base is positive and finite (elsewhere they
            // differ from pow: -0, -inf, a negative base with an integer beta).
            let tame = out.iter().fold(true, |t, &b| t & (b > 0.0) & (b < f32::INFINITY));
            if tame && beta == 0.75 {
                // base^0.75 as sqrt(base) * sqrt(sqrt(base)): AlexNet's, GoogLeNet's and
                // CaffeNet's beta, without a pow per element.
                for (o, &v) in out.iter_mut().zip(xc) {
                    let r = o.sqrt();
                    *o = v / (r * r.sqrt());
                }
            } else if tame && beta == 0.5 {
                out.iter_mut().zip(xc).for_each(|(o, &v)| *o = v / o.sqrt());
            } else {
                out.iter_mut().zip(xc).for_each(|(o, &v)| *o = v / o.powf(beta));
            }
        }
    }
}

/// Per row of `n` elements: the mean, or `1 / sqrt(variance + epsilon)` (LayerNormalization's
/// second and third outputs), computed as `layer_norm` does.
pub fn norm_stats(x: &[f32], n: usize, epsilon: f32, inverse_std: bool, y: &mut [f32]) {
    for (row, o) in x.chunks(n.max(1)).zip(y.iter_mut()) {
        let mean = row.iter().sum::<f32>() / n as f32;
        *o = if inverse_std {
            let var = row.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>() / n as f32;
            1.0 / (var + epsilon).sqrt()
        } else {
            mean
        };
    }
}

/// GroupNormalization of `x` viewed as `[batch, channels, spatial]`: each group of
/// `channels / groups` channels is normalized over its channels and positions, then
/// scaled and shifted per channel (`per_channel`) or per group.
#[allow(clippy::too_many_arguments)]
pub fn group_norm<T: crate::typed::Number>(
    x: &[T],
    scale: &[T],
    bias: &[T],
    batch: usize,
    channels: usize,
    spatial: usize,
    groups: usize,
    epsilon: f32,
    per_channel: bool,
    y: &mut [T],
) {
    let per_group = channels / groups.max(1);
    let len = per_group * spatial;
    for n in 0..batch {
        for g in 0..groups {
            let at = (n * channels + g * per_group) * spatial;
            let xs = &x[at..at + len];
            let mean = xs.iter().map(|&v| v.to_f64()).sum::<f64>() / len as f64;
            let var = xs.iter().map(|&v| (v.to_f64() - mean).powi(2)).sum::<f64>() / len as f64;
            let inv = 1.0 / (var + epsilon as f64).sqrt();
            for c in 0..per_group {
                let k = if per_channel { g * per_group + c } else { g };
                let (sc, b) = (scale[k], bias[k]);
                let row = at + c * spatial;
                for (o, &v) in y[row..row + spatial].iter_mut().zip(&x[row..row + spatial]) {
                    *o = T::from_f64((v.to_f64() - mean) * inv).mul(sc).add(b);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Instance normalization against float64 arithmetic in one running sum, on planes
    /// of 37 and 100 (lanes and a rest); a split at plane 2 (`first`) gives the whole's
    /// bits.
    #[test]
    fn instance_norm_matches_float64_and_splits_by_planes() {
        let (channels, batch) = (3, 2);
        for spatial in [37, 100] {
            let n = batch * channels * spatial;
            let x: Vec<f32> = (0..n).map(|i| ((i * 7919 % 1009) as f32) * 0.01 - 3.0 + (i / spatial) as f32).collect();
            let (scale, bias) = ([0.5f32, 2.0, -1.0], [0.25f32, -3.0, 1.0]);
            let mut y = vec![0.0; n];
            super::instance_norm(&x, &scale, &bias, 1e-5, channels, spatial, 0, &mut y);
            for (p, (xs, ys)) in x.chunks(spatial).zip(y.chunks(spatial)).enumerate() {
                let mean = xs.iter().map(|&v| f64::from(v)).sum::<f64>() / spatial as f64;
                let var = xs.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / spatial as f64;
                let c = p % channels;
                for (&v, &o) in xs.iter().zip(ys) {
                    let want = (f64::from(v) - mean) / (var + 1e-5).sqrt() * f64::from(scale[c]) + f64::from(bias[c]);
                    assert!((f64::from(o) - want).abs() <= 1e-5 * (1.0 + want.abs()), "plane {p}: {o} against {want}");
                }
            }
            let mut parts = vec![f32::NAN; n];
            let (lo, hi) = parts.split_at_mut(2 * spatial);
            super::instance_norm(&x[..2 * spatial], &scale, &bias, 1e-5, channels, spatial, 0, lo);
            super::instance_norm(&x[2 * spatial..], &scale, &bias, 1e-5, channels, spatial, 2, hi);
            assert!(parts.iter().zip(&y).all(|(a, b)| a.to_bits() == b.to_bits()), "split at plane 2");
        }
    }

    /// The AVX-512 plane gives the portable plane's bits (its float64 lanes' sums in the
    /// same tree and order): planes shorter than the 32 lanes, of whole lane rows, with a
    /// rest, a constant one (variance 0), large offsets; NaN where the portable has one.
    #[test]
    fn instance_planes_give_the_portable_planes_bits() {
        for (len, offset) in [(1usize, 0.0f32), (31, 1.0), (32, -2.0), (37, 1e4), (100, 0.5), (3141, -7.0), (64, 3.0)] {
            let mut x: Vec<f32> = (0..len).map(|i| ((i * 7919 % 1009) as f32) * 0.01 + offset).collect();
            if len == 64 {
                x.fill(3.0);
            }
            for (scale, bias) in [(0.5f32, 0.25f32), (-2.0, 1e-3)] {
                let (mut fast, mut portable) = (vec![0.0; len], vec![0.0; len]);
                if !crate::arch::instance_plane(&x, &mut fast, scale, bias, 1e-5) {
                    return;
                }
                super::instance_plane(&x, &mut portable, scale, bias, 1e-5);
                let same =
                    fast.iter().zip(&portable).all(|(a, b)| a.to_bits() == b.to_bits() || a.is_nan() && b.is_nan());
                assert!(same, "plane of {len} (+{offset}), scale {scale}");
            }
        }
    }

    /// LRN against its scalar definition (the kernel before it was vectorised): the
    /// square-root betas within 4 ulp where every base is positive and finite, and the
    /// same bits from powf elsewhere (beta 0 on a zero base, a negative base with an
    /// integer beta, other betas on large values).
    #[test]
    fn lrn_matches_its_scalar_definition() {
        let reference = |x: &[f32], c: usize, sp: usize, size: usize, alpha: f32, beta: f32, bias: f32| {
            let (before, after) = ((size - 1) / 2, size - 1 - (size - 1) / 2);
            let mut y = vec![0.0f32; x.len()];
            for ch in 0..c {
                let (lo, hi) = (ch.saturating_sub(before), (ch + after).min(c - 1));
                for s in 0..sp {
                    let sum: f32 = (lo..=hi).map(|k| x[k * sp + s] * x[k * sp + s]).sum();
                    y[ch * sp + s] = x[ch * sp + s] / (bias + alpha / size as f32 * sum).powf(beta);
                }
            }
            y
        };
        let (c, sp) = (7, 37);
        for (scale, zero) in [(1.0f32, false), (1e15, false), (1.0, true)] {
            let x: Vec<f32> =
                crate::test_values(c * sp, 5).iter().map(|v| if zero { 0.0 } else { v * scale }).collect();
            for (size, alpha, beta, bias) in [
                (5, 1e-4, 0.75, 1.0),
                (4, 1.0, 0.75, 2.0),
                (3, 2e-4, 0.5, 2.0),
                (5, 1.0, 0.9, 1.0),
                (5, 1e-4, 0.0, 0.0),
                (3, 1e-4, 1.0, -1.0),
                (3, 1e-4, 0.75, -1.0),
            ] {
                let mut y = vec![0.0; x.len()];
                lrn(&x, 1, c, sp, size, alpha, beta, bias, &mut y);
                let want = reference(&x, c, sp, size, alpha, beta, bias);
                for (i, (&a, &b)) in y.iter().zip(&want).enumerate() {
                    let ulps = (a.to_bits() as i64 - b.to_bits() as i64).abs();
                    let same = a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan());
                    let sqrt_beta = (beta == 0.75 || beta == 0.5) && a.is_finite() && b.is_finite();
                    assert!(same || sqrt_beta && ulps <= 4, "beta {beta} bias {bias} scale {scale} at {i}: {a} vs {b}");
                }
            }
        }
    }
}
