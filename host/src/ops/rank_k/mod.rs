//! Rank-k update A + UVᵀ (docs/algorithms.md#rank-k-update).
#![forbid(unsafe_code)]

use crate::base::dims::{check_finite, check_shapes, Dims};
use crate::base::error::{Error, Result};
use crate::base::mat::MatRef;
use crate::base::params::QPolicy;
use crate::base::scalar::Scalar;
use crate::ops::compose::{atomically, Composite};

pub(crate) const OP: &str = "rank_k";

/// Validates U (m×k) and V (n×k) for a state of `dims`; returns k.
///
/// # Errors
/// [`Error::EmptyBlock`] (k = 0), [`Error::Shape`], [`Error::NonFinite`].
pub(crate) fn plan<T: Scalar>(dims: Dims, u: MatRef<'_, T>, v: MatRef<'_, T>) -> Result<usize> {
    let k = u.ncols();
    if k == 0 {
        return Err(Error::EmptyBlock { op: OP });
    }
    check_shapes(
        OP,
        [
            ("rows of u", u.nrows(), dims.m),
            ("rows of v", v.nrows(), dims.n),
            ("columns of v", v.ncols(), k),
        ],
    )?;
    check_finite(OP, [("u", u), ("v", v)])?;
    Ok(k)
}

/// Whether refactorising A + UVᵀ costs less than k rank-one updates, by flop counts
/// (docs/algorithms.md#rank-k-update): a rank-one update costs about 8m² (full Q),
/// 2mn² + 8mn (thin Q₁: one product with Q₁) or 12mn (R-only with kept data: the
/// corrected semi-normal equations' passes over A); refactorising about 4m²n + 2mn²,
/// 6mn² and 2mn² + 2mnk.
pub(crate) fn refactor_pays(dims: Dims, k: usize) -> bool {
    let (m, n, k) = (dims.m as f64, dims.n as f64, k as f64);
    let (updates, refactor) = match dims.policy {
        QPolicy::Full => (k * 8.0 * m * m, 4.0 * m * m * n + 2.0 * m * n * n),
        QPolicy::Thin => (k * (2.0 * m * n * n + 8.0 * m * n), 6.0 * m * n * n),
        _ => (k * 12.0 * m * n, 2.0 * m * n * n + 2.0 * m * n * k),
    };
    refactor < updates
}

/// A + UVᵀ: k rank-one updates on a snapshot, or a refactorisation where that is cheaper.
///
/// # Errors
/// As [`plan`]; [`Error::NeedsData`] on an R-only state without kept data; the errors of
/// the rank-one update and of factorisation ([`Error::RankDeficient`]). On error the state
/// is unchanged.
pub(crate) fn run<T: Scalar, S: Composite<T>>(
    st: &mut S,
    u: MatRef<'_, T>,
    v: MatRef<'_, T>,
) -> Result<()> {
    let dims = st.dims();
    let k = plan(dims, u, v)?;
    if !st.holds_q() && !st.keeps_a() {
        return Err(crate::ops::needs_q_or_data(OP));
    }
    if refactor_pays(dims, k) {
        return st.refactor_plus(u, v);
    }
    atomically(st, |w| {
        for c in 0..k {
            w.rank_one_raw(u.col(c), v.col(c))?;
        }
        Ok(())
    })
}
