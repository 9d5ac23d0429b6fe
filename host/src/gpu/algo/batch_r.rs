//! Batched R-only states on the GPU (docs/algorithms.md#batched-states): the device buffers
//! of B small triangular states and one step over all of them (one launch), written to
//! new buffers so that the caller keeps the old ones when it refuses the step.

use cudarc::driver::CudaSlice;

use crate::base::error::{Error, Result};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::launch::batch_r::{StepResults, StepRows, StepShape, StepState, StepStateMut};
use crate::gpu::runtime::{alloc_err, driver_err, Gpu, GpuScalar};

pub(crate) use crate::gpu::launch::batch_r::STEP_MAX_N;

/// Status codes of the step (gpu-kernels/src/batch_r.rs).
pub(crate) const STATUS_DOWNDATE_REFUSED: u32 = 1;
pub(crate) const STATUS_NON_FINITE: u32 = 2;
pub(crate) const STATUS_RANK_DEFICIENT: u32 = 3;

/// R (batch × n × n, row-major, zero below the diagonal), d (batch × n) and ρ (batch) of B
/// problems on the device.
#[derive(Debug)]
pub(crate) struct RStates<T> {
    pub r: CudaSlice<T>,
    pub d: CudaSlice<T>,
    pub rho: CudaSlice<T>,
}

/// The rows of a step on the host: rows (batch × p × n, row-major) and right-hand sides
/// (batch × p), for the rows in and the rows out.
pub(crate) struct HostRows<'a, T> {
    pub rows_in: &'a [T],
    pub rhs_in: &'a [T],
    pub rows_out: &'a [T],
    pub rhs_out: &'a [T],
}

/// What a step returns: the new states, each problem's status, and x (batch × n) with ρ²
/// (batch) when it solved.
pub(crate) struct StepOut<T> {
    pub states: RStates<T>,
    pub status: Vec<u32>,
    pub solution: Option<(Vec<T>, Vec<T>)>,
}

/// A device copy of `v` (one zero when empty: the kernels take a pointer either way).
fn upload<T: GpuScalar>(gpu: &Gpu, v: &[T], what: &'static str) -> Result<CudaSlice<T>> {
    let one = [T::ZERO];
    let src = if v.is_empty() { &one[..] } else { v };
    gpu.stream
        .htod_copy(src)
        .map_err(alloc_err(what, std::mem::size_of_val(src)))
}

impl<T: GpuScalar> RStates<T> {
    /// Zero states for `batch` problems of `n` columns.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn zeros(gpu: &Gpu, batch: usize, n: usize) -> Result<Self> {
        let z = |len: usize, what| {
            gpu.stream
                .alloc_zeroed::<T>(len.max(1))
                .map_err(alloc_err(what, len.max(1) * size_of::<T>()))
        };
        Ok(Self {
            r: z(batch * n * n, "batched R")?,
            d: z(batch * n, "batched d")?,
            rho: z(batch, "batched rho")?,
        })
    }

    /// R, d and ρ on the host.
    ///
    /// # Errors
    /// [`Error::Driver`].
    pub(crate) fn to_host(&self, gpu: &Gpu) -> Result<(Vec<T>, Vec<T>, Vec<T>)> {
        let down = |e| Error::driver("batched states download".to_string(), e);
        gpu.count_launch();
        let r = gpu.stream.clone_dtoh(&self.r).map_err(down)?;
        let d = gpu.stream.clone_dtoh(&self.d).map_err(down)?;
        let rho = gpu.stream.clone_dtoh(&self.rho).map_err(down)?;
        gpu.stream.synchronize().map_err(down)?;
        Ok((r, d, rho))
    }

    /// One step over every problem (see gpu-kernels/src/batch_r.rs `step`) into new
    /// buffers; `self` is left as it was.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn step(
        &self,
        gpu: &Gpu,
        shape: &StepShape,
        rows: HostRows<'_, T>,
    ) -> Result<StepOut<T>> {
        let (b, n) = (shape.batch, shape.n);
        let mut out = Self::zeros(gpu, b, n)?;
        let rows_in = upload(gpu, rows.rows_in, "batched rows in")?;
        let rhs_in = upload(gpu, rows.rhs_in, "batched rhs in")?;
        let rows_out = upload(gpu, rows.rows_out, "batched rows out")?;
        let rhs_out = upload(gpu, rows.rhs_out, "batched rhs out")?;
        let sol_len = if shape.solve { b * n } else { 0 };
        let mut x = gpu
            .stream
            .alloc_zeroed::<T>(sol_len.max(1))
            .map_err(alloc_err("batched x", sol_len.max(1) * size_of::<T>()))?;
        let mut rss = gpu
            .stream
            .alloc_zeroed::<T>(b.max(1))
            .map_err(alloc_err("batched rss", b.max(1) * size_of::<T>()))?;
        let mut status = gpu
            .stream
            .alloc_zeroed::<u32>(b.max(1))
            .map_err(alloc_err("batched status", 4 * b.max(1)))?;
        gpu.batch_r_step(
            shape,
            StepState {
                r: self.r.slice(..),
                d: self.d.slice(..),
                rho: self.rho.slice(..),
            },
            StepStateMut {
                r: out.r.slice_mut(..),
                d: out.d.slice_mut(..),
                rho: out.rho.slice_mut(..),
            },
            StepRows {
                rows_in: rows_in.slice(..),
                rhs_in: rhs_in.slice(..),
                rows_out: rows_out.slice(..),
                rhs_out: rhs_out.slice(..),
            },
            StepResults {
                x: x.slice_mut(..),
                rss: rss.slice_mut(..),
                status: &mut status,
            },
        )?;
        gpu.count_launch();
        let mut st = gpu
            .stream
            .clone_dtoh(&status)
            .map_err(driver_err("batched status download"))?;
        let solution = if shape.solve {
            let xs = gpu
                .stream
                .clone_dtoh(&x)
                .map_err(driver_err("batched x download"))?;
            let rs = gpu
                .stream
                .clone_dtoh(&rss)
                .map_err(driver_err("batched rss download"))?;
            Some((xs, rs))
        } else {
            None
        };
        gpu.stream
            .synchronize()
            .map_err(driver_err("batched step"))?;
        st.truncate(b);
        Ok(StepOut {
            states: out,
            status: st,
            solution: solution.map(|(mut xs, mut rs)| {
                xs.truncate(b * n);
                rs.truncate(b);
                (xs, rs)
            }),
        })
    }
}
