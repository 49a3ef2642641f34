//! CenterCropPad: each named axis cropped or zero-padded, centered, to the length the
//! `shape` input gives (int32 or int64), for any element type. The output shape comes
//! from `shape`'s data: known at Compile when it is constant.

use std::sync::Arc;

use smallvec::SmallVec;

use super::op::util::{check_attrs, check_inputs, input_type, move_any, output_type, Move};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::ints_attr;

#[derive(Debug)]
struct CenterCropPad {
    axes: Option<Vec<i64>>,
}

pub fn compile(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 2, 2)?;
    check_attrs(node, &["axes"])?;
    let t = input_type(node, 0);
    if !data::supported(t) || output_type(node, 0) != t || !matches!(input_type(node, 1), dtype::INT32 | dtype::INT64) {
        return Err(super::op::util::bad_types(node, "any element type with an int32 or int64 shape"));
    }
    Ok(Arc::new(CenterCropPad { axes: ints_attr(node, "axes")? }))
}

/// Element `k` of an integer tensor.
fn int_at(d: Data<'_>, k: usize) -> Option<i64> {
    match d {
        Data::I64(v) => v.get(k).copied(),
        Data::I32(v) => v.get(k).map(|&x| x as i64),
        _ => None,
    }
}

/// Per axis: (input start, output start, length copied), and the output shape.
type Plan = (SmallVec<[(usize, usize, usize); 8]>, Shape);

impl CenterCropPad {
    fn plan(&self, x: &[usize], shape: Data<'_>) -> Result<Plan, String> {
        let r = x.len();
        let mut out = Shape::from_slice(x);
        let mut copy: SmallVec<[(usize, usize, usize); 8]> = x.iter().map(|&d| (0, 0, d)).collect();
        let n = self.axes.as_ref().map_or(r, Vec::len);
        if shape.len() != n {
            return Err(format!("shape has {} values for {n} axes", shape.len()));
        }
        let mut seen = 0u64;
        for k in 0..n {
            let a = match &self.axes {
                None => k,
                Some(axes) => {
                    let a = axes[k];
                    if a < -(r as i64) || a >= r as i64 {
                        return Err(format!("axis {a} is out of range for rank {r}"));
                    }
                    (if a < 0 { a + r as i64 } else { a }) as usize
                }
            };
            if seen & (1 << a) != 0 {
                return Err(format!("axis {a} is named twice"));
            }
            seen |= 1 << a;
            let want = int_at(shape, k).unwrap_or(-1);
            if want < 0 {
                return Err(format!("shape value {want} for axis {a} is negative"));
            }
            let (d, want) = (x[a], want as usize);
            copy[a] = if want <= d { ((d - want) / 2, 0, want) } else { (0, (want - d) / 2, d) };
            out[a] = want;
        }
        Ok((copy, out))
    }
}

impl Op for CenterCropPad {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        if x.shapes[1].len() != 1 {
            return Err(format!("shape must be 1-D, got rank {}", x.shapes[1].len()).into());
        }
        if x.shapes[0].len() > 64 {
            return Err("rank above 64".to_string().into());
        }
        Ok(self.plan(x.shapes[0], x.data(1)?)?.1)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (copy, out_shape) = self.plan(x.shapes[0], x.ins[1])?;
        move_any(x.ins[0], out, &Region { in_shape: x.shapes[0], out_shape: &out_shape, copy: &copy })
    }
}

/// Zeros the output, then copies the region `copy` describes.
struct Region<'a> {
    in_shape: &'a [usize],
    out_shape: &'a [usize],
    copy: &'a [(usize, usize, usize)],
}

impl Move for Region<'_> {
    fn apply<T: Copy + Default + PartialEq + Send + Sync>(&self, x: &[T], y: &mut [T]) {
        y.fill(T::default());
        let r = self.in_shape.len();
        if self.copy.iter().any(|c| c.2 == 0) || y.is_empty() {
            return;
        }
        if r == 0 {
            y[0] = x[0];
            return;
        }
        // Row by row of the last axis: an odometer over the others.
        let mut idx: SmallVec<[usize; 8]> = SmallVec::from_elem(0, r);
        let len = self.copy[r - 1].2;
        loop {
            let (mut src, mut dst) = (0, 0);
            for a in 0..r {
                let (s0, d0, _) = self.copy[a];
                let i = if a == r - 1 { 0 } else { idx[a] };
                src = src * self.in_shape[a] + s0 + i;
                dst = dst * self.out_shape[a] + d0 + i;
            }
            y[dst..dst + len].copy_from_slice(&x[src..src + len]);
            let mut a = r - 1;
            loop {
                if a == 0 {
                    return;
                }
                a -= 1;
                idx[a] += 1;
                if idx[a] < self.copy[a].2 {
                    break;
                }
                idx[a] = 0;
            }
        }
    }
}
