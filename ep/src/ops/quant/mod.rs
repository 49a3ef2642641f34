//! The quantization ops: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear
//! (`linear`), the integer and quantized matrix products MatMulInteger and QLinearMatMul
//! (`matmul`), the integer and quantized convolutions ConvInteger and QLinearConv
//! (`conv`), and com.microsoft QLinearAdd (`add`), QGemm (`qgemm`) and
//! QLinearGlobalAveragePool (`pool`). The products' outputs are those of
//! ORT's CPU kernels bit for bit: i32 products, then `round_half_even(acc · scale) +
//! zero_point` clamped, the scale `(sa · sb) / sy` in float32. QLinearAdd computes as its
//! DequantizeLinear, Add and QuantizeLinear would (see `add`).
//!
//! With CPU fallback on, `capability::quantized` keeps every one of these that touches a
//! group ORT fuses into its own int8 kernels unclaimed (claiming it would stop the fusion).

mod add;
mod conv;
mod linear;
mod matmul;
mod pool;
mod qgemm;

pub use add::qlinear_add;
pub use conv::{conv_integer, qlinear_conv};
pub use linear::{dequantize, dynamic_quantize as dynamic, quantize};
pub use matmul::{matmul_integer, qlinear_matmul};
pub use pool::qlinear_global_average_pool;
pub use qgemm::qgemm_op as qgemm;

use crate::data::Data;
use rivet_kernels::qgemm::{ConvPlanes, QPackedA, QPackedB};

use crate::graph::dtype;

/// Where each of a node's first `N` inputs is among a Run's inputs (`None`: absent; a
/// Run's inputs leave the absent ones out, so an optional input in the middle moves the
/// later ones down).
fn slots<const N: usize>(node: &crate::graph::NodeDesc) -> [Option<usize>; N] {
    let mut at = 0;
    std::array::from_fn(|k| {
        super::op::util::input(node, k).map(|_| {
            at += 1;
            at - 1
        })
    })
}

/// Whether `t` is one of the integer types the quantized tensors here may have.
fn is_q8(t: i32) -> bool {
    matches!(t, dtype::UINT8 | dtype::INT8)
}

/// Element `i` of an integer tensor (the 8- and 16-bit integers and int32) as i32.
fn int_at(d: Data<'_>, i: usize) -> Option<i32> {
    match d {
        // float4e2m1's code (a zero point of it is ±0: 0 or 8).
        Data::U8(v) | Data::U4(v) | Data::U2(v) | Data::F4E2M1(v) => v.get(i).map(|&x| x as i32),
        Data::I8(v) | Data::I4(v) | Data::I2(v) => v.get(i).map(|&x| x as i32),
        Data::U16(v) => v.get(i).map(|&x| x as i32),
        Data::I16(v) => v.get(i).map(|&x| x as i32),
        Data::I32(v) => v.get(i).copied(),
        _ => None,
    }
}

/// A scale tensor's element `i` (float32, or float16 as float32).
fn float_at(d: Data<'_>, i: usize) -> Option<f32> {
    match d {
        Data::F32(v) => v.get(i).copied(),
        Data::F16(v) => v.get(i).map(|&h| rivet_kernels::typed::f16_to_f32(h)),
        _ => None,
    }
}

/// Elements of a shape.
fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

/// The one value of a scalar (or one-element) quantization parameter `what`.
fn scalar_int(d: Option<Data<'_>>, shape: Option<&[usize]>, what: &str) -> Result<i32, String> {
    match (d, shape) {
        (None, _) => Ok(0),
        (Some(d), Some(s)) if s.len() <= 1 && numel(s) == 1 => {
            int_at(d, 0).ok_or_else(|| format!("{what} is not an integer"))
        }
        (Some(_), s) => Err(format!("{what} must be a scalar (one element), has shape {:?}", s.unwrap_or(&[]))),
    }
}

fn scalar_float(d: Data<'_>, shape: &[usize], what: &str) -> Result<f32, String> {
    if shape.len() > 1 || numel(shape) != 1 {
        return Err(format!("{what} must be a scalar (one element), has shape {shape:?}"));
    }
    float_at(d, 0).ok_or_else(|| format!("{what} is not float32 or float16"))
}

/// A quantized product's packed operands and working memory, kept in the step's scratch
/// from Run to Run (so a steady-state Run allocates nothing).
#[derive(Default)]
struct Packs {
    a: QPackedA,
    /// A convolution's weights, one A a group.
    groups: Vec<QPackedA>,
    b: QPackedB,
    /// A 2-D convolution's input in phase planes (its product without an im2col), and
    /// the scratch of each task its product splits into.
    planes: ConvPlanes,
    tasks: Vec<std::sync::Mutex<rivet_kernels::qgemm::ProductScratch>>,
    /// The constant operand packed last: its data's address and length, and which of its
    /// matrices. While a Run hands in the same, it is not packed again.
    key: Option<(usize, usize, usize)>,
    /// Zero points (one per column or row) and scales (one per column or row).
    zero: Vec<i32>,
    scales: Vec<f32>,
    /// A depthwise convolution's weights as floats (exact integers), and each of its
    /// tasks' floats.
    wf: Vec<f32>,
    dw_tasks: Vec<std::sync::Mutex<conv::DepthwiseScratch>>,
    /// The same weights for the integer depthwise kernel, when their differences fit
    /// int8 (else empty: the float route).
    qdw: rivet_kernels::qgemm::depthwise::QDepthwise,
    /// A convolution's weights for the channels-last product (`conv::channels_last`), the
    /// key of their data, its input and output made channels last, and each task's im2col.
    nhwc: QPackedB,
    nhwc_key: Option<(usize, usize, usize)>,
    taps: rivet_kernels::qgemm::ConvTaps,
    /// A run marked channels last on a convolution that does not take it: its input made
    /// channels first, and its output before it is made channels last.
    relaid_x: conv::Bytes,
    relaid_y: conv::Bytes,
    xt: conv::Bytes,
    yt: conv::Bytes,
    nhwc_tasks: Vec<std::sync::Mutex<QPackedA>>,
}

/// Where an 8-bit tensor's data is and how long: the key of a packed constant.
fn data_key(d: Data<'_>) -> Option<(usize, usize)> {
    match d {
        Data::U8(v) => Some((v.as_ptr() as usize, v.len())),
        Data::I8(v) => Some((v.as_ptr() as usize, v.len())),
        _ => None,
    }
}

/// Packs an 8-bit A (m×k, row stride `lda`) with zero points `za` (one, or one per row).
fn pack_a(a: Data<'_>, m: usize, k: usize, lda: usize, za: &[i32], out: &mut QPackedA) -> Result<(), String> {
    match a {
        Data::U8(v) => out.pack(v, m, k, lda, za),
        Data::I8(v) => out.pack(v, m, k, lda, za),
        _ => return Err("an integer operand is not uint8 or int8".into()),
    }
    Ok(())
}

/// Packs an 8-bit B (k×n, row stride `ldb`) with zero points `zb` (one, or one per column).
fn pack_b(b: Data<'_>, k: usize, n: usize, ldb: usize, zb: &[i32], out: &mut QPackedB) -> Result<(), String> {
    match b {
        Data::U8(v) => out.pack(v, k, n, ldb, zb),
        Data::I8(v) => out.pack(v, k, n, ldb, zb),
        _ => return Err("an integer operand is not uint8 or int8".into()),
    }
    Ok(())
}

/// A zero point or scale that is one value, or one per column / channel (`count` of
/// them, in a tensor whose dims other than the last are 1).
fn per_channel(shape: &[usize], count: usize, what: &str) -> Result<bool, String> {
    let n = numel(shape);
    if n == 1 && shape.len() <= 1 {
        return Ok(false);
    }
    if n == count && shape.last() == Some(&count) {
        return Ok(true);
    }
    Err(format!("{what} must be a scalar or have {count} elements (one per channel), has shape {shape:?}"))
}

/// Elements `at..at + len` of an 8-bit tensor.
fn sub<'a>(d: Data<'a>, at: usize, len: usize) -> Result<Data<'a>, String> {
    let short = || "an operand has fewer elements than its shape".to_string();
    Ok(match d {
        Data::U8(v) => Data::U8(v.get(at..at + len).ok_or_else(short)?),
        Data::I8(v) => Data::I8(v.get(at..at + len).ok_or_else(short)?),
        _ => return Err("an integer operand is not uint8 or int8".into()),
    })
}
