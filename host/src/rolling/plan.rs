//! Validation of rolling and recursive least-squares runs (shared by the backends so that
//! they fail alike).
#![forbid(unsafe_code)]

use super::{RecursiveParams, RollingParams};
use crate::base::error::{Error, Result};
use crate::base::rolling::{Missing, RollingData, WindowPlan};
use crate::base::scalar::Scalar;
use crate::ops::factorize::default_rank_tol;

const ROLLING: &str = "rolling_lstsq";
const RECURSIVE: &str = "recursive_lstsq";

fn invalid(op: &'static str, what: &'static str, why: String) -> Error {
    Error::InvalidParam { op, what, why }
}

/// The data's lengths against (nobs, series, k), k ≥ 1, and under [`Missing::Raise`]
/// finite entries.
fn check_data<T: Scalar>(
    op: &'static str,
    data: &RollingData<'_, T>,
    missing: Missing,
) -> Result<()> {
    let (nt, ns, k) = (data.nobs, data.series, data.k);
    if k == 0 {
        return Err(Error::shape(op, "k (regressors)", 0, 1));
    }
    if ns == 0 {
        return Err(Error::shape(op, "series", 0, 1));
    }
    if data.y.len() != nt * ns {
        return Err(Error::shape(
            op,
            "y length (nobs × series)",
            data.y.len(),
            nt * ns,
        ));
    }
    let x_len = if data.per_series { nt * ns * k } else { nt * k };
    let what = if data.per_series {
        "X length (nobs × series × k)"
    } else {
        "X length (nobs × k)"
    };
    if data.x.len() != x_len {
        return Err(Error::shape(op, what, data.x.len(), x_len));
    }
    if missing == Missing::Raise {
        if let Some(i) = data.y.iter().position(|v| !v.is_finite()) {
            let (row, col) = (i / ns, i % ns);
            return Err(Error::NonFinite {
                op,
                what: "y",
                row,
                col,
            });
        }
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
    let op = ROLLING;
    check_data(op, data, p.missing)?;
    let k = data.k;
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
    let op = RECURSIVE;
    check_data(op, data, p.missing)?;
    check_forget(op, forget)?;
    check_rank_tol(op, p.rank_tol)?;
    let window = data.nobs.max(1);
    Ok(WindowPlan {
        window,
        min_nobs: data.k,
        expanding: true,
        forget,
        skip_missing: p.missing == Missing::Skip,
        refresh: window,
        rank_tol: p.rank_tol,
        default_rank_tol,
    })
}
