//! The claim rules of the registry's `OPS` table (arity, outputs, element types), with
//! the same texts, for the families moved from it onto the `Op` seam.

use crate::graph::{dtype, NodeDesc};

/// Exactly one input (`Arity::Unary`).
pub fn one_input(node: &NodeDesc) -> Result<(), String> {
    if node.inputs.len() != 1 || node.inputs[0].is_none() {
        return Err(format!("{} needs exactly 1 inputs", node.op_type));
    }
    Ok(())
}

/// Between `min` and `max` inputs, all present (`Arity::Data`).
pub fn all_inputs(node: &NodeDesc, min: usize, max: usize) -> Result<(), String> {
    let n = node.inputs.len();
    if n < min || n > max || node.inputs.iter().any(Option::is_none) {
        return Err(format!("{} needs {min} to {max} inputs", node.op_type));
    }
    Ok(())
}

/// The first output present; others only where the op has them (`more`).
pub fn outputs(node: &NodeDesc, more: bool) -> Result<(), String> {
    if node.outputs.first().is_none_or(Option::is_none) {
        return Err(format!("{} needs its output", node.op_type));
    }
    if !more && node.outputs.len() != 1 {
        return Err(format!("{} needs exactly one output", node.op_type));
    }
    Ok(())
}

/// An error text for element types the op does not run: the node's present inputs and
/// its first output.
pub fn bad_types(node: &NodeDesc, runs: &str) -> String {
    let list: Vec<String> = node
        .inputs
        .iter()
        .flatten()
        .map(|v| format!("'{}' {}", v.name, dtype::name(v.elem_type)))
        .chain(
            node.outputs
                .first()
                .and_then(Option::as_ref)
                .map(|v| format!("output '{}' {}", v.name, dtype::name(v.elem_type))),
        )
        .collect();
    format!("{} runs {runs}; got {}", node.op_type, list.join(", "))
}

/// Output `k`'s element type must be `want`.
pub fn output_is(node: &NodeDesc, k: usize, want: i32) -> Result<(), String> {
    match node.outputs.get(k).and_then(Option::as_ref) {
        Some(out) if out.elem_type != want => Err(format!(
            "{} output {k} '{}' is {}, expected {}",
            node.op_type,
            out.name,
            dtype::name(out.elem_type),
            dtype::name(want)
        )),
        _ => Ok(()),
    }
}

/// float32 data and output, else the registry's "float32 only".
pub fn float32_only(node: &NodeDesc) -> Result<(), String> {
    let float = |v: &crate::graph::ValueDesc| v.elem_type == dtype::FLOAT;
    let out = node.outputs.first().and_then(Option::as_ref).is_some_and(float);
    if !(node.inputs.iter().flatten().all(float) && out) {
        return Err(bad_types(node, "float32 only"));
    }
    Ok(())
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

    /// A float16 node of a family run in float32 (`Family::halves`) lowers to casts of its
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
        // Without `halves`, a half node stays unclaimed (LpPool runs float32 only).
        let mut lp = node("LpPool", 18, &[h], &[h], vec![("kernel_shape".into(), AttrValue::Ints(vec![2]))]);
        lp.inputs[0].as_mut().unwrap().dims = d(&[1, 1, 4]);
        assert!(crate::registry::kernel_for(&lp).unwrap_err().contains("float16"));
    }
}
