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
pub mod arg_reduce;
pub mod attention;
pub mod batch_norm;
pub mod bits;
pub mod center_crop_pad;
pub mod claim;
pub mod col2im;
pub mod compare;
pub mod compress;
pub mod concat;
pub mod conv_transpose;
pub mod cumsum;
pub mod deform_conv;
pub mod depth_space;
pub mod det;
pub mod einsum;
pub mod elementwise;
pub mod expand;
pub mod eye_like;
pub mod float_class;
pub mod gather;
pub mod geometry;
pub mod global_pool;
pub mod grid_sample;
pub mod group_norm;
pub mod halves;
pub mod int_input;
pub mod layer_norm;
pub mod logic;
pub mod loss;
pub mod lp_pool;
pub mod lrn;
pub mod math;
pub mod max_unpool;
pub mod ml;
pub mod moves;
pub mod nms;
pub mod non_zero;
pub mod normalize;
pub mod one_hot;
pub mod op;
pub mod optional;
pub mod pad;
pub mod params;
pub mod pool;
pub mod quant;
pub mod random;
pub mod range;
pub mod reduce;
mod reduce_typed;
pub mod resize;
mod resize_run;
pub mod reverse_sequence;
pub mod rnn;
pub mod roi_align;
pub mod rotary;
pub mod scatter;
pub mod select;
pub mod shape_of;
pub mod shape_rules;
pub mod signal;
pub mod slice;
pub mod softmax;
pub mod spectral;
pub mod split;
pub mod tensor_scatter;
pub mod tfidf;
pub mod tile;
pub mod top_k;
pub mod trilu;
pub mod unique;

pub use op::{ChannelChain, Family, Op, OpRef, OpScratch, RunIn, ShapeError, ShapeIn};

/// A family of the default ONNX domain.
const fn onnx(op_type: &'static str, since: (i32, i32), types: &'static str, compile: op::Compile) -> Family {
    Family { domain: "", op_type, since, types, compile }
}

/// An `ai.onnx.ml` family.
const fn ml(op_type: &'static str, since: (i32, i32), types: &'static str, compile: op::Compile) -> Family {
    Family { domain: "ai.onnx.ml", op_type, since, types, compile }
}

/// A `com.microsoft` family (ORT's contrib ops, in models its optimizer wrote).
const fn ms(op_type: &'static str, since: (i32, i32), types: &'static str, compile: op::Compile) -> Family {
    Family { domain: "com.microsoft", op_type, since, types, compile }
}

const NUM: &str = "float32, float64, int64, int32";
/// The float families run float16 and bfloat16 in float32 between casts.
const FLOATS: &str = "float32, float64, halves";
const LOSS: &str = "float32, float64, halves (int32 / int64 targets)";

/// The families that implement [`Op`], one line each.
pub static FAMILIES: &[Family] = &[
    onnx("DepthToSpace", (1, 13), "any", depth_space::depth_to_space),
    onnx("SpaceToDepth", (1, 13), "any", depth_space::space_to_depth),
    onnx("OptionalGetElement", (18, 18), "any", optional::optional_get_element),
    onnx("LpPool", (11, 22), "float32", lp_pool::compile),
    onnx("MaxPool", (1, 22), "numbers, halves", pool::max_pool),
    onnx("AveragePool", (1, 22), "float32, halves", pool::average_pool),
    onnx("GlobalAveragePool", (1, 22), "float32, halves", global_pool::global_average_pool),
    onnx("GlobalMaxPool", (1, 22), "float32, halves", global_pool::global_max_pool),
    onnx("ConvTranspose", (1, 22), "float32, halves", conv_transpose::conv_transpose),
    onnx("Attention", (23, 24), "float32, float64, halves (bool or numeric mask)", attention::attention),
    onnx("RotaryEmbedding", (23, 23), "float32, halves (int64 positions)", rotary::rotary_embedding),
    onnx("Unique", (11, 11), "numbers", unique::compile),
    onnx("CenterCropPad", (18, 18), "any", center_crop_pad::compile),
    onnx("Compress", (9, 11), "any", compress::compile),
    onnx("HannWindow", (17, 17), "float32, float64", signal::hann),
    onnx("HammingWindow", (17, 17), "float32, float64", signal::hamming),
    onnx("BlackmanWindow", (17, 17), "float32, float64", signal::blackman),
    onnx("MelWeightMatrix", (17, 17), "float32, float64", signal::mel_weight_matrix),
    onnx("DFT", (17, 20), "float32, float64", spectral::dft),
    onnx("STFT", (17, 17), "float32, float64", spectral::stft),
    onnx("LpNormalization", (1, 22), "float32, float64", normalize::lp_normalization),
    onnx("MeanVarianceNormalization", (9, 13), "float32, float64", normalize::mean_variance_normalization),
    onnx("Det", (11, 22), "float32", det::compile),
    onnx("PRelu", (6, 16), "float32", activation::prelu),
    onnx("Swish", (24, 24), "float32", activation::swish),
    ms("QuickGelu", (1, 1), "float32", activation::quick_gelu),
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
    ms("QLinearAdd", (1, 1), "(u)int8", quant::qlinear_add),
    ms("QGemm", (1, 1), "(u)int8", quant::qgemm),
    ms("QLinearGlobalAveragePool", (1, 1), "(u)int8", quant::qlinear_global_average_pool),
    onnx("Shape", (1, 25), "any, to int64", shape_of::shape),
    onnx("Size", (1, 25), "any, to int64", shape_of::size),
    onnx("ConstantOfShape", (9, 25), "int64 shape, any value", shape_of::constant_of_shape),
    onnx("EyeLike", (9, 22), "any", eye_like::eye_like),
    onnx("RandomUniform", (1, 22), "float32, float64", random::generator),
    onnx("RandomNormal", (1, 22), "float32, float64", random::generator),
    onnx("RandomUniformLike", (1, 22), "any, to float32, float64", random::generator),
    onnx("RandomNormalLike", (1, 22), "any, to float32, float64", random::generator),
    onnx("Bernoulli", (15, 22), "float32, float64, to any", random::bernoulli),
    onnx("Range", (11, 11), "float32, float64, int16, int32, int64", range::range),
    onnx("NonZero", (9, 13), "any, to int64", non_zero::non_zero),
    onnx("Tile", (6, 13), "any", tile::tile),
    onnx("Trilu", (14, 14), "any", trilu::trilu),
    onnx("Gather", (1, 13), "any (int32 / int64 indices)", gather::gather),
    onnx("GatherElements", (11, 13), "any (int32 / int64 indices)", gather::gather_elements),
    onnx("GatherND", (11, 13), "any", gather::gather_nd),
    onnx("ScatterElements", (11, 18), "any (numbers and halves with a reduction)", scatter::scatter_elements),
    onnx("Scatter", (9, 10), "any (numbers and halves with a reduction)", scatter::scatter),
    onnx("ScatterND", (11, 18), "any (numbers and halves with a reduction)", scatter::scatter_nd),
    onnx("OneHot", (9, 11), "numeric indices and depth, any values", one_hot::one_hot),
    onnx("TopK", (10, 24), "numbers, halves (int64 indices)", top_k::top_k),
    onnx("Einsum", (12, 12), "numbers, halves", einsum::einsum),
    onnx("ArgMax", (1, 13), "numbers, halves, to int64", arg_reduce::arg_max),
    onnx("ArgMin", (1, 13), "numbers, halves, to int64", arg_reduce::arg_min),
    onnx("CumSum", (11, 14), "numbers, halves", cumsum::cumsum),
    onnx("Softmax", (1, 13), FLOATS, softmax::softmax),
    onnx("LogSoftmax", (1, 13), FLOATS, softmax::log_softmax),
    onnx("Hardmax", (1, 13), FLOATS, softmax::hardmax),
    onnx("LayerNormalization", (17, 17), FLOATS, layer_norm::layer_norm),
    onnx("RMSNormalization", (23, 23), FLOATS, layer_norm::rms_norm),
    onnx("BatchNormalization", (7, 15), FLOATS, batch_norm::batch_normalization),
    onnx("InstanceNormalization", (6, 22), FLOATS, group_norm::instance_normalization),
    onnx("GroupNormalization", (18, 21), FLOATS, group_norm::group_normalization),
    onnx("LRN", (1, 13), "float32, halves", lrn::lrn),
    onnx("NegativeLogLikelihoodLoss", (12, 22), LOSS, loss::negative_log_likelihood),
    onnx("SoftmaxCrossEntropyLoss", (12, 13), LOSS, loss::softmax_cross_entropy),
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
