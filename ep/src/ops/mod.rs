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
pub mod max_unpool;
pub mod nms;
pub mod op;
pub mod reverse_sequence;
pub mod rnn;

pub use op::{Family, Op, OpRef, OpScratch, RunIn, ShapeError, ShapeIn};

/// The families that implement [`Op`], one line each.
pub static FAMILIES: &[Family] = &[
    Family { domain: "", op_type: "DepthToSpace", since: (1, 13), types: "any", compile: depth_space::depth_to_space },
    Family { domain: "", op_type: "SpaceToDepth", since: (1, 13), types: "any", compile: depth_space::space_to_depth },
    Family {
        domain: "",
        op_type: "NonMaxSuppression",
        since: (10, 11),
        types: "float32",
        compile: nms::non_max_suppression,
    },
    Family {
        domain: "",
        op_type: "ReverseSequence",
        since: (10, 10),
        types: "any",
        compile: reverse_sequence::reverse_sequence,
    },
    Family { domain: "", op_type: "MaxUnpool", since: (9, 22), types: "float32", compile: max_unpool::max_unpool },
    Family { domain: "", op_type: "RNN", since: (7, 22), types: "float32", compile: rnn::rnn },
    Family { domain: "", op_type: "GRU", since: (7, 22), types: "float32", compile: rnn::gru },
    Family { domain: "", op_type: "LSTM", since: (7, 22), types: "float32", compile: rnn::lstm },
];
