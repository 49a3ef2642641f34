//! SVMClassifier and SVMRegressor: support-vector (LIBSVM) or linear (LIBLINEAR) models
//! with LINEAR, POLY, RBF or SIGMOID kernels, computed as ORT's CPU kernels compute them
//! (kernel values in float32, pairwise decision sums in float64, one vote per pair, and
//! Platt probabilities coupled across classes when prob_a / prob_b are given).

use std::sync::Arc;

use super::post::{self, Post};
use super::{floats_attr, ints_attr, numeric_input, refuse_strings, rows, with_elems, Elem};
use crate::data::DataMut;
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::{int_attr, string_attr};
use crate::ops::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use crate::ops::{Op, RunIn, ShapeError, ShapeIn};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kernel {
    Linear,
    Poly { gamma: f32, coef0: f32, degree: f32 },
    Rbf { gamma: f32 },
    Sigmoid { gamma: f32, coef0: f32 },
}

impl Kernel {
    fn parse(node: &NodeDesc) -> Result<Kernel, String> {
        let p = floats_attr(node, "kernel_params")?.ok_or("the SVM needs kernel_params")?;
        let (gamma, coef0, degree) = match p.as_slice() {
            [] => (0.0, 0.0, 0.0),
            [g, c, d, ..] => (*g, *c, *d),
            _ => return Err(format!("kernel_params has {} values (3: gamma, coef0, degree)", p.len())),
        };
        Ok(match string_attr(node, "kernel_type", "LINEAR")? {
            "LINEAR" => Kernel::Linear,
            "POLY" => Kernel::Poly { gamma, coef0, degree },
            "RBF" => Kernel::Rbf { gamma },
            "SIGMOID" => Kernel::Sigmoid { gamma, coef0 },
            k => return Err(format!("kernel_type '{k}' is not LINEAR, POLY, RBF or SIGMOID")),
        })
    }

    /// K(x, s) (plus `c` for the linear kernel, as ORT folds rho into it).
    fn apply<E: Elem>(self, x: &[E], s: &[f32], c: f32) -> f32 {
        let dot = || x.iter().zip(s).fold(0.0f32, |a, (&u, &v)| a + u.f32() * v);
        match self {
            Kernel::Linear => dot() + c,
            Kernel::Poly { gamma, coef0, degree } => {
                let v = gamma * dot() + coef0;
                if degree == 2.0 {
                    v * v
                } else if degree == 3.0 {
                    v * v * v
                } else {
                    v.powf(degree)
                }
            }
            Kernel::Rbf { gamma } => {
                let d = x.iter().zip(s).fold(0.0f32, |a, (&u, &v)| {
                    let t = u.f32() - v;
                    a + t * t
                });
                (-gamma * d).exp()
            }
            Kernel::Sigmoid { gamma, coef0 } => (gamma * dot() + coef0).tanh(),
        }
    }
}

#[derive(Debug)]
struct Svc {
    /// Support vectors per class and where each class's start.
    per_class: Vec<usize>,
    start: Vec<usize>,
    vectors: usize,
    support: Vec<f32>,
    prob_a: Vec<f32>,
    prob_b: Vec<f32>,
}

#[derive(Debug)]
struct SvmClassifier {
    kernel: Kernel,
    /// `None`: linear mode (one coefficient row per class, rho[0] added).
    svc: Option<Svc>,
    coefficients: Vec<f32>,
    rho: Vec<f32>,
    labels: Vec<i64>,
    features: usize,
    post: Post,
    all_positive: bool,
    output: usize,
}

pub fn classifier(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    refuse_strings(node, &["classlabels_strings"])?;
    check_attrs(
        node,
        &[
            "classlabels_ints",
            "coefficients",
            "kernel_params",
            "kernel_type",
            "post_transform",
            "prob_a",
            "prob_b",
            "rho",
            "support_vectors",
            "vectors_per_class",
        ],
    )?;
    check_inputs(node, 1, 1)?;
    let want = if output == 0 { dtype::INT64 } else { dtype::FLOAT };
    if !numeric_input(input_type(node, 0)) || output > 1 || output_type(node, output) != want {
        return Err(bad_types(node, "numeric features in, int64 labels and float32 scores out"));
    }
    let labels = ints_attr(node, "classlabels_ints")?.unwrap_or_default();
    let k = labels.len();
    if k < 2 {
        return Err(format!("SVMClassifier with {k} class labels is not supported"));
    }
    let coefficients = floats_attr(node, "coefficients")?.unwrap_or_default();
    let rho = floats_attr(node, "rho")?.unwrap_or_default();
    let prob_a = floats_attr(node, "prob_a")?.unwrap_or_default();
    let prob_b = floats_attr(node, "prob_b")?.unwrap_or_default();
    if prob_a.len() != prob_b.len() {
        return Err("prob_a and prob_b differ in length".into());
    }
    let per_class: Vec<usize> = ints_attr(node, "vectors_per_class")?
        .unwrap_or_default()
        .into_iter()
        .map(|v| usize::try_from(v).map_err(|_| format!("vectors_per_class {v} is negative")))
        .collect::<Result<_, _>>()?;
    let vectors: usize = per_class.iter().sum();
    let support = floats_attr(node, "support_vectors")?.unwrap_or_default();
    let post = Post::parse(string_attr(node, "post_transform", "NONE")?)?;
    let pairs = k * (k - 1) / 2;
    let (svc, features, kernel) = if vectors > 0 {
        if per_class.len() != k || support.len() % vectors != 0 || coefficients.len() < (k - 1) * vectors {
            return Err(format!(
                "{} vectors_per_class, {} support values and {} coefficients do not fit {k} classes of {vectors} \
                 vectors",
                per_class.len(),
                support.len(),
                coefficients.len()
            ));
        }
        if rho.len() < pairs || (!prob_a.is_empty() && prob_a.len() < pairs) {
            return Err(format!("rho / prob_a need {pairs} values (one per class pair)"));
        }
        if prob_a.is_empty() && k == 2 && post == Post::Probit {
            return Err("a two-class SVM without probabilities and PROBIT leaves a score undefined in ORT".into());
        }
        let mut start = Vec::with_capacity(k);
        let mut at = 0;
        for &n in &per_class {
            start.push(at);
            at += n;
        }
        let svc = Svc { per_class, start, vectors, support: support.clone(), prob_a, prob_b };
        (Some(svc), support.len() / vectors, Kernel::parse(node)?)
    } else {
        if coefficients.is_empty() || coefficients.len() % k != 0 || rho.is_empty() {
            return Err(format!("{} coefficients (and {} rho) for {k} classes", coefficients.len(), rho.len()));
        }
        Kernel::parse(node)?;
        (None, coefficients.len() / k, Kernel::Linear)
    };
    let all_positive = coefficients.iter().all(|&c| c >= 0.0);
    Ok(Arc::new(SvmClassifier { kernel, svc, coefficients, rho, labels, features, post, all_positive, output }))
}

/// Pairwise-coupled class probabilities from `r` (k x k, r[i][j] = P(i | i or j)), by
/// the iteration of Wu, Lin and Weng (2004) in float32, as ORT runs it.
fn couple(k: usize, r: &[f32], q: &mut [f32], qp: &mut [f32], p: &mut [f32]) {
    q.fill(0.0);
    let eps = 0.005 / k as f32;
    for i in 0..k {
        p[i] = 1.0 / k as f32;
        for j in 0..i {
            q[i * k + i] += r[j * k + i] * r[j * k + i];
            q[i * k + j] = q[j * k + i];
        }
        for j in i + 1..k {
            q[i * k + i] += r[j * k + i] * r[j * k + i];
            q[i * k + j] = -r[j * k + i] * r[i * k + j];
        }
    }
    for _ in 0..100 {
        let mut pqp = 0.0f32;
        for i in 0..k {
            qp[i] = 0.0;
            for j in 0..k {
                qp[i] += q[i * k + j] * p[j];
            }
            pqp += p[i] * qp[i];
        }
        let max_error = (0..k).fold(0.0f32, |m, i| m.max((qp[i] - pqp).abs()));
        if max_error < eps {
            break;
        }
        for i in 0..k {
            let diff = (-qp[i] + pqp) / q[i * k + i];
            p[i] += diff;
            pqp = (pqp + diff * (diff * q[i * k + i] + 2.0 * qp[i])) / (1.0 + diff) / (1.0 + diff);
            for j in 0..k {
                qp[j] = (qp[j] + diff * q[i * k + j]) / (1.0 + diff);
                p[j] /= 1.0 + diff;
            }
        }
    }
}

impl SvmClassifier {
    fn width(&self) -> usize {
        let k = self.labels.len();
        match &self.svc {
            Some(s) if s.prob_a.is_empty() => {
                if k > 2 {
                    k * (k - 1) / 2
                } else {
                    2
                }
            }
            _ => k,
        }
    }

    /// One row: `z` gets its scores (width()), returns the label. `work` is scratch.
    fn row<E: Elem>(&self, x: &[E], z: &mut [f32], work: &mut [f32], votes: &mut [i64]) -> i64 {
        let k = self.labels.len();
        let (maxclass, max_weight) = match &self.svc {
            None => {
                for (c, o) in z.iter_mut().enumerate() {
                    *o = self.kernel.apply(
                        x,
                        &self.coefficients[c * self.features..(c + 1) * self.features],
                        self.rho[0],
                    );
                }
                let mut best = 0;
                for c in 1..k {
                    if z[c] > z[best] {
                        best = c;
                    }
                }
                (best, z[best])
            }
            Some(s) => {
                let v = s.vectors;
                let (kern, rest) = work.split_at_mut(v);
                for (j, o) in kern.iter_mut().enumerate() {
                    *o = self.kernel.apply(x, &s.support[j * self.features..(j + 1) * self.features], 0.0);
                }
                votes.fill(0);
                let proba = !s.prob_a.is_empty();
                let (pairs, rest) = rest.split_at_mut(k * k);
                let mut idx = 0;
                for i in 0..k - 1 {
                    for j in i + 1..k {
                        let mut sum = 0.0f64;
                        let ci = &self.coefficients[(j - 1) * v + s.start[i]..][..s.per_class[i]];
                        for (c, kv) in ci.iter().zip(&kern[s.start[i]..]) {
                            sum += (c * kv) as f64;
                        }
                        let cj = &self.coefficients[i * v + s.start[j]..][..s.per_class[j]];
                        for (c, kv) in cj.iter().zip(&kern[s.start[j]..]) {
                            sum += (c * kv) as f64;
                        }
                        sum += self.rho[idx] as f64;
                        let score = sum as f32;
                        if proba {
                            pairs[idx] = score;
                        } else if k > 2 {
                            z[idx] = score;
                        } else {
                            z[0] = score;
                        }
                        votes[if sum > 0.0 { i } else { j }] += 1;
                        idx += 1;
                    }
                }
                if proba {
                    let (r, rest) = rest.split_at_mut(k * k);
                    let (q, qp) = rest.split_at_mut(k * k);
                    r.fill(0.0);
                    let mut index = 0;
                    for i in 0..k - 1 {
                        for j in i + 1..k {
                            let val = 1.0 - post::logistic(pairs[index] * s.prob_a[index] + s.prob_b[index]);
                            let val = val.clamp(1.0e-7, 1.0 - 1.0e-7);
                            r[i * k + j] = val;
                            r[j * k + i] = 1.0 - val;
                            index += 1;
                        }
                    }
                    couple(k, r, q, &mut qp[..k], z);
                }
                // The first class with the most votes.
                let mut best = 0;
                for c in 1..k {
                    if votes[c] > votes[best] {
                        best = c;
                    }
                }
                (best, 0.0)
            }
        };
        let label = if k == 2 {
            let proba = self.svc.as_ref().is_some_and(|s| !s.prob_a.is_empty());
            if !proba && ((self.all_positive && max_weight >= 0.5) || (max_weight > 0.0 && !self.all_positive)) {
                self.labels[1]
            } else {
                self.labels[maxclass]
            }
        } else {
            self.labels[maxclass]
        };
        // The post transform over the row's scores.
        let two_from_one = matches!(&self.svc, Some(s) if s.prob_a.is_empty() && k == 2);
        if two_from_one {
            let v = z[0];
            (z[0], z[1]) = match self.post {
                Post::None => (-v, v),
                Post::Logistic => (post::logistic(-v), post::logistic(v)),
                _ => (1.0 - v, v),
            };
        } else {
            post::apply(self.post, z);
        }
        label
    }
}

impl Op for SvmClassifier {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (n, c) = rows(x.shapes[0])?;
        if c != self.features {
            return Err(format!("the input has {c} features, the model {}", self.features).into());
        }
        Ok(if self.output == 0 { Shape::from_slice(&[n]) } else { Shape::from_slice(&[n, self.width()]) })
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (n, c) = rows(x.shapes[0])?;
        if c != self.features {
            return Err(format!("the input has {c} features, the model {}", self.features));
        }
        let w = self.width();
        let k = self.labels.len();
        let work_len = self.svc.as_ref().map_or(0, |s| s.vectors + 3 * k * k + k);
        let (work, votes) = (&mut x.scratch.f32, &mut x.scratch.i64);
        work.resize(w + work_len, 0.0);
        votes.resize(k, 0);
        with_elems!(x.ins[0], v => {
            if v.len() < n * c {
                return Err("the input is shorter than its shape".into());
            }
            match out {
                DataMut::I64(y) if self.output == 0 => {
                    let (zr, wk) = work.split_at_mut(w);
                    for (i, o) in y.iter_mut().enumerate().take(n) {
                        *o = self.row(&v[i * c..(i + 1) * c], zr, wk, votes);
                    }
                }
                DataMut::F32(y) if self.output == 1 => {
                    for (i, zr) in y.chunks_exact_mut(w).enumerate().take(n) {
                        self.row(&v[i * c..(i + 1) * c], zr, &mut work[w..], votes);
                    }
                }
                _ => return Err("the output's element type differs from the plan's".into()),
            }
            Ok(())
        }, Err("the input must be numeric".into()))
    }
}

#[derive(Debug)]
struct SvmRegressor {
    kernel: Kernel,
    /// Support vectors ([vectors, features]); empty in linear mode.
    support: Vec<f32>,
    coefficients: Vec<f32>,
    rho: f32,
    features: usize,
    one_class: bool,
}

pub fn regressor(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(
        node,
        &[
            "coefficients",
            "kernel_params",
            "kernel_type",
            "n_supports",
            "one_class",
            "post_transform",
            "rho",
            "support_vectors",
        ],
    )?;
    check_inputs(node, 1, 1)?;
    // ORT's CPU kernel is float32 only, and ignores post_transform.
    if input_type(node, 0) != dtype::FLOAT || output_type(node, 0) != dtype::FLOAT {
        return Err(bad_types(node, "float32"));
    }
    let vectors = int_attr(node, "n_supports", -1)?;
    let vectors = usize::try_from(vectors).map_err(|_| "the SVMRegressor needs n_supports".to_string())?;
    let coefficients = floats_attr(node, "coefficients")?.unwrap_or_default();
    let rho = floats_attr(node, "rho")?.unwrap_or_default();
    let support = floats_attr(node, "support_vectors")?.unwrap_or_default();
    if coefficients.is_empty() || rho.is_empty() {
        return Err("the SVMRegressor needs coefficients and rho".into());
    }
    let (kernel, features) = if vectors > 0 {
        if support.len() % vectors != 0 || coefficients.len() < vectors {
            return Err(format!(
                "{} support values and {} coefficients for {vectors} vectors",
                support.len(),
                coefficients.len()
            ));
        }
        (Kernel::parse(node)?, support.len() / vectors)
    } else {
        Kernel::parse(node)?;
        (Kernel::Linear, coefficients.len())
    };
    let one_class = int_attr(node, "one_class", 0)? != 0;
    let support = if vectors > 0 { support } else { Vec::new() };
    Ok(Arc::new(SvmRegressor { kernel, support, coefficients, rho: rho[0], features, one_class }))
}

impl Op for SvmRegressor {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (n, c) = rows(x.shapes[0])?;
        if c != self.features {
            return Err(format!("the input has {c} features, the model {}", self.features).into());
        }
        Ok(Shape::from_slice(&[n, 1]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (n, c) = rows(x.shapes[0])?;
        if c != self.features {
            return Err(format!("the input has {c} features, the model {}", self.features));
        }
        let (crate::data::Data::F32(v), DataMut::F32(y)) = (x.ins[0], out) else {
            return Err("the input and output must be float32".into());
        };
        for (i, o) in y.iter_mut().enumerate().take(n) {
            let row = &v[i * c..(i + 1) * c];
            let s = if self.support.is_empty() {
                self.kernel.apply(row, &self.coefficients, self.rho)
            } else {
                let dot = self
                    .support
                    .chunks_exact(c)
                    .zip(&self.coefficients)
                    .fold(0.0f32, |a, (sv, &w)| a + self.kernel.apply(row, sv, 0.0) * w);
                dot + self.rho
            };
            *o = if self.one_class {
                if s > 0.0 {
                    1.0
                } else {
                    -1.0
                }
            } else {
                s
            };
        }
        Ok(())
    }
}
