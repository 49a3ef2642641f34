//! OneHot: `on` where an index (of any numeric type, truncated toward zero; negative ones
//! count back) meets its position along a new axis of `depth`, `off` elsewhere; values of
//! any type. The depth is a constant, or fed at Run (then the output's shape comes from
//! that data).

use std::sync::Arc;

use super::int_input::one_output;
use super::op::util::{bad_types, check_attrs, check_inputs, input, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, by_storage, number_at, DataMut, Storage};
use crate::graph::{dtype, normalize_axis, Constant, NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Debug)]
struct OneHot {
    axis: i64,
    /// A constant depth, or `None` when it is fed at Run.
    depth: Option<i64>,
}

pub fn one_hot(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 3, 3)?;
    one_output(node)?;
    check_attrs(node, &["axis"])?;
    let depth = match input(node, 1).and_then(|v| v.constant.as_ref()) {
        Some(Constant::I64(d)) if d.len() == 1 => Some(d[0]),
        Some(Constant::F32(d)) if d.len() == 1 && d[0].fract() == 0.0 => Some(d[0] as i64),
        Some(_) => return Err("OneHot's constant depth must be a float32 or int64 scalar".into()),
        // Fed at Run: read when the output's shape is inferred.
        None => None,
    };
    if let Some(depth) = depth.filter(|&d| d < 1) {
        return Err(format!("OneHot depth {depth}"));
    }
    let op = OneHot { axis: int_attr(node, "axis", -1)?, depth };
    let number = |t: i32| data::is_number(t) || matches!(t, dtype::FLOAT16 | dtype::BFLOAT16);
    let t = output_type(node, 0);
    if !(number(input_type(node, 0)) && number(input_type(node, 1)) && data::supported(t) && input_type(node, 2) == t) {
        return Err(bad_types(node, "other element types"));
    }
    Ok(Arc::new(op))
}

impl Op for OneHot {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let depth = match self.depth {
            Some(d) => d,
            None => {
                if x.shapes[1].iter().product::<usize>() != 1 {
                    return Err("depth must hold one value".into());
                }
                // A float depth is truncated toward zero, as ORT reads it.
                let depth = number_at(x.data(1)?, 0).trunc();
                if !(depth >= 1.0 && depth <= (1u64 << 40) as f64) {
                    return Err(format!("depth {depth} is not a positive count").into());
                }
                depth as i64
            }
        };
        let s = x.shapes[0];
        let a = normalize_axis(self.axis, s.len() + 1, false)?;
        if x.shapes[2].iter().product::<usize>() != 2 {
            return Err("values must hold [off, on]".into());
        }
        let mut out = Shape::from_slice(s);
        out.insert(a, depth as usize);
        Ok(out)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        by_storage!(out, fill(self.axis, &x))
    }
}

fn fill<T: Storage>(axis: i64, x: &RunIn<'_, '_>, y: &mut [T]) -> Result<(), String> {
    let s = x.shapes[0];
    let a = normalize_axis(axis, s.len() + 1, false).unwrap_or(0);
    let values = T::get(x.ins[2]).ok_or("element types differ from the plan's")?;
    let (off, on) = (values[0], values[1]);
    let (outer, inner): (usize, usize) = (s[..a].iter().product(), s[a..].iter().product());
    let d = x.out_shape[a];
    let depth = d as i64;
    for o in 0..outer {
        for i in 0..inner {
            // Truncated toward zero, as ORT reads float indices; negative ones count back.
            let raw = number_at(x.ins[0], o * inner + i).trunc() as i64;
            let hot = if raw < 0 { raw + depth } else { raw };
            for k in 0..d {
                y[(o * d + k) * inner + i] = if hot == k as i64 { on } else { off };
            }
        }
    }
    Ok(())
}
