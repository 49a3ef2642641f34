//! com.microsoft QLinearAdd: `C = quantize(dequantize(A) + dequantize(B))`, uint8 or int8
//! (all three of one type), per-tensor scales (float32) and zero points, numpy
//! broadcasting.
//!
//! The arithmetic is that of the three ONNX ops it stands for, element by element:
//! `(a - za) · sa + (b - zb) · sb` in float32, then `round_half_even(sum / sc) + zc`
//! clamped. So a `DequantizeLinear, DequantizeLinear -> Add -> QuantizeLinear` group that
//! `fuse_qdq` turns into this op gives the bits the group gave; ORT's own kernel scales
//! each input by `s / sc` instead and can differ by one step where a sum lands on a half.
//! Equal shapes run in one pass (no float tensor in between), dividing by C's scale as a
//! product by its reciprocal corrected once where that was checked, at the first Run with
//! these scales, to give every output the division gives (`qgemm::add_reciprocal`: it
//! tries all 65,536 pairs of inputs); broadcasting dequantizes both inputs whole first.

use std::sync::Arc;

use rivet_kernels::qgemm::{self, QInt};
use rivet_kernels::{binary_f32, BinaryOp, Broadcast, BroadcastKind};

use super::super::elementwise::broadcast_shape;
use super::super::op::util::{bad_types, check_attrs, check_inputs, input, input_type, output_type};
use super::super::{Op, OpRef, RunIn, ShapeError, ShapeIn};
use super::{is_q8, scalar_float, scalar_int, slots};
use crate::data::{Data, DataMut};
use crate::graph::dtype::FLOAT;
use crate::graph::{NodeDesc, Shape};

#[derive(Clone, Debug)]
struct QLinearAdd {
    /// Where each of the node's inputs is among a Run's (an absent zero point moves the
    /// later inputs down: read from fixed positions, B would be A's scale. ORT's own
    /// type inference refuses such a node today, but the schema allows it).
    at: [Option<usize>; 8],
    /// A, B and C stored channels last (`passes::channels_last_int8`; equal shapes only).
    cl: [bool; 3],
}

pub fn qlinear_add(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    check_attrs(node, &[])?;
    check_inputs(node, 7, 8)?;
    let t = input_type(node, 0);
    let zero_ok = |k: usize| input(node, k).is_none() || input_type(node, k) == t;
    let ok = is_q8(t)
        && input_type(node, 3) == t
        && output_type(node, 0) == t
        && [1, 4, 6].into_iter().all(|k| input_type(node, k) == FLOAT)
        && [2, 5, 7].into_iter().all(zero_ok);
    if !ok {
        return Err(bad_types(
            node,
            "uint8 or int8 (all of one type) with float32 scales and zero points of that type",
        ));
    }
    Ok(Arc::new(QLinearAdd { at: slots::<8>(node), cl: [false; 3] }))
}

/// The scratch of a broadcast addition: both inputs and the sum, as floats; and the
/// reciprocal of C's scale for equal shapes (`qgemm::add_reciprocal`).
#[derive(Default)]
struct Floats {
    a: Vec<f32>,
    b: Vec<f32>,
    sum: Vec<f32>,
    recip: Reciprocal,
    /// Inputs A and B in the other layout than C's, relaid (`QLinearAdd::cl`).
    relaid: [Vec<u8>; 2],
    relaid_i8: [Vec<i8>; 2],
}

/// `qgemm::add_reciprocal` for the last scales and zero points seen (their bits), made
/// again when they change, up to [`Reciprocal::MOST`] times (scales that change on every
/// Run then divide, rather than pay the check each Run).
#[derive(Default)]
struct Reciprocal {
    key: Option<[u32; 6]>,
    value: Option<f32>,
    made: u32,
}

impl Reciprocal {
    const MOST: u32 = 4;

    fn of<T: QInt>(&mut self, p: [(f32, i32); 3]) -> Option<f32> {
        let key = p.map(|(s, z)| [s.to_bits(), z as u32]).as_flattened().try_into().expect("six values");
        if self.key != Some(key) {
            self.value = None;
            if self.made < Self::MOST {
                self.made += 1;
                self.key = Some(key);
                self.value = qgemm::add_reciprocal::<T>(p[0], p[1], p[2]);
            }
        }
        self.value
    }
}

impl Op for QLinearAdd {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        for k in [1, 2, 4, 5, 6, 7] {
            let s = self.at[k].map(|i| x.shapes[i]);
            if let Some(s) = s.filter(|s| s.len() > 1 || s.iter().product::<usize>() != 1) {
                return Err(ShapeError::Invalid(format!(
                    "input {k}: a scale or zero point must be one value, has shape {s:?}"
                )));
            }
        }
        let (a, b) = (self.at[0].unwrap_or(0), self.at[3].unwrap_or(0));
        broadcast_shape(&[x.shapes[a], x.shapes[b]])
    }

    fn channels_last_use(&self, shapes: &[&[usize]], out: &[usize]) -> Option<bool> {
        let (a, b) = (self.at[0]?, self.at[3]?);
        (out.len() == 4 && *shapes.get(a)? == out && *shapes.get(b)? == out).then_some(false)
    }

    fn channels_last_inputs(&self) -> u32 {
        self.at[0].map_or(0, |a| 1 << a) | self.at[3].map_or(0, |b| 1 << b)
    }

    fn with_channels_last(&self, inputs: u32, output: bool) -> Option<OpRef> {
        let on = |k: usize| self.at[k].is_some_and(|i| inputs & (1 << i) != 0);
        Some(OpRef(Arc::new(QLinearAdd { cl: [on(0), on(3), output], ..self.clone() })))
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let at = |k: usize| self.at[k].ok_or_else(|| format!("input {k} is missing"));
        let zero = |k: usize, what: &str| {
            let i = self.at[k];
            scalar_int(i.map(|i| x.ins[i]), i.map(|i| x.shapes[i]), what)
        };
        let scale =
            |k: usize, what: &str| -> Result<f32, String> { scalar_float(x.ins[at(k)?], x.shapes[at(k)?], what) };
        let a = (scale(1, "A's scale")?, zero(2, "A's zero point")?);
        let b = (scale(4, "B's scale")?, zero(5, "B's zero point")?);
        let c = (scale(6, "C's scale")?, zero(7, "C's zero point")?);
        let (ia, ib) = (at(0)?, at(3)?);
        let plan = Broadcast::new(x.shapes[ia], x.shapes[ib]).map_err(|e| format!("input 3: {e}"))?;
        let floats = x.scratch.state::<Floats>();
        // An input stored in the other layout than C is relaid into C's first (the plan
        // marks only equal `[N, C, H, W]` shapes).
        let [cl_a, cl_b, cl_c] = self.cl;
        let relay = cl_a != cl_c || cl_b != cl_c;
        let s = x.shapes[ia];
        if relay && (s.len() != 4 || x.shapes[ib] != s || x.out_shape != s) {
            return Err(format!("inputs of shapes {s:?} and {:?} stored in different layouts", x.shapes[ib]));
        }
        let (img, ch, plane) = if relay { (s[1] * s[2] * s[3], s[1], s[2] * s[3]) } else { (0, 0, 0) };
        let dims = (img, ch, plane);
        match (x.ins[ia], x.ins[ib], out) {
            (Data::U8(xa), Data::U8(xb), DataMut::U8(y)) => {
                let [mut ta, mut tb] = std::mem::take(&mut floats.relaid);
                let (xa, xb) = (in_layout(xa, &mut ta, cl_a, cl_c, dims), in_layout(xb, &mut tb, cl_b, cl_c, dims));
                let r = add(xa, xb, y, &plan, [a, b, c], floats);
                floats.relaid = [ta, tb];
                r
            }
            (Data::I8(xa), Data::I8(xb), DataMut::I8(y)) => {
                let [mut ta, mut tb] = std::mem::take(&mut floats.relaid_i8);
                let (xa, xb) = (in_layout(xa, &mut ta, cl_a, cl_c, dims), in_layout(xb, &mut tb, cl_b, cl_c, dims));
                let r = add(xa, xb, y, &plan, [a, b, c], floats);
                floats.relaid_i8 = [ta, tb];
                r
            }
            _ => Err("element types differ from the plan's".into()),
        }
    }
}

/// Input `v` (channels last when `last`) in the output's layout (channels last when
/// `to_last`): itself, or relaid into `buf`, image by image (`img` elements of `ch`
/// channels of `plane` positions).
fn in_layout<'a, T: qgemm::Q8>(
    v: &'a [T],
    buf: &'a mut Vec<T>,
    last: bool,
    to_last: bool,
    (img, ch, plane): (usize, usize, usize),
) -> &'a [T] {
    if last == to_last {
        return v;
    }
    buf.resize(v.len(), T::from_i32(0));
    for (src, dst) in v.chunks(img.max(1)).zip(buf.chunks_mut(img.max(1))) {
        if to_last {
            qgemm::to_channels_last(src, ch, plane, dst);
        } else {
            qgemm::from_channels_last(src, ch, plane, dst);
        }
    }
    buf
}

/// `y = quantize(dequantize(xa) + dequantize(xb))` with `(scale, zero point)` of A, B and
/// C in `p`.
fn add<T: QInt>(
    xa: &[T],
    xb: &[T],
    y: &mut [T],
    plan: &Broadcast,
    p: [(f32, i32); 3],
    floats: &mut Floats,
) -> Result<(), String> {
    let [(sa, za), (sb, zb), (sc, zc)] = p;
    if y.len() != plan.out_len() {
        return Err(format!("the output holds {} elements, the inputs broadcast to {}", y.len(), plan.out_len()));
    }
    let Floats { a, b, sum, recip, .. } = floats;
    if plan.kind() == BroadcastKind::SameShape {
        let recip = recip.of::<T>(p);
        // One pass (the same bits as the three ops': ResNet-18's 64 x 56 x 56 adds took
        // about 100 us as three passes, the sum's outside the widest build).
        qgemm::add_requantize(xa, xb, (sa, za), (sb, zb), (sc, zc), recip, y);
        return Ok(());
    }
    a.resize(xa.len(), 0.0);
    b.resize(xb.len(), 0.0);
    sum.resize(y.len(), 0.0);
    qgemm::dequantize(xa, sa, za, a);
    qgemm::dequantize(xb, sb, zb, b);
    binary_f32(BinaryOp::Add, plan, a, b, sum, 0);
    qgemm::quantize(sum, sc, zc, y);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Reciprocal;

    #[test]
    fn the_reciprocal_follows_the_scales_and_stops_after_a_few() {
        let mut r = Reciprocal::default();
        let p = |sy: f32| [(0.02, 3), (0.03, 130), (sy, 7)];
        for _ in 0..3 {
            assert_eq!(r.of::<u8>(p(0.25)), Some(4.0));
        }
        assert_eq!(r.of::<u8>(p(0.5)), Some(2.0), "new scales: made again");
        assert_eq!(r.of::<i8>([(0.02, 3), (0.03, -100), (0.125, 7)]), Some(8.0));
        assert_eq!(r.of::<u8>(p(0.25)), Some(4.0));
        // The fifth change: divided from then on, never a reciprocal of other scales.
        assert_eq!(r.of::<u8>(p(1.0)), None);
        assert_eq!(r.of::<u8>(p(0.25)), None);
    }
}
