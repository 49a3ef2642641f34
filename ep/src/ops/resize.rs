//! Resize (opsets 10-19) and Upsample (7-9) on float32 and float16 (and nearest on
//! int8, uint8 and int32): nearest, linear and cubic,
//! every coordinate transformation, scales or sizes (constant or fed at Run), roi,
//! antialias, keep_aspect_ratio_policy and axes. The geometry (each axis's output length,
//! scale and region) comes from the inputs' data here; the tables and passes are in
//! `rivet_kernels::resize`, run by `resize_run`.

use std::sync::Arc;

use rivet_kernels::resize::{Axis, Coord, Interp, Nearest, Params};
use smallvec::SmallVec;

use super::op::util::{bad_types, check_attrs, input, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, AttrValue, NodeDesc, Shape};
use crate::node_attrs::{float_attr, int_attr, runtime_i64, string_attr};

/// The longest output axis Rivet makes (a bound against absurd scales or sizes).
const MAX_LEN: usize = 1 << 31;
/// The highest rank Rivet resizes.
const MAX_RANK: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Policy {
    Stretch,
    NotLarger,
    NotSmaller,
}

/// A compiled Resize or Upsample.
#[derive(Debug)]
pub(super) struct Resize {
    pub(super) params: Params,
    pub(super) extrapolation: f32,
    policy: Policy,
    /// The axes scales / sizes / roi refer to (opset 18+), as written.
    axes: Option<Vec<i64>>,
    /// Positions among the step's inputs (present inputs only, in order).
    roi: Option<usize>,
    scales: Option<usize>,
    sizes: Option<usize>,
    /// Upsample-7's scales attribute.
    fixed_scales: Option<Vec<f32>>,
    /// Upsample: scales below 1 are refused.
    upsample: bool,
}

/// Per axis of the input, what the resize does to it.
pub(super) type Geometry = SmallVec<[Axis; 8]>;

pub fn resize(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    let v = node.since_version;
    let mut allowed = vec!["mode"];
    if v >= 11 {
        allowed.extend(["coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside", "extrapolation_value"]);
        allowed.push("nearest_mode");
    }
    if v >= 18 {
        allowed.extend(["antialias", "axes", "keep_aspect_ratio_policy"]);
    }
    check_attrs(node, &allowed)?;
    let n = node.inputs.len();
    let (min, max) = match v {
        10 => (2, 2),
        11 => (3, 4),
        _ => (1, 4),
    };
    if n < min || n > max || input(node, 0).is_none() || (v == 10 && input(node, 1).is_none()) {
        return Err(format!("Resize-{v} takes {min} to {max} inputs, got {n}"));
    }
    let mode = string_attr(node, "mode", "nearest")?;
    let interp = match mode {
        "nearest" if v < 11 => Interp::Nearest(Nearest::Simple),
        "nearest" => Interp::Nearest(match string_attr(node, "nearest_mode", "round_prefer_floor")? {
            "round_prefer_floor" => Nearest::RoundPreferFloor,
            "round_prefer_ceil" => Nearest::RoundPreferCeil,
            "floor" => Nearest::Floor,
            "ceil" => Nearest::Ceil,
            m => return Err(format!("Resize nearest_mode '{m}' is not one ONNX defines")),
        }),
        "linear" => Interp::Linear,
        "cubic" if v >= 11 => Interp::Cubic { a: float_attr(node, "cubic_coeff_a", -0.75)? as f64 },
        m => return Err(format!("Resize-{v} mode '{m}' is not nearest, linear or cubic")),
    };
    let coord = if v < 11 {
        Coord::Asymmetric
    } else {
        match string_attr(node, "coordinate_transformation_mode", "half_pixel")? {
            "half_pixel" => Coord::HalfPixel,
            "half_pixel_symmetric" if v >= 19 => Coord::HalfPixelSymmetric,
            "pytorch_half_pixel" => Coord::PytorchHalfPixel,
            "align_corners" => Coord::AlignCorners,
            "asymmetric" => Coord::Asymmetric,
            "tf_half_pixel_for_nn" if v == 11 => Coord::TfHalfPixelForNn,
            "tf_crop_and_resize" => Coord::TfCropAndResize,
            m => return Err(format!("Resize-{v} coordinate_transformation_mode '{m}' is not supported")),
        }
    };
    let antialias = int_attr(node, "antialias", 0)? != 0;
    if antialias && matches!(interp, Interp::Nearest(_)) {
        return Err("Resize antialias applies to linear and cubic modes, not nearest".into());
    }
    let policy = match string_attr(node, "keep_aspect_ratio_policy", "stretch")? {
        "stretch" => Policy::Stretch,
        "not_larger" => Policy::NotLarger,
        "not_smaller" => Policy::NotSmaller,
        p => return Err(format!("Resize keep_aspect_ratio_policy '{p}' is not stretch, not_larger or not_smaller")),
    };
    let axes = match node.attr("axes") {
        None => None,
        Some(AttrValue::Ints(a)) => Some(a.clone()),
        Some(other) => return Err(format!("Resize attribute 'axes' should be ints, is {other:?}")),
    };
    let exclude_outside = int_attr(node, "exclude_outside", 0)? != 0;
    let params = Params { interp, coord, antialias, exclude_outside };
    let roles: &[usize] = if v == 10 { &[1] } else { &[1, 2, 3] };
    let mut op = Resize {
        params,
        extrapolation: float_attr(node, "extrapolation_value", 0.0)?,
        policy,
        axes,
        roi: None,
        scales: None,
        sizes: None,
        fixed_scales: None,
        upsample: false,
    };
    let positions = positions(node);
    for &k in roles {
        let Some(p) = positions.get(k).copied().flatten() else { continue };
        match (v, k) {
            (10, _) | (_, 2) => op.scales = Some(p),
            (_, 1) => op.roi = (coord == Coord::TfCropAndResize).then_some(p),
            _ => op.sizes = Some(p),
        }
    }
    check_types(node, v, interp, coord)?;
    if input(node, 0).and_then(|x| x.dims.as_ref()).is_some_and(|d| d.len() > MAX_RANK) {
        return Err(format!("Resize runs inputs of rank up to {MAX_RANK}"));
    }
    Ok(Arc::new(op))
}

pub fn upsample(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    let v = node.since_version;
    check_attrs(node, if v < 9 { &["mode", "scales"] } else { &["mode"] })?;
    let want = if v < 9 { 1 } else { 2 };
    if node.inputs.len() != want || node.inputs.iter().any(Option::is_none) {
        return Err(format!("Upsample-{v} takes {want} inputs"));
    }
    let interp = match string_attr(node, "mode", "nearest")? {
        "nearest" => Interp::Nearest(Nearest::Simple),
        "linear" => Interp::Linear,
        m => return Err(format!("Upsample mode '{m}' is not nearest or linear")),
    };
    let fixed_scales = match (v, node.attr("scales")) {
        (9.., _) => None,
        (_, Some(AttrValue::Floats(s))) if s.iter().all(|&v| v >= 1.0 && v.is_finite()) => Some(s.clone()),
        (_, Some(AttrValue::Floats(s))) => return Err(format!("Upsample scales {s:?} must be at least 1")),
        _ => return Err("Upsample-7 needs its scales attribute (floats)".into()),
    };
    check_types(node, v.max(10), interp, Coord::Asymmetric)?;
    Ok(Arc::new(Resize {
        params: Params { interp, coord: Coord::Asymmetric, antialias: false, exclude_outside: false },
        extrapolation: 0.0,
        policy: Policy::Stretch,
        axes: None,
        roi: None,
        scales: (v >= 9).then_some(1),
        sizes: None,
        fixed_scales,
        upsample: true,
    }))
}

/// Each input's position among the present ones (the step's inputs).
fn positions(node: &NodeDesc) -> Vec<Option<usize>> {
    let mut next = 0;
    node.inputs
        .iter()
        .map(|i| {
            i.as_ref().map(|_| {
                next += 1;
                next - 1
            })
        })
        .collect()
}

fn check_types(node: &NodeDesc, v: i32, interp: Interp, coord: Coord) -> Result<(), String> {
    let t = input_type(node, 0);
    // float16 runs in float32 between conversions; the integers only gather (nearest),
    // without an extrapolation value to convert.
    let gathers = matches!(interp, Interp::Nearest(_)) && coord != Coord::TfCropAndResize;
    let ok_t = matches!(t, dtype::FLOAT | dtype::FLOAT16)
        || (gathers && matches!(t, dtype::INT8 | dtype::UINT8 | dtype::INT32));
    let ok_x = ok_t && output_type(node, 0) == t;
    let scales_pos = if v == 10 { 1 } else { 2 };
    let ok_scales = input(node, scales_pos).is_none_or(|s| s.elem_type == dtype::FLOAT);
    let ok_roi = v == 10 || input(node, 1).is_none_or(|r| matches!(r.elem_type, dtype::FLOAT | dtype::DOUBLE));
    let ok_sizes = v == 10 || input(node, 3).is_none_or(|s| s.elem_type == dtype::INT64);
    if !(ok_x && ok_scales && ok_roi && ok_sizes) {
        let runs = "float32 or float16 X and Y (int8, uint8 and int32 in nearest mode without crop), float32 \
                    scales, float32/64 roi and int64 sizes";
        return Err(bad_types(node, runs));
    }
    if v > 10 && input(node, 3).is_some_and(|s| s.constant.is_none()) && !runtime_i64(node, 3) {
        return Err(format!("{}'s sizes do not reach Rivet at Run", node.op_type));
    }
    Ok(())
}

/// Reads input `k`'s data, or says what is missing.
type Get<'g, 'd> = &'g dyn Fn(usize) -> Result<Data<'d>, ShapeError>;

fn bad(why: String) -> ShapeError {
    ShapeError::Invalid(why)
}

impl Resize {
    /// Each axis's lengths, scale and region, from the input's shape and the data of
    /// scales / sizes / roi (through `get`).
    pub(super) fn geometry(&self, shape: &[usize], get: Get<'_, '_>) -> Result<Geometry, ShapeError> {
        let r = shape.len();
        if r > MAX_RANK {
            return Err(bad(format!("Resize runs inputs of rank up to {MAX_RANK}, not {r}")));
        }
        let mut geo: Geometry =
            shape.iter().map(|&len| Axis { len_in: len, len_out: len, scale: 1.0, roi: (0.0, 1.0) }).collect();
        let mut axes: SmallVec<[usize; 8]> = SmallVec::new();
        match &self.axes {
            None => axes.extend(0..r),
            Some(list) => {
                for &a in list {
                    let a = if a < 0 { a + r as i64 } else { a };
                    if !(0..r as i64).contains(&a) || axes.contains(&(a as usize)) {
                        return Err(bad(format!("axes {list:?} are not distinct axes of a rank-{r} input")));
                    }
                    axes.push(a as usize);
                }
            }
        }
        let n = axes.len();
        let scales: SmallVec<[f32; 8]> = match (&self.fixed_scales, self.scales) {
            (Some(s), _) => s.iter().copied().collect(),
            (None, Some(k)) => match get(k)? {
                Data::F32(s) => s.iter().copied().collect(),
                _ => return Err(bad("scales must be float32".into())),
            },
            (None, None) => SmallVec::new(),
        };
        let sizes: SmallVec<[i64; 8]> = match self.sizes {
            Some(k) => match get(k)? {
                Data::I64(s) => s.iter().copied().collect(),
                _ => return Err(bad("sizes must be int64".into())),
            },
            None => SmallVec::new(),
        };
        if self.params.coord == Coord::TfCropAndResize {
            let roi: SmallVec<[f64; 16]> = match self.roi.map(get).transpose()? {
                Some(Data::F32(v)) => v.iter().map(|&x| x as f64).collect(),
                Some(Data::F64(v)) => v.iter().copied().collect(),
                Some(_) => return Err(bad("roi must be float32 or float64".into())),
                None => return Err(bad("tf_crop_and_resize needs its roi input".into())),
            };
            if roi.len() != 2 * n {
                return Err(bad(format!("roi has {} values, {n} axes need {}", roi.len(), 2 * n)));
            }
            for (i, &a) in axes.iter().enumerate() {
                geo[a].roi = (roi[i], roi[n + i]);
            }
        }
        match (scales.is_empty(), sizes.is_empty()) {
            (false, false) => return Err(bad("only one of scales and sizes may be given".into())),
            (true, true) => return Err(bad("neither scales nor sizes is given".into())),
            (false, true) => {
                if scales.len() != n {
                    return Err(bad(format!("{} scales for {n} axes", scales.len())));
                }
                for (&a, &s) in axes.iter().zip(&scales) {
                    let bad_scale = !(s > 0.0 && s.is_finite()) || (self.upsample && s < 1.0);
                    if bad_scale {
                        let need = if self.upsample { "at least 1" } else { "positive" };
                        return Err(bad(format!("scale {s} for axis {a} is not {need}")));
                    }
                    let len = (s as f64 * geo[a].len_in as f64).floor();
                    geo[a].len_out = checked_len(len, a)?;
                    geo[a].scale = s as f64;
                }
            }
            (true, false) => {
                if sizes.len() != n {
                    return Err(bad(format!("{} sizes for {n} axes", sizes.len())));
                }
                for (&a, &s) in axes.iter().zip(&sizes) {
                    if s < 0 || s as u64 > MAX_LEN as u64 || (geo[a].len_in == 0 && s > 0) {
                        return Err(bad(format!("size {s} for axis {a} of length {}", geo[a].len_in)));
                    }
                    geo[a].len_out = s as usize;
                    geo[a].scale = s as f64 / geo[a].len_in.max(1) as f64;
                }
                if self.policy != Policy::Stretch {
                    let ratios = axes.iter().map(|&a| geo[a].scale);
                    let s = match self.policy {
                        Policy::NotLarger => ratios.fold(f64::INFINITY, f64::min),
                        _ => ratios.fold(0.0, f64::max),
                    };
                    for &a in &axes {
                        geo[a].scale = s;
                        geo[a].len_out = checked_len((s * geo[a].len_in as f64 + 0.5).floor(), a)?;
                    }
                }
            }
        }
        let mut total: usize = 1;
        for g in &geo {
            total = total.checked_mul(g.len_out).ok_or_else(|| bad("the output has too many elements".into()))?;
        }
        Ok(geo)
    }
}

fn checked_len(len: f64, axis: usize) -> Result<usize, ShapeError> {
    if !(0.0..=MAX_LEN as f64).contains(&len) {
        return Err(bad(format!("axis {axis} would have {len} elements")));
    }
    Ok(len as usize)
}

impl Op for Resize {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let geo = self.geometry(x.shapes[0], &|k| x.data(k))?;
        Ok(geo.iter().map(|a| a.len_out).collect())
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let ins = x.ins;
        let geo = match self.geometry(x.shapes[0], &|k| ins.get(k).copied().ok_or(ShapeError::NeedsData)) {
            Ok(g) => g,
            Err(ShapeError::Invalid(why)) => return Err(why),
            Err(ShapeError::NeedsData) => return Err("an input is missing".into()),
        };
        if geo.iter().map(|a| a.len_out).ne(x.out_shape.iter().copied()) {
            return Err("the output's shape is not the one its scales or sizes give".into());
        }
        super::resize_run::run(self, &geo, ins[0], out, x.par, x.scratch)
    }
}
