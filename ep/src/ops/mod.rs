//! Op families, one module each: an op's parameters, its attribute parsing (the builder
//! its registration line in `registry::ops::OPS` names) and the math it runs. A family
//! module depends only on the core (`graph`, `node_attrs`, `data`, `error`) and the
//! kernels crate, never on the registry, the plan or `exec`, so no import circles back.

pub mod math;
