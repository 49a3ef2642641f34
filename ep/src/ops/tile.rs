//! Tile: each axis of a tensor of any type repeated; the repeats a constant or fed at Run.

use std::sync::Arc;

use super::int_input::{ints_input, ints_of, one_output, up_to_rank_8};
use super::op::util::{bad_types, check_attrs, check_inputs, input_type, move_any, output_type, Move};
use super::params::ReduceAxes;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, DataMut};
use crate::graph::{NodeDesc, Shape};

#[derive(Debug)]
struct Tile {
    repeats: ReduceAxes,
}

pub fn tile(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 2)?;
    one_output(node)?;
    check_attrs(node, &[])?;
    let repeats = ints_input(node, 1, "repeats")?;
    let t = output_type(node, 0);
    if !(data::supported(t) && input_type(node, 0) == t) {
        return Err(bad_types(node, "one element type for data and output, any but strings and sub-byte types"));
    }
    Ok(Arc::new(Tile { repeats }))
}

impl Op for Tile {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        let r = ints_of(&self.repeats, || x.data(1))?;
        if r.len() != s.len() || r.iter().any(|&v| v < 0) {
            return Err(format!("repeats {r:?} for rank {}", s.len()).into());
        }
        up_to_rank_8(s, 0)?;
        Ok(s.iter().zip(r).map(|(&d, k)| d * k as usize).collect())
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        move_any(x.ins[0], out, &Repeat { s: x.shapes[0], o: x.out_shape })
    }
}

/// The output walks its index; each element reads the input at that index modulo its dims.
struct Repeat<'a> {
    s: &'a [usize],
    o: &'a [usize],
}

impl Move for Repeat<'_> {
    fn apply<T: Copy + Default + PartialEq + Send + Sync>(&self, x: &[T], y: &mut [T]) {
        let (s, o) = (self.s, self.o);
        let rank = s.len();
        let mut index = [0usize; 8];
        for v in y.iter_mut() {
            let mut src = 0;
            for a in 0..rank {
                src = src * s[a] + index[a] % s[a].max(1);
            }
            *v = x[src];
            for a in (0..rank).rev() {
                index[a] += 1;
                if index[a] < o[a] {
                    break;
                }
                index[a] = 0;
            }
        }
    }
}
