//! LpPool: the p-norm of each window, `(sum |x|^p)^(1/p)`, on 1-D, 2-D and 3-D float32
//! inputs. The window geometry is the pools' (`rivet_kernels::conv::window_geometry`).

use std::sync::Arc;

use rivet_kernels::conv::{lp_pool, window_geometry, Padding, Window3d};

use super::op::util::{check_attrs, check_inputs, input, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::DataMut;
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::{int_attr, ints_attr, string_attr};

/// A window op's attributes over (depth, height, width); ops with fewer spatial axes
/// have leading axes of size 1.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WindowAttrs {
    pub spatial: usize,
    pub kernel: [usize; 3],
    pub strides: [usize; 3],
    pub dilations: [usize; 3],
    pub padding: Padding,
    pub ceil: bool,
}

impl WindowAttrs {
    /// Reads `kernel_shape` (required), `strides`, `dilations`, `pads`, `auto_pad` and
    /// `ceil_mode` for `spatial` spatial axes.
    pub fn read(node: &NodeDesc, spatial: usize) -> Result<Self, String> {
        let per_axis = |name: &str, len: usize| -> Result<Option<Vec<usize>>, String> {
            match ints_attr(node, name)? {
                None => Ok(None),
                Some(v) if v.len() == len && v.iter().all(|&d| d >= 0) => {
                    Ok(Some(v.iter().map(|&d| d as usize).collect()))
                }
                Some(v) => Err(format!("{} {name} {v:?} is not {len} non-negative values", node.op_type)),
            }
        };
        let widen = |v: Option<Vec<usize>>, name: &str| -> Result<[usize; 3], String> {
            let mut out = [1; 3];
            if let Some(v) = v {
                if v.contains(&0) {
                    return Err(format!("{} {name} must be positive", node.op_type));
                }
                out[3 - spatial..].copy_from_slice(&v);
            }
            Ok(out)
        };
        let kernel = match per_axis("kernel_shape", spatial)? {
            None => return Err(format!("{} needs kernel_shape", node.op_type)),
            k => widen(k, "kernel_shape")?,
        };
        let mut pads = [0; 6];
        if let Some(p) = per_axis("pads", 2 * spatial)? {
            for i in 0..spatial {
                pads[3 - spatial + i] = p[i];
                pads[6 - spatial + i] = p[spatial + i];
            }
        }
        let padding = match string_attr(node, "auto_pad", "NOTSET")? {
            "NOTSET" => Padding::Explicit(pads),
            "VALID" => Padding::Valid,
            "SAME_UPPER" => Padding::SameUpper,
            "SAME_LOWER" => Padding::SameLower,
            other => return Err(format!("{} auto_pad '{other}' is not supported", node.op_type)),
        };
        Ok(WindowAttrs {
            spatial,
            kernel,
            strides: widen(per_axis("strides", spatial)?, "strides")?,
            dilations: widen(per_axis("dilations", spatial)?, "dilations")?,
            padding,
            ceil: int_attr(node, "ceil_mode", 0)? != 0,
        })
    }

    /// The geometry on input `[N, C, spatial...]`.
    pub fn geometry(&self, x: &[usize]) -> Result<Window3d, String> {
        if x.len() != self.spatial + 2 {
            return Err(format!("the input has rank {}, the attributes give {}", x.len(), self.spatial + 2));
        }
        let mut plane = [1; 3];
        plane[3 - self.spatial..].copy_from_slice(&x[2..]);
        window_geometry(plane, self.kernel, self.strides, self.dilations, self.padding, self.ceil).map(|(g, _)| g)
    }
}

#[derive(Debug)]
struct LpPool {
    window: WindowAttrs,
    p: i32,
}

pub fn compile(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    check_attrs(node, &["p", "pads", "auto_pad", "ceil_mode", "dilations", "strides", "kernel_shape"])?;
    if input_type(node, 0) != dtype::FLOAT || output_type(node, 0) != dtype::FLOAT {
        return Err(super::op::util::bad_types(node, "float32"));
    }
    let spatial = match input(node, 0).and_then(|v| v.dims.as_ref()) {
        Some(d) if (3..=5).contains(&d.len()) => d.len() - 2,
        Some(d) => return Err(format!("LpPool on rank {} (Rivet runs 1-D, 2-D and 3-D)", d.len())),
        None => return Err("LpPool input of unknown rank".into()),
    };
    let p = int_attr(node, "p", 2)?;
    if !(1..=64).contains(&p) {
        return Err(format!("LpPool p {p} is not in 1..=64"));
    }
    Ok(Arc::new(LpPool { window: WindowAttrs::read(node, spatial)?, p: p as i32 }))
}

impl Op for LpPool {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        let g = self.window.geometry(s)?;
        Ok(s[..2].iter().copied().chain(g.out[3 - self.window.spatial..].iter().copied()).collect())
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let g = self.window.geometry(s)?;
        let (Some(input), Some(y)) = (x.ins[0].f32(), out.f32()) else {
            return Err("LpPool runs float32".into());
        };
        lp_pool(input, s[0] * s[1], &g, self.p, y);
        Ok(())
    }
}
