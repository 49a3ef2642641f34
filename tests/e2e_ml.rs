//! The `ai.onnx.ml` ops and TfIdfVectorizer on Rivet alone against ORT's CPU EP: tree
//! ensembles over random forests (every post transform, base values, the binary-class
//! rules, branch modes, missing values, float / double / int features), the linear models,
//! the feature transforms, LabelEncoder, and the scikit-learn pipelines of tests/models/ml.

mod common;

use common::{assert_matches_ort, env, strict};
use ort::value::TensorElementType as E;
use rivet::harness::{self, Arm, HostTensor};
use rivet::model::{Attr, Dim, ModelBuilder, DOUBLE, FLOAT, INT32, INT64};

const ML: &str = "ai.onnx.ml";

fn elem(t: i32) -> E {
    match t {
        FLOAT => E::Float32,
        DOUBLE => E::Float64,
        INT32 => E::Int32,
        INT64 => E::Int64,
        _ => panic!("type {t}"),
    }
}

/// One ml node `op` reading `x` (of type `t`, dims `dims`) with outputs `outs`.
fn ml_model(op: &str, opset: i64, attrs: &[(&str, Attr)], t: i32, dims: &[Dim], outs: &[(&str, i32)]) -> Vec<u8> {
    let names: Vec<&str> = outs.iter().map(|(n, _)| *n).collect();
    let mut b = ModelBuilder::new(17).domain_opset(ML, opset).input("x", t, dims).node_in_domain_with(
        ML,
        op,
        "op",
        &["x"],
        &names,
        attrs,
    );
    for &(n, ty) in outs {
        b = b.output(n, ty, None);
    }
    b.build()
}

/// A small deterministic generator (the tests' inputs and forests).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() * n as f64) as usize % n.max(1)
    }
    /// A value in [-2, 2) rounded to 0.1 (so features hit thresholds exactly sometimes).
    fn tenth(&mut self) -> f64 {
        ((self.next() * 4.0 - 2.0) * 10.0).round() / 10.0
    }
}

const MODES: [&str; 6] = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"];

/// The node and weight attributes of a random forest over `features` features with
/// weights on `targets` targets (`prefix` is "class" or "target"). `one_id`: every weight
/// on that id (the classifier's binary case). `signed`: weights of both signs.
struct ForestSpec {
    trees: usize,
    depth: usize,
    features: usize,
    targets: usize,
    one_id: Option<i64>,
    signed: bool,
    /// All branches in this mode (else a mix).
    mode: Option<&'static str>,
}

fn forest(rng: &mut Lcg, prefix: &str, s: &ForestSpec) -> Vec<(String, Attr)> {
    let (mut tree, mut id, mut feat, mut modes, mut vals, mut yes, mut no, mut miss) =
        (vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
    let (mut wid, mut wnode, mut wtree, mut w) = (vec![], vec![], vec![], vec![]);
    for t in 0..s.trees {
        // Depth-first, ids in creation order; (position, depth) to expand.
        let mut next_id = 0i64;
        let mut stack = vec![(None::<(usize, bool)>, 0usize)];
        while let Some((parent, d)) = stack.pop() {
            let me = next_id;
            next_id += 1;
            let pos = tree.len();
            if let Some((p, is_yes)) = parent {
                if is_yes {
                    yes[p] = me;
                } else {
                    no[p] = me;
                }
            }
            tree.push(t as i64);
            id.push(me);
            yes.push(0);
            no.push(0);
            if d == s.depth || (d > 0 && rng.next() < 0.2) {
                feat.push(0);
                modes.push("LEAF".to_string());
                vals.push(0.0f32);
                miss.push(0);
                for _ in 0..1 + rng.below(2) {
                    wid.push(s.one_id.unwrap_or(rng.below(s.targets) as i64));
                    wnode.push(me);
                    wtree.push(t as i64);
                    w.push(if s.signed { rng.tenth() as f32 } else { rng.next() as f32 });
                }
                continue;
            }
            feat.push(rng.below(s.features) as i64);
            modes.push(s.mode.unwrap_or(MODES[rng.below(6)]).to_string());
            vals.push(rng.tenth() as f32);
            miss.push(i64::from(rng.next() < 0.3));
            stack.push((Some((pos, false)), d + 1));
            stack.push((Some((pos, true)), d + 1));
        }
    }
    let mut a: Vec<(String, Attr)> = vec![
        ("nodes_treeids".into(), Attr::Ints(tree)),
        ("nodes_nodeids".into(), Attr::Ints(id)),
        ("nodes_featureids".into(), Attr::Ints(feat)),
        ("nodes_modes".into(), Attr::Strs(modes)),
        ("nodes_values".into(), Attr::Floats(vals)),
        ("nodes_truenodeids".into(), Attr::Ints(yes)),
        ("nodes_falsenodeids".into(), Attr::Ints(no)),
        ("nodes_missing_value_tracks_true".into(), Attr::Ints(miss)),
    ];
    a.push((format!("{prefix}_ids"), Attr::Ints(wid)));
    a.push((format!("{prefix}_nodeids"), Attr::Ints(wnode)));
    a.push((format!("{prefix}_treeids"), Attr::Ints(wtree)));
    a.push((format!("{prefix}_weights"), Attr::Floats(w)));
    a
}

/// `n` rows of `c` features of type `t`: tenths with some NaN for floats, small integers
/// for integer types.
fn features(rng: &mut Lcg, t: i32, n: usize, c: usize) -> HostTensor {
    let data: Vec<f64> = (0..n * c)
        .map(|_| match t {
            FLOAT | DOUBLE if rng.next() < 0.1 => f64::NAN,
            FLOAT | DOUBLE => rng.tenth(),
            _ => (rng.tenth() * 2.0).round(),
        })
        .collect();
    HostTensor::typed("x", elem(t), &[n as i64, c as i64], data)
}

fn attrs_ref(a: &[(String, Attr)]) -> Vec<(&str, Attr)> {
    a.iter().map(|(n, v)| (n.as_str(), v.clone())).collect()
}

const POSTS: [&str; 5] = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"];

#[test]
fn tree_classifiers_match_ort_over_post_transforms_base_values_and_the_binary_rules() {
    let mut rng = Lcg(7);
    let mut cases = 0;
    for t in [FLOAT, DOUBLE, INT64, INT32] {
        for classes in [2usize, 3, 4] {
            for post in POSTS {
                for base in [false, true] {
                    for one_id in [None, Some(0), Some(1)] {
                        if one_id.is_some() && classes != 2 {
                            continue;
                        }
                        // ORT leaves a column unwritten here; Rivet does not claim it.
                        if classes == 2 && !base && post == "PROBIT" {
                            continue;
                        }
                        let spec = ForestSpec {
                            trees: 1 + rng.below(5),
                            depth: 1 + rng.below(3),
                            features: 4,
                            targets: classes,
                            one_id,
                            signed: rng.next() < 0.5,
                            mode: None,
                        };
                        let mut a = forest(&mut rng, "class", &spec);
                        a.push(("post_transform".into(), Attr::Str(post.into())));
                        a.push((
                            "classlabels_int64s".into(),
                            Attr::Ints((0..classes as i64).map(|k| 10 + 3 * k).collect()),
                        ));
                        if base {
                            a.push((
                                "base_values".into(),
                                Attr::Floats((0..classes).map(|_| rng.tenth() as f32).collect()),
                            ));
                        }
                        let dims = [Dim::Sym("N".into()), 4.into()];
                        let model = ml_model(
                            "TreeEnsembleClassifier",
                            3,
                            &attrs_ref(&a),
                            t,
                            &dims,
                            &[("label", INT64), ("p", FLOAT)],
                        );
                        // Up to 50 rows ORT sums the trees in order, as Rivet does; past that it
                        // merges per-thread partial sums, whose last-bit differences PROBIT
                        // amplifies near 1 (the many-rows test covers more rows).
                        let rows = [1, 5, 50][rng.below(3)];
                        let what =
                            format!("classifier {t} classes {classes} {post} base {base} id {one_id:?} rows {rows}");
                        assert_matches_ort(&model, &[features(&mut rng, t, rows, 4)], 1e-5, 1e-5, &what);
                        cases += 1;
                    }
                }
            }
        }
    }
    assert!(cases > 150, "{cases}");
}

#[test]
fn tree_regressors_match_ort_for_every_aggregate_and_branch_mode() {
    let mut rng = Lcg(11);
    for t in [FLOAT, DOUBLE] {
        for agg in ["SUM", "AVERAGE", "MIN", "MAX"] {
            for targets in [1usize, 3] {
                for mode in MODES.iter().map(|m| Some(*m)).chain([None]) {
                    let post = POSTS[rng.below(5)];
                    let spec = ForestSpec {
                        trees: 1 + rng.below(6),
                        depth: 3,
                        features: 5,
                        targets,
                        one_id: None,
                        signed: true,
                        mode,
                    };
                    let mut a = forest(&mut rng, "target", &spec);
                    a.push(("n_targets".into(), Attr::Int(targets as i64)));
                    a.push(("aggregate_function".into(), Attr::Str(agg.into())));
                    a.push(("post_transform".into(), Attr::Str(post.into())));
                    if rng.next() < 0.5 {
                        a.push((
                            "base_values".into(),
                            Attr::Floats((0..targets).map(|_| rng.tenth() as f32).collect()),
                        ));
                    }
                    let model = ml_model(
                        "TreeEnsembleRegressor",
                        3,
                        &attrs_ref(&a),
                        t,
                        &[Dim::Sym("N".into()), 5.into()],
                        &[("y", FLOAT)],
                    );
                    for rows in [1, 9] {
                        let what = format!("regressor {t} {agg} targets {targets} {mode:?} {post} rows {rows}");
                        assert_matches_ort(&model, &[features(&mut rng, t, rows, 5)], 1e-5, 1e-5, &what);
                    }
                }
            }
        }
    }
}

/// The `_as_tensor` twins of a float64 model's thresholds, weights and base values.
#[test]
fn float64_thresholds_from_as_tensor_attributes_match_ort() {
    let mut rng = Lcg(5);
    let spec = ForestSpec { trees: 4, depth: 3, features: 3, targets: 3, one_id: None, signed: true, mode: None };
    let mut a = forest(&mut rng, "class", &spec);
    let as_tensor = |a: &mut Vec<(String, Attr)>, name: &str, extra: f64| {
        let i = a.iter().position(|(n, _)| n == name).expect("attribute");
        let Attr::Floats(v) = a.remove(i).1 else { panic!("floats") };
        // Values float32 cannot hold, so float64 thresholds are really used.
        let d: Vec<u8> = v.iter().flat_map(|&x| (x as f64 + extra).to_le_bytes()).collect();
        a.push((format!("{name}_as_tensor"), Attr::Tensor(DOUBLE, vec![v.len() as i64], d)));
    };
    as_tensor(&mut a, "nodes_values", 1e-9);
    as_tensor(&mut a, "class_weights", 1e-9);
    a.push(("classlabels_int64s".into(), Attr::Ints(vec![0, 1, 2])));
    a.push(("post_transform".into(), Attr::Str("SOFTMAX".into())));
    let model = ml_model(
        "TreeEnsembleClassifier",
        3,
        &attrs_ref(&a),
        DOUBLE,
        &[7.into(), 3.into()],
        &[("l", INT64), ("p", FLOAT)],
    );
    assert_matches_ort(&model, &[features(&mut rng, DOUBLE, 7, 3)], 1e-5, 1e-5, "as_tensor thresholds");
    // A float32 input with float64 tensors is refused (ORT's kernel rejects it too).
    let model = ml_model(
        "TreeEnsembleClassifier",
        3,
        &attrs_ref(&a),
        FLOAT,
        &[7.into(), 3.into()],
        &[("l", INT64), ("p", FLOAT)],
    );
    let Err(err) = harness::session(env(), &model, Arm::Rivet, &strict()) else { panic!("not claimed") };
    assert!(err.contains("threshold type"), "{err}");
}

/// Opset 5's TreeEnsemble with set-membership branches (the chain of equality tests).
#[test]
fn tree_ensemble_opset5_with_set_membership_matches_ort() {
    let f64s = |v: &[f64]| Attr::Tensor(DOUBLE, vec![v.len() as i64], v.iter().flat_map(|x| x.to_le_bytes()).collect());
    let f32s = |v: &[f32]| Attr::Tensor(FLOAT, vec![v.len() as i64], v.iter().flat_map(|x| x.to_le_bytes()).collect());
    let u8s = |v: &[u8]| Attr::Tensor(2, vec![v.len() as i64], v.to_vec());
    // Tree 0: node 0 (x0 in {1, 3, 5}?) -> node 1 (x1 <= 0.5) / leaf 2; node 1 -> leaf 0 / leaf 1.
    // Tree 1: node 2 (x2 > -1, NaN goes true) -> leaf 3 / leaf 4.
    for t in [FLOAT, DOUBLE] {
        let tensor =
            |v: &[f64]| if t == DOUBLE { f64s(v) } else { f32s(&v.iter().map(|&x| x as f32).collect::<Vec<_>>()) };
        for (agg, post) in [(1, 0), (0, 0), (2, 4), (3, 3)] {
            let attrs = vec![
                ("n_targets", Attr::Int(2)),
                ("aggregate_function", Attr::Int(agg)),
                ("post_transform", Attr::Int(post)),
                ("tree_roots", Attr::Ints(vec![0, 2])),
                ("nodes_modes", u8s(&[6, 0, 3])),
                ("nodes_featureids", Attr::Ints(vec![0, 1, 2])),
                ("nodes_splits", tensor(&[0.0, 0.5, -1.0])),
                ("nodes_truenodeids", Attr::Ints(vec![1, 0, 3])),
                ("nodes_trueleafs", Attr::Ints(vec![0, 1, 1])),
                ("nodes_falsenodeids", Attr::Ints(vec![2, 1, 4])),
                ("nodes_falseleafs", Attr::Ints(vec![1, 1, 1])),
                ("nodes_missing_value_tracks_true", Attr::Ints(vec![0, 0, 1])),
                ("membership_values", tensor(&[1.0, 3.0, 5.0, f64::NAN])),
                ("leaf_targetids", Attr::Ints(vec![0, 1, 0, 1, 0])),
                ("leaf_weights", tensor(&[0.25, -0.5, 1.5, 0.75, -2.0])),
            ];
            let model = ml_model("TreeEnsemble", 5, &attrs, t, &[Dim::Sym("N".into()), 3.into()], &[("y", t)]);
            let x: Vec<f64> =
                vec![1.0, 0.2, 0.0, 3.0, 0.9, -2.0, 2.0, 0.0, f64::NAN, 5.0, f64::NAN, 7.0, 4.0, -3.0, -1.0];
            let what = format!("TreeEnsemble {t} aggregate {agg} post {post}");
            assert_matches_ort(&model, &[HostTensor::typed("x", elem(t), &[5, 3], x)], 1e-5, 1e-5, &what);
        }
    }
}

#[test]
fn many_rows_split_across_the_pool_match_ort() {
    let mut rng = Lcg(3);
    let spec = ForestSpec {
        trees: 40,
        depth: 6,
        features: 6,
        targets: 3,
        one_id: None,
        signed: false,
        mode: Some("BRANCH_LEQ"),
    };
    let mut a = forest(&mut rng, "class", &spec);
    a.push(("classlabels_int64s".into(), Attr::Ints(vec![4, 5, 6])));
    a.push(("post_transform".into(), Attr::Str("NONE".into())));
    let model = ml_model(
        "TreeEnsembleClassifier",
        3,
        &attrs_ref(&a),
        FLOAT,
        &[Dim::Sym("N".into()), 6.into()],
        &[("l", INT64), ("p", FLOAT)],
    );
    // Few rows (one task), many rows (split across tasks).
    for rows in [3, 3000] {
        assert_matches_ort(&model, &[features(&mut rng, FLOAT, rows, 6)], 1e-5, 1e-5, &format!("{rows} rows"));
    }
}

#[test]
fn a_tree_reading_a_missing_feature_is_a_run_error_naming_the_node_and_the_session_survives() {
    let mut rng = Lcg(1);
    let spec = ForestSpec {
        trees: 2,
        depth: 2,
        features: 4,
        targets: 1,
        one_id: None,
        signed: true,
        mode: Some("BRANCH_LEQ"),
    };
    let mut a = forest(&mut rng, "target", &spec);
    a.push(("n_targets".into(), Attr::Int(1)));
    let model = ml_model(
        "TreeEnsembleRegressor",
        3,
        &attrs_ref(&a),
        FLOAT,
        &[Dim::Sym("N".into()), Dim::Sym("C".into())],
        &[("y", FLOAT)],
    );
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let err = harness::run(&mut rivet, &[features(&mut rng, FLOAT, 2, 1)]).expect_err("one feature is too few");
    assert!(err.contains("node 'op' (TreeEnsembleRegressor)") && err.contains("the input has 1"), "{err}");
    let out = harness::run(&mut rivet, &[features(&mut rng, FLOAT, 2, 4)]).expect("the session still runs");
    assert_eq!(out[0].shape, vec![2, 1]);
}

#[test]
fn string_labels_and_zipmap_style_models_are_not_claimed() {
    let mut rng = Lcg(2);
    let spec = ForestSpec { trees: 1, depth: 1, features: 2, targets: 2, one_id: None, signed: false, mode: None };
    let mut a = forest(&mut rng, "class", &spec);
    a.push(("classlabels_strings".into(), Attr::Strs(vec!["a".into(), "b".into()])));
    let model =
        ml_model("TreeEnsembleClassifier", 3, &attrs_ref(&a), FLOAT, &[1.into(), 2.into()], &[("l", 8), ("p", FLOAT)]);
    let Err(err) = harness::session(env(), &model, Arm::Rivet, &strict()) else { panic!("not claimed") };
    assert!(err.contains("string labels"), "{err}");
}

#[test]
fn linear_classifier_and_regressor_match_ort() {
    let mut rng = Lcg(9);
    let coef = |rng: &mut Lcg, n: usize| Attr::Floats((0..n).map(|_| rng.tenth() as f32).collect());
    for t in [FLOAT, DOUBLE, INT64, INT32] {
        for (classes, labels) in [(1usize, 2usize), (1, 0), (3, 3)] {
            for post in POSTS {
                if classes == 1 && labels == 2 && post == "PROBIT" {
                    continue; // not claimed (ORT misplaces the scores)
                }
                let mut a = vec![
                    ("coefficients", coef(&mut rng, classes * 3)),
                    ("intercepts", coef(&mut rng, classes)),
                    ("post_transform", Attr::Str(post.into())),
                ];
                if labels > 0 {
                    a.push(("classlabels_ints", Attr::Ints((0..labels as i64).map(|k| 7 - k).collect())));
                }
                let model = ml_model(
                    "LinearClassifier",
                    1,
                    &a,
                    t,
                    &[Dim::Sym("N".into()), 3.into()],
                    &[("l", INT64), ("p", FLOAT)],
                );
                let mut x = features(&mut rng, t, 6, 3);
                x.data.iter_mut().for_each(|v| *v = if v.is_nan() { 0.5 } else { *v });
                assert_matches_ort(
                    &model,
                    &[x],
                    1e-5,
                    1e-5,
                    &format!("LinearClassifier {t} {classes}/{labels} {post}"),
                );
            }
        }
    }
    for (targets, post) in [(1usize, "NONE"), (1, "PROBIT"), (2, "SOFTMAX"), (3, "LOGISTIC")] {
        let a = vec![
            ("coefficients", coef(&mut rng, targets * 4)),
            ("intercepts", coef(&mut rng, targets)),
            ("targets", Attr::Int(targets as i64)),
            ("post_transform", Attr::Str(post.into())),
        ];
        let model = ml_model("LinearRegressor", 1, &a, FLOAT, &[Dim::Sym("N".into()), 4.into()], &[("y", FLOAT)]);
        let mut x = features(&mut rng, FLOAT, 5, 4);
        x.data.iter_mut().for_each(|v| *v = if v.is_nan() { 0.1 } else { *v / 4.0 });
        assert_matches_ort(&model, &[x], 1e-5, 1e-5, &format!("LinearRegressor {targets} {post}"));
    }
}

#[test]
fn scaler_normalizer_binarizer_imputer_match_ort() {
    let mut rng = Lcg(4);
    for t in [FLOAT, DOUBLE, INT64, INT32] {
        for (scale, offset) in [(vec![2.0f32], vec![0.5f32]), (vec![1.0, -2.0, 0.5], vec![0.1, 0.2, -0.3])] {
            let a = [("scale", Attr::Floats(scale.clone())), ("offset", Attr::Floats(offset.clone()))];
            let model = ml_model("Scaler", 1, &a, t, &[Dim::Sym("N".into()), 3.into()], &[("y", FLOAT)]);
            assert_matches_ort(&model, &[features(&mut rng, t, 4, 3)], 1e-6, 1e-6, &format!("Scaler {t}"));
        }
        for norm in ["MAX", "L1", "L2"] {
            let model = ml_model(
                "Normalizer",
                1,
                &[("norm", Attr::Str(norm.into()))],
                t,
                &[Dim::Sym("N".into()), 4.into()],
                &[("y", FLOAT)],
            );
            let mut x = features(&mut rng, t, 5, 4);
            x.data.iter_mut().for_each(|v| *v = if v.is_nan() { 1.5 } else { *v });
            x.data[0..4].fill(0.0); // a zero row passes through
            assert_matches_ort(&model, &[x], 1e-6, 1e-6, &format!("Normalizer {t} {norm}"));
        }
    }
    // A rank-3 input is an error (as in ORT), naming the node; the session survives.
    let dims = [Dim::Sym("A".into()), 3.into(), Dim::Sym("B".into())];
    let model = ml_model("Normalizer", 1, &[("norm", Attr::Str("L1".into()))], FLOAT, &dims, &[("y", FLOAT)]);
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let err = harness::run(&mut rivet, &[HostTensor::f32("x", &[2, 3, 2], vec![1.0; 12])]).expect_err("rank 3");
    assert!(err.contains("node 'op' (Normalizer)") && err.contains("rank 3"), "{err}");

    let model = ml_model(
        "Binarizer",
        1,
        &[("threshold", Attr::Float(0.3))],
        FLOAT,
        &[Dim::Sym("N".into()), 3.into()],
        &[("y", FLOAT)],
    );
    let x = HostTensor::f32("x", &[2, 3], vec![0.3, 0.31, -1.0, 5.0, 0.0, 0.29]);
    assert_matches_ort(&model, &[x], 0.0, 0.0, "Binarizer");
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let err = harness::run(&mut rivet, &[HostTensor::f32("x", &[1, 3], vec![0.0, f32::NAN, 1.0])]).expect_err("NaN");
    assert!(err.contains("node 'op' (Binarizer)") && err.contains("NaN"), "{err}");
    harness::run(&mut rivet, &[HostTensor::f32("x", &[1, 3], vec![0.0; 3])]).expect("the session still runs");

    for (imputed, replaced) in [(vec![9.0f32], f32::NAN), (vec![1.0, 2.0, 3.0], 0.5)] {
        let a = [("imputed_value_floats", Attr::Floats(imputed)), ("replaced_value_float", Attr::Float(replaced))];
        let model = ml_model("Imputer", 1, &a, FLOAT, &[Dim::Sym("N".into()), 3.into()], &[("y", FLOAT)]);
        let x = HostTensor::f32("x", &[2, 3], vec![f32::NAN, 0.5, 1.0, 0.5, f32::NAN, -1.0]);
        assert_matches_ort(&model, &[x], 0.0, 0.0, &format!("Imputer {replaced}"));
    }
    let a = [("imputed_value_int64s", Attr::Ints(vec![-7])), ("replaced_value_int64", Attr::Int(3))];
    let model = ml_model("Imputer", 1, &a, INT64, &[Dim::Sym("N".into()), 2.into()], &[("y", INT64)]);
    let x = HostTensor::typed("x", E::Int64, &[2, 2], vec![3.0, 4.0, -3.0, 3.0]);
    assert_matches_ort(&model, &[x], 0.0, 0.0, "Imputer int64");
}

#[test]
fn array_feature_extractor_and_one_hot_encoder_match_ort() {
    for t in [FLOAT, DOUBLE, INT64, INT32] {
        let model = ModelBuilder::new(17)
            .domain_opset(ML, 1)
            .input("x", t, &[Dim::Sym("N".into()), 4.into()])
            .input("i", INT64, &[Dim::Sym("K".into())])
            .node_in_domain_with(ML, "ArrayFeatureExtractor", "op", &["x", "i"], &["y"], &[])
            .output("y", t, None)
            .build();
        let x = HostTensor::typed("x", elem(t), &[2, 4], (0..8).map(f64::from).collect());
        let i = HostTensor::typed("i", E::Int64, &[3], vec![3.0, 0.0, 3.0]);
        assert_matches_ort(&model, &[x, i], 0.0, 0.0, &format!("ArrayFeatureExtractor {t}"));
        if t == FLOAT {
            let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
            let x = HostTensor::typed("x", E::Float32, &[1, 4], vec![0.0; 4]);
            let err = harness::run(&mut rivet, &[x.clone(), HostTensor::typed("i", E::Int64, &[1], vec![4.0])])
                .expect_err("index 4");
            assert!(err.contains("node 'op' (ArrayFeatureExtractor)") && err.contains("outside 0..4"), "{err}");
            harness::run(&mut rivet, &[x, HostTensor::typed("i", E::Int64, &[1], vec![1.0])]).expect("still runs");
        }
    }
    // 1-D input: [1, K] out.
    let model = ModelBuilder::new(17)
        .domain_opset(ML, 1)
        .input("x", FLOAT, &[5.into()])
        .input("i", INT64, &[2.into()])
        .node_in_domain_with(ML, "ArrayFeatureExtractor", "op", &["x", "i"], &["y"], &[])
        .output("y", FLOAT, None)
        .build();
    let inputs = [
        HostTensor::f32("x", &[5], vec![1.0, 2.0, 3.0, 4.0, 5.0]),
        HostTensor::typed("i", E::Int64, &[2], vec![4.0, 1.0]),
    ];
    assert_matches_ort(&model, &inputs, 0.0, 0.0, "ArrayFeatureExtractor 1-D");

    for t in [FLOAT, DOUBLE, INT64] {
        let a = [("cats_int64s", Attr::Ints(vec![5, -1, 2, 5])), ("zeros", Attr::Int(1))];
        let model = ml_model("OneHotEncoder", 1, &a, t, &[Dim::Sym("N".into()), 3.into()], &[("y", FLOAT)]);
        let x = HostTensor::typed("x", elem(t), &[2, 3], vec![5.0, 2.0, 7.0, -1.0, 2.0, 5.0]);
        assert_matches_ort(&model, &[x], 0.0, 0.0, &format!("OneHotEncoder {t}"));
    }
    let a = [("cats_int64s", Attr::Ints(vec![1, 2])), ("zeros", Attr::Int(0))];
    let model = ml_model("OneHotEncoder", 1, &a, INT64, &[Dim::Sym("N".into())], &[("y", FLOAT)]);
    let mut rivet = harness::session(env(), &model, Arm::Rivet, &strict()).expect("session");
    let err = harness::run(&mut rivet, &[HostTensor::typed("x", E::Int64, &[2], vec![1.0, 3.0])])
        .expect_err("3 is no category");
    assert!(err.contains("node 'op' (OneHotEncoder)") && err.contains("zeros = 0"), "{err}");
}

#[test]
fn label_encoder_maps_numbers_at_opsets_2_and_4_like_ort() {
    let f32t = |v: &[f32]| Attr::Tensor(FLOAT, vec![v.len() as i64], v.iter().flat_map(|x| x.to_le_bytes()).collect());
    let i64t = |v: &[i64]| Attr::Tensor(INT64, vec![v.len() as i64], v.iter().flat_map(|x| x.to_le_bytes()).collect());
    let f64t = |v: &[f64]| Attr::Tensor(DOUBLE, vec![v.len() as i64], v.iter().flat_map(|x| x.to_le_bytes()).collect());
    let ints = vec![3.0, -1.0, 7.0, 3.0, 100.0];
    // A NaN of the other sign still matches a NaN key (ORT compares NaN as equal).
    let floats = vec![0.5, -0.0, f64::NAN, 2.5, 9.0, -f64::NAN];
    type Case<'a> = (i64, i32, i32, Vec<(&'a str, Attr)>, Vec<f64>);
    let cases: Vec<Case> = vec![
        (
            2,
            INT64,
            INT64,
            vec![
                ("keys_int64s", Attr::Ints(vec![3, 7, 3])),
                ("values_int64s", Attr::Ints(vec![30, 70, 99])),
                ("default_int64", Attr::Int(-5)),
            ],
            ints.clone(),
        ),
        (
            2,
            INT64,
            FLOAT,
            vec![("keys_int64s", Attr::Ints(vec![3, -1])), ("values_floats", Attr::Floats(vec![0.3, -0.1]))],
            ints.clone(),
        ),
        (
            2,
            FLOAT,
            INT64,
            vec![("keys_floats", Attr::Floats(vec![0.5, 0.0, 2.5])), ("values_int64s", Attr::Ints(vec![1, 2, 3]))],
            floats.clone(),
        ),
        (
            2,
            FLOAT,
            FLOAT,
            vec![
                ("keys_floats", Attr::Floats(vec![0.5, 9.0])),
                ("values_floats", Attr::Floats(vec![5.0, 90.0])),
                ("default_float", Attr::Float(-1.0)),
            ],
            floats.clone(),
        ),
        (
            4,
            INT64,
            INT64,
            vec![("keys_tensor", i64t(&[3, 7])), ("values_tensor", i64t(&[-3, -7])), ("default_tensor", i64t(&[42]))],
            ints.clone(),
        ),
        (4, INT64, FLOAT, vec![("keys_int64s", Attr::Ints(vec![7])), ("values_tensor", f32t(&[0.7]))], ints.clone()),
        (
            4,
            FLOAT,
            FLOAT,
            vec![("keys_tensor", f32t(&[f32::NAN, 2.5])), ("values_tensor", f32t(&[1.0, 2.0]))],
            floats.clone(),
        ),
        (
            4,
            DOUBLE,
            DOUBLE,
            vec![
                ("keys_tensor", f64t(&[0.5, 9.0])),
                ("values_tensor", f64t(&[1e-12, 3.0])),
                ("default_tensor", f64t(&[-2.0])),
            ],
            floats.clone(),
        ),
    ];
    for (opset, kt, vt, attrs, x) in cases {
        let model = ml_model("LabelEncoder", opset, &attrs, kt, &[Dim::Sym("N".into())], &[("y", vt)]);
        let input = HostTensor::typed("x", elem(kt), &[x.len() as i64], x);
        assert_matches_ort(&model, &[input], 0.0, 0.0, &format!("LabelEncoder opset {opset} {kt} -> {vt}"));
    }
}

#[test]
fn tfidf_vectorizer_over_int_tokens_matches_ort() {
    for t in [INT32, INT64] {
        for (mode, weights) in [("TF", false), ("IDF", false), ("IDF", true), ("TFIDF", true)] {
            let mut attrs = vec![
                ("mode", Attr::Str(mode.into())),
                ("min_gram_length", Attr::Int(1)),
                ("max_gram_length", Attr::Int(2)),
                ("max_skip_count", Attr::Int(2)),
                ("ngram_counts", Attr::Ints(vec![0, 3])),
                ("ngram_indexes", Attr::Ints(vec![0, 1, 2, 3, 4, 5])),
                ("pool_int64s", Attr::Ints(vec![2, 3, 5, 2, 3, 5, 7, 3, 2])),
            ];
            if weights {
                attrs.push(("weights", Attr::Floats(vec![0.5, 1.0, 1.5, 2.0, 2.5, 3.0])));
            }
            let model = ModelBuilder::new(9)
                .input("x", t, &[Dim::Sym("B".into()), 8.into()])
                .node_with("TfIdfVectorizer", "op", &["x"], &["y"], &attrs)
                .output("y", FLOAT, None)
                .build();
            let x = HostTensor::typed(
                "x",
                elem(t),
                &[2, 8],
                vec![2., 3., 5., 2., 7., 3., 2., 3., 5., 5., 7., 3., 2., 4., 2., 3.],
            );
            assert_matches_ort(&model, &[x], 0.0, 0.0, &format!("TfIdf {t} {mode} weights {weights}"));
        }
    }
}

/// The scikit-learn pipelines (tests/models/ml/export.py) on Rivet alone against ORT:
/// labels equal, probabilities within 1e-5.
#[test]
fn scikit_learn_pipelines_match_ort() {
    let dir = rivet::paths::workspace_root().join("tests/models/ml");
    let mut rng = Lcg(2024);
    for name in ["forest_pipeline", "boosting_pipeline", "logistic_pipeline"] {
        let model = std::fs::read(dir.join(format!("{name}.onnx"))).expect("model file");
        for rows in [1, 7, 500] {
            let data: Vec<f64> = (0..rows * 8)
                .map(|_| {
                    if name == "logistic_pipeline" && rng.next() < 0.05 {
                        f64::NAN
                    } else {
                        (rng.next() * 6.0 - 3.0) * 1.5
                    }
                })
                .collect();
            let x = HostTensor::typed("X", E::Float32, &[rows as i64, 8], data);
            assert_matches_ort(&model, &[x], 1e-5, 1e-5, &format!("{name} {rows} rows"));
        }
    }
}

#[test]
fn svm_classifier_and_regressor_match_ort_for_every_kernel() {
    let mut rng = Lcg(13);
    let vals = |rng: &mut Lcg, n: usize| Attr::Floats((0..n).map(|_| rng.tenth() as f32).collect());
    let kernels = [
        ("LINEAR", [0.0f32, 0.0, 0.0]),
        ("POLY", [0.3, 0.5, 3.0]),
        ("RBF", [0.4, 0.0, 0.0]),
        ("SIGMOID", [0.2, 0.1, 0.0]),
    ];
    let nf = 3usize;
    for (kernel, params) in kernels {
        for (classes, per_class) in [(2usize, vec![2i64, 3]), (3, vec![2, 1, 2])] {
            let v: usize = per_class.iter().sum::<i64>() as usize;
            let pairs = classes * (classes - 1) / 2;
            for proba in [false, true] {
                for post in ["NONE", "LOGISTIC", "SOFTMAX"] {
                    let mut a = vec![
                        ("kernel_type", Attr::Str(kernel.into())),
                        ("kernel_params", Attr::Floats(params.to_vec())),
                        ("vectors_per_class", Attr::Ints(per_class.clone())),
                        ("support_vectors", vals(&mut rng, v * nf)),
                        ("coefficients", vals(&mut rng, (classes - 1) * v)),
                        ("rho", vals(&mut rng, pairs)),
                        ("classlabels_ints", Attr::Ints((0..classes as i64).map(|c| 2 * c + 1).collect())),
                        ("post_transform", Attr::Str(post.into())),
                    ];
                    if proba {
                        a.push(("prob_a", vals(&mut rng, pairs)));
                        a.push(("prob_b", vals(&mut rng, pairs)));
                    }
                    let dims = [Dim::Sym("N".into()), (nf as i64).into()];
                    let model = ml_model("SVMClassifier", 1, &a, FLOAT, &dims, &[("l", INT64), ("p", FLOAT)]);
                    let mut x = features_of(&mut rng, 6, nf);
                    x.data.iter_mut().for_each(|v| *v /= 2.0);
                    let what = format!("SVMClassifier {kernel} {classes} classes proba {proba} {post}");
                    assert_matches_ort(&model, &[x], 1e-5, 1e-5, &what);
                }
            }
        }
        // SVMRegressor: support vectors, and one_class.
        for one_class in [0, 1] {
            let a = vec![
                ("kernel_type", Attr::Str(kernel.into())),
                ("kernel_params", Attr::Floats(params.to_vec())),
                ("n_supports", Attr::Int(4)),
                ("support_vectors", vals(&mut rng, 4 * nf)),
                ("coefficients", vals(&mut rng, 4)),
                ("rho", vals(&mut rng, 1)),
                ("one_class", Attr::Int(one_class)),
            ];
            let model = ml_model("SVMRegressor", 1, &a, FLOAT, &[Dim::Sym("N".into()), 3.into()], &[("y", FLOAT)]);
            assert_matches_ort(
                &model,
                &[features_of(&mut rng, 5, 3)],
                1e-5,
                1e-5,
                &format!("SVMRegressor {kernel} one_class {one_class}"),
            );
        }
    }
    // Linear (LIBLINEAR) modes: no support vectors.
    let a = vec![
        ("kernel_params", Attr::Floats(vec![])),
        ("coefficients", vals(&mut rng, 3 * nf)),
        ("rho", vals(&mut rng, 1)),
        ("classlabels_ints", Attr::Ints(vec![4, 5, 6])),
        ("post_transform", Attr::Str("SOFTMAX".into())),
    ];
    let model =
        ml_model("SVMClassifier", 1, &a, DOUBLE, &[Dim::Sym("N".into()), 3.into()], &[("l", INT64), ("p", FLOAT)]);
    let mut x = features(&mut rng, DOUBLE, 4, 3);
    x.data.iter_mut().for_each(|v| *v = if v.is_nan() { 0.0 } else { *v });
    assert_matches_ort(&model, &[x], 1e-5, 1e-5, "SVMClassifier linear");
    let a = vec![
        ("kernel_params", Attr::Floats(vec![])),
        ("n_supports", Attr::Int(0)),
        ("coefficients", vals(&mut rng, 3)),
        ("rho", vals(&mut rng, 1)),
    ];
    let model = ml_model("SVMRegressor", 1, &a, FLOAT, &[Dim::Sym("N".into()), 3.into()], &[("y", FLOAT)]);
    assert_matches_ort(&model, &[features_of(&mut rng, 4, 3)], 1e-5, 1e-5, "SVMRegressor linear");
}

/// Float32 features without NaN.
fn features_of(rng: &mut Lcg, n: usize, c: usize) -> HostTensor {
    HostTensor::f32("x", &[n as i64, c as i64], (0..n * c).map(|_| rng.tenth() as f32).collect())
}
