//! TopK: the K largest (or smallest) elements along an axis, sorted, and their int64
//! positions (ties keep the lower index first); numbers, and the halves in float32. K is
//! a constant or fed at Run. Each output is a step of its own.

use std::sync::Arc;

use super::halves::{computed, is_half, narrow, widen_all};
use super::int_input::{ints_input, ints_of};
use super::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use super::params::ReduceAxes;
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{self, by_number, Data, DataMut, Storage};
use crate::graph::{dtype, normalize_axis, NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Debug)]
struct TopK {
    axis: i64,
    largest: bool,
    k: ReduceAxes,
    /// The indices output (else the values).
    indices: bool,
    /// float16 / bfloat16 values, compared in float32.
    half: bool,
}

pub fn top_k(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 2)?;
    let Some(values) = node.outputs.first().and_then(Option::as_ref) else {
        return Err("TopK needs its output".into());
    };
    check_attrs(node, &["axis", "largest", "sorted"])?;
    let op = TopK {
        axis: int_attr(node, "axis", -1)?,
        largest: int_attr(node, "largest", 1)? != 0,
        k: ints_input(node, 1, "K")?,
        indices: output == 1,
        half: is_half(values.elem_type),
    };
    let t = input_type(node, 0);
    if !(data::is_number(computed(t)) && values.elem_type == t) {
        return Err(bad_types(node, "other element types"));
    }
    if output > 1 {
        return Err(format!("TopK's output {output} is not supported"));
    }
    if output == 1 && output_type(node, 1) != dtype::INT64 {
        let name = node.outputs[1].as_ref().map_or("", |v| v.name.as_str());
        let t = dtype::name(output_type(node, 1));
        return Err(format!("TopK output 1 '{name}' is {t}, expected int64"));
    }
    Ok(Arc::new(op))
}

impl Op for TopK {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        let a = normalize_axis(self.axis, s.len(), false)?;
        let k = ints_of(&self.k, || x.data(1))?;
        if s.is_empty() || k.len() != 1 || k[0] < 0 || k[0] as usize > s[a] {
            return Err(format!("K {k:?} for an axis of {}", s.get(a).copied().unwrap_or(0)).into());
        }
        let mut out = Shape::from_slice(s);
        out[a] = k[0] as usize;
        Ok(out)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let a = normalize_axis(self.axis, s.len(), false).unwrap_or(0);
        let dims = (s[..a].iter().product::<usize>(), s[a], s[a + 1..].iter().product::<usize>(), x.out_shape[a]);
        let order = &mut x.scratch.usize;
        if self.half {
            let (ins, y) = widen_all(&x.ins[..1], &mut x.scratch.f32, if self.indices { 0 } else { out.len() });
            let Data::F32(v) = ins[0] else { return Err("element types differ from the plan's".into()) };
            if self.indices {
                let DataMut::I64(ix) = out else { return Err("element types differ from the plan's".into()) };
                select(v, dims, self.largest, Out::Indices(ix), order);
                return Ok(());
            }
            select(v, dims, self.largest, Out::Values(y), order);
            return narrow(y, out);
        }
        let input = x.ins[0];
        by_number!(input, Err("element types differ from the plan's".into()), typed(self, input, dims, out, order))
    }
}

fn typed<T: Storage + PartialOrd>(
    op: &TopK,
    x: Data<'_>,
    dims: (usize, usize, usize, usize),
    out: &mut DataMut<'_>,
    order: &mut Vec<usize>,
) -> Result<(), String> {
    let x = T::get(x).ok_or("element types differ from the plan's")?;
    let out = if op.indices {
        match out {
            DataMut::I64(ix) => Out::Indices(ix),
            _ => return Err("element types differ from the plan's".into()),
        }
    } else {
        Out::Values(T::get_mut(out).ok_or("element types differ from the plan's")?)
    };
    select(x, dims, op.largest, out, order);
    Ok(())
}

enum Out<'a, T> {
    Values(&'a mut [T]),
    Indices(&'a mut [i64]),
}

/// The most values kept that TopK selects by insertion into a sorted buffer (one compare
/// with the buffer's last for most elements) rather than by `select_nth_unstable`.
const SMALL_K: usize = 32;

/// TopK of `x` (`[outer, n, inner]`, `k` kept) into values or indices; `order` holds one
/// column's order (kept across Runs).
fn select<T: Copy + PartialOrd>(
    x: &[T],
    (outer, n, inner, k): (usize, usize, usize, usize),
    largest: bool,
    mut out: Out<'_, T>,
    order: &mut Vec<usize>,
) {
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| x[(o * n + j) * inner + i];
            order.clear();
            order.extend(0..n);
            let by_value = |p: &usize, q: &usize| {
                let c = at(*p).partial_cmp(&at(*q)).unwrap_or(std::cmp::Ordering::Equal);
                if largest {
                    c.reverse()
                } else {
                    c
                }
            };
            // Without a NaN, (value, index) is a total order whose first k are the stable
            // sort's: selected in linear time, then only they sorted (a sort of all 1000
            // of a row for k = 5, once per output, took 29x ORT's time). A NaN compares
            // equal to everything, which only the stable sort's order defines.
            let comparable = k > 0 && k < n && (0..n).all(|j| at(j).partial_cmp(&at(j)).is_some());
            if comparable {
                let total = |p: &usize, q: &usize| by_value(p, q).then(p.cmp(q));
                if k <= SMALL_K {
                    // The best k so far, in order; a later index enters only ahead of
                    // one it beats (on a tie its larger index loses).
                    order[..k].sort_unstable_by(total);
                    for j in k..n {
                        if total(&j, &order[k - 1]).is_lt() {
                            let at = order[..k - 1].partition_point(|q| total(q, &j).is_lt());
                            order.copy_within(at..k - 1, at + 1);
                            order[at] = j;
                        }
                    }
                } else {
                    order.select_nth_unstable_by(k - 1, total);
                    order[..k].sort_unstable_by(total);
                }
            } else {
                // Stable sort: equal values keep the lower index first, as ORT does.
                order.sort_by(by_value);
            }
            for (r, &j) in order.iter().take(k).enumerate() {
                let to = (o * k + r) * inner + i;
                match &mut out {
                    Out::Values(v) => v[to] = at(j),
                    Out::Indices(ix) => ix[to] = j as i64,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first k of the stable sort, by the definition.
    fn reference(row: &[f32], k: usize, largest: bool) -> Vec<usize> {
        let mut order: Vec<usize> = (0..row.len()).collect();
        order.sort_by(|&p, &q| {
            let c = row[p].partial_cmp(&row[q]).unwrap_or(std::cmp::Ordering::Equal);
            if largest {
                c.reverse()
            } else {
                c
            }
        });
        order.truncate(k);
        order
    }

    /// The insertion (k <= 32) and selection (larger k) paths against the stable sort:
    /// rows with many ties and signed zeros, both directions, k from 1 to n; a row with
    /// a NaN takes the sort itself.
    #[test]
    fn selection_gives_the_stable_sort_s_first_k() {
        let n = 300;
        let rows: Vec<Vec<f32>> = vec![
            (0..n).map(|i| ((i * 7919 % 61) as f32) - 30.0).collect(),
            (0..n)
                .map(|i| {
                    if i % 3 == 0 {
                        -0.0
                    } else if i % 3 == 1 {
                        0.0
                    } else {
                        (i % 5) as f32
                    }
                })
                .collect(),
            (0..n).map(|i| (i as f32 * 0.37).sin()).collect(),
            (0..n).map(|i| if i == 17 { f32::NAN } else { (i % 13) as f32 }).collect(),
        ];
        let mut order = Vec::new();
        for row in &rows {
            for largest in [true, false] {
                for k in [1, 2, 5, 31, 32, 33, 100, n - 1, n] {
                    let mut ix = vec![-1i64; k];
                    select(row, (1, n, 1, k), largest, Out::Indices(&mut ix), &mut order);
                    let want: Vec<i64> = reference(row, k, largest).into_iter().map(|j| j as i64).collect();
                    assert_eq!(ix, want, "k {k} largest {largest}");
                }
            }
        }
    }
}
