//! Thin safe wrappers over the cuBLAS calls cuqr needs: GEMM, TRSM, TRSV, GEMV and
//! the level-1 DOT, NRM2, AXPY, SCAL, COPY in f32/f64 (cuBLAS does
//! the GEMM/TRSM-class work). Calls go on [`Gpu::stream`], to
//! which the handle is bound; shapes are validated first and every status maps to
//! [`Error::Cublas`]. Level-1 calls returning a scalar use cuBLAS's host pointer mode,
//! so they wait for the stream.
//!
//! f32 GEMMs honour the device's GEMM precision (docs/algorithms.md#mixed-precision): with a
//! [`GemmPrecisionGuard`] alive, [`Gpu::gemm`] on f32 data runs `cublasGemmEx` on tensor
//! cores with f32 accumulation: for bf16 and f16 the operands are first rounded
//! explicitly (round to nearest even, `convert_to_half` kernel) and passed as
//! `CUDA_R_16BF` / `CUDA_R_16F` with `CUBLAS_COMPUTE_32F`; for tf32 the f32 operands go
//! in with `CUBLAS_COMPUTE_32F_FAST_TF32`. (The `_FAST_*` compute types with f32
//! operands only *allow* down-conversion: on an H200 the `_FAST_16BF` / `_FAST_16F`
//! results were identical to TF32's, so cuqr rounds bf16/f16 operands itself; and
//! `_FAST_TF32` ran an exact f32 kernel for a k = 1 GEMM while the QR's trailing updates
//! did run in tf32 — mixed-QR error 5.7e-5 against 2.3e-8 with SGEMM. So tf32 means "at
//! most tf32's rounding", never less accurate.)
// Some of these serve only cuqr's benchmarks and kernel tests (the published algorithms'
// reference kernels, stage profiling), which reach them through the `internals` feature.
#![cfg_attr(not(feature = "internals"), allow(dead_code))]

use cudarc::cublas::sys;
use cudarc::driver::{CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use core::sync::atomic::Ordering;

use crate::base::error::{Error, Result};
use crate::base::precision::GemmPrecision;
use crate::gpu::ffi::by_dtype;
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::runtime::matrix::{DevMatView, DevMatViewMut};
use crate::gpu::runtime::{Dtype, Gpu, GpuScalar};

/// Transposition of an operand: `N` (as stored) or `T` (transposed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// op(A) = A.
    N,
    /// op(A) = Aᵀ.
    T,
}

/// Which side a triangular or orthogonal factor multiplies from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// op(A)·X.
    Left,
    /// X·op(A).
    Right,
}

/// Which triangle of a triangular matrix is referenced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Uplo {
    /// Upper triangle (R).
    Upper,
    /// Lower triangle.
    Lower,
}

/// Whether a triangular matrix has an implicit unit diagonal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Diag {
    /// The stored diagonal is used.
    NonUnit,
    /// The diagonal is taken as 1 and not read.
    Unit,
}

impl Op {
    pub(crate) fn cublas(self) -> sys::cublasOperation_t {
        match self {
            Op::N => sys::cublasOperation_t::CUBLAS_OP_N,
            Op::T => sys::cublasOperation_t::CUBLAS_OP_T,
        }
    }
    /// Rows, columns of op(A) for A of shape (r, c).
    fn dims(self, r: usize, c: usize) -> (usize, usize) {
        match self {
            Op::N => (r, c),
            Op::T => (c, r),
        }
    }
}

impl Side {
    fn cublas(self) -> sys::cublasSideMode_t {
        match self {
            Side::Left => sys::cublasSideMode_t::CUBLAS_SIDE_LEFT,
            Side::Right => sys::cublasSideMode_t::CUBLAS_SIDE_RIGHT,
        }
    }
}

/// A dimension as cuBLAS/cuSOLVER's `int`.
pub(crate) fn int(op: &'static str, what: &'static str, x: usize) -> Result<i32> {
    i32::try_from(x).map_err(|_| Error::InvalidParam {
        op,
        what,
        why: format!("{x} exceeds the 32-bit int of cuBLAS/cuSOLVER"),
    })
}

/// `Ok` when `ok`, else [`Error::Shape`] for `op`'s argument `what`.
pub(crate) fn shape_check(
    op: &'static str,
    what: &'static str,
    ok: bool,
    got: usize,
    expected: usize,
) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::Shape {
            op,
            what,
            got,
            expected,
        })
    }
}

/// `Ok` when `got == expected`, else [`Error::Shape`].
pub(crate) fn shape(
    op: &'static str,
    what: &'static str,
    got: usize,
    expected: usize,
) -> Result<()> {
    shape_check(op, what, got == expected, got, expected)
}

pub(crate) fn status(op: &'static str, s: sys::cublasStatus_t) -> Result<()> {
    crate::gpu::ffi::driver::fault::cublas(s)
        .result()
        .map_err(|e| Error::cublas(op, e))
}

/// `Gpu::gemm_mode` code of a [`GemmPrecision`] (0 = plain f32 SGEMM).
fn mode_code(p: GemmPrecision) -> u8 {
    match p {
        GemmPrecision::F32 => 0,
        GemmPrecision::Bf16 => 1,
        GemmPrecision::F16 => 2,
        GemmPrecision::Tf32 => 3,
    }
}

fn mode_of(code: u8) -> GemmPrecision {
    match code {
        1 => GemmPrecision::Bf16,
        2 => GemmPrecision::F16,
        3 => GemmPrecision::Tf32,
        _ => GemmPrecision::F32,
    }
}

/// How an f32 GEMM runs in precision `p`: `None` = plain SGEMM; `Some((format, Atype,
/// compute))` = `cublasGemmEx`, where `format` = `Some(0 | 1)` means the operands are
/// first rounded explicitly to bf16 / f16 by the `convert_to_half` kernel and passed as
/// `Atype` with plain f32 compute (cuBLAS's `_FAST_16BF` / `_FAST_16F` compute types
/// only *allow* down-conversion: on an H200 they gave results identical to TF32), and
/// `None` means f32 operands with `CUBLAS_COMPUTE_32F_FAST_TF32` (tf32 tensor cores).
type HalfPlan = (Option<u32>, sys::cudaDataType, sys::cublasComputeType_t);

fn gemm_plan(p: GemmPrecision) -> Option<HalfPlan> {
    use sys::cublasComputeType_t as C;
    use sys::cudaDataType as D;
    match p {
        GemmPrecision::F32 => None,
        GemmPrecision::Bf16 => Some((Some(0), D::CUDA_R_16BF, C::CUBLAS_COMPUTE_32F)),
        GemmPrecision::F16 => Some((Some(1), D::CUDA_R_16F, C::CUBLAS_COMPUTE_32F)),
        GemmPrecision::Tf32 => Some((None, D::CUDA_R_32F, C::CUBLAS_COMPUTE_32F_FAST_TF32)),
    }
}

/// While alive, every f32 [`Gpu::gemm`] issued on its [`Gpu`] (by any caller, any
/// thread) uses the chosen [`GemmPrecision`]; dropping it restores the previous
/// setting (guards nest). f64 GEMMs are never affected. Made by
/// [`Gpu::gemm_precision_scope`] (docs/algorithms.md#mixed-precision).
#[derive(Debug)]
#[must_use = "the precision reverts when the guard is dropped"]
pub struct GemmPrecisionGuard<'a> {
    gpu: &'a Gpu,
    prev: u8,
}

impl Drop for GemmPrecisionGuard<'_> {
    fn drop(&mut self) {
        self.gpu.gemm_mode.store(self.prev, Ordering::Relaxed);
    }
}

impl Gpu {
    /// The precision f32 GEMMs on this device currently use ([`GemmPrecision::F32`],
    /// plain SGEMM, unless a `GemmPrecisionGuard` is alive).
    pub fn gemm_precision(&self) -> GemmPrecision {
        mode_of(self.gemm_mode.load(Ordering::Relaxed))
    }

    /// Sets the precision of f32 GEMMs on this device until the returned guard is dropped
    /// (docs/algorithms.md#mixed-precision). The setting is per device, not per caller: it
    /// applies to all f32 GEMMs issued on this `Gpu` meanwhile, from any thread.
    pub fn gemm_precision_scope(&self, p: GemmPrecision) -> GemmPrecisionGuard<'_> {
        let prev = self.gemm_mode.swap(mode_code(p), Ordering::Relaxed);
        GemmPrecisionGuard { gpu: self, prev }
    }
}

impl Gpu {
    /// C := α·op(A)·op(B) + β·C (cuBLAS `xGEMM`). f32 data uses `cublasGemmEx` with a
    /// tensor-core compute type while a `GemmPrecisionGuard` is alive.
    ///
    /// # Errors
    /// [`Error::Shape`] if op(A) is not m×k, op(B) not k×n for C m×n;
    /// [`Error::InvalidParam`] if a dimension exceeds `i32`; [`Error::Cublas`].
    #[allow(clippy::too_many_arguments)]
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn gemm<T: GpuScalar>(
        &self,
        ta: Op,
        tb: Op,
        alpha: T,
        a: &DevMatView<'_, T>,
        b: &DevMatView<'_, T>,
        beta: T,
        c: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        const OP: &str = "gemm";
        let (m, n) = (c.nrows(), c.ncols());
        let (am, k) = ta.dims(a.nrows(), a.ncols());
        let (bk, bn) = tb.dims(b.nrows(), b.ncols());
        shape(OP, "rows of op(A)", am, m)?;
        shape(OP, "rows of op(B)", bk, k)?;
        shape(OP, "columns of op(B)", bn, n)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let (mi, ni, ki) = (int(OP, "m", m)?, int(OP, "n", n)?, int(OP, "k", k)?);
        let (lda, ldb, ldc) = (
            int(OP, "lda", a.ld())?,
            int(OP, "ldb", b.ld())?,
            int(OP, "ldc", c.ld())?,
        );
        let h = *self.blas.handle();
        let (pa, _ga) = a.buf().device_ptr(&self.stream);
        let (pb, _gb) = b.buf().device_ptr(&self.stream);
        let (pc, _gc) = c.buf_mut().device_ptr_mut(&self.stream);
        self.count_launch();
        let plan = gemm_plan(self.gemm_precision());
        // Explicit bf16/f16 operands (kept alive until after the call).
        let halves = match (T::DTYPE, plan) {
            (Dtype::F32, Some((Some(fmt), _, _))) => {
                Some((self.convert_to_half(a, fmt)?, self.convert_to_half(b, fmt)?))
            }
            _ => None,
        };
        let st = match T::DTYPE {
            Dtype::F32 if plan.is_some() => {
                let (_, dt, ct) = plan.expect("matched");
                let (al, be) = (alpha.to_f64() as f32, beta.to_f64() as f32);
                let guards;
                let (qa, qb) = match halves.as_ref() {
                    Some((ha, hb)) => {
                        let (ga, gb) = (ha.device_ptr(&self.stream), hb.device_ptr(&self.stream));
                        let ptrs = (ga.0, gb.0);
                        guards = Some((ga.1, gb.1));
                        ptrs
                    }
                    None => {
                        guards = None;
                        (pa, pb)
                    }
                };
                let _keep = guards;
                // SAFETY: cublasGemmEx contract: A and B are either the f32 views (dt =
                // CUDA_R_32F, T is f32) or u16 buffers of the same shape and leading
                // dimension holding bf16/f16 bit patterns (dt = CUDA_R_16BF / 16F), alive
                // until after the call; C is f32 (CUDA_R_32F) with the extents, the
                // non-aliasing and the stream binding as for cublasSgemm_v2 below; α, β
                // are host f32 as the f32 compute types require.
                unsafe {
                    sys::cublasGemmEx(
                        h,
                        ta.cublas(),
                        tb.cublas(),
                        mi,
                        ni,
                        ki,
                        (&al as *const f32).cast(),
                        qa as *const core::ffi::c_void,
                        dt,
                        lda,
                        qb as *const core::ffi::c_void,
                        dt,
                        ldb,
                        (&be as *const f32).cast(),
                        pc as *mut core::ffi::c_void,
                        sys::cudaDataType::CUDA_R_32F,
                        ldc,
                        ct,
                        sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                    )
                }
            }
            // SAFETY: cublas{S,D}gemm_v2 contract: A spans lda·(cols−1)+rows elements of op(A)'s
            // storage, likewise B and C (guaranteed by the DevMatView extents), the dims
            // were checked above, C is a &mut view so it aliases neither A nor B, and the
            // handle is bound to self.stream on which the pointers' guards order the
            // accesses. by_dtype! picks the routine of T (sealed GpuScalar).
            _ => unsafe {
                by_dtype!(T, sys::cublasSgemm_v2, sys::cublasDgemm_v2, |E| (
                    h,
                    ta.cublas(),
                    tb.cublas(),
                    mi,
                    ni,
                    ki,
                    &(alpha.to_f64() as E),
                    pa as *const E,
                    lda,
                    pb as *const E,
                    ldb,
                    &(beta.to_f64() as E),
                    pc as *mut E,
                    ldc
                ))
            },
        };
        status(OP, st)
    }

    /// Solves op(A)·X = α·B (`Side::Left`) or X·op(A) = α·B (`Side::Right`)
    /// for triangular A, overwriting B with X (cuBLAS `xTRSM`).
    ///
    /// # Errors
    /// [`Error::Shape`] if A is not square of B's matching dimension;
    /// [`Error::InvalidParam`]; [`Error::Cublas`].
    #[allow(clippy::too_many_arguments)]
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn trsm<T: GpuScalar>(
        &self,
        side: Side,
        uplo: Uplo,
        trans: Op,
        diag: Diag,
        alpha: T,
        a: &DevMatView<'_, T>,
        b: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        const OP: &str = "trsm";
        let (m, n) = (b.nrows(), b.ncols());
        let k = if side == Side::Left { m } else { n };
        shape(OP, "rows of A", a.nrows(), k)?;
        shape(OP, "columns of A", a.ncols(), k)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let (mi, ni) = (int(OP, "m", m)?, int(OP, "n", n)?);
        let (lda, ldb) = (int(OP, "lda", a.ld())?, int(OP, "ldb", b.ld())?);
        let ul = match uplo {
            Uplo::Upper => sys::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
            Uplo::Lower => sys::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
        };
        let dg = match diag {
            Diag::NonUnit => sys::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT,
            Diag::Unit => sys::cublasDiagType_t::CUBLAS_DIAG_UNIT,
        };
        let h = *self.blas.handle();
        let (pa, _ga) = a.buf().device_ptr(&self.stream);
        let (pb, _gb) = b.buf_mut().device_ptr_mut(&self.stream);
        self.count_launch();
        // SAFETY: cublas{S,D}trsm_v2 contract: A is k×k with ld lda, B m×n with ld ldb,
        // both within their views (checked shapes); B is a &mut view so it does not alias
        // A; the handle is bound to self.stream. by_dtype! picks the routine of T (sealed
        // GpuScalar).
        let st = unsafe {
            by_dtype!(T, sys::cublasStrsm_v2, sys::cublasDtrsm_v2, |E| (
                h,
                side.cublas(),
                ul,
                trans.cublas(),
                dg,
                mi,
                ni,
                &(alpha.to_f64() as E),
                pa as *const E,
                lda,
                pb as *mut E,
                ldb
            ))
        };
        status(OP, st)
    }

    /// y := α·op(A)·x + β·y (cuBLAS `xGEMV`, unit strides).
    ///
    /// # Errors
    /// [`Error::Shape`] if x or y do not match op(A); [`Error::InvalidParam`];
    /// [`Error::Cublas`].
    #[allow(clippy::too_many_arguments)]
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn gemv<T: GpuScalar>(
        &self,
        trans: Op,
        alpha: T,
        a: &DevMatView<'_, T>,
        x: &CudaView<'_, T>,
        beta: T,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        const OP: &str = "gemv";
        let (ym, xn) = trans.dims(a.nrows(), a.ncols());
        shape(OP, "length of x", x.len(), xn)?;
        shape(OP, "length of y", y.len(), ym)?;
        if ym == 0 {
            return Ok(());
        }
        let (mi, ni) = (int(OP, "m", a.nrows())?, int(OP, "n", a.ncols())?);
        let lda = int(OP, "lda", a.ld())?;
        let h = *self.blas.handle();
        let (pa, _ga) = a.buf().device_ptr(&self.stream);
        let (px, _gx) = x.device_ptr(&self.stream);
        let (py, _gy) = y.device_ptr_mut(&self.stream);
        self.count_launch();
        // SAFETY: cublas{S,D}gemv_v2 contract: A is m×n with ld lda inside its view, x and
        // y have the lengths checked above with stride 1; y is a &mut view so it aliases
        // neither A nor x; handle bound to self.stream. by_dtype! picks the routine of T
        // (sealed GpuScalar).
        let st = unsafe {
            by_dtype!(T, sys::cublasSgemv_v2, sys::cublasDgemv_v2, |E| (
                h,
                trans.cublas(),
                mi,
                ni,
                &(alpha.to_f64() as E),
                pa as *const E,
                lda,
                px as *const E,
                1,
                &(beta.to_f64() as E),
                py as *mut E,
                1
            ))
        };
        status(OP, st)
    }
}

impl Gpu {
    /// Solves op(A)·x = b for triangular A (n×n), overwriting x (cuBLAS `xTRSV`, unit
    /// stride).
    ///
    /// # Errors
    /// [`Error::Shape`] if A is not square of x's length; [`Error::InvalidParam`];
    /// [`Error::Cublas`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn trsv<T: GpuScalar>(
        &self,
        uplo: Uplo,
        trans: Op,
        diag: Diag,
        a: &DevMatView<'_, T>,
        x: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        const OP: &str = "trsv";
        let n = x.len();
        shape(OP, "rows of A", a.nrows(), n)?;
        shape(OP, "columns of A", a.ncols(), n)?;
        if n == 0 {
            return Ok(());
        }
        let (ni, lda) = (int(OP, "n", n)?, int(OP, "lda", a.ld())?);
        let ul = match uplo {
            Uplo::Upper => sys::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
            Uplo::Lower => sys::cublasFillMode_t::CUBLAS_FILL_MODE_LOWER,
        };
        let dg = match diag {
            Diag::NonUnit => sys::cublasDiagType_t::CUBLAS_DIAG_NON_UNIT,
            Diag::Unit => sys::cublasDiagType_t::CUBLAS_DIAG_UNIT,
        };
        let h = *self.blas.handle();
        let (pa, _ga) = a.buf().device_ptr(&self.stream);
        let (px, _gx) = x.device_ptr_mut(&self.stream);
        self.count_launch();
        // SAFETY: cublas{S,D}trsv_v2 contract: A is n×n with ld lda inside its view, x has
        // n elements with stride 1 (checked); x is a &mut view so it does not alias A; the
        // handle is bound to self.stream. by_dtype! picks the routine of T (sealed
        // GpuScalar).
        let st = unsafe {
            by_dtype!(T, sys::cublasStrsv_v2, sys::cublasDtrsv_v2, |E| (
                h,
                ul,
                trans.cublas(),
                dg,
                ni,
                pa as *const E,
                lda,
                px as *mut E,
                1
            ))
        };
        status(OP, st)
    }

    /// xᵀy (cuBLAS `xDOT`, unit strides, host pointer mode: waits for the stream).
    ///
    /// # Errors
    /// [`Error::Shape`] if the lengths differ; [`Error::InvalidParam`]; [`Error::Cublas`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn dot<T: GpuScalar>(
        &self,
        x: &CudaView<'_, T>,
        y: &CudaView<'_, T>,
    ) -> Result<f64> {
        const OP: &str = "dot";
        shape(OP, "length of y", y.len(), x.len())?;
        if x.is_empty() {
            return Ok(0.0);
        }
        let n = int(OP, "n", x.len())?;
        let h = *self.blas.handle();
        let (px, _gx) = x.device_ptr(&self.stream);
        let (py, _gy) = y.device_ptr(&self.stream);
        self.count_launch();
        match T::DTYPE {
            Dtype::F32 => {
                let mut out = 0.0f32;
                // SAFETY: cublasSdot_v2: x and y hold n f32 (checked lengths, stride 1),
                // `out` is a live host f32 (host pointer mode, the handle's default),
                // written before the call returns. T is f32.
                let st = unsafe {
                    sys::cublasSdot_v2(h, n, px as *const f32, 1, py as *const f32, 1, &mut out)
                };
                status(OP, st).map(|()| out as f64)
            }
            Dtype::F64 => {
                let mut out = 0.0f64;
                // SAFETY: as for f32 with cublasDdot_v2 and T = f64.
                let st = unsafe {
                    sys::cublasDdot_v2(h, n, px as *const f64, 1, py as *const f64, 1, &mut out)
                };
                status(OP, st).map(|()| out)
            }
        }
    }

    /// ‖x‖₂ (cuBLAS `xNRM2`, scaled, unit stride, host pointer mode: waits).
    ///
    /// # Errors
    /// [`Error::InvalidParam`]; [`Error::Cublas`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn nrm2<T: GpuScalar>(&self, x: &CudaView<'_, T>) -> Result<f64> {
        const OP: &str = "nrm2";
        if x.is_empty() {
            return Ok(0.0);
        }
        let n = int(OP, "n", x.len())?;
        let h = *self.blas.handle();
        let (px, _gx) = x.device_ptr(&self.stream);
        self.count_launch();
        match T::DTYPE {
            Dtype::F32 => {
                let mut out = 0.0f32;
                // SAFETY: cublasSnrm2_v2: x holds n f32 with stride 1, `out` is a live
                // host f32 (host pointer mode) written before the call returns. T is f32.
                let st = unsafe { sys::cublasSnrm2_v2(h, n, px as *const f32, 1, &mut out) };
                status(OP, st).map(|()| out as f64)
            }
            Dtype::F64 => {
                let mut out = 0.0f64;
                // SAFETY: as for f32 with cublasDnrm2_v2 and T = f64.
                let st = unsafe { sys::cublasDnrm2_v2(h, n, px as *const f64, 1, &mut out) };
                status(OP, st).map(|()| out)
            }
        }
    }

    /// y := α·x + y (cuBLAS `xAXPY`, unit strides).
    ///
    /// # Errors
    /// [`Error::Shape`] if the lengths differ; [`Error::InvalidParam`]; [`Error::Cublas`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn axpy<T: GpuScalar>(
        &self,
        alpha: T,
        x: &CudaView<'_, T>,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        const OP: &str = "axpy";
        shape(OP, "length of y", y.len(), x.len())?;
        if x.is_empty() {
            return Ok(());
        }
        let n = int(OP, "n", x.len())?;
        let h = *self.blas.handle();
        let (px, _gx) = x.device_ptr(&self.stream);
        let (py, _gy) = y.device_ptr_mut(&self.stream);
        self.count_launch();
        // SAFETY: cublas{S,D}axpy_v2: x, y hold n elements of T with stride 1 (checked), y is a
        // &mut view so it does not alias x, α is a host value of T. by_dtype! picks the routine of
        // T (sealed GpuScalar).
        let st = unsafe {
            by_dtype!(T, sys::cublasSaxpy_v2, sys::cublasDaxpy_v2, |E| (
                h,
                n,
                &(alpha.to_f64() as E),
                px as *const E,
                1,
                py as *mut E,
                1
            ))
        };
        status(OP, st)
    }

    /// x := α·x (cuBLAS `xSCAL`, unit stride).
    ///
    /// # Errors
    /// [`Error::InvalidParam`]; [`Error::Cublas`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn scal<T: GpuScalar>(&self, alpha: T, x: &mut CudaViewMut<'_, T>) -> Result<()> {
        const OP: &str = "scal";
        if x.is_empty() {
            return Ok(());
        }
        let n = int(OP, "n", x.len())?;
        let h = *self.blas.handle();
        let (px, _gx) = x.device_ptr_mut(&self.stream);
        self.count_launch();
        // SAFETY: cublas{S,D}scal_v2: x holds n elements of T with stride 1, α a host value of T.
        // by_dtype! picks the routine of T (sealed GpuScalar).
        let st = unsafe {
            by_dtype!(T, sys::cublasSscal_v2, sys::cublasDscal_v2, |E| (
                h,
                n,
                &(alpha.to_f64() as E),
                px as *mut E,
                1
            ))
        };
        status(OP, st)
    }

    /// y := x (cuBLAS `xCOPY`, unit strides).
    ///
    /// # Errors
    /// [`Error::Shape`] if the lengths differ; [`Error::InvalidParam`]; [`Error::Cublas`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn copy<T: GpuScalar>(
        &self,
        x: &CudaView<'_, T>,
        y: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        const OP: &str = "copy";
        shape(OP, "length of y", y.len(), x.len())?;
        if x.is_empty() {
            return Ok(());
        }
        let n = int(OP, "n", x.len())?;
        let h = *self.blas.handle();
        let (px, _gx) = x.device_ptr(&self.stream);
        let (py, _gy) = y.device_ptr_mut(&self.stream);
        self.count_launch();
        // SAFETY: cublas{S,D}copy_v2: x, y hold n elements of T with stride 1 (checked), y is a
        // &mut view so it does not alias x. by_dtype! picks the routine of T (sealed GpuScalar).
        let st = unsafe {
            by_dtype!(T, sys::cublasScopy_v2, sys::cublasDcopy_v2, |E| (
                h,
                n,
                px as *const E,
                1,
                py as *mut E,
                1
            ))
        };
        status(OP, st)
    }
}

/// The Gram matrix and the diagonal of a factor, for the Gram-Cholesky preconditioner
/// of the mixed-precision solver (docs/algorithms.md#mixed-precision).
impl Gpu {
    /// C := AᵀA in C's upper triangle (cuBLAS `xSYRK`, uplo upper, trans T, α = 1,
    /// β = 0) for the k×n `a` and the n×n `c`; C's strict lower triangle is not written.
    ///
    /// # Errors
    /// [`Error::Shape`] unless C is n×n; [`Error::InvalidParam`]; [`Error::Cublas`].
    pub(crate) fn syrk_upper_t<T: GpuScalar>(
        &self,
        a: &DevMatView<'_, T>,
        c: &mut DevMatViewMut<'_, T>,
    ) -> Result<()> {
        const OP: &str = "syrk";
        let (k, n) = (a.nrows(), a.ncols());
        shape(OP, "rows of C", c.nrows(), n)?;
        shape(OP, "columns of C", c.ncols(), n)?;
        let (ki, ni) = (int(OP, "k", k)?, int(OP, "n", n)?);
        let (lda, ldc) = (int(OP, "lda", a.ld())?, int(OP, "ldc", c.ld())?);
        let (up, tr) = (
            sys::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
            sys::cublasOperation_t::CUBLAS_OP_T,
        );
        let h = *self.blas.handle();
        let (pa, _ga) = a.buf().device_ptr(&self.stream);
        let (pc, _gc) = c.buf_mut().device_ptr_mut(&self.stream);
        self.count_launch();
        // SAFETY: cublas{S,D}syrk_v2 contract: A is k×n (ld lda) inside its view, C n×n (ld
        // ldc) inside its &mut view (checked), so they do not overlap; α, β are live host
        // values (host pointer mode); the handle is bound to self.stream. by_dtype! picks
        // the routine of T (sealed GpuScalar).
        let st = unsafe {
            by_dtype!(T, sys::cublasSsyrk_v2, sys::cublasDsyrk_v2, |E| (
                h,
                up,
                tr,
                ni,
                ki,
                &(1.0 as E),
                pa as *const E,
                lda,
                &(0.0 as E),
                pc as *mut E,
                ldc
            ))
        };
        status(OP, st)
    }

    /// d := the diagonal of the square `a` (cuBLAS `xCOPY` at stride ld + 1).
    ///
    /// # Errors
    /// [`Error::Shape`] unless `a` is square and `d` holds its order;
    /// [`Error::InvalidParam`]; [`Error::Cublas`].
    pub(crate) fn copy_diagonal<T: GpuScalar>(
        &self,
        a: &DevMatView<'_, T>,
        d: &mut CudaViewMut<'_, T>,
    ) -> Result<()> {
        const OP: &str = "copy of the diagonal";
        let n = a.ncols();
        shape(OP, "rows of A", a.nrows(), n)?;
        if d.len() < n {
            shape(OP, "length of d", d.len(), n)?;
        }
        let (ni, step) = (int(OP, "n", n)?, int(OP, "ld + 1", a.ld() + 1)?);
        let h = *self.blas.handle();
        let (pa, _ga) = a.buf().device_ptr(&self.stream);
        let (pd, _gd) = d.device_ptr_mut(&self.stream);
        self.count_launch();
        // SAFETY: cublas{S,D}copy_v2: the n diagonal entries of the n×n A lie at stride
        // ld + 1 inside its view; d holds ≥ n elements (checked) and is a &mut view, so it
        // does not alias A. by_dtype! picks the routine of T (sealed GpuScalar).
        let st = unsafe {
            by_dtype!(T, sys::cublasScopy_v2, sys::cublasDcopy_v2, |E| (
                h,
                ni,
                pa as *const E,
                step,
                pd as *mut E,
                1
            ))
        };
        status(OP, st)
    }
}

/// cuBLAS's batched Householder QR (`cublas{S,D}geqrfBatched`) over B column-major m×n
/// matrices stored one after another in one buffer (lda = m), with its device arrays of
/// matrix and τ pointers made once: the baseline that `cuqr bench qbank` refactorises with.
#[cfg_attr(feature = "internals", visibility::make(pub))]
pub(crate) struct GeqrfBatched<'a, T> {
    a: &'a mut cudarc::driver::CudaSlice<T>,
    tau: cudarc::driver::CudaSlice<T>,
    a_ptrs: cudarc::driver::CudaSlice<u64>,
    tau_ptrs: cudarc::driver::CudaSlice<u64>,
    dims: (usize, usize, usize),
}

impl<'a, T: GpuScalar> GeqrfBatched<'a, T> {
    /// Prepares the pointer arrays for `a` (B·m·n elements, B matrices m×n column-major).
    ///
    /// # Errors
    /// [`Error::Shape`] if `a` is shorter than B·m·n; [`Error::InvalidParam`] for sizes past
    /// i32; [`Error::OutOfMemory`], [`Error::Driver`].
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn new(
        gpu: &Gpu,
        a: &'a mut cudarc::driver::CudaSlice<T>,
        (batch, m, n): (usize, usize, usize),
    ) -> Result<Self> {
        const OP: &str = "geqrf_batched";
        shape_check(
            OP,
            "length of A",
            a.len() >= batch * m * n,
            a.len(),
            batch * m * n,
        )?;
        int(OP, "batch", batch)?;
        int(OP, "m", m)?;
        int(OP, "n", n)?;
        let tau = gpu
            .stream
            .alloc_zeroed::<T>((batch * m.min(n)).max(1))
            .map_err(|e| Error::driver("geqrf_batched tau".to_string(), e))?;
        let size = std::mem::size_of::<T>() as u64;
        let a0 = a.device_ptr(&gpu.stream).0;
        let t0 = tau.device_ptr(&gpu.stream).0;
        let ap: Vec<u64> = (0..batch as u64)
            .map(|k| a0 + k * (m * n) as u64 * size)
            .collect();
        let tp: Vec<u64> = (0..batch as u64)
            .map(|k| t0 + k * m.min(n) as u64 * size)
            .collect();
        let up = |v: &[u64]| {
            gpu.stream
                .htod_copy(if v.is_empty() { &[0u64][..] } else { v })
                .map_err(|e| Error::driver("geqrf_batched pointers".to_string(), e))
        };
        Ok(Self {
            a_ptrs: up(&ap)?,
            tau_ptrs: up(&tp)?,
            a,
            tau,
            dims: (batch, m, n),
        })
    }

    /// The matrices (to refill between runs).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn a_mut(&mut self) -> &mut cudarc::driver::CudaSlice<T> {
        self.a
    }

    /// Factorises every matrix in place (R in the upper triangles, the reflectors below
    /// and in τ), queued on [`Gpu::stream`].
    ///
    /// # Errors
    /// [`Error::Cublas`] (a parameter error is reported through cuBLAS's info).
    #[cfg_attr(feature = "internals", visibility::make(pub))]
    pub(crate) fn run(&mut self, gpu: &Gpu) -> Result<()> {
        const OP: &str = "geqrf_batched";
        let (batch, m, n) = self.dims;
        if batch == 0 {
            return Ok(());
        }
        let (bi, mi, ni) = (batch as i32, m as i32, n as i32);
        let h = *gpu.blas.handle();
        // The guards order the arrays' last writes (the pointer uploads, the caller's
        // refill of A) before the call on the stream.
        let (pa, _ga) = self.a_ptrs.device_ptr_mut(&gpu.stream);
        let (pt, _gt) = self.tau_ptrs.device_ptr_mut(&gpu.stream);
        let (_, _gm) = self.a.device_ptr_mut(&gpu.stream);
        let (_, _gtau) = self.tau.device_ptr_mut(&gpu.stream);
        let mut info = 0i32;
        gpu.count_launch();
        // SAFETY: cublas{S,D}geqrfBatched contract: Aarray and TauArray are device arrays
        // of `batch` device pointers, made in `new` from `a` (B·m·n elements, checked) at
        // strides of m·n and from `tau` (B·min(m, n)) at strides of min(m, n), both
        // borrowed for the struct's life; lda = m; info is a live host int; the handle is
        // bound to gpu.stream. by_dtype! picks the routine of T (sealed GpuScalar).
        let st = unsafe {
            by_dtype!(T, sys::cublasSgeqrfBatched, sys::cublasDgeqrfBatched, |E| (
                h,
                mi,
                ni,
                pa as *const *mut E,
                mi,
                pt as *const *mut E,
                &mut info,
                bi
            ))
        };
        status(OP, st)?;
        if info != 0 {
            return Err(Error::InvalidParam {
                op: OP,
                what: "argument",
                why: format!("cuBLAS reported parameter {} invalid", -info),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_precision_codes_round_trip_and_map_to_tensor_compute_types() {
        use sys::cublasComputeType_t as C;
        let all = [
            GemmPrecision::F32,
            GemmPrecision::Bf16,
            GemmPrecision::F16,
            GemmPrecision::Tf32,
        ];
        for p in all {
            assert_eq!(mode_of(mode_code(p)), p);
        }
        // Code 0 (the field's initial value) is plain SGEMM.
        assert_eq!(mode_of(0), GemmPrecision::F32);
        assert!(gemm_plan(GemmPrecision::F32).is_none());
        let (f, d, c) = gemm_plan(GemmPrecision::Bf16).unwrap();
        assert_eq!(
            (f, d, c),
            (
                Some(0),
                sys::cudaDataType::CUDA_R_16BF,
                C::CUBLAS_COMPUTE_32F
            )
        );
        let (f, d, c) = gemm_plan(GemmPrecision::F16).unwrap();
        assert_eq!(
            (f, d, c),
            (
                Some(1),
                sys::cudaDataType::CUDA_R_16F,
                C::CUBLAS_COMPUTE_32F
            )
        );
        let (f, d, c) = gemm_plan(GemmPrecision::Tf32).unwrap();
        assert_eq!(
            (f, d, c),
            (
                None,
                sys::cudaDataType::CUDA_R_32F,
                C::CUBLAS_COMPUTE_32F_FAST_TF32
            )
        );
    }
}
