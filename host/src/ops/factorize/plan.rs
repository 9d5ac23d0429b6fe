//! Validation and shapes, shared by both backends so that they fail alike.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::base::dims::check_finite;

pub(super) const OP: &str = "factorize";

/// Validated inputs of a factorisation (shared by both backends so that they fail alike).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Plan {
    /// Dimensions and policy of the resulting state.
    pub dims: Dims,
    /// Householder block size n_b.
    pub block_size: usize,
    /// Relative rank tolerance.
    pub rank_tol: f64,
}

/// Checks shapes, parameters and finiteness of A and b (docs/algorithms.md#rank-test).
///
/// # Errors
/// [`Error::Shape`] (empty A or b, b's rows ≠ A's rows), [`Error::Underdetermined`]
/// (m < n), [`Error::InvalidParam`] (block size 0, rank_tol negative or non-finite),
/// [`Error::NonFinite`] (naming "A" or "b" and the entry).
pub(crate) fn plan<T: Scalar>(
    a: MatRef<'_, T>,
    b: MatRef<'_, T>,
    policy: QPolicy,
    params: FactorParams,
) -> Result<Plan> {
    let plan = plan_shapes::<T>(a.shape(), b.shape(), policy, params)?;
    check_finite(OP, [("A", a), ("b", b)])?;
    Ok(plan)
}

/// The checks of [`plan`] that need no values: shapes of A (m×n) and b, block size
/// and rank tolerance (docs/algorithms.md#rank-test).
///
/// # Errors
/// As [`plan`], without [`Error::NonFinite`].
pub(crate) fn plan_shapes<T: Scalar>(
    (m, n): (usize, usize),
    (bm, q): (usize, usize),
    policy: QPolicy,
    params: FactorParams,
) -> Result<Plan> {
    let shape = |what, got, expected| Error::shape(OP, what, got, expected);
    if m == 0 {
        return Err(shape("rows of A", 0, 1));
    }
    if n == 0 {
        return Err(shape("columns of A", 0, 1));
    }
    if bm != m {
        return Err(shape("rows of b", bm, m));
    }
    if q == 0 {
        return Err(shape("columns of b", 0, 1));
    }
    if m < n {
        return Err(Error::Underdetermined { op: OP, m, n });
    }
    let block_size = resolve_block_size(OP, params.block_size, n)?;
    let rank_tol = resolve_rank_tol::<T>(OP, params.rank_tol, m, n)?;
    Ok(Plan {
        dims: Dims { m, n, q, policy },
        block_size,
        rank_tol,
    })
}

/// The relative rank tolerance of an m×n factorisation: `given`, or the default
/// [`default_rank_tol`] where none is given.
///
/// # Errors
/// [`Error::InvalidParam`] (`given` negative or non-finite), naming `op`.
pub(crate) fn resolve_rank_tol<T: Scalar>(
    op: &'static str,
    given: Option<f64>,
    m: usize,
    n: usize,
) -> Result<f64> {
    match given {
        None => Ok(default_rank_tol(m, n, T::UNIT_ROUNDOFF)),
        Some(t) if t.is_finite() && t >= 0.0 => Ok(t),
        Some(t) => Err(Error::InvalidParam {
            op,
            what: "rank_tol",
            why: format!("{t} is not a finite non-negative number"),
        }),
    }
}

/// The default relative rank tolerance: max(m, n)·u/√min(m, n). With ‖A‖_F/√min(m, n)
/// standing in for ‖A‖₂ (within a factor √min(m, n) of it), |R_jj| ≤ tol·‖A‖_F is the
/// usual numerical-rank test σ ≤ max(m, n)·u·‖A‖₂ (as NumPy's `matrix_rank`), while an
/// exactly dependent column (|R_jj| ≈ u·‖A‖) is still rejected. The former default
/// 10·max(m, n)·u rejected well-conditioned random f32 squares from n ≈ 1000 on.
pub fn default_rank_tol(m: usize, n: usize, unit_roundoff: f64) -> f64 {
    m.max(n) as f64 * unit_roundoff / (m.min(n).max(1) as f64).sqrt()
}
