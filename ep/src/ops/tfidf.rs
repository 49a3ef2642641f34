//! TfIdfVectorizer (opset 9) over int32 / int64 tokens: counts of the pool's n-grams
//! (with skips) per row, weighted as TF, IDF or TFIDF. The pool is a trie built at compile.
//! String tokens are not claimed.

use std::sync::Arc;

use super::op::util::{bad_types, check_attrs, check_inputs, input_type, output_type};
use super::{Op, RunIn, ShapeError, ShapeIn};
use crate::data::{Data, DataMut};
use crate::graph::{dtype, NodeDesc, Shape};
use crate::node_attrs::{int_attr, ints_attr, string_attr};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Weighting {
    Tf,
    Idf,
    TfIdf,
}

/// A trie node: the n-gram ending here (its 1-based id, 0 for none) and the children by
/// token, sorted.
#[derive(Debug, Default)]
struct Trie {
    id: usize,
    children: Vec<(i64, usize)>,
}

#[derive(Debug)]
struct TfIdf {
    weighting: Weighting,
    min_gram: usize,
    max_gram: usize,
    max_skip: usize,
    /// Output position of n-gram id `k + 1`.
    indexes: Vec<usize>,
    out_len: usize,
    weights: Vec<f32>,
    trie: Vec<Trie>,
}

fn nonneg(v: i64, what: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("{what} {v} is negative"))
}

pub fn tfidf(node: &NodeDesc, _output: usize) -> Result<Arc<dyn Op>, String> {
    if node.attr("pool_strings").is_some() {
        return Err("TfIdfVectorizer over strings makes no tensor Rivet holds (pool_strings)".into());
    }
    check_attrs(
        node,
        &[
            "max_gram_length",
            "min_gram_length",
            "max_skip_count",
            "mode",
            "ngram_counts",
            "ngram_indexes",
            "pool_int64s",
            "weights",
        ],
    )?;
    check_inputs(node, 1, 1)?;
    if !matches!(input_type(node, 0), dtype::INT32 | dtype::INT64) || output_type(node, 0) != dtype::FLOAT {
        return Err(bad_types(node, "int32 or int64 tokens in, float32 out"));
    }
    let weighting = match string_attr(node, "mode", "")? {
        "TF" => Weighting::Tf,
        "IDF" => Weighting::Idf,
        "TFIDF" => Weighting::TfIdf,
        m => return Err(format!("TfIdfVectorizer mode '{m}' is not TF, IDF or TFIDF")),
    };
    let min_gram = nonneg(int_attr(node, "min_gram_length", 0)?, "min_gram_length")?;
    let max_gram = nonneg(int_attr(node, "max_gram_length", 0)?, "max_gram_length")?;
    let max_skip = nonneg(int_attr(node, "max_skip_count", 0)?, "max_skip_count")?;
    if min_gram < 1 || max_gram < min_gram {
        return Err(format!("gram lengths {min_gram}..={max_gram} are not 1 <= min <= max"));
    }
    let counts = ints_attr(node, "ngram_counts")?.unwrap_or_default();
    let indexes: Vec<usize> = ints_attr(node, "ngram_indexes")?
        .unwrap_or_default()
        .into_iter()
        .map(|v| nonneg(v, "ngram index"))
        .collect::<Result<_, _>>()?;
    let pool = ints_attr(node, "pool_int64s")?.unwrap_or_default();
    let weights = super::ml::floats_attr(node, "weights")?.unwrap_or_default();
    let out_len = indexes.iter().max().map_or(0, |m| m + 1);
    if out_len == 0 {
        return Err("TfIdfVectorizer needs ngram_indexes".into());
    }
    if !weights.is_empty() && weights.len() < out_len {
        return Err(format!("{} weights for {out_len} outputs", weights.len()));
    }
    // The pool: group `i` holds n-grams of length i + 1, from counts[i] to counts[i + 1].
    let mut trie = vec![Trie::default()];
    let mut id = 1;
    for (i, &start) in counts.iter().enumerate() {
        let size = i + 1;
        let start = nonneg(start, "ngram count")?;
        let end = match counts.get(i + 1) {
            Some(&e) => nonneg(e, "ngram count")?,
            None => pool.len(),
        };
        if start > end || end > pool.len() {
            return Err(format!("ngram_counts[{i}] = {start} is outside the pool of {}", pool.len()));
        }
        let grams = (end - start) / size;
        if size < min_gram || size > max_gram {
            id += grams;
            continue;
        }
        for g in 0..grams {
            let mut at = 0;
            for &token in &pool[start + g * size..start + (g + 1) * size] {
                at = match trie[at].children.iter().find(|(t, _)| *t == token) {
                    Some(&(_, c)) => c,
                    None => {
                        trie.push(Trie::default());
                        let c = trie.len() - 1;
                        trie[at].children.push((token, c));
                        c
                    }
                };
            }
            if id > indexes.len() {
                return Err(format!("n-gram {id} has no entry in ngram_indexes ({} entries)", indexes.len()));
            }
            trie[at].id = id;
            id += 1;
        }
    }
    for t in &mut trie {
        t.children.sort_unstable();
    }
    Ok(Arc::new(TfIdf { weighting, min_gram, max_gram, max_skip, indexes, out_len, weights, trie }))
}

impl TfIdf {
    fn child(&self, at: usize, token: i64) -> Option<usize> {
        let c = &self.trie[at].children;
        c.binary_search_by_key(&token, |&(t, _)| t).ok().map(|k| c[k].1)
    }

    /// Adds the row's n-gram counts to `counts` (one per output position).
    fn count_row(&self, row: &[i64], counts: &mut [f32]) {
        let mut first_size = self.min_gram;
        for skip in 1..=self.max_skip + 1 {
            for start in 0..row.len() {
                if start + skip * (first_size - 1) >= row.len() {
                    break;
                }
                let (mut at, mut size, mut item) = (0, 1, start);
                while !self.trie[at].children.is_empty() && size <= self.max_gram && item < row.len() {
                    let Some(next) = self.child(at, row[item]) else { break };
                    let id = self.trie[next].id;
                    if size >= first_size && id != 0 {
                        counts[self.indexes[id - 1]] += 1.0;
                    }
                    at = next;
                    size += 1;
                    item += skip;
                }
            }
            // Unigrams are counted once, not once per skip.
            if first_size == 1 {
                first_size = 2;
                if first_size > self.max_gram {
                    break;
                }
            }
        }
    }
}

impl Op for TfIdf {
    fn shape(&self, x: &ShapeIn<'_>) -> Result<Shape, ShapeError> {
        match x.shapes[0] {
            [] | [_] => Ok(Shape::from_slice(&[self.out_len])),
            [b, _] if *b > 0 => Ok(Shape::from_slice(&[*b, self.out_len])),
            s => Err(format!("the input must be [C] or [B, C] with B > 0, got {s:?}").into()),
        }
    }

    fn run(&self, x: RunIn<'_, '_>, out: &mut DataMut<'_>) -> Result<(), String> {
        let DataMut::F32(y) = out else { return Err("the output must be float32".into()) };
        let c = match x.shapes[0] {
            [] => 1,
            [c] | [_, c] => *c,
            _ => return Err("the input must be [C] or [B, C]".into()),
        };
        y.fill(0.0);
        let tokens = &mut x.scratch.i64;
        match x.ins[0] {
            Data::I64(v) => {
                tokens.clear();
                tokens.extend_from_slice(v);
            }
            Data::I32(v) => {
                tokens.clear();
                tokens.extend(v.iter().map(|&t| t as i64));
            }
            _ => return Err("the input must be int32 or int64".into()),
        }
        if c > 0 {
            for (row, counts) in tokens.chunks_exact(c).zip(y.chunks_exact_mut(self.out_len)) {
                self.count_row(row, counts);
            }
        }
        for row in y.chunks_exact_mut(self.out_len) {
            for (i, v) in row.iter_mut().enumerate() {
                let w = self.weights.get(i).copied();
                *v = match (self.weighting, w) {
                    (Weighting::Tf, _) => *v,
                    (Weighting::Idf, Some(w)) => {
                        if *v > 0.0 {
                            w
                        } else {
                            0.0
                        }
                    }
                    (Weighting::Idf, None) => {
                        if *v > 0.0 {
                            1.0
                        } else {
                            0.0
                        }
                    }
                    (Weighting::TfIdf, Some(w)) => w * *v,
                    (Weighting::TfIdf, None) => *v,
                };
            }
        }
        Ok(())
    }
}
