//! Einsum: any equation over any number of operands, with `...` broadcasting, repeated
//! labels (diagonals) and implicit outputs. One strided loop over every label's range:
//! simple and exact, meant for the small contractions models spell with Einsum.

use smallvec::SmallVec;

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
