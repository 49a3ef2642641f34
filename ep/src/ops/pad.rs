//! Pad: constant, reflect, edge or wrap padding, the amounts (and opset 18's axes) from
//! the attribute, a constant, or int64 data read at Run. Any element type; a non-zero
//! constant fill on float32 only, or on a half type computed in float32.

use std::sync::Arc;

use rivet_kernels::nn::PadMode;
use smallvec::SmallVec;

use super::moves::{bad_types_of, check_data_then_constants, ints, step_input, types_of, Ints};
use super::op::util::{check_attrs, input};
use super::params::{Axes, PadSpec};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, by_storage, Data, DataMut, Storage};
use crate::graph::{dtype, Constant, NodeDesc, Shape};
use crate::node_attrs::{const_i64, float_attr, ints_attr, runtime_i64, string_attr};

#[derive(Debug)]
struct Pad {
    spec: PadSpec,
    /// The step inputs of the amounts, the constant fill and the axes, when present.
    pads_at: Option<usize>,
    value_at: Option<usize>,
    axes_at: Option<usize>,
    /// float16 or bfloat16 with a non-zero constant fill: padded in float32.
    half: Option<i32>,
}

pub fn pad(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_data_then_constants(node, 4, false)?;
    check_attrs(node, &["mode", "pads", "value"])?;
    let spec = spec(node)?;
    let data: &[usize] = if spec.value_at_run { &[0, 2] } else { &[0] };
    let half = check_types(node, &spec, data)?;
    let at = |pos: usize| step_input(node, pos);
    Ok(Arc::new(Pad { spec, pads_at: at(1), value_at: at(2), axes_at: at(3), half }))
}

fn spec(node: &NodeDesc) -> Result<PadSpec, String> {
    let (mut at_run, mut value_at_run) = (false, false);
    let (pads, value) = if node.since_version < 11 {
        (ints_attr(node, "pads")?.ok_or("Pad needs pads")?, float_attr(node, "value", 0.0)?)
    } else {
        let pads = if runtime_i64(node, 1) {
            at_run = true;
            Vec::new()
        } else {
            const_i64(node, 1, "pads")?.ok_or("Pad needs pads")?
        };
        // A float32 constant fill is kept in the kernel; any other (another type, or fed
        // at Run) is read at Run as a data input of the data's type.
        let value = match input(node, 2) {
            None => 0.0,
            Some(v) => match &v.constant {
                Some(Constant::F32(d)) if d.len() == 1 => d[0],
                _ => {
                    value_at_run = true;
                    0.0
                }
            },
        };
        (pads, value)
    };
    let axes_at_run = runtime_i64(node, 3);
    let axes = if input(node, 3).is_some() && !axes_at_run {
        const_i64(node, 3, "axes")?.ok_or("Pad's axes must be a constant")?
    } else {
        Vec::new()
    };
    if pads.len() > 16 || pads.iter().any(|&p| p < 0) {
        return Err(format!("pads {pads:?}: Rivet pads rank <= 8 by non-negative amounts"));
    }
    let mode = match string_attr(node, "mode", "constant")? {
        "constant" => PadMode::Constant(value),
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        "wrap" if node.since_version >= 19 => PadMode::Wrap,
        other => return Err(format!("Pad mode '{other}'")),
    };
    let mut arr = [0usize; 16];
    pads.iter().enumerate().for_each(|(i, &p)| arr[i] = p as usize);
    Ok(PadSpec { len: pads.len() as u8, pads: arr, mode, at_run, axes: Axes::new(&axes)?, axes_at_run, value_at_run })
}

/// One element type for the data, the fill and the output; a non-zero constant fill only
/// on float32, or on a half type (then `Some` of it: padded in float32).
fn check_types(node: &NodeDesc, spec: &PadSpec, data: &[usize]) -> Result<Option<i32>, String> {
    let (types, out) = types_of(node, data);
    let check = |types: &[i32], out: i32| -> Result<(), &'static str> {
        if matches!(spec.mode, PadMode::Constant(v) if v != 0.0) && out != dtype::FLOAT {
            return Err("a non-zero constant on float32 only");
        }
        if !(data::supported(out) && types.iter().all(|&t| t == out)) {
            return Err("one element type for data and output, any but strings and sub-byte types");
        }
        Ok(())
    };
    let Err(what) = check(&types, out) else { return Ok(None) };
    let why = bad_types_of(node, data, what);
    // The half case: data and output of one half type, the fill a float32 constant.
    let half = matches!(out, dtype::FLOAT16 | dtype::BFLOAT16) && types.iter().all(|&t| t == out);
    let wide: SmallVec<[i32; 4]> = types.iter().map(|_| dtype::FLOAT).collect();
    if half && check(&wide, dtype::FLOAT).is_ok() {
        return Ok(Some(out));
    }
    Err(why)
}

impl Pad {
    /// Begin and end amounts for every axis, from the spec or the data read now.
    fn resolve<'d>(
        &self,
        rank: usize,
        data: impl Fn(usize) -> Result<Data<'d>, ShapeError>,
    ) -> Result<[usize; 16], ShapeError> {
        let (mut pads, mut axes) = (Ints::new(), Ints::new());
        let mut params: SmallVec<[&[i64]; 2]> = SmallVec::new();
        if self.spec.at_run {
            pads = ints(data(self.pads_at.ok_or("the pads input is missing")?)?)?;
        }
        if self.spec.axes_at_run {
            axes = ints(data(self.axes_at.ok_or("the axes input is missing")?)?)?;
        }
        if self.spec.at_run {
            params.push(&pads);
        }
        if self.spec.axes_at_run {
            params.push(&axes);
        }
        Ok(self.spec.resolve(rank, &params)?)
    }
}

impl Op for Pad {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        let rank = s.len();
        if self.spec.value_at_run {
            let v = self.value_at.ok_or("the constant_value input is missing")?;
            if x.shapes[v].iter().product::<usize>() != 1 {
                return Err("constant_value must hold one value".into());
            }
        }
        let resolved = self.resolve(rank, |k| x.data(k))?;
        let pads = &resolved[..2 * rank];
        if self.spec.mode == PadMode::Reflect
            && (0..rank).any(|a| (pads[a] > 0 || pads[a + rank] > 0) && (pads[a] >= s[a] || pads[a + rank] >= s[a]))
        {
            return Err(format!("reflect pads {pads:?} must be smaller than the axes").into());
        }
        // Edge and wrap read the axis's cells for its padding: an empty axis has none
        // (wrap of an empty axis read past the input, found by review).
        if matches!(self.spec.mode, PadMode::Edge | PadMode::Wrap)
            && (0..rank).any(|a| s[a] == 0 && pads[a] + pads[a + rank] > 0)
        {
            let mode = if self.spec.mode == PadMode::Edge { "edge" } else { "wrap" };
            return Err(format!("{mode} padding of an empty axis").into());
        }
        Ok((0..rank).map(|a| s[a] + pads[a] + pads[a + rank]).collect())
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let rank = s.len();
        let pads = self.resolve(rank, |k| Ok(x.ins[k])).map_err(|e| match e {
            ShapeError::Invalid(why) => why,
            ShapeError::NeedsData => "its amounts are not known".into(),
        })?;
        let (begin, end) = (&pads[..rank], &pads[rank..2 * rank]);
        let constant = match self.spec.mode {
            PadMode::Constant(v) => v,
            _ => 0.0,
        };
        if self.half.is_some() {
            return self.pad_half(x, begin, end, constant, out);
        }
        if let DataMut::F32(y) = out {
            let fill = match self.spec.mode {
                PadMode::Constant(_) if self.spec.value_at_run => self.fill::<f32>(&x)?,
                _ => constant,
            };
            let v = x.ins[0].f32().ok_or(MISMATCH)?;
            rivet_kernels::nn::pad(v, s, begin, end, self.spec.mode, fill, y);
            return Ok(());
        }
        by_storage!(out, pad_any(self, &x, begin, end))
    }
}

const MISMATCH: &str = "element types differ from the plan's";

impl Pad {
    /// The constant fill read at Run, of the data's type.
    fn fill<T: Storage>(&self, x: &RunIn<'_, '_>) -> Result<T, String> {
        let k = self.value_at.ok_or("the constant_value input is missing")?;
        T::get(x.ins[k]).and_then(|v| v.first().copied()).ok_or_else(|| MISMATCH.into())
    }

    /// A half input padded in float32 with the constant, then rounded back, in the
    /// scratch (grown once, then reused).
    fn pad_half(
        &self,
        x: RunIn<'_, '_>,
        begin: &[usize],
        end: &[usize],
        fill: f32,
        out: &mut DataMut<'_>,
    ) -> Result<(), String> {
        if !super::halves::is_half(x.ins[0].elem_type()) {
            return Err(MISMATCH.into());
        }
        let (ins, padded) = super::halves::widen_all(&x.ins[..1], &mut x.scratch.f32, out.len());
        let Data::F32(wide) = ins[0] else { return Err(MISMATCH.into()) };
        rivet_kernels::nn::pad(wide, x.shapes[0], begin, end, self.spec.mode, fill, padded);
        super::halves::narrow(padded, out)
    }
}

/// Any element type, the fill read at Run or 0 (a float32 constant other than 0 is only
/// claimed on float32 and the halves).
fn pad_any<T: Storage>(p: &Pad, x: &RunIn<'_, '_>, begin: &[usize], end: &[usize], y: &mut [T]) -> Result<(), String> {
    let fill = if p.spec.value_at_run { p.fill::<T>(x)? } else { T::default() };
    let v = T::get(x.ins[0]).ok_or(MISMATCH)?;
    rivet_kernels::nn::pad(v, x.shapes[0], begin, end, p.spec.mode, fill, y);
    Ok(())
}
