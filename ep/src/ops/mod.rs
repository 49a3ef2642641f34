//! Op families, one module each: an op's parameters, its attribute parsing and the math
//! it runs. A family module depends only on the core (`graph`, `node_attrs`, `data`,
//! `error`, `parallel`) and the kernels crate, never on the registry, the plan or `exec`,
//! so no import circles back.
//!
//! Two kinds live here. `math` is an older family whose ops are `Kernel` variants
//! registered in `registry::ops::OPS`. The families in [`FAMILIES`] implement [`Op`]
//! (`op.rs`): claim, shape and run in the module, one registration line here, no arm in
//! any central match.

pub mod depth_space;
pub mod math;
pub mod op;
pub mod quant;

pub use op::{Family, Op, OpRef, OpScratch, RunIn, ShapeError, ShapeIn};

/// The families that implement [`Op`], one line each.
pub static FAMILIES: &[Family] = &[
    Family { domain: "", op_type: "DepthToSpace", since: (1, 13), types: "any", compile: depth_space::depth_to_space },
    Family { domain: "", op_type: "SpaceToDepth", since: (1, 13), types: "any", compile: depth_space::space_to_depth },
    Family { domain: "", op_type: "QuantizeLinear", since: (10, 25), types: "float32", compile: quant::quantize },
    Family {
        domain: "",
        op_type: "DequantizeLinear",
        since: (10, 25),
        types: "(u)int8/16, int32",
        compile: quant::dequantize,
    },
    Family { domain: "", op_type: "DynamicQuantizeLinear", since: (11, 11), types: "float32", compile: quant::dynamic },
    Family { domain: "", op_type: "MatMulInteger", since: (10, 10), types: "(u)int8", compile: quant::matmul_integer },
    Family { domain: "", op_type: "QLinearMatMul", since: (10, 21), types: "(u)int8", compile: quant::qlinear_matmul },
    Family { domain: "", op_type: "ConvInteger", since: (10, 10), types: "(u)int8", compile: quant::conv_integer },
    Family { domain: "", op_type: "QLinearConv", since: (10, 10), types: "(u)int8", compile: quant::qlinear_conv },
];
