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

/// The output row by row of its innermost axis: each row is its input row (the outer
/// indices modulo the input's dims) copied once per repeat of the innermost axis. An
/// index walk per element took 27x ORT's time on [1,64,8,8] repeated 4x4.
struct Repeat<'a> {
    s: &'a [usize],
    o: &'a [usize],
}

impl Move for Repeat<'_> {
    fn apply<T: Copy + Default + PartialEq + Send + Sync>(&self, x: &[T], y: &mut [T]) {
        let (s, o) = (self.s, self.o);
        let Some(last) = s.len().checked_sub(1) else {
            // A scalar: itself.
            if let (Some(v), Some(&x0)) = (y.first_mut(), x.first()) {
                *v = x0;
            }
            return;
        };
        let (n, w) = (s[last], o[last]);
        if n == 0 || w == 0 {
            return;
        }
        let mut index = [0usize; 8];
        for row in y.chunks_exact_mut(w) {
            let mut src = 0;
            for a in 0..last {
                src = src * s[a] + index[a] % s[a].max(1);
            }
            let xs = &x[src * n..][..n];
            for part in row.chunks_exact_mut(n) {
                part.copy_from_slice(xs);
            }
            for a in (0..last).rev() {
                index[a] += 1;
                if index[a] < o[a] {
                    break;
                }
                index[a] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Tile by its definition: output index modulo the input's dims, per element.
    fn reference(x: &[u32], s: &[usize], o: &[usize]) -> Vec<u32> {
        let n: usize = o.iter().product();
        (0..n)
            .map(|mut flat| {
                let mut idx = vec![0; o.len()];
                for a in (0..o.len()).rev() {
                    idx[a] = flat % o[a];
                    flat /= o[a];
                }
                x[idx.iter().zip(s).fold(0, |acc, (&i, &d)| acc * d + i % d)]
            })
            .collect()
    }

    /// Ranks 1 to 4, repeats of 1 to 3 on each axis (the innermost too), axes of one,
    /// repeats of zero and a scalar: the rows against the definition.
    #[test]
    fn rows_give_the_definition() {
        let cases: [(&[usize], &[usize]); 7] = [
            (&[5], &[3]),
            (&[2, 3], &[2, 1]),
            (&[2, 3], &[1, 3]),
            (&[1, 4, 2, 2], &[1, 1, 4, 4]),
            (&[3, 1, 2], &[2, 3, 2]),
            (&[2, 2], &[0, 2]),
            (&[2, 3, 1], &[3, 2, 5]),
        ];
        for (s, r) in cases {
            let o: Vec<usize> = s.iter().zip(r).map(|(&d, &k)| d * k).collect();
            let x: Vec<u32> = (0..s.iter().product::<usize>() as u32).collect();
            let want = reference(&x, s, &o);
            let mut y = vec![u32::MAX; want.len()];
            Repeat { s, o: &o }.apply(&x, &mut y);
            assert_eq!(y, want, "{s:?} x {r:?}");
        }
        let mut y = [0u32];
        Repeat { s: &[], o: &[] }.apply(&[7u32], &mut y);
        assert_eq!(y, [7]);
    }
}
