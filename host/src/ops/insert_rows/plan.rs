//! Validation and shapes, shared by both backends so that they fail alike.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::base::dims::{check_finite, check_shapes};

pub(super) const OP: &str = "insert_rows";

/// A validated row insertion (docs/algorithms.md#row-insertion): what both backends execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Row position of the first new row in Ã (0-based, ≤ m).
    pub k0: usize,
    /// Number of new rows.
    pub p: usize,
    /// Rows after the update, m + p.
    pub m_new: usize,
}

/// Validates inserting the p×n block `u` with right-hand-side rows `e` (p×q) as rows
/// k0..k0+p (docs/algorithms.md#row-insertion, docs/algorithms.md#conventions: k0 ∈ [0, m]). Pure;
/// Q is not required.
///
/// # Errors
/// [`Error::EmptyBlock`] (p = 0), [`Error::Shape`] (u not p×n, e not p×q),
/// [`Error::OutOfRange`] (k0 > m; reported with `n` = m), [`Error::NonFinite`]
/// (naming "u" or "e" and the entry).
pub(crate) fn plan<T: Scalar>(
    dims: Dims,
    k0: usize,
    u: MatRef<'_, T>,
    e: MatRef<'_, T>,
) -> Result<Plan> {
    let p = u.nrows();
    if p == 0 {
        return Err(Error::EmptyBlock { op: OP });
    }
    check_shapes(
        OP,
        [
            ("columns of u", u.ncols(), dims.n),
            ("rows of e", e.nrows(), p),
            ("columns of e", e.ncols(), dims.q),
        ],
    )?;
    if k0 > dims.m {
        return Err(Error::OutOfRange {
            op: OP,
            k0,
            p,
            n: dims.m,
        });
    }
    check_finite(OP, [("u", u), ("e", e)])?;
    Ok(Plan {
        k0,
        p,
        m_new: dims.m + p,
    })
}
