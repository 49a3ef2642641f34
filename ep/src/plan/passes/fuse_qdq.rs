//! QDQ fusion, on the graph before lowering: each `DequantizeLinear -> Conv ->
//! QuantizeLinear` group of a statically quantized model becomes one QLinearConv node
//! (and a `DequantizeLinear -> Gemm -> QuantizeLinear` one a com.microsoft QGemm, see
//! `ConvGroup::gemm_node`),
//! which runs on the integer kernels (`qgemm`) instead of dequantizing the input and the
//! weights to float, convolving in float and quantizing the result.
//!
//! The group is one ORT 1.32's own QDQ transformer turns into QLinearConv on its CPU EP,
//! with the same result: the input's and weights' quantized data and parameters become
//! the fused node's, the bias's int32 data (its DequantizeLinear's input) its bias, and the
//! QuantizeLinear's parameters its output's. ORT fuses fewer groups than the format
//! allows, and a group it leaves in float gives other values, so a group is fused only
//! when:
//! - the input and output are uint8 and per tensor, the weights uint8 or int8, per tensor
//!   or per output channel (axis 0), no blocks;
//! - every scale and zero point is a constant initializer, read with the graph (the ABI
//!   reads QuantizeLinear's and DequantizeLinear's parameters up to 16384 elements: a
//!   convolution of more output channels stays float);
//! - the bias, if any, is int32 with zero point 0 and scale `x_scale · w_scale` exactly
//!   (per channel, a single value on either side broadcast), all known at Compile. (ORT
//!   1.32 also fuses a bias scale a little off that product, up to about 1.5%: such a
//!   group, which ORT's quantizer never writes, stays float here and rounds differently.);
//! - the DequantizeLinear outputs and the Conv's output are read by the group alone (ORT
//!   gives each reader its own DequantizeLinear) and are not graph outputs;
//! - the CPU has AVX-512 VNNI (without it the integer kernel is slower than the float
//!   convolution, and the float reading is kept);
//! - QLinearConv compiles for the node (types and attributes).
//!
//! Absent zero points become constants of 0 of their type.

use std::collections::HashMap;

use crate::data::{dtype, Buf};
use crate::graph::{ConstDesc, Constant, Dim, GraphDesc, NodeDesc, Shape, ValueDesc};

/// Whether this CPU fuses groups (it has AVX-512 VNNI).
pub fn enabled() -> bool {
    rivet_kernels::qgemm::vnni_supported()
}

/// The graph with every fusable group replaced, or `None` when nothing is fused.
pub fn run(graph: &GraphDesc) -> Option<GraphDesc> {
    if !enabled() {
        return None;
    }
    fuse(graph)
}

/// [`run`] on any CPU (the integer kernels are exact everywhere; only their speed needs
/// VNNI).
pub(crate) fn fuse(graph: &GraphDesc) -> Option<GraphDesc> {
    let ix = Index::new(graph);
    let mut out = graph.clone();
    let mut removed = vec![false; graph.nodes.len()];
    let mut fused_any = false;
    for (i, node) in graph.nodes.iter().enumerate() {
        if !onnx_domain(node) {
            continue;
        }
        let (fused, absorbed): (NodeDesc, Vec<usize>) = match node.op_type.as_str() {
            "Conv" => {
                let Some(group) = conv_group(&ix, i) else { continue };
                let Some(fused) = group.node(&ix, &mut out.constants) else { continue };
                (fused, group.absorbed().collect())
            }
            "Gemm" => {
                let Some(group) = conv_group(&ix, i) else { continue };
                let Some(fused) = group.gemm_node(&ix, &mut out.constants) else { continue };
                (fused, group.absorbed().collect())
            }
            "Add" | "MaxPool" => {
                let Some(group) = elementwise_group(&ix, i, &mut out.constants) else { continue };
                (group.0, group.1)
            }
            _ => continue,
        };
        if crate::registry::kernel_for(&fused).is_err() {
            continue;
        }
        out.nodes[i] = fused;
        for n in absorbed {
            removed[n] = true;
        }
        fused_any = true;
    }
    if !fused_any {
        return None;
    }
    let mut keep = removed.iter().map(|&r| !r);
    out.nodes.retain(|_| keep.next().unwrap_or(true));
    Some(out)
}

fn onnx_domain(node: &NodeDesc) -> bool {
    matches!(node.domain.as_str(), "" | "ai.onnx")
}

/// Who produces and who reads each value of the graph.
struct Index<'g> {
    graph: &'g GraphDesc,
    producer: HashMap<&'g str, usize>,
    readers: HashMap<&'g str, Vec<usize>>,
    outputs: Vec<&'g str>,
}

impl<'g> Index<'g> {
    fn new(graph: &'g GraphDesc) -> Index<'g> {
        let (mut producer, mut readers) = (HashMap::new(), HashMap::<&str, Vec<usize>>::new());
        for (i, node) in graph.nodes.iter().enumerate() {
            for v in node.outputs.iter().flatten() {
                producer.insert(v.name.as_str(), i);
            }
            for v in node.inputs.iter().flatten() {
                readers.entry(v.name.as_str()).or_default().push(i);
            }
        }
        let outputs = graph.outputs.iter().map(|v| v.name.as_str()).collect();
        Index { graph, producer, readers, outputs }
    }

    fn node(&self, i: usize) -> &'g NodeDesc {
        &self.graph.nodes[i]
    }

    /// The DequantizeLinear (of the ONNX domain) producing `v`, read by `reader` alone
    /// and not a graph output.
    fn sole_dq(&self, v: &ValueDesc, reader: usize) -> Option<usize> {
        let p = *self.producer.get(v.name.as_str())?;
        let node = self.node(p);
        (node.op_type == "DequantizeLinear" && onnx_domain(node) && self.only_for(&v.name, reader)).then_some(p)
    }

    /// Whether `v` is read by node `reader` alone, once, and is not a graph output.
    fn only_for(&self, v: &str, reader: usize) -> bool {
        self.readers.get(v).is_some_and(|r| r == &[reader]) && !self.outputs.contains(&v)
    }

    /// Whether `v` is a graph input or constant (no node computes it).
    fn is_leaf(&self, v: &ValueDesc) -> bool {
        !self.producer.contains_key(v.name.as_str())
    }
}

/// A `DequantizeLinear -> Conv -> QuantizeLinear` group: node indices.
struct ConvGroup {
    conv: usize,
    dq_x: usize,
    dq_w: usize,
    dq_b: Option<usize>,
    q: usize,
}

fn conv_group(ix: &Index<'_>, conv: usize) -> Option<ConvGroup> {
    let node = ix.node(conv);
    let input = |k: usize| node.inputs.get(k).and_then(Option::as_ref);
    let dq_x = ix.sole_dq(input(0)?, conv)?;
    let dq_w = ix.sole_dq(input(1)?, conv)?;
    let dq_b = match input(2) {
        Some(b) => Some(ix.sole_dq(b, conv)?),
        None => None,
    };
    if node.inputs.len() > 3 {
        return None;
    }
    let y = node.outputs.first()?.as_ref()?;
    let &[q] = ix.readers.get(y.name.as_str())?.as_slice() else { return None };
    let qn = ix.node(q);
    let q_ok = qn.op_type == "QuantizeLinear" && onnx_domain(qn) && qn.inputs.first()?.as_ref()? == y;
    (q_ok && !ix.outputs.contains(&y.name.as_str()) && node.outputs.len() == 1).then_some(ConvGroup {
        conv,
        dq_x,
        dq_w,
        dq_b,
        q,
    })
}

/// A DequantizeLinear's or QuantizeLinear's parameters: scale, zero point (or its type
/// when absent), and the axis and block size attributes.
struct Params<'g> {
    scale: &'g ValueDesc,
    zero: Option<&'g ValueDesc>,
    axis: i64,
    block: i64,
}

fn params(node: &NodeDesc) -> Option<Params<'_>> {
    let int_attr = |name: &str, default: i64| match node.attr(name) {
        Some(crate::graph::AttrValue::Int(v)) => Some(*v),
        None => Some(default),
        Some(_) => None,
    };
    Some(Params {
        scale: node.inputs.get(1)?.as_ref()?,
        zero: node.inputs.get(2).and_then(Option::as_ref),
        axis: int_attr("axis", 1)?,
        block: int_attr("block_size", 0)?,
    })
}

/// The declared dims of `v`, when all are fixed.
fn fixed_dims(v: &ValueDesc) -> Option<Vec<usize>> {
    v.dims.as_ref()?.iter().map(|d| if let Dim::Fixed(n) = d { Some(*n) } else { None }).collect()
}

/// One value: a scalar or a one-element 1-D tensor.
fn is_one(v: &ValueDesc) -> bool {
    fixed_dims(v).is_some_and(|d| d.len() <= 1 && d.iter().product::<usize>() == 1)
}

impl ConvGroup {
    fn absorbed(&self) -> impl Iterator<Item = usize> + '_ {
        [self.dq_x, self.dq_w, self.q].into_iter().chain(self.dq_b)
    }

    /// The QLinearConv node replacing the group (zero-point constants it needs added to
    /// `constants`), or `None` when the group is not one to fuse.
    fn node(&self, ix: &Index<'_>, constants: &mut Vec<ConstDesc>) -> Option<NodeDesc> {
        let conv = ix.node(self.conv);
        let (dq_x, dq_w, q) = (ix.node(self.dq_x), ix.node(self.dq_w), ix.node(self.q));
        let (px, pw, py) = (params(dq_x)?, params(dq_w)?, params(q)?);
        let x = dq_x.inputs.first()?.as_ref()?;
        let w = dq_w.inputs.first()?.as_ref()?;
        let y = q.outputs.first()?.as_ref()?;
        // Per tensor for the input and output; per tensor or per output channel (axis 0)
        // for the weights; no blocks.
        let channels = fixed_dims(w).and_then(|d| d.first().copied());
        let w_per_channel = fixed_dims(pw.scale).is_some_and(|d| d.len() == 1 && Some(d[0]) == channels)
            && (pw.axis == 0 || pw.axis == -(fixed_dims(w).map_or(0, |d| d.len()) as i64));
        if !operands_fuse(ix, [&px, &pw, &py], [x, w, y], w_per_channel) {
            return None;
        }
        let mut zero = |p: &Params<'_>, elem_type: i32, like: &ValueDesc| -> ValueDesc {
            match p.zero {
                Some(z) => z.clone(),
                None => zero_constant(ix, constants, &like.name, elem_type),
            }
        };
        let (zx, zw, zy) = (zero(&px, x.elem_type, x), zero(&pw, w.elem_type, w), zero(&py, y.elem_type, y));
        let mut inputs = vec![
            Some(x.clone()),
            Some(px.scale.clone()),
            Some(zx),
            Some(w.clone()),
            Some(pw.scale.clone()),
            Some(zw),
            Some(py.scale.clone()),
            Some(zy),
        ];
        if let Some(bias) = self.bias(ix, &px, &pw, false)? {
            inputs.push(Some(bias));
        }
        Some(NodeDesc {
            name: conv.name.clone(),
            op_type: "QLinearConv".into(),
            domain: String::new(),
            since_version: 10,
            inputs,
            outputs: vec![Some(y.clone())],
            attrs: conv.attrs.clone(),
        })
    }
}

/// The checks a product group's parameters share (QLinearConv's and QGemm's): the input
/// and output uint8 and per tensor, the weights per tensor or `w_per_channel`, no
/// blocks, every scale and zero point a constant.
fn operands_fuse(
    ix: &Index<'_>,
    [px, pw, py]: [&Params<'_>; 3],
    [x, w, y]: [&ValueDesc; 3],
    w_per_channel: bool,
) -> bool {
    let constant = [px.scale, pw.scale, py.scale].into_iter().chain([px.zero, pw.zero, py.zero].into_iter().flatten());
    is_one(px.scale)
        && is_one(py.scale)
        && (is_one(pw.scale) || w_per_channel)
        && [px.block, pw.block, py.block].iter().all(|&b| b == 0)
        && { constant }.all(|v| ix.is_leaf(v) && v.constant.is_some())
        && x.elem_type == dtype::UINT8
        && y.elem_type == dtype::UINT8
        // 8-bit integer weights (not an 8-bit float's, nor wider integers).
        && matches!(w.elem_type, dtype::INT8 | dtype::UINT8)
}

impl ConvGroup {
    /// The group's int32 bias (`Ok(None)` without one), read by the fused node as its
    /// DequantizeLinear read it: zero point 0, scale `x_scale · w_scale`; 1-D when
    /// `one_d`. `None` when it is not such a bias.
    fn bias(&self, ix: &Index<'_>, px: &Params<'_>, pw: &Params<'_>, one_d: bool) -> Option<Option<ValueDesc>> {
        let Some(b) = self.dq_b else { return Some(None) };
        let dq_b = ix.node(b);
        let pb = params(dq_b)?;
        let bias = dq_b.inputs.first()?.as_ref()?;
        let rank_ok = !one_d || fixed_dims(bias).is_some_and(|d| d.len() == 1);
        (bias.elem_type == dtype::INT32 && rank_ok && bias_matches(&pb, px.scale, pw.scale)).then(|| Some(bias.clone()))
    }

    /// The com.microsoft QGemm node replacing a `DequantizeLinear -> Gemm ->
    /// QuantizeLinear` group (the same structure as a convolution's, the weights and bias
    /// inputs 1 and 2), or `None` when it is not one to fuse. As for a convolution, and:
    /// - the weights per tensor or per output column (axis 0 of a `[N, K]` B with
    ///   `transB`, axis 1 of a `[K, N]` one);
    /// - with a bias, `beta == alpha`: QGemm scales the bias with the product
    ///   (`alpha · (A·B + C)`), the Gemm only the product (`alpha · A·B + beta · C`).
    ///
    /// ORT's QDQ transformer fuses this group into the same QGemm (a classifier head):
    /// the weights are no longer dequantized on every Run (MobileNetV2's 1000 x 1280 took
    /// 311 us a Run), and the output is ORT's.
    fn gemm_node(&self, ix: &Index<'_>, constants: &mut Vec<ConstDesc>) -> Option<NodeDesc> {
        let gemm = ix.node(self.conv);
        let float = |name: &str| match gemm.attr(name) {
            None => Some(1.0),
            Some(crate::graph::AttrValue::Float(v)) => Some(*v),
            Some(_) => None,
        };
        let flag = |name: &str| match gemm.attr(name) {
            None => Some(false),
            Some(crate::graph::AttrValue::Int(v)) => Some(*v != 0),
            Some(_) => None,
        };
        let (alpha, beta, trans_b) = (float("alpha")?, float("beta")?, flag("transB")?);
        flag("transA")?;
        if self.dq_b.is_some() && alpha != beta {
            return None;
        }
        let (dq_x, dq_w, q) = (ix.node(self.dq_x), ix.node(self.dq_w), ix.node(self.q));
        let (px, pw, py) = (params(dq_x)?, params(dq_w)?, params(q)?);
        let (x, w, y) = (dq_x.inputs.first()?.as_ref()?, dq_w.inputs.first()?.as_ref()?, q.outputs.first()?.as_ref()?);
        let w_dims = fixed_dims(w)?;
        let columns = *w_dims.get(if trans_b { 0 } else { 1 })?;
        let column_axis = if trans_b { 0 } else { 1 };
        let w_per_column = fixed_dims(pw.scale).is_some_and(|d| d == [columns])
            && w_dims.len() == 2
            && (pw.axis == column_axis || pw.axis == column_axis - 2);
        // QGemm's zero point of B has the scale's shape (ORT's kernel checks it).
        let zero_shape_ok = pw.zero.is_none_or(|z| fixed_dims(z) == fixed_dims(pw.scale));
        if !operands_fuse(ix, [&px, &pw, &py], [x, w, y], w_per_column) || !zero_shape_ok {
            return None;
        }
        let mut zero = |p: &Params<'_>, elem_type: i32, like: &ValueDesc| -> Option<ValueDesc> {
            match p.zero {
                Some(z) => Some(z.clone()),
                // The 0 made here is a scalar: beside a scale of shape [1] or [N], QGemm
                // would refuse the pair on every Run (found by review).
                None if fixed_dims(p.scale).is_none_or(|d| !d.is_empty()) => None,
                None => Some(zero_constant(ix, constants, &like.name, elem_type)),
            }
        };
        let (zx, zw, zy) = (zero(&px, x.elem_type, x)?, zero(&pw, w.elem_type, w)?, zero(&py, y.elem_type, y)?);
        // One value per column (1-D): a bias of [N, N] or [N, 1] dequantized per row would
        // be scaled per column by QGemm (found by review; ORT's fusion does so too,
        // unlike the group it replaces).
        let bias = self.bias(ix, &px, &pw, true)?;
        let inputs = vec![
            Some(x.clone()),
            Some(px.scale.clone()),
            Some(zx),
            Some(w.clone()),
            Some(pw.scale.clone()),
            Some(zw),
            bias,
            Some(py.scale.clone()),
            Some(zy),
        ];
        let attrs = gemm.attrs.iter().filter(|(n, _)| n != "beta").cloned().collect();
        Some(NodeDesc {
            name: gemm.name.clone(),
            op_type: "QGemm".into(),
            domain: "com.microsoft".into(),
            since_version: 1,
            inputs,
            outputs: vec![Some(y.clone())],
            attrs,
        })
    }
}

/// A per-tensor quantized `DequantizeLinear(s) -> Add | MaxPool -> QuantizeLinear` group
/// around node `op`: the node replacing it and the nodes it absorbs.
/// - Add: both inputs from their own DequantizeLinear, becoming com.microsoft QLinearAdd,
///   which computes as the three ops did (`ops::quant::add`): the same bits.
/// - MaxPool (no Indices output): its QuantizeLinear's scale and zero point equal the
///   DequantizeLinear's and the scale is positive and finite, so that the maximum of the
///   dequantized values quantizes back to the maximum of the integers (dequantizing is
///   increasing; `round((q - z) · s / s)` is `q - z`), as ORT drops such a pair: MaxPool
///   on the integers.
///
/// Every scale and zero point is a one-value constant, and the integers are one type
/// (uint8 or int8) throughout.
fn elementwise_group(ix: &Index<'_>, op: usize, constants: &mut Vec<ConstDesc>) -> Option<(NodeDesc, Vec<usize>)> {
    let node = ix.node(op);
    let y = node.outputs.first()?.as_ref()?;
    if node.outputs.iter().skip(1).any(Option::is_some) || ix.outputs.contains(&y.name.as_str()) {
        return None;
    }
    let &[q] = ix.readers.get(y.name.as_str())?.as_slice() else { return None };
    let qn = ix.node(q);
    if qn.op_type != "QuantizeLinear" || !onnx_domain(qn) || qn.inputs.first()?.as_ref()? != y {
        return None;
    }
    let out = qn.outputs.first()?.as_ref()?;
    let pq = params(qn)?;
    let arity = if node.op_type == "Add" { 2 } else { 1 };
    if node.inputs.len() != arity {
        return None;
    }
    let mut dqs = Vec::new();
    for v in &node.inputs {
        let d = ix.sole_dq(v.as_ref()?, op)?;
        dqs.push(d);
    }
    let per_tensor = |p: &Params<'_>| {
        p.block == 0
            && is_one(p.scale)
            && ix.is_leaf(p.scale)
            && p.scale.constant.is_some()
            && p.zero.is_none_or(|z| is_one(z) && ix.is_leaf(z) && z.constant.is_some())
    };
    let mut quantized = Vec::new();
    for &d in &dqs {
        let dq = ix.node(d);
        let p = params(dq)?;
        let x = dq.inputs.first()?.as_ref()?;
        if !per_tensor(&p) || x.elem_type != out.elem_type {
            return None;
        }
        quantized.push((x, p));
    }
    if !per_tensor(&pq) || !matches!(out.elem_type, dtype::UINT8 | dtype::INT8) {
        return None;
    }
    let absorbed = dqs.iter().copied().chain([q]).collect();
    if node.op_type == "MaxPool" {
        let (x, px) = &quantized[0];
        // Positive and finite: a negative scale turns the maximum into the minimum, 0 or
        // infinity makes every value one (found by review).
        let positive =
            matches!(&px.scale.constant, Some(Constant::F32(s)) if s.len() == 1 && s[0] > 0.0 && s[0].is_finite());
        if !positive || px.scale.constant != pq.scale.constant || zero_value(px.zero) != zero_value(pq.zero) {
            return None;
        }
        let inputs = vec![Some((*x).clone())];
        return Some((NodeDesc { inputs, outputs: vec![Some(out.clone())], ..node.clone() }, absorbed));
    }
    let t = out.elem_type;
    let mut zero = |p: &Params<'_>, like: &ValueDesc| match p.zero {
        Some(z) => z.clone(),
        None => zero_constant(ix, constants, &like.name, t),
    };
    let mut inputs = Vec::new();
    for (x, p) in &quantized {
        inputs.extend([Some((*x).clone()), Some(p.scale.clone()), Some(zero(p, x))]);
    }
    inputs.extend([Some(pq.scale.clone()), Some(zero(&pq, out))]);
    let fused = NodeDesc {
        name: node.name.clone(),
        op_type: "QLinearAdd".into(),
        domain: "com.microsoft".into(),
        since_version: 1,
        inputs,
        outputs: vec![Some(out.clone())],
        attrs: vec![],
    };
    Some((fused, absorbed))
}

/// A zero point's value (absent: 0), when it is a known constant.
fn zero_value(z: Option<&ValueDesc>) -> Option<i64> {
    match z.map(|z| &z.constant) {
        None => Some(0),
        Some(Some(Constant::I64(v))) if v.len() == 1 => Some(v[0]),
        Some(_) => None,
    }
}

/// Whether a bias's DequantizeLinear reads it as the fused node will: zero point absent
/// or 0 and scale `x_scale · w_scale` (per output channel), all known at Compile.
fn bias_matches(pb: &Params<'_>, sx: &ValueDesc, sw: &ValueDesc) -> bool {
    if pb.block != 0 {
        return false;
    }
    match pb.zero.map(|z| &z.constant) {
        None => {}
        Some(Some(Constant::I64(z))) if z.iter().all(|&v| v == 0) => {}
        Some(_) => return false,
    }
    let f32s = |v: &ValueDesc| match &v.constant {
        Some(Constant::F32(x)) => Some(x.clone()),
        _ => None,
    };
    let (Some(sb), Some(sx), Some(sw)) = (f32s(pb.scale), f32s(sx), f32s(sw)) else { return false };
    // One value or one per channel on either side (a length-1 side broadcast).
    let n = sb.len().max(sw.len());
    let at = |v: &[f32], i: usize| v[if v.len() == 1 { 0 } else { i }];
    let lengths_ok = [sb.len(), sw.len()].iter().all(|&l| l == 1 || (l == n && l > 0));
    sx.len() == 1 && n > 0 && lengths_ok && (0..n).all(|i| at(&sb, i) == sx[0] * at(&sw, i))
}

/// A new constant scalar 0 of `elem_type` for the tensor `like` (made once), as a value:
/// `<like>/zero_point`, `'` added while the graph has a value of that name (found by review).
fn zero_constant(ix: &Index<'_>, constants: &mut Vec<ConstDesc>, like: &str, elem_type: i32) -> ValueDesc {
    let (g, n) = (ix.graph, |v: &ValueDesc| v.name.clone());
    let names: Vec<String> =
        g.inputs.iter().chain(&g.outputs).map(n).chain(g.constants.iter().map(|c| c.name.clone())).collect();
    let taken = |n: &str| ix.producer.contains_key(n) || ix.readers.contains_key(n) || names.iter().any(|m| m == n);
    let mut name = format!("{like}/zero_point");
    while taken(&name) {
        name.push('\'');
    }
    if !constants.iter().any(|c| c.name == name) {
        let data = match elem_type {
            dtype::INT8 => Buf::I8(vec![0]),
            _ => Buf::U8(vec![0]),
        };
        constants.push(ConstDesc { name: name.clone(), shape: Shape::new(), data });
    }
    ValueDesc { name, elem_type, dims: Some(Default::default()), ..Default::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(name: &str, elem_type: i32, dims: &[usize]) -> ValueDesc {
        ValueDesc {
            name: name.into(),
            elem_type,
            dims: Some(dims.iter().map(|&d| Dim::Fixed(d)).collect()),
            ..Default::default()
        }
    }

    fn node(op: &str, name: &str, ins: &[&ValueDesc], outs: &[&ValueDesc]) -> NodeDesc {
        NodeDesc {
            name: name.into(),
            op_type: op.into(),
            domain: String::new(),
            since_version: 19,
            inputs: ins.iter().map(|&x| Some(x.clone())).collect(),
            outputs: outs.iter().map(|&x| Some(x.clone())).collect(),
            attrs: vec![],
        }
    }

    /// `v` holding constant data.
    fn c(mut v: ValueDesc, data: Constant) -> ValueDesc {
        v.constant = Some(data);
        v
    }

    /// x (u8) -> DQ -> Conv(DQ(w), DQ(b)) -> Q -> y (u8), every parameter a constant and
    /// the bias's scale x_scale · w_scale.
    fn group() -> GraphDesc {
        let f = |x: &[f32]| Constant::F32(x.to_vec());
        let i = |x: &[i64]| Constant::I64(x.to_vec());
        let xq = v("xq", dtype::UINT8, &[1, 2, 5, 5]);
        let (sx, zx) = (c(v("sx", dtype::FLOAT, &[]), f(&[0.5])), c(v("zx", dtype::UINT8, &[]), i(&[128])));
        let wq = v("wq", dtype::INT8, &[3, 2, 3, 3]);
        let sw = c(v("sw", dtype::FLOAT, &[3]), f(&[0.25, 0.5, 1.0]));
        let zw = c(v("zw", dtype::INT8, &[3]), i(&[0, 0, 0]));
        let (bq, sb) = (v("bq", dtype::INT32, &[3]), c(v("sb", dtype::FLOAT, &[3]), f(&[0.125, 0.25, 0.5])));
        let (sy, zy) = (c(v("sy", dtype::FLOAT, &[]), f(&[0.1])), c(v("zy", dtype::UINT8, &[]), i(&[3])));
        let (xf, wf, bf) =
            (v("xf", dtype::FLOAT, &[1, 2, 5, 5]), v("wf", dtype::FLOAT, &[3, 2, 3, 3]), v("bf", dtype::FLOAT, &[3]));
        let (yf, yq) = (v("yf", dtype::FLOAT, &[1, 3, 3, 3]), v("yq", dtype::UINT8, &[1, 3, 3, 3]));
        let mut dq_w = node("DequantizeLinear", "dq_w", &[&wq, &sw, &zw], &[&wf]);
        dq_w.attrs.push(("axis".into(), crate::graph::AttrValue::Int(0)));
        GraphDesc {
            nodes: vec![
                node("DequantizeLinear", "dq_x", &[&xq, &sx, &zx], &[&xf]),
                dq_w,
                node("DequantizeLinear", "dq_b", &[&bq, &sb], &[&bf]),
                node("Conv", "conv", &[&xf, &wf, &bf], &[&yf]),
                node("QuantizeLinear", "q", &[&yf, &sy, &zy], &[&yq]),
            ],
            inputs: vec![xq, wq, bq],
            constant_inputs: vec![],
            outputs: vec![yq],
            constants: vec![],
        }
    }

    #[test]
    fn a_conv_group_becomes_one_qlinear_conv_with_the_quantized_operands() {
        let fused = fuse(&group()).expect("fused");
        assert_eq!(fused.nodes.len(), 1);
        let n = &fused.nodes[0];
        assert_eq!((n.op_type.as_str(), n.name.as_str()), ("QLinearConv", "conv"));
        let names: Vec<&str> = n.inputs.iter().map(|v| v.as_ref().unwrap().name.as_str()).collect();
        assert_eq!(names, ["xq", "sx", "zx", "wq", "sw", "zw", "sy", "zy", "bq"]);
        assert_eq!(n.outputs[0].as_ref().unwrap().name, "yq");
    }

    /// The group of [`group`] around a Gemm of x [2, 18] by w [3, 18] (transB) instead.
    fn gemm_group(alpha: f32, beta: f32) -> GraphDesc {
        let mut g = group();
        let fixed = |v: &mut ValueDesc, dims: &[usize]| v.dims = Some(dims.iter().map(|&d| Dim::Fixed(d)).collect());
        for (i, dims) in [(0usize, [2usize, 18].as_slice()), (1, &[3, 18])] {
            let node = &mut g.nodes[i];
            fixed(node.inputs[0].as_mut().unwrap(), dims);
            fixed(node.outputs[0].as_mut().unwrap(), dims);
        }
        fixed(&mut g.inputs[0], &[2, 18]);
        fixed(&mut g.inputs[1], &[3, 18]);
        let gemm = &mut g.nodes[3];
        gemm.op_type = "Gemm".into();
        gemm.name = "gemm".into();
        gemm.attrs = vec![
            ("transB".into(), crate::graph::AttrValue::Int(1)),
            ("alpha".into(), crate::graph::AttrValue::Float(alpha)),
            ("beta".into(), crate::graph::AttrValue::Float(beta)),
        ];
        fixed(gemm.outputs[0].as_mut().unwrap(), &[2, 3]);
        fixed(g.nodes[4].inputs[0].as_mut().unwrap(), &[2, 3]);
        fixed(g.nodes[4].outputs[0].as_mut().unwrap(), &[2, 3]);
        fixed(&mut g.outputs[0], &[2, 3]);
        g
    }

    #[test]
    fn a_gemm_group_becomes_one_qgemm_and_only_where_the_bias_scales_alike() {
        let fused = fuse(&gemm_group(1.0, 1.0)).expect("fused");
        assert_eq!(fused.nodes.len(), 1);
        let n = &fused.nodes[0];
        assert_eq!((n.op_type.as_str(), n.domain.as_str(), n.name.as_str()), ("QGemm", "com.microsoft", "gemm"));
        let names: Vec<&str> = n.inputs.iter().map(|v| v.as_ref().unwrap().name.as_str()).collect();
        assert_eq!(names, ["xq", "sx", "zx", "wq", "sw", "zw", "bq", "sy", "zy"]);
        assert!(n.attr("beta").is_none() && n.attr("transB").is_some());
        // alpha != beta with a bias: QGemm would scale the bias by alpha.
        assert!(fuse(&gemm_group(0.5, 1.0)).is_none());
        assert!(fuse(&gemm_group(0.5, 0.5)).is_some());
        // A weight scale of shape [1] with no zero point: the 0 made for it would be a
        // scalar, which QGemm refuses beside it; stays float.
        let mut g = gemm_group(1.0, 1.0);
        let f = |x: &[f32]| Constant::F32(x.to_vec());
        g.nodes[1].inputs[1] = Some(c(v("sw1", dtype::FLOAT, &[1]), f(&[0.25])));
        g.nodes[1].inputs.truncate(2);
        g.nodes[2].inputs[1] = Some(c(v("sb1", dtype::FLOAT, &[1]), f(&[0.125])));
        assert!(fuse(&g).is_none());
        // Per-channel scales along K (transB off: axis 0 of [3, 18] is K's... here N's
        // axis is 1): not per column, stays float.
        let mut g = gemm_group(1.0, 1.0);
        g.nodes[3].attrs.retain(|(n, _)| n != "transB");
        assert!(fuse(&g).is_none());
    }

    #[test]
    fn groups_that_are_not_exactly_the_pattern_stay_float() {
        // The Conv's float output also a graph output.
        let mut g = group();
        g.outputs.push(g.nodes[3].outputs[0].clone().unwrap());
        assert!(fuse(&g).is_none());
        // The input's DequantizeLinear read by another node too.
        let mut g = group();
        let extra = node("Relu", "r", &[g.nodes[0].outputs[0].as_ref().unwrap()], &[&v("r", dtype::FLOAT, &[1])]);
        g.nodes.push(extra);
        assert!(fuse(&g).is_none());
        // Weights per channel along axis 1 (the DequantizeLinear default).
        let mut g = group();
        g.nodes[1].attrs.clear();
        assert!(fuse(&g).is_none());
        // A bias scale that is not x_scale · w_scale, then one not known at Compile.
        let mut g = group();
        g.nodes[2].inputs[1].as_mut().unwrap().constant = Some(Constant::F32(vec![0.125, 0.25, 0.25]));
        assert!(fuse(&g).is_none());
        g.nodes[2].inputs[1].as_mut().unwrap().constant = None;
        assert!(fuse(&g).is_none());
        // A per-channel bias scale with a per-tensor weight scale (equal products) fuses.
        let mut g = group();
        g.nodes[1].inputs[1] = Some(c(v("sw1", dtype::FLOAT, &[]), Constant::F32(vec![0.25])));
        g.nodes[1].attrs.clear();
        g.nodes[1].inputs[2] = None;
        g.nodes[2].inputs[1].as_mut().unwrap().constant = Some(Constant::F32(vec![0.125; 3]));
        assert!(fuse(&g).is_some());
        // A bias zero point that is not 0.
        let mut g = group();
        g.nodes[2].inputs.push(Some(c(v("zb", dtype::INT32, &[3]), Constant::I64(vec![0, 5, 0]))));
        assert!(fuse(&g).is_none());
        g.nodes[2].inputs[2].as_mut().unwrap().constant = Some(Constant::I64(vec![0; 3]));
        assert!(fuse(&g).is_some());
        // An input scale that is a graph input (no data at Compile).
        let mut g = group();
        g.nodes[0].inputs[1].as_mut().unwrap().constant = None;
        assert!(fuse(&g).is_none());
        // int8 activations (ORT 1.32 leaves such groups in float on x86).
        let mut g = group();
        g.nodes[0].inputs[0].as_mut().unwrap().elem_type = dtype::INT8;
        g.nodes[0].inputs[2].as_mut().unwrap().elem_type = dtype::INT8;
        assert!(fuse(&g).is_none());
        // A computed output scale.
        let mut g = group();
        let sy = g.nodes[4].inputs[1].clone().unwrap();
        g.nodes.insert(0, node("Identity", "id", &[&v("s0", dtype::FLOAT, &[])], &[&sy]));
        assert!(fuse(&g).is_none());
    }

    #[test]
    fn absent_zero_points_become_zero_constants() {
        let mut g = group();
        g.nodes[0].inputs.truncate(2);
        g.nodes[4].inputs.truncate(2);
        let fused = fuse(&g).expect("fused");
        let n = &fused.nodes[0];
        assert_eq!(n.inputs[2].as_ref().unwrap().name, "xq/zero_point");
        assert_eq!(n.inputs[7].as_ref().unwrap().name, "yq/zero_point");
        assert_eq!(fused.constants.len(), 2);
        // A model tensor bearing that name keeps it: the made-up 0 takes another.
        g.inputs.push(v("xq/zero_point", dtype::UINT8, &[]));
        assert_eq!(fuse(&g).expect("fused").nodes[0].inputs[2].as_ref().unwrap().name, "xq/zero_point'");
    }

    /// a, b (u8) -> DQ, DQ -> Add -> Q -> m (u8) -> DQ -> MaxPool 3x3 s2 -> Q -> y (u8).
    fn add_and_pool() -> GraphDesc {
        let scalar = |name: &str, value: f32| c(v(name, dtype::FLOAT, &[]), Constant::F32(vec![value]));
        let zero = |name: &str, value: i64| c(v(name, dtype::UINT8, &[]), Constant::I64(vec![value]));
        let shape = [1, 2, 6, 6];
        let (a, b, m, y) = (
            v("a", dtype::UINT8, &shape),
            v("b", dtype::UINT8, &shape),
            v("m", dtype::UINT8, &shape),
            v("y", dtype::UINT8, &[1, 2, 3, 3]),
        );
        let (af, bf, sf, mf, pf) = (
            v("af", dtype::FLOAT, &shape),
            v("bf", dtype::FLOAT, &shape),
            v("sf", dtype::FLOAT, &shape),
            v("mf", dtype::FLOAT, &shape),
            v("pf", dtype::FLOAT, &[1, 2, 3, 3]),
        );
        let mut pool = node("MaxPool", "pool", &[&mf], &[&pf]);
        pool.attrs = vec![
            ("kernel_shape".into(), crate::graph::AttrValue::Ints(vec![3, 3])),
            ("strides".into(), crate::graph::AttrValue::Ints(vec![2, 2])),
            ("pads".into(), crate::graph::AttrValue::Ints(vec![1, 1, 1, 1])),
        ];
        GraphDesc {
            nodes: vec![
                node("DequantizeLinear", "dq_a", &[&a, &scalar("sa", 0.02), &zero("za", 100)], &[&af]),
                node("DequantizeLinear", "dq_b", &[&b, &scalar("sb", 0.03)], &[&bf]),
                node("Add", "add", &[&af, &bf], &[&sf]),
                node("QuantizeLinear", "q_add", &[&sf, &scalar("sm", 0.05), &zero("zm", 7)], &[&m]),
                node("DequantizeLinear", "dq_m", &[&m, &scalar("sm", 0.05), &zero("zm", 7)], &[&mf]),
                pool,
                node("QuantizeLinear", "q_pool", &[&pf, &scalar("sm", 0.05), &zero("zm", 7)], &[&y]),
            ],
            inputs: vec![a, b],
            constant_inputs: vec![],
            outputs: vec![y],
            constants: vec![],
        }
    }

    #[test]
    fn add_and_max_pool_groups_run_on_the_integers() {
        let fused = fuse(&add_and_pool()).expect("fused");
        let ops: Vec<(&str, &str)> = fused.nodes.iter().map(|n| (n.op_type.as_str(), n.domain.as_str())).collect();
        assert_eq!(ops, [("QLinearAdd", "com.microsoft"), ("MaxPool", "")]);
        let names = |n: &NodeDesc| n.inputs.iter().map(|v| v.as_ref().unwrap().name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&fused.nodes[0]), ["a", "sa", "za", "b", "sb", "b/zero_point", "sm", "zm"]);
        assert_eq!(fused.nodes[0].outputs[0].as_ref().unwrap().name, "m");
        assert_eq!(names(&fused.nodes[1]), ["m"]);
        assert_eq!(fused.nodes[1].outputs[0].as_ref().unwrap().name, "y");
        assert_eq!(fused.nodes[1].attrs.len(), 3);
    }

    #[test]
    fn add_and_pool_groups_that_are_not_the_pattern_stay_float() {
        // The pool's QuantizeLinear with another scale, then another zero point.
        let mut g = add_and_pool();
        g.nodes[6].inputs[1].as_mut().unwrap().constant = Some(Constant::F32(vec![0.06]));
        let ops = |g: &GraphDesc| fuse(g).map(|f| f.nodes.iter().map(|n| n.op_type.clone()).collect::<Vec<_>>());
        assert_eq!(ops(&g).unwrap(), ["QLinearAdd", "DequantizeLinear", "MaxPool", "QuantizeLinear"]);
        let mut g = add_and_pool();
        g.nodes[6].inputs[2].as_mut().unwrap().constant = Some(Constant::I64(vec![8]));
        assert_eq!(ops(&g).unwrap()[2], "MaxPool");
        assert_eq!(ops(&g).unwrap().len(), 4);
        // Equal scales that are negative, 0 or infinite (found by review: a negative scale
        // makes the float maximum the integers' minimum).
        for bad in [-0.05, 0.0, f32::INFINITY] {
            let mut g = add_and_pool();
            for k in [4, 6] {
                g.nodes[k].inputs[1].as_mut().unwrap().constant = Some(Constant::F32(vec![bad]));
            }
            assert_eq!(ops(&g).unwrap().len(), 4, "scale {bad}");
        }
        // The Add's float sum also a graph output; an input of another type; a scale per
        // channel.
        let mut g = add_and_pool();
        g.outputs.push(g.nodes[2].outputs[0].clone().unwrap());
        assert_eq!(ops(&g).unwrap()[..3], ["DequantizeLinear", "DequantizeLinear", "Add"]);
        let mut g = add_and_pool();
        g.nodes[1].inputs[0].as_mut().unwrap().elem_type = dtype::INT8;
        assert_eq!(ops(&g).unwrap()[2], "Add");
        let mut g = add_and_pool();
        g.nodes[0].inputs[1] = Some(c(v("sa", dtype::FLOAT, &[2]), Constant::F32(vec![0.02, 0.03])));
        assert_eq!(ops(&g).unwrap()[2], "Add");
    }
}
