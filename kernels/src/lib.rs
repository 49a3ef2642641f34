//! Native f32 kernels for the Rivet execution provider.
//!
//! This crate knows nothing about ONNX Runtime: it works on plain `f32`
//! slices and `usize` shapes. Its only `unsafe` code is the call into the
//! `#[target_feature]` builds of the kernels, in `arch::dispatch`, once the
//! CPU's features have been detected, and the vector loads and stores of
//! `arch::mem`.
//!
//! * [`UnaryOp`]: elementwise activations and math functions (ONNX semantics,
//!   attributes already resolved), with [`UnaryOp::apply`] /
//!   [`UnaryOp::apply_inplace`] and an f64 [`UnaryOp::reference`] for tests.
//! * [`BinaryOp`] + [`Broadcast`] + [`binary_f32`]: elementwise binary ops
//!   with numpy-style broadcasting. A [`Broadcast`] plan is built once per
//!   shape pair; `binary_f32` can fill any sub-range of the output, so callers
//!   may split the work across threads.
//!
//! # Performance
//!
//! Kernels are scalar Rust written for LLVM's auto-vectoriser: one
//! monomorphised loop per op over zipped slices (no bounds checks), and
//! transcendental functions (`exp`, `expm1`, `ln`, `erf`, `tanh`, ...) are
//! implemented inline (module `math`) with selects instead of libm calls,
//! so the loops vectorise. Only `Pow` (with an exponent other than 2) calls
//! libm.
//!
//! Every kernel is built three times from the same generic code (module
//! `arch`): portable (SSE2 on x86-64, 4 lanes), AVX2 + FMA (8 lanes, fused
//! multiply-adds) and AVX-512 (16 lanes). The best build the CPU supports is
//! detected once and cached ([`Level::detected`]); `RIVET_KERNELS_LEVEL`
//! (`generic`, `avx2`) can lower it. The builds with FMA may differ from the
//! portable one in the last bit, all within the same pinned bounds.
//!
//! `Exp` and `Sigmoid` have explicit AVX2 and AVX-512 kernels instead
//! (`arch::simd`): their `e^x` looks up a small table with a register
//! permute, which the auto-vectoriser cannot express. Both builds give the
//! same bits.
//!
//! # Accuracy
//!
//! Every unary op is swept against its f64 reference in the tests with a
//! pinned bound per op (see `unary_tests.rs`); roughly: exact for the
//! piecewise-linear ops, `Floor`, `Ceil`, `Sqrt`, `Reciprocal`, `Abs`, `Neg`;
//! a few ulp for `Exp`, `Log`, `Tanh`, `Sigmoid`, `Softplus`, `Mish`, ...;
//! `Erf` within 2e-7 absolute.

#![deny(unsafe_code)]

mod arch;
pub mod attention;
mod binary;
pub mod boxes;
mod broadcast;
mod channel_norm;
pub mod conv;
pub mod deform;
pub mod depthwise;
pub mod direct;
pub mod einsum;
pub mod float8;
mod gemm;
pub mod lines;
mod math;
mod movement;
pub mod nibbles;
pub mod nn;
mod norm;
mod pool;
pub mod qgemm;
pub mod random;
mod reduce;
mod reference;
pub mod resize;
pub mod rnn;
pub mod roi_align;
pub mod sample;
pub mod spectral;
pub mod typed;
mod unary;
pub mod winograd;

#[cfg(test)]
mod binary_tests;

/// Deterministic test values in [-1, 3), mean 1 (a linear congruential walk from `seed`): the
/// tests' inputs here, in the plugin's tests and in `tests/`.
#[doc(hidden)]
pub fn test_values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((s >> 40) as f32 / (1u64 << 23) as f32) * 2.0 - 1.0
        })
        .collect()
}
#[cfg(test)]
mod unary_edge_tests;
#[cfg(test)]
mod unary_tests;

pub use arch::Level;
pub use binary::{binary_f32, binary_f32_at, BinaryOp};
pub use broadcast::{Broadcast, BroadcastError, BroadcastKind};
pub use gemm::{
    bf16_supported, bf16_tiles, gemm_block, gemm_cols_packed_a, gemm_rows, gemm_rows_packed, gemm_with, pack_a,
    pack_a_bf16, pack_a_for, pack_b, pack_b_bf16, reads_b_in_place, row_tile, to_bf16, Activation, Bias, Epilogue,
    Gemm, GemmScratch, PackedA, PackedB, Scale,
};
#[doc(hidden)]
pub use gemm::{gemm_block_at, gemm_rows_at, pack_a_at, pack_b_at};
pub use unary::UnaryOp;
