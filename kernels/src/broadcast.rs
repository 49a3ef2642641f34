//! Numpy-style multidirectional broadcasting of two shapes.

use smallvec::SmallVec;
use std::fmt;

type Dims = SmallVec<[usize; 8]>;

/// Broadcast plan for numpy-style multidirectional broadcasting of two inputs,
/// built once per shape pair.
///
/// Besides the output shape it stores a collapsed iteration space for the
/// general case: output axes of extent 1 are dropped and neighbouring axes
/// that are contiguous in both inputs are merged, so e.g. `[N, C, H, W] +
/// [C, 1, 1]` runs as `[N, C, H*W]` with rows of `H*W` elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Broadcast {
    out_shape: Dims,
    out_len: usize,
    pub(crate) a_len: usize,
    pub(crate) b_len: usize,
    kind: BroadcastKind,
    /// Collapsed output extents (none equal to 1), outermost first.
    pub(crate) dims: Dims,
    /// Element strides of `a` / `b` along `dims`; 0 on broadcast axes. The
    /// innermost stride is always 0 or 1.
    pub(crate) a_strides: Dims,
    pub(crate) b_strides: Dims,
}

/// The fast-path kind chosen by [`Broadcast::new`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BroadcastKind {
    /// Both inputs have as many elements as the output (equal shapes up to
    /// leading 1s): flat elementwise.
    SameShape,
    /// `a` has a single element (and `b` does not match the first case).
    ScalarA,
    /// `b` has a single element (and `a` does not match the first cases).
    ScalarB,
    /// Anything else: strided iteration over the collapsed shape.
    General,
}

/// The shapes cannot be broadcast.
///
/// `axis` is the offending axis of the (right-aligned) output, counted from
/// the left: `0 <= axis < max(a.len(), b.len())`. `Display` names it from the
/// right as numpy does, e.g. `shapes [2, 3] and [4] cannot be broadcast
/// (dimension -1: 3 vs 4)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BroadcastError {
    pub a: Vec<usize>,
    pub b: Vec<usize>,
    pub axis: usize,
}

impl fmt::Display for BroadcastError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rank = self.a.len().max(self.b.len());
        let from_right = rank.saturating_sub(self.axis); // >= 1 for a valid error
        let dim = |s: &[usize]| s.len().checked_sub(from_right).map_or_else(|| "-".to_string(), |i| s[i].to_string());
        write!(
            f,
            "shapes {:?} and {:?} cannot be broadcast (dimension -{from_right}: {} vs {})",
            self.a,
            self.b,
            dim(&self.a),
            dim(&self.b)
        )
    }
}

impl std::error::Error for BroadcastError {}

/// Extent of `shape` along output axis `i` of an output of rank `rank`
/// (1 for the implicit leading axes).
fn dim_at(shape: &[usize], rank: usize, i: usize) -> usize {
    let lead = rank - shape.len();
    if i < lead {
        1
    } else {
        shape[i - lead]
    }
}

impl Broadcast {
    /// Returns Err(BroadcastError) when the shapes cannot be broadcast (numpy
    /// rules: align right, each dim equal or one of them 1). Dims are usize;
    /// rank 0 (scalar) allowed; zero-sized dims allowed (0 with 1 -> 0; 0 with
    /// 0 -> 0; 0 with n>1 -> error).
    pub fn new(a: &[usize], b: &[usize]) -> Result<Broadcast, BroadcastError> {
        let rank = a.len().max(b.len());
        let mut out_shape = Dims::with_capacity(rank);
        for i in 0..rank {
            let (da, db) = (dim_at(a, rank, i), dim_at(b, rank, i));
            let d = if da == db || db == 1 {
                da
            } else if da == 1 {
                db
            } else {
                return Err(BroadcastError { a: a.to_vec(), b: b.to_vec(), axis: i });
            };
            out_shape.push(d);
        }
        let out_len = out_shape.iter().product();
        let a_len = a.iter().product();
        let b_len = b.iter().product();
        let kind = if a_len == out_len && b_len == out_len {
            BroadcastKind::SameShape
        } else if a_len == 1 {
            BroadcastKind::ScalarA
        } else if b_len == 1 {
            BroadcastKind::ScalarB
        } else {
            BroadcastKind::General
        };
        let (dims, a_strides, b_strides) = collapse(a, b, &out_shape);
        Ok(Broadcast { out_shape, out_len, a_len, b_len, kind, dims, a_strides, b_strides })
    }

    /// Output shape.
    pub fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    /// Output element count.
    pub fn out_len(&self) -> usize {
        self.out_len
    }

    /// The fast-path kind chosen (for tests and stats).
    pub fn kind(&self) -> BroadcastKind {
        self.kind
    }
}

/// Builds the collapsed iteration space (see [`Broadcast`]).
fn collapse(a: &[usize], b: &[usize], out: &[usize]) -> (Dims, Dims, Dims) {
    let rank = out.len();
    // Contiguous strides of each input along the output axes, 0 where the
    // input is broadcast (an extent-1 axis of an input never moves its index).
    let strides = |s: &[usize]| {
        let mut st: Dims = SmallVec::from_elem(0, rank);
        let mut acc = 1;
        for i in (0..rank).rev() {
            let d = dim_at(s, rank, i);
            st[i] = if d == 1 { 0 } else { acc };
            acc *= d;
        }
        st
    };
    let (sa, sb) = (strides(a), strides(b));
    let (mut dims, mut a_st, mut b_st) = (Dims::new(), Dims::new(), Dims::new());
    for i in 0..rank {
        let n = out[i];
        if n == 1 {
            continue;
        }
        if let (Some(last), Some(la), Some(lb)) = (dims.last_mut(), a_st.last_mut(), b_st.last_mut()) {
            // The previous axis steps over exactly one run of this one in both
            // inputs: merge them.
            if *la == sa[i] * n && *lb == sb[i] * n {
                *last *= n;
                *la = sa[i];
                *lb = sb[i];
                continue;
            }
        }
        dims.push(n);
        a_st.push(sa[i]);
        b_st.push(sb[i]);
    }
    (dims, a_st, b_st)
}
