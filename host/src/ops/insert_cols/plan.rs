//! Validation and shapes, shared by both backends so that they fail alike.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;
use crate::base::dims::check_finite;

pub(super) const OP: &str = "insert_cols";

/// A validated column insertion (docs/algorithms.md#column-insertion): what both backends execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Rows m (unchanged).
    pub m: usize,
    /// Columns before the update.
    pub n: usize,
    /// Number of inserted columns.
    pub p: usize,
    /// First inserted column in the result (0-based, ≤ n).
    pub k0: usize,
    /// Householder block size n_b for step 2.
    pub nb: usize,
}

/// Validates inserting the m×p block `u` as columns k0..k0+p (docs/algorithms.md#column-insertion,
/// docs/algorithms.md#conventions).
///
/// # Errors
/// [`Error::EmptyBlock`] (p = 0), [`Error::Shape`] (u has ≠ m rows),
/// [`Error::OutOfRange`] (k0 > n), [`Error::Underdetermined`] (n + p > m),
/// [`Error::InvalidParam`] (block size 0),
/// [`Error::NonFinite`] (NaN or ±∞ in u).
pub(crate) fn plan<T: Scalar>(
    dims: Dims,
    k0: usize,
    u: MatRef<'_, T>,
    block_size: Option<usize>,
) -> Result<Plan> {
    let plan = plan_shape(dims, k0, (u.nrows(), u.ncols()), block_size)?;
    check_finite(OP, [("u", u)])?;
    Ok(plan)
}

/// [`plan`] from the shape of u alone: every check but the non-finite one (which update
/// data already on the device makes there, `Gpu::first_non_finite`).
///
/// # Errors
/// Those of [`plan`] but [`Error::NonFinite`].
pub(crate) fn plan_shape(
    dims: Dims,
    k0: usize,
    (u_rows, p): (usize, usize),
    block_size: Option<usize>,
) -> Result<Plan> {
    if p == 0 {
        return Err(Error::EmptyBlock { op: OP });
    }
    if u_rows != dims.m {
        return Err(Error::Shape {
            op: OP,
            what: "rows of u",
            got: u_rows,
            expected: dims.m,
        });
    }
    if k0 > dims.n {
        return Err(Error::OutOfRange {
            op: OP,
            k0,
            p,
            n: dims.n,
        });
    }
    if dims.n + p > dims.m {
        return Err(Error::Underdetermined {
            op: OP,
            m: dims.m,
            n: dims.n + p,
        });
    }
    let nb = resolve_block_size(OP, block_size, p)?;
    Ok(Plan {
        m: dims.m,
        n: dims.n,
        p,
        k0,
        nb,
    })
}
