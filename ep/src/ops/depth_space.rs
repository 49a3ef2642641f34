//! DepthToSpace and SpaceToDepth: channels moved into blocks of the image and back, for
//! any element type. Both are one 6-D transpose of the input seen as blocks.

use std::sync::Arc;

use super::op::util::{check_attrs, check_inputs, input_type, move_any, output_type, Move};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, DataMut};
use crate::graph::{NodeDesc, Shape};
use crate::node_attrs::{int_attr, string_attr};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    /// DepthToSpace, depth-column-row order (the default).
    Dcr,
    /// DepthToSpace, column-row-depth order.
    Crd,
    /// SpaceToDepth.
    ToDepth,
}

#[derive(Debug)]
struct DepthSpace {
    mode: Mode,
    block: usize,
}

pub fn depth_to_space(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["blocksize", "mode"])?;
    let mode = match string_attr(node, "mode", "DCR")? {
        "DCR" => Mode::Dcr,
        "CRD" => Mode::Crd,
        m => return Err(format!("DepthToSpace mode '{m}' is not DCR or CRD")),
    };
    compile(node, mode)
}

pub fn space_to_depth(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &["blocksize"])?;
    compile(node, Mode::ToDepth)
}

fn compile(node: &NodeDesc, mode: Mode) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    let t = input_type(node, 0);
    if !data::supported(t) || output_type(node, 0) != t {
        return Err(super::op::util::bad_types(node, "any element type, output of the input's"));
    }
    let block = int_attr(node, "blocksize", 0)?;
    if !(1..=1 << 16).contains(&block) {
        return Err(format!("{} blocksize {block} is not positive", node.op_type));
    }
    Ok(Arc::new(DepthSpace { mode, block: block as usize }))
}

impl DepthSpace {
    /// The input as a 6-D tensor and the permutation that gives the output.
    fn view(&self, s: &[usize]) -> ([usize; 6], [usize; 6]) {
        let (n, c, h, w, b) = (s[0], s[1], s[2], s[3], self.block);
        match self.mode {
            Mode::Dcr => ([n, b, b, c / (b * b), h, w], [0, 3, 4, 1, 5, 2]),
            Mode::Crd => ([n, c / (b * b), b, b, h, w], [0, 1, 4, 2, 5, 3]),
            Mode::ToDepth => ([n, c, h / b, b, w / b, b], [0, 3, 5, 1, 2, 4]),
        }
    }
}

impl Op for DepthSpace {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        let b = self.block;
        if s.len() != 4 {
            return Err(format!("the input must be 4-D [N, C, H, W], got rank {}", s.len()).into());
        }
        let (n, c, h, w) = (s[0], s[1], s[2], s[3]);
        Ok(match self.mode {
            Mode::Dcr | Mode::Crd => {
                if c % (b * b) != 0 {
                    return Err(format!("{c} channels do not divide into blocks of {b}x{b}").into());
                }
                Shape::from_slice(&[n, c / (b * b), h * b, w * b])
            }
            Mode::ToDepth => {
                if h % b != 0 || w % b != 0 {
                    return Err(format!("{h}x{w} is not a whole number of {b}x{b} blocks").into());
                }
                Shape::from_slice(&[n, c * b * b, h / b, w / b])
            }
        })
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        if let (Mode::ToDepth, 2, data::Data::F32(xf), DataMut::F32(yf)) = (self.mode, self.block, x.ins[0], &mut *out)
        {
            // Float32 by 2x2 blocks (YOLOv5's Focus): each input row split into its two
            // channels in one vectorised pass.
            rivet_kernels::nn::space_to_depth_2(xf, [s[0], s[1], s[2], s[3]], yf);
            return Ok(());
        }
        let (dims, perm) = self.view(s);
        move_any(x.ins[0], out, &Permute { dims, perm })
    }
}

/// `y = transpose(x viewed as dims, perm)`, row by row of the output's last axis.
struct Permute {
    dims: [usize; 6],
    perm: [usize; 6],
}

impl Move for Permute {
    fn apply<T: Copy + Default + PartialEq + Send + Sync>(&self, x: &[T], y: &mut [T]) {
        let mut strides = [0usize; 6];
        let mut acc = 1;
        for a in (0..6).rev() {
            strides[a] = acc;
            acc *= self.dims[a];
        }
        let out_dims: [usize; 6] = self.perm.map(|p| self.dims[p]);
        let out_strides: [usize; 6] = self.perm.map(|p| strides[p]);
        let row = out_dims[5];
        if row == 0 || y.is_empty() {
            return;
        }
        let mut idx = [0usize; 5];
        for chunk in y.chunks_exact_mut(row) {
            let base: usize = (0..5).map(|a| idx[a] * out_strides[a]).sum();
            for (k, o) in chunk.iter_mut().enumerate() {
                *o = x[base + k * out_strides[5]];
            }
            for a in (0..5).rev() {
                idx[a] += 1;
                if idx[a] < out_dims[a] {
                    break;
                }
                idx[a] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(op: &DepthSpace, shape: &[usize], x: &[f32]) -> (Shape, Vec<f32>) {
        let out = op.shape(&ShapeIn { shapes: &[shape], data: &[] }).unwrap();
        let mut y = vec![0.0; x.len()];
        let (dims, perm) = op.view(shape);
        move_any(crate::data::Data::F32(x), &mut DataMut::F32(&mut y), &Permute { dims, perm }).unwrap();
        (out, y)
    }

    /// Float32 SpaceToDepth by 2x2 blocks, row by row, gives the 6-D transpose's output:
    /// one and several channels and images, rows of fewer and more than 16 blocks.
    #[test]
    fn space_to_depth_by_rows_is_the_transpose() {
        for shape in [[1usize, 3, 4, 6], [2, 16, 12, 36], [1, 1, 8, 64], [2, 5, 2, 2]] {
            let op = DepthSpace { mode: Mode::ToDepth, block: 2 };
            let x: Vec<f32> = (0..shape.iter().product::<usize>()).map(|v| v as f32).collect();
            let (_, want) = run(&op, &shape, &x);
            let mut got = vec![f32::NAN; x.len()];
            rivet_kernels::nn::space_to_depth_2(&x, shape, &mut got);
            assert_eq!(got, want, "{shape:?}");
        }
    }

    #[test]
    fn dcr_and_crd_follow_the_onnx_examples_and_space_to_depth_inverts_dcr() {
        let x: Vec<f32> = (0..16).map(|v| v as f32).collect();
        // [1, 4, 2, 2], blocksize 2.
        let (s, dcr) = run(&DepthSpace { mode: Mode::Dcr, block: 2 }, &[1, 4, 2, 2], &x);
        assert_eq!(s.as_slice(), [1, 1, 4, 4]);
        assert_eq!(dcr, [0., 4., 1., 5., 8., 12., 9., 13., 2., 6., 3., 7., 10., 14., 11., 15.]);
        let (_, crd) = run(&DepthSpace { mode: Mode::Crd, block: 2 }, &[1, 4, 2, 2], &x);
        assert_eq!(crd, [0., 4., 1., 5., 8., 12., 9., 13., 2., 6., 3., 7., 10., 14., 11., 15.]);
        let (s, back) = run(&DepthSpace { mode: Mode::ToDepth, block: 2 }, &[1, 1, 4, 4], &dcr);
        assert_eq!(s.as_slice(), [1, 4, 2, 2]);
        assert_eq!(back, x);
    }

    #[test]
    fn shapes_that_do_not_divide_are_refused() {
        let op = DepthSpace { mode: Mode::ToDepth, block: 3 };
        assert!(matches!(op.shape(&ShapeIn { shapes: &[&[1, 1, 4, 4]], data: &[] }), Err(ShapeError::Invalid(_))));
    }
}
