//! Batched thin-Q states on the GPU (docs/algorithms.md#batched-states): the device buffers
//! of B problems (Q₁, R, b) and one launch per call over all of them, each written to new
//! buffers so that the caller keeps the old ones when it discards the call.

use cudarc::driver::{CudaSlice, CudaView, PinnedHostSlice};

use crate::base::error::Result;
use crate::gpu::ffi::driver::{alloc_pinned_zeroed, alloc_uninit};
use crate::gpu::launch::batch_q::{QShape, QView, QViewMut};
use crate::gpu::runtime::{alloc_err, driver_err, Gpu, GpuScalar};

pub(crate) use crate::gpu::launch::batch_q::{smem, BATCH_Q_MAX_N, BATCH_Q_SMEM_LIMIT};

/// Status codes of the kernels (gpu-kernels/src/batch_q.rs).
pub(crate) const STATUS_DOWNDATE_REFUSED: u32 = 1;
pub(crate) const STATUS_NON_FINITE: u32 = 2;
pub(crate) const STATUS_RANK_DEFICIENT: u32 = 3;
/// `batch_q_refresh`: the problem was refreshed.
pub(crate) const STATUS_REFRESHED: u32 = 4;

/// Q₁ (batch·m·n, each problem column-major), R (batch·n·n, row-major) and b (batch·m) of
/// B problems on the device.
#[derive(Debug)]
pub(crate) struct QStates<T> {
    pub q: CudaSlice<T>,
    pub r: CudaSlice<T>,
    pub b: CudaSlice<T>,
}

/// An output buffer, not initialised: every kernel writes each element it leaves to be
/// read (a problem it refuses is either written unchanged or discarded by the caller with
/// the whole call; docs/kernels.md).
fn alloc<T: GpuScalar>(gpu: &Gpu, len: usize, what: &'static str) -> Result<CudaSlice<T>> {
    let len = len.max(1);
    alloc_uninit::<T>(&gpu.stream, len).map_err(alloc_err(what, len * size_of::<T>()))
}

/// Each problem's status word on the device (every kernel writes each problem's) and a
/// page-locked host copy, made at the batch's first update (page-locking costs about a
/// millisecond, more than a factorisation) and reused by every later call.
#[derive(Debug)]
pub(crate) struct Statuses {
    dev: CudaSlice<u32>,
    host: Option<PinnedHostSlice<u32>>,
    /// Whether the first (plain) read was made.
    first_done: bool,
    batch: usize,
}

impl Statuses {
    /// Buffers for `batch` problems (the host copy comes with the first [`Statuses::read`]).
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn new(gpu: &Gpu, batch: usize) -> Result<Self> {
        let len = batch.max(1);
        let dev =
            alloc_uninit::<u32>(&gpu.stream, len).map_err(alloc_err("batched status", 4 * len))?;
        Ok(Self {
            dev,
            host: None,
            first_done: false,
            batch,
        })
    }

    /// The statuses on the host (waits for the stream): the first call's (the
    /// factorisation's) through a plain copy; the page-locked buffer is made at the second
    /// call and serves every later one.
    fn read(&mut self, gpu: &Gpu) -> Result<Vec<u32>> {
        gpu.count_launch();
        if self.host.is_none() && !self.first_done {
            self.first_done = true;
            let v = gpu
                .stream
                .clone_dtoh(&self.dev)
                .map_err(driver_err("batched status download"))?;
            gpu.stream
                .synchronize()
                .map_err(driver_err("batched thin-Q call"))?;
            return Ok(v[..self.batch].to_vec());
        }
        if self.host.is_none() {
            let len = self.batch.max(1);
            let host = alloc_pinned_zeroed::<u32>(&gpu.ctx, len).map_err(|e| match e {
                Ok(e) => alloc_err("batched status (host)", 4 * len)(e),
                Err(e) => driver_err("batched status (host)")(e),
            })?;
            self.host = Some(host);
        }
        let Some(pinned) = self.host.as_mut() else {
            unreachable!("made above")
        };
        let host = pinned
            .as_mut_slice()
            .map_err(driver_err("batched status download"))?;
        gpu.stream
            .memcpy_dtoh(&self.dev, &mut host[..])
            .map_err(driver_err("batched status download"))?;
        gpu.stream
            .synchronize()
            .map_err(driver_err("batched thin-Q call"))?;
        let host = pinned
            .as_slice()
            .map_err(driver_err("batched status download"))?;
        Ok(host[..self.batch].to_vec())
    }
}

impl<T: GpuScalar> QStates<T> {
    /// Buffers for B problems of m×n (not initialised: the kernels write them).
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn zeros(gpu: &Gpu, s: QShape) -> Result<Self> {
        Ok(Self {
            q: alloc(gpu, s.batch * s.m * s.n, "batched Q")?,
            r: alloc(gpu, s.batch * s.n * s.n, "batched R")?,
            b: alloc(gpu, s.batch * s.m, "batched b")?,
        })
    }

    fn view(&self) -> QView<'_, T> {
        QView {
            q: self.q.slice(..),
            r: self.r.slice(..),
            b: self.b.slice(..),
        }
    }

    fn view_mut(&mut self) -> QViewMut<'_, T> {
        QViewMut {
            q: self.q.slice_mut(..),
            r: self.r.slice_mut(..),
            b: self.b.slice_mut(..),
        }
    }

    /// Factorises A (batch·m·n row-major) with b (batch·m); the new states and statuses.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn factor(
        gpu: &Gpu,
        s: QShape,
        (a, b): (CudaView<'_, T>, CudaView<'_, T>),
        status: &mut Statuses,
    ) -> Result<(Self, Vec<u32>)> {
        let mut out = Self::zeros(gpu, s)?;
        gpu.batch_q_factor(s, (a, b), out.view_mut(), &mut status.dev)?;
        let st = status.read(gpu)?;
        Ok((out, st))
    }

    /// A + U Vᵀ for every problem (U batch·m·kk, V batch·n·kk, row-major a problem), in
    /// place; a refusing problem is left as it was. The statuses.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    pub(crate) fn rank_one(
        &mut self,
        gpu: &Gpu,
        s: QShape,
        (u, v, kk): (CudaView<'_, T>, CudaView<'_, T>, usize),
        status: &mut Statuses,
    ) -> Result<Vec<u32>> {
        gpu.batch_q_rank_one(
            s,
            (self.q.slice_mut(..), self.r.slice_mut(..)),
            (u, v, kk),
            &mut status.dev,
        )?;
        status.read(gpu)
    }

    /// Columns k0..k0+p out of every problem: the new Q₁ and R (b does not change) and the
    /// statuses.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn delete_cols(
        &self,
        gpu: &Gpu,
        s: QShape,
        (k0, p): (usize, usize),
        status: &mut Statuses,
    ) -> Result<(CudaSlice<T>, CudaSlice<T>, Vec<u32>)> {
        let no = s.n - p;
        let mut q = alloc(gpu, s.batch * s.m * no, "batched Q")?;
        let mut r = alloc(gpu, s.batch * no * no, "batched R")?;
        gpu.batch_q_delete_cols(
            s,
            self.view(),
            (k0, p),
            (q.slice_mut(..), r.slice_mut(..)),
            &mut status.dev,
        )?;
        let st = status.read(gpu)?;
        Ok((q, r, st))
    }

    /// p columns in before column k0 (`cols` batch·m·p, row-major a problem); the new Q₁
    /// and R (n + p columns) and statuses. `s.team` ≥ n + p.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn insert_cols(
        &self,
        gpu: &Gpu,
        s: QShape,
        (cols, k0, p): (CudaView<'_, T>, usize, usize),
        status: &mut Statuses,
    ) -> Result<(CudaSlice<T>, CudaSlice<T>, Vec<u32>)> {
        let np = s.n + p;
        let mut q = alloc(gpu, s.batch * s.m * np, "batched Q")?;
        let mut r = alloc(gpu, s.batch * np * np, "batched R")?;
        gpu.batch_q_insert_cols(
            s,
            self.view(),
            (cols, k0, p),
            (q.slice_mut(..), r.slice_mut(..)),
            &mut status.dev,
        )?;
        let st = status.read(gpu)?;
        Ok((q, r, st))
    }

    /// p rows in at k0 (rows batch·p·n row-major, rhs batch·p), R and b scaled by `scale`
    /// first; the new states (m + p rows) and statuses.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn insert_rows(
        &self,
        gpu: &Gpu,
        s: QShape,
        (rows, rhs): (CudaView<'_, T>, CudaView<'_, T>),
        (k0, p, scale): (usize, usize, T),
        status: &mut Statuses,
    ) -> Result<(Self, Vec<u32>)> {
        let mut out = Self::zeros(gpu, QShape { m: s.m + p, ..s })?;
        gpu.batch_q_insert_rows(
            s,
            self.view(),
            (rows, rhs),
            (k0, p, scale),
            out.view_mut(),
            &mut status.dev,
        )?;
        let st = status.read(gpu)?;
        Ok((out, st))
    }

    /// Rows k0..k0+p out; a refusing problem takes `fallback`'s state (m − p rows) when
    /// given. The new states and statuses.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn delete_rows(
        &self,
        gpu: &Gpu,
        s: QShape,
        (k0, p): (usize, usize),
        fallback: Option<&Self>,
        status: &mut Statuses,
    ) -> Result<(Self, Vec<u32>)> {
        let mut out = Self::zeros(gpu, QShape { m: s.m - p, ..s })?;
        gpu.batch_q_delete_rows(
            s,
            self.view(),
            (k0, p),
            out.view_mut(),
            fallback.map(Self::view),
            &mut status.dev,
        )?;
        let st = status.read(gpu)?;
        Ok((out, st))
    }

    /// x (batch·n), ‖b − Q₁d‖² (batch) and the statuses on the host.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn solve(
        &self,
        gpu: &Gpu,
        s: QShape,
        rank_tol: f64,
        status: &mut Statuses,
    ) -> Result<(Vec<T>, Vec<T>, Vec<u32>)> {
        let mut x = alloc(gpu, s.batch * s.n, "batched x")?;
        let mut rss = alloc(gpu, s.batch, "batched rss")?;
        gpu.batch_q_solve(
            s,
            self.view(),
            (x.slice_mut(..), rss.slice_mut(..)),
            rank_tol,
            &mut status.dev,
        )?;
        let down = driver_err("batched solution download");
        let mut xs = gpu.stream.clone_dtoh(&x).map_err(down)?;
        let mut rs = gpu
            .stream
            .clone_dtoh(&rss)
            .map_err(driver_err("batched solution download"))?;
        let st = status.read(gpu)?;
        xs.truncate(s.batch * s.n);
        rs.truncate(s.batch);
        Ok((xs, rs, st))
    }

    /// Column `from` moved to `to` in every problem: the new Q₁ and R and the statuses.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn shift_col(
        &self,
        gpu: &Gpu,
        s: QShape,
        (from, to): (usize, usize),
        status: &mut Statuses,
    ) -> Result<(CudaSlice<T>, CudaSlice<T>, Vec<u32>)> {
        let mut q = alloc(gpu, s.batch * s.m * s.n, "batched Q")?;
        let mut r = alloc(gpu, s.batch * s.n * s.n, "batched R")?;
        gpu.batch_q_shift_col(
            s,
            self.view(),
            (from, to),
            (q.slice_mut(..), r.slice_mut(..)),
            &mut status.dev,
        )?;
        let st = status.read(gpu)?;
        Ok((q, r, st))
    }

    /// Every problem's ‖Q₁ᵀQ₁ − I‖_F, the problems past `tol` refreshed in place; the
    /// estimates and statuses.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn refresh(
        &mut self,
        gpu: &Gpu,
        s: QShape,
        tol: T,
        status: &mut Statuses,
    ) -> Result<(Vec<T>, Vec<u32>)> {
        let mut drift = alloc(gpu, s.batch, "batched drift estimates")?;
        gpu.batch_q_refresh(
            s,
            (self.q.slice_mut(..), self.r.slice_mut(..)),
            tol,
            &mut drift,
            &mut status.dev,
        )?;
        let mut es = gpu
            .stream
            .clone_dtoh(&drift)
            .map_err(driver_err("batched drift download"))?;
        let st = status.read(gpu)?;
        es.truncate(s.batch);
        Ok((es, st))
    }

    /// Q₁, R and b on the host.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    pub(crate) fn to_host(&self, gpu: &Gpu) -> Result<(Vec<T>, Vec<T>, Vec<T>)> {
        let down = |e| crate::Error::driver("batched states download".to_string(), e);
        gpu.count_launch();
        let q = gpu.stream.clone_dtoh(&self.q).map_err(down)?;
        let r = gpu.stream.clone_dtoh(&self.r).map_err(down)?;
        let b = gpu.stream.clone_dtoh(&self.b).map_err(down)?;
        gpu.stream.synchronize().map_err(down)?;
        Ok((q, r, b))
    }
}
