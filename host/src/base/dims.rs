//! Dimensions of a factorisation state and the rank test shared by every backend.
#![forbid(unsafe_code)]

use super::error::{Error, Result};
use super::mat::{Mat, MatRef};
use super::params::QPolicy;
use super::scalar::Scalar;

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

/// |R_jj| ≤ rank_tol·‖R‖_F for the first such j → [`Error::RankDeficient`].
pub(crate) fn check_rank_of<T: Scalar>(r: &Mat<T>, n: usize, rank_tol: f64) -> Result<()> {
    let tol = rank_tol * r.norm_fro();
    check_diagonal((0..n).map(|j| r[(j, j)].to_f64()), tol)
}

/// The rank test on R's diagonal entries `diag` (R_00, R_11, …) against `tol`
/// (rank_tol·‖R‖_F): the first |R_jj| ≤ tol, or not finite → [`Error::RankDeficient`].
pub(crate) fn check_diagonal(diag: impl IntoIterator<Item = f64>, tol: f64) -> Result<()> {
    for (j, x) in diag.into_iter().enumerate() {
        let rjj = x.abs();
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

/// The first `(what, got, expected)` whose sizes disagree → [`Error::Shape`] of `op`: the
/// argument shape checks every `plan` shares.
pub(crate) fn check_shapes<const N: usize>(
    op: &'static str,
    checks: [(&'static str, usize, usize); N],
) -> Result<()> {
    for (what, got, expected) in checks {
        if got != expected {
            return Err(Error::Shape {
                op,
                what,
                got,
                expected,
            });
        }
    }
    Ok(())
}

/// The first NaN or ±∞ among the named matrices, in order → [`Error::NonFinite`] of `op`.
pub(crate) fn check_finite<T: Scalar, const N: usize>(
    op: &'static str,
    mats: [(&'static str, MatRef<'_, T>); N],
) -> Result<()> {
    for (what, x) in mats {
        if let Some((row, col)) = x.first_non_finite() {
            return Err(Error::NonFinite { op, what, row, col });
        }
    }
    Ok(())
}
