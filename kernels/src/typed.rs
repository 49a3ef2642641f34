//! Kernels over element types other than f32: conversions (half floats computed in f32),
//! integer and f64 arithmetic, comparisons and boolean logic, all with numpy broadcasting
//! of any number of inputs. These are the transformer graphs' index and mask ops; they
//! are simple strided loops, not the tuned f32 paths.

use smallvec::SmallVec;

type Dims = SmallVec<[usize; 8]>;

/// IEEE binary16 bits to f32 (exact).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let man = (h & 0x3ff) as u32;
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: normalise the mantissa.
            let shift = m.leading_zeros() - 21; // bring the top set bit to bit 10
            let m = (m << shift) & 0x3ff;
            sign | ((113 - shift) << 23) | (m << 13)
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, m) => sign | 0x7fc0_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// f32 to IEEE binary16 bits, rounding to nearest even; overflow gives ±Inf, NaN stays NaN.
pub fn f32_to_f16(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 | (man >> 13) as u16 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        // Subnormal or zero in f16: shift the full mantissa (with its implicit bit) right.
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rest = m & ((1u32 << shift) - 1);
        let mut out = m >> shift;
        if rest > half || (rest == half && out & 1 == 1) {
            out += 1;
        }
        return sign | out as u16;
    }
    let mut out = ((e as u32) << 10) | (man >> 13);
    let rest = man & 0x1fff;
    if rest > 0x1000 || (rest == 0x1000 && out & 1 == 1) {
        out += 1; // may carry into the exponent, up to Inf: still correct
    }
    sign | out as u16
}

/// bfloat16 bits to f32 (exact).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// f32 to bfloat16 bits, rounding to nearest even; NaN stays NaN.
pub fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let round = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

/// Element types the arithmetic kernels run on: the integers and f32 / f64.
pub trait Number: Copy + PartialOrd + Default + Send + Sync + 'static {
    fn add(self, b: Self) -> Self;
    fn sub(self, b: Self) -> Self;
    fn mul(self, b: Self) -> Self;
    /// `None` for an integer division by zero.
    fn div(self, b: Self) -> Option<Self>;
    /// ONNX Mod: with `fmod` the sign of the dividend (C `fmod`), else of the divisor
    /// (Python `%`). `None` for an integer division by zero.
    fn modulo(self, b: Self, fmod: bool) -> Option<Self>;
    fn neg(self) -> Self;
    fn abs(self) -> Self;
    fn is_zero(self) -> bool;
    fn is_nan(self) -> bool;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

macro_rules! int_number {
    ($($t:ty),*) => {$(
        impl Number for $t {
            #[inline] fn add(self, b: Self) -> Self { self.wrapping_add(b) }
            #[inline] fn sub(self, b: Self) -> Self { self.wrapping_sub(b) }
            #[inline] fn mul(self, b: Self) -> Self { self.wrapping_mul(b) }
            #[inline] fn div(self, b: Self) -> Option<Self> {
                if b == 0 { None } else { Some(self.wrapping_div(b)) }
            }
            #[inline] fn modulo(self, b: Self, fmod: bool) -> Option<Self> {
                if b == 0 {
                    return None;
                }
                let r = self.wrapping_rem(b);
                #[allow(unused_comparisons)]
                let opposite = (r < 0) != (b < 0);
                Some(if !fmod && r != 0 && opposite { r.wrapping_add(b) } else { r })
            }
            #[inline] fn neg(self) -> Self { (0 as $t).wrapping_sub(self) }
            #[inline] fn abs(self) -> Self {
                #[allow(unused_comparisons)]
                let negative = self < 0;
                if negative { self.neg() } else { self }
            }
            #[inline] fn is_zero(self) -> bool { self == 0 }
            #[inline] fn is_nan(self) -> bool { false }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn from_f64(v: f64) -> Self { v as $t }
        }
    )*};
}
int_number!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! float_number {
    ($($t:ty),*) => {$(
        impl Number for $t {
            #[inline] fn add(self, b: Self) -> Self { self + b }
            #[inline] fn sub(self, b: Self) -> Self { self - b }
            #[inline] fn mul(self, b: Self) -> Self { self * b }
            #[inline] fn div(self, b: Self) -> Option<Self> { Some(self / b) }
            #[inline] fn modulo(self, b: Self, fmod: bool) -> Option<Self> {
                let r = self % b;
                Some(if !fmod && r != 0.0 && (r < 0.0) != (b < 0.0) { r + b } else { r })
            }
            #[inline] fn neg(self) -> Self { -self }
            #[inline] fn abs(self) -> Self { self.abs() }
            #[inline] fn is_zero(self) -> bool { self == 0.0 }
            #[inline] fn is_nan(self) -> bool { self.is_nan() }
            #[inline] fn to_f64(self) -> f64 { self as f64 }
            #[inline] fn from_f64(v: f64) -> Self { v as $t }
        }
    )*};
}
float_number!(f32, f64);

/// Arithmetic on any [`Number`] type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
    Mod { fmod: bool },
}

impl Arith {
    /// `None` for an integer division by zero.
    #[inline]
    pub fn apply<T: Number>(self, a: T, b: T) -> Option<T> {
        Some(match self {
            Arith::Add => a.add(b),
            Arith::Sub => a.sub(b),
            Arith::Mul => a.mul(b),
            Arith::Div => return a.div(b),
            Arith::Mod { fmod } => return a.modulo(b, fmod),
            // NaN propagates, as in ORT.
            Arith::Max => {
                if a.is_nan() || b.is_nan() {
                    return Some(if a.is_nan() { a } else { b });
                }
                if a >= b {
                    a
                } else {
                    b
                }
            }
            Arith::Min => {
                if a.is_nan() || b.is_nan() {
                    return Some(if a.is_nan() { a } else { b });
                }
                if a <= b {
                    a
                } else {
                    b
                }
            }
        })
    }
}

/// Comparisons, with a bool (0 / 1 byte) result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compare {
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

impl Compare {
    #[inline]
    pub fn apply<T: PartialOrd>(self, a: T, b: T) -> u8 {
        (match self {
            Compare::Equal => a == b,
            Compare::Less => a < b,
            Compare::LessOrEqual => a <= b,
            Compare::Greater => a > b,
            Compare::GreaterOrEqual => a >= b,
        }) as u8
    }
}

/// Boolean logic on 0 / non-0 bytes, with a 0 / 1 result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Logic {
    And,
    Or,
    Xor,
}

impl Logic {
    #[inline]
    pub fn apply(self, a: u8, b: u8) -> u8 {
        let (a, b) = (a != 0, b != 0);
        (match self {
            Logic::And => a && b,
            Logic::Or => a || b,
            Logic::Xor => a ^ b,
        }) as u8
    }
}

/// Bitwise ops and shifts on integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitOp {
    And,
    Or,
    Xor,
    /// Shifts by the amount in `b`; shifting by the width or more gives 0.
    ShiftLeft,
    ShiftRight,
}

/// Integers, for [`BitOp`].
pub trait Bits: Copy + Default + Send + Sync + 'static {
    fn bit(self, op: BitOp, b: Self) -> Self;
    fn not(self) -> Self;
}

macro_rules! bits {
    ($($t:ty),*) => {$(
        impl Bits for $t {
            #[inline]
            fn bit(self, op: BitOp, b: Self) -> Self {
                // Shift amounts are unsigned in the schema; a negative or too large one gives 0.
                let amount = u32::try_from(b).ok();
                match op {
                    BitOp::And => self & b,
                    BitOp::Or => self | b,
                    BitOp::Xor => self ^ b,
                    BitOp::ShiftLeft => amount.and_then(|s| self.checked_shl(s)).unwrap_or(0),
                    BitOp::ShiftRight => amount.and_then(|s| self.checked_shr(s)).unwrap_or(0),
                }
            }
            #[inline]
            fn not(self) -> Self { !self }
        }
    )*};
}
bits!(i8, i16, i32, i64, u8, u16, u32, u64);

/// GatherElements along the middle axis of `x` viewed as `[outer, n, inner]`: `indices`
/// (viewed as `[outer, m, inner_i]`, shaped like the output) picks, for each output
/// element, the element of its own column at that index along the axis. The other axes
/// of `indices` may be smaller than `x`'s; `shape_i` and `shape_x` give both.
pub fn gather_elements<T: Copy, I: Copy + Into<i64>>(
    x: &[T],
    shape_x: &[usize],
    indices: &[I],
    shape_i: &[usize],
    axis: usize,
    y: &mut [T],
) -> Result<(), i64> {
    let rank = shape_x.len();
    let mut strides = [0usize; 8];
    let mut acc = 1;
    for a in (0..rank).rev() {
        strides[a] = acc;
        acc *= shape_x[a];
    }
    let n = shape_x[axis] as i64;
    let mut index = [0usize; 8];
    for (o, &raw) in y.iter_mut().zip(indices) {
        let raw: i64 = raw.into();
        let idx = if raw < 0 { raw + n } else { raw };
        if idx < 0 || idx >= n {
            return Err(raw);
        }
        let mut src = 0;
        for a in 0..rank {
            src += strides[a] * if a == axis { idx as usize } else { index[a] };
        }
        *o = x[src];
        for a in (0..rank).rev() {
            index[a] += 1;
            if index[a] < shape_i[a] {
                break;
            }
            index[a] = 0;
        }
    }
    Ok(())
}

/// Element strides of an input of `shape` along the axes of `out` (right-aligned numpy
/// broadcasting): 0 on axes the input broadcasts. The caller has checked the shapes.
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Dims {
    let lead = out.len() - shape.len();
    let mut st: Dims = SmallVec::from_elem(0, out.len());
    let mut acc = 1;
    for i in (0..shape.len()).rev() {
        if shape[i] != 1 {
            st[lead + i] = acc;
        }
        acc *= shape[i];
    }
    st
}

/// Calls `f(out_index, offsets)` for every element of `out` in row-major order, with the
/// element offset of each of the `N` inputs (broadcast by `strides`).
fn for_each_offset<const N: usize>(out: &[usize], strides: [&[usize]; N], mut f: impl FnMut(usize, [usize; N])) {
    for_each_row(out, strides, |k, off, len, step| {
        let mut off = off;
        for t in 0..len {
            f(k + t, off);
            for (o, s) in off.iter_mut().zip(step) {
                *o += s;
            }
        }
    });
}

/// Calls `f(out_index, offsets, len, steps)` for every row of `out`'s innermost axis (one
/// row of one element for a scalar), with each input's offset at the row's start and its
/// stride along the row: the odometer steps once a row, not once an element (a T5
/// position-bucket compare of int64 [1, 64, 64] against a scalar took 2 ns an element).
fn for_each_row<const N: usize>(
    out: &[usize],
    strides: [&[usize]; N],
    mut f: impl FnMut(usize, [usize; N], usize, [usize; N]),
) {
    let total: usize = out.iter().product();
    if total == 0 {
        return;
    }
    let rank = out.len();
    let (len, step) = match rank {
        0 => (1, [0; N]),
        _ => (out[rank - 1], std::array::from_fn(|n| strides[n][rank - 1])),
    };
    let outer = rank.saturating_sub(1);
    let mut index = [0usize; 8];
    let mut off = [0usize; N];
    for k in (0..total).step_by(len) {
        f(k, off, len, step);
        for a in (0..outer).rev() {
            index[a] += 1;
            for (o, s) in off.iter_mut().zip(&strides) {
                *o += s[a];
            }
            if index[a] < out[a] {
                break;
            }
            for (o, s) in off.iter_mut().zip(&strides) {
                *o -= s[a] * out[a];
            }
            index[a] = 0;
        }
    }
}

/// Calls `f(out, a, b)` for every output element with the offsets of the two inputs
/// broadcast to `out_shape` (for inputs of different element types).
pub fn broadcast2(sa: &[usize], sb: &[usize], out_shape: &[usize], mut f: impl FnMut(usize, usize, usize)) {
    let (ta, tb) = (broadcast_strides(sa, out_shape), broadcast_strides(sb, out_shape));
    for_each_offset(out_shape, [&ta, &tb], |k, [i, j]| f(k, i, j));
}

/// `y = f(a, b)` with numpy broadcasting to `out_shape`. Equal shapes take a flat loop.
pub fn map2<A: Copy, B: Copy, O>(
    a: &[A],
    sa: &[usize],
    b: &[B],
    sb: &[usize],
    out_shape: &[usize],
    y: &mut [O],
    mut f: impl FnMut(A, B) -> O,
) {
    if a.len() == y.len() && b.len() == y.len() {
        for ((o, &x), &z) in y.iter_mut().zip(a).zip(b) {
            *o = f(x, z);
        }
        return;
    }
    let (ta, tb) = (broadcast_strides(sa, out_shape), broadcast_strides(sb, out_shape));
    for_each_row(out_shape, [&ta, &tb], |k, [i, j], len, [si, sj]| {
        let y = &mut y[k..k + len];
        match (si, sj) {
            // The common rows: both inputs along the row, or one of them a constant.
            (1, 1) => y.iter_mut().zip(&a[i..i + len]).zip(&b[j..j + len]).for_each(|((o, &x), &z)| *o = f(x, z)),
            (1, 0) => y.iter_mut().zip(&a[i..i + len]).for_each(|(o, &x)| *o = f(x, b[j])),
            (0, 1) => y.iter_mut().zip(&b[j..j + len]).for_each(|(o, &z)| *o = f(a[i], z)),
            _ => y.iter_mut().enumerate().for_each(|(t, o)| *o = f(a[i + t * si], b[j + t * sj])),
        }
    });
}

/// `y = f(a, b, c)` with numpy broadcasting of all three to `out_shape` (Where).
#[allow(clippy::too_many_arguments)]
pub fn map3<A: Copy, B: Copy, C: Copy, O>(
    a: &[A],
    sa: &[usize],
    b: &[B],
    sb: &[usize],
    c: &[C],
    sc: &[usize],
    out_shape: &[usize],
    y: &mut [O],
    mut f: impl FnMut(A, B, C) -> O,
) {
    let (ta, tb, tc) =
        (broadcast_strides(sa, out_shape), broadcast_strides(sb, out_shape), broadcast_strides(sc, out_shape));
    for_each_offset(out_shape, [&ta, &tb, &tc], |k, [i, j, l]| y[k] = f(a[i], b[j], c[l]));
}

/// Index of the largest (`max`) or smallest element along the middle axis of `x` viewed as
/// `[outer, n, inner]`; ties go to the first index, or the last with `last`. Comparisons
/// with NaN are false, so a NaN is chosen only when it comes first.
pub fn arg_reduce<T: PartialOrd + Copy>(
    x: &[T],
    outer: usize,
    n: usize,
    inner: usize,
    max: bool,
    last: bool,
    y: &mut [i64],
) {
    for o in 0..outer {
        for i in 0..inner {
            let at = |k: usize| x[(o * n + k) * inner + i];
            let mut best = 0usize;
            for k in 1..n {
                let (v, b) = (at(k), at(best));
                let better = if max { v > b } else { v < b };
                if better || (last && v == b) {
                    best = k;
                }
            }
            y[o * inner + i] = best as i64;
        }
    }
}

/// Gather along `axis` of `x` viewed as `[outer, n, inner]`: for each index, copies its
/// `inner`-element row. Negative indices count from the end; `Err` names an index out of
/// `[-n, n)`.
pub fn gather<T: Copy, I: Copy + Into<i64>>(
    x: &[T],
    outer: usize,
    n: usize,
    inner: usize,
    indices: &[I],
    y: &mut [T],
) -> Result<(), i64> {
    let per = indices.len() * inner;
    for o in 0..outer {
        for (k, &raw) in indices.iter().enumerate() {
            let raw: i64 = raw.into();
            let idx = if raw < 0 { raw + n as i64 } else { raw };
            if idx < 0 || idx >= n as i64 {
                return Err(raw);
            }
            let src = (o * n + idx as usize) * inner;
            let dst = o * per + k * inner;
            y[dst..dst + inner].copy_from_slice(&x[src..src + inner]);
        }
    }
    Ok(())
}

/// Gathers a strided box of `x` (per axis: first index, step, count) into `dst`. The
/// innermost axes read with step 1 (the last of them, and those outside it while each
/// one inside is taken whole) are copied as runs: a rotary embedding's halves of 16 of
/// 32 floats took 1.5 ns a float one at a time (12 us for 8 heads of 64 positions).
pub fn slice<T: Copy>(x: &[T], shape: &[usize], plan: &[(i64, i64, usize)], dst: &mut [T]) {
    let rank = shape.len();
    // Axes inner..rank are one contiguous run of `run` elements in x and in dst.
    let (mut inner, mut run) = (rank, 1usize);
    while inner > 0 {
        let (start, step, n) = plan[inner - 1];
        if step != 1 {
            break;
        }
        run *= n;
        inner -= 1;
        if start != 0 || n != shape[inner] {
            break;
        }
    }
    // Runs under 4 elements: one element at a time, the odometer over every axis.
    if run < 4 {
        (inner, run) = (rank, 1);
    }
    if dst.is_empty() {
        return;
    }
    let mut strides = [0i64; 8];
    let mut acc = 1i64;
    for a in (0..rank).rev() {
        strides[a] = acc;
        acc *= shape[a] as i64;
    }
    let mut src: i64 = (0..rank).map(|a| plan[a].0 * strides[a]).sum();
    let mut index = [0usize; 8];
    for chunk in dst.chunks_exact_mut(run) {
        let at = src as usize;
        if run == 1 {
            chunk[0] = x[at];
        } else {
            chunk.copy_from_slice(&x[at..at + run]);
        }
        for a in (0..inner).rev() {
            index[a] += 1;
            src += plan[a].1 * strides[a];
            if index[a] < plan[a].2 {
                break;
            }
            src -= plan[a].1 * strides[a] * plan[a].2 as i64;
            index[a] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Broadcast rows give each output its own inputs' elements: random shapes of rank 0
    /// to 4, every axis of each input 1 or the output's, against indices worked out one
    /// element at a time (map2 and, through the element walk, map3).
    #[test]
    fn broadcast_rows_match_each_elements_inputs() {
        let mut seed = 11u64;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) as usize) % n
        };
        for _ in 0..3000 {
            let rank = next(5);
            let out: Vec<usize> = (0..rank).map(|_| next(5)).collect();
            let mut input = |keep: usize| -> Vec<usize> {
                let drop = next(rank + 1).min(keep);
                out[drop..].iter().map(|&d| if next(2) == 0 { 1 } else { d }).collect()
            };
            let (sa, sb, sc) = (input(rank), input(rank), input(rank));
            let count = |s: &[usize]| s.iter().product::<usize>();
            let a: Vec<u32> = (0..count(&sa) as u32).collect();
            let b: Vec<u32> = (0..count(&sb) as u32).map(|v| v * 1000).collect();
            let c: Vec<u32> = (0..count(&sc) as u32).map(|v| v * 1_000_000).collect();
            let n = count(&out);
            // Input offset of output element k, axis by axis.
            let at = |s: &[usize], mut k: usize| {
                let (lead, mut off, mut acc) = (rank - s.len(), 0, 1);
                for ax in (0..rank).rev() {
                    let i = k % out[ax].max(1);
                    k /= out[ax].max(1);
                    if ax >= lead {
                        let d = s[ax - lead];
                        off += if d == 1 { 0 } else { i } * acc;
                        acc *= d;
                    }
                }
                off
            };
            let want: Vec<u32> = (0..n).map(|k| a[at(&sa, k)] + b[at(&sb, k)]).collect();
            let mut got = vec![u32::MAX; n];
            map2(&a, &sa, &b, &sb, &out, &mut got, |x, z| x + z);
            assert_eq!(got, want, "{sa:?} {sb:?} -> {out:?}");
            let want3: Vec<u32> = (0..n).map(|k| a[at(&sa, k)] + b[at(&sb, k)] + c[at(&sc, k)]).collect();
            let mut got3 = vec![u32::MAX; n];
            map3(&a, &sa, &b, &sb, &c, &sc, &out, &mut got3, |x, y, z| x + y + z);
            assert_eq!(got3, want3, "{sa:?} {sb:?} {sc:?} -> {out:?}");
        }
    }

    /// Runs and single elements give each output its input element: every axis's start,
    /// step (negative too) and count, whole inner axes merged into runs or not, ranks 1
    /// to 4, against the index worked out per element.
    #[test]
    fn slice_by_runs_matches_slice_by_elements() {
        let mut seed = 7u64;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((seed >> 33) as usize) % n
        };
        let mut runs = 0;
        for _ in 0..3000 {
            let rank = 1 + next(4);
            let shape: Vec<usize> = (0..rank).map(|_| 1 + next(9)).collect();
            let plan: Vec<(i64, i64, usize)> = shape
                .iter()
                .map(|&d| match next(4) {
                    0 => (0, 1, d),
                    1 => {
                        let start = next(d);
                        (start as i64, 1, 1 + next(d - start))
                    }
                    2 => (next(d) as i64, 2, 1),
                    _ => ((d - 1) as i64, -1, 1 + next(d)),
                })
                .collect();
            let x: Vec<u32> = (0..shape.iter().product::<usize>() as u32).collect();
            let n = plan.iter().map(|p| p.2).product();
            let mut got = vec![u32::MAX; n];
            slice(&x, &shape, &plan, &mut got);
            // Output element k's index along each axis, then its input element.
            let want: Vec<u32> = (0..n)
                .map(|mut k| {
                    let (mut at, mut stride) = (0i64, 1i64);
                    for (ax, &(start, step, count)) in plan.iter().enumerate().rev() {
                        at += (start + (k % count) as i64 * step) * stride;
                        k /= count;
                        stride *= shape[ax] as i64;
                    }
                    x[at as usize]
                })
                .collect();
            assert_eq!(got, want, "{shape:?} {plan:?}");
            runs += usize::from(plan.last().is_some_and(|p| p.1 == 1 && p.2 >= 4));
        }
        assert!(runs > 300, "{runs} boxes with runs");
    }

    #[test]
    fn f16_round_trips_every_value_and_rounds_to_nearest_even() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f16_to_f32(f32_to_f16(f)).is_nan());
            } else {
                assert_eq!(f32_to_f16(f), h, "{h:#x} -> {f}");
            }
        }
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24)); // smallest subnormal
        assert_eq!(f32_to_f16(65520.0), 0x7c00); // rounds up to Inf
        assert_eq!(f32_to_f16(65519.0), 0x7bff);
        // 1 + 2^-11 is halfway between 1 and the next f16: ties to even (1.0).
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        assert_eq!(f32_to_f16(2f32.powi(-25)), 0); // half the smallest subnormal: to even (0)
        assert_eq!(f32_to_f16(1.5 * 2f32.powi(-25)), 1);
        assert_eq!(f32_to_f16(-0.0), 0x8000);
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80); // tie to even
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8001)), 0x3f81);
        assert!(bf16_to_f32(f32_to_bf16(f32::NAN)).is_nan());
        assert_eq!(bf16_to_f32(0xc000), -2.0);
    }

    #[test]
    fn integer_mod_follows_the_divisor_sign_unless_fmod() {
        assert_eq!(Arith::Mod { fmod: false }.apply(-7i32, 3), Some(2));
        assert_eq!(Arith::Mod { fmod: false }.apply(7i32, -3), Some(-2));
        assert_eq!(Arith::Mod { fmod: true }.apply(-7i32, 3), Some(-1));
        assert_eq!(Arith::Mod { fmod: false }.apply(7u8, 3), Some(1));
        assert_eq!(Arith::Mod { fmod: false }.apply(-7.5f64, 2.0), Some(0.5));
        assert_eq!(Arith::Div.apply(1i64, 0), None);
        assert_eq!(Arith::Mod { fmod: false }.apply(1i64, 0), None);
        assert_eq!(Arith::Div.apply(i32::MIN, -1), Some(i32::MIN)); // wraps, no panic
    }

    #[test]
    fn broadcasting_three_inputs() {
        // cond [2, 1], x [3], y scalar -> [2, 3]
        let mut out = [0i32; 6];
        map3(&[1u8, 0], &[2, 1], &[1, 2, 3], &[3], &[9], &[], &[2, 3], &mut out, |c, x, y| if c != 0 { x } else { y });
        assert_eq!(out, [1, 2, 3, 9, 9, 9]);
        let mut cmp = [0u8; 6];
        map2(&[1i64, 5], &[2, 1], &[1, 2, 3], &[3], &[2, 3], &mut cmp, |a, b| Compare::Less.apply(a, b));
        assert_eq!(cmp, [0, 1, 1, 0, 0, 0]);
    }

    #[test]
    fn arg_reduce_ties_and_last_index() {
        let mut y = [0i64; 2];
        arg_reduce(&[1.0f32, 3.0, 3.0, 0.0, 0.0, -1.0], 2, 3, 1, true, false, &mut y);
        assert_eq!(y, [1, 0]);
        arg_reduce(&[1.0f32, 3.0, 3.0, 0.0, 0.0, -1.0], 2, 3, 1, true, true, &mut y);
        assert_eq!(y, [2, 1]);
        arg_reduce(&[1.0f32, 3.0, 3.0, 0.0, 0.0, -1.0], 2, 3, 1, false, false, &mut y);
        assert_eq!(y, [0, 2]);
    }

    #[test]
    fn gather_rejects_out_of_range_indices() {
        let mut y = [0f32; 4];
        assert_eq!(gather(&[1.0, 2.0, 3.0, 4.0], 1, 2, 2, &[1i64, -2], &mut y), Ok(()));
        assert_eq!(y, [3.0, 4.0, 1.0, 2.0]);
        assert_eq!(gather(&[1.0, 2.0, 3.0, 4.0], 1, 2, 2, &[2i32], &mut y[..2]), Err(2));
    }
}
