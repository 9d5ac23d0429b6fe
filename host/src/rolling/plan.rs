//! Validation of rolling and recursive least-squares runs (shared by the backends so that
//! they fail alike).
#![forbid(unsafe_code)]

use super::{RecursiveParams, RollingParams};
use crate::base::error::{Error, Result};
use crate::base::rolling::{Layout, Missing, RollingData, WindowPlan};
use crate::base::scalar::Scalar;
use crate::ops::factorize::default_rank_tol;

const ROLLING: &str = "rolling_lstsq";
const RECURSIVE: &str = "recursive_lstsq";

fn invalid(op: &'static str, what: &'static str, why: String) -> Error {
    Error::InvalidParam { op, what, why }
}

/// The data's lengths against (nobs, series, k), k ≥ 1, and under [`Missing::Raise`]
/// finite entries (host data; device data are checked by the walk).
fn check_data<T: Scalar>(
    op: &'static str,
    data: &RollingData<'_, T>,
    missing: Missing,
) -> Result<()> {
    check_lengths(op, &data.layout(), data.y.len(), data.x.len())?;
    if missing == Missing::Raise {
        check_finite(op, data)?;
    }
    Ok(())
}

/// [`crate::Error::NonFinite`] naming the first NaN or ±∞ (in y, then in X).
pub(super) fn check_finite<T: Scalar>(op: &'static str, data: &RollingData<'_, T>) -> Result<()> {
    let (nt, ns) = (data.nobs, data.series);
    {
        if let Some(i) = data.y.iter().position(|v| !v.is_finite()) {
            let (row, col) = (i / ns, i % ns);
            return Err(Error::NonFinite {
                op,
                what: "y",
                row,
                col,
            });
        }
        let x_len = data.x.len();
        if let Some(i) = data.x.iter().position(|v| !v.is_finite()) {
            let (row, col) = (i / (x_len / nt.max(1)), i % (x_len / nt.max(1)));
            return Err(Error::NonFinite {
                op,
                what: "X",
                row,
                col,
            });
        }
    }
    Ok(())
}

/// y and X hold nobs × series and nobs × (series ×) k values, k ≥ 1, series ≥ 1.
pub(super) fn check_lengths(
    op: &'static str,
    layout: &Layout,
    y_len: usize,
    x_len_got: usize,
) -> Result<()> {
    let (nt, ns, k) = (layout.nobs, layout.series, layout.k);
    if k == 0 {
        return Err(Error::shape(op, "k (regressors)", 0, 1));
    }
    if ns == 0 {
        return Err(Error::shape(op, "series", 0, 1));
    }
    if y_len != nt * ns {
        return Err(Error::shape(op, "y length (nobs × series)", y_len, nt * ns));
    }
    let x_len = if layout.per_series {
        nt * ns * k
    } else {
        nt * k
    };
    let what = if layout.per_series {
        "X length (nobs × series × k)"
    } else {
        "X length (nobs × k)"
    };
    if x_len_got != x_len {
        return Err(Error::shape(op, what, x_len_got, x_len));
    }
    Ok(())
}

fn check_forget(op: &'static str, forget: f64) -> Result<()> {
    if forget > 0.0 && forget <= 1.0 {
        Ok(())
    } else {
        Err(invalid(
            op,
            "forget",
            format!("the forgetting factor must lie in (0, 1], got {forget}"),
        ))
    }
}

fn check_rank_tol(op: &'static str, tol: Option<f64>) -> Result<()> {
    match tol {
        Some(t) if !(t >= 0.0 && t.is_finite()) => Err(invalid(
            op,
            "rank_tol",
            format!("must be finite and non-negative, got {t}"),
        )),
        _ => Ok(()),
    }
}

/// The plan of [`super::rolling_lstsq`].
pub(super) fn rolling<T: Scalar>(
    data: &RollingData<'_, T>,
    window: usize,
    p: &RollingParams,
) -> Result<WindowPlan> {
    check_data(ROLLING, data, p.missing)?;
    rolling_plan(data.k, window, p)
}

/// The plan of a rolling run with k regressors (the data checked by the caller).
pub(super) fn rolling_plan(k: usize, window: usize, p: &RollingParams) -> Result<WindowPlan> {
    let op = ROLLING;
    if window == 0 {
        return Err(invalid(op, "window", "must be at least 1".into()));
    }
    let min_nobs = p.min_nobs.unwrap_or(k);
    if min_nobs < k || min_nobs > window {
        return Err(invalid(
            op,
            "min_nobs",
            format!("must lie in k..=window = {k}..={window}, got {min_nobs}"),
        ));
    }
    let forget = p.forget.unwrap_or(1.0);
    check_forget(op, forget)?;
    check_rank_tol(op, p.rank_tol)?;
    let refresh = p.refresh.unwrap_or(window);
    if refresh == 0 {
        return Err(invalid(op, "refresh", "must be at least 1".into()));
    }
    Ok(WindowPlan {
        window,
        min_nobs,
        expanding: p.expanding,
        forget,
        skip_missing: p.missing == Missing::Skip,
        refresh,
        rank_tol: p.rank_tol,
        default_rank_tol,
    })
}

/// The plan of [`super::recursive_lstsq`]: one window over all observations, growing.
pub(super) fn recursive<T: Scalar>(
    data: &RollingData<'_, T>,
    forget: f64,
    p: &RecursiveParams,
) -> Result<WindowPlan> {
    check_data(RECURSIVE, data, p.missing)?;
    recursive_plan(data.nobs, data.k, forget, p)
}

/// The plan of a recursive run over nobs observations of k regressors.
pub(super) fn recursive_plan(
    nobs: usize,
    k: usize,
    forget: f64,
    p: &RecursiveParams,
) -> Result<WindowPlan> {
    let op = RECURSIVE;
    check_forget(op, forget)?;
    check_rank_tol(op, p.rank_tol)?;
    let window = nobs.max(1);
    Ok(WindowPlan {
        window,
        min_nobs: k,
        expanding: true,
        forget,
        skip_missing: p.missing == Missing::Skip,
        refresh: window,
        rank_tol: p.rank_tol,
        default_rank_tol,
    })
}
