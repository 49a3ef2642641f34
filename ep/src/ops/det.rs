//! Det: the determinant of each square matrix of `[..., M, M]`, by LU decomposition
//! with partial pivoting in float64, for float32 (ORT's CPU EP has no float64 Det, so
//! Rivet does not claim one it cannot be checked against).

use std::sync::Arc;

use super::op::util::{check_attrs, check_inputs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};

#[derive(Debug)]
struct Det;

pub fn compile(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    check_attrs(node, &[])?;
    let t = input_type(node, 0);
    if t != dtype::FLOAT || output_type(node, 0) != t {
        return Err(super::op::util::bad_types(node, "float32"));
    }
    Ok(Arc::new(Det))
}

/// The determinant of the `m` x `m` matrix in `a` (overwritten by its LU factors).
pub fn det_in_place(a: &mut [f64], m: usize) -> f64 {
    let mut det = 1.0;
    for c in 0..m {
        let pivot = (c..m).max_by(|&i, &j| a[i * m + c].abs().total_cmp(&a[j * m + c].abs())).unwrap_or(c);
        let p = a[pivot * m + c];
        if p == 0.0 {
            return 0.0;
        }
        if pivot != c {
            for k in 0..m {
                a.swap(c * m + k, pivot * m + k);
            }
            det = -det;
        }
        det *= p;
        for r in c + 1..m {
            let f = a[r * m + c] / p;
            if f != 0.0 {
                for k in c + 1..m {
                    a[r * m + k] -= f * a[c * m + k];
                }
            }
        }
    }
    det
}

impl Op for Det {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        let r = s.len();
        if r < 2 || s[r - 1] != s[r - 2] {
            return Err(format!("the input must be [..., M, M], got {s:?}").into());
        }
        Ok(Shape::from_slice(&s[..r - 2]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let m = s[s.len() - 1];
        let work = &mut x.scratch.f64;
        work.resize(m * m, 0.0);
        let mm = m * m;
        if mm == 0 {
            // The determinant of an empty matrix is 1.
            match out {
                DataMut::F32(y) => y.fill(1.0),
                DataMut::F64(y) => y.fill(1.0),
                _ => return Err("Det runs float32 and float64".into()),
            }
            return Ok(());
        }
        match (x.ins[0], out) {
            (Data::F32(v), DataMut::F32(y)) => {
                for (k, o) in y.iter_mut().enumerate() {
                    work.iter_mut().zip(&v[k * mm..]).for_each(|(w, &s)| *w = s as f64);
                    *o = det_in_place(work, m) as f32;
                }
            }
            (Data::F64(v), DataMut::F64(y)) => {
                for (k, o) in y.iter_mut().enumerate() {
                    work.iter_mut().zip(&v[k * mm..]).for_each(|(w, &s)| *w = s);
                    *o = det_in_place(work, m);
                }
            }
            _ => return Err("Det runs float32 and float64".into()),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn determinants_of_small_matrices() {
        assert_eq!(det_in_place(&mut [1.0, 2.0, 3.0, 4.0], 2), -2.0);
        // A row swap is needed (first pivot 0): det = -(2*1 - 0) ... of [[0, 1], [2, 3]] = -2.
        assert_eq!(det_in_place(&mut [0.0, 1.0, 2.0, 3.0], 2), -2.0);
        let mut a = [2.0, 0.0, 1.0, 1.0, 3.0, 2.0, 1.0, 1.0, 2.0];
        assert!((det_in_place(&mut a, 3) - 6.0).abs() < 1e-12);
        // Two equal rows: singular.
        assert_eq!(det_in_place(&mut [1.0, 2.0, 1.0, 2.0], 2), 0.0);
        assert_eq!(det_in_place(&mut [], 0), 1.0);
    }
}
