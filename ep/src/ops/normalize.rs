//! Normalizations without learned parameters: LpNormalization (each vector along an
//! axis divided by its L1 or L2 norm; a zero vector gives zeros) and
//! MeanVarianceNormalization (`(x - mean) / (std + 1e-9)` over the named axes; float32
//! only, as ORT's CPU EP runs it), accumulated in float64.

use std::sync::Arc;

use smallvec::SmallVec;

use super::op::util::{check_attrs, check_inputs, input, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::{int_attr, ints_attr};

/// float32 or float64, read and written through float64.
trait Real: Copy {
    fn get(self) -> f64;
    fn put(v: f64) -> Self;
}

impl Real for f32 {
    fn get(self) -> f64 {
        self as f64
    }
    fn put(v: f64) -> Self {
        v as f32
    }
}

impl Real for f64 {
    fn get(self) -> f64 {
        self
    }
    fn put(v: f64) -> Self {
        v
    }
}

fn float_types(node: &NodeDesc) -> Result<(), String> {
    let t = input_type(node, 0);
    if !matches!(t, dtype::FLOAT | dtype::DOUBLE) || output_type(node, 0) != t {
        return Err(super::op::util::bad_types(node, "float32 and float64"));
    }
    Ok(())
}

/// Normalizes an axis index against rank `r`.
fn axis(a: i64, r: usize) -> Result<usize, String> {
    let ri = r as i64;
    if a < -ri || a >= ri {
        return Err(format!("axis {a} is out of range for rank {r}"));
    }
    Ok((if a < 0 { a + ri } else { a }) as usize)
}

#[derive(Debug)]
struct LpNorm {
    axis: i64,
    p: i64,
}

pub fn lp_normalization(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    check_attrs(node, &["axis", "p"])?;
    float_types(node)?;
    let p = int_attr(node, "p", 2)?;
    if !matches!(p, 1 | 2) {
        return Err(format!("LpNormalization p {p} is not 1 or 2"));
    }
    let a = int_attr(node, "axis", -1)?;
    if let Some(d) = input(node, 0).and_then(|v| v.dims.as_ref()) {
        axis(a, d.len())?;
    }
    Ok(Arc::new(LpNorm { axis: a, p }))
}

fn lp_norm<T: Real>(x: &[T], [outer, n, inner]: [usize; 3], p: i64, y: &mut [T]) {
    for o in 0..outer {
        for j in 0..inner {
            let at = |i: usize| (o * n + i) * inner + j;
            let norm: f64 = (0..n)
                .map(|i| {
                    let v = x[at(i)].get();
                    if p == 1 {
                        v.abs()
                    } else {
                        v * v
                    }
                })
                .sum();
            let norm = if p == 1 { norm } else { norm.sqrt() };
            for i in 0..n {
                y[at(i)] = T::put(if norm == 0.0 { 0.0 } else { x[at(i)].get() / norm });
            }
        }
    }
}

impl Op for LpNorm {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        axis(self.axis, x.shapes[0].len())?;
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let a = axis(self.axis, s.len())?;
        let view = [s[..a].iter().product(), s[a], s[a + 1..].iter().product()];
        match (x.ins[0], out) {
            (Data::F32(v), DataMut::F32(y)) => lp_norm(v, view, self.p, y),
            (Data::F64(v), DataMut::F64(y)) => lp_norm(v, view, self.p, y),
            _ => return Err("LpNormalization runs float32 and float64".into()),
        }
        Ok(())
    }
}

#[derive(Debug)]
struct Mvn {
    axes: Vec<i64>,
}

pub fn mean_variance_normalization(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    check_attrs(node, &["axes"])?;
    if input_type(node, 0) != dtype::FLOAT || output_type(node, 0) != dtype::FLOAT {
        return Err(super::op::util::bad_types(node, "float32"));
    }
    let axes = ints_attr(node, "axes")?.unwrap_or_else(|| vec![0, 2, 3]);
    Ok(Arc::new(Mvn { axes }))
}

impl Mvn {
    /// Per axis of `s`, whether it is reduced.
    fn reduced(&self, s: &[usize]) -> Result<SmallVec<[bool; 8]>, String> {
        let mut r: SmallVec<[bool; 8]> = SmallVec::from_elem(false, s.len());
        for &a in &self.axes {
            let a = axis(a, s.len())?;
            if r[a] {
                return Err(format!("axis {a} is named twice"));
            }
            r[a] = true;
        }
        Ok(r)
    }
}

/// Each element's group (its index with the reduced axes dropped), in element order.
fn groups(s: &[usize], reduced: &[bool]) -> impl Iterator<Item = usize> {
    let r = s.len();
    let mut stride: SmallVec<[usize; 8]> = SmallVec::from_elem(0, r);
    let mut acc = 1;
    for a in (0..r).rev() {
        if !reduced[a] {
            stride[a] = acc;
            acc *= s[a];
        }
    }
    let total: usize = s.iter().product();
    let dims: SmallVec<[usize; 8]> = SmallVec::from_slice(s);
    let mut idx: SmallVec<[usize; 8]> = SmallVec::from_elem(0, r);
    let mut g = 0;
    (0..total).map(move |_| {
        let here = g;
        for a in (0..r).rev() {
            idx[a] += 1;
            g += stride[a];
            if idx[a] < dims[a] {
                break;
            }
            g -= stride[a] * idx[a];
            idx[a] = 0;
        }
        here
    })
}

fn mvn<T: Real>(x: &[T], s: &[usize], reduced: &[bool], sums: &mut Vec<f64>, y: &mut [T]) {
    let groups_n: usize = s.iter().zip(reduced).filter(|(_, &r)| !r).map(|(&d, _)| d).product();
    let count = (x.len() / groups_n.max(1)).max(1) as f64;
    sums.clear();
    sums.resize(2 * groups_n, 0.0);
    let (mean, sq) = sums.split_at_mut(groups_n);
    for (g, v) in groups(s, reduced).zip(x) {
        mean[g] += v.get();
    }
    mean.iter_mut().for_each(|m| *m /= count);
    for (g, v) in groups(s, reduced).zip(x) {
        let d = v.get() - mean[g];
        sq[g] += d * d;
    }
    sq.iter_mut().for_each(|v| *v = (*v / count).sqrt() + 1e-9);
    for ((g, v), o) in groups(s, reduced).zip(x).zip(y.iter_mut()) {
        *o = T::put((v.get() - mean[g]) / sq[g]);
    }
}

impl Op for Mvn {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        self.reduced(x.shapes[0])?;
        Ok(Shape::from_slice(x.shapes[0]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let reduced = self.reduced(s)?;
        let sums = &mut x.scratch.f64;
        match (x.ins[0], out) {
            (Data::F32(v), DataMut::F32(y)) => mvn(v, s, &reduced, sums, y),
            (Data::F64(v), DataMut::F64(y)) => mvn(v, s, &reduced, sums, y),
            _ => return Err("MeanVarianceNormalization runs float32 and float64".into()),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_drop_the_reduced_axes() {
        let g: Vec<usize> = groups(&[2, 3, 2], &[false, true, false]).collect();
        assert_eq!(g, [0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3]);
        let g: Vec<usize> = groups(&[2, 2], &[true, true]).collect();
        assert_eq!(g, [0, 0, 0, 0]);
    }
}
