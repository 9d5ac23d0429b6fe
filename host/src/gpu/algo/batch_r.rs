//! Batched R-only states on the GPU (docs/algorithms.md#batched-states): the device buffers
//! of B small triangular states and one step over all of them (one launch), written to
//! new buffers so that the caller keeps the old ones when it refuses the step.

use cudarc::driver::{CudaSlice, CudaView};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::launch::batch_r::{
    GatherInputs, GatherShape, RefoldShape, StepResults, StepRows, StepShape, StepState,
    StepStateMut,
};
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

/// What a step returns: the new states, each problem's status (on the host and on the
/// device), and x (batch × n) with ρ² (batch) when it solved.
pub(crate) struct StepOut<T> {
    pub states: RStates<T>,
    pub status: Vec<u32>,
    pub status_dev: CudaSlice<u32>,
    pub solution: Option<(Vec<T>, Vec<T>)>,
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

    /// One step over every problem (see gpu-kernels/src/batch_r.rs `step`) with the rows on
    /// the device, into new buffers; `self` is left as it was.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn step_device(
        &self,
        gpu: &Gpu,
        shape: &StepShape,
        rows: StepRows<'_, T>,
    ) -> Result<StepOut<T>> {
        run_step(gpu, (shape.batch, shape.n, shape.solve), |out, results| {
            gpu.batch_r_step(
                shape,
                StepState {
                    r: self.r.slice(..),
                    d: self.d.slice(..),
                    rho: self.rho.slice(..),
                },
                out,
                rows,
                results,
            )
        })
    }

    /// Every problem folded afresh from its m rows on the device (`rows` B × m × n, `rhs`
    /// B × m) by teams of threads (see gpu-kernels/src/batch_r.rs `refold`), into new
    /// buffers, with the rank test when `solve`.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn refold(
        gpu: &Gpu,
        (batch, m, n): (usize, usize, usize),
        (rows, rhs): (CudaView<'_, T>, CudaView<'_, T>),
        solve: bool,
    ) -> Result<StepOut<T>> {
        let shape = RefoldShape {
            batch,
            n,
            m,
            team_log2: RefoldShape::team_for((batch, m, n), gpu.sm_count()?),
            solve,
        };
        run_step(gpu, (batch, n, solve), |out, results| {
            gpu.batch_r_refold(&shape, (rows, rhs), out, results)
        })
    }
}

/// One launch of a step-like kernel (`launch`, given the new state buffers and the
/// per-problem results) for B problems of n columns, then the status (and, when `solve`,
/// x and ρ²) downloaded and the stream waited for.
fn run_step<T: GpuScalar>(
    gpu: &Gpu,
    (b, n, solve): (usize, usize, bool),
    launch: impl FnOnce(StepStateMut<'_, T>, StepResults<'_, T>) -> Result<()>,
) -> Result<StepOut<T>> {
    let mut out = RStates::zeros(gpu, b, n)?;
    let sol_len = if solve { b * n } else { 0 };
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
    launch(
        StepStateMut {
            r: out.r.slice_mut(..),
            d: out.d.slice_mut(..),
            rho: out.rho.slice_mut(..),
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
    let solution = if solve {
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
        status_dev: status,
        solution: solution.map(|(mut xs, mut rs)| {
            xs.truncate(b * n);
            rs.truncate(b);
            (xs, rs)
        }),
    })
}

/// The kept data of B problems on the device: A (B × m × n) and b (B × m), each problem's
/// rows in order, row-major.
#[derive(Debug)]
pub(crate) struct KeptRows<T> {
    pub a: CudaSlice<T>,
    pub b: CudaSlice<T>,
}

/// How [`gather`] builds a block from an old one (see gpu-kernels/src/batch_r.rs `gather`):
/// the source of each output row and column (≥ 0 an old one, −1 − i the extra block's i-th),
/// the extra block with its strides (elements between problems, rows, columns), the scale of
/// the old entries and an optional rank-k term (u B × rows × k, v B × cols × k, k).
pub(crate) struct Rebuild<'a, T> {
    pub rows: Vec<i32>,
    pub cols: Vec<i32>,
    pub extra: Option<(CudaView<'a, T>, [usize; 3])>,
    pub scale: f64,
    pub rank: Option<(CudaView<'a, T>, CudaView<'a, T>, usize)>,
}

impl<T> Rebuild<'_, T> {
    /// Every row and column as it was (m × n).
    pub(crate) fn identity(m: usize, n: usize) -> Self {
        Self {
            rows: (0..m as i32).collect(),
            cols: (0..n as i32).collect(),
            extra: None,
            scale: 1.0,
            rank: None,
        }
    }
}

/// A new B × rows × cols block (rows and cols from `how`) built from `old` (B × m_old ×
/// n_old) in one launch.
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`].
pub(crate) fn gather<T: GpuScalar>(
    gpu: &Gpu,
    old: CudaView<'_, T>,
    dims: (usize, usize, usize),
    how: &Rebuild<'_, T>,
) -> Result<CudaSlice<T>> {
    let len = (dims.0 * how.rows.len() * how.cols.len()).max(1);
    let mut out = gpu
        .stream
        .alloc_zeroed::<T>(len)
        .map_err(alloc_err("gathered rows", len * size_of::<T>()))?;
    launch_gather(gpu, old, dims, how, &mut out, None)?;
    Ok(out)
}

/// Writes `old`'s problems whose `status` is not zero over the same problems of `into`
/// (both B × m × n): the refused problems of a step put back as they were.
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`].
pub(crate) fn put_back<T: GpuScalar>(
    gpu: &Gpu,
    old: &CudaSlice<T>,
    (batch, m, n): (usize, usize, usize),
    status: &CudaSlice<u32>,
    into: &mut CudaSlice<T>,
) -> Result<()> {
    launch_gather(
        gpu,
        old.slice(..),
        (batch, m, n),
        &Rebuild::identity(m, n),
        into,
        Some(status),
    )
}

/// One `batch_r_gather` launch into `out`.
fn launch_gather<T: GpuScalar>(
    gpu: &Gpu,
    old: CudaView<'_, T>,
    (batch, m_old, n_old): (usize, usize, usize),
    how: &Rebuild<'_, T>,
    out: &mut CudaSlice<T>,
    mask: Option<&CudaSlice<u32>>,
) -> Result<()> {
    let (m_out, n_out) = (how.rows.len(), how.cols.len());
    if batch * m_out * n_out == 0 {
        return Ok(());
    }
    let maps: Vec<i32> = how.rows.iter().chain(&how.cols).copied().collect();
    let maps_dev = gpu
        .stream
        .htod_copy(&maps)
        .map_err(alloc_err("gather maps", 4 * maps.len()))?;
    let one = gpu
        .stream
        .alloc_zeroed::<T>(1)
        .map_err(alloc_err("gather placeholder", size_of::<T>()))?;
    let no_mask = gpu
        .stream
        .alloc_zeroed::<u32>(1)
        .map_err(alloc_err("gather placeholder", 4))?;
    let (extra, extra_strides) = match &how.extra {
        Some((e, s)) => (e.slice(..), *s),
        None => (one.slice(..), [0; 3]),
    };
    let (u, v, kk) = match &how.rank {
        Some((u, v, k)) => (u.slice(..), v.slice(..), *k),
        None => (one.slice(..), one.slice(..), 0),
    };
    let shape = GatherShape {
        batch,
        m_old,
        n_old,
        m_out,
        n_out,
        extra_strides,
        scale: how.scale,
        kk,
    };
    gpu.batch_r_gather(
        &shape,
        (
            &maps,
            GatherInputs {
                old,
                maps: maps_dev.slice(..),
                extra,
                u,
                v,
                mask: mask.unwrap_or(&no_mask).slice(..),
                masked: mask.is_some(),
            },
        ),
        &mut out.slice_mut(..),
    )?;
    gpu.count_launch();
    Ok(())
}

impl<T: GpuScalar> RStates<T> {
    /// Puts `old`'s refused problems (`status` not zero) back into `self`, which has the
    /// same shape (n columns): R, d and ρ.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn put_back(
        &mut self,
        gpu: &Gpu,
        old: &Self,
        (batch, n): (usize, usize),
        status: &CudaSlice<u32>,
    ) -> Result<()> {
        put_back(gpu, &old.r, (batch, n, n), status, &mut self.r)?;
        put_back(gpu, &old.d, (batch, n, 1), status, &mut self.d)?;
        put_back(gpu, &old.rho, (batch, 1, 1), status, &mut self.rho)
    }
}
