//! TreeEnsembleClassifier, TreeEnsembleRegressor (ml opsets 1 and 3) and TreeEnsemble
//! (opset 5). The forest is flattened at compile (`tree_build`); a Run walks every tree
//! for each row, rows split across ORT's pool when there are many. Scores are summed in
//! the threshold type in tree order, and finished as ORT's CPU kernels finish them
//! (its base-value, binary-class and post-transform rules).

use std::sync::Arc;

use super::post::{self, Post};
use super::tree_build::{build_v3, build_v5, Forest, Thr};
use super::{ints_attr, numeric_input, refuse_strings, rows, with_elems, Elem};
use crate::data::DataMut;
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::{int_attr, string_attr};
use crate::ops::op::util::{bad_types, check_inputs, input_type, output_type};
use crate::ops::{Op, RunIn, ShapeError, ShapeIn};
use crate::parallel::{TaskScratch, MAX_TASKS};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Agg {
    Sum,
    Average,
    Min,
    Max,
}

#[derive(Debug)]
enum Kind<T> {
    Regress { agg: Agg, base: Vec<T> },
    Classify { base: Vec<T>, labels: Vec<i64>, binary_case: bool, all_positive: bool },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum What {
    Scores,
    Label,
}

#[derive(Debug)]
struct Trees<T> {
    forest: Forest<T>,
    kind: Kind<T>,
    post: Post,
    what: What,
}

/// A classifier row's label: a class's position, or ORT's literal 0 / 1 (two classes with
/// weights on both).
#[derive(Clone, Copy)]
enum Label {
    Class(usize),
    Literal(i64),
}

const V3_COMMON: &[&str] = &[
    "base_values",
    "base_values_as_tensor",
    "nodes_falsenodeids",
    "nodes_featureids",
    "nodes_hitrates",
    "nodes_hitrates_as_tensor",
    "nodes_missing_value_tracks_true",
    "nodes_modes",
    "nodes_nodeids",
    "nodes_treeids",
    "nodes_truenodeids",
    "nodes_values",
    "nodes_values_as_tensor",
    "post_transform",
];

fn check_v3_attrs(node: &NodeDesc, extra: &[&str]) -> Result<(), String> {
    match node.attrs.iter().find(|(n, _)| !V3_COMMON.contains(&n.as_str()) && !extra.contains(&n.as_str())) {
        Some((name, _)) => Err(format!("{} attribute '{name}' is not supported", node.op_type)),
        None => Ok(()),
    }
}

/// ORT takes no base values or one per target / class.
fn check_base(len: usize, n: usize) -> Result<(), String> {
    if len != 0 && len != n {
        return Err(format!("{len} base values for {n} targets or classes (0 or {n})"));
    }
    Ok(())
}

/// The threshold type of input type `t`: float64 for float64, else float32.
fn is_f64(node: &NodeDesc) -> Result<bool, String> {
    let t = input_type(node, 0);
    if !numeric_input(t) {
        return Err(bad_types(node, "float32, float64, int64 or int32 features"));
    }
    Ok(t == dtype::DOUBLE)
}

pub fn regressor(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_v3_attrs(
        node,
        &[
            "aggregate_function",
            "n_targets",
            "target_ids",
            "target_nodeids",
            "target_treeids",
            "target_weights",
            "target_weights_as_tensor",
        ],
    )?;
    check_inputs(node, 1, 1)?;
    // ORT's CPU kernel takes float32 and float64 features only.
    if !matches!(input_type(node, 0), dtype::FLOAT | dtype::DOUBLE) || output_type(node, 0) != dtype::FLOAT {
        return Err(bad_types(node, "float32 or float64 features, float32 out"));
    }
    let agg = match string_attr(node, "aggregate_function", "SUM")? {
        "SUM" => Agg::Sum,
        "AVERAGE" => Agg::Average,
        "MIN" => Agg::Min,
        "MAX" => Agg::Max,
        a => return Err(format!("aggregate_function '{a}' is not SUM, AVERAGE, MIN or MAX")),
    };
    let post = Post::parse(string_attr(node, "post_transform", "NONE")?)?;
    let targets = int_attr(node, "n_targets", 0)?;
    let targets = usize::try_from(targets).ok().filter(|&t| t > 0).ok_or("n_targets must be positive")?;
    fn make<T: Thr>(node: &NodeDesc, agg: Agg, post: Post, targets: usize) -> Result<Arc<dyn Op>, String> {
        let v = build_v3::<T>(node, "target", targets)?;
        check_base(v.base_values.len(), targets)?;
        let kind = Kind::Regress { agg, base: v.base_values };
        Ok(Arc::new(Trees { forest: v.forest, kind, post, what: What::Scores }))
    }
    if is_f64(node)? {
        make::<f64>(node, agg, post, targets)
    } else {
        make::<f32>(node, agg, post, targets)
    }
}

pub fn classifier(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    refuse_strings(node, &["classlabels_strings"])?;
    check_v3_attrs(
        node,
        &[
            "classlabels_int64s",
            "class_ids",
            "class_nodeids",
            "class_treeids",
            "class_weights",
            "class_weights_as_tensor",
        ],
    )?;
    check_inputs(node, 1, 1)?;
    let (what, want) = if output == 0 { (What::Label, dtype::INT64) } else { (What::Scores, dtype::FLOAT) };
    if output > 1 || output_type(node, output) != want {
        return Err(bad_types(node, "int64 labels and float32 scores"));
    }
    let post = Post::parse(string_attr(node, "post_transform", "NONE")?)?;
    let labels = ints_attr(node, "classlabels_int64s")?.unwrap_or_default();
    if labels.len() < 2 {
        return Err(format!("TreeEnsembleClassifier with {} class labels is not supported", labels.len()));
    }
    fn make<T: Thr>(node: &NodeDesc, post: Post, labels: Vec<i64>, what: What) -> Result<Arc<dyn Op>, String> {
        let n = labels.len();
        let v = build_v3::<T>(node, "class", n)?;
        let binary_case = n == 2 && v.distinct_ids == 1;
        // Two classes may also have one base value (scikit-learn's boosting models).
        if !(n == 2 && v.base_values.len() == 1) {
            check_base(v.base_values.len(), n)?;
        }
        // Where ORT writes only one of the two scores (PROBIT, or one base value with
        // weights on both classes), the other is left unwritten: not claimed.
        if n == 2 && v.base_values.len() < 2 && (post == Post::Probit || (v.base_values.len() == 1 && !binary_case)) {
            return Err("a two-class ensemble with fewer than two base values and this post_transform leaves a \
                        score undefined in ORT"
                .into());
        }
        let kind = Kind::Classify { base: v.base_values, labels, binary_case, all_positive: v.all_positive };
        Ok(Arc::new(Trees { forest: v.forest, kind, post, what }))
    }
    if is_f64(node)? {
        make::<f64>(node, post, labels, what)
    } else {
        make::<f32>(node, post, labels, what)
    }
}

/// Opset 5's TreeEnsemble: float32 or float64 in, the same type out.
pub fn ensemble(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    crate::ops::op::util::check_attrs(
        node,
        &[
            "aggregate_function",
            "leaf_targetids",
            "leaf_weights",
            "membership_values",
            "n_targets",
            "nodes_falseleafs",
            "nodes_falsenodeids",
            "nodes_featureids",
            "nodes_hitrates",
            "nodes_missing_value_tracks_true",
            "nodes_modes",
            "nodes_splits",
            "nodes_trueleafs",
            "nodes_truenodeids",
            "post_transform",
            "tree_roots",
        ],
    )?;
    check_inputs(node, 1, 1)?;
    let t = input_type(node, 0);
    if !matches!(t, dtype::FLOAT | dtype::DOUBLE) || output_type(node, 0) != t {
        return Err(bad_types(node, "float32 or float64, output of the input's"));
    }
    let agg = match int_attr(node, "aggregate_function", 1)? {
        0 => Agg::Average,
        1 => Agg::Sum,
        2 => Agg::Min,
        3 => Agg::Max,
        a => return Err(format!("aggregate_function {a} is not 0..=3")),
    };
    // The spec numbers SOFTMAX 1 and LOGISTIC 2; ORT's CPU kernel reads them the other
    // way round, so neither is claimed.
    let post = match int_attr(node, "post_transform", 0)? {
        0 => Post::None,
        3 => Post::SoftmaxZero,
        4 => Post::Probit,
        p => return Err(format!("TreeEnsemble post_transform {p} is not supported (0, 3 and 4 are)")),
    };
    fn make<T: Thr>(node: &NodeDesc, agg: Agg, post: Post) -> Result<Arc<dyn Op>, String> {
        let forest = build_v5::<T>(node)?;
        Ok(Arc::new(Trees { forest, kind: Kind::Regress { agg, base: Vec::new() }, post, what: What::Scores }))
    }
    if t == dtype::DOUBLE {
        make::<f64>(node, agg, post)
    } else {
        make::<f32>(node, agg, post)
    }
}

/// An output element: float32, or float64 (opset 5 with float64 input).
trait Out: Copy + Send + Sync {
    fn of_f32(v: f32) -> Self;
    fn of_f64(v: f64) -> Self;
}
impl Out for f32 {
    fn of_f32(v: f32) -> f32 {
        v
    }
    fn of_f64(v: f64) -> f32 {
        v as f32
    }
}
impl Out for f64 {
    fn of_f32(v: f32) -> f64 {
        v as f64
    }
    fn of_f64(v: f64) -> f64 {
        v
    }
}

impl<T: Thr> Trees<T> {
    fn width(&self) -> usize {
        match &self.kind {
            Kind::Regress { .. } => self.forest.targets,
            Kind::Classify { labels, .. } => labels.len(),
        }
    }

    /// Sums (or takes the min / max of) every tree's leaf weights for row `x` into
    /// `s[..n]`, with `s[n..2n]` flagging the targets that got any (1) or none (0).
    fn accumulate<E: Elem>(&self, x: &[E], s: &mut [T]) {
        let n = self.width();
        s.fill(T::ZERO);
        let agg = match &self.kind {
            Kind::Regress { agg, .. } => *agg,
            Kind::Classify { .. } => Agg::Sum,
        };
        let (score, has) = s.split_at_mut(n);
        for &r in &self.forest.roots {
            let leaf = self.forest.leaf(r, x);
            let (first, count) = (leaf.yes as usize, leaf.no as usize);
            for &(id, w) in &self.forest.weights[first..first + count] {
                let k = id as usize;
                let fresh = has[k] == T::ZERO;
                score[k] = match agg {
                    Agg::Sum | Agg::Average => score[k].add(w),
                    Agg::Min => {
                        if fresh || w < score[k] {
                            w
                        } else {
                            score[k]
                        }
                    }
                    Agg::Max => {
                        if fresh || w > score[k] {
                            w
                        } else {
                            score[k]
                        }
                    }
                };
                has[k] = T::ONE;
            }
        }
    }

    /// One target: ORT's single-score path (the first weight of each leaf; only PROBIT
    /// applies).
    fn single<E: Elem, O: Out>(&self, x: &[E], agg: Agg, base: &[T]) -> O {
        let origin = if base.len() == 1 { base[0] } else { T::ZERO };
        let (mut score, mut has) = (T::ZERO, false);
        for &r in &self.forest.roots {
            let w = self.forest.leaf(r, x).value;
            score = match agg {
                Agg::Sum | Agg::Average => score.add(w),
                Agg::Min => {
                    if !has || w < score {
                        w
                    } else {
                        score
                    }
                }
                Agg::Max => {
                    if !has || w > score {
                        w
                    } else {
                        score
                    }
                }
            };
            has = true;
        }
        let s = match agg {
            Agg::Sum => score.add(origin),
            Agg::Average => score.div(T::from_f64(self.forest.roots.len() as f64)).add(origin),
            Agg::Min | Agg::Max => score.add(origin),
        };
        if self.post == Post::Probit {
            O::of_f32(post::probit(s.to_f32()))
        } else {
            O::of_f64(s.to_f64())
        }
    }

    /// A regressor row: `z` gets the finished scores.
    fn regress_row<E: Elem, O: Out>(&self, x: &[E], s: &mut [T], tmp: &mut [f32], z: &mut [O]) {
        let Kind::Regress { agg, base } = &self.kind else { return };
        let n = self.forest.targets;
        if n == 1 {
            z[0] = self.single(x, *agg, base);
            return;
        }
        self.accumulate(x, s);
        let use_base = base.len() == n;
        let trees = T::from_f64(self.forest.roots.len() as f64);
        let (score, has) = s.split_at_mut(n);
        for k in 0..n {
            let b = if use_base { base[k] } else { T::ZERO };
            score[k] = match agg {
                Agg::Sum => score[k].add(b),
                Agg::Average => score[k].div(trees).add(b),
                Agg::Min | Agg::Max => b.add(score[k]),
            };
        }
        // A target no leaf reached reads as 0, base value or not (ORT's has_score).
        let value = |k: usize| if has[k] == T::ZERO { T::ZERO } else { score[k] };
        if self.post == Post::None {
            for (k, o) in z.iter_mut().enumerate() {
                *o = O::of_f64(value(k).to_f64());
            }
        } else {
            for (k, t) in tmp.iter_mut().enumerate() {
                *t = value(k).to_f32();
            }
            post::apply(self.post, tmp);
            for (o, &t) in z.iter_mut().zip(tmp.iter()) {
                *o = O::of_f32(t);
            }
        }
    }

    /// A classifier row: `z` gets the scores; returns the label.
    fn classify_row<E: Elem>(&self, x: &[E], s: &mut [T], z: &mut [f32]) -> Label {
        let Kind::Classify { base, binary_case, all_positive, .. } = &self.kind else { return Label::Class(0) };
        self.accumulate(x, s);
        let n = z.len();
        let (score, has) = s.split_at_mut(n);
        let read = |score: &[T], has: &[T], k: usize| if has[k] == T::ZERO { 0.0 } else { score[k].to_f32() };
        if n > 2 {
            for (k, &b) in base.iter().enumerate() {
                score[k] = if has[k] == T::ZERO { b } else { score[k].add(b) };
                has[k] = T::ONE;
            }
            let mut best: Option<usize> = None;
            for k in 0..n {
                if has[k] != T::ZERO && best.is_none_or(|b| score[k] > score[b]) {
                    best = Some(k);
                }
            }
            for (k, o) in z.iter_mut().enumerate() {
                *o = read(score, has, k);
            }
            post::apply(self.post, z);
            return Label::Class(best.unwrap_or(0));
        }
        // Two classes.
        let mut len = 2;
        let mut add_second = -1;
        match base.len() {
            2 => {
                if has[1] != T::ZERO {
                    score[1] = base[1].add(score[0]);
                    score[0] = score[1].neg();
                } else {
                    score[1] = score[1].add(base[1]);
                    score[0] = score[0].add(base[0]);
                }
            }
            1 => {
                score[0] = score[0].add(base[0]);
                if has[1] == T::ZERO {
                    len = 1;
                }
            }
            0 => {
                add_second = 3;
                if has[1] == T::ZERO {
                    len = 1;
                }
            }
            _ => {}
        }
        let pos = if len == 2 && has[1] != T::ZERO {
            score[1]
        } else if has[0] != T::ZERO {
            score[0]
        } else {
            T::ZERO
        };
        let label = if *binary_case {
            let (cut, yes, no) = if *all_positive { (T::from_f32(0.5), 0, 1) } else { (T::ZERO, 2, 3) };
            if pos > cut {
                add_second = yes;
                Label::Class(1)
            } else {
                add_second = no;
                Label::Class(0)
            }
        } else if pos > T::ZERO {
            Label::Literal(1)
        } else {
            Label::Literal(0)
        };
        if len == 2 {
            z[0] = read(score, has, 0);
            z[1] = read(score, has, 1);
            post::apply(self.post, z);
        } else {
            let v = read(score, has, 0);
            // ORT 1.32 pairs one score as [1 - v, v] for positive weights, [-v, v] for
            // mixed, and as [logistic(-v), logistic(v)] under LOGISTIC either way.
            (z[0], z[1]) = match add_second {
                _ if self.post == Post::Logistic => (post::logistic(-v), post::logistic(v)),
                0 | 1 => (1.0 - v, v),
                _ => (-v, v),
            };
        }
        label
    }

    /// Row `i`'s scores into `z` (and its label).
    fn row<E: Elem, O: Out>(&self, x: &[E], s: &mut [T], tmp: &mut [f32], z: &mut [O]) -> Label {
        match &self.kind {
            Kind::Regress { .. } => {
                self.regress_row(x, s, tmp, z);
                Label::Class(0)
            }
            Kind::Classify { .. } => {
                let l = self.classify_row(x, s, tmp);
                for (o, &t) in z.iter_mut().zip(tmp.iter()) {
                    *o = O::of_f32(t);
                }
                l
            }
        }
    }

    /// Rows `first..first + z.len() / width` of `x` (rows of `c`) into `z`.
    fn rows_into<E: Elem, O: Out>(&self, x: &[E], c: usize, first: usize, z: &mut [O], ts: &mut TaskScratch) {
        let n = self.width();
        let (s, tmp) = T::task_bufs(ts);
        s.resize(2 * n, T::ZERO);
        tmp.resize(n, 0.0);
        for (j, zr) in z.chunks_exact_mut(n).enumerate() {
            let i = first + j;
            self.row(&x[i * c..(i + 1) * c], s, tmp, zr);
        }
    }

    /// The labels of rows `first..first + codes.len()`, coded as f32: a class position, or
    /// -1 - a literal label.
    fn label_rows<E: Elem>(&self, x: &[E], c: usize, first: usize, codes: &mut [f32], ts: &mut TaskScratch) {
        let n = self.width();
        let (s, tmp) = T::task_bufs(ts);
        s.resize(2 * n, T::ZERO);
        tmp.resize(n, 0.0);
        for (j, code) in codes.iter_mut().enumerate() {
            let i = first + j;
            *code = match self.classify_row(&x[i * c..(i + 1) * c], s, tmp) {
                Label::Class(k) => k as f32,
                Label::Literal(v) => -1.0 - v as f32,
            };
        }
    }
}

/// Rows per parallel task (all of them in one when there are few).
fn rows_per_task(n: usize) -> usize {
    if n < 64 {
        n.max(1)
    } else {
        n.div_ceil(MAX_TASKS).max(16)
    }
}

impl<T: Thr> Op for Trees<T> {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (n, c) = rows(x.shapes[0])?;
        if self.forest.features > c {
            return Err(format!("the trees read feature {} but the input has {c}", self.forest.features - 1).into());
        }
        Ok(match self.what {
            What::Label => Shape::from_slice(&[n]),
            What::Scores => Shape::from_slice(&[n, self.width()]),
        })
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (n, c) = rows(x.shapes[0])?;
        if self.forest.features > c {
            return Err(format!("the trees read feature {} but the input has {c}", self.forest.features - 1));
        }
        let w = self.width();
        let per = rows_per_task(n);
        let par = x.par;
        with_elems!(x.ins[0], v => {
            if v.len() < n * c {
                return Err("the input is shorter than its shape".into());
            }
            match (self.what, out) {
                (What::Scores, DataMut::F32(y)) => {
                    par.for_each_task(y, per * w, &|start, chunk, ts| self.rows_into(v, c, start / w.max(1), chunk, ts));
                }
                (What::Scores, DataMut::F64(y)) => {
                    self.rows_into(v, c, 0, y, &mut par.scratch().task(0));
                }
                (What::Label, DataMut::I64(y)) => {
                    let Kind::Classify { labels, .. } = &self.kind else { return Err("no labels".into()) };
                    let codes = &mut x.scratch.f32;
                    codes.resize(n, 0.0);
                    par.for_each_task(codes, per, &|start, chunk, ts| self.label_rows(v, c, start, chunk, ts));
                    for (o, &k) in y.iter_mut().zip(codes.iter()) {
                        *o = if k >= 0.0 { labels[k as usize] } else { (-1.0 - k) as i64 };
                    }
                }
                _ => return Err("the output's element type differs from the plan's".into()),
            }
            Ok(())
        }, Err("the input must be float32, float64, int64 or int32".into()))
    }
}
