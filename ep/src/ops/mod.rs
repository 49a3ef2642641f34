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
pub mod bits;
pub mod center_crop_pad;
pub mod col2im;
pub mod compare;
pub mod compress;
pub mod concat;
pub mod deform_conv;
pub mod depth_space;
pub mod det;
pub mod elementwise;
pub mod expand;
pub mod float_class;
pub mod geometry;
pub mod grid_sample;
pub mod logic;
pub mod lp_pool;
pub mod math;
pub mod max_unpool;
pub mod ml;
pub mod moves;
pub mod nms;
pub mod normalize;
pub mod op;
pub mod optional;
pub mod pad;
pub mod params;
pub mod quant;
pub mod reduce;
mod reduce_typed;
pub mod resize;
mod resize_run;
pub mod reverse_sequence;
pub mod rnn;
pub mod roi_align;
pub mod select;
pub mod shape_rules;
pub mod signal;
pub mod slice;
pub mod split;
pub mod tensor_scatter;
pub mod tfidf;
pub mod unique;

pub use op::{Family, Op, OpRef, OpScratch, RunIn, ShapeError, ShapeIn};

/// A family of the default ONNX domain.
const fn onnx(op_type: &'static str, since: (i32, i32), types: &'static str, compile: op::Compile) -> Family {
    Family { domain: "", op_type, since, types, compile }
}

/// An `ai.onnx.ml` family.
const fn ml(op_type: &'static str, since: (i32, i32), types: &'static str, compile: op::Compile) -> Family {
    Family { domain: "ai.onnx.ml", op_type, since, types, compile }
}

const NUM: &str = "float32, float64, int64, int32";

/// The families that implement [`Op`], one line each.
pub static FAMILIES: &[Family] = &[
    onnx("DepthToSpace", (1, 13), "any", depth_space::depth_to_space),
    onnx("SpaceToDepth", (1, 13), "any", depth_space::space_to_depth),
    onnx("OptionalGetElement", (18, 18), "any", optional::optional_get_element),
    onnx("LpPool", (11, 22), "float32", lp_pool::compile),
    onnx("Unique", (11, 11), "numbers", unique::compile),
    onnx("CenterCropPad", (18, 18), "any", center_crop_pad::compile),
    onnx("Compress", (9, 11), "any", compress::compile),
    onnx("HannWindow", (17, 17), "float32, float64", signal::hann),
    onnx("HammingWindow", (17, 17), "float32, float64", signal::hamming),
    onnx("BlackmanWindow", (17, 17), "float32, float64", signal::blackman),
    onnx("MelWeightMatrix", (17, 17), "float32, float64", signal::mel_weight_matrix),
    onnx("LpNormalization", (1, 22), "float32, float64", normalize::lp_normalization),
    onnx("MeanVarianceNormalization", (9, 13), "float32, float64", normalize::mean_variance_normalization),
    onnx("Det", (11, 22), "float32", det::compile),
    onnx("PRelu", (6, 16), "float32", activation::prelu),
    onnx("Swish", (24, 24), "float32", activation::swish),
    onnx("TensorScatter", (24, 24), "any", tensor_scatter::compile),
    onnx("DeformConv", (19, 22), "float32", deform_conv::compile),
    onnx("NonMaxSuppression", (10, 11), "float32", nms::non_max_suppression),
    onnx("ReverseSequence", (10, 10), "any", reverse_sequence::reverse_sequence),
    onnx("MaxUnpool", (9, 22), "float32", max_unpool::max_unpool),
    onnx("RNN", (7, 22), "float32", rnn::rnn),
    onnx("GRU", (7, 22), "float32", rnn::gru),
    onnx("LSTM", (7, 22), "float32", rnn::lstm),
    onnx("Resize", (10, 19), "float32, float16; nearest: int8, uint8, int32", resize::resize),
    onnx("Upsample", (7, 9), "float32, float16; nearest: int8, uint8, int32", resize::upsample),
    onnx("RoiAlign", (10, 22), "float32", roi_align::roi_align),
    onnx("GridSample", (16, 22), "float32", grid_sample::grid_sample),
    onnx("AffineGrid", (20, 20), "float32", grid_sample::affine_grid),
    onnx("Col2Im", (18, 18), "float32", col2im::col2im),
    onnx("TfIdfVectorizer", (9, 9), "int32, int64 in", tfidf::tfidf),
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
    onnx("QuantizeLinear", (10, 25), "float32", quant::quantize),
    onnx("DequantizeLinear", (10, 25), "(u)int8/16, int32", quant::dequantize),
    onnx("DynamicQuantizeLinear", (11, 11), "float32", quant::dynamic),
    onnx("MatMulInteger", (10, 10), "(u)int8", quant::matmul_integer),
    onnx("QLinearMatMul", (10, 21), "(u)int8", quant::qlinear_matmul),
    onnx("ConvInteger", (10, 10), "(u)int8", quant::conv_integer),
    onnx("QLinearConv", (10, 10), "(u)int8", quant::qlinear_conv),
    onnx("Equal", (7, 19), "numbers, halves and bool, to bool", compare::equal),
    onnx("Less", (7, 13), "numbers, halves, to bool", compare::less),
    onnx("LessOrEqual", (12, 16), "numbers, halves, to bool", compare::less_or_equal),
    onnx("Greater", (7, 13), "numbers, halves, to bool", compare::greater),
    onnx("GreaterOrEqual", (12, 16), "numbers, halves, to bool", compare::greater_or_equal),
    onnx("And", (7, 7), "bool", logic::and),
    onnx("Or", (7, 7), "bool", logic::or),
    onnx("Xor", (7, 7), "bool", logic::xor),
    onnx("Not", (1, 1), "bool", logic::not),
    onnx("Where", (9, 16), "any (bool condition)", select::where_op),
    onnx("IsNaN", (9, 20), "floats, to bool", float_class::is_nan),
    onnx("IsInf", (10, 20), "floats, to bool", float_class::is_inf),
    onnx("BitShift", (11, 11), "integers", bits::bit_shift),
    onnx("BitwiseAnd", (18, 18), "integers", bits::bitwise_and),
    onnx("BitwiseOr", (18, 18), "integers", bits::bitwise_or),
    onnx("BitwiseXor", (18, 18), "integers", bits::bitwise_xor),
    onnx("BitwiseNot", (18, 18), "integers", bits::bitwise_not),
    onnx("Concat", (4, 13), "any", concat::concat),
    onnx("Expand", (8, 13), "any", expand::expand),
    onnx("Slice", (10, 13), "any", slice::slice),
    onnx("Split", (2, 18), "any", split::split),
    onnx("Pad", (2, 25), "any", pad::pad),
    onnx("ReduceSum", (1, 13), "numbers, halves", reduce::sum),
    onnx("ReduceMean", (1, 18), "numbers, halves", reduce::mean),
    onnx("ReduceMax", (1, 20), "numbers, halves, bool", reduce::max),
    onnx("ReduceMin", (1, 20), "numbers, halves, bool", reduce::min),
    onnx("ReduceProd", (1, 18), "numbers, halves", reduce::prod),
    onnx("ReduceL1", (1, 18), "numbers, halves", reduce::l1),
    onnx("ReduceL2", (1, 18), "numbers, halves", reduce::l2),
    onnx("ReduceLogSum", (1, 18), "numbers, halves", reduce::log_sum),
    onnx("ReduceLogSumExp", (1, 18), "numbers, halves", reduce::log_sum_exp),
    onnx("ReduceSumSquare", (1, 18), "numbers, halves", reduce::sum_square),
];
