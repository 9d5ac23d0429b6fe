//! Rolling and recursive least squares for many series at once
//! (docs/algorithms.md#rolling-least-squares).
//!
//! [`rolling_lstsq`] estimates, for every time step t and every series, the least-squares
//! coefficients of the observations in the window of `window` steps ending at t, as
//! statsmodels' `RollingOLS` does for one series; [`recursive_lstsq`] estimates those of
//! all observations up to t with exponential forgetting (recursive least squares).
//!
//! Each series keeps the k×k triangular factor R of its window, with d = Q₁ᵀy and the
//! residual norm: a new observation enters by Givens rotations, the oldest leaves by a
//! downdate with the observation's own row (which is in the data), a downdate that the
//! refusal test turns down refactorises the window from its data, and so does every
//! `window`-th downdate ([`RollingParams::refresh`]) to bound drift. No step solves
//! normal equations, and no step allocates. Series run in parallel.
//!
//! Only the CPU runs these functions for now; a [`Device`] other than
//! [`Device::Cpu`] falls back to the CPU and says so in [`RollingResult::fallback`].
//!
//! # Examples
//! ```
//! use cuqr::rolling::{rolling_lstsq, RollingData, RollingParams};
//! // y = 1 + 2·t exactly, one series, regressors [1, t].
//! let nobs = 30;
//! let x: Vec<f64> = (0..nobs).flat_map(|t| [1.0, t as f64]).collect();
//! let y: Vec<f64> = (0..nobs).map(|t| 1.0 + 2.0 * t as f64).collect();
//! let data = RollingData::shared(&y, &x, nobs, 1, 2);
//! let res = rolling_lstsq(&data, 10, &RollingParams::default())?;
//! assert!(res.params_at(8, 0)[0].is_nan()); // the first window ends at t = 9
//! let beta = res.params_at(20, 0);
//! assert!((beta[0] - 1.0).abs() < 1e-10 && (beta[1] - 2.0).abs() < 1e-10);
//! assert!(res.rss_at(20, 0) < 1e-18);
//! # Ok::<(), cuqr::Error>(())
//! ```
#![forbid(unsafe_code)]

mod plan;

pub use crate::base::rolling::{Missing, RollingData};
pub use crate::cpu::rolling_series::Refactorisations;

use crate::backend::device::Device;
use crate::base::error::Result;
use crate::base::scalar::Scalar;
use crate::cpu::rolling_series;

/// Options of [`rolling_lstsq`] (the window length is an argument). The defaults are
/// statsmodels' `RollingOLS` defaults.
///
/// # Examples
/// ```
/// use cuqr::rolling::{Missing, RollingParams};
/// let p = RollingParams { min_nobs: Some(20), expanding: true, missing: Missing::Skip,
///                         ..Default::default() };
/// assert_eq!(RollingParams::default().forget, None);
/// # let _ = p;
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RollingParams {
    /// Finite observations a window needs for estimates, k ≤ min_nobs ≤ window.
    /// `None`: k (as `RollingOLS`).
    pub min_nobs: Option<usize>,
    /// Estimate the windows shorter than `window` at the start too, once they hold
    /// `min_nobs` observations (`RollingOLS(expanding=True)`).
    pub expanding: bool,
    /// Exponential forgetting inside the window: λ ∈ (0, 1], an observation a steps
    /// before the window's end weighs λᵃ. `None`: 1 (plain rolling least squares).
    pub forget: Option<f64>,
    /// Non-finite observations: [`Missing::Drop`] (the default), `Skip` or `Raise`.
    pub missing: Missing,
    /// Refactorise a series' window from its data after this many downdates (≥ 1).
    /// `None`: every `window` downdates, so that each window's factor comes from at most
    /// one window's worth of updates.
    pub refresh: Option<usize>,
    /// A window's estimates are NaN (and [`RollingResult::rank_deficient`] is set) when a
    /// diagonal entry of its R has |R_jj| ≤ rank_tol·‖R‖_F. `None`: the factorisation's
    /// default, max(m, k)·u/√min(m, k) for the window's m observations.
    pub rank_tol: Option<f64>,
    /// Where to run: only the CPU implements rolling least squares for now; the default
    /// `Auto` and `Gpu(_)` run on the CPU and report it in [`RollingResult::fallback`].
    pub device: Device,
}

/// Options of [`recursive_lstsq`] (the forgetting factor is an argument).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecursiveParams {
    /// Non-finite observations: [`Missing::Drop`] leaves them out (the default),
    /// `Skip` makes every estimate from the first one on NaN, `Raise` refuses the data.
    pub missing: Missing,
    /// As [`RollingParams::rank_tol`].
    pub rank_tol: Option<f64>,
    /// As [`RollingParams::device`].
    pub device: Device,
}

/// The estimates of every series at every time step.
#[derive(Clone, Debug)]
pub struct RollingResult<T> {
    nobs: usize,
    series: usize,
    k: usize,
    /// Coefficients, nobs × series × k in row-major order: NaN where a window has no
    /// estimate (too few observations, a missing one under [`Missing::Skip`], or a
    /// rank-deficient R).
    pub params: Vec<T>,
    /// Residual sum of squares of each window's fit, nobs × series (weighted under
    /// forgetting); NaN where `params` is.
    pub rss: Vec<T>,
    /// nobs × series: the window had enough observations but its R failed the rank test.
    pub rank_deficient: Vec<bool>,
    /// How often windows were factorised again from their data.
    pub refactorisations: Refactorisations,
    /// Why the run did not take the device asked for (it ran on the CPU), if it did not.
    pub fallback: Option<String>,
}

impl<T: Scalar> RollingResult<T> {
    /// (nobs, series, k).
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.nobs, self.series, self.k)
    }

    /// The k coefficients of series `s` for the window ending at time `t`.
    pub fn params_at(&self, t: usize, s: usize) -> &[T] {
        let at = (t * self.series + s) * self.k;
        &self.params[at..at + self.k]
    }

    /// The residual sum of squares of series `s` for the window ending at time `t`.
    pub fn rss_at(&self, t: usize, s: usize) -> T {
        self.rss[t * self.series + s]
    }
}

/// Rolling least squares: for each time step t and series s, the coefficients β
/// minimising Σ (y_{i,s} − x_{i,s}ᵀβ)² over the `window` observations ending at t (the
/// finite ones under [`Missing::Drop`]), as statsmodels' `RollingOLS(y, X, window).fit()`
/// for each series; see the [module documentation](self) for an example and
/// docs/algorithms.md#rolling-least-squares for the differences.
///
/// # Errors
/// [`crate::Error::Shape`] when y or X do not hold nobs × series (× k) values or k = 0;
/// [`crate::Error::InvalidParam`] for window = 0, min_nobs outside k..=window, a forgetting
/// factor outside (0, 1], refresh = 0 or a negative rank tolerance;
/// [`crate::Error::NonFinite`] under [`Missing::Raise`] when the data hold NaN or ±∞.
/// Numerical trouble is never an error: a refused downdate refactorises the window.
pub fn rolling_lstsq<T: Scalar>(
    data: &RollingData<'_, T>,
    window: usize,
    params: &RollingParams,
) -> Result<RollingResult<T>> {
    let plan = plan::rolling(data, window, params)?;
    Ok(run(data, &plan, params.device))
}

/// Recursive least squares with exponential forgetting: for each time step t and series
/// s, the coefficients β minimising Σ_{i≤t} λ^{t−i}(y_{i,s} − x_{i,s}ᵀβ)², with λ =
/// `forget` ∈ (0, 1] (λ = 1: the expanding-window least squares of all observations so
/// far). Estimates are NaN until the observations determine β (R passes the rank test).
///
/// # Examples
/// ```
/// use cuqr::rolling::{recursive_lstsq, RecursiveParams, RollingData};
/// let x: Vec<f64> = (0..50).flat_map(|t| [1.0, (t as f64).sin()]).collect();
/// let y: Vec<f64> = (0..50).map(|t| 3.0 - (t as f64).sin()).collect();
/// let res = recursive_lstsq(&RollingData::shared(&y, &x, 50, 1, 2), 0.98,
///                           &RecursiveParams::default())?;
/// assert!(res.params_at(0, 0)[0].is_nan()); // one observation, two unknowns
/// assert!((res.params_at(49, 0)[1] + 1.0).abs() < 1e-10);
/// # Ok::<(), cuqr::Error>(())
/// ```
///
/// # Errors
/// As [`rolling_lstsq`]: shapes, `forget` outside (0, 1], non-finite data under
/// [`Missing::Raise`].
pub fn recursive_lstsq<T: Scalar>(
    data: &RollingData<'_, T>,
    forget: f64,
    params: &RecursiveParams,
) -> Result<RollingResult<T>> {
    let plan = plan::recursive(data, forget, params)?;
    Ok(run(data, &plan, params.device))
}

/// Runs the plan on the CPU, the only backend for now, and turns the series-major
/// output into nobs × series order.
fn run<T: Scalar>(
    data: &RollingData<'_, T>,
    plan: &crate::base::rolling::WindowPlan,
    device: Device,
) -> RollingResult<T> {
    let fallback = cpu_fallback(device);
    let out = rolling_series::run(data, plan);
    let (nt, ns, k) = (data.nobs, data.series, data.k);
    let (params, rss, rank_deficient) = if ns == 1 {
        (out.params, out.rss, out.rank_deficient)
    } else {
        let mut params = vec![T::ZERO; nt * ns * k];
        let mut rss = vec![T::ZERO; nt * ns];
        let mut flags = vec![false; nt * ns];
        for s in 0..ns {
            for t in 0..nt {
                let src = (s * nt + t) * k;
                let dst = (t * ns + s) * k;
                params[dst..dst + k].copy_from_slice(&out.params[src..src + k]);
                rss[t * ns + s] = out.rss[s * nt + t];
                flags[t * ns + s] = out.rank_deficient[s * nt + t];
            }
        }
        (params, rss, flags)
    };
    RollingResult {
        nobs: nt,
        series: ns,
        k,
        params,
        rss,
        rank_deficient,
        refactorisations: out.counts,
        fallback,
    }
}

/// Why a device other than the CPU was not used (there is no GPU implementation yet).
fn cpu_fallback(device: Device) -> Option<String> {
    const WHY: &str = "rolling and recursive least squares have no GPU implementation yet";
    match device {
        Device::Cpu => None,
        Device::Auto => Some(format!("{WHY}; ran on the CPU")),
        Device::Gpu(i) => Some(format!("GPU {i} was asked for, but {WHY}; ran on the CPU")),
    }
}
