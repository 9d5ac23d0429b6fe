//! The one API both backends implement ([`QrUpdate`]), its implementations for the CPU and
//! GPU states, device selection ([`device::Device`], [`device::Qr`]) and diagnostics.
#![forbid(unsafe_code)]

pub mod cpu;
pub mod device;
pub mod diagnostics;
pub mod gpu;

use crate::base::error::Result;
use crate::base::mat::{Mat, MatRef};
use crate::base::params::{QPolicy, UpdateParams};
use crate::base::scalar::Scalar;
use crate::base::solution::{DriftReport, Solution};

/// A QR factorisation A = QR with right-hand sides d = Qᵀb that can be updated
/// in place (docs/algorithms.md). Positions are 0-based (docs/algorithms.md#conventions).
///
/// Every method validates its arguments first; on any error the state is
/// unchanged.
pub trait QrUpdate<T: Scalar> {
    /// Rows m of the current A.
    fn nrows(&self) -> usize;
    /// Columns n of the current A.
    fn ncols(&self) -> usize;
    /// Number q of right-hand sides.
    fn nrhs(&self) -> usize;
    /// The Q policy the state was built with.
    fn q_policy(&self) -> QPolicy;
    /// Options used by subsequent updates.
    fn params(&self) -> UpdateParams;
    /// Replaces the update options.
    fn set_params(&mut self, params: UpdateParams);

    /// Inserts the m×p block `u` so that it becomes columns k0..k0+p of A
    /// (docs/algorithms.md#column-insertion). Needs Q, or an R-only state's kept data.
    fn insert_cols(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()>;
    /// Deletes columns k0..k0+p of A (docs/algorithms.md#column-deletion). Q optional.
    fn delete_cols(&mut self, k0: usize, p: usize) -> Result<()>;
    /// Inserts the p×n block `u` as rows k0..k0+p of A, with right-hand-side
    /// rows `e` (p×q) (docs/algorithms.md#row-insertion). Q optional.
    fn insert_rows(&mut self, k0: usize, u: MatRef<'_, T>, e: MatRef<'_, T>) -> Result<()>;
    /// Deletes rows k0..k0+p of A, given them: `rows` (p×n) and their right-hand sides
    /// `rhs` (p×q). An R-only state without kept data needs them to downdate R
    /// (docs/algorithms.md#updates-without-q); states holding Q or the data use their own
    /// and only check the shapes.
    fn delete_rows_with(
        &mut self,
        k0: usize,
        rows: MatRef<'_, T>,
        rhs: MatRef<'_, T>,
    ) -> Result<()>;
    /// Deletes rows k0..k0+p of A (docs/algorithms.md#row-deletion). Needs Q, or an R-only
    /// state's kept data (otherwise [`crate::Error::NeedsData`]: use `delete_rows_with`).
    fn delete_rows(&mut self, k0: usize, p: usize) -> Result<()>;
    /// Replaces A by A + u vᵀ (docs/algorithms.md#rank-one-update). Needs Q, or an R-only
    /// state's kept data.
    fn rank_one(&mut self, u: &[T], v: &[T]) -> Result<()>;

    /// Slides a window of observations (docs/algorithms.md#sliding-window): the p×n
    /// `rows` with right-hand sides `rhs` (p×q) enter at the end, the oldest `drop` rows
    /// (rows 0..drop) leave, and with a forgetting factor λ = `params().forget` < 1, R and d
    /// are scaled by √λ first (recursive least squares with forgetting). Either block may be
    /// empty, not both. An R-only state reads the leaving rows from its kept data.
    ///
    /// # Errors
    /// [`crate::Error::EmptyBlock`], [`crate::Error::Shape`], [`crate::Error::InvalidParam`]
    /// (`drop` above the rows held, λ outside (0, 1]), [`crate::Error::Underdetermined`] (a
    /// window shorter than n), [`crate::Error::NonFinite`], [`crate::Error::NeedsData`] (an
    /// R-only state without kept data that must drop rows), [`crate::Error::DowndateFailed`].
    ///
    /// # Examples
    /// ```
    /// use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate};
    /// let a = Mat::<f64>::from_fn(40, 3, |i, j| ((i * 7 + j * 5) % 11) as f64 - 5.0);
    /// let b = Mat::<f64>::from_fn(40, 1, |i, _| i as f64);
    /// let keep = FactorParams { keep_data: true, ..FactorParams::default() };
    /// let mut qr = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::None, keep)?;
    /// let rows = Mat::<f64>::from_fn(4, 3, |i, j| (i + 2 * j) as f64 - 1.5);
    /// let rhs = Mat::<f64>::from_fn(4, 1, |i, _| i as f64);
    /// qr.slide(rows.as_ref(), rhs.as_ref(), 4)?; // 4 rows in, the 4 oldest out
    /// assert_eq!(qr.nrows(), 40);
    /// let x = qr.solve()?.x;                     // the window's solution
    /// # assert_eq!(x.nrows(), 3);
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    fn slide(&mut self, rows: MatRef<'_, T>, rhs: MatRef<'_, T>, drop: usize) -> Result<()>;
    /// Replaces A by A + UVᵀ for U (m×k) and V (n×k) (docs/algorithms.md#rank-k-update): k
    /// rank-one updates, or a refactorisation where k is large enough that it costs less.
    /// Needs Q, or an R-only state's kept data.
    ///
    /// # Errors
    /// [`crate::Error::EmptyBlock`], [`crate::Error::Shape`], [`crate::Error::NonFinite`],
    /// [`crate::Error::NeedsData`], [`crate::Error::RankDeficient`].
    fn rank_k(&mut self, u: MatRef<'_, T>, v: MatRef<'_, T>) -> Result<()>;
    /// Overwrites columns k0..k0+p of A with U (m×p) (docs/algorithms.md#column-replacement).
    /// Needs Q, or an R-only state's kept data.
    ///
    /// # Errors
    /// [`crate::Error::EmptyBlock`], [`crate::Error::Shape`], [`crate::Error::OutOfRange`],
    /// [`crate::Error::NonFinite`], [`crate::Error::NeedsData`],
    /// [`crate::Error::RankDeficient`].
    fn replace_cols(&mut self, k0: usize, u: MatRef<'_, T>) -> Result<()>;
    /// Moves column `from` of A to position `to`, the columns between closing up
    /// (docs/algorithms.md#column-shift). Needs Q, or an R-only state's kept data.
    ///
    /// # Errors
    /// [`crate::Error::OutOfRange`], [`crate::Error::NeedsData`].
    fn shift_col(&mut self, from: usize, to: usize) -> Result<()>;
    /// The state's drift record: the last estimate, checks and refreshes
    /// (docs/algorithms.md#drift-control).
    fn drift(&self) -> DriftReport;
    /// Measures the drift now and refreshes past the threshold of `params().drift`
    /// (docs/algorithms.md#drift-control).
    ///
    /// # Errors
    /// Device errors; those of a refresh ([`crate::Error::RankDeficient`]), which leaves the
    /// state unchanged.
    fn check_drift(&mut self) -> Result<DriftReport>;

    /// Least-squares solution and residual norms of the current problem
    /// (docs/algorithms.md#least-squares).
    fn solve(&self) -> Result<Solution<T>>;
    /// R copied to the host: m×n upper trapezoidal under [`QPolicy::Full`], n×n upper
    /// triangular under [`QPolicy::Thin`] and [`QPolicy::None`].
    fn r(&self) -> Result<Mat<T>>;
    /// Q copied to the host: m×m under [`QPolicy::Full`], Q₁ (m×n) under [`QPolicy::Thin`],
    /// `None` under [`QPolicy::None`].
    fn q(&self) -> Result<Option<Mat<T>>>;
    /// d = Qᵀb copied to the host: m×q under [`QPolicy::Full`], its first n rows otherwise.
    fn d(&self) -> Result<Mat<T>>;

    /// Inserts one column (p = 1).
    fn insert_col(&mut self, k0: usize, u: &[T]) -> Result<()> {
        self.insert_cols(k0, MatRef::from_col(u))
    }
    /// Deletes one column (p = 1).
    fn delete_col(&mut self, k0: usize) -> Result<()> {
        self.delete_cols(k0, 1)
    }
    /// Inserts one row `u` (length n) with right-hand-side entries `e` (length q).
    fn insert_row(&mut self, k0: usize, u: &[T], e: &[T]) -> Result<()> {
        let ur = MatRef::new(u, 1, u.len(), 1)?;
        let er = MatRef::new(e, 1, e.len(), 1)?;
        self.insert_rows(k0, ur, er)
    }
    /// Deletes one row (p = 1).
    fn delete_row(&mut self, k0: usize) -> Result<()> {
        self.delete_rows(k0, 1)
    }
}
