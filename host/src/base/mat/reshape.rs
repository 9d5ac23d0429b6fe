//! Rows and columns inserted into or removed from a [`Mat`] inside its own buffer
//! (docs/algorithms.md#factors-in-place): an update of a large factor moves the entries it
//! keeps once and allocates only when the buffer must grow (by doubling, as a `Vec` does),
//! instead of writing a fresh matrix whose every page faults on first touch.

use super::Mat;
use crate::base::scalar::Scalar;
use core::ops::Range;

impl<T: Scalar> Mat<T> {
    /// Inserts `p` rows of zeros before row `k0` of every column: an m×n matrix becomes
    /// (m+p)×n with its old rows k0.. moved down by p.
    ///
    /// # Panics
    /// If `k0 > nrows` or the new element count overflows `usize`.
    pub(crate) fn insert_zero_rows(&mut self, k0: usize, p: usize) {
        let (m, n) = (self.nrows, self.ncols);
        assert!(k0 <= m, "insert_zero_rows: row {k0} of {m}");
        if p == 0 {
            return;
        }
        let mp = m + p;
        let total = super::element_count("insert_zero_rows", mp, n);
        self.reserve_total(total);
        self.data.resize(total, T::ZERO);
        // Last column first: every column's new place starts at or after its old one, so
        // a column is moved before anything is written over it.
        for j in (0..n).rev() {
            let (src, dst) = (j * m, j * mp);
            self.data.copy_within(src + k0..src + m, dst + k0 + p);
            self.data.copy_within(src..src + k0, dst);
            self.data[dst + k0..dst + k0 + p].fill(T::ZERO);
        }
        self.nrows = mp;
    }

    /// Appends `p` columns whose entry (i, j) is `f(i, j)` (j counted from the first new
    /// column).
    ///
    /// # Panics
    /// If the new element count overflows `usize`.
    pub(crate) fn append_cols_with(&mut self, p: usize, mut f: impl FnMut(usize, usize) -> T) {
        let m = self.nrows;
        let total = super::element_count("append_cols_with", m, self.ncols + p);
        self.reserve_total(total);
        for j in 0..p {
            self.data.extend((0..m).map(|i| f(i, j)));
        }
        self.ncols += p;
    }

    /// Makes room for `total` entries in the buffer: where it must grow, it grows to an
    /// eighth more than asked (a reallocation, which an allocator may do by remapping a
    /// large buffer rather than copying it), so that a run of small insertions reallocates
    /// rarely while the memory stays within an eighth of the matrix.
    pub(crate) fn reserve_total(&mut self, total: usize) {
        if self.data.capacity() < total {
            let want = total.saturating_add(total / 8);
            self.data.reserve_exact(want - self.data.len());
        }
    }

    /// Appends the columns of `cols` (as many rows as `self`).
    ///
    /// # Panics
    /// If the row counts differ or the new element count overflows `usize`.
    pub(crate) fn append_cols(&mut self, cols: &Mat<T>) {
        assert_eq!(cols.nrows, self.nrows, "append_cols: rows");
        let total = super::element_count("append_cols", self.nrows, self.ncols + cols.ncols);
        self.reserve_total(total);
        self.data.extend_from_slice(&cols.data);
        self.ncols += cols.ncols;
    }

    /// Takes the first `nrows · ncols` entries of the buffer, as they stand, as the
    /// column-major `nrows × ncols` matrix (after a caller has moved the entries it keeps
    /// to the front). The buffer keeps its capacity.
    ///
    /// # Panics
    /// If the matrix would need more entries than the buffer holds.
    pub(crate) fn truncate_to(&mut self, nrows: usize, ncols: usize) {
        let total = super::element_count("truncate_to", nrows, ncols);
        assert!(total <= self.data.len(), "truncate_to: {nrows}×{ncols}");
        self.data.truncate(total);
        (self.nrows, self.ncols) = (nrows, ncols);
    }

    /// Removes the rows `rows` and the columns `cols`: an m×n matrix becomes
    /// (m − |rows|)×(n − |cols|), the kept entries in their order. The buffer keeps its
    /// capacity.
    ///
    /// # Panics
    /// If a range ends past the matrix or starts after its end.
    pub(crate) fn remove_rows_cols(&mut self, rows: Range<usize>, cols: Range<usize>) {
        let (m, n) = (self.nrows, self.ncols);
        assert!(
            rows.start <= rows.end && rows.end <= m,
            "remove_rows_cols: rows {rows:?} of {m}"
        );
        assert!(
            cols.start <= cols.end && cols.end <= n,
            "remove_rows_cols: columns {cols:?} of {n}"
        );
        let (r0, r1) = (rows.start, rows.end);
        let mk = m - (r1 - r0);
        // First kept column first: every kept entry moves to the same place or before it,
        // and a column's new place ends before the next kept column's old one begins.
        let kept = (0..cols.start).chain(cols.end..n);
        for (jj, j) in kept.enumerate() {
            let (src, dst) = (j * m, jj * mk);
            self.data.copy_within(src..src + r0, dst);
            self.data.copy_within(src + r1..src + m, dst + r0);
        }
        self.ncols = n - (cols.end - cols.start);
        self.nrows = mk;
        self.data.truncate(mk * self.ncols);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(m: usize, n: usize) -> Mat<f64> {
        Mat::from_fn(m, n, |i, j| (1 + i + 100 * j) as f64)
    }

    #[test]
    fn insert_zero_rows_matches_the_copy() {
        for (m, n, k0, p) in [
            (5, 4, 0, 2),
            (5, 4, 3, 1),
            (5, 4, 5, 3),
            (1, 1, 1, 4),
            (6, 0, 2, 2),
        ] {
            let a = numbered(m, n);
            // A buffer without room (a new one is written) and one with room (moved in place).
            let mut b = a.clone();
            b.insert_zero_rows(k0, p);
            let mut c = a.clone();
            c.data.reserve(p * n);
            let before = c.data.as_ptr();
            c.insert_zero_rows(k0, p);
            assert_eq!(c.data.as_ptr(), before, "moved within its buffer");
            assert_eq!(b, c);
            let want = Mat::from_fn(m + p, n, |i, j| {
                if i < k0 {
                    a[(i, j)]
                } else if i < k0 + p {
                    0.0
                } else {
                    a[(i - p, j)]
                }
            });
            assert_eq!(b, want, "m={m} n={n} k0={k0} p={p}");
        }
    }

    #[test]
    fn append_and_remove_match_the_copy() {
        let a = numbered(7, 5);
        let mut b = a.clone();
        b.append_cols_with(2, |i, j| (i * 10 + j) as f64 + 0.5);
        assert_eq!((b.nrows(), b.ncols()), (7, 7));
        assert_eq!(b[(3, 6)], 31.5);
        assert_eq!(b[(6, 4)], a[(6, 4)]);
        for (rows, cols) in [
            (2..4, 0..2),
            (0..7, 1..3),
            (6..7, 5..7),
            (3..3, 0..0),
            (0..1, 6..7),
        ] {
            let mut c = b.clone();
            c.remove_rows_cols(rows.clone(), cols.clone());
            let (pr, pc) = (rows.len(), cols.len());
            let want = Mat::from_fn(7 - pr, 7 - pc, |i, j| {
                let si = if i < rows.start { i } else { i + pr };
                let sj = if j < cols.start { j } else { j + pc };
                b[(si, sj)]
            });
            assert_eq!(c, want, "rows {rows:?} cols {cols:?}");
        }
    }
}
