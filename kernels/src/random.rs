//! MT19937, seeded and drawn as numpy's legacy `RandomState` does, so a seeded Dropout
//! mask, Bernoulli draw or RandomUniform / RandomNormal tensor is the one the ONNX
//! reference implementation draws (`RandomState(seed)` made afresh for each call).

/// The 32-bit Mersenne Twister (Matsumoto and Nishimura's MT19937).
pub struct Mt19937 {
    state: [u32; 624],
    at: usize,
}

impl Mt19937 {
    /// Seeded as `RandomState(seed)` seeds it (the reference `init_genrand`).
    pub fn new(seed: u32) -> Self {
        let mut state = [0u32; 624];
        state[0] = seed;
        for i in 1..624 {
            let prev = state[i - 1];
            state[i] = 1_812_433_253u32.wrapping_mul(prev ^ (prev >> 30)).wrapping_add(i as u32);
        }
        Self { state, at: 624 }
    }

    fn refill(&mut self) {
        for i in 0..624 {
            let y = (self.state[i] & 0x8000_0000) | (self.state[(i + 1) % 624] & 0x7fff_ffff);
            let mut next = self.state[(i + 397) % 624] ^ (y >> 1);
            if y & 1 != 0 {
                next ^= 0x9908_b0df;
            }
            self.state[i] = next;
        }
        self.at = 0;
    }

    /// The next 32-bit output.
    pub fn next_u32(&mut self) -> u32 {
        if self.at == 624 {
            self.refill();
        }
        let mut y = self.state[self.at];
        self.at += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// A double in [0, 1) from 53 random bits, as numpy's `random_sample`.
    pub fn uniform(&mut self) -> f64 {
        let a = self.next_u32() >> 5;
        let b = self.next_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) / 9_007_199_254_740_992.0
    }
}

/// numpy's legacy `RandomState` draws over one [`Mt19937`]: uniform doubles, normal ones
/// (Marsaglia's polar method, the second of each pair kept for the next call) and
/// Bernoulli ones (`binomial(1, p)` by inversion).
pub struct LegacyRandom {
    mt: Mt19937,
    gauss: Option<f64>,
}

impl LegacyRandom {
    /// As `RandomState(seed)`.
    pub fn new(seed: u32) -> Self {
        Self { mt: Mt19937::new(seed), gauss: None }
    }

    /// As `random_sample()`: a double in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.mt.uniform()
    }

    /// As `standard_normal()` (`legacy_gauss`).
    pub fn gauss(&mut self) -> f64 {
        if let Some(g) = self.gauss.take() {
            return g;
        }
        loop {
            let x1 = 2.0 * self.mt.uniform() - 1.0;
            let x2 = 2.0 * self.mt.uniform() - 1.0;
            let r2 = x1 * x1 + x2 * x2;
            if r2 < 1.0 && r2 != 0.0 {
                let f = (-2.0 * r2.ln() / r2).sqrt();
                self.gauss = Some(f * x1);
                return f * x2;
            }
        }
    }

    /// As `binomial(1, p)` for `p` in [0, 1] (NaN and values outside are the caller's to
    /// refuse): 1 with probability `p`. One draw each, as numpy's inversion takes it for
    /// one trial (`p` above one half runs as `1 - binomial(1, 1 - p)`).
    pub fn bernoulli(&mut self, p: f64) -> bool {
        if p <= 0.5 {
            self.inversion(p)
        } else {
            !self.inversion(1.0 - p)
        }
    }

    /// numpy's `random_binomial_inversion` for one trial, step for step (the loop's
    /// second pass is reached only when `exp(ln(q))` rounds below `q`).
    fn inversion(&mut self, p: f64) -> bool {
        let q = 1.0 - p;
        let qn = q.ln().exp();
        let bound = (p + 10.0 * (p * q + 1.0).sqrt()).min(1.0) as i64;
        let (mut x, mut px, mut u) = (0i64, qn, self.mt.uniform());
        while u > px {
            x += 1;
            if x > bound {
                (x, px, u) = (0, qn, self.mt.uniform());
            } else {
                u -= px;
                px = ((1 - x + 1) as f64 * p * px) / (x as f64 * q);
            }
        }
        x == 1
    }
}

/// A seed for an unseeded draw: a new one each call, from the clock and a count.
pub fn fresh_seed() -> u32 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    let n = DRAWS.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    // splitmix64's finaliser over both.
    let mut z = t ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_and_numpy() {
        // The reference implementation's default seed gives 3499211612 first.
        assert_eq!(Mt19937::new(5489).next_u32(), 3_499_211_612);
        // numpy: np.random.seed(0); np.random.random_sample(3)
        let mut r = Mt19937::new(0);
        let got: Vec<f64> = (0..3).map(|_| r.uniform()).collect();
        assert_eq!(got, [0.5488135039273248, 0.7151893663724195, 0.6027633760716439]);
        // Past the first refill (624 words = 312 doubles): random_sample(400)[-1].
        let mut r = Mt19937::new(0);
        assert_eq!((0..400).map(|_| r.uniform()).last(), Some(0.18523232523618394));
    }

    #[test]
    fn normal_draws_are_numpys_in_pairs() {
        // np.random.RandomState(0).randn(5); after randn(3) (two pairs, four uniforms),
        // random_sample() is the fifth uniform.
        let mut r = LegacyRandom::new(0);
        let got: Vec<f64> = (0..5).map(|_| r.gauss()).collect();
        assert_eq!(
            got,
            [1.764052345967664, 0.4001572083672233, 0.9787379841057392, 2.240893199201458, 1.8675579901499675]
        );
        let mut r = LegacyRandom::new(0);
        (0..3).for_each(|_| _ = r.gauss());
        assert_eq!(r.uniform(), 0.4236547993389047);
    }

    #[test]
    fn bernoulli_draws_are_numpys_binomial_of_one_trial() {
        // np.random.RandomState(3).binomial(1, p=[0, 1, .5, .25, .75, .9, .1, .5, .3, .7])
        let mut r = LegacyRandom::new(3);
        let p = [0.0, 1.0, 0.5, 0.25, 0.75, 0.9, 0.1, 0.5, 0.3, 0.7];
        let got: Vec<u8> = p.iter().map(|&p| u8::from(r.bernoulli(p))).collect();
        assert_eq!(got, [0, 1, 0, 0, 0, 1, 0, 0, 0, 1]);
        // One draw each (p = 0 too): the next uniform is numpy's 11th.
        assert_eq!(r.uniform(), 0.029876210878566956);
        // np.random.RandomState(7).binomial(1, p=np.linspace(0, 1, 40))
        let mut r = LegacyRandom::new(7);
        let got: Vec<u8> = (0..40).map(|i| u8::from(r.bernoulli(i as f64 / 39.0))).collect();
        let want = "0000100000010001001000110110111111111111";
        assert_eq!(got, want.bytes().map(|b| b - b'0').collect::<Vec<_>>());
    }
}
