//! Shapes of the windowed and product ops: convolution and pooling windows, MatMul and
//! Gemm.

use rivet_kernels::conv::Window3d;
use rivet_kernels::Broadcast;
use smallvec::SmallVec;

use crate::graph::{Shape, ShapeText};
use crate::ops::params::*;

/// A window op's (depth, height, width): inputs with fewer spatial axes have leading
/// axes of size 1.
pub fn spatial(s: &[usize]) -> [usize; 3] {
    let n = s.len().saturating_sub(2).min(3);
    std::array::from_fn(|a| if a + n >= 3 { s[2 + a + n - 3] } else { 1 })
}

/// Largest element count Rivet accepts for one tensor (2^48 floats is 1 PiB): a larger
/// declared shape is a hostile or broken model, rejected before any size arithmetic.
pub const MAX_ELEMENTS: usize = 1 << 48;

/// `shape`, unless it has more than [`MAX_ELEMENTS`] elements.
pub fn within_limit(shape: Shape) -> std::result::Result<Shape, String> {
    match shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d)) {
        Some(n) if n <= MAX_ELEMENTS => Ok(shape),
        _ => Err(format!("output shape {} has more than 2^48 elements", ShapeText(&shape))),
    }
}

/// A window op's output shape, of the input's rank.
pub fn windowed(x: &[usize], channels: usize, out: [usize; 3]) -> Shape {
    let n = x.len().saturating_sub(2).min(3);
    [x[0], channels].into_iter().chain(out[3 - n..].iter().copied()).collect()
}

/// numpy matmul: 1-D operands are promoted and the added axis removed again; batch axes
/// broadcast.
pub fn matmul_shape(a: &[usize], b: &[usize]) -> std::result::Result<Shape, String> {
    if a.is_empty() || b.is_empty() {
        return Err("MatMul needs operands of rank 1 or more".into());
    }
    let (m, k) = if a.len() == 1 { (1, a[0]) } else { (a[a.len() - 2], a[a.len() - 1]) };
    let (k2, n) = if b.len() == 1 { (b[0], 1) } else { (b[b.len() - 2], b[b.len() - 1]) };
    if k != k2 {
        return Err(format!("inner dimensions {k} and {k2} differ (against {})", ShapeText(b)));
    }
    let batch_a = &a[..a.len().saturating_sub(2)];
    let batch_b = &b[..b.len().saturating_sub(2)];
    let batch = Broadcast::new(batch_a, batch_b).map_err(|e| e.to_string())?;
    let mut out = Shape::from_slice(batch.out_shape());
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(out)
}

pub fn gemm_shape(
    a: &[usize],
    b: &[usize],
    c: Option<&Shape>,
    ta: bool,
    tb: bool,
) -> std::result::Result<Shape, String> {
    if a.len() != 2 || b.len() != 2 {
        return Err(format!("Gemm needs 2-D A and B, got B {}", ShapeText(b)));
    }
    let (m, k) = if ta { (a[1], a[0]) } else { (a[0], a[1]) };
    let (k2, n) = if tb { (b[1], b[0]) } else { (b[0], b[1]) };
    if k != k2 {
        return Err(format!("inner dimensions {k} and {k2} differ"));
    }
    if let Some(c) = c {
        let b = Broadcast::new(c, &[m, n]).map_err(|e| format!("C: {e}"))?;
        if b.out_shape() != [m, n] {
            return Err(format!("C of shape {} does not broadcast to [{m}, {n}]", ShapeText(c)));
        }
    }
    Ok(Shape::from_slice(&[m, n]))
}

/// The geometry of a window op on an `input` plane (depth, height, width) with kernel
/// `k`, and the padding after each axis.
pub fn window_3d(w: &Window, input: [usize; 3], k: [usize; 3]) -> std::result::Result<(Window3d, [usize; 3]), String> {
    use rivet_kernels::conv::{window_geometry, Padding};
    let padding = match w.auto_pad {
        AutoPad::NotSet => Padding::Explicit(w.pads),
        AutoPad::Valid => Padding::Valid,
        AutoPad::SameUpper => Padding::SameUpper,
        AutoPad::SameLower => Padding::SameLower,
    };
    window_geometry(input, k, w.strides, w.dilations, padding, w.ceil_mode)
}

/// The element strides of a contiguous tensor of `shape` along the axes of a broadcast
/// output of rank `rank` (right-aligned), 0 along an axis it broadcasts (or lacks).
pub fn broadcast_strides(shape: &[usize], rank: usize) -> SmallVec<[usize; 8]> {
    let mut strides: SmallVec<[usize; 8]> = SmallVec::from_elem(0, rank);
    let mut stride = 1;
    for (j, &n) in shape.iter().enumerate().rev() {
        strides[rank - (shape.len() - j)] = if n == 1 { 0 } else { stride };
        stride *= n;
    }
    strides
}
