//! cuSOLVER dense QR (`geqrf`, `ormqr`, `orgqr`) in f32/f64: the
//! "refactorise" baseline of the benchmarks and an oracle for tests
//! — never cuqr's own implementation. Each call queries its workspace, runs on
//! [`Gpu::stream`], and reads `devInfo` back; a nonzero value is [`Error::Cusolver`].
// The cuSOLVER baselines serve the benchmarks (feature `internals`) and a few tests.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use cudarc::cusolver::sys;
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use crate::base::error::{Error, Result};
use crate::gpu::ffi::blas::{int, shape_check as check, Op, Side};
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::ffi::{by_dtype, by_field};
use crate::gpu::runtime::matrix::{DevMatView, DevMatViewMut};
use crate::gpu::runtime::{alloc_err, driver_err, DevMat, Gpu, GpuField, GpuScalar};

pub(crate) fn status(op: &'static str, s: sys::cusolverStatus_t) -> Result<()> {
    crate::gpu::ffi::driver::fault::cusolver(s)
        .result()
        .map_err(|e| Error::cusolver(op, e))
}

fn op_cusolver(op: Op) -> sys::cublasOperation_t {
    match op {
        Op::N => sys::cublasOperation_t::CUBLAS_OP_N,
        Op::T => sys::cublasOperation_t::CUBLAS_OP_T,
    }
}

fn side_cusolver(side: Side) -> sys::cublasSideMode_t {
    match side {
        Side::Left => sys::cublasSideMode_t::CUBLAS_SIDE_LEFT,
        Side::Right => sys::cublasSideMode_t::CUBLAS_SIDE_RIGHT,
    }
}

/// A negative `devInfo` -i of `op`: parameter i was wrong.
fn bad_param(op: &str, i: i32) -> Error {
    Error::Cusolver(format!("{op}: devInfo = {i} (parameter {} is wrong)", -i).into())
}

/// The two calls of a cuSOLVER routine with a workspace ([`Gpu::with_workspace`]).
enum SolverStep<'a> {
    /// The `_bufferSize` query: write the workspace size in elements here.
    Query(&'a mut i32),
    /// The routine itself, on the allocated scratch.
    Run(Scratch),
}

/// Device pointers of the scratch [`Gpu::with_workspace`] allocated: `lwork` elements of
/// workspace (at least one allocated) and one `devInfo` i32, held for the call.
#[derive(Clone, Copy)]
struct Scratch {
    work: u64,
    lwork: i32,
    info: u64,
}

/// `Ok` when `devInfo` of `op` is 0, else the wrong parameter it names.
fn info_ok(op: &str, info: i32) -> Result<()> {
    match info {
        0 => Ok(()),
        i => Err(bad_param(op, i)),
    }
}

impl Gpu {
    fn workspace<T: GpuScalar>(&self, lwork: i32) -> Result<CudaSlice<T>> {
        let len = (lwork.max(1)) as usize;
        self.stream.alloc_zeroed::<T>(len).map_err(alloc_err(
            "cuSOLVER workspace",
            len * core::mem::size_of::<T>(),
        ))
    }

    fn dev_info(&self) -> Result<CudaSlice<i32>> {
        self.stream
            .alloc_zeroed::<i32>(1)
            .map_err(alloc_err("cuSOLVER devInfo", 4))
    }

    /// Checks the status `st` of `op`'s workspace query, then allocates the queried
    /// workspace (`lwork` elements, at least 1) and a zeroed `devInfo`.
    fn solver_scratch<T: GpuScalar>(
        &self,
        op: &'static str,
        st: sys::cusolverStatus_t,
        lwork: i32,
    ) -> Result<(CudaSlice<T>, CudaSlice<i32>)> {
        status(op, st)?;
        Ok((self.workspace::<T>(lwork)?, self.dev_info()?))
    }

    /// Reads `devInfo` back after `op` (synchronising [`Gpu::stream`]).
    fn info_value(&self, op: &'static str, info: &CudaSlice<i32>) -> Result<i32> {
        self.count_launch();
        let v = self
            .stream
            .clone_dtoh(info)
            .map_err(driver_err("reading devInfo"))?;
        self.stream
            .synchronize()
            .map_err(driver_err("reading devInfo"))?;
        v.first()
            .copied()
            .ok_or_else(|| Error::Cusolver(format!("{op}: devInfo not read").into()))
    }

    /// Checks the status `st` of `op`, then that its `devInfo` reads 0.
    fn solver_done(
        &self,
        op: &'static str,
        st: sys::cusolverStatus_t,
        info: &CudaSlice<i32>,
    ) -> Result<()> {
        status(op, st)?;
        info_ok(op, self.info_value(op, info)?)
    }

    /// Runs `op` the cuSOLVER way: `call(SolverStep::Query(&mut lwork))` queries the
    /// workspace (elements of T) and returns its status; then the workspace and a zeroed
    /// `devInfo` are allocated and `call(SolverStep::Run(scratch))` runs the routine on
    /// them (counted as one launch). Returns `devInfo` after checking both statuses.
    fn with_workspace<T: GpuScalar>(
        &self,
        op: &'static str,
        mut call: impl FnMut(SolverStep<'_>) -> sys::cusolverStatus_t,
    ) -> Result<i32> {
        let mut lwork = 0i32;
        let st = call(SolverStep::Query(&mut lwork));
        let (mut work, mut info) = self.solver_scratch::<T>(op, st, lwork)?;
        let st = {
            let (pw, _gw) = work.device_ptr_mut(&self.stream);
            let (pi, _gi) = info.device_ptr_mut(&self.stream);
            self.count_launch();
            call(SolverStep::Run(Scratch {
                work: pw,
                lwork,
                info: pi,
            }))
        };
        status(op, st)?;
        self.info_value(op, &info)
    }

    /// Householder QR in place (cuSOLVER `xgeqrf`): R in the upper triangle of
    /// `a`, reflector tails below it, τ in `tau[0..min(m, n)]` (LAPACK
    /// convention, docs/algorithms.md#conventions).
    ///
    /// # Errors
    /// [`Error::Shape`] if `tau` is shorter than min(m, n); [`Error::InvalidParam`];
    /// [`Error::Cusolver`] for a failed status or nonzero `devInfo`;
    /// [`Error::OutOfMemory`] for the workspace.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn geqrf<T: GpuScalar>(
        &self,
        a: &mut DevMatViewMut<'_, T>,
        tau: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        const OP: &str = "geqrf";
        let (m, n) = (a.nrows(), a.ncols());
        let kmin = m.min(n);
        check(OP, "length of tau", tau.len() >= kmin, tau.len(), kmin)?;
        if kmin == 0 {
            return Ok(());
        }
        let (mi, ni, lda) = (int(OP, "m", m)?, int(OP, "n", n)?, int(OP, "lda", a.ld())?);
        let h = self.solver.cu();
        let info = self.with_workspace::<T>(OP, |step| match step {
            SolverStep::Query(lwork) => {
                let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
                // SAFETY: cusolverDn{S,D}geqrf_bufferSize only reads the dimensions (A may be
                // inspected but not written); A is m×n with ld lda inside its view; lwork is
                // a live host i32; by_dtype! picks the routine of T (sealed GpuScalar).
                unsafe {
                    by_dtype!(
                        T,
                        sys::cusolverDnSgeqrf_bufferSize,
                        sys::cusolverDnDgeqrf_bufferSize,
                        |E| (h, mi, ni, pa as *mut E, lda, lwork)
                    )
                }
            }
            SolverStep::Run(s) => {
                let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
                let (pt, _gt) = tau.device_ptr_mut(&self.stream);
                // SAFETY: cusolverDn{S,D}geqrf contract: A m×n (ld lda) inside its view, TAU
                // ≥ min(m,n) (checked), Workspace ≥ lwork elements as queried, devInfo one
                // i32; all distinct allocations/&mut views; handle on self.stream; by_dtype!
                // picks the routine of T.
                unsafe {
                    by_dtype!(T, sys::cusolverDnSgeqrf, sys::cusolverDnDgeqrf, |E| (
                        h,
                        mi,
                        ni,
                        pa as *mut E,
                        lda,
                        pt as *mut E,
                        s.work as *mut E,
                        s.lwork,
                        s.info as *mut i32
                    ))
                }
            }
        })?;
        info_ok(OP, info)
    }

    /// C := op(Q)·C (`Side::Left`) or C·op(Q) (`Side::Right`), Q = H₀⋯H_{k−1}
    /// from the first k columns of a [`Gpu::geqrf`] result (cuSOLVER `xormqr`).
    ///
    /// # Errors
    /// [`Error::Shape`] if `a` does not have Q's order as rows, k > its columns,
    /// or `tau` is shorter than k; [`Error::InvalidParam`]; [`Error::Cusolver`];
    /// [`Error::OutOfMemory`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn ormqr<T: GpuScalar>(
        &self,
        side: Side,
        trans: Op,
        a: &DevMatView<'_, T>,
        k: usize,
        tau: &CudaView<'_, T>,
        c: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        const OP: &str = "ormqr";
        let (m, n) = (c.nrows(), c.ncols());
        let order = if side == Side::Left { m } else { n };
        check(OP, "rows of A", a.nrows() == order, a.nrows(), order)?;
        check(
            OP,
            "reflector count k",
            k <= a.ncols() && k <= order,
            k,
            a.ncols().min(order),
        )?;
        check(OP, "length of tau", tau.len() >= k, tau.len(), k)?;
        if m == 0 || n == 0 || k == 0 {
            return Ok(());
        }
        let (mi, ni, ki) = (int(OP, "m", m)?, int(OP, "n", n)?, int(OP, "k", k)?);
        let (lda, ldc) = (int(OP, "lda", a.ld())?, int(OP, "ldc", c.ld())?);
        let (sd, tr) = (side_cusolver(side), op_cusolver(trans));
        let h = self.solver.cu();
        let info = self.with_workspace::<T>(OP, |step| match step {
            SolverStep::Query(lwork) => {
                let (pa, _ga) = a.buf().device_ptr(&self.stream);
                let (pt, _gt) = tau.device_ptr(&self.stream);
                let (pc, _gc) = c.buf().device_ptr(&self.stream);
                // SAFETY: cusolverDn{S,D}ormqr_bufferSize reads only dimensions and pointers
                // of A (order×k, ld lda), tau (≥ k) and C (m×n, ld ldc), all inside their
                // views (checked); lwork is a live host i32; by_dtype! picks the routine of T.
                unsafe {
                    by_dtype!(
                        T,
                        sys::cusolverDnSormqr_bufferSize,
                        sys::cusolverDnDormqr_bufferSize,
                        |E| (
                            h,
                            sd,
                            tr,
                            mi,
                            ni,
                            ki,
                            pa as *const E,
                            lda,
                            pt as *const E,
                            pc as *const E,
                            ldc,
                            lwork,
                        )
                    )
                }
            }
            SolverStep::Run(s) => {
                let (pa, _ga) = a.buf().device_ptr(&self.stream);
                let (pt, _gt) = tau.device_ptr(&self.stream);
                let (pc, _gc) = c.buf_mut().device_ptr_mut(&self.stream);
                // SAFETY: cusolverDn{S,D}ormqr contract: A order×k (ld lda), tau ≥ k, C m×n
                // (ld ldc) inside their views (checked); C is a &mut view so it aliases
                // neither A nor tau; work ≥ lwork as queried; devInfo one i32; handle
                // bound to self.stream; by_dtype! picks the routine of T.
                unsafe {
                    by_dtype!(T, sys::cusolverDnSormqr, sys::cusolverDnDormqr, |E| (
                        h,
                        sd,
                        tr,
                        mi,
                        ni,
                        ki,
                        pa as *const E,
                        lda,
                        pt as *const E,
                        pc as *mut E,
                        ldc,
                        s.work as *mut E,
                        s.lwork,
                        s.info as *mut i32,
                    ))
                }
            }
        })?;
        info_ok(OP, info)
    }

    /// Overwrites the m×n `a` (m ≥ n ≥ k) holding k reflectors from
    /// [`Gpu::geqrf`] with the first n columns of Q (cuSOLVER `xorgqr`).
    ///
    /// # Errors
    /// [`Error::Shape`] unless m ≥ n ≥ k and `tau` holds k; [`Error::InvalidParam`];
    /// [`Error::Cusolver`]; [`Error::OutOfMemory`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn orgqr<T: GpuScalar>(
        &self,
        a: &mut DevMatViewMut<'_, T>,
        k: usize,
        tau: &CudaView<'_, T>,
    ) -> Result<()> {
        const OP: &str = "orgqr";
        let (m, n) = (a.nrows(), a.ncols());
        check(OP, "columns of A (n ≤ m)", n <= m, n, m)?;
        check(OP, "reflector count k", k <= n, k, n)?;
        check(OP, "length of tau", tau.len() >= k, tau.len(), k)?;
        if n == 0 {
            return Ok(());
        }
        let (mi, ni, ki, lda) = (
            int(OP, "m", m)?,
            int(OP, "n", n)?,
            int(OP, "k", k)?,
            int(OP, "lda", a.ld())?,
        );
        let h = self.solver.cu();
        let info = self.with_workspace::<T>(OP, |step| match step {
            SolverStep::Query(lwork) => {
                let (pa, _ga) = a.buf().device_ptr(&self.stream);
                let (pt, _gt) = tau.device_ptr(&self.stream);
                // SAFETY: cusolverDn{S,D}orgqr_bufferSize reads dimensions and the A (m×n,
                // ld lda) and tau (≥ k) pointers, inside their views (checked); lwork is a
                // live host i32; by_dtype! picks the routine of T.
                unsafe {
                    by_dtype!(
                        T,
                        sys::cusolverDnSorgqr_bufferSize,
                        sys::cusolverDnDorgqr_bufferSize,
                        |E| (h, mi, ni, ki, pa as *const E, lda, pt as *const E, lwork)
                    )
                }
            }
            SolverStep::Run(s) => {
                let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
                let (pt, _gt) = tau.device_ptr(&self.stream);
                // SAFETY: cusolverDn{S,D}orgqr contract: A m×n (ld lda) inside its &mut view
                // (so it does not alias tau), tau ≥ k, work ≥ lwork as queried, devInfo
                // one i32; handle bound to self.stream; by_dtype! picks the routine of T.
                unsafe {
                    by_dtype!(T, sys::cusolverDnSorgqr, sys::cusolverDnDorgqr, |E| (
                        h,
                        mi,
                        ni,
                        ki,
                        pa as *mut E,
                        lda,
                        pt as *const E,
                        s.work as *mut E,
                        s.lwork,
                        s.info as *mut i32
                    ))
                }
            }
        })?;
        info_ok(OP, info)
    }

    /// Cholesky factorisation in place (cuSOLVER `xpotrf`) of the symmetric n×n `a` whose
    /// upper triangle is read: afterwards its upper triangle holds G with a = GᵀG (the strict
    /// lower triangle is left as it was). Returns 0, or the order i of the leading minor that
    /// is not positive definite (`devInfo` = i > 0; the factor is then incomplete).
    ///
    /// # Errors
    /// [`Error::Shape`] unless `a` is square; [`Error::InvalidParam`]; [`Error::Cusolver`]
    /// for a failed status or a negative `devInfo`; [`Error::OutOfMemory`].
    pub(crate) fn potrf_upper<T: GpuScalar>(&self, a: &mut DevMatViewMut<'_, T>) -> Result<usize> {
        const OP: &str = "potrf";
        let n = a.nrows();
        check(OP, "columns of A", a.ncols() == n, a.ncols(), n)?;
        if n == 0 {
            return Ok(0);
        }
        let (ni, lda) = (int(OP, "n", n)?, int(OP, "lda", a.ld())?);
        let uplo = sys::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER;
        let h = self.solver.cu();
        let info = self.with_workspace::<T>(OP, |step| match step {
            SolverStep::Query(lwork) => {
                let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
                // SAFETY: cusolverDn{S,D}potrf_bufferSize reads only the dimensions and the
                // pointer of A (n×n, ld lda, inside its view); lwork is a live host i32; by_dtype!
                // picks the routine of T (sealed GpuScalar).
                unsafe {
                    by_dtype!(
                        T,
                        sys::cusolverDnSpotrf_bufferSize,
                        sys::cusolverDnDpotrf_bufferSize,
                        |E| (h, uplo, ni, pa as *mut E, lda, lwork)
                    )
                }
            }
            SolverStep::Run(s) => {
                let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
                // SAFETY: cusolverDn{S,D}potrf contract: A n×n (ld lda) inside its &mut view,
                // workspace ≥ lwork elements as queried, devInfo one i32; distinct allocations;
                // handle bound to self.stream; by_dtype! picks the routine of T.
                unsafe {
                    by_dtype!(T, sys::cusolverDnSpotrf, sys::cusolverDnDpotrf, |E| (
                        h,
                        uplo,
                        ni,
                        pa as *mut E,
                        lda,
                        s.work as *mut E,
                        s.lwork,
                        s.info as *mut i32
                    ))
                }
            }
        })?;
        match info {
            i if i >= 0 => Ok(i as usize),
            i => Err(bad_param(OP, i)),
        }
    }
}

/// cuSOLVER LU (`xgetrf`, `xgetrs`): the baseline of `cuqr bench lu` and a test
/// oracle for [`crate::lu::GpuLu`] — never cuqr's own LU.
impl Gpu {
    /// LU with partial pivoting in place (cuSOLVER `xgetrf`): L below the diagonal,
    /// U on and above; `ipiv[0..min(m, n))` 1-based (LAPACK convention).
    ///
    /// # Errors
    /// [`Error::Shape`] if `ipiv` is shorter than min(m, n); [`Error::InvalidParam`];
    /// [`Error::Singular`] when `devInfo` = i > 0 (u_ii exactly zero, column i − 1);
    /// [`Error::Cusolver`] for a failed status or a negative `devInfo`;
    /// [`Error::OutOfMemory`] for the workspace.
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn getrf<T: GpuScalar>(
        &self,
        a: &mut DevMatViewMut<'_, T>,
        ipiv: &mut CudaViewMut<'_, i32>,
    ) -> Result<()> {
        const OP: &str = "getrf";
        let (m, n) = (a.nrows(), a.ncols());
        let kmin = m.min(n);
        check(OP, "length of ipiv", ipiv.len() >= kmin, ipiv.len(), kmin)?;
        if kmin == 0 {
            return Ok(());
        }
        let (mi, ni, lda) = (int(OP, "m", m)?, int(OP, "n", n)?, int(OP, "lda", a.ld())?);
        let h = self.solver.cu();
        let info = self.with_workspace::<T>(OP, |step| match step {
            SolverStep::Query(lwork) => {
                let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
                // SAFETY: cusolverDn{S,D}getrf_bufferSize reads only the dimensions; A is m×n
                // with ld lda inside its view; lwork is a live host i32; by_dtype! picks the
                // routine of T.
                unsafe {
                    by_dtype!(
                        T,
                        sys::cusolverDnSgetrf_bufferSize,
                        sys::cusolverDnDgetrf_bufferSize,
                        |E| (h, mi, ni, pa as *mut E, lda, lwork)
                    )
                }
            }
            SolverStep::Run(s) => {
                let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
                let (pp, _gp) = ipiv.device_ptr_mut(&self.stream);
                // SAFETY: cusolverDn{S,D}getrf contract: A m×n (ld lda) inside its &mut view,
                // devIpiv ≥ min(m, n) i32 (checked), Workspace ≥ lwork elements as queried,
                // devInfo one i32; distinct allocations; handle on self.stream; by_dtype!
                // picks the routine of T.
                unsafe {
                    by_dtype!(T, sys::cusolverDnSgetrf, sys::cusolverDnDgetrf, |E| (
                        h,
                        mi,
                        ni,
                        pa as *mut E,
                        lda,
                        s.work as *mut E,
                        pp as *mut i32,
                        s.info as *mut i32
                    ))
                }
            }
        })?;
        match info {
            0 => Ok(()),
            i if i > 0 => Err(Error::Singular {
                op: OP,
                column: (i - 1) as usize,
                pivot: 0.0,
                tol: 0.0,
            }),
            i => Err(bad_param(OP, i)),
        }
    }

    /// Solves A·X = B with the factors of [`Gpu::getrf`] (cuSOLVER `xgetrs`, no
    /// transpose), overwriting `b` (n×q) with X.
    ///
    /// # Errors
    /// [`Error::Shape`] if A is not n×n, `ipiv` shorter than n, or B not n rows;
    /// [`Error::InvalidParam`]; [`Error::Cusolver`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn getrs<T: GpuScalar>(
        &self,
        a: &DevMatView<'_, T>,
        ipiv: &CudaView<'_, i32>,
        b: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        const OP: &str = "getrs";
        let n = a.nrows();
        check(OP, "columns of A", a.ncols() == n, a.ncols(), n)?;
        check(OP, "length of ipiv", ipiv.len() >= n, ipiv.len(), n)?;
        check(OP, "rows of B", b.nrows() == n, b.nrows(), n)?;
        if n == 0 || b.ncols() == 0 {
            return Ok(());
        }
        let (ni, qi) = (int(OP, "n", n)?, int(OP, "nrhs", b.ncols())?);
        let (lda, ldb) = (int(OP, "lda", a.ld())?, int(OP, "ldb", b.ld())?);
        let h = self.solver.cu();
        let mut info = self.dev_info()?;
        let st = {
            let (pa, _ga) = a.buf().device_ptr(&self.stream);
            let (pp, _gp) = ipiv.device_ptr(&self.stream);
            let (pb, _gb) = b.buf_mut().device_ptr_mut(&self.stream);
            let (pi, _gi) = info.device_ptr_mut(&self.stream);
            let tr = op_cusolver(Op::N);
            self.count_launch();
            // SAFETY: cusolverDn{S,D}getrs contract: A n×n (ld lda) and devIpiv ≥ n i32
            // (checked) are read only, B n×nrhs (ld ldb) inside its &mut view (so it
            // aliases neither), devInfo one i32; handle on self.stream; by_dtype! picks
            // the routine of T.
            unsafe {
                by_dtype!(T, sys::cusolverDnSgetrs, sys::cusolverDnDgetrs, |E| (
                    h,
                    tr,
                    ni,
                    qi,
                    pa as *const E,
                    lda,
                    pp as *const i32,
                    pb as *mut E,
                    ldb,
                    pi as *mut i32,
                ))
            }
        };
        self.solver_done(OP, st, &info)
    }
}

/// Householder QR and its explicit Q in any [`GpuField`] (cuSOLVER `xgeqrf`, and `xorgqr`
/// or `xungqr`), on matrices in parts layout (a complex m×n matrix as 2m×n reals): the
/// explicit-factor GPU state's factorisation and the complex "refactorise" baseline.
impl Gpu {
    /// Runs `call` the cuSOLVER way on a workspace of elements of `T` (parts of
    /// `T::Real`): the query's element count is allocated as PARTS·lwork parts, and the
    /// routine is told the element count.
    fn with_field_workspace<T: GpuField>(
        &self,
        op: &'static str,
        mut call: impl FnMut(SolverStep<'_>) -> sys::cusolverStatus_t,
    ) -> Result<i32> {
        let parts = T::PARTS as i32;
        self.with_workspace::<T::Real>(op, |step| match step {
            SolverStep::Query(lwork) => {
                let st = call(SolverStep::Query(lwork));
                *lwork = lwork.saturating_mul(parts);
                st
            }
            SolverStep::Run(s) => call(SolverStep::Run(Scratch {
                work: s.work,
                lwork: s.lwork / parts,
                info: s.info,
            })),
        })
    }

    /// QR in place of the m×n element matrix in the leading block of `a`: R in its upper
    /// triangle, the reflectors below, τ (min(m, n) elements) in `tau` (parts layout).
    ///
    /// # Errors
    /// [`Error::Shape`] for blocks that do not fit; [`Error::InvalidParam`];
    /// [`Error::Cusolver`]; [`Error::OutOfMemory`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn geqrf_field<T: GpuField>(
        &self,
        a: &mut DevMat<T::Real>,
        (m, n): (usize, usize),
        tau: &mut CudaViewMut<'_, T::Real>,
    ) -> Result<()> {
        const OP: &str = "geqrf (explicit factors)";
        let parts = T::PARTS;
        let kmin = m.min(n);
        check(
            OP,
            "rows of A",
            a.nrows() >= parts * m,
            a.nrows(),
            parts * m,
        )?;
        check(OP, "columns of A", a.ncols() >= n, a.ncols(), n)?;
        check(
            OP,
            "length of tau",
            tau.len() >= parts * kmin,
            tau.len(),
            parts * kmin,
        )?;
        if kmin == 0 {
            return Ok(());
        }
        let (mi, ni) = (int(OP, "m", m)?, int(OP, "n", n)?);
        let lda = int(OP, "lda", a.ld() / parts)?;
        let h = self.solver.cu();
        let info = self.with_field_workspace::<T>(OP, |step| {
            let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
            match step {
                // SAFETY: cusolverDn{S,D,C,Z}geqrf_bufferSize reads the dimensions; A is
                // m×n elements (ld lda elements) inside `a` (checked in parts); lwork is a
                // live host i32.
                SolverStep::Query(lwork) => unsafe {
                    by_field!(
                        T,
                        [
                            sys::cusolverDnSgeqrf_bufferSize,
                            sys::cusolverDnDgeqrf_bufferSize,
                            sys::cusolverDnCgeqrf_bufferSize,
                            sys::cusolverDnZgeqrf_bufferSize
                        ],
                        [f32, f64, sys::cuComplex, sys::cuDoubleComplex],
                        |E| (h, mi, ni, pa as *mut E, lda, lwork)
                    )
                },
                SolverStep::Run(s) => {
                    let (pt, _gt) = tau.device_ptr_mut(&self.stream);
                    // SAFETY: cusolverDn{S,D,C,Z}geqrf contract: A m×n elements (ld lda)
                    // inside `a`, TAU ≥ min(m, n) elements (checked in parts), Workspace ≥
                    // lwork elements as queried, devInfo one i32; distinct allocations;
                    // handle on self.stream; the element layouts match (parts, real
                    // first).
                    unsafe {
                        by_field!(
                            T,
                            [
                                sys::cusolverDnSgeqrf,
                                sys::cusolverDnDgeqrf,
                                sys::cusolverDnCgeqrf,
                                sys::cusolverDnZgeqrf
                            ],
                            [f32, f64, sys::cuComplex, sys::cuDoubleComplex],
                            |E| (
                                h,
                                mi,
                                ni,
                                pa as *mut E,
                                lda,
                                pt as *mut E,
                                s.work as *mut E,
                                s.lwork,
                                s.info as *mut i32
                            )
                        )
                    }
                }
            }
        })?;
        info_ok(OP, info)
    }

    /// The first `n` columns of Q = H₀⋯H_{k−1} (m×n, m ≥ n ≥ k) formed in place in the
    /// leading block of `a` from [`Gpu::geqrf_field`]'s reflectors and τ.
    ///
    /// # Errors
    /// [`Error::Shape`]; [`Error::InvalidParam`]; [`Error::Cusolver`];
    /// [`Error::OutOfMemory`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn ungqr_field<T: GpuField>(
        &self,
        a: &mut DevMat<T::Real>,
        (m, n, k): (usize, usize, usize),
        tau: &CudaView<'_, T::Real>,
    ) -> Result<()> {
        const OP: &str = "ungqr (explicit factors)";
        let parts = T::PARTS;
        check(OP, "columns of Q (n ≤ m)", n <= m, n, m)?;
        check(OP, "reflector count k", k <= n, k, n)?;
        check(
            OP,
            "rows of A",
            a.nrows() >= parts * m,
            a.nrows(),
            parts * m,
        )?;
        check(OP, "columns of A", a.ncols() >= n, a.ncols(), n)?;
        check(
            OP,
            "length of tau",
            tau.len() >= parts * k,
            tau.len(),
            parts * k,
        )?;
        if n == 0 {
            return Ok(());
        }
        let (mi, ni, ki) = (int(OP, "m", m)?, int(OP, "n", n)?, int(OP, "k", k)?);
        let lda = int(OP, "lda", a.ld() / parts)?;
        let h = self.solver.cu();
        let info = self.with_field_workspace::<T>(OP, |step| {
            let (pt, _gt) = tau.device_ptr(&self.stream);
            match step {
                SolverStep::Query(lwork) => {
                    let (pa, _ga) = a.buf().device_ptr(&self.stream);
                    // SAFETY: cusolverDn{S,D}orgqr / {C,Z}ungqr _bufferSize reads the
                    // dimensions and the A and tau pointers, inside their buffers (checked
                    // in parts); lwork is a live host i32.
                    unsafe {
                        by_field!(
                            T,
                            [
                                sys::cusolverDnSorgqr_bufferSize,
                                sys::cusolverDnDorgqr_bufferSize,
                                sys::cusolverDnCungqr_bufferSize,
                                sys::cusolverDnZungqr_bufferSize
                            ],
                            [f32, f64, sys::cuComplex, sys::cuDoubleComplex],
                            |E| (h, mi, ni, ki, pa as *const E, lda, pt as *const E, lwork)
                        )
                    }
                }
                SolverStep::Run(s) => {
                    let (pa, _ga) = a.buf_mut().device_ptr_mut(&self.stream);
                    // SAFETY: cusolverDn{S,D}orgqr / {C,Z}ungqr contract: A m×n elements
                    // (ld lda) inside `a`, tau ≥ k elements, work ≥ lwork elements as
                    // queried, devInfo one i32; distinct allocations; handle on
                    // self.stream.
                    unsafe {
                        by_field!(
                            T,
                            [
                                sys::cusolverDnSorgqr,
                                sys::cusolverDnDorgqr,
                                sys::cusolverDnCungqr,
                                sys::cusolverDnZungqr
                            ],
                            [f32, f64, sys::cuComplex, sys::cuDoubleComplex],
                            |E| (
                                h,
                                mi,
                                ni,
                                ki,
                                pa as *mut E,
                                lda,
                                pt as *const E,
                                s.work as *mut E,
                                s.lwork,
                                s.info as *mut i32
                            )
                        )
                    }
                }
            }
        })?;
        info_ok(OP, info)
    }
}
