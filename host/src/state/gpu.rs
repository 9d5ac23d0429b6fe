//! [`GpuQr`]: a QR factorisation held in device memory and updated there
//! (docs/design.md "State"; docs/algorithms.md). R (m×n), d = Qᵀb (m×q) and,
//! under [`QPolicy::Full`], the explicit m×m Q live in [`DevMat`]s with padded
//! leading dimensions; under [`QPolicy::Thin`], Q₁ (m×n), R (n×n), d = Q₁ᵀb (n×q) and
//! the kept b (m×q); under [`QPolicy::None`], R (n×n), d (n×q), the residual norms on the
//! host and, when asked for, A and b. Nothing is m×m but the full kind's Q. Every operation validates with the same `plan` as the
//! CPU backend, computes into new or scratch buffers, checks the new diagonal,
//! then swaps in, so a failed call leaves the state unchanged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::base::dims::Dims;
use crate::base::error::{Error, Result};
use crate::base::mat::Mat;
use crate::base::params::{QPolicy, UpdateParams};
use crate::gpu::runtime::matrix::{DevMat, DevMatView};
use crate::gpu::runtime::{Gpu, GpuScalar};

/// A QR factorisation A = QR with right-hand sides d = Qᵀb in device memory
/// (docs/design.md "State", docs/algorithms.md#conventions).
///
/// The layout matches [`crate::CpuQr`]: R is upper triangular with exact zeros below
/// the diagonal, m×n with d m×q and Q m×m under [`QPolicy::Full`]; n×n with d n×q
/// otherwise, with Q₁ m×n and b m×q under [`QPolicy::Thin`], and the residual norms (and,
/// with [`crate::FactorParams::keep_data`], A and b) under [`QPolicy::None`].
///
/// # Examples
/// The same calls as with [`crate::CpuQr`]; only the constructor differs.
/// ```no_run
/// use std::sync::Arc;
/// use cuqr::GpuQr;
/// use cuqr::{FactorParams, Gpu, Mat, QPolicy, QrUpdate};
/// let gpu = Arc::new(Gpu::new(0)?);
/// let a = Mat::<f64>::from_fn(1000, 300, |i, j| ((i * 7 + j * 13) % 29) as f64 + (i == j) as u8 as f64);
/// let b = Mat::<f64>::from_fn(1000, 1, |i, _| i as f64);
/// let mut qr = GpuQr::factorize(&gpu, a.as_ref(), b.as_ref(), QPolicy::Full, FactorParams::default())?;
/// qr.delete_rows(10, 5)?;                       // drop observations 10..15
/// let sol = qr.solve()?;                        // x (300×1) and the residual norm
/// # Ok::<(), cuqr::Error>(())
/// ```
pub struct GpuQr<T: GpuScalar> {
    /// The device everything lives on.
    pub(crate) gpu: Arc<Gpu>,
    /// Dimensions and Q policy.
    pub(crate) dims: Dims,
    /// R, m×n upper trapezoidal (ld padded).
    pub(crate) r: DevMat<T>,
    /// d = Qᵀb, m×q.
    pub(crate) d: DevMat<T>,
    /// Explicit Q: m×m under [`QPolicy::Full`], Q₁ (m×n) under [`QPolicy::Thin`].
    pub(crate) q: Option<DevMat<T>>,
    /// The right-hand sides b (m×q): kept by a thin state (for Q_zᵀb and the residual
    /// norms) and by an R-only state built with [`crate::FactorParams::keep_data`].
    pub(crate) b: Option<DevMat<T>>,
    /// A (m×n), kept by an R-only state built with [`crate::FactorParams::keep_data`]. A window
    /// step leaves its rows at `kept_row0..kept_row0 + m` of a taller buffer (with room for
    /// the next steps' rows below, docs/algorithms.md#r-only-window-step); every other
    /// operation first settles them to rows 0..m ([`GpuQr::settle_kept`]).
    pub(crate) a: Option<DevMat<T>>,
    /// The first row of the kept A and b in their buffers (see `a`).
    pub(crate) kept_row0: usize,
    /// The residual norms ‖b_k − A x_k‖ of an R-only state (empty for the other kinds).
    pub(crate) rho: Vec<T>,
    /// Update options.
    pub(crate) params: UpdateParams,
    /// Relative rank tolerance (|R_jj| ≤ rank_tol·‖R‖_F is rank deficient).
    pub(crate) rank_tol: f64,
    /// The drift estimate and counts (docs/algorithms.md#drift-control).
    pub(crate) drift: crate::base::solution::DriftReport,
    /// Set when an asynchronous device fault may have corrupted the buffers.
    pub(crate) poisoned: AtomicBool,
}

impl<T: GpuScalar> core::fmt::Debug for GpuQr<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("GpuQr")
            .field("dims", &self.dims)
            .field("params", &self.params)
            .field("rank_tol", &self.rank_tol)
            .field("poisoned", &self.is_poisoned())
            .finish_non_exhaustive()
    }
}

impl<T: GpuScalar> GpuQr<T> {
    /// The state's buffers (R, Q, d), consumed (an update that builds a new state and
    /// keeps only its factors).
    pub(crate) fn into_parts(self) -> (DevMat<T>, Option<DevMat<T>>, DevMat<T>) {
        (self.r, self.q, self.d)
    }

    /// The device factors as the update algorithms read them.
    pub(crate) fn factors(&self) -> crate::gpu::algo::factors::Factors<'_, T> {
        crate::gpu::algo::factors::Factors {
            dims: self.dims,
            r: &self.r,
            d: &self.d,
            q: self.q.as_ref(),
            b: self.b.as_ref(),
            rho: &self.rho,
            rank_tol: self.rank_tol,
        }
    }

    /// The kept b of a thin state.
    pub(crate) fn kept_b(&self) -> &DevMat<T> {
        self.b.as_ref().expect("a thin state keeps b")
    }

    /// The kept A and b of an R-only state built with [`crate::FactorParams::keep_data`], as
    /// buffers of exactly m rows: only after [`GpuQr::settle_kept`].
    pub(crate) fn kept_data(&self) -> Option<(&DevMat<T>, &DevMat<T>)> {
        match (self.a.as_ref(), self.b.as_ref()) {
            (Some(a), Some(b)) => {
                debug_assert!(self.kept_row0 == 0 && a.nrows() == self.dims.m);
                Some((a, b))
            }
            _ => None,
        }
    }

    /// The kept A and b (R-only state with kept data) as views of their m logical rows,
    /// wherever a window step left them.
    pub(crate) fn kept_views(&self) -> Option<(DevMatView<'_, T>, DevMatView<'_, T>)> {
        let (m, n, q, r0) = (self.dims.m, self.dims.n, self.dims.q, self.kept_row0);
        match (self.a.as_ref(), self.b.as_ref()) {
            (Some(a), Some(b)) => Some((a.block(r0, 0, m, n), b.block(r0, 0, m, q))),
            _ => None,
        }
    }

    /// Moves the kept A and b to buffers of exactly m rows (one copy each) where a window
    /// step left them inside taller ones; nothing otherwise.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub(crate) fn settle_kept(&mut self) -> Result<()> {
        let Some(a) = self.a.as_ref() else {
            return Ok(());
        };
        if self.kept_row0 == 0 && a.nrows() == self.dims.m {
            return Ok(());
        }
        let (a, b) = {
            let (av, bv) = self.kept_views().expect("an R-only state keeps A with b");
            let g = &*self.gpu;
            let mut a2 = DevMat::<T>::for_overwrite(g, av.nrows(), av.ncols())?;
            let mut b2 = DevMat::<T>::for_overwrite(g, bv.nrows(), bv.ncols())?;
            g.panel_copy(&av, &mut a2.view_mut())?;
            g.panel_copy(&bv, &mut b2.view_mut())?;
            (a2, b2)
        };
        self.a = Some(a);
        self.b = Some(b);
        self.kept_row0 = 0;
        Ok(())
    }

    /// Dimensions and policy.
    pub fn dims(&self) -> Dims {
        self.dims
    }

    /// The device this state lives on.
    pub fn gpu(&self) -> &Arc<Gpu> {
        &self.gpu
    }

    /// R (m×n) in device memory.
    pub fn r_dev(&self) -> &DevMat<T> {
        &self.r
    }

    /// d (m×q) in device memory.
    pub fn d_dev(&self) -> &DevMat<T> {
        &self.d
    }

    /// Q in device memory, if held: m×m under [`QPolicy::Full`], Q₁ (m×n) under
    /// [`QPolicy::Thin`].
    pub fn q_dev(&self) -> Option<&DevMat<T>> {
        self.q.as_ref()
    }

    /// The right-hand sides b (m×q) a thin state keeps (and an R-only state with
    /// [`crate::FactorParams::keep_data`]), in device memory.
    pub fn b_dev(&self) -> Option<DevMatView<'_, T>> {
        let (m, q) = (self.dims.m, self.dims.q);
        self.b.as_ref().map(|b| b.block(self.kept_row0, 0, m, q))
    }

    /// The data A (m×n) an R-only state with [`crate::FactorParams::keep_data`] keeps, in
    /// device memory.
    pub fn a_dev(&self) -> Option<DevMatView<'_, T>> {
        let (m, n) = (self.dims.m, self.dims.n);
        self.a.as_ref().map(|a| a.block(self.kept_row0, 0, m, n))
    }

    /// A device-side copy of the whole state (R, d, Q, options): benchmarks
    /// restore a factorised state from such a snapshot before each timed update.
    ///
    /// # Errors
    /// [`Error::Poisoned`], [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn try_clone(&self) -> Result<Self> {
        self.guarded(|| {
            Ok(Self {
                gpu: self.gpu.clone(),
                dims: self.dims,
                r: self.r.dup(&self.gpu)?,
                d: self.d.dup(&self.gpu)?,
                q: self.q.as_ref().map(|q| q.dup(&self.gpu)).transpose()?,
                b: self.b.as_ref().map(|b| b.dup(&self.gpu)).transpose()?,
                a: self.a.as_ref().map(|a| a.dup(&self.gpu)).transpose()?,
                kept_row0: self.kept_row0,
                rho: self.rho.clone(),
                params: self.params,
                rank_tol: self.rank_tol,
                drift: self.drift,
                poisoned: AtomicBool::new(false),
            })
        })
    }

    /// The same factorisation copied to the host as a [`crate::CpuQr`] (same
    /// R, d, Q, options and rank tolerance), so the serial CPU update can start from the identical
    /// state without a slow serial factorisation.
    ///
    /// # Errors
    /// [`Error::Poisoned`], [`Error::Driver`].
    pub fn to_cpu(&self) -> Result<crate::CpuQr<T>> {
        self.guarded(|| {
            let data = match self.b_dev() {
                Some(b) => Some(crate::state::cpu::KeptData {
                    a: self.a_dev().map(|a| a.to_host(&self.gpu)).transpose()?,
                    b: b.to_host(&self.gpu)?,
                }),
                None => None,
            };
            Ok(crate::CpuQr {
                dims: self.dims,
                r: self.r.to_host(&self.gpu)?,
                d: self.d.to_host(&self.gpu)?,
                q: self.q.as_ref().map(|q| q.to_host(&self.gpu)).transpose()?,
                rho: self.rho.clone(),
                data,
                params: self.params,
                rank_tol: self.rank_tol,
                drift: self.drift,
            })
        })
    }

    /// [`to_cpu`](Self::to_cpu) through page-locked host memory (`staging`, at
    /// least [`staging_len`](Self::staging_len) elements): the seeds' TUT protocol
    /// copies the outputs back at full link speed.
    ///
    /// # Errors
    /// [`Error::Poisoned`]; [`Error::Shape`] if `staging` is too short;
    /// [`Error::Driver`].
    pub fn to_cpu_pinned(
        &self,
        staging: &mut cudarc::driver::PinnedHostSlice<T>,
    ) -> Result<crate::CpuQr<T>> {
        let need = Self::staging_len(self.dims);
        if staging.len() < need {
            return Err(Error::Shape {
                op: "GpuQr::to_cpu_pinned",
                what: "staging length",
                got: staging.len(),
                expected: need,
            });
        }
        if self
            .a
            .as_ref()
            .is_some_and(|a| self.kept_row0 != 0 || a.nrows() != self.dims.m)
        {
            // kept data inside a window step's taller buffers: the plain download
            return self.to_cpu();
        }
        self.guarded(|| {
            let r = self.r.download_pinned(&self.gpu, staging)?;
            let d = self.d.download_pinned(&self.gpu, staging)?;
            let data = match &self.b {
                Some(b) => Some(crate::state::cpu::KeptData {
                    a: self
                        .a
                        .as_ref()
                        .map(|a| a.download_pinned(&self.gpu, staging))
                        .transpose()?,
                    b: b.download_pinned(&self.gpu, staging)?,
                }),
                None => None,
            };
            Ok(crate::CpuQr {
                dims: self.dims,
                r,
                d,
                q: self
                    .q
                    .as_ref()
                    .map(|q| q.download_pinned(&self.gpu, staging))
                    .transpose()?,
                rho: self.rho.clone(),
                data,
                params: self.params,
                rank_tol: self.rank_tol,
                drift: self.drift,
            })
        })
    }

    /// Elements of page-locked staging that [`from_cpu`](Self::from_cpu) and
    /// [`to_cpu_pinned`](Self::to_cpu_pinned) need for a state of `dims`
    /// (its largest padded matrix: R, d or Q).
    pub fn staging_len(dims: Dims) -> usize {
        let (m, n, q) = (dims.m, dims.n, dims.q);
        let ld = crate::gpu::runtime::matrix::padded_ld::<T>(m);
        let cols = if dims.policy == QPolicy::Full {
            m.max(n).max(q)
        } else {
            n.max(q)
        };
        ld * cols.max(1)
    }

    /// Moves a host state to the device (the inverse of [`to_cpu`](Self::to_cpu)):
    /// R, d and Q (when held) are uploaded as they are, with the same options and
    /// rank tolerance, so the GPU can take over the updates of a state built or
    /// updated on the CPU. With `staging` (page-locked, at least
    /// [`staging_len`](Self::staging_len) elements) the copies run at full link
    /// speed (the seeds' TUS/TUT protocols); without it they go
    /// through pageable memory.
    ///
    /// # Errors
    /// [`Error::Shape`] if `staging` is too short (nothing is allocated then);
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    ///
    /// # Examples
    /// ```no_run
    /// use std::sync::Arc;
    /// use cuqr::GpuQr;
    /// use cuqr::{CpuQr, FactorParams, Gpu, Mat, QPolicy, QrUpdate};
    /// let a = Mat::<f64>::from_fn(300, 40, |i, j| ((i * 7 + j * 13) % 29) as f64 + (i == j) as u8 as f64);
    /// let b = Mat::<f64>::from_fn(300, 1, |i, _| i as f64);
    /// let cpu = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::Full, FactorParams::default())?;
    /// let gpu = Arc::new(Gpu::new(0)?);
    /// let mut st = GpuQr::from_cpu(&gpu, &cpu, None)?;
    /// st.delete_rows(0, 5)?;
    /// # Ok::<(), cuqr::Error>(())
    /// ```
    pub fn from_cpu(
        gpu: &Arc<Gpu>,
        st: &crate::CpuQr<T>,
        staging: Option<&mut cudarc::driver::PinnedHostSlice<T>>,
    ) -> Result<Self> {
        let kept_b = st.data.as_ref().map(|k| &k.b);
        let kept_a = st.data.as_ref().and_then(|k| k.a.as_ref());
        let need = Self::staging_len(st.dims);
        let (st_r, st_d) = (&st.r, &st.d);
        let up = |a: &Mat<T>, staging: Option<&mut cudarc::driver::PinnedHostSlice<T>>| {
            let mut m = DevMat::<T>::zeros(gpu, a.nrows(), a.ncols())?;
            match staging {
                Some(s) => m.upload_pinned(gpu, a.as_ref(), s)?,
                None => m.upload(gpu, a.as_ref())?,
            }
            Ok::<_, Error>(m)
        };
        let (r, d, q, b, a) = match staging {
            Some(s) => {
                if s.len() < need {
                    return Err(Error::Shape {
                        op: "GpuQr::from_cpu",
                        what: "staging length",
                        got: s.len(),
                        expected: need,
                    });
                }
                let r = up(st_r, Some(&mut *s))?;
                let d = up(st_d, Some(&mut *s))?;
                let q = st.q.as_ref().map(|q| up(q, Some(&mut *s))).transpose()?;
                let b = kept_b.map(|b| up(b, Some(&mut *s))).transpose()?;
                let a = kept_a.map(|a| up(a, Some(&mut *s))).transpose()?;
                (r, d, q, b, a)
            }
            None => (
                up(st_r, None)?,
                up(st_d, None)?,
                st.q.as_ref().map(|q| up(q, None)).transpose()?,
                kept_b.map(|b| up(b, None)).transpose()?,
                kept_a.map(|a| up(a, None)).transpose()?,
            ),
        };
        Ok(Self {
            gpu: gpu.clone(),
            dims: st.dims,
            r,
            d,
            q,
            b,
            a,
            kept_row0: 0,
            rho: st.rho.clone(),
            params: st.params,
            rank_tol: st.rank_tol,
            drift: st.drift,
            poisoned: AtomicBool::new(false),
        })
    }

    /// True once a device fault has poisoned the state (every call then
    /// returns [`Error::Poisoned`]).
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::Relaxed)
    }

    /// [`Error::Poisoned`] if the state is poisoned.
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.is_poisoned() {
            Err(Error::Poisoned)
        } else {
            Ok(())
        }
    }

    /// Runs a stage that writes only new buffers; a fault that [`corrupts_context`]
    /// poisons the state.
    pub(crate) fn guarded<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<R> {
        self.check_live()?;
        poison_on_fault(&self.poisoned, f())
    }
}

/// True for the device faults after which the context, and with it the state's device
/// memory, cannot be trusted: a driver error other than the recoverable kinds (out of
/// memory, a launch refused for its resources or arguments, an unsupported call), which
/// covers every asynchronous kernel fault (they surface as sticky errors at the next
/// driver call), and a driver-level failure without a CUDA code (NCCL). A failed cuBLAS or
/// cuSOLVER call does not count: the update algorithms write new buffers and leave the
/// state's own until they succeed, and a sticky fault behind the call shows at the next
/// driver call anyway.
pub(crate) fn corrupts_context(e: &Error) -> bool {
    use cudarc::driver::sys::CUresult as C;
    match e {
        Error::Driver(call) => !matches!(
            call.library_error().map(|d| d.0),
            Some(
                C::CUDA_ERROR_OUT_OF_MEMORY
                    | C::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
                    | C::CUDA_ERROR_INVALID_VALUE
                    | C::CUDA_ERROR_NOT_SUPPORTED
                    | C::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE
            )
        ),
        _ => false,
    }
}

/// Passes `out` through, setting `flag` when it is a fault that [`corrupts_context`]:
/// for stages that write only new buffers (the update algorithms, reads, the drift check).
pub(crate) fn poison_on_fault<R>(flag: &AtomicBool, out: Result<R>) -> Result<R> {
    if let Err(e) = &out {
        if corrupts_context(e) {
            flag.store(true, Ordering::Relaxed);
        }
    }
    out
}

/// Passes `out` through, setting `flag` on any device error: for the few stages that write
/// the state's own buffers in place (the kept data of an R-only state), where a failure
/// part-way leaves them half-written (docs/reliability.md lists them).
pub(crate) fn poison_on_partial_write<R>(flag: &AtomicBool, out: Result<R>) -> Result<R> {
    if let Err(e) = &out {
        if matches!(
            e,
            Error::Driver(_) | Error::Cublas(_) | Error::Cusolver(_) | Error::OutOfMemory { .. }
        ) {
            flag.store(true, Ordering::Relaxed);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_faults_poison_and_other_errors_do_not() {
        let flag = AtomicBool::new(false);
        let kept: Result<()> = Err(Error::InvalidParam {
            op: "delete_rows",
            what: "k0",
            why: "out of range".into(),
        });
        assert!(poison_on_fault(&flag, kept).is_err());
        assert!(
            !flag.load(Ordering::Relaxed),
            "a validation error must not poison"
        );
        assert_eq!(poison_on_fault(&flag, Ok(7)).unwrap(), 7);
        assert!(!flag.load(Ordering::Relaxed));
        let fault: Result<()> = Err(Error::Driver("illegal address".into()));
        assert!(matches!(
            poison_on_fault(&flag, fault),
            Err(Error::Driver(_))
        ));
        assert!(flag.load(Ordering::Relaxed), "a driver error must poison");
        // Recoverable kinds leave the context usable and the state's buffers unwritten.
        for code in [
            cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY,
            cudarc::driver::sys::CUresult::CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
        ] {
            let flag = AtomicBool::new(false);
            let e = Error::driver("launching a kernel", cudarc::driver::DriverError(code));
            assert!(poison_on_fault(&flag, Err::<(), _>(e)).is_err());
            assert!(!flag.load(Ordering::Relaxed), "{code:?} must not poison");
        }
        let sticky = Error::driver(
            "synchronize",
            cudarc::driver::DriverError(cudarc::driver::sys::CUresult::CUDA_ERROR_ILLEGAL_ADDRESS),
        );
        let flag = AtomicBool::new(false);
        assert!(poison_on_fault(&flag, Err::<(), _>(sticky)).is_err());
        assert!(flag.load(Ordering::Relaxed), "a sticky fault must poison");
        let flag = AtomicBool::new(false);
        let fault: Result<()> = Err(Error::Cublas("execution failed".into()));
        assert!(poison_on_fault(&flag, fault).is_err());
        assert!(
            !flag.load(Ordering::Relaxed),
            "a failed cuBLAS call writes no state buffer"
        );
        let fault: Result<()> = Err(Error::Cublas("execution failed".into()));
        assert!(poison_on_partial_write(&flag, fault).is_err());
        assert!(
            flag.load(Ordering::Relaxed),
            "a half-written state must poison"
        );
    }
}
