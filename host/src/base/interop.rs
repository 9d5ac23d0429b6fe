//! Conversions between cuqr's matrices ([`Mat`], [`MatRef`]) and faer's
//! ([`faer::Mat`], [`faer::MatRef`]).
//!
//! | from | to | copies? |
//! |---|---|---|
//! | [`faer::MatRef`] | [`MatRef`] ([`MatRef::from_faer`], `TryFrom`) | no; fails unless column-major |
//! | [`faer::MatRef`] | [`Mat`] ([`Mat::from_faer`]) | yes; any strides |
//! | [`Mat`] | [`faer::MatRef`] ([`Mat::as_faer`]) | no |
//! | [`MatRef`] | [`faer::MatRef`] ([`MatRef::as_faer`]) | no |
//! | [`Mat`] | [`faer::Mat`] ([`Mat::to_faer`]) | yes |
//!
//! A faer view is *column-major* for cuqr when its elements sit at `i + j·ld` from its
//! first one for a leading dimension `ld ≥ nrows`: row stride 1 and a column stride of
//! at least `nrows` (and at least 1). A submatrix of a column-major faer matrix
//! qualifies (its column stride is the parent's); a transposed (row-major) view, a view
//! with reversed rows or columns, or one whose columns overlap does not. A row stride
//! is not needed when the view has at most one row or no column, nor a column stride
//! when it has at most one column or no row.

use crate::base::error::{Error, Result};
use crate::base::mat::{element_count, Mat, MatRef};
use crate::base::scalar::Scalar;

impl<'a, T: Scalar> MatRef<'a, T> {
    /// A view of a column-major faer matrix view, over the same memory (no copy). Its
    /// leading dimension [`MatRef::ld`] is faer's column stride (`max(nrows, 1)` when the
    /// view has at most one column or no row, where the stride is not used). The same
    /// conversion is available as `MatRef::try_from`.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] (parameter `"layout"`) if the view is not column-major:
    /// with two or more rows, a row stride other than 1 (e.g. a transposed view of a
    /// column-major matrix), or, with two or more columns, a column stride below
    /// `max(nrows, 1)` or negative (strides of a view without elements are not checked).
    /// Copy such a view into a column-major matrix with [`Mat::from_faer`].
    ///
    /// # Examples
    /// ```
    /// use cuqr::MatRef;
    ///
    /// let big = faer::Mat::<f64>::from_fn(8, 5, |i, j| (10 * i + j) as f64);
    /// // Rows 2..6, columns 1..4: column stride 8 > 4 rows.
    /// let sub = big.as_ref().submatrix(2, 1, 4, 3);
    /// let a = MatRef::from_faer(sub)?;
    /// assert_eq!((a.nrows(), a.ncols()), (4, 3));
    /// assert_eq!(a.ld(), big.col_stride() as usize);
    /// assert_eq!(a.get(0, 0), 21.0);
    /// assert_eq!(a.col(0).as_ptr(), sub.as_ptr()); // no copy
    ///
    /// // A transposed (row-major) view is refused: Mat::from_faer copies it.
    /// assert!(MatRef::from_faer(big.transpose()).is_err());
    /// assert_eq!(cuqr::Mat::from_faer(big.transpose())[(4, 7)], 74.0);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn from_faer(a: faer::MatRef<'a, T>) -> Result<Self> {
        MatRef::wrap_faer(a).ok_or_else(|| Error::InvalidParam {
            op: "MatRef::from_faer",
            what: "layout",
            why: format!(
                "the {}×{} faer view (row stride {}, column stride {}) is not column-major \
                 (row stride 1, column stride ≥ the row count); Mat::from_faer copies it \
                 into a column-major matrix",
                a.nrows(),
                a.ncols(),
                a.row_stride(),
                a.col_stride()
            ),
        })
    }

    /// The view as a faer matrix view over the same memory (no copy): row stride 1 and
    /// column stride [`MatRef::ld`] (the stride of a view with at most one row or at most
    /// one column is the one it was made with).
    ///
    /// # Examples
    /// ```
    /// use cuqr::MatRef;
    ///
    /// // 2×3 with leading dimension 4: rows 2 and 3 of each column are padding.
    /// let data = [1.0f32, 2.0, -1.0, -1.0, 3.0, 4.0, -1.0, -1.0, 5.0, 6.0];
    /// let a = MatRef::new(&data, 2, 3, 4)?;
    /// let f = a.as_faer();
    /// assert_eq!((f.nrows(), f.ncols(), f.col_stride()), (2, 3, 4));
    /// assert_eq!(f[(1, 2)], 6.0);
    /// assert_eq!(f.as_ptr(), data.as_ptr());
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn as_faer(&self) -> faer::MatRef<'a, T> {
        self.faer_view()
    }
}

impl<'a, T: Scalar> TryFrom<faer::MatRef<'a, T>> for MatRef<'a, T> {
    type Error = Error;

    /// [`MatRef::from_faer`]: no copy; fails unless the view is column-major.
    ///
    /// # Examples
    /// ```
    /// use cuqr::MatRef;
    ///
    /// let f = faer::Mat::<f64>::identity(3, 2);
    /// let a = MatRef::try_from(f.as_ref())?;
    /// assert_eq!(a.get(1, 1), 1.0);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    fn try_from(a: faer::MatRef<'a, T>) -> Result<Self> {
        Self::from_faer(a)
    }
}

impl<T: Scalar> Mat<T> {
    /// A column-major copy of a faer matrix view of any strides (row-major, reversed,
    /// repeated or strided views included).
    ///
    /// # Panics
    /// If `nrows · ncols` overflows `usize` (possible only for a view whose elements
    /// repeat, such as faer's `from_repeated_ref`).
    ///
    /// # Examples
    /// ```
    /// use cuqr::Mat;
    ///
    /// let f = faer::Mat::<f64>::from_fn(2, 3, |i, j| (i + 2 * j) as f64);
    /// let a = Mat::from_faer(f.transpose()); // a 3×2 row-major view
    /// assert_eq!(a.as_slice(), &[0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
    /// ```
    pub fn from_faer(a: faer::MatRef<'_, T>) -> Self {
        let (nrows, ncols) = (a.nrows(), a.ncols());
        let mut data = Vec::with_capacity(element_count("Mat::from_faer", nrows, ncols));
        for col in a.col_iter() {
            match col.try_as_col_major() {
                Some(col) => data.extend_from_slice(col.as_slice()),
                None => data.extend(col.iter().copied()),
            }
        }
        Self::from_col_major(nrows, ncols, data).expect("one element per (row, column)")
    }

    /// The matrix as a faer matrix view over the same memory (no copy): row stride 1,
    /// column stride `nrows`.
    ///
    /// # Examples
    /// ```
    /// use cuqr::Mat;
    ///
    /// let a = Mat::<f64>::from_fn(3, 2, |i, j| (i + 3 * j) as f64);
    /// let f = a.as_faer();
    /// assert_eq!((f.nrows(), f.ncols(), f.col_stride()), (3, 2, 3));
    /// assert_eq!(f[(2, 1)], 5.0);
    /// assert_eq!(f.as_ptr(), a.as_slice().as_ptr());
    /// ```
    pub fn as_faer(&self) -> faer::MatRef<'_, T> {
        faer::MatRef::from_column_major_slice(self.as_slice(), self.nrows(), self.ncols())
    }

    /// A copy as an owned faer matrix.
    ///
    /// # Examples
    /// ```
    /// use cuqr::Mat;
    ///
    /// let a = Mat::<f32>::identity(3);
    /// let f: faer::Mat<f32> = a.to_faer();
    /// assert_eq!(f, faer::Mat::<f32>::identity(3, 3));
    /// ```
    pub fn to_faer(&self) -> faer::Mat<T> {
        self.as_faer().cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn random<T: Scalar>(rng: &mut StdRng, nrows: usize, ncols: usize) -> Mat<T> {
        Mat::from_fn(nrows, ncols, |_, _| {
            T::from_f64(rng.random_range(-1.0..1.0))
        })
    }

    /// Every entry of `a` equals faer's `f` at the same position.
    fn assert_same<T: Scalar>(a: MatRef<'_, T>, f: faer::MatRef<'_, T>) {
        assert_eq!((a.nrows(), a.ncols()), (f.nrows(), f.ncols()));
        for j in 0..a.ncols() {
            for i in 0..a.nrows() {
                assert_eq!(a.get(i, j), f[(i, j)], "({i}, {j})");
            }
        }
    }

    /// The layout error names the operation and points at the copying conversion.
    fn assert_layout_error<T: Scalar>(f: faer::MatRef<'_, T>) {
        let e = MatRef::from_faer(f).unwrap_err();
        assert!(
            matches!(
                e,
                Error::InvalidParam {
                    op: "MatRef::from_faer",
                    what: "layout",
                    ..
                }
            ),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(msg.contains("not column-major"), "{msg}");
        assert!(msg.contains("Mat::from_faer copies"), "{msg}");
        assert!(MatRef::try_from(f).is_err());
    }

    fn round_trips<T: Scalar>(seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        for (m, n) in [(37, 11), (11, 37), (1, 9), (9, 1), (1, 1)] {
            let a = random::<T>(&mut rng, m, n);

            // Mat → faer view (no copy) → MatRef (no copy) → Mat.
            let f = a.as_faer();
            assert_eq!((f.nrows(), f.ncols(), f.row_stride()), (m, n, 1));
            assert_eq!(f.col_stride(), m as isize);
            assert_eq!(f.as_ptr(), a.as_slice().as_ptr());
            assert_same(a.as_ref(), f);
            let v = MatRef::from_faer(f).unwrap();
            assert_eq!(v.col(0).as_ptr(), a.as_slice().as_ptr());
            assert_eq!(v.ld(), m);
            assert_eq!(v.to_owned(), a);
            assert_eq!(MatRef::try_from(f).unwrap().to_owned(), a);

            // Mat → faer::Mat (copy) → Mat (copy).
            let owned = a.to_faer();
            assert_ne!(owned.as_ptr(), a.as_slice().as_ptr());
            assert_same(a.as_ref(), owned.as_ref());
            assert_eq!(Mat::from_faer(owned.as_ref()), a);
            assert_eq!(Mat::from_faer(f), a);

            // MatRef → faer view → MatRef keeps the memory and the leading dimension.
            let r = a.as_ref();
            let back = MatRef::from_faer(r.as_faer()).unwrap();
            assert_eq!(back.as_faer().as_ptr(), r.as_faer().as_ptr());
            assert_eq!(back.ld(), r.ld());
            assert_eq!(back.to_owned(), a);
        }
    }

    #[test]
    fn round_trips_f64() {
        round_trips::<f64>(1);
    }

    #[test]
    fn round_trips_f32() {
        round_trips::<f32>(2);
    }

    /// A cuqr view with padding rows (ld > nrows) becomes a faer view with column stride
    /// ld over the same memory, and back.
    #[test]
    fn padded_view_round_trips_without_copy() {
        let mut rng = StdRng::seed_from_u64(3);
        let (m, n, ld) = (37, 11, 40);
        let data: Vec<f64> = (0..ld * (n - 1) + m)
            .map(|_| rng.random_range(-1.0..1.0))
            .collect();
        let a = MatRef::new(&data, m, n, ld).unwrap();
        let f = a.as_faer();
        assert_eq!((f.nrows(), f.ncols()), (m, n));
        assert_eq!((f.row_stride(), f.col_stride()), (1, ld as isize));
        assert_eq!(f.as_ptr(), data.as_ptr());
        assert_same(a, f);
        let b = MatRef::from_faer(f).unwrap();
        assert_eq!(b.ld(), ld);
        for j in 0..n {
            assert_eq!(b.col(j), &data[j * ld..j * ld + m]);
        }
    }

    /// A transposed faer matrix (row-major: row stride > 1, column stride 1) is refused
    /// by the no-copy conversion and copied by `Mat::from_faer`.
    #[test]
    fn row_major_view_is_refused_and_copied() {
        let mut rng = StdRng::seed_from_u64(4);
        let src = random::<f64>(&mut rng, 11, 37);
        let g = src.to_faer();
        let t = g.transpose(); // 37×11, row-major
        assert_eq!((t.nrows(), t.ncols()), (37, 11));
        assert_eq!(t.col_stride(), 1);
        assert_layout_error(t);
        let copied = Mat::from_faer(t);
        assert_eq!(copied, src.transpose());
        assert_same(copied.as_ref(), t);
    }

    /// Other layouts cuqr cannot address column-major: reversed columns (negative column
    /// stride), reversed rows (negative row stride), overlapping columns (column stride
    /// below the row count). All copy.
    #[test]
    fn other_non_column_major_views_are_refused_and_copied() {
        let mut rng = StdRng::seed_from_u64(5);
        let a = random::<f32>(&mut rng, 6, 4);
        let f = a.as_faer();
        let x = 2.5f32;
        let col = faer::ColRef::from_slice(a.col(1));
        let refused = [
            f.reverse_cols(),
            f.reverse_rows(),
            faer::MatRef::from_repeated_col(col, 3),
            faer::MatRef::from_repeated_ref(&x, 2, 3),
            faer::MatRef::from_column_major_slice_with_stride(a.as_slice(), 6, 3, 5),
        ];
        for v in refused {
            assert_layout_error(v);
            assert_same(Mat::from_faer(v).as_ref(), v);
        }
    }

    /// A submatrix of a larger faer matrix (column stride > nrows) is used in place.
    #[test]
    fn submatrix_view_is_used_without_copy() {
        let mut rng = StdRng::seed_from_u64(6);
        let big = random::<f64>(&mut rng, 50, 20).to_faer();
        let sub = big.as_ref().submatrix(3, 2, 37, 11);
        assert!(sub.col_stride() >= 50);
        let v = MatRef::from_faer(sub).unwrap();
        assert_eq!((v.nrows(), v.ncols()), (37, 11));
        assert_eq!(v.ld(), big.col_stride() as usize);
        assert_eq!(v.col(0).as_ptr(), sub.as_ptr());
        assert_eq!(v.as_faer().as_ptr(), sub.as_ptr());
        assert_eq!(v.as_faer().col_stride(), sub.col_stride());
        assert_same(v, sub);
        for j in 0..11 {
            assert_eq!(v.col(j).as_ptr(), sub.col(j).as_ptr());
        }
        assert_eq!(Mat::from_faer(sub), v.to_owned());
    }

    /// Views whose strides are never used convert without copy: a single column of any
    /// column stride, a single row of any row stride.
    #[test]
    fn unused_strides_are_ignored() {
        let mut rng = StdRng::seed_from_u64(7);
        let g = random::<f64>(&mut rng, 9, 7).to_faer();

        // One row of the transposed (row-major) matrix: row stride 9, column stride 1.
        let row = g.transpose().submatrix(2, 0, 1, 9);
        let v = MatRef::from_faer(row).unwrap();
        assert_eq!((v.nrows(), v.ncols(), v.ld()), (1, 9, 1));
        assert_eq!(v.col(0).as_ptr(), row.as_ptr());
        assert_same(v, row);

        // A faer row as a 1×n matrix (row stride 0), column stride that of g.
        let r = g.row(4).as_mat();
        assert_eq!(r.row_stride(), 0);
        let v = MatRef::from_faer(r).unwrap();
        let ld = g.col_stride() as usize;
        assert_eq!((v.nrows(), v.ncols(), v.ld()), (1, 7, ld));
        assert_same(v, r);

        // One column with reversed rows is still refused (row stride -1, 9 rows), one
        // column out of reversed columns is not (column stride -9, unused).
        assert_layout_error(g.as_ref().reverse_rows().submatrix(0, 3, 9, 1));
        let c = g.as_ref().reverse_cols().submatrix(0, 3, 9, 1);
        let v = MatRef::from_faer(c).unwrap();
        assert!(c.col_stride() < 0);
        assert_eq!((v.ld(), v.col(0).as_ptr()), (9, c.as_ptr()));
        assert_same(v, c);
    }

    /// Empty matrices convert both ways, whatever their (unused) strides.
    #[test]
    fn empty_matrices() {
        for (m, n) in [(0, 0), (0, 5), (5, 0)] {
            let a = Mat::<f64>::zeros(m, n);
            let f = a.as_faer();
            assert_eq!((f.nrows(), f.ncols()), (m, n));
            let v = MatRef::from_faer(f).unwrap();
            assert_eq!((v.nrows(), v.ncols(), v.ld()), (m, n, m.max(1)));
            for j in 0..n {
                assert!(v.col(j).is_empty());
            }
            assert_eq!(v.norm_fro(), 0.0);
            assert_eq!(v.to_owned(), a);
            assert_eq!(Mat::from_faer(f), a);
            let owned = a.to_faer();
            assert_eq!((owned.nrows(), owned.ncols()), (m, n));
            assert_eq!(Mat::from_faer(owned.as_ref()), a);
            // Transposed and with repeated elements: nothing to address, no refusal.
            let t = MatRef::from_faer(owned.transpose()).unwrap();
            assert_eq!((t.nrows(), t.ncols()), (n, m));
            let x = 1.0f64;
            let r = MatRef::from_faer(faer::MatRef::from_repeated_ref(&x, m, n)).unwrap();
            assert_eq!((r.nrows(), r.ncols()), (m, n));
            assert_eq!(r.as_faer().ncols(), n);
        }
    }
}
