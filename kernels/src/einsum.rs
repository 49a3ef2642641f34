//! Einsum: any equation over any number of operands, with `...` broadcasting, repeated
//! labels (diagonals) and implicit outputs. One strided loop over every label's range:
//! simple and exact, for any equation. A float32 contraction of two operands that is a
//! batched matrix product once its axes are put in order (attention's `bhqd,bhkd->bhqk`,
//! a projection's `bsd,df->bsf`) runs on the GEMM instead ([`product`], [`contract`]):
//! operands read in place when their axes already are in a product's order (either
//! transpose), else copied into order first.

use smallvec::SmallVec;

use crate::movement::transpose;

/// Labels of one term: letters as themselves, the ellipsis' axes as 1, 2, ...
type Labels = SmallVec<[u8; 8]>;

/// A parsed equation for given operand ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Equation {
    pub inputs: SmallVec<[Labels; 3]>,
    pub output: Labels,
}

/// Parses `equation` for operands of `ranks`.
pub fn parse(equation: &str, ranks: &[usize]) -> Result<Equation, String> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: SmallVec<[&str; 3]> = lhs.split(',').collect();
    if terms.len() != ranks.len() {
        return Err(format!("equation '{equation}' has {} operands, the node {}", terms.len(), ranks.len()));
    }
    let letters = |t: &str| t.replace("...", "").chars().count();
    let mut ellipsis = 0;
    for (t, &r) in terms.iter().zip(ranks) {
        if t.contains("...") {
            ellipsis = ellipsis.max(r.checked_sub(letters(t)).ok_or(format!("term '{t}' for rank {r}"))?);
        }
    }
    if ellipsis > 8 {
        return Err("more than 8 broadcast axes".into());
    }
    let expand = |t: &str, e: usize| -> Result<Labels, String> {
        let mut out = Labels::new();
        let (before, after) = t.split_once("...").unwrap_or((t, ""));
        for c in before.chars() {
            out.push(letter(c)?);
        }
        if t.contains("...") {
            out.extend((ellipsis - e..ellipsis).map(|k| k as u8 + 1));
        }
        for c in after.chars() {
            out.push(letter(c)?);
        }
        Ok(out)
    };
    let mut inputs: SmallVec<[Labels; 3]> = SmallVec::new();
    for (t, &r) in terms.iter().zip(ranks) {
        let e = if t.contains("...") { r - letters(t) } else { 0 };
        let labels = expand(t, e)?;
        if labels.len() != r {
            return Err(format!("term '{t}' has {} labels for rank {r}", labels.len()));
        }
        inputs.push(labels);
    }
    let output = match rhs {
        Some(r) => expand(r, ellipsis)?,
        None => {
            // Implicit: the broadcast axes, then the letters used once, in order.
            let mut out: Labels = (1..=ellipsis as u8).collect();
            let mut once: SmallVec<[u8; 16]> = SmallVec::new();
            for c in inputs.iter().flatten().copied().filter(|&c| c > 8) {
                if inputs.iter().flatten().filter(|&&d| d == c).count() == 1 {
                    once.push(c);
                }
            }
            once.sort_unstable();
            out.extend(once);
            out
        }
    };
    for &c in &output {
        if !inputs.iter().flatten().any(|&d| d == c) || output.iter().filter(|&&d| d == c).count() > 1 {
            return Err(format!("output label '{}' is not used once by an operand", c as char));
        }
    }
    Ok(Equation { inputs, output })
}

fn letter(c: char) -> Result<u8, String> {
    if c.is_ascii_alphabetic() {
        Ok(c as u8)
    } else {
        Err(format!("'{c}' is not a label"))
    }
}

/// Every label with its extent: output labels first, then the summed ones.
fn extents(eq: &Equation, shapes: &[&[usize]]) -> Result<SmallVec<[(u8, usize); 16]>, String> {
    let mut all: SmallVec<[(u8, usize); 16]> = eq.output.iter().map(|&c| (c, 1)).collect();
    for (labels, shape) in eq.inputs.iter().zip(shapes) {
        for (&c, &d) in labels.iter().zip(shape.iter()) {
            match all.iter_mut().find(|(l, _)| *l == c) {
                Some((_, n)) if *n == 1 || *n == d || d == 1 => *n = (*n).max(d),
                Some((_, n)) => return Err(format!("label '{}' is {n} and {d}", c as char)),
                None => all.push((c, d)),
            }
        }
    }
    Ok(all)
}

/// The output shape of `eq` over operands of `shapes`.
pub fn output_shape(eq: &Equation, shapes: &[&[usize]]) -> Result<SmallVec<[usize; 8]>, String> {
    let all = extents(eq, shapes)?;
    Ok(eq.output.iter().map(|c| all.iter().find(|(l, _)| l == c).map_or(1, |&(_, n)| n)).collect())
}

/// Computes `y` (of the output shape) as the sum over the contracted labels of the
/// product of the operands, with `zero`, `add` and `mul` of the element type.
pub fn einsum<T: Copy>(
    eq: &Equation,
    operands: &[&[T]],
    shapes: &[&[usize]],
    y: &mut [T],
    zero: T,
    add: impl Fn(T, T) -> T,
    mul: impl Fn(T, T) -> T,
) -> Result<(), String> {
    let all = extents(eq, shapes)?;
    y.iter_mut().for_each(|v| *v = zero);
    if all.iter().any(|&(_, n)| n == 0) {
        return Ok(());
    }
    // Per label: the stride of each operand (0 where it lacks the label or broadcasts it;
    // a label repeated in one operand adds its strides: the diagonal) and of the output.
    let n = all.len();
    let mut strides: SmallVec<[SmallVec<[usize; 16]>; 3]> = SmallVec::new();
    for (labels, shape) in eq.inputs.iter().zip(shapes) {
        let mut st: SmallVec<[usize; 16]> = SmallVec::from_elem(0, n);
        let mut acc = 1;
        for (k, &c) in labels.iter().enumerate().rev() {
            if shape[k] != 1 {
                let at = all.iter().position(|(l, _)| *l == c).expect("every label has an extent");
                st[at] += acc;
            }
            acc *= shape[k];
        }
        strides.push(st);
    }
    let mut out_st: SmallVec<[usize; 16]> = SmallVec::from_elem(0, n);
    let mut acc = 1;
    for k in (0..eq.output.len()).rev() {
        out_st[k] = acc;
        acc *= all[k].1;
    }
    let mut index: SmallVec<[usize; 16]> = SmallVec::from_elem(0, n);
    let mut offs: SmallVec<[usize; 3]> = SmallVec::from_elem(0, operands.len());
    let mut out = 0usize;
    loop {
        let mut p = operands[0][offs[0]];
        for (x, &o) in operands.iter().zip(&offs).skip(1) {
            p = mul(p, x[o]);
        }
        y[out] = add(y[out], p);
        // Advance the odometer, innermost label last.
        let mut a = n;
        loop {
            if a == 0 {
                return Ok(());
            }
            a -= 1;
            index[a] += 1;
            out += out_st[a];
            for (o, st) in offs.iter_mut().zip(&strides) {
                *o += st[a];
            }
            if index[a] < all[a].1 {
                break;
            }
            out -= out_st[a] * all[a].1;
            for (o, st) in offs.iter_mut().zip(&strides) {
                *o -= st[a] * all[a].1;
            }
            index[a] = 0;
        }
    }
}

/// Where a contraction operand's data comes from for the GEMM.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Layout {
    /// In place, in the product's order (`[batch, rows, depth]` for A).
    InOrder,
    /// In place, its last two blocks of axes swapped (stored transposed).
    Transposed,
    /// Copied into the product's order first: the permutation for [`transpose`].
    Copy(SmallVec<[usize; 8]>),
}

/// A two-operand contraction as a batched matrix product: `C[b] = A[b] · B[b]` with A
/// `m × k` and B `k × n` per batch, C's axes `[batch, m, n]` (or, with `swap`, the
/// operands exchanged so that C comes out in the output's order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Product {
    pub batch: usize,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// The operand that is A (0 or 1).
    a: usize,
    a_layout: Layout,
    b_layout: Layout,
    /// Each operand's shape (for the copies).
    shapes: [SmallVec<[usize; 8]>; 2],
}

/// The least multiply-adds per batch for which a contraction runs on the GEMM.
const MIN_PRODUCT: usize = 64;

/// Working memory of [`contract`]: operands put in order, and the GEMM's packing.
#[derive(Debug, Default)]
pub struct Scratch {
    a: Vec<f32>,
    b: Vec<f32>,
    gemm: crate::gemm::GemmScratch,
}

/// `eq` over operands of `shapes` as a batched matrix product, if it is one: two operands,
/// no label repeated in a term, every label of the same extent wherever it appears (no
/// broadcasting), every label summed over in both operands, and the output's axes in the
/// order batch, rows, columns of one of the two ways to multiply them.
pub fn product(eq: &Equation, shapes: &[&[usize]]) -> Option<Product> {
    if eq.inputs.len() != 2 || shapes.len() != 2 {
        return None;
    }
    let distinct = |l: &Labels| l.len() <= 8 && l.iter().enumerate().all(|(i, c)| !l[..i].contains(c));
    if !eq.inputs.iter().all(distinct) {
        return None;
    }
    let extent = |c: u8| -> Option<usize> {
        let mut found = None;
        for (labels, shape) in eq.inputs.iter().zip(shapes) {
            if let Some(i) = labels.iter().position(|&d| d == c) {
                match found {
                    None => found = Some(shape[i]),
                    Some(n) if n == shape[i] => {}
                    Some(_) => return None,
                }
            }
        }
        found
    };
    for (a, b) in [(0, 1), (1, 0)] {
        let (la, lb, out) = (&eq.inputs[a], &eq.inputs[b], &eq.output);
        // Classes, in the output's order (batch, m, n) and in A's (k).
        let batch: Labels = out.iter().copied().filter(|c| la.contains(c) && lb.contains(c)).collect();
        let m: Labels = out.iter().copied().filter(|c| la.contains(c) && !lb.contains(c)).collect();
        let n: Labels = out.iter().copied().filter(|c| lb.contains(c) && !la.contains(c)).collect();
        let k: Labels = la.iter().copied().filter(|c| lb.contains(c) && !out.contains(c)).collect();
        // Every label of A and B has a class (none is summed within one operand alone).
        if batch.len() + m.len() + k.len() != la.len() || batch.len() + n.len() + k.len() != lb.len() {
            return None;
        }
        let ordered: Labels = batch.iter().chain(&m).chain(&n).copied().collect();
        if ordered != *out {
            continue;
        }
        let size = |ls: &Labels| ls.iter().map(|&c| extent(c)).try_fold(1usize, |acc, e| acc.checked_mul(e?));
        let layout = |labels: &Labels, first: &Labels, second: &Labels| -> Layout {
            let cat = |x: &Labels, y: &Labels| -> Labels { batch.iter().chain(x).chain(y).copied().collect() };
            if *labels == cat(first, second) {
                Layout::InOrder
            } else if *labels == cat(second, first) {
                Layout::Transposed
            } else {
                let want = cat(first, second);
                Layout::Copy(want.iter().map(|c| labels.iter().position(|d| d == c).expect("classified")).collect())
            }
        };
        let shape_of = |i: usize| -> SmallVec<[usize; 8]> { shapes[i].iter().copied().collect() };
        let (sm, sn, sk) = (size(&m)?, size(&n)?, size(&k)?);
        // Products of a few multiply-adds each (a Hadamard product is one per batch) cost
        // less in the loop than a GEMM call each.
        if sm.checked_mul(sn)?.checked_mul(sk)? < MIN_PRODUCT {
            return None;
        }
        return Some(Product {
            batch: size(&batch)?,
            m: sm,
            n: sn,
            k: sk,
            a,
            a_layout: layout(la, &m, &k),
            b_layout: layout(lb, &k, &n),
            shapes: if a == 0 { [shape_of(0), shape_of(1)] } else { [shape_of(1), shape_of(0)] },
        });
    }
    None
}

/// Computes the contraction `p` of `operands` (in the equation's order) into `y` (the
/// output's order): one GEMM per batch, operands read in place or put in order in
/// `scratch` first.
pub fn contract(p: &Product, operands: [&[f32]; 2], y: &mut [f32], scratch: &mut Scratch) {
    let Product { batch, m, n, k, .. } = *p;
    let (a, b) = (operands[p.a], operands[1 - p.a]);
    let Scratch { a: sa, b: sb, gemm } = scratch;
    let put = |x: &[f32], layout: &Layout, shape: &[usize], buf: &mut Vec<f32>| -> bool {
        if let Layout::Copy(perm) = layout {
            if buf.len() < x.len() {
                buf.resize(x.len(), 0.0);
            }
            transpose(x, shape, perm, &mut buf[..x.len()]);
        }
        *layout == Layout::Transposed
    };
    let trans_a = put(a, &p.a_layout, &p.shapes[0], sa);
    let trans_b = put(b, &p.b_layout, &p.shapes[1], sb);
    let a: &[f32] = if matches!(p.a_layout, Layout::Copy(_)) { &sa[..a.len()] } else { a };
    let b: &[f32] = if matches!(p.b_layout, Layout::Copy(_)) { &sb[..b.len()] } else { b };
    let (ma, mb, mc) = (m * k, k * n, m * n);
    for i in 0..batch {
        let (ai, bi) = (&a[i * ma..][..ma], &b[i * mb..][..mb]);
        crate::gemm::gemm_with(gemm, m, n, k, 1.0, ai, trans_a, bi, trans_b, 0.0, &mut y[i * mc..][..mc]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(eq: &str, ops: &[(&[f32], &[usize])]) -> (Vec<f32>, Vec<usize>) {
        let ranks: Vec<usize> = ops.iter().map(|(_, s)| s.len()).collect();
        let e = parse(eq, &ranks).unwrap();
        let shapes: Vec<&[usize]> = ops.iter().map(|(_, s)| *s).collect();
        let out = output_shape(&e, &shapes).unwrap();
        let mut y = vec![0.0; out.iter().product()];
        let xs: Vec<&[f32]> = ops.iter().map(|(x, _)| *x).collect();
        einsum(&e, &xs, &shapes, &mut y, 0.0, |a, b| a + b, |a, b| a * b).unwrap();
        (y, out.to_vec())
    }

    /// Contractions that are batched products, on the GEMM, against the loop: in place in
    /// either transpose, copied into order, and with the operands exchanged for the
    /// output's order.
    #[test]
    fn contractions_on_the_gemm_match_the_loop() {
        // An equation, its operands' shapes, and the product's batch, m, n and k (if one).
        type Case<'a> = (&'a str, &'a [&'a [usize]], Option<(usize, usize, usize, usize)>);
        let cases: &[Case<'_>] = &[
            ("ij,jk->ik", &[&[20, 30], &[30, 17]], Some((1, 20, 17, 30))),
            ("ij,kj->ik", &[&[20, 30], &[17, 30]], Some((1, 20, 17, 30))),
            ("ji,jk->ik", &[&[30, 20], &[30, 17]], Some((1, 20, 17, 30))),
            ("ik,kj->ji", &[&[20, 30], &[30, 17]], Some((1, 17, 20, 30))),
            ("bhqd,bhkd->bhqk", &[&[2, 3, 9, 8], &[2, 3, 11, 8]], Some((6, 9, 11, 8))),
            ("bhqk,bhkd->bhqd", &[&[2, 3, 9, 11], &[2, 3, 11, 8]], Some((6, 9, 8, 11))),
            ("bsd,df->bsf", &[&[2, 5, 16], &[16, 24]], Some((1, 10, 24, 16))),
            ("ijk,jkl->il", &[&[6, 4, 5], &[4, 5, 7]], Some((1, 6, 7, 20))),
            ("bqd,dbk->bqk", &[&[3, 7, 8], &[8, 3, 9]], Some((3, 7, 9, 8))),
            ("hbqd,bhkd->bhqk", &[&[3, 2, 9, 8], &[2, 3, 11, 8]], Some((6, 9, 11, 8))),
            ("...ij,...jk->...ik", &[&[2, 12, 9], &[2, 9, 10]], Some((2, 12, 10, 9))),
            // Not products: a diagonal, a broadcast, a label summed in one operand, the
            // output's axes out of either product's order, a Hadamard product, three operands.
            ("ii,ij->j", &[&[9, 9], &[9, 10]], None),
            ("bij,bjk->bik", &[&[1, 12, 9], &[3, 9, 10]], None),
            ("ijx,jk->ik", &[&[12, 9, 2], &[9, 10]], None),
            ("bij,bjk->ibk", &[&[2, 12, 9], &[2, 9, 10]], None),
            ("ij,ij->ij", &[&[12, 9], &[12, 9]], None),
        ];
        for &(eq, shapes, want) in cases {
            let ranks: Vec<usize> = shapes.iter().map(|s| s.len()).collect();
            let e = parse(eq, &ranks).unwrap();
            let p = product(&e, shapes);
            assert_eq!(p.as_ref().map(|p| (p.batch, p.m, p.n, p.k)), want, "{eq}");
            let Some(p) = p else { continue };
            let xs: Vec<Vec<f32>> = shapes
                .iter()
                .enumerate()
                .map(|(t, s)| {
                    (0..s.iter().product()).map(|i: usize| ((i * 7 + t * 3) % 11) as f32 * 0.25 - 1.0).collect()
                })
                .collect();
            let len: usize = output_shape(&e, shapes).unwrap().iter().product();
            let mut want = vec![0.0; len];
            let refs: Vec<&[f32]> = xs.iter().map(|x| x.as_slice()).collect();
            einsum(&e, &refs, shapes, &mut want, 0.0, |a, b| a + b, |a, b| a * b).unwrap();
            let mut got = vec![f32::NAN; len];
            contract(&p, [&xs[0], &xs[1]], &mut got, &mut Scratch::default());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!((g - w).abs() <= 1e-4 * (1.0 + w.abs()), "{eq}: y[{i}] = {g}, want {w}");
            }
        }
    }

    #[test]
    fn matmul_transpose_trace_diagonal_and_ellipsis() {
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // [2, 3]
        let b = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0]; // [3, 2]
        assert_eq!(run("ij,jk->ik", &[(&a, &[2, 3]), (&b, &[3, 2])]), (vec![4.0, 5.0, 10.0, 11.0], vec![2, 2]));
        assert_eq!(run("ij->ji", &[(&a, &[2, 3])]).0, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        assert_eq!(run("ii", &[(&[1.0, 2.0, 3.0, 4.0], &[2, 2])]), (vec![5.0], vec![]));
        assert_eq!(run("ii->i", &[(&[1.0, 2.0, 3.0, 4.0], &[2, 2])]).0, vec![1.0, 4.0]);
        // Implicit output: letters used once, sorted ("ba" -> "ab" transposes).
        assert_eq!(run("ba", &[(&a, &[2, 3])]).0, vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
        let (y, s) = run("...ij,...jk", &[(&a, &[1, 2, 3]), (&b, &[3, 2])]);
        assert_eq!((y, s), (vec![4.0, 5.0, 10.0, 11.0], vec![1, 2, 2]));
        assert!(parse("ij,jk->ikx", &[2, 2]).is_err());
    }
}
