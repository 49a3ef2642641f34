//! 8-bit floats, as ONNX defines them (FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2,
//! FLOAT8E5M2FNUZ): decoded to f32 exactly, encoded from f32 rounding to nearest even.
//!
//! Encoding follows ONNX's Cast: with `saturate`, a value beyond the largest finite one
//! (infinities included) becomes that value with its sign; without, it becomes NaN (the
//! E4M3FN and FNUZ formats have no infinity) or, for E5M2, an infinity. The FNUZ formats
//! have one NaN (0x80) and no negative zero.

/// One of the four 8-bit float formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F8 {
    E4M3FN,
    E4M3FNUZ,
    E5M2,
    E5M2FNUZ,
}

impl F8 {
    pub const ALL: [F8; 4] = [F8::E4M3FN, F8::E4M3FNUZ, F8::E5M2, F8::E5M2FNUZ];

    const fn mantissa_bits(self) -> u32 {
        match self {
            F8::E4M3FN | F8::E4M3FNUZ => 3,
            F8::E5M2 | F8::E5M2FNUZ => 2,
        }
    }

    const fn bias(self) -> i32 {
        match self {
            F8::E4M3FN => 7,
            F8::E4M3FNUZ => 8,
            F8::E5M2 => 15,
            F8::E5M2FNUZ => 16,
        }
    }

    /// The code of the largest finite value (sign clear).
    const fn max_code(self) -> u32 {
        match self {
            F8::E4M3FN => 0x7e,
            F8::E4M3FNUZ | F8::E5M2FNUZ => 0x7f,
            F8::E5M2 => 0x7b,
        }
    }

    const fn unsigned_zero(self) -> bool {
        matches!(self, F8::E4M3FNUZ | F8::E5M2FNUZ)
    }

    /// The code's value (exact; a NaN keeps the code's sign bit, as ml_dtypes and ORT
    /// decode it: the FNUZ formats' one NaN, 0x80, is negative).
    pub fn to_f32(self, b: u8) -> f32 {
        let negative = b & 0x80 != 0;
        let nan = if negative { -f32::NAN } else { f32::NAN };
        let m = self.mantissa_bits();
        let magnitude = u32::from(b & 0x7f);
        let e = (magnitude >> m) as i32;
        let man = magnitude & ((1 << m) - 1);
        match self {
            F8::E4M3FN if magnitude == 0x7f => return nan,
            F8::E4M3FNUZ | F8::E5M2FNUZ if b == 0x80 => return nan,
            F8::E5M2 if e == 0x1f => {
                return match (man, negative) {
                    (0, false) => f32::INFINITY,
                    (0, true) => f32::NEG_INFINITY,
                    _ => nan,
                };
            }
            _ => {}
        }
        // Powers of two and small integers: every step is exact.
        let v = if e == 0 {
            man as f32 * pow2(1 - self.bias() - m as i32)
        } else {
            (((1 << m) | man) as f32) * pow2(e - self.bias() - m as i32)
        };
        if negative {
            -v
        } else {
            v
        }
    }

    /// The code of `x`, rounded to nearest even.
    pub fn from_f32(self, x: f32, saturate: bool) -> u8 {
        let sign: u32 = if x.is_sign_negative() { 0x80 } else { 0 };
        if x.is_nan() {
            return self.nan(sign);
        }
        let a = x.abs();
        let m = self.mantissa_bits();
        let min_normal_exp = 1 - self.bias();
        let bits = a.to_bits();
        let exp = (bits >> 23) as i32 - 127;
        let code = if exp >= min_normal_exp {
            // Round the f32 bits to m mantissa bits (a carry moves into the exponent),
            // then rebias the exponent.
            let shift = 23 - m;
            let rounded = (bits + ((1 << (shift - 1)) - 1) + ((bits >> shift) & 1)) >> shift;
            rounded - (((127 - self.bias()) as u32) << m)
        } else {
            // Below the smallest normal: a multiple of the smallest subnormal. The scaling
            // is by a power of two and the product is below 2^m, so it is exact.
            (a * pow2(m as i32 - min_normal_exp)).round_ties_even() as u32
        };
        let code = if code > self.max_code() {
            if saturate {
                self.max_code()
            } else {
                return match self {
                    F8::E5M2 => (0x7c | sign) as u8,
                    _ => self.nan(sign),
                };
            }
        } else {
            code
        };
        if code == 0 && self.unsigned_zero() {
            0
        } else {
            (code | sign) as u8
        }
    }

    fn nan(self, sign: u32) -> u8 {
        match self {
            F8::E4M3FN => (0x7f | sign) as u8,
            F8::E5M2 => (0x7e | sign) as u8,
            F8::E4M3FNUZ | F8::E5M2FNUZ => 0x80,
        }
    }
}

/// 2^e for the exponents 8-bit floats reach (|e| < 127).
fn pow2(e: i32) -> f32 {
    f32::from_bits(((127 + e) as u32) << 23)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code decodes to a value that encodes back to it (NaNs to the format's NaN),
    /// saturating or not.
    #[test]
    fn every_code_round_trips() {
        for f in F8::ALL {
            for b in 0..=255u8 {
                let v = f.to_f32(b);
                for saturate in [false, true] {
                    let back = f.from_f32(v, saturate);
                    if v.is_nan() {
                        assert!(f.to_f32(back).is_nan(), "{f:?} {b:#04x}");
                        assert_eq!(
                            v.to_bits(),
                            if b & 0x80 != 0 { 0xffc0_0000 } else { 0x7fc0_0000 },
                            "{f:?} {b:#04x}"
                        );
                        assert_eq!(back & 0x80, if f.unsigned_zero() { 0x80 } else { b & 0x80 }, "{f:?} {b:#04x}");
                    } else if v.is_infinite() {
                        let want = if saturate { f.max_code() as u8 | (b & 0x80) } else { b };
                        assert_eq!(back, want, "{f:?} {b:#04x} saturate {saturate}");
                    } else if f.unsigned_zero() && b == 0 {
                        assert_eq!(back, 0);
                    } else {
                        assert_eq!(back, b, "{f:?} {b:#04x} ({v}) saturate {saturate}");
                    }
                }
            }
        }
    }

    /// The formats' landmarks: largest finite values, smallest subnormals, one.
    #[test]
    fn landmarks() {
        assert_eq!(F8::E4M3FN.to_f32(0x7e), 448.0);
        assert_eq!(F8::E4M3FNUZ.to_f32(0x7f), 240.0);
        assert_eq!(F8::E5M2.to_f32(0x7b), 57344.0);
        assert_eq!(F8::E5M2FNUZ.to_f32(0x7f), 57344.0);
        assert_eq!(F8::E4M3FN.to_f32(0x01), 2f32.powi(-9));
        assert_eq!(F8::E4M3FNUZ.to_f32(0x01), 2f32.powi(-10));
        assert_eq!(F8::E5M2.to_f32(0x01), 2f32.powi(-16));
        assert_eq!(F8::E5M2FNUZ.to_f32(0x01), 2f32.powi(-17));
        for (f, one) in [(F8::E4M3FN, 0x38), (F8::E4M3FNUZ, 0x40), (F8::E5M2, 0x3c), (F8::E5M2FNUZ, 0x40)] {
            assert_eq!(f.from_f32(1.0, true), one, "{f:?}");
        }
    }

    /// Ties go to the even code; values between two codes go to the nearer; past the
    /// largest value, saturation or overflow.
    #[test]
    fn rounding_and_overflow() {
        let f = F8::E4M3FN;
        // 1.0625 is halfway between 1.0 (0x38) and 1.125 (0x39): even is 0x38.
        assert_eq!(f.from_f32(1.0625, true), 0x38);
        // 1.1875 is halfway between 1.125 (0x39) and 1.25 (0x3a): even is 0x3a.
        assert_eq!(f.from_f32(1.1875, true), 0x3a);
        assert_eq!(f.from_f32(1.07, true), 0x39);
        // Subnormal ties: half the smallest subnormal goes to zero, 1.5 of it to two.
        assert_eq!(f.from_f32(2f32.powi(-10), true), 0x00);
        assert_eq!(f.from_f32(3.0 * 2f32.powi(-10), true), 0x02);
        assert_eq!(f.from_f32(-2f32.powi(-10), true), 0x80);
        assert_eq!(F8::E4M3FNUZ.from_f32(-2f32.powi(-12), true), 0x00);
        // 464 is halfway between 448 (max, even) and the NaN code: stays 448.
        assert_eq!(f.from_f32(464.0, false), 0x7e);
        assert_eq!(f.from_f32(465.0, false), 0x7f);
        assert_eq!(f.from_f32(-1e9, true), 0xfe);
        assert_eq!(f.from_f32(f32::INFINITY, false), 0x7f);
        assert_eq!(F8::E5M2.from_f32(1e9, false), 0x7c);
        assert_eq!(F8::E5M2.from_f32(f32::NEG_INFINITY, true), 0xfb);
        assert_eq!(F8::E5M2FNUZ.from_f32(1e9, false), 0x80);
        assert_eq!(F8::E4M3FNUZ.from_f32(241.0, true), 0x7f);
        assert!(F8::E5M2.to_f32(F8::E5M2.from_f32(f32::NAN, true)).is_nan());
    }
}

/// FLOAT4E2M1 (a sign, two exponent bits of bias 1, one mantissa bit: 0, 0.5, 1, 1.5, 2,
/// 3, 4, 6 and their negatives; no infinity or NaN), held in the low four bits of a byte.
pub mod e2m1 {
    /// The code's value (exact).
    pub fn to_f32(b: u8) -> f32 {
        let magnitude = b & 0x7;
        let (e, m) = (i32::from(magnitude >> 1), f32::from(magnitude & 1));
        let v = if e == 0 { m * 0.5 } else { (1.0 + m * 0.5) * super::pow2(e - 1) };
        if b & 0x8 != 0 {
            -v
        } else {
            v
        }
    }

    /// The code of `x`, rounded to nearest even and always saturating (±6 for larger
    /// values and the infinities); a NaN gives 0x8 (-0), or 0x0 with its sign bit set, as
    /// ONNX's reference (ml_dtypes) does.
    pub fn from_f32(x: f32) -> u8 {
        if x.is_nan() {
            return if x.is_sign_negative() { 0x0 } else { 0x8 };
        }
        let sign = if x.is_sign_negative() { 0x8 } else { 0 };
        let a = x.abs();
        let bits = a.to_bits();
        let code = if (bits >> 23) as i32 >= 127 {
            // At or above 1 (the smallest normal): round the f32 bits to one mantissa bit.
            let rounded = (bits + ((1 << 21) - 1) + ((bits >> 22) & 1)) >> 22;
            rounded - (126 << 1)
        } else {
            // Below 1: a multiple of 0.5 (exactly scaled, then rounded to even).
            (a * 2.0).round_ties_even() as u32
        };
        code.min(0x7) as u8 | sign
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn codes_round_trip_and_values_round_to_even() {
            let values = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
            for b in 0..16u8 {
                let v = to_f32(b);
                assert_eq!(v.abs(), values[usize::from(b & 7)], "{b:#x}");
                assert_eq!(from_f32(v), b, "{b:#x}");
            }
            let cases = [
                (0.25, 0x0),
                (0.26, 0x1),
                (0.75, 0x2),
                (1.25, 0x2),
                (1.75, 0x4),
                (2.5, 0x4),
                (3.5, 0x6),
                (5.0, 0x6),
                (5.1, 0x7),
                (1e6, 0x7),
                (f32::INFINITY, 0x7),
                (f32::NEG_INFINITY, 0xf),
                (-0.0, 0x8),
                (-0.25, 0x8),
                (f32::NAN, 0x8),
                (-f32::NAN, 0x0),
                (f32::from_bits(0xff80_0001), 0x0),
                (1e-7, 0x0),
            ];
            for (x, want) in cases {
                assert_eq!(from_f32(x), want, "{x}");
            }
        }
    }
}

/// FLOAT8E8M0 (an exponent alone, bias 127: 2^-127 to 2^127, 0xff NaN; no sign, no
/// zero), the scales of the MX formats.
pub mod e8m0 {
    /// How a value between two powers of two is rounded (Cast's `round_mode`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Round {
        Up,
        Down,
        Nearest,
    }

    /// The code's value (exact; 0xff is NaN).
    pub fn to_f32(b: u8) -> f32 {
        match b {
            0xff => f32::NAN,
            // 2^-127 is a float32 subnormal.
            0 => f32::from_bits(0x0040_0000),
            e => f32::from_bits(u32::from(e) << 23),
        }
    }

    /// The code of `|x|` (the sign is dropped) by its float32 exponent, rounded by
    /// `round`: up to the next power of two when any fraction is left, down by dropping
    /// it, to the nearer one (halfway going up) by the fraction's top bit, as ONNX's
    /// reference does. Past 2^127, the largest code with `saturate`, else NaN; NaN and the
    /// infinities give NaN.
    pub fn from_f32(x: f32, saturate: bool, round: Round) -> u8 {
        let bits = x.to_bits();
        let exponent = (bits >> 23) & 0xff;
        if exponent == 0xff {
            return 0xff;
        }
        let fraction = bits & 0x7f_ffff;
        let up = match round {
            Round::Up => fraction != 0,
            Round::Down => false,
            // The guard bit, and beyond it a round or sticky bit or a normal number.
            Round::Nearest => bits & 0x40_0000 != 0 && (bits & 0x3f_ffff != 0 || exponent > 0),
        };
        if up && exponent == 0xfe && saturate {
            return 0xfe;
        }
        (exponent + u32::from(up)) as u8
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn powers_of_two_and_rounding() {
            // (Code 0, 2^-127, is a float32 subnormal with a fraction: up rounds it to 1.)
            for b in 1..0xffu8 {
                assert_eq!(from_f32(to_f32(b), true, Round::Up), b, "{b:#x}");
            }
            assert_eq!(from_f32(to_f32(0), true, Round::Down), 0);
            assert!(to_f32(0xff).is_nan());
            assert_eq!(to_f32(127), 1.0);
            assert_eq!([from_f32(1.5, true, Round::Up), from_f32(1.5, true, Round::Down)], [128, 127]);
            assert_eq!([from_f32(1.5, true, Round::Nearest), from_f32(1.4, true, Round::Nearest)], [128, 127]);
            assert_eq!([from_f32(1.1, true, Round::Up), from_f32(0.124, true, Round::Up)], [128, 124]);
            assert_eq!(from_f32(-4.0, true, Round::Up), 129);
            assert_eq!(from_f32(0.0, true, Round::Up), 0);
            assert_eq!([from_f32(f32::MAX, true, Round::Up), from_f32(f32::MAX, false, Round::Up)], [0xfe, 0xff]);
            assert_eq!([from_f32(f32::NAN, true, Round::Up), from_f32(f32::INFINITY, true, Round::Down)], [0xff, 0xff]);
        }
    }
}
