//! LinearClassifier and LinearRegressor: `scores = x W^T + b` in float32, then ORT's
//! label and post-transform rules (labels from the raw scores; a single score with two
//! labels becomes the pair [1 - s, s]; a single score only takes PROBIT).

use std::sync::Arc;

use super::post::{self, Post};
use super::{floats_attr, ints_attr, numeric_input, refuse_strings, rows, with_elems, Elem};
use crate::data::DataMut;
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::{int_attr, string_attr};
use crate::ops::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use crate::ops::{Op, RunIn, ShapeError, ShapeIn};

#[derive(Debug)]
struct Linear {
    /// [targets, features], row-major.
    coefficients: Vec<f32>,
    /// Per target (zeros when the model gives none).
    intercepts: Vec<f32>,
    targets: usize,
    post: Post,
    /// Classifier: the int64 labels; `None` for the regressor.
    labels: Option<Vec<i64>>,
    /// Which output this op writes: 0 labels, 1 scores (the regressor's is 0).
    output: usize,
}

pub fn classifier(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    refuse_strings(node, &["classlabels_strings"])?;
    check_attrs(node, &["coefficients", "intercepts", "multi_class", "post_transform", "classlabels_ints"])?;
    check_inputs(node, 1, 1)?;
    let want = if output == 0 { dtype::INT64 } else { dtype::FLOAT };
    if !numeric_input(input_type(node, 0)) || output > 1 || output_type(node, output) != want {
        return Err(bad_types(node, "numeric features in, int64 labels and float32 scores out"));
    }
    let intercepts = floats_attr(node, "intercepts")?.unwrap_or_default();
    let targets = intercepts.len();
    let labels = ints_attr(node, "classlabels_ints")?.unwrap_or_default();
    if targets == 0 {
        return Err("LinearClassifier needs intercepts (one per class)".into());
    }
    if targets > 1 && labels.len() != targets {
        return Err(format!("{} class labels for {targets} classes", labels.len()));
    }
    let coefficients = floats_attr(node, "coefficients")?.unwrap_or_default();
    if coefficients.is_empty() || coefficients.len() % targets != 0 {
        return Err(format!("{} coefficients for {targets} classes", coefficients.len()));
    }
    let post = Post::parse(string_attr(node, "post_transform", "NONE")?)?;
    if targets == 1 && labels.len() == 2 && post == Post::Probit {
        // ORT applies PROBIT to the packed single scores before spreading them into pairs.
        return Err("a one-score LinearClassifier with two labels and PROBIT is not supported".into());
    }
    Ok(Arc::new(Linear { coefficients, intercepts, targets, post, labels: Some(labels), output }))
}

pub fn regressor(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["coefficients", "intercepts", "targets", "post_transform"])?;
    check_inputs(node, 1, 1)?;
    // ORT's CPU kernel is float32 only.
    if input_type(node, 0) != dtype::FLOAT || output_type(node, 0) != dtype::FLOAT {
        return Err(bad_types(node, "float32"));
    }
    let targets = int_attr(node, "targets", 1)?;
    let targets = usize::try_from(targets).ok().filter(|&t| t > 0).ok_or("targets must be positive")?;
    let coefficients = floats_attr(node, "coefficients")?.unwrap_or_default();
    if coefficients.is_empty() || coefficients.len() % targets != 0 {
        return Err(format!("{} coefficients for {targets} targets", coefficients.len()));
    }
    // Intercepts of another length are ignored, as ORT does.
    let intercepts = floats_attr(node, "intercepts")?.filter(|v| v.len() == targets).unwrap_or(vec![0.0; targets]);
    let post = Post::parse(string_attr(node, "post_transform", "NONE")?)?;
    Ok(Arc::new(Linear { coefficients, intercepts, targets, post, labels: None, output: 1 }))
}

impl Linear {
    /// Two score columns from one (a binary classifier with two labels).
    fn second_class(&self) -> bool {
        self.targets == 1 && self.labels.as_ref().is_some_and(|l| l.len() == 2)
    }

    fn features(&self) -> usize {
        self.coefficients.len() / self.targets
    }

    fn raw<E: Elem>(&self, x: &[E], z: &mut [f32]) {
        for (t, o) in z.iter_mut().enumerate() {
            let w = &self.coefficients[t * x.len()..(t + 1) * x.len()];
            *o = x.iter().zip(w).fold(0.0f32, |s, (&a, &b)| s + a.f32() * b) + self.intercepts[t];
        }
    }
}

impl Op for Linear {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (n, c) = rows(x.shapes[0])?;
        if c != self.features() {
            return Err(format!("the input has {c} features, the coefficients {}", self.features()).into());
        }
        Ok(match (self.labels.is_some(), self.output) {
            (true, 0) => Shape::from_slice(&[n]),
            _ => Shape::from_slice(&[n, if self.second_class() { 2 } else { self.targets }]),
        })
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (n, c) = rows(x.shapes[0])?;
        if c != self.features() {
            return Err(format!("the input has {c} features, the coefficients {}", self.features()));
        }
        let k = self.targets;
        let z = &mut x.scratch.f32;
        z.resize(k, 0.0);
        with_elems!(x.ins[0], v => {
            if v.len() < n * c {
                return Err("the input is shorter than its shape".into());
            }
            match (self.labels.as_ref(), self.output, out) {
                (Some(labels), 0, DataMut::I64(y)) => {
                    for (i, o) in y.iter_mut().enumerate().take(n) {
                        self.raw(&v[i * c..(i + 1) * c], z);
                        *o = if k == 1 {
                            let (neg, pos) = if labels.len() == 2 { (labels[0], labels[1]) } else { (0, 1) };
                            if z[0] > 0.0 { pos } else { neg }
                        } else {
                            let mut best = 0;
                            for j in 1..k {
                                if z[j] > z[best] {
                                    best = j;
                                }
                            }
                            labels[best]
                        };
                    }
                }
                (_, 1, DataMut::F32(y)) => {
                    let width = if self.second_class() { 2 } else { k };
                    for (i, row) in y.chunks_exact_mut(width).enumerate().take(n) {
                        self.raw(&v[i * c..(i + 1) * c], z);
                        if k > 1 {
                            row.copy_from_slice(z);
                            post::apply(self.post, row);
                        } else {
                            // One score: PROBIT or LOGISTIC applies; with two labels it pairs
                            // as [1 - s, s].
                            let s = match self.post {
                                Post::Probit => post::probit(z[0]),
                                Post::Logistic if width == 2 => post::logistic(z[0]),
                                _ => z[0],
                            };
                            if width == 2 {
                                (row[0], row[1]) = (1.0 - s, s);
                            } else {
                                row[0] = s;
                            }
                        }
                    }
                }
                _ => return Err("the output's element type differs from the plan's".into()),
            }
            Ok(())
        }, Err("the input must be numeric".into()))
    }
}
