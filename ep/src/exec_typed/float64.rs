//! float64 math: elementwise, reductions, MatMul and Gemm, computed in f64.

use super::*;

/// The float64 kernels: elementwise math, CumSum and the reductions, computed in f64.
pub(super) fn float64(cx: &Ctx<'_>, x: &[f64], y: &mut [f64]) -> Result<()> {
    let s = cx.shape(0);
    match cx.step.kernel {
        Kernel::Unary(op) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = op.apply_f64(v)),
        Kernel::Math(op) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = op.apply_f64(v)),
        Kernel::Reduce { op, axes, noop_empty, .. } => {
            let mask = shapes::reduced_axes(s.len(), axes, noop_empty, cx.params).map_err(Error::invalid)?;
            if !mask[..s.len()].iter().any(|&m| m) {
                y.copy_from_slice(x);
                return Ok(());
            }
            reduce_f64(x, s, &mask[..s.len()], op, y);
        }
        _ => return Err(cx.mismatch()),
    }
    Ok(())
}

/// A reduction in f64 over the axes `reduced` marks. LogSumExp subtracts each group's
/// maximum first.
pub(super) fn reduce_f64(x: &[f64], shape: &[usize], reduced: &[bool], op: nn::ReduceOp, y: &mut [f64]) {
    use nn::ReduceOp as R;
    let count = group_size(shape, reduced);
    let each = |f: &mut dyn FnMut(usize, f64)| for_each_grouped(x, shape, reduced, f);
    let init = match op {
        R::Max | R::Min => f64::NAN, // set from the first element below
        R::Prod => 1.0,
        _ => 0.0,
    };
    y.iter_mut().for_each(|v| *v = init);
    let mut max = vec![f64::NEG_INFINITY; if op == R::LogSumExp { y.len() } else { 0 }];
    let mut first = vec![true; if matches!(op, R::Max | R::Min) { y.len() } else { 0 }];
    if op == R::LogSumExp {
        each(&mut |o, v| max[o] = max[o].max(v));
    }
    each(&mut |o, v| match op {
        R::Sum | R::Mean | R::LogSum => y[o] += v,
        R::SumSquare | R::L2 => y[o] += v * v,
        R::L1 => y[o] += v.abs(),
        R::Prod => y[o] *= v,
        R::LogSumExp => y[o] += (v - max[o]).exp(),
        R::Max | R::Min => {
            // The group's first element, then strictly larger (smaller) ones: a NaN is
            // kept only when it comes first, as the float32 kernel and ORT do.
            if first[o] {
                y[o] = v;
                first[o] = false;
            } else if (op == R::Max && v > y[o]) || (op == R::Min && v < y[o]) {
                y[o] = v;
            }
        }
    });
    for (o, v) in y.iter_mut().enumerate() {
        *v = match op {
            R::Mean => *v / count as f64,
            R::L2 => v.sqrt(),
            R::LogSum => v.ln(),
            R::LogSumExp => v.ln() + max[o],
            _ => *v,
        };
    }
}

/// float64 MatMul and Gemm, computed in f64 (plain loops: float64 models are for accuracy, not speed).
pub(super) fn float64_nn(cx: &Ctx<'_>, ins: &[Data<'_>], y: &mut [f64]) -> Result<()> {
    let f = |k: usize| input::<f64>(cx, ins, k);
    let s = cx.shape(0);
    match cx.step.kernel {
        Kernel::Gemm { alpha, beta, trans_a, trans_b } => {
            let (a, b, sa, sb) = (f(0)?, f(1)?, s, cx.shape(1));
            let (m, k) = if trans_a { (sa[1], sa[0]) } else { (sa[0], sa[1]) };
            let n = if trans_b { sb[0] } else { sb[1] };
            let c = if ins.len() > 2 { Some((f(2)?, cx.shape(2))) } else { None };
            for i in 0..m {
                for j in 0..n {
                    let mut acc = 0.0;
                    for p in 0..k {
                        let av = if trans_a { a[p * m + i] } else { a[i * k + p] };
                        let bv = if trans_b { b[j * k + p] } else { b[p * n + j] };
                        acc += av * bv;
                    }
                    let cv = c.map_or(0.0, |(c, cs)| {
                        let (cm, cn) = match cs.len() {
                            0 => (1, 1),
                            1 => (1, cs[0]),
                            _ => (cs[cs.len() - 2], cs[cs.len() - 1]),
                        };
                        c[if cm == 1 { 0 } else { i } * cn + if cn == 1 { 0 } else { j }]
                    });
                    y[i * n + j] = f64::from(alpha) * acc + f64::from(beta) * cv;
                }
            }
        }
        Kernel::MatMul { .. } => {
            let (a, b, sa, sb) = (f(0)?, f(1)?, s, cx.shape(1));
            let (m, k) = if sa.len() == 1 { (1, sa[0]) } else { (sa[sa.len() - 2], sa[sa.len() - 1]) };
            let n = if sb.len() == 1 { 1 } else { sb[sb.len() - 1] };
            // Batch axes broadcast as numpy's: each output matrix's A and B matrices.
            let out = cx.out_shape();
            let batch_rank = out.len().saturating_sub(if sa.len() == 1 || sb.len() == 1 { 1 } else { 2 });
            let batch = &out[..batch_rank.min(out.len())];
            let strides = |sh: &[usize], mat: usize| -> SmallVec<[usize; 8]> {
                let bs = &sh[..sh.len().saturating_sub(2)];
                typed::broadcast_strides(bs, batch).iter().map(|st| st * mat).collect()
            };
            let (sta, stb) = (strides(sa, m * k), strides(sb, k * n));
            let count: usize = batch.iter().product();
            let mut index: SmallVec<[usize; 8]> = SmallVec::from_elem(0, batch.len());
            for t in 0..count {
                let oa: usize = index.iter().zip(&sta).map(|(i, s)| i * s).sum();
                let ob: usize = index.iter().zip(&stb).map(|(i, s)| i * s).sum();
                for i in 0..m {
                    for j in 0..n {
                        let acc: f64 = (0..k).map(|p| a[oa + i * k + p] * b[ob + p * n + j]).sum();
                        y[t * m * n + i * n + j] = acc;
                    }
                }
                for d in (0..batch.len()).rev() {
                    index[d] += 1;
                    if index[d] < batch[d] {
                        break;
                    }
                    index[d] = 0;
                }
            }
        }
        _ => return Err(cx.mismatch()),
    }
    Ok(())
}
