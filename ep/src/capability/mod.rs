//! Which nodes Rivet claims: maximal connected groups of supported nodes, each fusable
//! into one node without creating a cycle through an unclaimed node.

use std::collections::HashMap;

use crate::graph::GraphDesc;

mod quantized;
pub use quantized::in_quantized_group;

/// Groups of node indices (into `graph.nodes`), each in topological order.
///
/// `outer_reads[i]` (when present) names the values of this graph that node `i`'s
/// subgraphs read: an If reading `a` in a branch depends on `a`'s producer as if `a` were
/// one of its inputs, so a group cannot take both `a`'s producer and a reader of the If.
pub fn partition(graph: &GraphDesc, claimable: &[bool], outer_reads: &[Vec<String>]) -> Vec<Vec<usize>> {
    let n = graph.nodes.len();
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, node) in graph.nodes.iter().enumerate() {
        for out in node.outputs.iter().flatten() {
            producer.insert(out.name.as_str(), i);
        }
    }
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (j, node) in graph.nodes.iter().enumerate() {
        let outer = outer_reads.get(j).map_or(&[][..], Vec::as_slice);
        let names = node.inputs.iter().flatten().map(|v| v.name.as_str()).chain(outer.iter().map(String::as_str));
        for input in names {
            if let Some(&i) = producer.get(input) {
                if !preds[j].contains(&i) {
                    preds[j].push(i);
                    succs[i].push(j);
                }
            }
        }
    }
    let order = topological_order(&preds, &succs);

    let mut group_of: Vec<Option<usize>> = vec![None; n];
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for &node in &order {
        if !claimable[node] {
            continue;
        }
        let mut candidates: Vec<usize> = Vec::new();
        for &p in &preds[node] {
            if let Some(g) = group_of[p] {
                if !candidates.contains(&g) {
                    candidates.push(g);
                }
            }
        }
        let mut current: Option<usize> = None;
        for g in candidates {
            match current {
                None => {
                    let mut members = groups[g].clone();
                    members.push(node);
                    if !creates_cycle(&members, &group_of, &groups, &succs) {
                        groups[g].push(node);
                        group_of[node] = Some(g);
                        current = Some(g);
                    }
                }
                Some(c) => {
                    let mut members = groups[c].clone();
                    members.extend_from_slice(&groups[g]);
                    if !creates_cycle(&members, &group_of, &groups, &succs) {
                        let moved = std::mem::take(&mut groups[g]);
                        for &m in &moved {
                            group_of[m] = Some(c);
                        }
                        groups[c].extend(moved);
                    }
                }
            }
        }
        if current.is_none() {
            group_of[node] = Some(groups.len());
            groups.push(vec![node]);
        }
    }
    let position: Vec<usize> = {
        let mut p = vec![0; n];
        for (k, &i) in order.iter().enumerate() {
            p[i] = k;
        }
        p
    };
    groups
        .into_iter()
        .filter(|g| !g.is_empty())
        .map(|mut g| {
            g.sort_by_key(|&i| position[i]);
            g
        })
        .collect()
}

fn topological_order(preds: &[Vec<usize>], succs: &[Vec<usize>]) -> Vec<usize> {
    let mut indegree: Vec<usize> = preds.iter().map(Vec::len).collect();
    let mut ready: Vec<usize> = (0..preds.len()).filter(|&i| indegree[i] == 0).rev().collect();
    let mut order = Vec::with_capacity(preds.len());
    while let Some(i) = ready.pop() {
        order.push(i);
        for &s in succs[i].iter().rev() {
            indegree[s] -= 1;
            if indegree[s] == 0 {
                ready.push(s);
            }
        }
    }
    order
}

/// True when fusing `members` into one node would put it on a cycle: some path leaves the
/// set and comes back. Other groups count as the single nodes they will become.
fn creates_cycle(members: &[usize], group_of: &[Option<usize>], groups: &[Vec<usize>], succs: &[Vec<usize>]) -> bool {
    let n = succs.len();
    let mut inside = vec![false; n];
    for &m in members {
        inside[m] = true;
    }
    let mut seen = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    for &m in members {
        for &s in &succs[m] {
            if !inside[s] && !seen[s] {
                seen[s] = true;
                stack.push(s);
            }
        }
    }
    while let Some(v) = stack.pop() {
        let mut expand = vec![v];
        if let Some(g) = group_of[v] {
            expand.extend(groups[g].iter().copied().filter(|&u| !inside[u]));
        }
        for u in expand {
            for &s in &succs[u] {
                if inside[s] {
                    return true;
                }
                if !seen[s] {
                    seen[s] = true;
                    stack.push(s);
                }
            }
            if u != v && !seen[u] {
                seen[u] = true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::{dtype, NodeDesc, ValueDesc};

    fn v(name: &str) -> Option<ValueDesc> {
        Some(ValueDesc { name: name.into(), elem_type: dtype::FLOAT, dims: None, constant: None, at_run_ok: false })
    }
    fn node(name: &str, inputs: &[&str], output: &str) -> NodeDesc {
        NodeDesc {
            name: name.into(),
            op_type: "X".into(),
            domain: String::new(),
            since_version: 1,
            inputs: inputs.iter().map(|i| v(i)).collect(),
            outputs: vec![v(output)],
            attrs: vec![],
        }
    }
    fn graph(nodes: Vec<NodeDesc>) -> GraphDesc {
        GraphDesc { nodes, ..Default::default() }
    }

    #[test]
    fn a_chain_is_one_group() {
        let g = graph(vec![node("a", &["x"], "a"), node("b", &["a"], "b"), node("c", &["b"], "c")]);
        assert_eq!(partition(&g, &[true, true, true], &[]), vec![vec![0, 1, 2]]);
    }

    #[test]
    fn an_unclaimed_node_splits_a_chain() {
        let g = graph(vec![node("a", &["x"], "a"), node("u", &["a"], "u"), node("c", &["u"], "c")]);
        assert_eq!(partition(&g, &[true, false, true], &[]), vec![vec![0], vec![2]]);
    }

    #[test]
    fn a_diamond_through_an_unclaimed_node_is_not_fused() {
        // a -> u -> d and a -> d: fusing a and d would make a cycle a+d -> u -> a+d.
        let g = graph(vec![node("a", &["x"], "a"), node("u", &["a"], "u"), node("d", &["a", "u"], "d")]);
        let groups = partition(&g, &[true, false, true], &[]);
        assert_eq!(groups, vec![vec![0], vec![2]]);
    }

    #[test]
    fn two_branches_join_into_one_group() {
        let g = graph(vec![node("a", &["x"], "a"), node("b", &["y"], "b"), node("c", &["a", "b"], "c")]);
        let groups = partition(&g, &[true, true, true], &[]);
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].len(), 3);
    }

    #[test]
    fn groups_joined_only_via_an_unclaimed_path_stay_apart() {
        // a -> u -> b, and a, b both feed c: merging {a} and {b} via c is a cycle.
        let g = graph(vec![
            node("a", &["x"], "a"),
            node("u", &["a"], "u"),
            node("b", &["u"], "b"),
            node("c", &["a", "b"], "c"),
        ]);
        let groups = partition(&g, &[true, false, true, true], &[]);
        assert_eq!(groups, vec![vec![0], vec![2, 3]]);
    }

    #[test]
    fn a_value_read_inside_a_subgraph_is_an_edge() {
        // a -> (If u reads a in a branch, no explicit input) -> b: a and b apart.
        let g = graph(vec![node("a", &["x"], "a"), node("u", &["c"], "u"), node("b", &["a", "u"], "b")]);
        let reads = vec![vec![], vec!["a".to_string()], vec![]];
        assert_eq!(partition(&g, &[true, false, true], &reads), vec![vec![0], vec![2]]);
        // Without the read the two fuse (nothing links u to a).
        assert_eq!(partition(&g, &[true, false, true], &[]), vec![vec![0, 2]]);
    }
}
