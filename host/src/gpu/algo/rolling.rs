//! Rolling and recursive least squares on the GPU (docs/algorithms.md#rolling-least-squares):
//! one launch of the walk kernel over series × time segments, on data already on the
//! device or uploaded from the host.

use cudarc::driver::{CudaSlice, CudaView};

use crate::base::error::{Error, Result};
use crate::base::rolling::{Layout, Refactorisations, WindowPlan};
use crate::gpu::ffi::driver::{alloc_uninit, StreamAlloc};
use crate::gpu::launch::rolling::{WalkOut, WalkShape, WALK_MAX_K};
use crate::gpu::runtime::{alloc_err, driver_err, DevMat, Gpu, GpuScalar};

/// Threads the walk aims for: enough warps to hide each thread's dependent chain of
/// rotations (about 16 warps on each of 132 SMs).
const TARGET_THREADS: usize = 132 * 16 * 32;

/// The walk's results on the device: params as a (series·k) × nobs matrix (column t:
/// time step t's coefficients, series by series) and rss a series × nobs one, NaN where a
/// window has no estimate; flags (1: rank-deficient window) at rss's pitch; the
/// refactorisation counts and the non-finite observations met.
#[derive(Debug)]
pub(crate) struct DeviceWalk<T> {
    pub params: DevMat<T>,
    pub rss: DevMat<T>,
    pub flags: CudaSlice<u8>,
    pub counts: Refactorisations,
    pub nonfinite: u64,
}

/// An input of the walk: a buffer with each time step's row at pitch `ld`.
pub(crate) struct Pitched<'a, T> {
    pub buf: CudaView<'a, T>,
    pub ld: usize,
}

/// Why the GPU cannot run these sizes, if it cannot (k above the kernels' limit).
pub(crate) fn unsupported(k: usize) -> Option<String> {
    (k > WALK_MAX_K)
        .then(|| format!("the GPU walk takes at most {WALK_MAX_K} regressors, the data have {k}"))
}

/// The segment length: long enough that the window factorised at a segment's start
/// costs no more than the segment's own steps (seg_len ≥ window where the threads
/// allow), short enough that series × segments fills the GPU.
pub(crate) fn segment_length(nobs: usize, series: usize, window: usize) -> usize {
    let nobs = nobs.max(1);
    let wanted = TARGET_THREADS.div_ceil(series.max(1)).max(1);
    let by_threads = nobs.div_ceil(wanted);
    by_threads.max(window.min(nobs)).max(1)
}

/// Runs the walk over y and x on the device (their pitches checked by the launcher).
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`].
pub(crate) fn walk<T: GpuScalar>(
    gpu: &Gpu,
    y: Pitched<'_, T>,
    x: Pitched<'_, T>,
    layout: Layout,
    plan: &WindowPlan,
) -> Result<DeviceWalk<T>> {
    let Layout {
        nobs,
        series,
        k,
        per_series,
    } = layout;
    let mut params = DevMat::<T>::for_overwrite(gpu, series * k, nobs)?;
    let mut rss = DevMat::<T>::for_overwrite(gpu, series, nobs)?;
    let seg_len = segment_length(nobs, series, plan.window);
    let shape = WalkShape {
        nobs,
        series,
        k,
        per_series,
        seg_len,
        ld_y: y.ld,
        ld_x: x.ld,
        ld_p: params.ld(),
        ld_r: rss.ld(),
        window: plan.window,
        min_nobs: plan.min_nobs,
        refresh: plan.refresh,
        expanding: plan.expanding,
        skip_missing: plan.skip_missing,
        forget: plan.forget,
        leave_weight: plan.forget.powf(plan.window as f64 / 2.0),
        rank_tol: plan.rank_tol.unwrap_or(-1.0),
    };
    let threads = series * shape.segments();
    let stream = &gpu.stream;
    let flag_len = (rss.ld() * nobs).max(1);
    let mut flags = stream
        .alloc_zeroed::<u8>(flag_len)
        .map_err(alloc_err("rolling flags", flag_len))?;
    // Left unset: the walk writes 3 counts per thread before anything reads them.
    let mut counts = alloc_uninit::<u32>(stream, 3 * threads.max(1))
        .map_err(alloc_err("rolling counts", 12 * threads.max(1)))?;
    let (ld_p, ld_r) = (params.ld(), rss.ld());
    let p_len = ld_p * nobs;
    let r_len = ld_r * nobs;
    gpu.rolling_walk(
        &y.buf,
        &x.buf,
        &shape,
        WalkOut {
            params: params.buf_mut().slice_mut(..p_len),
            rss: rss.buf_mut().slice_mut(..r_len),
            flags: &mut flags,
            counts: &mut counts,
        },
    )?;
    gpu.count_launch();
    let host = stream
        .clone_dtoh(&counts)
        .map_err(driver_err("rolling counts download"))?;
    stream.synchronize().map_err(driver_err("rolling walk"))?;
    let mut out = Refactorisations::default();
    let mut nonfinite = 0u64;
    for c in host.chunks_exact(3).take(threads) {
        out.scheduled += c[0] as usize;
        out.after_failed_downdate += c[1] as usize;
        nonfinite += u64::from(c[2]);
    }
    Ok(DeviceWalk {
        params,
        rss,
        flags,
        counts: out,
        nonfinite,
    })
}

/// Uploads y and x (contiguous, as [`crate::rolling::RollingData`] holds them), runs the
/// walk and downloads params (nobs × series × k), rss and the rank flags (nobs × series).
///
/// # Errors
/// As [`walk`].
pub(crate) fn walk_host<T: GpuScalar>(
    gpu: &Gpu,
    y: &[T],
    x: &[T],
    layout: Layout,
    plan: &WindowPlan,
) -> Result<(Vec<T>, Vec<T>, Vec<bool>, Refactorisations)> {
    let stream = &gpu.stream;
    let pad = |v: &[T]| -> Vec<T> {
        if v.is_empty() {
            vec![T::ZERO]
        } else {
            v.to_vec()
        }
    };
    let (yh, xh) = (pad(y), pad(x));
    let yd = stream
        .htod_copy(&yh)
        .map_err(alloc_err("rolling y", yh.len() * size_of::<T>()))?;
    let xd = stream
        .htod_copy(&xh)
        .map_err(alloc_err("rolling X", xh.len() * size_of::<T>()))?;
    let x_row = if layout.per_series {
        layout.series * layout.k
    } else {
        layout.k
    };
    let res = walk(
        gpu,
        Pitched {
            buf: yd.slice(..),
            ld: layout.series,
        },
        Pitched {
            buf: xd.slice(..),
            ld: x_row,
        },
        layout,
        plan,
    )?;
    let (params, rss, flags) = res.download(gpu, layout)?;
    Ok((params, rss, flags, res.counts))
}

impl<T: GpuScalar> DeviceWalk<T> {
    /// params (nobs × series × k, row-major), rss and flags (nobs × series) on the host.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub(crate) fn download(
        &self,
        gpu: &Gpu,
        layout: Layout,
    ) -> Result<(Vec<T>, Vec<T>, Vec<bool>)> {
        let params = self.params.to_host(gpu)?.as_slice().to_vec();
        let rss = self.rss.to_host(gpu)?.as_slice().to_vec();
        gpu.count_launch();
        let raw = gpu
            .stream
            .clone_dtoh(&self.flags)
            .map_err(|e| Error::driver("rolling flags download".to_string(), e))?;
        gpu.stream
            .synchronize()
            .map_err(|e| Error::driver("rolling flags download".to_string(), e))?;
        let ld = self.rss.ld();
        let mut flags = Vec::with_capacity(layout.nobs * layout.series);
        for t in 0..layout.nobs {
            flags.extend(raw[t * ld..t * ld + layout.series].iter().map(|&f| f != 0));
        }
        Ok((params, rss, flags))
    }
}
