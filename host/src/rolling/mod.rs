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
//! On a GPU one thread walks one series over one segment of time steps (a segment that
//! starts later first factorises the window before it), so a run is one launch over
//! series × segments; [`rolling_lstsq_device`] takes data already on the device.
//! [`Device::Auto`] picks the GPU from [`AUTO_GPU_MIN_WORK`] on and says why in
//! [`RollingResult::fallback`] when it does not.
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

mod device;
mod plan;
mod route;

pub use device::{
    recursive_lstsq_device, rolling_lstsq_device, DeviceRollingData, DeviceRollingResult,
};
pub use route::AUTO_GPU_MIN_WORK;

pub use crate::base::rolling::{Missing, RollingData};
pub use crate::cpu::rolling_series::Refactorisations;

use crate::backend::device::Device;
use crate::base::error::Result;
use crate::base::rolling::WindowPlan;
use crate::base::scalar::Scalar;
use crate::cpu::rolling_series;
use crate::gpu::runtime::GpuScalar;

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
    /// Where to run: `Auto` (the default) takes GPU 0 when nobs·series·k² reaches
    /// [`AUTO_GPU_MIN_WORK`] and one opens; `Gpu(i)` runs on GPU i (k ≤ 16 there: more
    /// regressors run on the CPU); [`RollingResult::fallback`] says why a run did not take
    /// the GPU. Each call opens the GPU; [`rolling_lstsq_device`] reuses an open one.
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
/// [`crate::Error::NonFinite`] under [`Missing::Raise`] when the data hold NaN or ±∞;
/// [`crate::Error::NoDevice`] (and the GPU's other errors) for a [`Device::Gpu`] that does
/// not open or fails. Numerical trouble is never an error: a refused downdate
/// refactorises the window.
pub fn rolling_lstsq<T: GpuScalar>(
    data: &RollingData<'_, T>,
    window: usize,
    params: &RollingParams,
) -> Result<RollingResult<T>> {
    let plan = plan::rolling(data, window, params)?;
    run(data, &plan, params.device)
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
pub fn recursive_lstsq<T: GpuScalar>(
    data: &RollingData<'_, T>,
    forget: f64,
    params: &RecursiveParams,
) -> Result<RollingResult<T>> {
    let plan = plan::recursive(data, forget, params)?;
    run(data, &plan, params.device)
}

/// Runs the plan where [`route::route`] says.
fn run<T: GpuScalar>(
    data: &RollingData<'_, T>,
    plan: &WindowPlan,
    device: Device,
) -> Result<RollingResult<T>> {
    let layout = data.layout();
    match route::route(device, &layout)? {
        route::Route::Cpu(fallback) => Ok(run_cpu(data, plan, fallback)),
        route::Route::Gpu(gpu) => {
            let (params, rss, rank_deficient, refactorisations) =
                crate::gpu::algo::rolling::walk_host(&gpu, data.y, data.x, layout, plan)?;
            Ok(RollingResult {
                nobs: layout.nobs,
                series: layout.series,
                k: layout.k,
                params,
                rss,
                rank_deficient,
                refactorisations,
                fallback: None,
            })
        }
    }
}

/// Runs the plan on the CPU and turns the series-major output into nobs × series order.
fn run_cpu<T: Scalar>(
    data: &RollingData<'_, T>,
    plan: &WindowPlan,
    fallback: Option<String>,
) -> RollingResult<T> {
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
