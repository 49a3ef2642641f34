//! float64 math: elementwise, MatMul and Gemm, computed in f64.

use super::*;

/// The float64 kernels: elementwise math and CumSum, computed in f64.
pub(super) fn float64(cx: &Ctx<'_>, x: &[f64], y: &mut [f64]) -> Result<()> {
    match cx.step.kernel {
        Kernel::Unary(op) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = op.apply_f64(v)),
        Kernel::Math(op) => y.iter_mut().zip(x).for_each(|(o, &v)| *o = op.apply_f64(v)),
        _ => return Err(cx.mismatch()),
    }
    Ok(())
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
