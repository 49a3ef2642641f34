//! Unique: the distinct elements (or slices along `axis`) of a tensor, sorted or in
//! order of first occurrence, with their first indices, each input element's (slice's)
//! position among them and their counts. Four outputs, each a step of its own that
//! recomputes the grouping (in its per-Run scratch); the output shapes come from the
//! data.

use std::cmp::Ordering;
use std::sync::{Arc, Mutex};

use super::op::util::{check_attrs, check_inputs, input, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::int_attr;

#[derive(Debug)]
struct Unique {
    /// The axis (normalized at shape time), or `None`: the flattened input.
    axis: Option<i64>,
    sorted: bool,
    output: usize,
    /// Working memory of `shape` (which has no scratch of its own): kept across Runs.
    shape_work: Mutex<Vec<usize>>,
}

pub fn compile(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    check_inputs(node, 1, 1)?;
    check_attrs(node, &["axis", "sorted"])?;
    let t = input_type(node, 0);
    let number = matches!(
        t,
        dtype::FLOAT
            | dtype::DOUBLE
            | dtype::INT8
            | dtype::INT16
            | dtype::INT32
            | dtype::INT64
            | dtype::UINT8
            | dtype::UINT16
            | dtype::UINT32
            | dtype::UINT64
    );
    let want = if output == 0 { t } else { dtype::INT64 };
    if !number || output_type(node, output) != want || output > 3 {
        return Err(super::op::util::bad_types(node, "numbers (no halves, bool or strings), int64 indices"));
    }
    let axis = match node.attr("axis") {
        None => None,
        Some(_) => Some(int_attr(node, "axis", 0)?),
    };
    if let (Some(a), Some(dims)) = (axis, input(node, 0).and_then(|v| v.dims.as_ref())) {
        let r = dims.len() as i64;
        if a < -r || a >= r {
            return Err(format!("Unique axis {a} is out of range for rank {r}"));
        }
    }
    let sorted = match int_attr(node, "sorted", 1)? {
        0 => false,
        1 => true,
        s => return Err(format!("Unique sorted {s} is not 0 or 1")),
    };
    Ok(Arc::new(Unique { axis, sorted, output, shape_work: Mutex::new(Vec::new()) }))
}

/// A total order that keeps -0 and 0 equal (as `<` does) and orders NaNs by their bits.
trait Key: Copy {
    fn key_cmp(&self, other: &Self) -> Ordering;
}

macro_rules! int_key {
    ($($t:ty),*) => { $(impl Key for $t {
        fn key_cmp(&self, other: &Self) -> Ordering { self.cmp(other) }
    })* };
}
int_key!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_key {
    ($($t:ty),*) => { $(impl Key for $t {
        fn key_cmp(&self, other: &Self) -> Ordering {
            self.partial_cmp(other).unwrap_or_else(|| self.total_cmp(other))
        }
    })* };
}
float_key!(f32, f64);

/// The input as `[outer, n, inner]`: `n` slices compared along the axis.
#[derive(Clone, Copy)]
struct View {
    outer: usize,
    n: usize,
    inner: usize,
}

impl Unique {
    fn view(&self, s: &[usize]) -> Result<(View, Option<usize>), String> {
        let Some(a) = self.axis else {
            return Ok((View { outer: 1, n: s.iter().product(), inner: 1 }, None));
        };
        let r = s.len() as i64;
        if a < -r || a >= r {
            return Err(format!("axis {a} is out of range for rank {r}"));
        }
        let a = if a < 0 { a + r } else { a } as usize;
        Ok((View { outer: s[..a].iter().product(), n: s[a], inner: s[a + 1..].iter().product() }, Some(a)))
    }
}

/// Compares slices `a` and `b` of `x`.
fn slice_cmp<T: Key>(x: &[T], v: View, a: usize, b: usize) -> Ordering {
    for o in 0..v.outer {
        let base = o * v.n * v.inner;
        let (sa, sb) = (&x[base + a * v.inner..][..v.inner], &x[base + b * v.inner..][..v.inner]);
        for (p, q) in sa.iter().zip(sb) {
            let c = p.key_cmp(q);
            if c != Ordering::Equal {
                return c;
            }
        }
    }
    Ordering::Equal
}

/// Groups the `n` slices of `x`; returns the group count `g`. `w` holds six arrays of
/// `n`: the order, each slice's group id, each group's first slice and count, the group
/// ids by output position, and each group's output position.
fn group<T: Key>(x: &[T], v: View, sorted: bool, w: &mut Vec<usize>) -> usize {
    let n = v.n;
    w.clear();
    w.resize(6 * n, 0);
    let (order, rest) = w.split_at_mut(n);
    let (gid, rest) = rest.split_at_mut(n);
    let (first, rest) = rest.split_at_mut(n);
    let (count, rest) = rest.split_at_mut(n);
    let (by_pos, pos) = rest.split_at_mut(n);
    order.iter_mut().enumerate().for_each(|(i, o)| *o = i);
    order.sort_unstable_by(|&a, &b| slice_cmp(x, v, a, b).then(a.cmp(&b)));
    let mut g = 0;
    for k in 0..n {
        let i = order[k];
        let new = k == 0 || slice_cmp(x, v, order[k - 1], i) != Ordering::Equal;
        if new && k > 0 {
            g += 1;
        }
        if new {
            // Ties are ordered by index: the group's first slice.
            first[g] = i;
        }
        count[g] += 1;
        gid[i] = g;
    }
    let groups = if n == 0 { 0 } else { g + 1 };
    let by_pos = &mut by_pos[..groups];
    by_pos.iter_mut().enumerate().for_each(|(p, b)| *b = p);
    if !sorted {
        by_pos.sort_unstable_by_key(|&g| first[g]);
    }
    for (p, &g) in by_pos.iter().enumerate() {
        pos[g] = p;
    }
    groups
}

/// Groups the input's slices (of any numeric type): the group count.
macro_rules! grouped {
    ($d:expr, $v:expr, $sorted:expr, $w:expr) => {
        grouped!(@ $d, $v, $sorted, $w; F32, F64, I8, I16, I32, I64, U8, U16, U32, U64)
    };
    (@ $d:expr, $v:expr, $sorted:expr, $w:expr; $($t:ident),*) => {
        match $d {
            $(Data::$t(x) => group(x, $v, $sorted, $w),)*
            _ => return Err("Unique runs numbers".to_string().into()),
        }
    };
}

/// Writes the unique slices, by output position, into `y` (`[outer, g, inner]`).
fn write_values<T: Key>(x: &[T], v: View, g: usize, w: &[usize], y: &mut [T]) {
    let n = v.n;
    let (first, by_pos) = (&w[2 * n..3 * n], &w[4 * n..4 * n + g]);
    for o in 0..v.outer {
        for (p, &gr) in by_pos.iter().enumerate() {
            let src = &x[(o * n + first[gr]) * v.inner..][..v.inner];
            y[(o * g + p) * v.inner..][..v.inner].copy_from_slice(src);
        }
    }
}

impl Op for Unique {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        let s = x.shapes[0];
        let (v, axis) = self.view(s)?;
        if self.output == 2 {
            return Ok(Shape::from_slice(&[v.n]));
        }
        let d = x.data(0)?;
        let mut w = self.shape_work.lock().unwrap_or_else(|e| e.into_inner());
        let g = grouped!(d, v, self.sorted, &mut w);
        Ok(match (self.output, axis) {
            (0, Some(a)) => s.iter().enumerate().map(|(k, &d)| if k == a { g } else { d }).collect(),
            _ => Shape::from_slice(&[g]),
        })
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (v, _) = self.view(x.shapes[0])?;
        let w = &mut x.scratch.usize;
        let g = grouped!(x.ins[0], v, self.sorted, w);
        let n = v.n;
        if self.output == 0 {
            macro_rules! values {
                ($($t:ident),*) => {
                    match (x.ins[0], out) {
                        $((Data::$t(d), DataMut::$t(y)) => write_values(d, v, g, w, y),)*
                        _ => return Err("input and output element types differ from the plan's".into()),
                    }
                };
            }
            values!(F32, F64, I8, I16, I32, I64, U8, U16, U32, U64);
            return Ok(());
        }
        let DataMut::I64(y) = out else { return Err("Unique's index outputs are int64".into()) };
        let (gid, first, count) = (&w[n..2 * n], &w[2 * n..3 * n], &w[3 * n..4 * n]);
        let (by_pos, pos) = (&w[4 * n..4 * n + g], &w[5 * n..6 * n]);
        match self.output {
            1 => y.iter_mut().zip(by_pos).for_each(|(o, &gr)| *o = first[gr] as i64),
            2 => y.iter_mut().zip(gid).for_each(|(o, &gr)| *o = pos[gr] as i64),
            _ => y.iter_mut().zip(by_pos).for_each(|(o, &gr)| *o = count[gr] as i64),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups(x: &[f32], sorted: bool) -> (usize, Vec<usize>) {
        let mut w = Vec::new();
        let g = group(x, View { outer: 1, n: x.len(), inner: 1 }, sorted, &mut w);
        (g, w)
    }

    #[test]
    fn sorted_and_first_occurrence_orders_follow_the_onnx_example() {
        // x = [2, 1, 1, 3, 4, 3]: sorted uniques [1, 2, 3, 4], unsorted [2, 1, 3, 4].
        let x = [2.0, 1.0, 1.0, 3.0, 4.0, 3.0];
        let n = x.len();
        for (sorted, values, first, inverse, counts) in [
            (true, [1.0, 2.0, 3.0, 4.0], [1, 0, 3, 4], [1, 0, 0, 2, 3, 2], [2, 1, 2, 1]),
            (false, [2.0, 1.0, 3.0, 4.0], [0, 1, 3, 4], [0, 1, 1, 2, 3, 2], [1, 2, 2, 1]),
        ] {
            let (g, w) = groups(&x, sorted);
            assert_eq!(g, 4);
            let mut y = [0.0; 4];
            write_values(&x, View { outer: 1, n, inner: 1 }, g, &w, &mut y);
            assert_eq!(y, values);
            let by_pos = &w[4 * n..4 * n + g];
            let got_first: Vec<usize> = by_pos.iter().map(|&gr| w[2 * n + gr]).collect();
            let got_counts: Vec<usize> = by_pos.iter().map(|&gr| w[3 * n + gr]).collect();
            let got_inverse: Vec<usize> = (0..n).map(|i| w[5 * n + w[n + i]]).collect();
            assert_eq!((got_first, got_inverse, got_counts), (first.to_vec(), inverse.to_vec(), counts.to_vec()));
        }
    }

    #[test]
    fn negative_zero_equals_zero_and_nans_do_not_break_the_sort() {
        let (g, _) = groups(&[0.0, -0.0, f32::NAN, 1.0, f32::NAN], true);
        assert_eq!(g, 3);
    }
}
