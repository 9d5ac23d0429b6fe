//! Batched thin-Q states on the GPU (docs/algorithms.md#batched-states): the device buffers
//! of B problems (Q₁, R, b) and one launch per call over all of them, each written to new
//! buffers so that the caller keeps the old ones when it discards the call.

use cudarc::driver::{CudaSlice, CudaView, PinnedHostSlice};

use crate::base::error::Result;
use crate::gpu::ffi::driver::{alloc_pinned_zeroed, alloc_uninit};
use crate::gpu::launch::batch_q::complement_op::{self, MAX_DROP};
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
/// B problems on the device, and for the full kind the complement Q₂ (batch·m·(m−n), each
/// problem column-major; docs/algorithms.md#batched-full-q-states).
#[derive(Debug)]
pub(crate) struct QStates<T> {
    pub q: CudaSlice<T>,
    pub r: CudaSlice<T>,
    pub b: CudaSlice<T>,
    pub q2: Option<CudaSlice<T>>,
}

/// The new Q₁, R and (full kind) Q₂ of a column update; b does not change.
pub(crate) struct NewColumns<T> {
    pub q: CudaSlice<T>,
    pub r: CudaSlice<T>,
    pub q2: Option<CudaSlice<T>>,
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
    /// Buffers for B problems of m×n, with a complement when `full` (not initialised: the
    /// kernels write them).
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn zeros(gpu: &Gpu, s: QShape, full: bool) -> Result<Self> {
        Ok(Self {
            q: alloc(gpu, s.batch * s.m * s.n, "batched Q")?,
            r: alloc(gpu, s.batch * s.n * s.n, "batched R")?,
            b: alloc(gpu, s.batch * s.m, "batched b")?,
            q2: if full {
                Some(alloc(gpu, s.batch * s.m * (s.m - s.n), "batched Q₂")?)
            } else {
                None
            },
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

    /// A scratch buffer for what a full-Q state's thin kernel exports (`None` for the thin
    /// kind).
    fn export(&self, gpu: &Gpu, len: usize) -> Result<Option<CudaSlice<T>>> {
        match self.q2 {
            Some(_) => Ok(Some(alloc(gpu, len, "batched Q₂ directions")?)),
            None => Ok(None),
        }
    }

    /// Installs a column update's factors; the old ones back (to restore them).
    pub(crate) fn install(&mut self, new: NewColumns<T>) -> NewColumns<T> {
        NewColumns {
            q: std::mem::replace(&mut self.q, new.q),
            r: std::mem::replace(&mut self.r, new.r),
            q2: std::mem::replace(&mut self.q2, new.q2),
        }
    }

    /// Factorises A (batch·m·n row-major) with b (batch·m), with a complement when `full`;
    /// the new states and statuses.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn factor(
        gpu: &Gpu,
        s: QShape,
        (a, b): (CudaView<'_, T>, CudaView<'_, T>),
        status: &mut Statuses,
        full: bool,
    ) -> Result<(Self, Vec<u32>)> {
        let mut out = Self::zeros(gpu, s, full)?;
        gpu.batch_q_factor(s, (a, b), out.view_mut(), &mut status.dev)?;
        if let Some(q2) = out.q2.as_mut() {
            gpu.batch_q_complement(
                (complement_op::BUILD, s.batch, (s.m, s.n, s.m - s.n), (0, 0)),
                (Some(out.q.slice(..)), None, q2.slice_mut(..)),
                (None, None),
                (Some(&status.dev), 0, None),
            )?;
        }
        let st = status.read(gpu)?;
        Ok((out, st))
    }

    /// A + U Vᵀ for every problem (U batch·m·kk, V batch·n·kk, row-major a problem), in
    /// place; a refusing problem is left as it was. The statuses.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn rank_one(
        &mut self,
        gpu: &Gpu,
        s: QShape,
        (u, v, kk): (CudaView<'_, T>, CudaView<'_, T>, usize),
        status: &mut Statuses,
    ) -> Result<Vec<u32>> {
        let mut ex = self.export(gpu, s.batch * kk * 2 * s.m)?;
        gpu.batch_q_rank_one(
            s,
            (self.q.slice_mut(..), self.r.slice_mut(..)),
            (u, v, kk),
            &mut status.dev,
            ex.as_mut().map(|e| e.slice_mut(..)),
        )?;
        if let (Some(q2), Some(ex)) = (self.q2.as_mut(), ex.as_ref()) {
            gpu.batch_q_complement(
                (
                    complement_op::REPLACE,
                    s.batch,
                    (s.m, s.n, s.m - s.n),
                    (0, kk),
                ),
                (None, None, q2.slice_mut(..)),
                (Some(ex.slice(..)), None),
                (Some(&status.dev), 0, None),
            )?;
        }
        status.read(gpu)
    }

    /// Columns k0..k0+p out of every problem: the new factors (b does not change) and the
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
    ) -> Result<(NewColumns<T>, Vec<u32>)> {
        let no = s.n - p;
        let mut q = alloc(gpu, s.batch * s.m * no, "batched Q")?;
        let mut r = alloc(gpu, s.batch * no * no, "batched R")?;
        let mut ex = self.export(gpu, s.batch * s.m * p)?;
        gpu.batch_q_delete_cols(
            s,
            self.view(),
            (k0, p),
            (q.slice_mut(..), r.slice_mut(..)),
            &mut status.dev,
            ex.as_mut().map(|e| e.slice_mut(..)),
        )?;
        let q2 = self.column_complement(gpu, s, (complement_op::ADD_COLS, p), ex, status)?;
        let st = status.read(gpu)?;
        Ok((NewColumns { q, r, q2 }, st))
    }

    /// A full-Q state's new complement after a column update (`op` ADD_COLS or DROP_DIRS
    /// with p columns, from what the thin kernel exported); `None` for the thin kind.
    fn column_complement(
        &self,
        gpu: &Gpu,
        s: QShape,
        (op, p): (u32, usize),
        ex: Option<CudaSlice<T>>,
        status: &Statuses,
    ) -> Result<Option<CudaSlice<T>>> {
        let (Some(q2), Some(ex)) = (self.q2.as_ref(), ex) else {
            return Ok(None);
        };
        let c = s.m - s.n;
        let (_, co) = complement_op::output(op, (s.m, c), p);
        let mut out = alloc(gpu, s.batch * s.m * co, "batched Q₂")?;
        gpu.batch_q_complement(
            (op, s.batch, (s.m, s.n, c), (0, p)),
            (None, Some(q2.slice(..)), out.slice_mut(..)),
            (Some(ex.slice(..)), None),
            (Some(&status.dev), 0, None),
        )?;
        Ok(Some(out))
    }

    /// p columns in before column k0 (`cols` batch·m·p, row-major a problem); the new
    /// factors (n + p columns) and statuses. `s.team` ≥ n + p.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn insert_cols(
        &self,
        gpu: &Gpu,
        s: QShape,
        (cols, k0, p): (CudaView<'_, T>, usize, usize),
        status: &mut Statuses,
    ) -> Result<(NewColumns<T>, Vec<u32>)> {
        let np = s.n + p;
        let mut q = alloc(gpu, s.batch * s.m * np, "batched Q")?;
        let mut r = alloc(gpu, s.batch * np * np, "batched R")?;
        let mut ex = self.export(gpu, s.batch * p * s.m)?;
        gpu.batch_q_insert_cols(
            s,
            self.view(),
            (cols, k0, p),
            (q.slice_mut(..), r.slice_mut(..)),
            &mut status.dev,
            ex.as_mut().map(|e| e.slice_mut(..)),
        )?;
        let q2 = self.column_complement(gpu, s, (complement_op::DROP_DIRS, p), ex, status)?;
        let st = status.read(gpu)?;
        Ok((NewColumns { q, r, q2 }, st))
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
        let full = self.q2.is_some();
        let mut out = Self::zeros(gpu, QShape { m: s.m + p, ..s }, full)?;
        let mut ex = self.export(gpu, s.batch * (s.m + p) * p)?;
        gpu.batch_q_insert_rows(
            s,
            self.view(),
            (rows, rhs),
            (k0, p, scale),
            out.view_mut(),
            &mut status.dev,
            ex.as_mut().map(|e| e.slice_mut(..)),
        )?;
        if let (Some(q2), Some(ex), Some(q2_out)) = (self.q2.as_ref(), ex.as_ref(), out.q2.as_mut())
        {
            gpu.batch_q_complement(
                (
                    complement_op::ADD_ROWS,
                    s.batch,
                    (s.m, s.n, s.m - s.n),
                    (k0, p),
                ),
                (None, Some(q2.slice(..)), q2_out.slice_mut(..)),
                (Some(ex.slice(..)), None),
                (Some(&status.dev), 0, None),
            )?;
        }
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
        let mut out = Self::zeros(gpu, QShape { m: s.m - p, ..s }, false)?;
        gpu.batch_q_delete_rows(
            s,
            self.view(),
            (k0, p),
            out.view_mut(),
            fallback.map(Self::view),
            &mut status.dev,
        )?;
        if let Some(q2) = self.q2.as_ref() {
            let fb = fallback.and_then(|f| f.q2.as_ref());
            out.q2 = Some(drop_rows(
                gpu,
                (s.batch, s.m, s.n),
                q2,
                (k0, p),
                fb,
                status,
            )?);
        }
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

    /// Column `from` moved to `to` in every problem: the new Q₁ and R (the complement does
    /// not change) and the statuses.
    ///
    /// # Errors
    /// [`crate::Error::OutOfMemory`], [`crate::Error::Driver`].
    pub(crate) fn shift_col(
        &self,
        gpu: &Gpu,
        s: QShape,
        (from, to): (usize, usize),
        status: &mut Statuses,
    ) -> Result<(NewColumns<T>, Vec<u32>)> {
        let mut q = alloc(gpu, s.batch * s.m * s.n, "batched Q")?;
        let mut r = alloc(gpu, s.batch * s.n * s.n, "batched R")?;
        gpu.batch_q_shift_col(
            s,
            self.view(),
            (from, to),
            (q.slice_mut(..), r.slice_mut(..)),
            &mut status.dev,
        )?;
        // range(Q₁) is the same: the complement stays as it is (`q2: None`; the caller keeps
        // the state's).
        let st = status.read(gpu)?;
        Ok((NewColumns { q, r, q2: None }, st))
    }

    /// Every problem's ‖QᵀQ − I‖_F (Q₁, and [Q₁ Q₂] for the full kind), the problems past
    /// `tol` refreshed in place (the full kind's Q₂ built again from the new Q₁); the
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
        let c = s.m - s.n;
        let share = match self.q2.as_ref() {
            Some(q2) => {
                let mut e2 = alloc(gpu, s.batch, "batched Q₂ drift")?;
                // The output view is not written by MEASURE; the state's Q₂ serves.
                let mut unused = alloc::<T>(gpu, 1, "batched Q₂ drift")?;
                gpu.batch_q_complement(
                    (complement_op::MEASURE, s.batch, (s.m, s.n, c), (0, 0)),
                    (
                        Some(self.q.slice(..)),
                        Some(q2.slice(..)),
                        unused.slice_mut(..),
                    ),
                    (None, None),
                    (None, 0, Some(&mut e2)),
                )?;
                Some(e2)
            }
            None => None,
        };
        gpu.batch_q_refresh(
            s,
            (self.q.slice_mut(..), self.r.slice_mut(..)),
            tol,
            &mut drift,
            &mut status.dev,
            share.as_ref().map(|e| e.slice(..)),
        )?;
        if let Some(q2) = self.q2.as_mut() {
            gpu.batch_q_complement(
                (complement_op::BUILD, s.batch, (s.m, s.n, c), (0, 0)),
                (Some(self.q.slice(..)), None, q2.slice_mut(..)),
                (None, None),
                (Some(&status.dev), STATUS_REFRESHED, None),
            )?;
        }
        let mut es = gpu
            .stream
            .clone_dtoh(&drift)
            .map_err(driver_err("batched drift download"))?;
        let st = status.read(gpu)?;
        es.truncate(s.batch);
        Ok((es, st))
    }

    /// Q₁, R, b and (full kind, when `with_q2`) Q₂ on the host.
    ///
    /// # Errors
    /// [`crate::Error::Driver`].
    pub(crate) fn to_host(&self, gpu: &Gpu, with_q2: bool) -> Result<HostStates<T>> {
        let down = |e| crate::Error::driver("batched states download".to_string(), e);
        gpu.count_launch();
        let q = gpu.stream.clone_dtoh(&self.q).map_err(down)?;
        let r = gpu.stream.clone_dtoh(&self.r).map_err(down)?;
        let b = gpu.stream.clone_dtoh(&self.b).map_err(down)?;
        let q2 = match self.q2.as_ref() {
            Some(q2) if with_q2 => Some(gpu.stream.clone_dtoh(q2).map_err(down)?),
            _ => None,
        };
        gpu.stream.synchronize().map_err(down)?;
        Ok((q, r, b, q2))
    }
}

/// Q₁, R, b and (full kind) Q₂ of every problem on the host.
pub(crate) type HostStates<T> = (Vec<T>, Vec<T>, Vec<T>, Option<Vec<T>>);

/// The complement of a row deletion: rows k0..k0+p out of every problem's Q₂ (m×(m−n)) with
/// the directions they span, in launches of at most [`MAX_DROP`] rows (fewer where shared
/// memory is short) (the rows below move
/// up, so each takes rows k0.. again); a problem whose status is not OK takes `fallback`'s
/// Q₂ at the last launch.
fn drop_rows<T: GpuScalar>(
    gpu: &Gpu,
    (batch, m, n): (usize, usize, usize),
    q2: &CudaSlice<T>,
    (k0, p): (usize, usize),
    fallback: Option<&CudaSlice<T>>,
    status: &Statuses,
) -> Result<CudaSlice<T>> {
    let (mut mm, mut left) = (m, p);
    let mut cur: Option<CudaSlice<T>> = None;
    while left > 0 {
        let c = mm - n;
        // as many rows a launch as fit its shared memory (one always does: the batch
        // checks that when it is made and when it grows)
        let mut pc = left.min(MAX_DROP);
        while pc > 1
            && complement_op::smem(complement_op::DROP_ROWS, mm, n, c, pc) * size_of::<T>()
                > BATCH_Q_SMEM_LIMIT
        {
            pc -= 1;
        }
        let mut out = alloc(gpu, batch * (mm - pc) * (c - pc), "batched Q₂")?;
        let input = cur.as_ref().unwrap_or(q2);
        let fb = if pc == left { fallback } else { None };
        gpu.batch_q_complement(
            (complement_op::DROP_ROWS, batch, (mm, n, c), (k0, pc)),
            (None, Some(input.slice(..)), out.slice_mut(..)),
            (None, fb.map(|f| f.slice(..))),
            (Some(&status.dev), 0, None),
        )?;
        cur = Some(out);
        mm -= pc;
        left -= pc;
    }
    Ok(cur.unwrap_or_else(|| unreachable!("p ≥ 1")))
}
