//! Rows of a row-major matrix read where they are, as a microkernel's A operand: one
//! bounds check for the whole strip instead of one per row and depth step, and the rows'
//! addresses formed from a few base pointers and the row stride, as x86 addressing takes
//! them, rather than one slice per row (14 of them, spilled to the stack and reloaded
//! each depth step, with a bounds check each).

/// Up to `R` rows (`rows` of them) `lda` elements apart, each `kc` long, from the start
/// of `a`.
#[derive(Clone, Copy)]
pub(crate) struct StridedRows<'a, const R: usize> {
    a: &'a [f32],
    rows: usize,
    lda: usize,
    kc: usize,
}

impl<'a, const R: usize> StridedRows<'a, R> {
    /// Panics unless `1 <= rows <= R` and `a` holds the rows: `(rows - 1) * lda + kc`
    /// elements.
    #[inline(always)]
    pub(crate) fn new(a: &'a [f32], rows: usize, lda: usize, kc: usize) -> Self {
        assert!((1..=R).contains(&rows), "strided rows: {rows} rows in a strip of {R}");
        let need = (rows - 1).checked_mul(lda).and_then(|x| x.checked_add(kc)).expect("rows fit in memory");
        assert!(
            need <= a.len(),
            "strided rows: {rows} rows of {kc} at stride {lda} need {need} elements, have {}",
            a.len()
        );
        StridedRows { a, rows, lda, kc }
    }

    /// The rows' depth.
    #[inline(always)]
    pub(crate) fn depth(&self) -> usize {
        self.kc
    }

    /// Calls `step(p, a)` for each depth `p` in `0..kc`, in order, with `a(r)` row `r`'s
    /// element at that depth, for `r < USED`. Panics if the view has fewer than `USED`
    /// rows (once, before the loop).
    #[inline(always)]
    pub(crate) fn each_depth<const USED: usize>(self, mut step: impl FnMut(usize, &dyn Fn(usize) -> f32)) {
        let StridedRows { a, rows, lda, kc } = self;
        assert!(USED <= rows, "a kernel of {USED} rows on a view of {rows}");
        let base = a.as_ptr();
        for p in 0..kc {
            step(p, &|r| {
                assert!(r < USED, "row {r} of {USED}");
                // SAFETY: r < USED <= rows and p < kc, so r * lda + p < (rows - 1) * lda +
                // kc, which `new` checked is at most a.len(): the element is inside `a`.
                unsafe { *base.add(r * lda + p) }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StridedRows;

    /// Each depth step sees row r's element at that depth, r * lda + p, in order.
    #[test]
    fn each_depth_reads_the_rows_at_their_stride() {
        let a: Vec<f32> = (0..40).map(|i| i as f32).collect();
        let rows = StridedRows::<4>::new(&a[3..], 3, 10, 5);
        let mut seen = Vec::new();
        rows.each_depth::<3>(|p, ar| seen.push((p, [ar(0), ar(1), ar(2)])));
        let want: Vec<_> = (0..5).map(|p| (p, [3.0 + p as f32, 13.0 + p as f32, 23.0 + p as f32])).collect();
        assert_eq!(seen, want);
    }

    /// The view must hold its rows: the last row's `kc` elements included.
    #[test]
    #[should_panic(expected = "need 26 elements, have 25")]
    fn a_view_shorter_than_its_rows_is_refused() {
        let a = [0.0f32; 25];
        let _ = StridedRows::<4>::new(&a, 3, 10, 6);
    }

    /// A kernel of more rows than the view holds is refused before any read.
    #[test]
    #[should_panic(expected = "a kernel of 4 rows on a view of 3")]
    fn a_kernel_of_more_rows_than_the_view_is_refused() {
        let a = [0.0f32; 40];
        StridedRows::<4>::new(&a, 3, 10, 5).each_depth::<4>(|_, _| {});
    }
}
