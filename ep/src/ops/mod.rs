//! Op families, one module each: an op's parameters, its attribute parsing and the math
//! it runs. A family module depends only on the core (`graph`, `node_attrs`, `data`,
//! `error`, `parallel`) and the kernels crate, never on the registry, the plan or `exec`,
//! so no import circles back.
//!
//! Two kinds live here. `math` is an older family whose ops are `Kernel` variants
//! registered in `registry::ops::OPS`. The families in [`FAMILIES`] implement [`Op`]
//! (`op.rs`): claim, shape and run in the module, one registration line here, no arm in
//! any central match.

pub mod activation;
pub mod center_crop_pad;
pub mod col2im;
pub mod compress;
pub mod deform_conv;
pub mod depth_space;
pub mod det;
pub mod grid_sample;
pub mod lp_pool;
pub mod math;
pub mod max_unpool;
pub mod ml;
pub mod nms;
pub mod normalize;
pub mod op;
pub mod optional;
pub mod quant;
pub mod resize;
mod resize_run;
pub mod reverse_sequence;
pub mod rnn;
pub mod roi_align;
pub mod signal;
pub mod tensor_scatter;
pub mod tfidf;
pub mod unique;

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
    Family {
        domain: "",
        op_type: "OptionalGetElement",
        since: (18, 18),
        types: "any",
        compile: optional::optional_get_element,
    },
    Family { domain: "", op_type: "LpPool", since: (11, 22), types: "float32", compile: lp_pool::compile },
    Family { domain: "", op_type: "Unique", since: (11, 11), types: "numbers", compile: unique::compile },
    Family { domain: "", op_type: "CenterCropPad", since: (18, 18), types: "any", compile: center_crop_pad::compile },
    Family { domain: "", op_type: "Compress", since: (9, 11), types: "any", compile: compress::compile },
    Family { domain: "", op_type: "HannWindow", since: (17, 17), types: "float32, float64", compile: signal::hann },
    Family {
        domain: "",
        op_type: "HammingWindow",
        since: (17, 17),
        types: "float32, float64",
        compile: signal::hamming,
    },
    Family {
        domain: "",
        op_type: "BlackmanWindow",
        since: (17, 17),
        types: "float32, float64",
        compile: signal::blackman,
    },
    Family {
        domain: "",
        op_type: "MelWeightMatrix",
        since: (17, 17),
        types: "float32, float64",
        compile: signal::mel_weight_matrix,
    },
    Family {
        domain: "",
        op_type: "LpNormalization",
        since: (1, 22),
        types: "float32, float64",
        compile: normalize::lp_normalization,
    },
    Family {
        domain: "",
        op_type: "MeanVarianceNormalization",
        since: (9, 13),
        types: "float32, float64",
        compile: normalize::mean_variance_normalization,
    },
    Family { domain: "", op_type: "Det", since: (11, 22), types: "float32", compile: det::compile },
    Family { domain: "", op_type: "PRelu", since: (6, 16), types: "float32", compile: activation::prelu },
    Family { domain: "", op_type: "Swish", since: (24, 24), types: "float32", compile: activation::swish },
    Family { domain: "", op_type: "TensorScatter", since: (24, 24), types: "any", compile: tensor_scatter::compile },
    Family { domain: "", op_type: "DeformConv", since: (19, 22), types: "float32", compile: deform_conv::compile },
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
    Family { domain: "", op_type: "RoiAlign", since: (10, 22), types: "float32", compile: roi_align::roi_align },
    Family { domain: "", op_type: "GridSample", since: (16, 22), types: "float32", compile: grid_sample::grid_sample },
    Family { domain: "", op_type: "AffineGrid", since: (20, 20), types: "float32", compile: grid_sample::affine_grid },
    Family { domain: "", op_type: "Col2Im", since: (18, 18), types: "float32", compile: col2im::col2im },
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
