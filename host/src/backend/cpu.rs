//! The CPU backend: [`CpuQr`] built by factorisation and updated through [`QrUpdate`].
#![forbid(unsafe_code)]

use crate::backend::QrUpdate;
use crate::base::error::Result;
use crate::base::mat::{Mat, MatRef};
use crate::base::params::{FactorParams, FactorsParams, QPolicy, UpdateParams};
use crate::base::scalar::Scalar;
use crate::base::solution::{DriftReport, Solution};
use crate::state::cpu::CpuQr;

impl<T: Scalar> CpuQr<T> {
    /// Factorises A (m×n, m ≥ n) and transforms the right-hand sides b (m×q)
    /// with blocked Householder QR (docs/algorithms.md#blocked-householder-qr).
    ///
    /// # Errors
    /// [`Error::Shape`](crate::Error::Shape), [`Error::Underdetermined`](crate::Error::Underdetermined) (m < n), [`Error::NonFinite`](crate::Error::NonFinite),
    /// [`Error::InvalidParam`](crate::Error::InvalidParam), [`Error::RankDeficient`](crate::Error::RankDeficient).
    pub fn factorize(
        a: MatRef<'_, T>,
        b: MatRef<'_, T>,
        policy: QPolicy,
        params: FactorParams,
    ) -> Result<Self> {
        crate::ops::factorize::run_cpu(a, b, policy, params)
    }
}

impl<T: Scalar> CpuQr<T> {
    /// A state from factors computed elsewhere (docs/algorithms.md#states-from-factors): Q
    /// (m×m) and R (m×n) under [`QPolicy::Full`], Q₁ (m×n) and R (n×n) under
    /// [`QPolicy::Thin`], or R (n×n) alone under [`QPolicy::None`], where `m` (≥ n) is the
    /// number of rows R stands for. Q is taken as orthonormal, not checked; R's strictly
    /// lower part is taken as zero. The state has one right-hand side, b = 0; updates that
    /// ask for right-hand sides of new rows take zeros.
    ///
    /// # Errors
    /// [`Error::Shape`](crate::Error::Shape), [`Error::Underdetermined`](crate::Error::Underdetermined), [`Error::NeedsQ`](crate::Error::NeedsQ),
    /// [`Error::InvalidParam`](crate::Error::InvalidParam), [`Error::NonFinite`](crate::Error::NonFinite) (with `params.check_finite`).
    ///
    /// # Examples
    /// ```
    /// use cuqr::{CpuQr, FactorParams, FactorsParams, Mat, QPolicy, QrUpdate};
    /// let a = Mat::<f64>::from_fn(6, 3, |i, j| 1.0 / (1.0 + i as f64 + 2.0 * j as f64) + (i == j) as u8 as f64);
    /// let b = Mat::<f64>::from_fn(6, 1, |i, _| i as f64);
    /// let f = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Full, FactorParams::default())?;
    /// // the factors as another library would hand them over
    /// let (q, r) = (f.q_ref().unwrap().clone(), f.r_ref().clone());
    /// let mut st = CpuQr::from_factors(QPolicy::Full, 6, Some(q.as_ref()), r.as_ref(), FactorsParams::default())?;
    /// st.insert_row(2, &[1.0, 2.0, 3.0], &[0.0])?;
    /// let (q1, r1) = st.into_factors();
    /// assert_eq!((q1.unwrap().nrows(), r1.nrows()), (7, 7));
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn from_factors(
        policy: QPolicy,
        m: usize,
        q: Option<MatRef<'_, T>>,
        r: MatRef<'_, T>,
        params: FactorsParams,
    ) -> Result<Self> {
        crate::ops::from_factors::run_cpu(policy, m, q, r, params)
    }

    /// The state's Q (none for an R-only state) and R, consumed without a copy.
    pub fn into_factors(self) -> (Option<Mat<T>>, Mat<T>) {
        (self.q, self.r)
    }
}

impl<T: Scalar> CpuQr<T> {
    /// Drift bookkeeping after a successful update (docs/algorithms.md#drift-control). A
    /// failed measure or refresh leaves the state as the update left it; the record keeps
    /// the previous estimate.
    fn after_update(&mut self) {
        let _ = crate::ops::drift::after_update(self);
    }
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
        crate::ops::insert_cols::run_cpu(self, k0, u)?;
        self.after_update();
        Ok(())
    }
    fn delete_cols(&mut self, k0: usize, p: usize) -> Result<()> {
        crate::ops::delete_cols::run_cpu(self, k0, p)?;
        self.after_update();
        Ok(())
    }
    fn insert_rows(&mut self, k0: usize, u: MatRef<'_, T>, e: MatRef<'_, T>) -> Result<()> {
        crate::ops::insert_rows::run_cpu(self, k0, u, e)?;
        self.after_update();
        Ok(())
    }
    fn delete_rows(&mut self, k0: usize, p: usize) -> Result<()> {
        crate::ops::delete_rows::run_cpu(self, k0, p)?;
        self.after_update();
        Ok(())
    }
    fn rank_one(&mut self, u: &[T], v: &[T]) -> Result<()> {
        crate::ops::rank_one::run_cpu(self, u, v)?;
        self.after_update();
        Ok(())
    }
    fn solve(&self) -> Result<Solution<T>> {
        let mut sol = crate::ops::solve::solve_cpu(&self.r, &self.d, self.dims.n)?;
        if self.dims.policy != QPolicy::Full {
            sol.residual_norms = crate::cpu::reduced::residual_norms(
                self.dims.policy,
                self.q.as_ref(),
                &self.d,
                self.data.as_ref(),
                &self.rho,
            );
        }
        Ok(sol)
    }
    fn delete_rows_with(
        &mut self,
        k0: usize,
        rows: MatRef<'_, T>,
        rhs: MatRef<'_, T>,
    ) -> Result<()> {
        let p = crate::ops::delete_rows::plan_given(self.dims, k0, rows, rhs)?;
        if self.dims.policy == QPolicy::None && self.data.is_none() {
            crate::cpu::reduced::delete_rows(self.factors_mut(), k0, p, Some((rows, rhs)))?;
        } else {
            crate::ops::delete_rows::run_cpu(self, k0, p)?;
        }
        self.after_update();
        Ok(())
    }
    fn slide(&mut self, rows: MatRef<'_, T>, rhs: MatRef<'_, T>, drop: usize) -> Result<()> {
        crate::ops::slide::run(self, rows, rhs, drop)?;
        self.after_update();
        Ok(())
    }
    fn rank_k(&mut self, u: MatRef<'_, T>, v: MatRef<'_, T>) -> Result<()> {
        crate::ops::rank_k::run(self, u, v)?;
        self.after_update();
        Ok(())
    }
    fn replace_cols(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()> {
        crate::ops::replace_cols::run(self, k0, u)?;
        self.after_update();
        Ok(())
    }
    fn shift_col(&mut self, from: usize, to: usize) -> Result<()> {
        crate::ops::shift_col::run(self, from, to)?;
        self.after_update();
        Ok(())
    }
    fn drift(&self) -> DriftReport {
        self.drift
    }
    fn check_drift(&mut self) -> Result<DriftReport> {
        crate::ops::drift::check(self)
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
