//! faer views of cuqr's column-major matrices and the products the blocked updates are
//! built from, all on the thread count of [`crate::cpu::settings`].
#![forbid(unsafe_code)]

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef};

use crate::base::mat::Mat;
use crate::base::scalar::Scalar;
use crate::cpu::settings::par_for;

/// A faer view of `a` (no copy).
pub fn view<T: Scalar>(a: &Mat<T>) -> MatRef<'_, T> {
    MatRef::from_column_major_slice(a.as_slice(), a.nrows(), a.ncols())
}

/// A mutable faer view of `a` (no copy).
pub fn view_mut<T: Scalar>(a: &mut Mat<T>) -> MatMut<'_, T> {
    let (m, n) = (a.nrows(), a.ncols());
    MatMut::from_column_major_slice_mut(a.as_mut_slice(), m, n)
}

/// 2·m·n·k, the flops of a product.
fn flops<T>(lhs: MatRef<'_, T>, rhs: MatRef<'_, T>) -> f64 {
    2.0 * lhs.nrows() as f64 * lhs.ncols() as f64 * rhs.ncols() as f64
}

/// dst ← dst + α·lhs·rhs.
pub fn gemm_add<T: Scalar>(dst: MatMut<'_, T>, lhs: MatRef<'_, T>, rhs: MatRef<'_, T>, alpha: T) {
    let par = par_for(flops(lhs, rhs));
    matmul(dst, Accum::Add, lhs, rhs, alpha, par);
}

/// dst ← α·lhs·rhs.
pub fn gemm_set<T: Scalar>(dst: MatMut<'_, T>, lhs: MatRef<'_, T>, rhs: MatRef<'_, T>, alpha: T) {
    let par = par_for(flops(lhs, rhs));
    matmul(dst, Accum::Replace, lhs, rhs, alpha, par);
}

/// lhs·rhs as a new matrix.
pub fn product<T: Scalar>(lhs: MatRef<'_, T>, rhs: MatRef<'_, T>) -> Mat<T> {
    let mut out = Mat::zeros(lhs.nrows(), rhs.ncols());
    gemm_set(view_mut(&mut out), lhs, rhs, T::ONE);
    out
}

/// [`crate::cpu::wy::larfb_left`] on faer products: rows r0..r0+ℓ and columns `cols` of `c` take
/// C −= V·op(T)·(VᵀC), V explicit (ℓ×k, unit lower trapezoidal).
pub fn larfb_left<T: Scalar>(
    v: &Mat<T>,
    t: &Mat<T>,
    trans: bool,
    c: &mut Mat<T>,
    r0: usize,
    cols: core::ops::Range<usize>,
) {
    let (l, k) = (v.nrows(), v.ncols());
    if cols.is_empty() || k == 0 {
        return;
    }
    let mut cv = view_mut(c).submatrix_mut(r0, cols.start, l, cols.len());
    let w = product(view(v).transpose(), cv.as_ref());
    let tv = if trans { view(t).transpose() } else { view(t) };
    let tw = product(tv, view(&w));
    gemm_add(cv.as_mut(), view(v), view(&tw), -T::ONE);
}

/// [`crate::cpu::wy::larfb_right`] on faer products: columns c0..c0+ℓ of `c` take C −= ((C V) T) Vᵀ.
pub fn larfb_right<T: Scalar>(v: &Mat<T>, t: &Mat<T>, c: &mut Mat<T>, c0: usize) {
    let (l, k) = (v.nrows(), v.ncols());
    if k == 0 || c.nrows() == 0 {
        return;
    }
    let rows = c.nrows();
    let mut cv = view_mut(c).submatrix_mut(0, c0, rows, l);
    let w = product(cv.as_ref(), view(v));
    let wt = product(view(&w), view(t));
    gemm_add(cv.as_mut(), view(&wt), view(v).transpose(), -T::ONE);
}

/// The block reflector from the left: faer's products, or the serial loops inside
/// [`crate::cpu::reference::run`].
pub(crate) fn block_left<T: Scalar>(
    v: &Mat<T>,
    t: &Mat<T>,
    trans: bool,
    c: &mut Mat<T>,
    r0: usize,
    cols: core::ops::Range<usize>,
) {
    if crate::cpu::reference::active() {
        crate::cpu::wy::larfb_left(v, t, trans, c, r0, cols)
    } else {
        larfb_left(v, t, trans, c, r0, cols)
    }
}

/// The block reflector from the right: faer's products, or the serial loops inside
/// [`crate::cpu::reference::run`].
pub(crate) fn block_right<T: Scalar>(v: &Mat<T>, t: &Mat<T>, c: &mut Mat<T>, c0: usize) {
    if crate::cpu::reference::active() {
        crate::cpu::wy::larfb_right(v, t, c, c0)
    } else {
        larfb_right(v, t, c, c0)
    }
}
