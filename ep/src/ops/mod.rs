//! Op families, one module each: an op's parameters, its attribute parsing and the math
//! it runs. A family module depends only on the core (`graph`, `node_attrs`, `data`,
//! `error`, `parallel`) and the kernels crate, never on the registry, the plan or `exec`,
//! so no import circles back.
//!
//! Two kinds live here. `math` is an older family whose ops are `Kernel` variants
//! registered in `registry::ops::OPS`. The families in [`FAMILIES`] implement [`Op`]
//! (`op.rs`): claim, shape and run in the module, one registration line here, no arm in
//! any central match.

pub mod col2im;
pub mod depth_space;
pub mod grid_sample;
pub mod math;
pub mod op;
pub mod resize;
mod resize_run;

pub use op::{Family, Op, OpRef, OpScratch, RunIn, ShapeError, ShapeIn};

/// The families that implement [`Op`], one line each.
pub static FAMILIES: &[Family] = &[
    Family { domain: "", op_type: "DepthToSpace", since: (1, 13), types: "any", compile: depth_space::depth_to_space },
    Family { domain: "", op_type: "SpaceToDepth", since: (1, 13), types: "any", compile: depth_space::space_to_depth },
    Family {
        domain: "",
        op_type: "Resize",
        since: (10, 19),
        types: "float32, float16; nearest: int8, uint8, int32",
        compile: resize::resize,
    },
    Family {
        domain: "",
        op_type: "Upsample",
        since: (7, 9),
        types: "float32, float16; nearest: int8, uint8, int32",
        compile: resize::upsample,
    },
    Family { domain: "", op_type: "GridSample", since: (16, 22), types: "float32", compile: grid_sample::grid_sample },
    Family { domain: "", op_type: "AffineGrid", since: (20, 20), types: "float32", compile: grid_sample::affine_grid },
    Family { domain: "", op_type: "Col2Im", since: (18, 18), types: "float32", compile: col2im::col2im },
];
