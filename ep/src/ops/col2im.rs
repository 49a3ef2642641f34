//! Col2Im (opset 18) on float32: sliding blocks summed back into an N-D image, with
//! dilations, pads and strides. image_shape and block_shape are constants or fed at Run.

use std::sync::Arc;

use rivet_kernels::sample::{self, Col2ImAxis};
use smallvec::SmallVec;

use super::op::util::{bad_types, check_attrs, check_inputs, input, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::{ints_attr, runtime_i64};
use crate::parallel::{CHUNK_LEN, PARALLEL_MIN_LEN};

#[derive(Debug)]
struct Col2Im {
    dilations: Option<Vec<i64>>,
    pads: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
}

pub fn col2im(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["dilations", "pads", "strides"])?;
    check_inputs(node, 3, 3)?;
    let ok = input_type(node, 0) == dtype::FLOAT
        && output_type(node, 0) == dtype::FLOAT
        && input_type(node, 1) == dtype::INT64
        && input_type(node, 2) == dtype::INT64;
    if !ok {
        return Err(bad_types(node, "float32 input and output, int64 image_shape and block_shape"));
    }
    for k in 1..3 {
        if input(node, k).is_some_and(|s| s.constant.is_none()) && !runtime_i64(node, k) {
            return Err("Col2Im's image_shape and block_shape must reach Rivet at Run".into());
        }
    }
    Ok(Arc::new(Col2Im {
        dilations: ints_attr(node, "dilations")?,
        pads: ints_attr(node, "pads")?,
        strides: ints_attr(node, "strides")?,
    }))
}

type Axes = SmallVec<[Col2ImAxis; 4]>;

impl Col2Im {
    /// Per spatial axis its geometry, and C, checked against the input's shape.
    fn axes(&self, xs: &[usize], image: Data<'_>, block: Data<'_>) -> Result<(Axes, usize), String> {
        let (Data::I64(image), Data::I64(block)) = (image, block) else {
            return Err("image_shape and block_shape must be int64".into());
        };
        let nd = image.len();
        if nd == 0 || block.len() != nd || xs.len() != 3 {
            return Err(format!("image_shape {image:?} and block_shape {block:?} for input of rank {}", xs.len()));
        }
        let attr = |v: &Option<Vec<i64>>, len: usize, default: i64, what: &str| -> Result<SmallVec<[i64; 8]>, String> {
            match v {
                None => Ok(SmallVec::from_elem(default, len)),
                Some(v) if v.len() == len => Ok(v.iter().copied().collect()),
                Some(v) => Err(format!("{what} {v:?} should have {len} values")),
            }
        };
        let dil = attr(&self.dilations, nd, 1, "dilations")?;
        let pads = attr(&self.pads, 2 * nd, 0, "pads")?;
        let strides = attr(&self.strides, nd, 1, "strides")?;
        let mut axes = Axes::new();
        let (mut kernel, mut cols) = (1usize, 1usize);
        for i in 0..nd {
            let (im, b, d, s) = (image[i], block[i], dil[i], strides[i]);
            let (p0, p1) = (pads[i], pads[nd + i]);
            let sane = (1..1 << 31).contains(&im)
                && (1..1 << 16).contains(&b)
                && (1..1 << 16).contains(&d)
                && (1..1 << 16).contains(&s)
                && (0..1 << 16).contains(&p0)
                && (0..1 << 16).contains(&p1);
            let span = d * (b - 1) + 1;
            if !sane || im + p0 + p1 < span {
                return Err(format!(
                    "axis {i}: image {im}, block {b}, dilation {d}, stride {s} and pads {p0}/{p1} fit no block"
                ));
            }
            let positions = ((im + p0 + p1 - span) / s + 1) as usize;
            kernel *= b as usize;
            cols = cols.saturating_mul(positions);
            axes.push(Col2ImAxis {
                image: im as usize,
                block: b as usize,
                dilation: d as usize,
                pad: p0 as usize,
                stride: s as usize,
                positions,
            });
        }
        if !xs[1].is_multiple_of(kernel) || xs[2] != cols {
            return Err(format!("input {xs:?} is not [N, C * {kernel}, {cols}] for these blocks"));
        }
        Ok((axes, xs[1] / kernel))
    }
}

impl Op for Col2Im {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let (axes, c) = self.axes(x.shapes[0], x.data(1)?, x.data(2)?)?;
        let mut s = Shape::from_slice(&[x.shapes[0][0], c]);
        s.extend(axes.iter().map(|a| a.image));
        Ok(s)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (axes, _) = self.axes(x.shapes[0], x.ins[1], x.ins[2])?;
        let (Data::F32(xd), DataMut::F32(y)) = (x.ins[0], out) else {
            return Err("Col2Im runs float32 input and output".into());
        };
        let image: usize = axes.iter().map(|a| a.image).product();
        let block: usize = axes.iter().map(|a| a.block * a.positions).product();
        if y.is_empty() {
            return Ok(());
        }
        let per = if y.len() < PARALLEL_MIN_LEN { y.len() / image } else { (CHUNK_LEN / image).max(1) };
        x.par.for_each_chunk(y, per * image, &|start, chunk| {
            let first = start / image;
            let count = chunk.len() / image;
            sample::col2im(&axes, &xd[first * block..(first + count) * block], chunk);
        });
        Ok(())
    }
}
