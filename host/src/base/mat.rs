//! Host matrices: an owned column-major [`Mat`] and a borrowed view [`MatRef`].

use core::fmt;

use crate::base::error::{Error, Result};
use crate::base::scalar::Scalar;

/// An owned, dense, column-major matrix (leading dimension = rows).
#[derive(Clone, Debug, PartialEq)]
pub struct Mat<T> {
    nrows: usize,
    ncols: usize,
    data: Vec<T>,
}

/// A borrowed column-major matrix view with leading dimension `ld ≥ nrows`.
///
/// The view is held as a [`faer::MatRef`] over its own elements only (the rows
/// between the end of one column and the start of the next are not borrowed), so a
/// column-major faer view, a submatrix of a larger matrix included, converts without
/// a copy: see [`MatRef::from_faer`] and [`MatRef::as_faer`].
#[derive(Clone, Copy)]
pub struct MatRef<'a, T> {
    /// Row stride 1 if the view has two rows and a column (any row stride otherwise);
    /// column stride `ld` if it has a row and two columns (any column stride
    /// otherwise): a stride that never reaches an element is not used.
    view: faer::MatRef<'a, T>,
    /// The leading dimension reported by [`MatRef::ld`], `≥ max(nrows, 1)`.
    ld: usize,
}

mod reshape;

/// Elements from which [`MatRef::first_non_finite`] scans columns in parallel.
const PARALLEL_SCAN_MIN: usize = 1 << 20;

/// The index of the first NaN or ±∞ in `x`. Blocks of 256 are tested by a sum of x·0
/// (0 for a finite x, NaN otherwise) in eight lanes, which vectorises; a block whose
/// sum is not finite is searched element by element.
fn first_non_finite_in<T: Scalar>(x: &[T]) -> Option<usize> {
    const BLOCK: usize = 256;
    let mut blocks = x.chunks_exact(BLOCK);
    for (b, block) in blocks.by_ref().enumerate() {
        let mut lanes = [T::ZERO; 8];
        for c in block.chunks_exact(8) {
            for (l, &v) in lanes.iter_mut().zip(c) {
                *l += v * T::ZERO;
            }
        }
        if !lanes.iter().fold(T::ZERO, |s, &l| s + l).is_finite() {
            return block
                .iter()
                .position(|v| !v.is_finite())
                .map(|i| b * BLOCK + i);
        }
    }
    let rest = blocks.remainder();
    let start = x.len() - rest.len();
    rest.iter().position(|v| !v.is_finite()).map(|i| start + i)
}

impl<T: Scalar> Mat<T> {
    /// An `nrows × ncols` matrix of zeros.
    ///
    /// # Panics
    /// If `nrows · ncols` overflows `usize` (as `Vec` panics on a capacity overflow).
    pub fn zeros(nrows: usize, ncols: usize) -> Self {
        Self {
            nrows,
            ncols,
            data: vec![T::ZERO; element_count("Mat::zeros", nrows, ncols)],
        }
    }

    /// The n×n identity.
    pub fn identity(n: usize) -> Self {
        let mut m = Self::zeros(n, n);
        for i in 0..n {
            m[(i, i)] = T::ONE;
        }
        m
    }

    /// Builds a matrix from `f(i, j)`.
    ///
    /// # Panics
    /// If `nrows · ncols` overflows `usize`.
    pub fn from_fn(nrows: usize, ncols: usize, mut f: impl FnMut(usize, usize) -> T) -> Self {
        let mut data = Vec::with_capacity(element_count("Mat::from_fn", nrows, ncols));
        for j in 0..ncols {
            for i in 0..nrows {
                data.push(f(i, j));
            }
        }
        Self { nrows, ncols, data }
    }

    /// Wraps column-major data.
    ///
    /// # Errors
    /// [`Error::InvalidParam`] if `nrows · ncols` overflows `usize`;
    /// [`Error::Shape`] if `data.len() != nrows * ncols`.
    pub fn from_col_major(nrows: usize, ncols: usize, data: Vec<T>) -> Result<Self> {
        const OP: &str = "Mat::from_col_major";
        let Some(count) = nrows.checked_mul(ncols) else {
            return Err(overflow(OP, nrows, ncols));
        };
        if data.len() != count {
            return Err(Error::Shape {
                op: OP,
                what: "data length",
                got: data.len(),
                expected: count,
            });
        }
        Ok(Self { nrows, ncols, data })
    }

    /// A column vector (n×1) from a slice.
    pub fn from_col(v: &[T]) -> Self {
        Self {
            nrows: v.len(),
            ncols: 1,
            data: v.to_vec(),
        }
    }

    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.nrows
    }
    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.ncols
    }
    /// The column-major data (leading dimension = `nrows`).
    pub fn as_slice(&self) -> &[T] {
        &self.data
    }
    /// The column-major data, mutable.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.data
    }
    /// Consumes the matrix, returning its column-major data.
    pub fn into_vec(self) -> Vec<T> {
        self.data
    }
    /// Column `j`.
    pub fn col(&self, j: usize) -> &[T] {
        &self.data[j * self.nrows..(j + 1) * self.nrows]
    }
    /// Column `j`, mutable.
    pub fn col_mut(&mut self, j: usize) -> &mut [T] {
        &mut self.data[j * self.nrows..(j + 1) * self.nrows]
    }
    /// Two distinct columns, mutable (`j1 != j2`).
    ///
    /// # Panics
    /// If `j1 == j2` or either is out of range.
    pub fn two_cols_mut(&mut self, j1: usize, j2: usize) -> (&mut [T], &mut [T]) {
        assert!(j1 != j2 && j1 < self.ncols && j2 < self.ncols);
        let m = self.nrows;
        if j1 < j2 {
            let (a, b) = self.data.split_at_mut(j2 * m);
            (&mut a[j1 * m..(j1 + 1) * m], &mut b[..m])
        } else {
            let (a, b) = self.data.split_at_mut(j1 * m);
            let (x, y) = (&mut b[..m], &mut a[j2 * m..(j2 + 1) * m]);
            (x, y)
        }
    }
    /// A borrowed view of the whole matrix.
    pub fn as_ref(&self) -> MatRef<'_, T> {
        MatRef::from_parts(&self.data, self.nrows, self.ncols, self.nrows.max(1))
    }
    /// The transpose, as a new matrix.
    pub fn transpose(&self) -> Self {
        Self::from_fn(self.ncols, self.nrows, |i, j| self[(j, i)])
    }
    /// Frobenius norm, computed in f64 with scaling.
    pub fn norm_fro(&self) -> f64 {
        self.as_ref().norm_fro()
    }
    /// The matrix product `self · rhs` (plain triple loop; for tests and diagnostics).
    ///
    /// # Panics
    /// If `self.ncols() != rhs.nrows()`.
    pub fn matmul(&self, rhs: &Mat<T>) -> Mat<T> {
        assert_eq!(self.ncols, rhs.nrows);
        let mut out = Mat::zeros(self.nrows, rhs.ncols);
        for j in 0..rhs.ncols {
            let oc = &mut out.data[j * self.nrows..(j + 1) * self.nrows];
            for k in 0..self.ncols {
                let b = rhs[(k, j)];
                if b == T::ZERO {
                    continue;
                }
                let ac = &self.data[k * self.nrows..(k + 1) * self.nrows];
                for (o, &a) in oc.iter_mut().zip(ac) {
                    *o = a.mul_add(b, *o);
                }
            }
        }
        out
    }
}

/// `nrows · ncols` for an infallible constructor; panics with the shape on overflow.
pub(super) fn element_count(op: &str, nrows: usize, ncols: usize) -> usize {
    nrows
        .checked_mul(ncols)
        .unwrap_or_else(|| panic!("{op}: {nrows}×{ncols} elements overflow usize"))
}

/// [`Error::InvalidParam`] for a shape whose element count overflows `usize`.
fn overflow(op: &'static str, nrows: usize, ncols: usize) -> Error {
    Error::InvalidParam {
        op,
        what: "shape",
        why: format!("{nrows}×{ncols} elements overflow usize"),
    }
}

impl<T> core::ops::Index<(usize, usize)> for Mat<T> {
    type Output = T;
    #[inline(always)]
    fn index(&self, (i, j): (usize, usize)) -> &T {
        debug_assert!(i < self.nrows && j < self.ncols);
        &self.data[i + j * self.nrows]
    }
}

impl<T> core::ops::IndexMut<(usize, usize)> for Mat<T> {
    #[inline(always)]
    fn index_mut(&mut self, (i, j): (usize, usize)) -> &mut T {
        debug_assert!(i < self.nrows && j < self.ncols);
        &mut self.data[i + j * self.nrows]
    }
}

impl<'a, T: Scalar> MatRef<'a, T> {
    /// A view of column-major `data` with leading dimension `ld`.
    ///
    /// # Errors
    /// [`Error::Shape`] if `ld < nrows` or `data` is too short;
    /// [`Error::InvalidParam`] if the extent `ld·(ncols − 1) + nrows` overflows `usize`.
    pub fn new(data: &'a [T], nrows: usize, ncols: usize, ld: usize) -> Result<Self> {
        const OP: &str = "MatRef::new";
        if ld < nrows.max(1) {
            return Err(Error::Shape {
                op: OP,
                what: "leading dimension",
                got: ld,
                expected: nrows.max(1),
            });
        }
        let need = match ncols.checked_sub(1) {
            None => 0,
            Some(last) => match ld.checked_mul(last).and_then(|x| x.checked_add(nrows)) {
                Some(need) => need,
                None => {
                    return Err(Error::InvalidParam {
                        op: OP,
                        what: "shape",
                        why: format!(
                            "the extent ld·(ncols − 1) + nrows of {nrows}×{ncols} with ld = {ld} \
                             overflows usize"
                        ),
                    })
                }
            },
        };
        if data.len() < need {
            return Err(Error::Shape {
                op: OP,
                what: "data length",
                got: data.len(),
                expected: need,
            });
        }
        Ok(Self::from_parts(data, nrows, ncols, ld))
    }
    /// A column vector view (n×1) of a slice.
    pub fn from_col(v: &'a [T]) -> Self {
        Self::from_parts(v, v.len(), 1, v.len().max(1))
    }
    /// Number of rows.
    pub fn nrows(&self) -> usize {
        self.view.nrows()
    }
    /// Number of columns.
    pub fn ncols(&self) -> usize {
        self.view.ncols()
    }
    /// (rows, columns): what the `plan` functions check.
    pub(crate) fn shape(&self) -> (usize, usize) {
        (self.nrows(), self.ncols())
    }
    /// Leading dimension.
    pub fn ld(&self) -> usize {
        self.ld
    }
    /// Element (i, j).
    #[inline(always)]
    pub fn get(&self, i: usize, j: usize) -> T {
        assert!(i < self.nrows() && j < self.ncols());
        *self.view.get(i, j)
    }
    /// Column `j` as a slice (empty when the view has no rows).
    pub fn col(&self, j: usize) -> &'a [T] {
        assert!(j < self.ncols());
        let col = self.view.col(j);
        match col.try_as_col_major() {
            Some(col) => col.as_slice(),
            // A row stride other than 1 only in a view of at most one row.
            None if self.nrows() == 0 => &[],
            None => core::slice::from_ref(col.get(0)),
        }
    }
    /// An owned copy.
    pub fn to_owned(&self) -> Mat<T> {
        Mat::from_fn(self.nrows(), self.ncols(), |i, j| self.get(i, j))
    }
    /// The first non-finite entry (in column-major order), if any. Large views are
    /// scanned by column groups over rayon's global pool (the scan of a host block
    /// precedes its upload in the GPU updates, docs/algorithms.md#host-uploads).
    pub fn first_non_finite(&self) -> Option<(usize, usize)> {
        let at = |j: usize| first_non_finite_in(self.col(j)).map(|i| (i, j));
        if self.nrows().saturating_mul(self.ncols()) < PARALLEL_SCAN_MIN || self.ncols() < 2 {
            return (0..self.ncols()).find_map(at);
        }
        use rayon::prelude::*;
        (0..self.ncols()).into_par_iter().find_map_first(at)
    }
    /// Frobenius norm, computed in f64 with scaling.
    pub fn norm_fro(&self) -> f64 {
        // One pass of plain squares first: where their sum is finite and far above the
        // underflow threshold, no entry overflowed and the squares that underflowed weigh
        // less than a rounding of the sum, so it is the norm's square (as accurate as the
        // scaled sum). Otherwise (huge or tiny entries, NaN, ±∞) the scaled two passes.
        const SAFE_MIN_SSQ: f64 = 1e-250;
        let ssq = self.sum_of_squares(1.0);
        if ssq.is_finite() && ssq >= SAFE_MIN_SSQ {
            return ssq.sqrt();
        }
        // Four independent lanes per pass, so that both loops vectorise.
        let mut lanes = [0.0f64; 4];
        for j in 0..self.ncols() {
            let col = self.col(j);
            let mut chunks = col.chunks_exact(4);
            for c in &mut chunks {
                for (l, x) in lanes.iter_mut().zip(c) {
                    *l = l.max(x.to_f64().abs());
                }
            }
            for x in chunks.remainder() {
                lanes[0] = lanes[0].max(x.to_f64().abs());
            }
        }
        let scale = lanes.iter().fold(0.0f64, |a, &b| a.max(b));
        if scale == 0.0 || !scale.is_finite() {
            return scale;
        }
        let inv = 1.0 / scale;
        if !inv.is_finite() {
            // A subnormal scale: divide entry by entry.
            let ssq: f64 = (0..self.ncols())
                .flat_map(|j| self.col(j))
                .map(|x| (x.to_f64() / scale).powi(2))
                .sum();
            return scale * ssq.sqrt();
        }
        scale * self.sum_of_squares(inv).sqrt()
    }

    /// Σ (x·`inv`)² over the entries, in f64, in four independent lanes (so that the loop
    /// vectorises); `inv = 1` multiplies exactly.
    fn sum_of_squares(&self, inv: f64) -> f64 {
        let mut ssq = [0.0f64; 4];
        for j in 0..self.ncols() {
            let col = self.col(j);
            let mut chunks = col.chunks_exact(4);
            for c in &mut chunks {
                for (s, x) in ssq.iter_mut().zip(c) {
                    let t = x.to_f64() * inv;
                    *s = t.mul_add(t, *s);
                }
            }
            for x in chunks.remainder() {
                let t = x.to_f64() * inv;
                ssq[0] = t.mul_add(t, ssq[0]);
            }
        }
        (ssq[0] + ssq[1]) + (ssq[2] + ssq[3])
    }
}

impl<'a, T> MatRef<'a, T> {
    /// The view of `data` as `nrows × ncols` with leading dimension `ld`, whose extent
    /// `ld·(ncols − 1) + nrows` the caller has checked against `data.len()` (when the
    /// view has at least one row and one column) and with `ld ≥ max(nrows, 1)`.
    fn from_parts(data: &'a [T], nrows: usize, ncols: usize, ld: usize) -> Self {
        debug_assert!(ld >= nrows.max(1));
        // An `ld` above isize::MAX fits no slice, so it comes with at most one column,
        // whose stride is never used.
        let stride = ld.min(isize::MAX as usize);
        Self {
            view: faer::MatRef::from_column_major_slice_with_stride(data, nrows, ncols, stride),
            ld,
        }
    }

    /// Wraps a faer view without a copy if cuqr can address its elements column-major
    /// with a leading dimension: row stride 1, and column stride `≥ max(nrows, 1)` when
    /// there are two or more columns. A view with at most one row or no column needs no
    /// row stride, one with at most one column or no row no column stride.
    ///
    /// `None` when the layout is not column-major; see `base::interop`.
    pub(super) fn wrap_faer(view: faer::MatRef<'a, T>) -> Option<Self> {
        let (nrows, ncols) = (view.nrows(), view.ncols());
        let min_ld = nrows.max(1);
        let cs = usize::try_from(view.col_stride()).ok();
        let rows_ok = nrows <= 1 || ncols == 0 || view.row_stride() == 1;
        let cols_ok = nrows == 0 || ncols <= 1 || cs.is_some_and(|cs| cs >= min_ld);
        if !(rows_ok && cols_ok) {
            return None;
        }
        let ld = cs.filter(|&cs| cs >= min_ld).unwrap_or(min_ld);
        Some(Self { view, ld })
    }

    /// The view as faer's, over the same memory.
    pub(super) fn faer_view(&self) -> faer::MatRef<'a, T> {
        self.view
    }
}

impl<T: Scalar> fmt::Debug for MatRef<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Cols<'v, 'a, T>(&'v MatRef<'a, T>);
        impl<T: Scalar> fmt::Debug for Cols<'_, '_, T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_list()
                    .entries((0..self.0.ncols()).map(|j| self.0.col(j)))
                    .finish()
            }
        }
        f.debug_struct("MatRef")
            .field("nrows", &self.nrows())
            .field("ncols", &self.ncols())
            .field("ld", &self.ld)
            .field("cols", &Cols(self))
            .finish()
    }
}

impl<'a, T: Scalar> From<&'a Mat<T>> for MatRef<'a, T> {
    fn from(m: &'a Mat<T>) -> Self {
        m.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Views of matrices without rows hold no element: every column is empty, scans
    /// find nothing, norms are zero (no panic for j ≥ 1 of an empty `Mat`).
    #[test]
    fn views_without_rows_have_empty_columns() {
        let a = Mat::<f64>::zeros(0, 3);
        let v = a.as_ref();
        for j in 0..3 {
            assert!(v.col(j).is_empty());
        }
        assert_eq!(v.first_non_finite(), None);
        assert_eq!(v.norm_fro(), 0.0);
        assert_eq!(v.to_owned().ncols(), 3);
        let data = [1.0f32; 4];
        let w = MatRef::new(&data, 0, 2, 2).unwrap();
        assert!(w.col(1).is_empty());
    }

    /// The scan finds the first NaN, +∞ or −∞ in column-major order wherever it lies:
    /// in a 256-element block or the remainder, at block edges, with a later non-finite
    /// entry too, in a view with ld > rows, and in the parallel path (≥ 2²⁰ entries)
    /// where a later column also holds one; huge finite entries are not flagged.
    #[test]
    fn first_non_finite_finds_the_first_in_column_order() {
        for len in [1usize, 7, 255, 256, 257, 600, 1031] {
            for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                for at in [0, len / 2, len.saturating_sub(257), len - 1] {
                    let mut x: Vec<f64> = (0..len).map(|i| 1e300 * (1.0 + i as f64)).collect();
                    x.iter_mut().for_each(|v| *v = v.min(f64::MAX));
                    x[at] = bad;
                    if at + 3 < len {
                        x[at + 3] = f64::NAN;
                    }
                    assert_eq!(first_non_finite_in(&x), Some(at), "len {len} at {at}");
                    let f: Vec<f32> = x
                        .iter()
                        .map(|&v| if v.is_finite() { 1.5 } else { v as f32 })
                        .collect();
                    assert_eq!(first_non_finite_in(&f), Some(at), "f32 len {len} at {at}");
                }
            }
            assert_eq!(first_non_finite_in(&vec![f64::MAX; len]), None);
        }
        // a view of rows 3..1103 of a 1110-row matrix (ld 1110): 1100·1000 ≥ 2²⁰ entries
        let mut big = Mat::<f64>::from_fn(1110, 1000, |i, j| 0.5 + ((i + 3 * j) % 17) as f64);
        let v = |big: &Mat<f64>| {
            MatRef::new(&big.as_slice()[3..], 1100, 1000, 1110)
                .unwrap()
                .first_non_finite()
        };
        assert_eq!(v(&big), None);
        big[(2, 10)] = f64::NAN; // outside the view
        assert_eq!(v(&big), None);
        big[(900, 700)] = f64::INFINITY;
        big[(5, 701)] = f64::NAN;
        assert_eq!(v(&big), Some((897, 700)));
        big[(1102, 699)] = f64::NAN;
        assert_eq!(v(&big), Some((1099, 699)));
    }

    /// The Frobenius norm agrees with the plain sum of squares to rounding, on every
    /// length modulo the four lanes, and neither overflows nor underflows at the ends of
    /// the exponent range (entries near f64::MAX and subnormal ones).
    #[test]
    fn norm_fro_is_scaled_and_accurate() {
        for (m, n) in [(1, 1), (3, 2), (5, 7), (13, 4)] {
            let a = Mat::<f64>::from_fn(m, n, |i, j| ((i * 7 + j * 3) % 11) as f64 - 4.5);
            let plain: f64 = a.as_slice().iter().map(|x| x * x).sum::<f64>().sqrt();
            assert!(
                (a.norm_fro() - plain).abs() <= 4.0 * f64::EPSILON * plain,
                "{m}×{n}"
            );
            for s in [1e300, 1e-300, 1e-310] {
                let b = Mat::<f64>::from_fn(m, n, |i, j| a[(i, j)] * s);
                let got = b.norm_fro() / s;
                assert!(
                    (got - plain).abs() <= 1e-6 * plain,
                    "{m}×{n} scaled by {s}: {got}"
                );
            }
        }
    }

    /// Shapes whose extent overflows `usize` are refused with an error (they made
    /// `MatRef::new` and `Mat::from_col_major` panic on the overflowing product in
    /// debug builds, and wrap to a small extent in release builds, accepting a
    /// short slice for a huge view).
    #[test]
    fn overflowing_shapes_are_errors() {
        let data = [1.0f64; 8];
        for (m, n, ld) in [
            (2, usize::MAX, usize::MAX / 2),
            (usize::MAX, 2, usize::MAX),
            (1 << 32, (1 << 32) + 1, 1 << 32),
        ] {
            let e = MatRef::new(&data, m, n, ld).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::InvalidParam {
                        op: "MatRef::new",
                        what: "shape",
                        ..
                    }
                ),
                "{m}x{n} ld {ld}: {e:?}"
            );
            assert!(e.to_string().contains("overflows usize"), "{e}");
        }
        // Extents that fit are still checked against the data length.
        assert!(matches!(
            MatRef::new(&data, 2, 5, 2),
            Err(Error::Shape {
                what: "data length",
                got: 8,
                expected: 10,
                ..
            })
        ));
        for (m, n) in [(usize::MAX, 2), (1 << 32, 1 << 32)] {
            let e = Mat::<f32>::from_col_major(m, n, vec![]).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::InvalidParam {
                        op: "Mat::from_col_major",
                        what: "shape",
                        ..
                    }
                ),
                "{m}x{n}: {e:?}"
            );
        }
    }

    /// `Debug` shows the view's shape and columns, not the padding rows under `ld`.
    #[test]
    fn debug_shows_the_columns_not_the_padding() {
        let data = [1.0f64, 2.0, 9.0, 3.0, 4.0];
        let v = MatRef::new(&data, 2, 2, 3).unwrap();
        assert_eq!(
            format!("{v:?}"),
            "MatRef { nrows: 2, ncols: 2, ld: 3, cols: [[1.0, 2.0], [3.0, 4.0]] }"
        );
    }

    #[test]
    #[should_panic(expected = "Mat::zeros: 4294967296×4294967296 elements overflow usize")]
    fn zeros_panics_clearly_on_overflow() {
        let _ = Mat::<f64>::zeros(1 << 32, 1 << 32);
    }

    #[test]
    #[should_panic(expected = "Mat::from_fn: 3×6148914691236517206 elements overflow usize")]
    fn from_fn_panics_clearly_on_overflow() {
        let _ = Mat::<f64>::from_fn(3, usize::MAX / 3 + 1, |_, _| 0.0);
    }
}
