//! The parameter types of ops, resolved from a node's attributes (all `Copy`): shared by
//! the registry, the plan's steps and the op families.

use smallvec::SmallVec;

use crate::graph::{AttrValue, NodeDesc};
use crate::node_attrs::{input, int_attr, ints_attr};

/// Up to 8 axes (rank ≤ 8), kept inline so `Kernel` stays `Copy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Axes {
    pub len: u8,
    pub axes: [i64; 8],
}

impl Axes {
    pub fn new(v: &[i64]) -> Result<Axes, String> {
        if v.len() > 8 {
            return Err(format!("{} axes: Rivet handles rank 8 at most", v.len()));
        }
        let mut axes = [0; 8];
        axes[..v.len()].copy_from_slice(v);
        Ok(Axes { len: v.len() as u8, axes })
    }
    pub fn as_slice(&self) -> &[i64] {
        &self.axes[..self.len as usize]
    }
}

/// How a shape-only op computes its output shape (the data is copied unchanged).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReshapeRule {
    /// ONNX Reshape: 0 copies the input dim (unless `allowzero`), -1 is inferred.
    To {
        dims: Axes,
        allowzero: bool,
    },
    Flatten {
        axis: i64,
    },
    /// Removes the listed axes (all size-1 axes when none are listed).
    Squeeze {
        axes: Axes,
    },
    Unsqueeze {
        axes: Axes,
    },
    /// The same three, with the shape or axes read at Run from the step's int64 param.
    ToAtRun {
        allowzero: bool,
    },
    SqueezeAtRun,
    UnsqueezeAtRun,
}

impl ReshapeRule {
    /// Whether the rule needs an int64 tensor at Run.
    pub fn reads_param(self) -> bool {
        matches!(self, ReshapeRule::ToAtRun { .. } | ReshapeRule::SqueezeAtRun | ReshapeRule::UnsqueezeAtRun)
    }

    /// The rule with its shape or axes filled in from `param`.
    pub fn resolve(self, param: &[i64]) -> Result<ReshapeRule, String> {
        Ok(match self {
            ReshapeRule::ToAtRun { allowzero } => ReshapeRule::To { dims: Axes::new(param)?, allowzero },
            ReshapeRule::SqueezeAtRun => ReshapeRule::Squeeze { axes: Axes::new(param)? },
            ReshapeRule::UnsqueezeAtRun => ReshapeRule::Unsqueeze { axes: Axes::new(param)? },
            fixed => fixed,
        })
    }
}

/// How a window op pads (ONNX `auto_pad`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutoPad {
    NotSet,
    Valid,
    SameUpper,
    SameLower,
}

/// Attributes of a window op (Conv, MaxPool, AveragePool) over (depth, height, width):
/// ops with fewer spatial axes have leading axes of size 1. A zero kernel size means "from
/// the weights".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub kernel: [usize; 3],
    pub strides: [usize; 3],
    pub dilations: [usize; 3],
    /// Before each axis, then after each axis.
    pub pads: [usize; 6],
    pub auto_pad: AutoPad,
    pub ceil_mode: bool,
}

/// The spatial axes (1 to 3) of a window op's input, from its declared rank.
pub fn spatial_axes(node: &NodeDesc) -> Result<usize, String> {
    // A convolution's weight has the input's rank: it fixes an input of unknown rank.
    let weighted = matches!(node.op_type.as_str(), "Conv" | "ConvTranspose");
    let dims = |k: usize| input(node, k).and_then(|v| v.dims.as_ref());
    match dims(0).or_else(|| if weighted { dims(1) } else { None }) {
        Some(dims) if (3..=5).contains(&dims.len()) => Ok(dims.len() - 2),
        Some(dims) => Err(format!("{} on rank {} (Rivet runs 1-D, 2-D and 3-D)", node.op_type, dims.len())),
        None => Err(format!("{} input of unknown rank", node.op_type)),
    }
}

/// An attribute with a value per spatial axis (`n` of them), widened to (depth, height,
/// width) with `neutral` on the leading axes; `default` on every axis when absent.
pub fn per_axis(node: &NodeDesc, name: &str, n: usize, default: usize, neutral: usize) -> Result<[usize; 3], String> {
    match ints_attr(node, name)? {
        None => Ok([default; 3]),
        Some(v) if v.len() == n && v.iter().all(|&d| d >= 0) => {
            let mut out = [neutral; 3];
            v.iter().enumerate().for_each(|(i, &d)| out[3 - n + i] = d as usize);
            Ok(out)
        }
        Some(v) => Err(format!("{name} {v:?} is not {n} non-negative values")),
    }
}

/// `pads` (begins, then ends, per spatial axis), widened as `per_axis` does.
pub fn pads_attr(node: &NodeDesc, n: usize) -> Result<[usize; 6], String> {
    match ints_attr(node, "pads")? {
        None => Ok([0; 6]),
        Some(v) if v.len() == 2 * n && v.iter().all(|&d| d >= 0) => {
            let mut out = [0; 6];
            for i in 0..n {
                out[3 - n + i] = v[i] as usize;
                out[6 - n + i] = v[n + i] as usize;
            }
            Ok(out)
        }
        Some(v) => Err(format!("pads {v:?} is not {} non-negative values", 2 * n)),
    }
}

/// Reads a window op's attributes (1 to 3 spatial axes); other ranks are not claimed.
pub fn window(node: &NodeDesc, kernel_required: bool) -> Result<Window, String> {
    let n = spatial_axes(node)?;
    let positive = |name: &str| -> Result<[usize; 3], String> {
        let v = per_axis(node, name, n, 1, 1)?;
        if v.contains(&0) {
            return Err(format!("{name} must be positive"));
        }
        Ok(v)
    };
    let kernel = match ints_attr(node, "kernel_shape")? {
        None if !kernel_required => [0; 3],
        None => return Err("kernel_shape is required".into()),
        Some(_) => positive("kernel_shape")?,
    };
    let pads = pads_attr(node, n)?;
    let auto_pad = match node.attr("auto_pad") {
        None => AutoPad::NotSet,
        Some(AttrValue::String(s)) => match s.as_str() {
            "NOTSET" => AutoPad::NotSet,
            "VALID" => AutoPad::Valid,
            "SAME_UPPER" => AutoPad::SameUpper,
            "SAME_LOWER" => AutoPad::SameLower,
            other => return Err(format!("auto_pad '{other}'")),
        },
        Some(other) => return Err(format!("auto_pad {other:?}")),
    };
    // storage_order only changes MaxPool's Indices output (read with it).
    if !matches!(int_attr(node, "storage_order", 0)?, 0 | 1) {
        return Err("storage_order must be 0 or 1".into());
    }
    Ok(Window {
        kernel,
        strides: positive("strides")?,
        dilations: positive("dilations")?,
        pads,
        auto_pad,
        ceil_mode: int_attr(node, "ceil_mode", 0)? != 0,
    })
}

/// Pad's amounts (begin for every axis, then end) and fill mode.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PadSpec {
    pub len: u8,
    pub pads: [usize; 16],
    pub mode: rivet_kernels::nn::PadMode,
    /// The amounts come from the step's int64 param at Run (then `pads` is unused).
    pub at_run: bool,
    /// The axes the amounts are for (opset 18's `axes`); empty: every axis.
    pub axes: Axes,
    /// The axes come from the step's next int64 param at Run (then `axes` is unused).
    pub axes_at_run: bool,
    /// The constant fill is the step's data input 1, of the data's type, read at Run.
    pub value_at_run: bool,
}

impl PadSpec {
    /// Begin and end amounts for every axis of a rank-`rank` input.
    pub fn resolve(&self, rank: usize, params: &[&[i64]]) -> Result<[usize; 16], String> {
        let raw: SmallVec<[i64; 16]> = if self.at_run {
            params.first().map(|p| p.iter().copied().collect()).unwrap_or_default()
        } else {
            self.pads[..self.len as usize].iter().map(|&p| p as i64).collect()
        };
        let given: &[i64] = if self.axes_at_run {
            params.get(usize::from(self.at_run)).copied().unwrap_or_default()
        } else {
            self.axes.as_slice()
        };
        let axes: SmallVec<[usize; 8]> = if given.is_empty() && !self.axes_at_run {
            (0..rank).collect()
        } else {
            let mut v: SmallVec<[usize; 8]> = SmallVec::new();
            for &a in given {
                let a = crate::graph::normalize_axis(a, rank, false)?;
                if v.contains(&a) {
                    return Err(format!("axis {a} is given twice"));
                }
                v.push(a);
            }
            v
        };
        let n = axes.len();
        if raw.len() != 2 * n || rank > 8 {
            return Err(format!("{} pads for {n} axes", raw.len()));
        }
        if let Some(p) = raw.iter().find(|&&p| p < 0) {
            return Err(format!("negative pad {p}: Rivet pads, it does not crop"));
        }
        let mut out = [0usize; 16];
        for (k, &a) in axes.iter().enumerate() {
            out[a] = raw[k] as usize;
            out[a + rank] = raw[k + n] as usize;
        }
        Ok(out)
    }
}

/// Which axes a reduction reduces, or more generally an int64 list an op reads (Expand's
/// shape, CumSum's axis, Trilu's k): a constant, or the step's param at Run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReduceAxes {
    /// From the attribute or a constant input; empty means "all" (or none, with
    /// `noop_with_empty_axes`).
    Const(Axes),
    /// From the step's int64 param at Run.
    AtRun,
}

/// How a scatter combines an update with what is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterReduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

/// How a loss reduces over its elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    None,
    Sum,
    /// The weighted mean: divided by the summed weights of the elements not ignored.
    Mean,
}
