//! Discrete Fourier transforms of one length, in float64: an iterative radix-2 FFT for
//! powers of two, else Bluestein's algorithm (the transform as a convolution of
//! power-of-two length, `O(n log n)` for any `n`), each with its tables made once per
//! length. DFT and STFT (`ep/src/ops/spectral.rs`) run their signals through it.

use std::f64::consts::PI;

/// A transform of `n` points: `X[k] = sum_j x[j] e^{∓2πi jk/n}` (minus forward, plus
/// inverse; no normalisation).
#[derive(Debug, Default)]
pub struct Dft {
    n: usize,
    /// For a power of two: `e^{-2πi k/n}` for `k < n/2`. For Bluestein: those of the
    /// power-of-two length `m` it convolves over.
    twiddle: Vec<(f64, f64)>,
    /// Bluestein only: the chirp `e^{-πi j²/n}` (j < n) and the FFT of its conjugate,
    /// zero-padded and wrapped to `m` points.
    chirp: Vec<(f64, f64)>,
    kernel: Vec<(f64, f64)>,
    /// Working buffer (`m` points) for Bluestein.
    work: Vec<(f64, f64)>,
}

/// `e^{-2πi k/n}` for `k < n/2`.
fn roots(n: usize) -> Vec<(f64, f64)> {
    (0..n / 2)
        .map(|k| {
            let t = -2.0 * PI * k as f64 / n as f64;
            (t.cos(), t.sin())
        })
        .collect()
}

#[inline(always)]
fn mul(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)
}

/// In-place radix-2 FFT of `x` (a power of two long) with `twiddle` = [`roots`] of its
/// length; `inverse` conjugates the roots.
fn fft_pow2(x: &mut [(f64, f64)], twiddle: &[(f64, f64)], inverse: bool) {
    let n = x.len();
    if n <= 1 {
        return;
    }
    let bits = n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - bits);
        if i < j {
            x.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let (half, step) = (len / 2, n / len);
        for start in (0..n).step_by(len) {
            for j in 0..half {
                let w = twiddle[j * step];
                let w = if inverse { (w.0, -w.1) } else { w };
                let (a, b) = (x[start + j], mul(x[start + j + half], w));
                x[start + j] = (a.0 + b.0, a.1 + b.1);
                x[start + j + half] = (a.0 - b.0, a.1 - b.1);
            }
        }
        len *= 2;
    }
}

impl Dft {
    /// An empty one: [`Dft::prepare`] makes its tables.
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes the tables for `n` points, unless they are for `n` already.
    pub fn prepare(&mut self, n: usize) {
        if self.n == n && (n < 2 || !self.twiddle.is_empty()) {
            return;
        }
        self.n = n;
        if n.is_power_of_two() {
            self.twiddle = roots(n);
            self.chirp.clear();
            self.kernel.clear();
            return;
        }
        // Bluestein: jk = (j² + k² - (k - j)²) / 2, so X[k] = c[k] · sum_j (x[j] c[j]) ·
        // conj(c[k - j]) with c[j] = e^{-πi j²/n}: a convolution, done over m ≥ 2n - 1
        // points by FFT.
        let m = (2 * n - 1).next_power_of_two();
        self.twiddle = roots(m);
        // j² mod 2n keeps the angle exact for large j.
        self.chirp = (0..n)
            .map(|j| {
                let t = -PI * ((j * j) % (2 * n)) as f64 / n as f64;
                (t.cos(), t.sin())
            })
            .collect();
        let mut kernel = vec![(0.0, 0.0); m];
        for j in 0..n {
            let c = (self.chirp[j].0, -self.chirp[j].1);
            kernel[j] = c;
            if j > 0 {
                kernel[m - j] = c;
            }
        }
        fft_pow2(&mut kernel, &self.twiddle, false);
        self.kernel = kernel;
        self.work = vec![(0.0, 0.0); m];
    }

    /// Transforms `x` (`n` points, after [`Dft::prepare`]) in place.
    pub fn run(&mut self, x: &mut [(f64, f64)], inverse: bool) {
        let n = self.n;
        assert_eq!(x.len(), n, "dft: {} points for a transform of {n}", x.len());
        if n.is_power_of_two() {
            return fft_pow2(x, &self.twiddle, inverse);
        }
        // The inverse is the forward transform of the conjugate, conjugated.
        let conj = |v: (f64, f64)| if inverse { (v.0, -v.1) } else { v };
        let m = self.work.len();
        let work = &mut self.work;
        for j in 0..m {
            work[j] = if j < n { mul(conj(x[j]), self.chirp[j]) } else { (0.0, 0.0) };
        }
        fft_pow2(work, &self.twiddle, false);
        for (w, &k) in work.iter_mut().zip(&self.kernel) {
            *w = mul(*w, k);
        }
        fft_pow2(work, &self.twiddle, true);
        let scale = 1.0 / m as f64;
        for (k, out) in x.iter_mut().enumerate() {
            let v = mul((work[k].0 * scale, work[k].1 * scale), self.chirp[k]);
            *out = conj(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[(f64, f64)], inverse: bool) -> Vec<(f64, f64)> {
        let n = x.len();
        let sign = if inverse { 1.0 } else { -1.0 };
        (0..n)
            .map(|k| {
                x.iter().enumerate().fold((0.0, 0.0), |acc, (j, &v)| {
                    let t = sign * 2.0 * PI * ((j * k) % n) as f64 / n as f64;
                    let p = mul(v, (t.cos(), t.sin()));
                    (acc.0 + p.0, acc.1 + p.1)
                })
            })
            .collect()
    }

    /// Every length from 1 to 70 and a few large ones, both directions, against the
    /// definition.
    #[test]
    fn transforms_match_the_definition() {
        let mut dft = Dft::new();
        for n in (1..=70).chain([128, 400, 512, 1000]) {
            let x: Vec<(f64, f64)> =
                (0..n).map(|j| (((j * 7) % 11) as f64 * 0.3 - 1.0, ((j * 5) % 13) as f64 * 0.2 - 1.2)).collect();
            dft.prepare(n);
            for inverse in [false, true] {
                let want = naive(&x, inverse);
                let mut got = x.clone();
                dft.run(&mut got, inverse);
                let scale = want.iter().map(|v| v.0.abs().max(v.1.abs())).fold(1.0, f64::max);
                for (k, (g, w)) in got.iter().zip(&want).enumerate() {
                    let err = (g.0 - w.0).abs().max((g.1 - w.1).abs());
                    assert!(err <= 1e-9 * scale, "n {n} inverse {inverse}: X[{k}] = {g:?}, want {w:?}");
                }
            }
        }
    }
}
