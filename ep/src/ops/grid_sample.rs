//! GridSample (opsets 16, 20, 22; 4-D, and 5-D volumetric from 20) and AffineGrid
//! (opset 20, 2-D and 3-D) on float32. The sampling is `rivet_kernels::sample`.

use std::sync::Arc;

use rivet_kernels::sample::{self, GridMode, GridParams, Padding};
use smallvec::SmallVec;

use super::op::util::{bad_types, check_attrs, check_inputs, input, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::{int_attr, runtime_i64, string_attr};
use crate::parallel::{CHUNK_LEN, PARALLEL_MIN_LEN};

#[derive(Debug)]
struct GridSample {
    params: GridParams,
    /// Spatial ranks the opset allows.
    ranks: &'static [usize],
}

pub fn grid_sample(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["align_corners", "mode", "padding_mode"])?;
    check_inputs(node, 2, 2)?;
    let v = node.since_version;
    let mode = match (string_attr(node, "mode", if v < 20 { "bilinear" } else { "linear" })?, v >= 20) {
        ("nearest", _) => GridMode::Nearest,
        ("bilinear", false) | ("linear", true) => GridMode::Linear,
        ("bicubic", false) | ("cubic", true) => GridMode::Cubic,
        (m, _) => return Err(format!("GridSample-{v} mode '{m}' is not one it defines")),
    };
    let padding = match string_attr(node, "padding_mode", "zeros")? {
        "zeros" => Padding::Zeros,
        "border" => Padding::Border,
        "reflection" => Padding::Reflection,
        p => return Err(format!("GridSample padding_mode '{p}' is not zeros, border or reflection")),
    };
    let align_corners = int_attr(node, "align_corners", 0)? != 0;
    let t = input_type(node, 0);
    if t != dtype::FLOAT || input_type(node, 1) != dtype::FLOAT || output_type(node, 0) != dtype::FLOAT {
        return Err(bad_types(node, "float32 X, grid and Y"));
    }
    let ranks: &[usize] = if v < 20 { &[2] } else { &[2, 3] };
    Ok(Arc::new(GridSample { params: GridParams { mode, padding, align_corners }, ranks }))
}

impl Op for GridSample {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (xs, gs) = (x.shapes[0], x.shapes[1]);
        let nd = xs.len().wrapping_sub(2);
        if xs.len() < 3 || !self.ranks.contains(&nd) {
            return Err(format!("X must be [N, C] and {:?} spatial axes, got rank {}", self.ranks, xs.len()).into());
        }
        if gs.len() != nd + 2 || gs[0] != xs[0] || gs[nd + 1] != nd {
            return Err(format!("grid must be [{}, ..{nd} axes.., {nd}] for X of rank {}", xs[0], xs.len()).into());
        }
        let mut s = Shape::from_slice(&xs[..2]);
        s.extend_from_slice(&gs[1..=nd]);
        Ok(s)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (Data::F32(xd), Data::F32(grid), DataMut::F32(y)) = (x.ins[0], x.ins[1], out) else {
            return Err("GridSample runs float32 tensors".into());
        };
        let xs = x.shapes[0];
        let (c, dims) = (xs[1], &xs[2..]);
        let nd = dims.len();
        let plane: usize = dims.iter().product();
        let points: usize = x.shapes[1][1..=nd].iter().product();
        if y.is_empty() || points == 0 {
            return Ok(());
        }
        let per = if y.len() < PARALLEL_MIN_LEN { y.len() / points } else { (CHUNK_LEN / points).max(1) };
        let p = &self.params;
        x.par.for_each_chunk(y, per * points, &|start, chunk| {
            let first = start / points;
            for (k, yp) in chunk.chunks_exact_mut(points).enumerate() {
                let i = first + k; // plane n * C + c
                let n = i / c.max(1);
                let g = &grid[n * points * nd..][..points * nd];
                sample::grid_sample(p, &xd[i * plane..][..plane], dims, g, yp);
            }
        });
        Ok(())
    }
}

#[derive(Debug)]
struct AffineGrid {
    align_corners: bool,
}

pub fn affine_grid(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["align_corners"])?;
    check_inputs(node, 2, 2)?;
    if input_type(node, 0) != dtype::FLOAT
        || output_type(node, 0) != dtype::FLOAT
        || input_type(node, 1) != dtype::INT64
    {
        return Err(bad_types(node, "float32 theta and grid, int64 size"));
    }
    if input(node, 1).is_some_and(|s| s.constant.is_none()) && !runtime_i64(node, 1) {
        return Err("AffineGrid's size does not reach Rivet at Run".into());
    }
    Ok(Arc::new(AffineGrid { align_corners: int_attr(node, "align_corners", 0)? != 0 }))
}

impl AffineGrid {
    /// The output's spatial lengths (outermost first), checked against theta's shape.
    fn dims(theta: &[usize], size: Data<'_>) -> Result<SmallVec<[usize; 3]>, ShapeError> {
        let Data::I64(size) = size else { return Err("size must be int64".to_string().into()) };
        let nd = size.len().wrapping_sub(2);
        if !(nd == 2 || nd == 3) || theta != [size[0].max(0) as usize, nd, nd + 1] || size[0] < 0 {
            return Err(format!("size {size:?} and theta {theta:?} are not [N, C, H, W] / [N, 2, 3] or 3-D").into());
        }
        size[2..]
            .iter()
            .map(|&d| {
                usize::try_from(d).ok().filter(|&d| d < 1 << 31).ok_or_else(|| format!("size {d} is negative").into())
            })
            .collect()
    }
}

impl Op for AffineGrid {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let dims = Self::dims(x.shapes[0], x.data(1)?)?;
        let mut s = Shape::from_slice(&[x.shapes[0][0]]);
        s.extend_from_slice(&dims);
        s.push(dims.len());
        Ok(s)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let dims = Self::dims(x.shapes[0], x.ins[1]).map_err(|e| match e {
            ShapeError::Invalid(why) => why,
            ShapeError::NeedsData => "size is missing".into(),
        })?;
        let (Data::F32(theta), DataMut::F32(y)) = (x.ins[0], out) else {
            return Err("AffineGrid runs float32 theta and grid".into());
        };
        let nd = dims.len();
        let per_item: usize = dims.iter().product::<usize>() * nd;
        if per_item == 0 {
            return Ok(());
        }
        for (t, g) in theta.chunks_exact(nd * (nd + 1)).zip(y.chunks_exact_mut(per_item)) {
            sample::affine_grid(t, &dims, self.align_corners, g);
        }
        Ok(())
    }
}
