//! Validation and shapes, shared by both backends so that they fail alike.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

pub(super) const OP: &str = "delete_cols";

/// A validated column deletion (docs/algorithms.md#column-deletion): what both backends execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// First deleted column (0-based).
    pub k0: usize,
    /// Number of deleted columns.
    pub p: usize,
    /// Columns after the update, n − p ≥ 1.
    pub n_new: usize,
}

impl Plan {
    /// True when the deleted block is the right-most one (k0 = n − p): R is only
    /// truncated, d and Q do not change.
    pub fn is_truncation(&self) -> bool {
        self.k0 == self.n_new
    }
}

/// Validates deleting columns k0..k0+p of an m×n state (docs/algorithms.md#column-deletion,
/// docs/algorithms.md#conventions: k0 ∈ [0, n−p]). Pure; Q is not required.
///
/// # Errors
/// [`Error::EmptyBlock`] (p = 0), [`Error::OutOfRange`] (k0 + p > n), and
/// [`Error::InvalidParam`] (`p`) when p = n: a factorisation with no columns is
/// meaningless, so at least one column must remain.
pub(crate) fn plan(dims: Dims, k0: usize, p: usize) -> Result<Plan> {
    if p == 0 {
        return Err(Error::EmptyBlock { op: OP });
    }
    if k0.checked_add(p).is_none_or(|end| end > dims.n) {
        return Err(Error::OutOfRange {
            op: OP,
            k0,
            p,
            n: dims.n,
        });
    }
    if dims.n == p {
        return Err(Error::InvalidParam {
            op: OP,
            what: "p",
            why: format!("deleting all {p} columns would leave an empty factorisation"),
        });
    }
    Ok(Plan {
        k0,
        p,
        n_new: dims.n - p,
    })
}
