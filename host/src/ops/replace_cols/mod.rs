//! Column replacement: columns k0..k0+p of A overwritten by U (docs/algorithms.md#column-replacement).
#![forbid(unsafe_code)]

use crate::base::dims::{check_finite, Dims};
use crate::base::error::{Error, Result};
use crate::base::mat::MatRef;
use crate::base::scalar::Scalar;
use crate::ops::compose::{atomically, Composite};

pub(crate) const OP: &str = "replace_cols";

/// Validates U (m×p, p ≥ 1) replacing columns k0..k0+p of a state of `dims`.
///
/// # Errors
/// [`Error::EmptyBlock`], [`Error::Shape`], [`Error::OutOfRange`], [`Error::NonFinite`].
pub(crate) fn plan<T: Scalar>(dims: Dims, k0: usize, u: MatRef<'_, T>) -> Result<usize> {
    let p = u.ncols();
    if p == 0 {
        return Err(Error::EmptyBlock { op: OP });
    }
    if u.nrows() != dims.m {
        return Err(Error::Shape {
            op: OP,
            what: "rows of u",
            got: u.nrows(),
            expected: dims.m,
        });
    }
    if k0.checked_add(p).is_none_or(|e| e > dims.n) {
        return Err(Error::OutOfRange {
            op: OP,
            k0,
            p,
            n: dims.n,
        });
    }
    check_finite(OP, [("u", u)])?;
    Ok(p)
}

/// Columns k0..k0+p of A become U: the old columns are deleted and U inserted in their
/// place, on a snapshot.
///
/// # Errors
/// As [`plan`]; [`Error::NeedsData`] on an R-only state without kept data; the errors of
/// column insertion ([`Error::RankDeficient`] when the new A is rank deficient). On error
/// the state is unchanged.
pub(crate) fn run<T: Scalar, S: Composite<T>>(
    st: &mut S,
    k0: usize,
    u: MatRef<'_, T>,
) -> Result<()> {
    let p = plan(st.dims(), k0, u)?;
    if !st.holds_q() && !st.keeps_a() {
        return Err(crate::ops::needs_q_or_data(OP));
    }
    atomically(st, |w| {
        w.delete_cols_raw(k0, p)?;
        w.insert_cols_raw(k0, u)
    })
}
