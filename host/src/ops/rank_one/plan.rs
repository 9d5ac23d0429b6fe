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
    if u.len() != dims.m {
        return Err(Error::Shape {
            op: OP,
            what: "length of u",
            got: u.len(),
            expected: dims.m,
        });
    }
    if v.len() != dims.n {
        return Err(Error::Shape {
            op: OP,
            what: "length of v",
            got: v.len(),
            expected: dims.n,
        });
    }
    check_finite(OP, [("u", MatRef::from_col(u)), ("v", MatRef::from_col(v))])?;
    Ok(Plan {
        m: dims.m,
        n: dims.n,
        householder_first: dims.m > dims.n + 1,
    })
}
