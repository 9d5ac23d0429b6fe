//! Validation and shapes, shared by both backends so that they fail alike.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::base::dims::check_finite;

pub(super) const OP: &str = "rank_one";

/// A validated rank-one update (docs/algorithms.md#rank-one-update): what both backends execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Rows m (unchanged).
    pub m: usize,
    /// Columns n (unchanged).
    pub n: usize,
    /// Stage A variant A2 (Householder on w(n:m) first): chosen when m > n + 1.
    pub householder_first: bool,
}

/// Validates A + u vᵀ with u of length m and v of length n (docs/algorithms.md#rank-one-update).
///
/// # Errors
/// [`Error::Shape`] (wrong lengths),
/// [`Error::NonFinite`] (NaN or ±∞ in u or v).
pub(crate) fn plan<T: Scalar>(dims: Dims, u: &[T], v: &[T]) -> Result<Plan> {
    let plan = plan_shape(dims, (u.len(), 1), (v.len(), 1))?;
    check_finite(OP, [("u", MatRef::from_col(u)), ("v", MatRef::from_col(v))])?;
    Ok(plan)
}

/// The shape checks of [`plan`] for u and v given as (rows, columns): u must be m×1 and v
/// n×1 (the device entry point takes them as one-column views).
///
/// # Errors
/// [`Error::Shape`].
pub(crate) fn plan_shape(dims: Dims, u: (usize, usize), v: (usize, usize)) -> Result<Plan> {
    for (what, got, expected) in [
        ("length of u", u.0, dims.m),
        ("columns of u", u.1, 1),
        ("length of v", v.0, dims.n),
        ("columns of v", v.1, 1),
    ] {
        if got != expected {
            return Err(Error::Shape {
                op: OP,
                what,
                got,
                expected,
            });
        }
    }
    Ok(Plan {
        m: dims.m,
        n: dims.n,
        householder_first: dims.m > dims.n + 1,
    })
}
