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
pub mod tfidf;

pub use op::{Family, Op, OpRef, OpScratch, RunIn, ShapeError, ShapeIn};

/// An `ai.onnx.ml` family.
const fn ml(op_type: &'static str, since: (i32, i32), types: &'static str, compile: op::Compile) -> Family {
    Family { domain: "ai.onnx.ml", op_type, since, types, compile }
}

const NUM: &str = "float32, float64, int64, int32";

/// The families that implement [`Op`], one line each.
pub static FAMILIES: &[Family] = &[
    Family { domain: "", op_type: "DepthToSpace", since: (1, 13), types: "any", compile: depth_space::depth_to_space },
    Family { domain: "", op_type: "SpaceToDepth", since: (1, 13), types: "any", compile: depth_space::space_to_depth },
    Family { domain: "", op_type: "TfIdfVectorizer", since: (9, 9), types: "int32, int64 in", compile: tfidf::tfidf },
    ml("TreeEnsembleClassifier", (1, 3), NUM, ml::tree::classifier),
    ml("TreeEnsembleRegressor", (1, 3), "float32, float64", ml::tree::regressor),
    ml("TreeEnsemble", (5, 5), "float32, float64", ml::tree::ensemble),
    ml("LinearClassifier", (1, 1), NUM, ml::linear::classifier),
    ml("LinearRegressor", (1, 1), "float32", ml::linear::regressor),
    ml("SVMClassifier", (1, 1), NUM, ml::svm::classifier),
    ml("SVMRegressor", (1, 1), "float32", ml::svm::regressor),
    ml("Scaler", (1, 1), NUM, ml::features::scaler),
    ml("Normalizer", (1, 1), NUM, ml::features::normalizer),
    ml("Binarizer", (1, 1), "float32", ml::features::binarizer),
    ml("Imputer", (1, 1), "float32, int64", ml::features::imputer),
    ml("ArrayFeatureExtractor", (1, 1), NUM, ml::features::array_feature_extractor),
    ml("OneHotEncoder", (1, 1), "float32, float64, int64", ml::features::one_hot_encoder),
    ml("LabelEncoder", (2, 4), "int64, float32 (float64 at 4)", ml::encode::label_encoder),
];
