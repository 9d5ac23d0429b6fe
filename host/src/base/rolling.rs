//! The inputs of rolling and recursive least squares as every backend reads them: the
//! observations of many series ([`RollingData`]), what to do with missing observations
//! ([`Missing`]), and the validated plan of a run ([`WindowPlan`]).
#![forbid(unsafe_code)]

use crate::base::scalar::Scalar;

/// Observations of `series` regressions over `nobs` time steps, in row-major (C, NumPy)
/// order: y is nobs × series, X is nobs × k (one design shared by every series) or
/// nobs × series × k (a design per series).
///
/// # Examples
/// ```
/// use cuqr::rolling::RollingData;
/// let y = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]; // 3 steps × 2 series
/// let x = [1.0, 0.0, 1.0, 1.0, 1.0, 2.0]; // 3 steps × 2 regressors, shared
/// let data = RollingData::shared(&y, &x, 3, 2, 2);
/// assert_eq!((data.nobs(), data.series(), data.k()), (3, 2, 2));
/// ```
#[derive(Clone, Copy, Debug)]
pub struct RollingData<'a, T> {
    pub(crate) y: &'a [T],
    pub(crate) x: &'a [T],
    pub(crate) nobs: usize,
    pub(crate) series: usize,
    pub(crate) k: usize,
    pub(crate) per_series: bool,
}

impl<'a, T: Scalar> RollingData<'a, T> {
    /// y (nobs × series) against one design X (nobs × k) shared by every series. The
    /// lengths are checked by the functions that take the data.
    pub fn shared(y: &'a [T], x: &'a [T], nobs: usize, series: usize, k: usize) -> Self {
        Self {
            y,
            x,
            nobs,
            series,
            k,
            per_series: false,
        }
    }

    /// y (nobs × series) against a design per series, X of nobs × series × k.
    pub fn per_series(y: &'a [T], x: &'a [T], nobs: usize, series: usize, k: usize) -> Self {
        Self {
            y,
            x,
            nobs,
            series,
            k,
            per_series: true,
        }
    }

    /// Time steps (rows of each regression).
    pub fn nobs(&self) -> usize {
        self.nobs
    }

    /// Number of series (regressions).
    pub fn series(&self) -> usize {
        self.series
    }

    /// Number of regressors.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Whether each series has its own design.
    pub fn has_per_series_x(&self) -> bool {
        self.per_series
    }

    /// The sizes without the data.
    pub(crate) fn layout(&self) -> Layout {
        Layout {
            nobs: self.nobs,
            series: self.series,
            k: self.k,
            per_series: self.per_series,
        }
    }

    /// The regressor row of series `s` at time `t`.
    #[inline]
    pub(crate) fn x_row(&self, t: usize, s: usize) -> &'a [T] {
        let at = if self.per_series {
            (t * self.series + s) * self.k
        } else {
            t * self.k
        };
        &self.x[at..at + self.k]
    }

    /// The observation of series `s` at time `t`.
    #[inline]
    pub(crate) fn y_at(&self, t: usize, s: usize) -> T {
        self.y[t * self.series + s]
    }

    /// Whether the observation of series `s` at time `t` (y and its regressor row) is
    /// finite.
    #[inline]
    pub(crate) fn is_finite(&self, t: usize, s: usize) -> bool {
        self.y_at(t, s).is_finite() && self.x_row(t, s).iter().all(|v| v.is_finite())
    }
}

/// The sizes of rolling data: (nobs, series, k) and whether X is per series.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    pub nobs: usize,
    pub series: usize,
    pub k: usize,
    pub per_series: bool,
}

/// What rolling least squares does with observations that hold NaN or ±∞ (in y or in
/// their regressor row). The names are statsmodels' `RollingOLS(missing=...)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Missing {
    /// Leave such observations out: each window uses the finite ones it holds, and has
    /// estimates when they number at least `min_nobs` (statsmodels' default).
    #[default]
    Drop,
    /// A window that holds such an observation has NaN estimates.
    Skip,
    /// Refuse the data: [`crate::Error::NonFinite`] names the first such entry.
    Raise,
}

/// A validated rolling or recursive least-squares run (shared by the backends).
#[derive(Clone, Copy, Debug)]
pub(crate) struct WindowPlan {
    /// Observations a full window spans (nobs for recursive least squares).
    pub window: usize,
    /// Finite observations a window needs for estimates (≥ k).
    pub min_nobs: usize,
    /// Windows shorter than `window` at the start have estimates once `min_nobs` rows are in.
    pub expanding: bool,
    /// The forgetting factor λ ∈ (0, 1]: a row `a` steps old weighs λᵃ.
    pub forget: f64,
    /// Windows with a non-finite observation have no estimates ([`Missing::Skip`]).
    pub skip_missing: bool,
    /// Refactorise from the window's data after this many downdates.
    pub refresh: usize,
    /// Relative rank tolerance; `None`: the factorisation's default for the window's rows.
    pub rank_tol: Option<f64>,
    /// The default relative rank tolerance for (rows, columns, unit roundoff).
    pub default_rank_tol: fn(usize, usize, f64) -> f64,
}

/// How often the window was factorised again from its data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Refactorisations {
    /// After `refresh` downdates, to bound the drift of the updated factor.
    pub scheduled: usize,
    /// After a downdate that the refusal test turned down.
    pub after_failed_downdate: usize,
}

impl core::ops::Add for Refactorisations {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self {
            scheduled: self.scheduled + o.scheduled,
            after_failed_downdate: self.after_failed_downdate + o.after_failed_downdate,
        }
    }
}
