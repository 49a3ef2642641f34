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
pub mod ml;
pub mod op;

pub use op::{Family, Op, OpRef, OpScratch, RunIn, ShapeError, ShapeIn};

const ML: &str = "ai.onnx.ml";
const TREE_IN: &str = "float32, float64, int64, int32";

/// The families that implement [`Op`], one line each.
pub static FAMILIES: &[Family] = &[
    Family { domain: "", op_type: "DepthToSpace", since: (1, 13), types: "any", compile: depth_space::depth_to_space },
    Family { domain: "", op_type: "SpaceToDepth", since: (1, 13), types: "any", compile: depth_space::space_to_depth },
    Family {
        domain: ML,
        op_type: "TreeEnsembleClassifier",
        since: (1, 3),
        types: TREE_IN,
        compile: ml::tree::classifier,
    },
    Family {
        domain: ML,
        op_type: "TreeEnsembleRegressor",
        since: (1, 3),
        types: TREE_IN,
        compile: ml::tree::regressor,
    },
    Family {
        domain: ML,
        op_type: "TreeEnsemble",
        since: (5, 5),
        types: "float32, float64",
        compile: ml::tree::ensemble,
    },
    Family { domain: ML, op_type: "Scaler", since: (1, 1), types: TREE_IN, compile: ml::features::scaler },
    Family { domain: ML, op_type: "Normalizer", since: (1, 1), types: TREE_IN, compile: ml::features::normalizer },
    Family { domain: ML, op_type: "Binarizer", since: (1, 1), types: "float32", compile: ml::features::binarizer },
    Family { domain: ML, op_type: "Imputer", since: (1, 1), types: "float32, int64", compile: ml::features::imputer },
    Family {
        domain: ML,
        op_type: "ArrayFeatureExtractor",
        since: (1, 1),
        types: TREE_IN,
        compile: ml::features::array_feature_extractor,
    },
    Family {
        domain: ML,
        op_type: "OneHotEncoder",
        since: (1, 1),
        types: "float32, float64, int64",
        compile: ml::features::one_hot_encoder,
    },
];
