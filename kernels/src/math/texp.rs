//! Constants of `e^x` from an 8-entry table of `2^(j/8)`, for the SIMD
//! builds (`arch::simd`), which look the table up with one register permute
//! (`vpermps`).
//!
//! `x = (8 m + j) ln2/8 + r` with `|r| <= ln2/16`: `t = x log2(e) +
//! MAGIC8` holds `k = 8 m + j` in its low mantissa bits, `kf = t - MAGIC8 =
//! k/8` exactly and `r = (x - kf C_HI) - kf C_LO` (the first step exact).
//! Then `e^x = 2^m T_HI[j] (1 + p)` with `p = r Q(r) + T_REL[j]`, evaluated
//! as `fma(T_HI, p, T_HI)`: one rounding of a sum whose second term is
//! below 0.2, so the result is within ~0.55 ulp.

/// `2^(j/8)` rounded to f32.
pub(crate) const T_HI: [f32; 8] =
    [1.0, 1.090_507_7, 1.189_207_1, 1.296_839_6, std::f32::consts::SQRT_2, 1.542_210_8, 1.681_792_9, 1.834_008_1];

/// `2^(j/8) / T_HI[j] - 1` rounded to f32.
pub(crate) const T_REL: [f32; 8] =
    [0.0, -1.199_215_7e-8, 3.193_418e-8, -3.099_072e-8, 1.711_427e-8, 5.233_334e-9, -1.471_960_5e-8, -6.128_26e-9];

/// `e^r = 1 + r Q(r)` for `|r| <= ln(2)/16`: minimax for the relative error
/// of `e^r`, 2.6e-8 (see `tools/fit_poly.py`).
pub(crate) const Q: [f32; 3] = [1.0, 0.500_064_5, 0.166_668_76];

/// `ln 2` split in two: `C_HI` has its 11 low mantissa bits cleared, so
/// `kf * C_HI` is exact for every `kf = k/8` with `|k| < 2^13`; `C_HI +
/// C_LO` is `ln 2` to 2e-12.
pub(crate) const C_HI: f32 = f32::from_bits(0x3f31_7000);
pub(crate) const C_LO: f32 = 3.194_618_3e-5;

/// `1.5 * 2^20`: adding it to `|v| < 2^19` rounds `v` to a multiple of 1/8,
/// held (times 8) in the low mantissa bits of the sum.
pub(crate) const MAGIC8: f32 = 1_572_864.0;

/// `Exp` clamps its argument to `[X_MIN, X_MAX]` (beyond, the result is 0
/// or `inf` anyway), so `m` stays in `[-150, 128]`.
pub(crate) const X_MIN: f32 = -104.0;
pub(crate) const X_MAX: f32 = 89.0;

/// `T_HI * 2^-24`: Sigmoid's AVX2 code scales by `2^(m + 24)`, normal down
/// to the last subnormal result, and rounds once.
pub(crate) const T_HI_M24: [f32; 8] = {
    let mut t = T_HI;
    let mut i = 0;
    while i < 8 {
        t[i] *= 5.960_464_5e-8;
        i += 1;
    }
    t
};
