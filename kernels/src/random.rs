//! MT19937, seeded and drawn as numpy's legacy `RandomState` does, so a seeded Dropout
//! mask is the one the ONNX reference implementation draws.

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
}
