//! NonMaxSuppression (opsets 10, 11; float32 boxes and scores): the selected
//! `(batch, class, box)` triples as int64 `[count, 3]`, in ONNX Runtime's order. The count
//! depends on the data, so the shape is known only at Run: the selection runs once for
//! the shape (in a per-thread buffer, reused) and once for the output (in the step's
//! scratch).

use std::cell::RefCell;
use std::sync::Arc;

use rivet_kernels::boxes::{BoxFormat, Nms};

use super::op::util::{check_attrs, check_inputs, input, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Debug)]
struct NonMaxSuppression {
    format: BoxFormat,
    /// Where the optional inputs 2..5 are among the step's inputs.
    slot: [Option<usize>; 5],
}

pub fn non_max_suppression(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["center_point_box"])?;
    check_inputs(node, 2, 5)?;
    let types = [dtype::FLOAT, dtype::FLOAT, dtype::INT64, dtype::FLOAT, dtype::FLOAT];
    let ok = (0..node.inputs.len()).all(|k| input(node, k).is_none() || input_type(node, k) == types[k]);
    if !ok || output_type(node, 0) != dtype::INT64 {
        return Err(super::op::util::bad_types(node, "float32 boxes and scores, int64 max_output_boxes_per_class"));
    }
    if let Some(v) = input(node, 2) {
        if v.constant.is_none() && !v.at_run_ok {
            return Err(format!("NonMaxSuppression max_output_boxes_per_class '{}' is not known at Run", v.name));
        }
    }
    let format = match int_attr(node, "center_point_box", 0)? {
        0 => BoxFormat::Corners,
        1 => BoxFormat::Center,
        c => return Err(format!("NonMaxSuppression center_point_box {c} is not 0 or 1")),
    };
    let mut slot = [None; 5];
    let mut at = 0;
    for (k, s) in slot.iter_mut().enumerate().take(node.inputs.len()) {
        if input(node, k).is_some() {
            *s = Some(at);
            at += 1;
        }
    }
    Ok(Arc::new(NonMaxSuppression { format, slot }))
}

thread_local! {
    /// The shape pass's selection: candidates and triples.
    static SHAPE_PASS: RefCell<(Vec<usize>, Vec<i64>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// A scalar (or one-element) input's value.
fn one<T: Copy>(v: Option<&[T]>, what: &str) -> Result<Option<T>, String> {
    match v {
        None => Ok(None),
        Some([x]) => Ok(Some(*x)),
        Some(v) => Err(format!("{what} must hold one value, has {}", v.len())),
    }
}

impl NonMaxSuppression {
    /// The selection's parameters from the inputs' shapes and data.
    fn params<'d>(
        &self,
        shapes: &[&[usize]],
        data: &dyn Fn(usize) -> Result<Data<'d>, ShapeError>,
    ) -> Result<Nms, ShapeError> {
        let (b, s) = (shapes[0], shapes[1]);
        if b.len() != 3 || b[2] != 4 {
            return Err(format!("boxes must be [batches, boxes, 4], got {b:?}").into());
        }
        if s.len() != 3 || s[0] != b[0] || s[2] != b[1] {
            return Err(format!("scores must be [{}, classes, {}], got {s:?}", b[0], b[1]).into());
        }
        let input = |k: usize| self.slot[k].map(data).transpose();
        let max = one(
            input(2)?.map(|d| d.i64().ok_or("max_output_boxes_per_class is not int64")).transpose()?,
            "max_output_boxes_per_class",
        )?;
        let f = |k: usize, what: &str| -> Result<Option<f32>, ShapeError> {
            Ok(one(input(k)?.map(|d| d.f32().ok_or(format!("{what} is not float32"))).transpose()?, what)?)
        };
        let iou = f(3, "iou_threshold")?.unwrap_or(0.0);
        if !(0.0..=1.0).contains(&iou) {
            return Err(format!("iou_threshold {iou} is outside [0, 1]").into());
        }
        Ok(Nms {
            batches: b[0],
            classes: s[1],
            boxes: b[1],
            format: self.format,
            max_per_class: max.unwrap_or(0).max(0).min(b[1] as i64) as usize,
            iou_threshold: iou,
            score_threshold: f(4, "score_threshold")?,
        })
    }
}

impl Op for NonMaxSuppression {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let nms = self.params(x.shapes, &|k| x.data(k))?;
        let boxes = x.data(0)?.f32().ok_or("boxes are not float32")?;
        let scores = x.data(1)?.f32().ok_or("scores are not float32")?;
        let count = SHAPE_PASS.with_borrow_mut(|(cand, out)| {
            nms.select(boxes, scores, cand, out);
            out.len() / 3
        });
        Ok(Shape::from_slice(&[count, 3]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let nms = self.params(x.shapes, &|k| Ok(x.ins[k])).map_err(|e| match e {
            ShapeError::Invalid(s) => s,
            ShapeError::NeedsData => "an input's data is missing".into(),
        })?;
        let boxes = x.ins[0].f32().ok_or("boxes are not float32")?;
        let scores = x.ins[1].f32().ok_or("scores are not float32")?;
        let s = &mut *x.scratch;
        nms.select(boxes, scores, &mut s.usize, &mut s.i64);
        match out {
            DataMut::I64(y) if y.len() == s.i64.len() => y.copy_from_slice(&s.i64),
            _ => return Err(format!("the output holds {} values, the selection {}", out.len(), s.i64.len())),
        }
        Ok(())
    }
}
