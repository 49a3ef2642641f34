//! RoiAlign (opsets 10, 16, 22) on float32: X `[N, C, H, W]`, rois `[R, 4]` as
//! `[x1, y1, x2, y2]`, int64 batch_indices `[R]`, giving `[R, C, output_height,
//! output_width]`. Modes avg and max (max as ONNX Runtime computes it, see
//! `rivet_kernels::roi_align`); opset 10 has no coordinate_transformation_mode and
//! behaves as `output_half_pixel`, opsets 16 and 22 default to `half_pixel`. The planes
//! (roi, channel) run in parallel when the samples are many.

use std::sync::Arc;

use rivet_kernels::roi_align::RoiAlign as Kernel;

use super::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::{float_attr, int_attr, string_attr};
use crate::parallel::{CHUNK_LEN, PARALLEL_MIN_LEN};

#[derive(Debug)]
struct RoiAlign {
    k: Kernel,
}

pub fn roi_align(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    let v = node.since_version;
    let mut attrs = vec!["mode", "output_height", "output_width", "sampling_ratio", "spatial_scale"];
    if v >= 16 {
        attrs.push("coordinate_transformation_mode");
    }
    check_attrs(node, &attrs)?;
    check_inputs(node, 3, 3)?;
    if input_type(node, 0) != dtype::FLOAT
        || input_type(node, 1) != dtype::FLOAT
        || input_type(node, 2) != dtype::INT64
        || output_type(node, 0) != dtype::FLOAT
    {
        return Err(bad_types(node, "float32 X, rois and Y, int64 batch_indices"));
    }
    let max = match string_attr(node, "mode", "avg")? {
        "avg" => false,
        "max" => true,
        m => return Err(format!("RoiAlign mode '{m}' is not avg or max")),
    };
    let half_pixel = match string_attr(node, "coordinate_transformation_mode", "half_pixel")? {
        _ if v < 16 => false,
        "half_pixel" => true,
        "output_half_pixel" => false,
        m => {
            return Err(format!("RoiAlign coordinate_transformation_mode '{m}' is not half_pixel or output_half_pixel"))
        }
    };
    let positive = |name: &str| -> Result<usize, String> {
        match int_attr(node, name, 1)? {
            n @ 1..=0x7fff_ffff => Ok(n as usize),
            n => Err(format!("RoiAlign {name} {n} is not positive")),
        }
    };
    let (out_h, out_w) = (positive("output_height")?, positive("output_width")?);
    let sampling_ratio = match int_attr(node, "sampling_ratio", 0)? {
        n @ 0..=rivet_kernels::roi_align::MAX_GRID => n as usize,
        n => return Err(format!("RoiAlign sampling_ratio {n} is negative or too large")),
    };
    let spatial_scale = float_attr(node, "spatial_scale", 1.0)?;
    Ok(Arc::new(RoiAlign { k: Kernel { max, out_h, out_w, sampling_ratio, spatial_scale, half_pixel } }))
}

impl Op for RoiAlign {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (xs, rs, bs) = (x.shapes[0], x.shapes[1], x.shapes[2]);
        if xs.len() != 4 {
            return Err(format!("X must be [N, C, H, W], got {xs:?}").into());
        }
        if rs.len() != 2 || rs[1] != 4 {
            return Err(format!("rois must be [num_rois, 4], got {rs:?}").into());
        }
        if bs != [rs[0]] {
            return Err(format!("batch_indices must be [{}], got {bs:?}", rs[0]).into());
        }
        Ok(Shape::from_slice(&[rs[0], xs[1], self.k.out_h, self.k.out_w]))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (Data::F32(xd), Data::F32(rois), Data::I64(batch), DataMut::F32(y)) = (x.ins[0], x.ins[1], x.ins[2], out)
        else {
            return Err("RoiAlign runs float32 X and rois, int64 batch_indices".into());
        };
        let xs = x.shapes[0];
        let (n, c, h, w) = (xs[0], xs[1], xs[2], xs[3]);
        let plane = self.k.out_h * self.k.out_w;
        if y.is_empty() {
            return Ok(());
        }
        if h == 0 || w == 0 {
            return Err(format!("X {xs:?} has no spatial points to sample"));
        }
        // Check every roi first (its batch and its grid) and count the samples.
        let mut samples = 0usize;
        for (r, (&b, roi)) in batch.iter().zip(rois.chunks_exact(4)).enumerate() {
            if !(0..n as i64).contains(&b) {
                return Err(format!("batch_indices value {b} at index {r} is out of range [0, {n})"));
            }
            let (gh, gw) = self.k.grid(roi)?.samples();
            samples = samples.saturating_add(c.saturating_mul(plane).saturating_mul(gh * gw));
        }
        let k = &self.k;
        let planes = y.len() / plane;
        let per = if samples < PARALLEL_MIN_LEN {
            planes
        } else {
            // Chunks of about CHUNK_LEN samples on average.
            let per_plane = (samples / planes).max(1);
            (CHUNK_LEN / per_plane).clamp(1, planes)
        };
        let in_plane = h * w;
        // Every roi's batch and grid were checked above; the shapes (checked by `shape`)
        // bound `r` by the rois.
        x.par.for_each_chunk(y, per * plane, &|start, chunk| {
            for (i, yp) in (start / plane..).zip(chunk.chunks_exact_mut(plane)) {
                let (r, ch) = (i / c, i % c);
                let roi = &rois[r * 4..r * 4 + 4];
                let Ok(g) = k.grid(roi) else { continue };
                let at = (batch[r] as usize * c + ch) * in_plane;
                k.plane(&g, &xd[at..at + in_plane], h, w, yp);
            }
        });
        Ok(())
    }
}
