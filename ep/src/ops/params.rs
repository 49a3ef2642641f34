//! The parameter types of ops, resolved from a node's attributes (all `Copy`): shared by
//! the registry, the plan's steps and the op families.

use smallvec::SmallVec;

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

/// ConvTranspose's attributes, as (height, width); 1-D nodes have height 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvTransposeSpec {
    pub group: usize,
    /// Per (depth, height, width), as `Window`'s.
    pub strides: [usize; 3],
    pub dilations: [usize; 3],
    /// Before each axis, then after each axis.
    pub pads: [usize; 6],
    pub output_padding: [usize; 3],
    /// `output_shape`'s spatial dims (0: not given).
    pub output_shape: [usize; 3],
    pub auto_pad: AutoPad,
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

/// An Attention node's attributes, which optional inputs it has, and which of its
/// outputs a step computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionSpec {
    /// From the attributes (3-D inputs); 0 when Q, K, V are 4-D.
    pub q_heads: usize,
    pub kv_heads: usize,
    /// `None`: 1 / sqrt(head size).
    pub scale: Option<f32>,
    pub softcap: f32,
    pub causal: bool,
    pub qk_mode: u8,
    pub mask: bool,
    pub past: bool,
    pub nonpad: bool,
    pub out: rivet_kernels::attention::AttnOut,
}

/// How a loss reduces over its elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    None,
    Sum,
    /// The weighted mean: divided by the summed weights of the elements not ignored.
    Mean,
}
