//! Drift control: a cheap estimate of the state's loss of orthogonality after every few
//! updates, and a refresh past a threshold (docs/algorithms.md#drift-control).
#![forbid(unsafe_code)]

use crate::base::error::Result;
use crate::base::scalar::Scalar;
use crate::base::solution::DriftReport;
use crate::ops::compose::Composite;

/// The threshold of a state of m×n in the precision of `T`: the user's, or 10·max(m, n)·u.
pub(crate) fn threshold<T: Scalar>(tol: Option<f64>, m: usize, n: usize) -> f64 {
    tol.unwrap_or(10.0 * m.max(n) as f64 * T::UNIT_ROUNDOFF)
}

/// Counts a successful update and runs [`check`] on every `check_every`-th.
///
/// # Errors
/// Those of [`check`].
pub(crate) fn after_update<T: Scalar, S: Composite<T>>(st: &mut S) -> Result<()> {
    let every = st.update_params().drift.check_every;
    let d = st.drift_mut();
    d.since_check += 1;
    if every == 0 || d.since_check < every {
        return Ok(());
    }
    check(st).map(|_| ())
}

/// Measures the drift now and, past the threshold with refresh on, reorthogonalises or
/// refactorises from the kept data; returns the record.
///
/// # Errors
/// Those of the measure and of the refresh (which leaves the state unchanged on error).
pub(crate) fn check<T: Scalar, S: Composite<T>>(st: &mut S) -> Result<DriftReport> {
    let sample = st.drift_mut().checks;
    let estimate = st.measure_drift(sample)?;
    {
        let d = st.drift_mut();
        d.checks += 1;
        d.since_check = 0;
        d.estimate = estimate;
    }
    let params = st.update_params().drift;
    let dims = st.dims();
    let tol = threshold::<T>(params.tol, dims.m, dims.n);
    if params.refresh && estimate.is_some_and(|e| e > tol || e.is_nan()) && st.refresh()? {
        st.drift_mut().refreshes += 1;
    }
    Ok(*st.drift_mut())
}
