//! The serial CPU backend: the seeds' algorithms as plain loops (spec §1.3–§1.11).
//! It is the reference every GPU result is checked against and the seeds'
//! "sequential update" baseline.
#![forbid(unsafe_code)]

pub mod givens;
pub mod householder;
pub mod reference;
pub mod wy;

use crate::backend::{QrUpdate, Solution};
use crate::error::{Error, Result};
use crate::mat::{Mat, MatRef};
use crate::params::{FactorParams, QPolicy, UpdateParams};
use crate::scalar::Scalar;

/// Dimensions and policy of a factorisation state: what `plan` functions check
/// against, shared by both backends so that they fail alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    /// Rows m.
    pub m: usize,
    /// Columns n.
    pub n: usize,
    /// Right-hand sides q.
    pub q: usize,
    /// Q policy.
    pub policy: QPolicy,
}

/// A QR factorisation held on the host and updated serially.
///
/// # Examples
/// ```
/// use cuqr::{CpuQr, Mat, QPolicy, QrUpdate, FactorParams};
/// let a = Mat::<f64>::from_fn(6, 3, |i, j| 1.0 / (1.0 + i as f64 + 2.0 * j as f64) + (i == j) as u8 as f64);
/// let b = Mat::<f64>::from_fn(6, 1, |i, _| i as f64 - 2.5);
/// let mut qr = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Full, FactorParams::default()).unwrap();
/// qr.delete_cols(1, 1).unwrap();
/// let sol = qr.solve().unwrap();
/// assert_eq!(sol.x.nrows(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct CpuQr<T: Scalar> {
    pub(crate) dims: Dims,
    /// R, m×n upper trapezoidal.
    pub(crate) r: Mat<T>,
    /// d = Qᵀb, m×q.
    pub(crate) d: Mat<T>,
    /// Explicit Q (m×m) under `QPolicy::Full`.
    pub(crate) q: Option<Mat<T>>,
    pub(crate) params: UpdateParams,
    /// Relative rank tolerance (|R_jj| ≤ rank_tol·‖R‖_F is rank deficient).
    pub(crate) rank_tol: f64,
}

impl<T: Scalar> CpuQr<T> {
    /// Factorises A (m×n, m ≥ n) and transforms the right-hand sides b (m×q)
    /// with blocked Householder QR (spec §1.4).
    ///
    /// # Errors
    /// [`Error::Shape`], [`Error::Underdetermined`] (m < n), [`Error::NonFinite`],
    /// [`Error::InvalidParam`], [`Error::RankDeficient`].
    pub fn factorize(
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<Self> {
        crate::qr::factorize::run_cpu(a, b, policy, params)
    }

    /// Dimensions and policy.
    pub fn dims(&self) -> Dims {
        self.dims
    }

    /// Borrow R (m×n).
    pub fn r_ref(&self) -> &Mat<T> {
        &self.r
    }
    /// Borrow d (m×q).
    pub fn d_ref(&self) -> &Mat<T> {
        &self.d
    }
    /// Borrow Q (m×m) if held.
    pub fn q_ref(&self) -> Option<&Mat<T>> {
        self.q.as_ref()
    }

    /// Checks the diagonal of R against the rank tolerance; the first offending
    /// column is reported (spec §5.2 F19).
    pub(crate) fn check_rank(&self) -> Result<()> {
        check_rank_of(&self.r, self.dims.n, self.rank_tol)
    }
}

/// |R_jj| ≤ rank_tol·‖R‖_F for the first such j → [`Error::RankDeficient`].
pub(crate) fn check_rank_of<T: Scalar>(r: &Mat<T>, n: usize, rank_tol: f64) -> Result<()> {
    let tol = rank_tol * r.norm_fro();
    for j in 0..n {
        let rjj = r[(j, j)].to_f64().abs();
        if rjj <= tol || !rjj.is_finite() {
            return Err(Error::RankDeficient {
                column: j,
                r_jj: rjj,
                tol,
            });
        }
    }
    Ok(())
}

impl<T: Scalar> QrUpdate<T> for CpuQr<T> {
    fn nrows(&self) -> usize {
        self.dims.m
    }
    fn ncols(&self) -> usize {
        self.dims.n
    }
    fn nrhs(&self) -> usize {
        self.dims.q
    }
    fn q_policy(&self) -> QPolicy {
        self.dims.policy
    }
    fn params(&self) -> UpdateParams {
        self.params
    }
    fn set_params(&mut self, params: UpdateParams) {
        self.params = params;
    }
    fn insert_cols(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()> {
        crate::update::insert_cols::run_cpu(self, k0, u)
    }
    fn delete_cols(&mut self, k0: usize, p: usize) -> Result<()> {
        crate::update::delete_cols::run_cpu(self, k0, p)
    }
    fn insert_rows(&mut self, k0: usize, u: MatRef<'_, T>, e: MatRef<'_, T>) -> Result<()> {
        crate::update::insert_rows::run_cpu(self, k0, u, e)
    }
    fn delete_rows(&mut self, k0: usize, p: usize) -> Result<()> {
        crate::update::delete_rows::run_cpu(self, k0, p)
    }
    fn rank_one(&mut self, u: &[T], v: &[T]) -> Result<()> {
        crate::update::rank_one::run_cpu(self, u, v)
    }
    fn solve(&self) -> Result<Solution<T>> {
        crate::qr::solve::solve_cpu(&self.r, &self.d, self.dims.n)
    }
    fn r(&self) -> Result<Mat<T>> {
        Ok(self.r.clone())
    }
    fn q(&self) -> Result<Option<Mat<T>>> {
        Ok(self.q.clone())
    }
    fn d(&self) -> Result<Mat<T>> {
        Ok(self.d.clone())
    }
}
