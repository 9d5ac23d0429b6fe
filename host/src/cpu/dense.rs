//! faer views of cuqr's column-major matrices and the products the blocked updates are
//! built from, all on the thread count of [`crate::cpu::settings`].
#![forbid(unsafe_code)]

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef};

use crate::base::mat::Mat;
use crate::base::scalar::Scalar;
use crate::cpu::settings::par;

/// A faer view of `a` (no copy).
pub fn view<T: Scalar>(a: &Mat<T>) -> MatRef<'_, T> {
    MatRef::from_column_major_slice(a.as_slice(), a.nrows(), a.ncols())
}

/// A mutable faer view of `a` (no copy).
pub fn view_mut<T: Scalar>(a: &mut Mat<T>) -> MatMut<'_, T> {
    let (m, n) = (a.nrows(), a.ncols());
    MatMut::from_column_major_slice_mut(a.as_mut_slice(), m, n)
}

/// dst ← dst + α·lhs·rhs.
pub fn gemm_add<T: Scalar>(dst: MatMut<'_, T>, lhs: MatRef<'_, T>, rhs: MatRef<'_, T>, alpha: T) {
    matmul(dst, Accum::Add, lhs, rhs, alpha, par());
}

/// dst ← α·lhs·rhs.
pub fn gemm_set<T: Scalar>(dst: MatMut<'_, T>, lhs: MatRef<'_, T>, rhs: MatRef<'_, T>, alpha: T) {
    matmul(dst, Accum::Replace, lhs, rhs, alpha, par());
}

/// lhs·rhs as a new matrix.
pub fn product<T: Scalar>(lhs: MatRef<'_, T>, rhs: MatRef<'_, T>) -> Mat<T> {
    let mut out = Mat::zeros(lhs.nrows(), rhs.ncols());
    gemm_set(view_mut(&mut out), lhs, rhs, T::ONE);
    out
}
