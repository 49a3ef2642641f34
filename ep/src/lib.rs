//! Rivet: a CPU execution provider for ONNX Runtime, loaded as a plugin library.
//!
//! Layers, from ORT inwards: `abi` (the only `unsafe`: ORT's structs, the call wrapper,
//! the callbacks), `capability` (which nodes to claim), `plan` (a compiled subgraph),
//! `exec` (runs a plan over slices), `registry` (the supported ops), and the kernels in
//! the `rivet-kernels` crate.

#![deny(unsafe_op_in_unsafe_fn)]

// The macros name `::rivet_ep::probe`, which must resolve inside this crate too.
extern crate self as rivet_ep;

pub mod abi;
mod attention_chain;
pub mod capability;
mod channels_last_conv;
pub mod data;
mod direct_conv;
pub mod error;
pub mod exec;
mod exec_typed;
pub mod graph;
mod node_attrs;
pub mod node_events;
pub mod ops;
pub mod parallel;
pub mod plan;
mod pointwise_conv;
pub mod probe;
mod products;
pub mod registry;
pub mod shapes;
mod winograd_conv;

/// With `probe-allocator` (the probe cdylib), every heap allocation is counted.
#[cfg(feature = "probe-allocator")]
#[global_allocator]
static ALLOCATOR: probe::CountingAllocator<abi::pages::HugePages> = probe::CountingAllocator(abi::pages::HugePages);

/// Large blocks on huge pages (`abi::pages`).
#[cfg(all(feature = "huge-pages", not(feature = "probe-allocator")))]
#[global_allocator]
static ALLOCATOR: abi::pages::HugePages = abi::pages::HugePages;
