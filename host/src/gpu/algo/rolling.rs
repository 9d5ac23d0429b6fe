//! Rolling and recursive least squares on the GPU (docs/algorithms.md#rolling-least-squares):
//! one launch of the walk kernel over series × time segments, on data already on the
//! device or uploaded from the host.

use cudarc::driver::{CudaSlice, CudaView};

use crate::base::error::{Error, Result};
use crate::base::rolling::{Layout, WindowPlan};
use crate::cpu::rolling_series::Refactorisations;
use crate::gpu::ffi::driver::{alloc_uninit, StreamAlloc};
use crate::gpu::launch::rolling::{WalkOut, WalkShape, WALK_MAX_K};
use crate::gpu::runtime::{alloc_err, driver_err, Gpu, GpuScalar};

/// Threads the walk aims for: enough warps to hide each thread's dependent chain of
/// rotations (about 16 warps on each of 132 SMs).
const TARGET_THREADS: usize = 132 * 16 * 32;

/// The walk's results on the device: params (nobs·series·k), rss and flags
/// (nobs·series), with the refactorisation counts and the non-finite observations met.
pub(crate) struct DeviceWalk<T> {
    pub params: CudaSlice<T>,
    pub rss: CudaSlice<T>,
    pub flags: CudaSlice<u8>,
    pub counts: Refactorisations,
    pub nonfinite: u64,
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

/// Runs the walk over y (nobs·series) and x on the device.
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`].
pub(crate) fn walk<T: GpuScalar>(
    gpu: &Gpu,
    y: &CudaView<'_, T>,
    x: &CudaView<'_, T>,
    sizes: Layout,
    plan: &WindowPlan,
) -> Result<DeviceWalk<T>> {
    let Layout {
        nobs,
        series,
        k,
        per_series,
    } = sizes;
    let seg_len = segment_length(nobs, series, plan.window);
    let shape = WalkShape {
        nobs,
        series,
        k,
        per_series,
        seg_len,
        window: plan.window,
        min_nobs: plan.min_nobs,
        refresh: plan.refresh,
        expanding: plan.expanding,
        skip_missing: plan.skip_missing,
        forget: plan.forget,
        leave_weight: plan.forget.powf(plan.window as f64 / 2.0),
        rank_tol: plan.rank_tol.unwrap_or(-1.0),
    };
    let cells = (nobs * series).max(1);
    let threads = (series * shape.segments()).max(1);
    let stream = &gpu.stream;
    // Left unset: the walk writes every element of params, rss and flags (each (t, s)
    // by the thread of its segment) and 3 counts per thread before anything reads them.
    let (mut params, mut rss, mut flags, mut counts) = {
        (
            alloc_uninit::<T>(stream, cells * k)
                .map_err(alloc_err("rolling params", cells * k * size_of::<T>()))?,
            alloc_uninit::<T>(stream, cells)
                .map_err(alloc_err("rolling rss", cells * size_of::<T>()))?,
            alloc_uninit::<u8>(stream, cells).map_err(alloc_err("rolling flags", cells))?,
            alloc_uninit::<u32>(stream, 3 * threads)
                .map_err(alloc_err("rolling counts", 12 * threads))?,
        )
    };
    gpu.rolling_walk(
        y,
        x,
        &shape,
        WalkOut {
            params: params.slice_mut(..),
            rss: rss.slice_mut(..),
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
    for c in host.chunks_exact(3).take(series * shape.segments()) {
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

/// Uploads y and x, runs the walk and downloads params, rss and the rank flags.
///
/// # Errors
/// As [`walk`].
pub(crate) fn walk_host<T: GpuScalar>(
    gpu: &Gpu,
    y: &[T],
    x: &[T],
    sizes: Layout,
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
    let res = walk(gpu, &yd.slice(..), &xd.slice(..), sizes, plan)?;
    let cells = sizes.nobs * sizes.series;
    gpu.count_launch();
    let down = |e| Error::driver("rolling results download".to_string(), e);
    let mut params = stream.clone_dtoh(&res.params).map_err(down)?;
    let mut rss = stream.clone_dtoh(&res.rss).map_err(down)?;
    let flags = stream.clone_dtoh(&res.flags).map_err(down)?;
    stream.synchronize().map_err(down)?;
    params.truncate(cells * sizes.k);
    rss.truncate(cells);
    let flags = flags[..cells].iter().map(|&f| f != 0).collect();
    Ok((params, rss, flags, res.counts))
}
