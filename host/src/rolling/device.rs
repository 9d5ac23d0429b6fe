//! Rolling least squares on data already in GPU memory, results left there
//! (docs/algorithms.md#rolling-least-squares).
#![forbid(unsafe_code)]

use super::plan::{recursive_plan, rolling_plan};
use super::{RecursiveParams, Refactorisations, RollingParams, RollingResult};
use crate::base::error::{Error, Result};
use crate::base::rolling::{Layout, Missing, WindowPlan};
use crate::gpu::algo::rolling::{unsupported, walk, DeviceWalk, Pitched};
use crate::gpu::runtime::{DevMat, DevVec, Gpu, GpuScalar};

/// Where one input lives: a contiguous vector, or a matrix whose column t is time step t.
#[derive(Clone, Copy, Debug)]
enum Source<'a, T> {
    Vec(&'a DevVec<T>),
    Mat(&'a DevMat<T>),
}

impl<T: GpuScalar> Source<'_, T> {
    /// The input as the walk reads it: `row` elements a time step at the source's pitch.
    fn pitched(&self, row: usize) -> Pitched<'_, T> {
        match self {
            Source::Vec(v) => Pitched {
                buf: v.view(),
                ld: row,
            },
            Source::Mat(m) => Pitched {
                buf: m.buf().slice(..),
                ld: m.ld(),
            },
        }
    }

    /// Checks that the source holds `nobs` time steps of `row` elements.
    /// The source's elements in row-major (time step by time step) order.
    fn download(&self, gpu: &Gpu) -> Result<Vec<T>> {
        match self {
            Source::Vec(v) => v.to_vec(gpu),
            Source::Mat(m) => Ok(m.to_host(gpu)?.as_slice().to_vec()),
        }
    }

    fn check(&self, op: &'static str, what: &'static str, nobs: usize, row: usize) -> Result<()> {
        match self {
            Source::Vec(v) if v.len() != nobs * row => {
                Err(Error::shape(op, what, v.len(), nobs * row))
            }
            Source::Mat(m) if m.nrows() != row => Err(Error::shape(op, what, m.nrows(), row)),
            Source::Mat(m) if m.ncols() != nobs => Err(Error::shape(op, what, m.ncols(), nobs)),
            _ => Ok(()),
        }
    }
}

/// Observations in device memory: y holds `series` values a time step and X `k` (one
/// design shared by every series) or `series·k` (a design per series). From vectors, in
/// [`super::RollingData`]'s row-major order, or from matrices whose column t holds time
/// step t (series × nobs and k × nobs or (series·k) × nobs; a row-major array of the
/// caller's seen as column-major, as DLPack hands it over).
///
/// # Examples
/// ```no_run
/// use cuqr::rolling::{rolling_lstsq_device, DeviceRollingData, RollingParams};
/// use cuqr::{DevVec, Gpu};
/// let gpu = Gpu::new(0)?;
/// let (nobs, series, k) = (500, 64, 3);
/// let x: Vec<f64> = (0..nobs * k).map(|i| ((i * 7919) % 101) as f64).collect();
/// let y: Vec<f64> = (0..nobs * series).map(|i| ((i * 104_729) % 97) as f64).collect();
/// let (yd, xd) = (DevVec::from_slice(&gpu, &y)?, DevVec::from_slice(&gpu, &x)?);
/// let data = DeviceRollingData::shared(&yd, &xd, nobs, series, k);
/// let res = rolling_lstsq_device(&gpu, &data, 60, &RollingParams::default())?;
/// let params = res.params().to_host(&gpu)?; // (series·k) × nobs: column t is step t
/// # assert_eq!((params.nrows(), params.ncols()), (series * k, nobs));
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DeviceRollingData<'a, T> {
    y: Source<'a, T>,
    x: Source<'a, T>,
    layout: Layout,
}

impl<'a, T: GpuScalar> DeviceRollingData<'a, T> {
    /// y (nobs × series, row-major) against one design X (nobs × k).
    pub fn shared(
        y: &'a DevVec<T>,
        x: &'a DevVec<T>,
        nobs: usize,
        series: usize,
        k: usize,
    ) -> Self {
        Self::new(Source::Vec(y), Source::Vec(x), nobs, series, k, false)
    }

    /// y (nobs × series) against a design per series, X of nobs × series × k (row-major).
    pub fn per_series(
        y: &'a DevVec<T>,
        x: &'a DevVec<T>,
        nobs: usize,
        series: usize,
        k: usize,
    ) -> Self {
        Self::new(Source::Vec(y), Source::Vec(x), nobs, series, k, true)
    }

    /// y as a series × nobs matrix and X as a k × nobs (shared) or (series·k) × nobs
    /// (`per_series`) one: column t holds time step t. Sizes are read from y and X; X's
    /// rows must be a multiple of `k`.
    pub fn from_columns(y: &'a DevMat<T>, x: &'a DevMat<T>, k: usize, per_series: bool) -> Self {
        Self::new(
            Source::Mat(y),
            Source::Mat(x),
            y.ncols(),
            y.nrows(),
            k,
            per_series,
        )
    }

    fn new(
        y: Source<'a, T>,
        x: Source<'a, T>,
        nobs: usize,
        series: usize,
        k: usize,
        per_series: bool,
    ) -> Self {
        let layout = Layout {
            nobs,
            series,
            k,
            per_series,
        };
        Self { y, x, layout }
    }

    /// Shapes: k ≥ 1, series ≥ 1, y and X hold nobs steps of series and k (or series·k).
    fn check(&self, op: &'static str) -> Result<()> {
        let l = &self.layout;
        if l.k == 0 {
            return Err(Error::shape(op, "k (regressors)", 0, 1));
        }
        if l.series == 0 {
            return Err(Error::shape(op, "series", 0, 1));
        }
        let x_row = if l.per_series { l.series * l.k } else { l.k };
        self.y
            .check(op, "y (series a time step)", l.nobs, l.series)?;
        self.x
            .check(op, "X (k or series·k a time step)", l.nobs, x_row)
    }
}

/// The estimates of [`rolling_lstsq_device`], in device memory.
#[derive(Debug)]
pub struct DeviceRollingResult<T> {
    layout: Layout,
    walk: DeviceWalk<T>,
}

impl<T: GpuScalar> DeviceRollingResult<T> {
    /// (nobs, series, k).
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.layout.nobs, self.layout.series, self.layout.k)
    }

    /// Coefficients as a (series·k) × nobs matrix: column t holds time step t's, series
    /// after series (the row-major nobs × series × k array of [`RollingResult::params`]
    /// seen column by column); NaN where a window has no estimate.
    pub fn params(&self) -> &DevMat<T> {
        &self.walk.params
    }

    /// Residual sums of squares as a series × nobs matrix (as [`RollingResult::rss`]).
    pub fn rss(&self) -> &DevMat<T> {
        &self.walk.rss
    }

    /// How often windows were factorised again from their data.
    pub fn refactorisations(&self) -> Refactorisations {
        self.walk.counts
    }

    /// The coefficient and residual matrices ([`DeviceRollingResult::params`],
    /// [`DeviceRollingResult::rss`]), taken out.
    pub fn into_matrices(self) -> (DevMat<T>, DevMat<T>) {
        (self.walk.params, self.walk.rss)
    }

    /// Copies everything to the host.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn to_host(&self, gpu: &Gpu) -> Result<RollingResult<T>> {
        let (params, rss, rank_deficient) = self.walk.download(gpu, self.layout)?;
        Ok(RollingResult {
            nobs: self.layout.nobs,
            series: self.layout.series,
            k: self.layout.k,
            params,
            rss,
            rank_deficient,
            refactorisations: self.walk.counts,
            fallback: None,
        })
    }
}

/// [`super::rolling_lstsq`] on device data: one launch (and the download of a few
/// counters), results left on `gpu`. [`RollingParams::device`] is not read.
///
/// # Errors
/// As [`super::rolling_lstsq`]; [`Error::InvalidParam`] for k above 16 (the GPU walk's
/// limit); under [`Missing::Raise`] the non-finite entry is found after the walk.
pub fn rolling_lstsq_device<T: GpuScalar>(
    gpu: &Gpu,
    data: &DeviceRollingData<'_, T>,
    window: usize,
    params: &RollingParams,
) -> Result<DeviceRollingResult<T>> {
    let op = "rolling_lstsq_device";
    data.check(op)?;
    let plan = rolling_plan(data.layout.k, window, params)?;
    run(gpu, op, data, &plan, params.missing)
}

/// [`super::recursive_lstsq`] on device data, results left on `gpu`.
///
/// # Errors
/// As [`rolling_lstsq_device`].
pub fn recursive_lstsq_device<T: GpuScalar>(
    gpu: &Gpu,
    data: &DeviceRollingData<'_, T>,
    forget: f64,
    params: &RecursiveParams,
) -> Result<DeviceRollingResult<T>> {
    let op = "recursive_lstsq_device";
    data.check(op)?;
    let plan = recursive_plan(data.layout.nobs, data.layout.k, forget, params)?;
    run(gpu, op, data, &plan, params.missing)
}

fn run<T: GpuScalar>(
    gpu: &Gpu,
    op: &'static str,
    data: &DeviceRollingData<'_, T>,
    plan: &WindowPlan,
    missing: Missing,
) -> Result<DeviceRollingResult<T>> {
    if let Some(why) = unsupported(data.layout.k) {
        return Err(Error::InvalidParam { op, what: "k", why });
    }
    let l = data.layout;
    let x_row = if l.per_series { l.series * l.k } else { l.k };
    let walk = walk(
        gpu,
        data.y.pitched(l.series),
        data.x.pitched(x_row),
        l,
        plan,
    )?;
    if missing == Missing::Raise && walk.nonfinite > 0 {
        return Err(locate_nonfinite(gpu, op, data));
    }
    Ok(DeviceRollingResult { layout: l, walk })
}

/// The error naming the first non-finite entry (y first, then X), read back from the
/// device; a download failure is returned instead.
fn locate_nonfinite<T: GpuScalar>(
    gpu: &Gpu,
    op: &'static str,
    data: &DeviceRollingData<'_, T>,
) -> Error {
    let (y, x) = match (data.y.download(gpu), data.x.download(gpu)) {
        (Ok(y), Ok(x)) => (y, x),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let rolling = super::RollingData {
        y: &y,
        x: &x,
        nobs: data.layout.nobs,
        series: data.layout.series,
        k: data.layout.k,
        per_series: data.layout.per_series,
    };
    match super::plan::check_finite(op, &rolling) {
        Err(e) => e,
        Ok(()) => Error::InvalidParam {
            op,
            what: "data",
            why: "the device data changed while the walk read them".into(),
        },
    }
}
