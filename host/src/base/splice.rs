//! Matrices with a block of rows or columns inserted or deleted: pure copies, no
//! arithmetic. The kept data of the thin and R-only updates follow A this way; the tests
//! and the refactorisation baselines build the updated A with them.
#![forbid(unsafe_code)]

use crate::base::mat::Mat;
use crate::base::scalar::Scalar;

/// `a` with the rows of `u` inserted at k0.
pub fn rows_inserted<T: Scalar>(a: &Mat<T>, k0: usize, u: &Mat<T>) -> Mat<T> {
    let p = u.nrows();
    Mat::from_fn(a.nrows() + p, a.ncols(), |i, j| {
        if i < k0 {
            a[(i, j)]
        } else if i < k0 + p {
            u[(i - k0, j)]
        } else {
            a[(i - p, j)]
        }
    })
}

/// `a` without rows k0..k0+p.
pub fn rows_deleted<T: Scalar>(a: &Mat<T>, k0: usize, p: usize) -> Mat<T> {
    Mat::from_fn(a.nrows() - p, a.ncols(), |i, j| {
        a[(if i < k0 { i } else { i + p }, j)]
    })
}

/// `a` with the columns of `u` inserted at k0.
pub fn cols_inserted<T: Scalar>(a: &Mat<T>, k0: usize, u: &Mat<T>) -> Mat<T> {
    let p = u.ncols();
    Mat::from_fn(a.nrows(), a.ncols() + p, |i, j| {
        if j < k0 {
            a[(i, j)]
        } else if j < k0 + p {
            u[(i, j - k0)]
        } else {
            a[(i, j - p)]
        }
    })
}

/// `a` without columns k0..k0+p.
pub fn cols_deleted<T: Scalar>(a: &Mat<T>, k0: usize, p: usize) -> Mat<T> {
    Mat::from_fn(a.nrows(), a.ncols() - p, |i, j| {
        a[(i, if j < k0 { j } else { j + p })]
    })
}
