//! Validation and shapes, shared by both backends so that they fail alike.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::base::dims::{check_finite, check_shapes};

pub(super) const OP: &str = "delete_rows";

/// A validated row deletion (docs/algorithms.md#row-deletion): what both backends execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Rows before the update.
    pub m: usize,
    /// Columns n (unchanged).
    pub n: usize,
    /// Number of deleted rows.
    pub p: usize,
    /// First deleted row (0-based, ≤ m − p).
    pub k0: usize,
}

/// Validates deleting rows k0..k0+p (docs/algorithms.md#row-deletion,
/// docs/algorithms.md#conventions: k0 ∈ [0, m−p]).
///
/// # Errors
/// [`Error::EmptyBlock`] (p = 0), [`Error::OutOfRange`] (k0 + p > m),
/// [`Error::Underdetermined`] (m − p < n).
pub(crate) fn plan(dims: Dims, k0: usize, p: usize) -> Result<Plan> {
    if p == 0 {
        return Err(Error::EmptyBlock { op: OP });
    }
    if k0.checked_add(p).is_none_or(|end| end > dims.m) {
        return Err(Error::OutOfRange {
            op: OP,
            k0,
            p,
            n: dims.m,
        });
    }
    if dims.m - p < dims.n {
        return Err(Error::Underdetermined {
            op: OP,
            m: dims.m - p,
            n: dims.n,
        });
    }
    Ok(Plan {
        m: dims.m,
        n: dims.n,
        p,
        k0,
    })
}

/// Validates `delete_rows_with`: rows k0..k0+p (p = the rows given) as [`plan`] does, the
/// rows p×n and their right-hand sides p×q, all finite. Returns p.
///
/// # Errors
/// As [`plan`]; [`Error::Shape`] (rows or rhs of the wrong shape); [`Error::NonFinite`].
pub(crate) fn plan_given<T: Scalar>(
    dims: Dims,
    k0: usize,
    rows: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
) -> Result<usize> {
    let p = rows.nrows();
    check_shapes(
        OP,
        [
            ("columns of rows", rows.ncols(), dims.n),
            ("rows of rhs", rhs.nrows(), p),
            ("columns of rhs", rhs.ncols(), dims.q),
        ],
    )?;
    plan(dims, k0, p)?;
    check_finite(OP, [("rows", rows), ("rhs", rhs)])?;
    Ok(p)
}
