//! What a product does to each element of C once its sum is complete: a scale, a bias,
//! an activation, a residual addition and a second activation, in that order. The driver
//! applies it to each strip of C right after the strip's last depth block, while the strip
//! is still in L1, so a Conv + bias + Add + Relu or a MatMul + bias + Gelu makes one pass
//! over C instead of three or four. An epilogue of a bias and at most a Relu or Clip makes
//! no pass on the AVX-512 tiles: each full tile applies it as it stores its sums
//! ([`InRegisters`]).
//!
//! Each part computes what the separate op would on the product's result, in the same
//! order, so a fused chain gives the unfused chain's bits.

use crate::arch::Level;
use crate::unary::UnaryOp;
use std::ops::Range;

/// A bias added to C: one value per row (a convolution's, per output channel) or per
/// column (a Gemm's or MatMul's, per output feature).
#[derive(Clone, Copy, Debug, Default)]
pub enum Bias<'a> {
    #[default]
    None,
    /// `m` values, `c[i][j] += bias[i]`.
    Rows(&'a [f32]),
    /// `n` values, `c[i][j] += bias[j]`.
    Cols(&'a [f32]),
}

/// An activation applied to each element of C.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// One of the unary ops, with its documented accuracy.
    Unary(UnaryOp),
    /// `min(max(x, min), max)`, NaN passing through (as ONNX Runtime's Clip).
    Clip { min: f32, max: f32 },
    /// SiLU, `x * sigmoid(x)`: the exporters' Sigmoid + Mul pair, with the Sigmoid op's
    /// own kernel and an exact multiply, so it gives the pair's bits.
    Silu,
}

impl Activation {
    #[inline(always)]
    pub(crate) fn apply(&self, level: Level, xs: &mut [f32]) {
        match *self {
            Activation::Unary(op) => op.apply_inplace_at(level, xs),
            Activation::Clip { min, max } => xs.iter_mut().for_each(|o| {
                let v = if *o < min { min } else { *o };
                *o = if v > max { max } else { v };
            }),
            Activation::Silu => crate::arch::silu_inplace(crate::arch::isa_at(level), xs),
        }
    }
}

/// A scalar that scales C first: the exporters' Mul or Div of a product by a constant
/// (attention's `1 / sqrt(d)`), applied to the complete sum as the separate op would.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Scale {
    Mul(f32),
    Div(f32),
}

/// An [`Epilogue`] of a bias and at most a clamp, as the AVX-512 tiles apply it in their
/// registers: `c + bias`, then below `lo` is `lo` (with `clamp` 1 or 2) and above `hi` is
/// `hi` (with `clamp` 2), NaN passing through, as `Activation::Clip` and Relu (a clamp
/// from 0: the same bits, -0 and NaN passing too).
#[derive(Clone, Copy, Debug)]
pub(crate) struct InRegisters<'a> {
    pub bias: Bias<'a>,
    pub clamp: u8,
    pub lo: f32,
    pub hi: f32,
}

/// `c = after(act(scale(c) + bias) + residual)`, each part optional. The default does
/// nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Epilogue<'a> {
    /// Only products set it (MatMul, Gemm); the direct convolution takes none.
    pub scale: Option<Scale>,
    pub bias: Bias<'a>,
    pub act: Option<Activation>,
    /// The whole m×n addend, row-major (row stride n), in C's layout.
    pub residual: Option<&'a [f32]>,
    pub after: Option<Activation>,
}

impl<'a> Epilogue<'a> {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.scale.is_none()
            && matches!(self.bias, Bias::None)
            && self.act.is_none()
            && self.residual.is_none()
            && self.after.is_none()
    }

    /// The epilogue as the AVX-512 tiles apply it in their registers, when it is a bias
    /// and at most a Relu or Clip (no scale, residual or second activation), else `None`.
    pub(crate) fn in_registers(&self) -> Option<InRegisters<'a>> {
        if self.scale.is_some() || self.residual.is_some() || self.after.is_some() {
            return None;
        }
        let (clamp, lo, hi) = match self.act {
            None => (0, 0.0, 0.0),
            Some(Activation::Unary(UnaryOp::Relu)) => (1, 0.0, 0.0),
            Some(Activation::Clip { min, max }) => (2, min, max),
            Some(_) => return None,
        };
        Some(InRegisters { bias: self.bias, clamp, lo, hi })
    }

    /// Applies it to the rows `rows` of an m×n C held in `c` (`rows.len() * n`
    /// elements), outside a product: for kernels that compute C otherwise (a depthwise
    /// convolution, a convolution split into parts).
    ///
    /// The rows are contiguous, so each part runs over the whole block: the scale and the
    /// bias row by row, each activation in one call, and every element still takes the
    /// parts in order. Called a row at a time, a depthwise convolution's SiLU on 7x7
    /// planes paid a call and a padded last vector for every 49 outputs (1152 channels:
    /// 52 us of SiLU where one call takes 12, kernel only, Zen 4).
    pub fn apply_rows(&self, c: &mut [f32], n: usize, rows: Range<usize>) {
        assert_eq!(c.len(), rows.len() * n, "epilogue: `c` must hold rows.len()*n elements");
        if self.is_empty() || n == 0 {
            return;
        }
        let level = Level::detected();
        let scale_bias = Epilogue { scale: self.scale, bias: self.bias, ..Epilogue::default() };
        scale_bias.apply(level, c, n, n, rows.clone(), 0..n);
        if let Some(act) = &self.act {
            act.apply(level, c);
        }
        if let Some(res) = self.residual {
            let res = &res[rows.start * n..][..c.len()];
            c.iter_mut().zip(res).for_each(|(o, &v)| *o += v);
        }
        if let Some(act) = &self.after {
            act.apply(level, c);
        }
    }

    /// Checks the lengths against an m×n product; panics on a mismatch.
    pub(crate) fn check(&self, m: usize, n: usize) {
        match self.bias {
            Bias::None => {}
            Bias::Rows(b) => assert_eq!(b.len(), m, "gemm: a row bias must hold m elements"),
            Bias::Cols(b) => assert_eq!(b.len(), n, "gemm: a column bias must hold n elements"),
        }
        if let Some(r) = self.residual {
            assert_eq!(r.len(), m * n, "gemm: the residual must hold m*n elements");
        }
    }

    /// Applies it to the block `rows` × `cols` of an m×n C (`n` the product's width),
    /// held in `c` from its first element with row stride `ldc`; the activations run on
    /// the build for `level`.
    #[inline(always)]
    pub(crate) fn apply(
        &self,
        level: Level,
        c: &mut [f32],
        ldc: usize,
        n: usize,
        rows: Range<usize>,
        cols: Range<usize>,
    ) {
        let w = cols.len();
        if self.is_empty() || w == 0 {
            return;
        }
        for (r, i) in rows.enumerate() {
            let row = &mut c[r * ldc..][..w];
            match self.scale {
                None => {}
                Some(Scale::Mul(s)) => row.iter_mut().for_each(|o| *o *= s),
                Some(Scale::Div(s)) => row.iter_mut().for_each(|o| *o /= s),
            }
            match self.bias {
                Bias::None => {}
                Bias::Rows(b) => {
                    let bv = b[i];
                    row.iter_mut().for_each(|o| *o += bv);
                }
                Bias::Cols(b) => row.iter_mut().zip(&b[cols.clone()]).for_each(|(o, &bv)| *o += bv),
            }
            if let Some(act) = &self.act {
                act.apply(level, row);
            }
            if let Some(res) = self.residual {
                row.iter_mut().zip(&res[i * n + cols.start..][..w]).for_each(|(o, &v)| *o += v);
            }
            if let Some(act) = &self.after {
                act.apply(level, row);
            }
        }
    }
}
