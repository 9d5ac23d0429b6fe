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
use crate::base::solution::Solution;

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
