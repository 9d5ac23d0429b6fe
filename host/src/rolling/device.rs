//! Rolling least squares on data already in GPU memory, results left there
//! (docs/algorithms.md#rolling-least-squares).
#![forbid(unsafe_code)]

use super::plan::{check_lengths, recursive_plan, rolling_plan};
use super::{RecursiveParams, Refactorisations, RollingParams, RollingResult};
use crate::base::error::{Error, Result};
use crate::base::rolling::{Layout, Missing, WindowPlan};
use crate::gpu::algo::rolling::{unsupported, walk};
use crate::gpu::runtime::{DevVec, Gpu, GpuScalar};

/// Observations in device memory, laid out as [`super::RollingData`]: y nobs × series, X
/// nobs × k (shared) or nobs × series × k, row-major.
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
/// let params = res.params().to_vec(&gpu)?; // nobs × series × k
/// # assert_eq!(params.len(), nobs * series * k);
/// # Ok::<(), cuqr::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct DeviceRollingData<'a, T> {
    y: &'a DevVec<T>,
    x: &'a DevVec<T>,
    layout: Layout,
}

impl<'a, T: GpuScalar> DeviceRollingData<'a, T> {
    /// y (nobs × series) against one design X (nobs × k).
    pub fn shared(
        y: &'a DevVec<T>,
        x: &'a DevVec<T>,
        nobs: usize,
        series: usize,
        k: usize,
    ) -> Self {
        let layout = Layout {
            nobs,
            series,
            k,
            per_series: false,
        };
        Self { y, x, layout }
    }

    /// y (nobs × series) against a design per series, X of nobs × series × k.
    pub fn per_series(
        y: &'a DevVec<T>,
        x: &'a DevVec<T>,
        nobs: usize,
        series: usize,
        k: usize,
    ) -> Self {
        let layout = Layout {
            nobs,
            series,
            k,
            per_series: true,
        };
        Self { y, x, layout }
    }
}

/// The estimates of [`rolling_lstsq_device`], in device memory.
#[derive(Debug)]
pub struct DeviceRollingResult<T> {
    layout: Layout,
    params: DevVec<T>,
    rss: DevVec<T>,
    flags: cudarc::driver::CudaSlice<u8>,
    /// How often windows were factorised again from their data.
    pub refactorisations: Refactorisations,
}

impl<T: GpuScalar> DeviceRollingResult<T> {
    /// (nobs, series, k).
    pub fn shape(&self) -> (usize, usize, usize) {
        (self.layout.nobs, self.layout.series, self.layout.k)
    }

    /// Coefficients, nobs × series × k row-major, NaN where a window has no estimate (as
    /// [`RollingResult::params`]).
    pub fn params(&self) -> &DevVec<T> {
        &self.params
    }

    /// Residual sums of squares, nobs × series (as [`RollingResult::rss`]).
    pub fn rss(&self) -> &DevVec<T> {
        &self.rss
    }

    /// Copies everything to the host.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub fn to_host(&self, gpu: &Gpu) -> Result<RollingResult<T>> {
        let cells = self.layout.nobs * self.layout.series;
        gpu.count_launch();
        let flags = gpu
            .stream
            .clone_dtoh(&self.flags)
            .map_err(|e| Error::driver("rolling flags download".to_string(), e))?;
        Ok(RollingResult {
            nobs: self.layout.nobs,
            series: self.layout.series,
            k: self.layout.k,
            params: self.params.to_vec(gpu)?,
            rss: self.rss.to_vec(gpu)?,
            rank_deficient: flags[..cells].iter().map(|&f| f != 0).collect(),
            refactorisations: self.refactorisations,
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
    check_lengths(op, &data.layout, data.y.len(), data.x.len())?;
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
    check_lengths(op, &data.layout, data.y.len(), data.x.len())?;
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
    let out = walk(gpu, &data.y.view(), &data.x.view(), data.layout, plan)?;
    if missing == Missing::Raise && out.nonfinite > 0 {
        return Err(locate_nonfinite(gpu, op, data));
    }
    let cells = data.layout.nobs * data.layout.series;
    Ok(DeviceRollingResult {
        layout: data.layout,
        params: DevVec::from_buffer(out.params, cells * data.layout.k),
        rss: DevVec::from_buffer(out.rss, cells),
        flags: out.flags,
        refactorisations: out.counts,
    })
}

/// The error naming the first non-finite entry (y first, then X), read back from the
/// device; a download failure is returned instead.
fn locate_nonfinite<T: GpuScalar>(
    gpu: &Gpu,
    op: &'static str,
    data: &DeviceRollingData<'_, T>,
) -> Error {
    let (y, x) = match (data.y.to_vec(gpu), data.x.to_vec(gpu)) {
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
