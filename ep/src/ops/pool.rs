//! MaxPool and AveragePool on 1-D, 2-D and 3-D inputs: float32 (split over the pool by
//! planes when large), MaxPool also on integers, and MaxPool's Indices output (int64,
//! flattened over the whole input; `storage_order` 1 counts down columns first).

use std::sync::Arc;

use rivet_kernels::conv::{self, Window3d};

use super::claim::{bad_types, exact_inputs, extra_output, outputs, unsupported_output};
use super::geometry::{spatial, window_3d, windowed, within_limit};
use super::op::util::check_attrs;
use super::params::{window, Window};
use super::{Op, OpRef, RunIn, ShapeError, ShapeIn};
use crate::data::{self, Data, DataMut, Storage};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::int_attr;
use crate::parallel::{by_planes, Parallel};

const MAX_ATTRS: &[&str] = &["auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"];
const AVERAGE_ATTRS: &[&str] =
    &["auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"];

/// MaxPool's or AveragePool's output.
#[derive(Clone, Debug)]
struct Pool {
    window: Window,
    max: bool,
    count_pad: bool,
    /// An 8-bit MaxPool's input and output stored channels last
    /// (`passes::channels_last_int8`): the planes are pooled as stored channels first, the
    /// input relaid into them and the output from them.
    cl: [bool; 2],
}

/// MaxPool's Indices output.
#[derive(Debug)]
struct PoolIndices {
    window: Window,
    /// `storage_order` 1: indices within a plane count down columns first.
    column_major: bool,
}

pub fn max_pool(node: &NodeDesc, output: usize) -> Result<Arc<dyn Op>, String> {
    exact_inputs(node, 1)?;
    outputs(node, true)?;
    check_attrs(node, MAX_ATTRS)?;
    let window = window(node, true)?;
    let (t, out) = (elem_type(node, true, 0), elem_type(node, false, 0));
    let ok = if is_int(out) {
        t == out
    } else if t == dtype::FLOAT && out == dtype::FLOAT {
        true
    } else {
        return Err(bad_types(node, "float32 only"));
    };
    if !ok {
        return Err(bad_types(node, "other element types"));
    }
    if output == 0 {
        return Ok(Arc::new(Pool { window, max: true, count_pad: false, cl: [false; 2] }));
    }
    if t != dtype::FLOAT {
        return Err(unsupported_output(node, output));
    }
    extra_output(node, output, dtype::INT64)?;
    let column_major = int_attr(node, "storage_order", 0)? == 1;
    Ok(Arc::new(PoolIndices { window, column_major }))
}

pub fn average_pool(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    exact_inputs(node, 1)?;
    outputs(node, false)?;
    check_attrs(node, AVERAGE_ATTRS)?;
    let count_pad = int_attr(node, "count_include_pad", 0)? != 0;
    let window = window(node, true)?;
    if !(elem_type(node, true, 0) == dtype::FLOAT && elem_type(node, false, 0) == dtype::FLOAT) {
        return Err(bad_types(node, "float32 only"));
    }
    Ok(Arc::new(Pool { window, max: false, count_pad, cl: [false; 2] }))
}

/// Input `k`'s (or output `k`'s) element type.
fn elem_type(node: &NodeDesc, input: bool, k: usize) -> i32 {
    let values = if input { &node.inputs } else { &node.outputs };
    values.get(k).and_then(Option::as_ref).map_or(0, |v| v.elem_type)
}

fn is_int(t: i32) -> bool {
    data::is_number(t) && !matches!(t, dtype::FLOAT | dtype::DOUBLE)
}

/// The window's geometry on input `s` and the padding after each axis.
fn geometry(window: &Window, s: &[usize]) -> Result<(Window3d, [usize; 3]), String> {
    if !(3..=5).contains(&s.len()) {
        return Err("needs [N, C] and 1 to 3 spatial axes".into());
    }
    window_3d(window, spatial(s), window.kernel)
}

fn shape(window: &Window, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
    let s = x.shapes[0];
    let (g, _) = geometry(window, s)?;
    Ok(within_limit(windowed(s, s[1], g.out))?)
}

impl Op for Pool {
    fn halves_in_f32(&self) -> bool {
        true
    }

    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        shape(&self.window, x)
    }

    /// An 8-bit 2-D MaxPool takes either layout on its input and output: ResNet-18's pool
    /// sits between its stem (channels first) and the first stage's convolution and
    /// addition (channels last), and its output channels last saves the convolution's
    /// transpose and the addition's relay of it for one transpose here.
    fn channels_last_use(&self, shapes: &[&[usize]], out: &[usize]) -> Option<bool> {
        (self.max && out.len() == 4 && shapes.first()?.len() == 4).then_some(false)
    }

    fn channels_last_inputs(&self) -> u32 {
        1
    }

    fn with_channels_last(&self, inputs: u32, output: bool) -> Option<OpRef> {
        Some(OpRef(Arc::new(Pool { cl: [inputs & 1 != 0, output], ..self.clone() })))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let s = x.shapes[0];
        let (g, pad_end) = geometry(&self.window, s)?;
        let planes = s[0] * s[1];
        if self.cl != [false; 2] {
            let images = (s[0], s[1], s[2..].iter().product(), g.positions());
            return match (x.ins[0], out) {
                (Data::U8(input), DataMut::U8(y)) => relaid(input, images, &g, y, self.cl, x.scratch.state()),
                (Data::I8(input), DataMut::I8(y)) => relaid(input, images, &g, y, self.cl, x.scratch.state()),
                _ => Err("a channels-last MaxPool of other than 8-bit integers".into()),
            };
        }
        match (x.ins[0], out) {
            (Data::F32(input), DataMut::F32(y)) => {
                let mode = if self.max { conv::Pool::Max } else { conv::Pool::Average { count_pad: self.count_pad } };
                pool(input, planes, &g, mode, pad_end, y, x.par);
                Ok(())
            }
            (input, DataMut::I8(y)) => small_integers(input, planes, &g, y, x.scratch.state()),
            (input, DataMut::I16(y)) => small_integers(input, planes, &g, y, x.scratch.state()),
            (input, DataMut::I32(y)) => integers(input, planes, &g, y),
            (input, DataMut::I64(y)) => integers(input, planes, &g, y),
            (input, DataMut::U8(y)) => small_integers(input, planes, &g, y, x.scratch.state()),
            (input, DataMut::U16(y)) => small_integers(input, planes, &g, y, x.scratch.state()),
            (input, DataMut::U32(y)) => integers(input, planes, &g, y),
            (input, DataMut::U64(y)) => integers(input, planes, &g, y),
            _ => Err("element types differ from the plan's".into()),
        }
    }
}

/// Pools `planes` planes, split over the pool by planes when the input is large.
fn pool(
    x: &[f32],
    planes: usize,
    g: &Window3d,
    mode: conv::Pool,
    pad_end: [usize; 3],
    y: &mut [f32],
    par: &dyn Parallel,
) {
    by_planes(x, y, planes, (g.plane(), g.positions()), par, &|mine, x, y| {
        conv::pool(x, mine.len(), g, mode, pad_end, y);
    });
}

/// MaxPool on integers of up to 16 bits (a quantized model's uint8 max pool, which
/// `fuse_qdq` leaves between its quantized convolutions): the kernel's vectorised rows (the
/// integer loop below took 7.5 ms for ResNet-18's 64 planes of 112x112).
fn small_integers<T: Storage + rivet_kernels::qgemm::QInt + Ord>(
    x: Data<'_>,
    planes: usize,
    g: &Window3d,
    y: &mut [T],
    row: &mut Vec<T>,
) -> Result<(), String> {
    let x = T::get(x).ok_or("element types differ from the plan's")?;
    rivet_kernels::conv::max_pool_ints(x, planes, g, y, row);
    Ok(())
}

/// An 8-bit MaxPool's working memory when its data is stored channels last: the
/// kernel's row, and the input and output as planes.
#[derive(Default)]
struct Relaid<T> {
    row: Vec<T>,
    x: Vec<T>,
    y: Vec<T>,
}

/// [`small_integers`] on `n` images of `c` channels of `plane` inputs and `positions`
/// outputs, the input stored channels last when `cl[0]` and the output when `cl[1]`.
fn relaid<T: rivet_kernels::qgemm::Q8 + rivet_kernels::qgemm::QInt + Ord>(
    x: &[T],
    (n, c, plane, positions): (usize, usize, usize, usize),
    g: &Window3d,
    y: &mut [T],
    cl: [bool; 2],
    s: &mut Relaid<T>,
) -> Result<(), String> {
    if x.len() != n * c * plane || y.len() != n * c * positions {
        return Err("input or output lengths differ from the shapes".into());
    }
    let Relaid { row, x: xs, y: ys } = s;
    let x = if cl[0] {
        xs.resize(x.len(), T::from_i32(0));
        for (src, dst) in x.chunks_exact(c * plane).zip(xs.chunks_exact_mut(c * plane)) {
            rivet_kernels::qgemm::from_channels_last(src, c, plane, dst);
        }
        &xs[..]
    } else {
        x
    };
    if !cl[1] {
        rivet_kernels::conv::max_pool_ints(x, n * c, g, y, row);
        return Ok(());
    }
    ys.resize(y.len(), T::from_i32(0));
    rivet_kernels::conv::max_pool_ints(x, n * c, g, ys, row);
    for (src, dst) in ys.chunks_exact(c * positions).zip(y.chunks_exact_mut(c * positions)) {
        rivet_kernels::qgemm::to_channels_last(src, c, positions, dst);
    }
    Ok(())
}

/// MaxPool on integers (the output's type; the input's must be the same).
fn integers<T: Storage + PartialOrd>(x: Data<'_>, planes: usize, g: &Window3d, y: &mut [T]) -> Result<(), String> {
    let x = T::get(x).ok_or("element types differ from the plan's")?;
    conv::max_pool(x, planes, g, y);
    Ok(())
}

impl Op for PoolIndices {
    fn halves_in_f32(&self) -> bool {
        true
    }

    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        shape(&self.window, x)
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let (DataMut::I64(y), Data::F32(input)) = (out, x.ins[0]) else {
            return Err("element types differ from the plan's".into());
        };
        let s = x.shapes[0];
        let (g, _) = geometry(&self.window, s)?;
        conv::max_pool_indices(input, s[0] * s[1], &g, self.column_major, y);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::graph::{dtype, AttrValue, NodeDesc, ValueDesc};
    use crate::ops::op::{claim, lookup};

    fn node(op: &str, version: i32, types: &[i32], outputs: &[i32], attrs: Vec<(String, AttrValue)>) -> NodeDesc {
        let v = |name: String, t: i32| Some(ValueDesc { name, elem_type: t, ..Default::default() });
        NodeDesc {
            name: "n".into(),
            op_type: op.into(),
            domain: String::new(),
            since_version: version,
            inputs: types.iter().enumerate().map(|(i, &t)| v(format!("i{i}"), t)).collect(),
            outputs: outputs.iter().enumerate().map(|(i, &t)| v(format!("o{i}"), t)).collect(),
            attrs,
        }
    }

    /// The families moved from the registry's table resolve at their lowest and highest
    /// versions (as the table's test checked them there), and say why they do not.
    #[test]
    fn the_moved_families_claim_what_the_table_claimed() {
        let f = dtype::FLOAT;
        let ok = |n: &NodeDesc| claim(lookup("", &n.op_type).expect("a family"), n);
        for (op, lo, hi, ins) in [
            ("GlobalAveragePool", 1, 22, 1),
            ("GlobalMaxPool", 1, 22, 1),
            ("Attention", 23, 24, 3),
            ("RotaryEmbedding", 23, 23, 3),
        ] {
            for v in [lo, hi] {
                let n = node(op, v, &vec![f; ins], &[f], vec![]);
                assert!(ok(&n).is_ok(), "{op} v{v}: {:?}", ok(&n));
            }
            let out_of_range = node(op, lo - 1, &vec![f; ins], &[f], vec![]);
            assert!(ok(&out_of_range).unwrap_err().contains("outside the supported"), "{op}");
        }
        let pool = |op: &str, t: i32, outs: &[i32]| {
            let k = vec![("kernel_shape".into(), AttrValue::Ints(vec![2, 2]))];
            let mut n = node(op, 12, &[t], outs, k);
            n.inputs[0].as_mut().unwrap().dims = Some(std::iter::repeat_n(crate::graph::Dim::Fixed(1), 4).collect());
            ok(&n)
        };
        assert_eq!(pool("MaxPool", f, &[f, dtype::INT64]).map(|o| o.len()), Ok(2));
        assert_eq!(pool("MaxPool", dtype::UINT8, &[dtype::UINT8]).map(|o| o.len()), Ok(1));
        assert!(pool("MaxPool", dtype::UINT8, &[dtype::UINT8, dtype::INT64]).unwrap_err().contains("output 1"));
        assert!(pool("MaxPool", f, &[f, f]).unwrap_err().contains("expected int64"));
        assert!(pool("AveragePool", f, &[f, dtype::INT64]).unwrap_err().contains("exactly one output"));
        assert!(pool("AveragePool", dtype::DOUBLE, &[dtype::DOUBLE]).unwrap_err().contains("float32 only"));
        let no_y = node("MaxPool", 12, &[f], &[f, dtype::INT64], vec![]);
        let no_y = NodeDesc { outputs: vec![None, no_y.outputs[1].clone()], ..no_y };
        assert!(ok(&no_y).unwrap_err().contains("needs its output"));
        let two = node("GlobalMaxPool", 22, &[f, f], &[f], vec![]);
        assert!(ok(&two).unwrap_err().contains("exactly 1 inputs"));
        let present = node("Attention", 23, &[f; 3], &[f, f], vec![]);
        assert!(ok(&present).unwrap_err().contains("need past key and value"));
    }

    /// A float16 node of ops run in float32 (`Op::halves_in_f32`) lowers to casts of its
    /// half inputs, its op on float32 for each output, and a cast back of each half one.
    #[test]
    fn half_nodes_of_a_float32_family_run_between_casts() {
        use crate::graph::{Dim, GraphDesc};
        use crate::registry::Kernel;
        let h = dtype::FLOAT16;
        let d = |n: &[usize]| Some(n.iter().map(|&x| Dim::Fixed(x)).collect());
        let v = |name: &str, dims: &[usize]| ValueDesc {
            name: name.into(),
            elem_type: h,
            dims: d(dims),
            ..Default::default()
        };
        let ins = [
            v("q", &[1, 2, 3, 4]),
            v("k", &[1, 2, 3, 4]),
            v("v", &[1, 2, 3, 4]),
            v("pk", &[1, 2, 1, 4]),
            v("pv", &[1, 2, 1, 4]),
        ];
        let outs = [v("y", &[1, 2, 3, 4]), v("k2", &[1, 2, 4, 4]), v("v2", &[1, 2, 4, 4])];
        let mut n = node("Attention", 23, &[], &[], vec![]);
        let [q, k, v, pk, pv] = ins.clone().map(Some);
        n.inputs = vec![q, k, v, None, pk, pv];
        n.outputs = outs.iter().cloned().map(Some).collect();
        let claim = crate::registry::kernel_for(&n).expect("claimed");
        assert_eq!((claim.half, claim.ops.len()), (Some(h), 3));
        let g = GraphDesc {
            nodes: vec![n],
            inputs: ins.to_vec(),
            constant_inputs: vec![],
            outputs: outs.to_vec(),
            constants: vec![],
        };
        let plan = crate::plan::passes::lower::run("p", &g).unwrap();
        let kinds: Vec<(bool, i32)> =
            plan.steps.iter().map(|s| (s.op.is_some(), plan.values[s.output].elem_type)).collect();
        let (op, cast_f32, cast_back) = ((true, dtype::FLOAT), (false, dtype::FLOAT), (false, h));
        let want = [[cast_f32; 5].as_slice(), &[op, cast_back, op, cast_back, op, cast_back]].concat();
        assert_eq!(kinds, want);
        assert!(plan.steps.iter().filter(|s| s.op.is_none()).all(|s| matches!(s.kernel, Kernel::Cast { .. })));
        let written: Vec<&str> = plan.outputs.iter().map(|&o| plan.values[o].name.as_str()).collect();
        assert_eq!(written, ["y", "k2", "v2"]);
        // Without `halves_in_f32`, a half node stays unclaimed (LpPool runs float32 only).
        let mut lp = node("LpPool", 18, &[h], &[h], vec![("kernel_shape".into(), AttrValue::Ints(vec![2]))]);
        lp.inputs[0].as_mut().unwrap().dims = d(&[1, 1, 4]);
        assert!(crate::registry::kernel_for(&lp).unwrap_err().contains("float16"));
    }
}
