//! A tree ensemble flattened at compile: every node of every tree in one array (children
//! by index), the leaves' weights in another. Built from the ml opset 1/3 attributes
//! (`TreeEnsembleClassifier`, `TreeEnsembleRegressor`) or opset 5's `TreeEnsemble`, whose
//! set-membership nodes become chains of equality tests.

use std::collections::HashMap;
use std::fmt::Debug;

use super::{floats_attr, ints_attr, strings_attr, tensor_attr, Elem};
use crate::data::Data;
use crate::graph::NodeDesc;
use crate::parallel::TaskScratch;

/// The type thresholds and scores are kept in: float64 for a float64 input, else float32
/// (as ORT does).
pub trait Thr: Copy + PartialOrd + Debug + Send + Sync + 'static {
    const ZERO: Self;
    const ONE: Self;
    fn from_f32(v: f32) -> Self;
    fn from_f64(v: f64) -> Self;
    fn to_f32(self) -> f32;
    fn to_f64(self) -> f64;
    fn of<E: Elem>(e: E) -> Self;
    fn add(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    fn neg(self) -> Self;
    /// The tensor attribute's values, when it holds this type.
    fn from_data(d: Data<'_>) -> Option<Vec<Self>>;
    /// A task's working buffer of this type, and a float32 one.
    fn task_bufs(s: &mut TaskScratch) -> (&mut Vec<Self>, &mut Vec<f32>);
}

impl Thr for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
    fn from_f32(v: f32) -> f32 {
        v
    }
    fn from_f64(v: f64) -> f32 {
        v as f32
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn of<E: Elem>(e: E) -> f32 {
        e.f32()
    }
    fn add(self, o: f32) -> f32 {
        self + o
    }
    fn div(self, o: f32) -> f32 {
        self / o
    }
    fn neg(self) -> f32 {
        -self
    }
    fn from_data(d: Data<'_>) -> Option<Vec<f32>> {
        d.f32().map(<[f32]>::to_vec)
    }
    fn task_bufs(s: &mut TaskScratch) -> (&mut Vec<f32>, &mut Vec<f32>) {
        (&mut s.out, &mut s.col)
    }
}

impl Thr for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
    fn from_f32(v: f32) -> f64 {
        v as f64
    }
    fn from_f64(v: f64) -> f64 {
        v
    }
    fn to_f32(self) -> f32 {
        self as f32
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn of<E: Elem>(e: E) -> f64 {
        e.f64()
    }
    fn add(self, o: f64) -> f64 {
        self + o
    }
    fn div(self, o: f64) -> f64 {
        self / o
    }
    fn neg(self) -> f64 {
        -self
    }
    fn from_data(d: Data<'_>) -> Option<Vec<f64>> {
        match d {
            Data::F64(v) => Some(v.to_vec()),
            _ => None,
        }
    }
    fn task_bufs(s: &mut TaskScratch) -> (&mut Vec<f64>, &mut Vec<f32>) {
        (&mut s.f64, &mut s.col)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Leaf,
    Leq,
    Lt,
    Gte,
    Gt,
    Eq,
    Neq,
}

impl Mode {
    fn parse(s: &str) -> Result<Mode, String> {
        Ok(match s {
            "LEAF" => Mode::Leaf,
            "BRANCH_LEQ" => Mode::Leq,
            "BRANCH_LT" => Mode::Lt,
            "BRANCH_GTE" => Mode::Gte,
            "BRANCH_GT" => Mode::Gt,
            "BRANCH_EQ" => Mode::Eq,
            "BRANCH_NEQ" => Mode::Neq,
            _ => return Err(format!("node mode '{s}' is not LEAF or BRANCH_LEQ/LT/GTE/GT/EQ/NEQ")),
        })
    }
}

/// One node. A branch goes to `yes` or `no`; a leaf's weights are `weights[yes..yes + no]`
/// and `value` holds its first weight.
#[derive(Clone, Copy, Debug)]
pub struct Node<T> {
    pub value: T,
    pub feature: u32,
    pub mode: Mode,
    pub missing_true: bool,
    pub yes: u32,
    pub no: u32,
}

#[derive(Debug)]
pub struct Forest<T> {
    pub nodes: Vec<Node<T>>,
    pub roots: Vec<u32>,
    /// (target or class, weight), each leaf's in the order the model lists them.
    pub weights: Vec<(u32, T)>,
    /// One more than the largest feature a branch reads.
    pub features: usize,
    pub targets: usize,
}

/// A float list attribute, or its `_as_tensor` twin (which must hold `T`).
fn values<T: Thr>(node: &NodeDesc, name: &str) -> Result<Option<Vec<T>>, String> {
    let tensor = format!("{name}_as_tensor");
    let plain = floats_attr(node, name)?;
    match tensor_attr(node, &tensor)? {
        Some(d) => {
            if plain.is_some() {
                return Err(format!("both '{name}' and '{tensor}' are given"));
            }
            let v = T::from_data(d).ok_or_else(|| {
                format!("'{tensor}' must hold the input's threshold type ({})", std::any::type_name::<T>())
            })?;
            if v.is_empty() {
                return Err(format!("'{tensor}' is empty"));
            }
            Ok(Some(v))
        }
        None => Ok(plain.map(|v| v.into_iter().map(T::from_f32).collect())),
    }
}

fn ints(node: &NodeDesc, name: &str) -> Result<Vec<i64>, String> {
    Ok(ints_attr(node, name)?.unwrap_or_default())
}

fn u32_of(v: i64, what: &str) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("{what} {v} is negative or too large"))
}

/// The parts of an opset 1/3 tree ensemble, with the names of its weight attributes
/// (`class_*` or `target_*`).
pub struct V3<T> {
    pub forest: Forest<T>,
    pub base_values: Vec<T>,
    /// Every weight is >= 0 (the classifier's binary decision depends on it).
    pub all_positive: bool,
    /// The distinct class or target ids the weights name.
    pub distinct_ids: usize,
}

pub fn build_v3<T: Thr>(node: &NodeDesc, prefix: &str, targets: usize) -> Result<V3<T>, String> {
    let treeids = ints(node, "nodes_treeids")?;
    let nodeids = ints(node, "nodes_nodeids")?;
    let featureids = ints(node, "nodes_featureids")?;
    let trues = ints(node, "nodes_truenodeids")?;
    let falses = ints(node, "nodes_falsenodeids")?;
    let missing = ints(node, "nodes_missing_value_tracks_true")?;
    let modes = strings_attr(node, "nodes_modes")?.unwrap_or_default();
    let thresholds = values::<T>(node, "nodes_values")?.unwrap_or_default();
    let n = treeids.len();
    if n == 0 {
        return Err("the ensemble has no nodes".into());
    }
    for (name, len) in [
        ("nodes_nodeids", nodeids.len()),
        ("nodes_featureids", featureids.len()),
        ("nodes_truenodeids", trues.len()),
        ("nodes_falsenodeids", falses.len()),
        ("nodes_modes", modes.len()),
        ("nodes_values", thresholds.len()),
    ] {
        if len != n {
            return Err(format!("{name} has {len} entries for {n} nodes"));
        }
    }
    if missing.len() > n {
        return Err(format!("nodes_missing_value_tracks_true has {} entries for {n} nodes", missing.len()));
    }
    let mut by_id: HashMap<(i64, i64), u32> = HashMap::with_capacity(n);
    let mut nodes = Vec::with_capacity(n);
    let mut roots = Vec::new();
    let mut features = 0usize;
    for i in 0..n {
        if by_id.insert((treeids[i], nodeids[i]), i as u32).is_some() {
            return Err(format!("node {} of tree {} is listed twice", nodeids[i], treeids[i]));
        }
        // A tree starts wherever the tree id changes, at the node listed first (ORT's rule).
        if i == 0 || treeids[i] != treeids[i - 1] {
            roots.push(i as u32);
        }
        let mode = Mode::parse(&modes[i])?;
        let feature = if mode == Mode::Leaf { 0 } else { u32_of(featureids[i], "feature id")? };
        if mode != Mode::Leaf {
            features = features.max(feature as usize + 1);
        }
        nodes.push(Node {
            value: thresholds[i],
            feature,
            mode,
            missing_true: missing.get(i) == Some(&1),
            yes: 0,
            no: 0,
        });
    }
    for i in 0..n {
        if nodes[i].mode == Mode::Leaf {
            continue;
        }
        let child = |id: i64, which: &str| {
            by_id.get(&(treeids[i], id)).copied().ok_or_else(|| {
                format!("node {} of tree {}: its {which} node {id} does not exist", nodeids[i], treeids[i])
            })
        };
        nodes[i].yes = child(trues[i], "true")?;
        nodes[i].no = child(falses[i], "false")?;
    }
    // The weights, grouped by leaf.
    let ids = ints(node, &format!("{prefix}_ids"))?;
    let wnodes = ints(node, &format!("{prefix}_nodeids"))?;
    let wtrees = ints(node, &format!("{prefix}_treeids"))?;
    let w = values::<T>(node, &format!("{prefix}_weights"))?.unwrap_or_default();
    if wnodes.len() != ids.len() || wtrees.len() != ids.len() || w.len() != ids.len() {
        return Err(format!("the {prefix}_ids/nodeids/treeids/weights lists differ in length"));
    }
    let mut per_leaf: Vec<Vec<(u32, T)>> = vec![Vec::new(); n];
    let mut seen = Vec::new();
    let mut all_positive = true;
    for k in 0..ids.len() {
        let &leaf = by_id
            .get(&(wtrees[k], wnodes[k]))
            .ok_or_else(|| format!("a weight names node {} of tree {}, which does not exist", wnodes[k], wtrees[k]))?;
        let id = u32_of(ids[k], "target or class id")?;
        if id as usize >= targets {
            return Err(format!("{prefix} id {id} is outside 0..{targets}"));
        }
        if !seen.contains(&id) {
            seen.push(id);
        }
        if w[k] < T::ZERO {
            all_positive = false;
        }
        // ORT ignores weights on branch nodes.
        if nodes[leaf as usize].mode == Mode::Leaf {
            per_leaf[leaf as usize].push((id, w[k]));
        }
    }
    let mut weights = Vec::with_capacity(ids.len());
    for (i, list) in per_leaf.into_iter().enumerate() {
        if nodes[i].mode != Mode::Leaf {
            continue;
        }
        let Some(&(_, first)) = list.first() else {
            return Err(format!("leaf {} of tree {} has no weight", nodeids[i], treeids[i]));
        };
        nodes[i].value = first;
        nodes[i].yes = weights.len() as u32;
        nodes[i].no = list.len() as u32;
        weights.extend(list);
    }
    let base_values = values::<T>(node, "base_values")?.unwrap_or_default();
    let forest = Forest { nodes, roots, weights, features, targets };
    forest.check_acyclic()?;
    Ok(V3 { forest, base_values, all_positive, distinct_ids: seen.len() })
}

/// Opset 5's `TreeEnsemble`: (forest, aggregate code, post transform code).
pub fn build_v5<T: Thr>(node: &NodeDesc) -> Result<Forest<T>, String> {
    let tensor = |name: &str| -> Result<Vec<T>, String> {
        match tensor_attr(node, name)? {
            None => Ok(Vec::new()),
            Some(d) => T::from_data(d).ok_or_else(|| format!("'{name}' must hold the input's element type")),
        }
    };
    let leaf_weights = tensor("leaf_weights")?;
    let splits = tensor("nodes_splits")?;
    let members = tensor("membership_values")?;
    let modes: Vec<u8> = match tensor_attr(node, "nodes_modes")? {
        Some(Data::U8(v)) => v.to_vec(),
        Some(_) => return Err("'nodes_modes' must be a uint8 tensor".into()),
        None => Vec::new(),
    };
    let leaf_targets = ints(node, "leaf_targetids")?;
    let featureids = ints(node, "nodes_featureids")?;
    let trues = ints(node, "nodes_truenodeids")?;
    let falses = ints(node, "nodes_falsenodeids")?;
    let trueleafs = ints(node, "nodes_trueleafs")?;
    let falseleafs = ints(node, "nodes_falseleafs")?;
    let missing = ints(node, "nodes_missing_value_tracks_true")?;
    let tree_roots = ints(node, "tree_roots")?;
    let targets = crate::node_attrs::int_attr(node, "n_targets", 0)?;
    let targets = usize::try_from(targets).ok().filter(|&t| t > 0).ok_or("n_targets must be positive")?;
    let n = modes.len();
    for (name, len) in [
        ("nodes_featureids", featureids.len()),
        ("nodes_splits", splits.len()),
        ("nodes_truenodeids", trues.len()),
        ("nodes_falsenodeids", falses.len()),
        ("nodes_trueleafs", trueleafs.len()),
        ("nodes_falseleafs", falseleafs.len()),
    ] {
        if len != n {
            return Err(format!("{name} has {len} entries for {n} nodes"));
        }
    }
    if !missing.is_empty() && missing.len() != n {
        return Err(format!("nodes_missing_value_tracks_true has {} entries for {n} nodes", missing.len()));
    }
    if leaf_targets.len() != leaf_weights.len() {
        return Err("leaf_targetids and leaf_weights differ in length".into());
    }
    // The membership sets, NaN-separated, one per BRANCH_MEMBER node in node order.
    let mut sets: Vec<Vec<T>> = vec![Vec::new(); n];
    let mut at = 0;
    for (i, &m) in modes.iter().enumerate() {
        if m == 6 {
            while at < members.len() && !members[at].to_f64().is_nan() {
                sets[i].push(members[at]);
                at += 1;
            }
            at += 1;
            if sets[i].is_empty() {
                return Err(format!("set-membership node {i} has an empty set"));
            }
        }
    }
    let mut b = V5 {
        f: Forest { nodes: Vec::new(), roots: Vec::new(), weights: Vec::new(), features: 0, targets },
        leaf_weights: &leaf_weights,
        leaf_targets: &leaf_targets,
        modes: &modes,
        splits: &splits,
        sets: &sets,
        featureids: &featureids,
        trues: &trues,
        falses: &falses,
        trueleafs: &trueleafs,
        falseleafs: &falseleafs,
        missing: &missing,
    };
    for &r in &tree_roots {
        let r = usize::try_from(r).map_err(|_| format!("tree root {r} is negative"))?;
        let is_leaf = match (trues.get(r), falses.get(r)) {
            (Some(t), Some(f)) => t == f,
            _ => true,
        };
        let root = b.add(r, is_leaf, 0)?;
        b.f.roots.push(root);
    }
    if b.f.roots.is_empty() {
        return Err("the ensemble has no trees".into());
    }
    Ok(b.f)
}

struct V5<'a, T> {
    f: Forest<T>,
    leaf_weights: &'a [T],
    leaf_targets: &'a [i64],
    modes: &'a [u8],
    splits: &'a [T],
    sets: &'a [Vec<T>],
    featureids: &'a [i64],
    trues: &'a [i64],
    falses: &'a [i64],
    trueleafs: &'a [i64],
    falseleafs: &'a [i64],
    missing: &'a [i64],
}

impl<T: Thr> V5<'_, T> {
    /// Adds the subtree at node (or leaf) `i` and returns its index.
    fn add(&mut self, i: usize, is_leaf: bool, depth: usize) -> Result<u32, String> {
        if depth > 2000 {
            return Err("a tree is deeper than 2000 levels (or has a cycle)".into());
        }
        let at = self.f.nodes.len() as u32;
        if is_leaf {
            let (Some(&w), Some(&t)) = (self.leaf_weights.get(i), self.leaf_targets.get(i)) else {
                return Err(format!("leaf {i} is outside the leaf lists"));
            };
            let t = u32_of(t, "leaf target id")?;
            if t as usize >= self.f.targets {
                return Err(format!("leaf target id {t} is outside 0..{}", self.f.targets));
            }
            let first = self.f.weights.len() as u32;
            self.f.weights.push((t, w));
            self.f.nodes.push(Node { value: w, feature: 0, mode: Mode::Leaf, missing_true: false, yes: first, no: 1 });
            return Ok(at);
        }
        let Some(&m) = self.modes.get(i) else { return Err(format!("node {i} is outside the node lists")) };
        let feature = u32_of(self.featureids[i], "feature id")?;
        self.f.features = self.f.features.max(feature as usize + 1);
        let missing_true = self.missing.get(i) == Some(&1);
        let (mode, tests): (Mode, Vec<T>) = match m {
            0 => (Mode::Leq, vec![self.splits[i]]),
            1 => (Mode::Lt, vec![self.splits[i]]),
            2 => (Mode::Gte, vec![self.splits[i]]),
            3 => (Mode::Gt, vec![self.splits[i]]),
            4 => (Mode::Eq, vec![self.splits[i]]),
            5 => (Mode::Neq, vec![self.splits[i]]),
            6 => (Mode::Eq, self.sets[i].clone()),
            _ => return Err(format!("node mode {m} is not 0..=6")),
        };
        // A chain of tests sharing one true subtree; the last one's false goes on.
        for &v in &tests {
            self.f.nodes.push(Node { value: v, feature, mode, missing_true, yes: 0, no: 0 });
        }
        let child = |v: i64| usize::try_from(v).map_err(|_| format!("child {v} is negative"));
        let yes = self.add(child(self.trues[i])?, self.trueleafs[i] != 0, depth + 1)?;
        let no = self.add(child(self.falses[i])?, self.falseleafs[i] != 0, depth + 1)?;
        let k = tests.len() as u32;
        for j in 0..k {
            let n = &mut self.f.nodes[(at + j) as usize];
            n.yes = yes;
            n.no = if j + 1 < k { at + j + 1 } else { no };
        }
        Ok(at)
    }
}

impl<T: Thr> Forest<T> {
    /// Fails if a branch can reach itself (ORT would loop forever).
    fn check_acyclic(&self) -> Result<(), String> {
        // 0 = unseen, 1 = on the current path, 2 = done.
        let mut state = vec![0u8; self.nodes.len()];
        let mut stack: Vec<(u32, bool)> = Vec::new();
        for &r in &self.roots {
            stack.push((r, false));
            while let Some((i, children_done)) = stack.pop() {
                let n = &self.nodes[i as usize];
                if children_done {
                    state[i as usize] = 2;
                    continue;
                }
                match state[i as usize] {
                    2 => continue,
                    1 => return Err("a tree has a cycle".into()),
                    _ => {}
                }
                state[i as usize] = 1;
                stack.push((i, true));
                if n.mode != Mode::Leaf {
                    for c in [n.yes, n.no] {
                        if state[c as usize] == 1 {
                            return Err("a tree has a cycle".into());
                        }
                        if state[c as usize] == 0 {
                            stack.push((c, false));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The leaf row `x` reaches from root `r`. `x` has at least `self.features` elements.
    #[inline]
    pub fn leaf<E: Elem>(&self, r: u32, x: &[E]) -> &Node<T> {
        let mut n = &self.nodes[r as usize];
        loop {
            let go = match n.mode {
                Mode::Leaf => return n,
                mode => {
                    let e = x[n.feature as usize];
                    let v = T::of(e);
                    let pass = match mode {
                        Mode::Leq => v <= n.value,
                        Mode::Lt => v < n.value,
                        Mode::Gte => v >= n.value,
                        Mode::Gt => v > n.value,
                        Mode::Eq => v == n.value,
                        _ => v != n.value,
                    };
                    pass || (n.missing_true && e.nan())
                }
            };
            n = &self.nodes[if go { n.yes } else { n.no } as usize];
        }
    }
}
