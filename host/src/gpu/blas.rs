//! Thin safe wrappers over the cuBLAS calls cuqr needs: GEMM, TRSM, TRSV, GEMV and
//! the level-1 DOT, NRM2, AXPY, SCAL, COPY in f32/f64 (architecture.md "Host": cuBLAS
//! does the GEMM/TRSM-class work, as in the seeds). Calls go on [`Gpu::stream`], to
//! which the handle is bound; shapes are validated first and every status maps to
//! [`Error::Cublas`]. Level-1 calls returning a scalar use cuBLAS's host pointer mode,
//! so they wait for the stream.
//!
//! f32 GEMMs honour the device's GEMM precision (issue 5, spec §4.2, seed S3): with a
//! [`GemmPrecisionGuard`] alive, [`Gpu::gemm`] on f32 data runs `cublasGemmEx` with
//! compute type `CUBLAS_COMPUTE_32F_FAST_16BF` / `_FAST_16F` / `_FAST_TF32`, i.e.
//! tensor cores fed with inputs rounded to bf16 / f16 / tf32 and accumulating in f32.

use cudarc::cublas::sys;
use cudarc::driver::{CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use core::sync::atomic::Ordering;

use super::matrix::{DevMatView, DevMatViewMut};
use super::{Dtype, Gpu, GpuScalar};
use crate::error::{Error, Result};
use crate::mixed::GemmPrecision;

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

fn shape(op: &'static str, what: &'static str, got: usize, expected: usize) -> Result<()> {
    if got == expected {
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

fn status(op: &'static str, s: sys::cublasStatus_t) -> Result<()> {
    s.result().map_err(|e| Error::Cublas(format!("{op}: {e}")))
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

/// cuBLAS compute type of a tensor-core GEMM precision (`None` for plain f32).
fn compute_type(p: GemmPrecision) -> Option<sys::cublasComputeType_t> {
    use sys::cublasComputeType_t as C;
    match p {
        GemmPrecision::F32 => None,
        GemmPrecision::Bf16 => Some(C::CUBLAS_COMPUTE_32F_FAST_16BF),
        GemmPrecision::F16 => Some(C::CUBLAS_COMPUTE_32F_FAST_16F),
        GemmPrecision::Tf32 => Some(C::CUBLAS_COMPUTE_32F_FAST_TF32),
    }
}

/// While alive, every f32 [`Gpu::gemm`] issued on its [`Gpu`] (by any caller, any
/// thread) uses the chosen [`GemmPrecision`]; dropping it restores the previous
/// setting (guards nest). f64 GEMMs are never affected. Made by
/// [`Gpu::gemm_precision_scope`] (issue 5, spec §4.2).
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
    /// plain SGEMM, unless a [`GemmPrecisionGuard`] is alive).
    pub fn gemm_precision(&self) -> GemmPrecision {
        mode_of(self.gemm_mode.load(Ordering::Relaxed))
    }

    /// Sets the precision of f32 GEMMs on this device until the returned guard is
    /// dropped (spec §4.2). The setting is per device, not per caller: it applies to
    /// all f32 GEMMs issued on this `Gpu` meanwhile, from any thread.
    pub fn gemm_precision_scope(&self, p: GemmPrecision) -> GemmPrecisionGuard<'_> {
        let prev = self.gemm_mode.swap(mode_code(p), Ordering::Relaxed);
        GemmPrecisionGuard { gpu: self, prev }
    }
}

impl Gpu {
    /// C := α·op(A)·op(B) + β·C (cuBLAS `xGEMM`). f32 data uses `cublasGemmEx` with a
    /// tensor-core compute type while a [`GemmPrecisionGuard`] is alive.
    ///
    /// # Errors
    /// [`Error::Shape`] if op(A) is not m×k, op(B) not k×n for C m×n;
    /// [`Error::InvalidParam`] if a dimension exceeds `i32`; [`Error::Cublas`].
    #[allow(clippy::too_many_arguments)]
    pub fn gemm<T: GpuScalar>(
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
        let tensor = compute_type(self.gemm_precision());
        let st = match T::DTYPE {
            Dtype::F32 if tensor.is_some() => {
                let ct = tensor.expect("matched");
                let (al, be) = (alpha.to_f64() as f32, beta.to_f64() as f32);
                let r32 = sys::cudaDataType::CUDA_R_32F;
                // SAFETY: cublasGemmEx contract with A, B, C all CUDA_R_32F (T is f32,
                // DTYPE = F32) and α, β host f32 as the f32-accumulating compute types
                // require: the extents, the non-aliasing of C and the stream binding are
                // as for cublasSgemm_v2 below.
                unsafe {
                    sys::cublasGemmEx(
                        h,
                        ta.cublas(),
                        tb.cublas(),
                        mi,
                        ni,
                        ki,
                        (&al as *const f32).cast(),
                        pa as *const core::ffi::c_void,
                        r32,
                        lda,
                        pb as *const core::ffi::c_void,
                        r32,
                        ldb,
                        (&be as *const f32).cast(),
                        pc as *mut core::ffi::c_void,
                        r32,
                        ldc,
                        ct,
                        sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
                    )
                }
            }
            // SAFETY: cublasSgemm_v2 contract: A spans lda·(cols−1)+rows f32 of op(A)'s
            // storage, likewise B and C (guaranteed by the DevMatView extents), the
            // dims were checked above, C is a &mut view so it aliases neither A nor B,
            // and the handle is bound to self.stream on which the pointers' guards
            // order the accesses. T is f32 here (sealed GpuScalar, DTYPE = F32).
            Dtype::F32 => unsafe {
                let (al, be) = (alpha.to_f64() as f32, beta.to_f64() as f32);
                sys::cublasSgemm_v2(
                    h,
                    ta.cublas(),
                    tb.cublas(),
                    mi,
                    ni,
                    ki,
                    &al,
                    pa as *const f32,
                    lda,
                    pb as *const f32,
                    ldb,
                    &be,
                    pc as *mut f32,
                    ldc,
                )
            },
            // SAFETY: as for f32 with cublasDgemm_v2 and T = f64 (DTYPE = F64).
            Dtype::F64 => unsafe {
                let (al, be) = (alpha.to_f64(), beta.to_f64());
                sys::cublasDgemm_v2(
                    h,
                    ta.cublas(),
                    tb.cublas(),
                    mi,
                    ni,
                    ki,
                    &al,
                    pa as *const f64,
                    lda,
                    pb as *const f64,
                    ldb,
                    &be,
                    pc as *mut f64,
                    ldc,
                )
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
    pub fn trsm<T: GpuScalar>(
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
        let st = match T::DTYPE {
            // SAFETY: cublasStrsm_v2 contract: A is k×k with ld lda, B m×n with ld ldb,
            // both within their views (checked shapes); B is a &mut view so it does not
            // alias A; the handle is bound to self.stream. T is f32 (DTYPE = F32).
            Dtype::F32 => unsafe {
                let al = alpha.to_f64() as f32;
                sys::cublasStrsm_v2(
                    h,
                    side.cublas(),
                    ul,
                    trans.cublas(),
                    dg,
                    mi,
                    ni,
                    &al,
                    pa as *const f32,
                    lda,
                    pb as *mut f32,
                    ldb,
                )
            },
            // SAFETY: as for f32 with cublasDtrsm_v2 and T = f64 (DTYPE = F64).
            Dtype::F64 => unsafe {
                let al = alpha.to_f64();
                sys::cublasDtrsm_v2(
                    h,
                    side.cublas(),
                    ul,
                    trans.cublas(),
                    dg,
                    mi,
                    ni,
                    &al,
                    pa as *const f64,
                    lda,
                    pb as *mut f64,
                    ldb,
                )
            },
        };
        status(OP, st)
    }

    /// y := α·op(A)·x + β·y (cuBLAS `xGEMV`, unit strides).
    ///
    /// # Errors
    /// [`Error::Shape`] if x or y do not match op(A); [`Error::InvalidParam`];
    /// [`Error::Cublas`].
    #[allow(clippy::too_many_arguments)]
    pub fn gemv<T: GpuScalar>(
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
        let st = match T::DTYPE {
            // SAFETY: cublasSgemv_v2 contract: A is m×n with ld lda inside its view,
            // x and y have the lengths checked above with stride 1; y is a &mut view
            // so it aliases neither A nor x; handle bound to self.stream. T is f32.
            Dtype::F32 => unsafe {
                let (al, be) = (alpha.to_f64() as f32, beta.to_f64() as f32);
                sys::cublasSgemv_v2(
                    h,
                    trans.cublas(),
                    mi,
                    ni,
                    &al,
                    pa as *const f32,
                    lda,
                    px as *const f32,
                    1,
                    &be,
                    py as *mut f32,
                    1,
                )
            },
            // SAFETY: as for f32 with cublasDgemv_v2 and T = f64 (DTYPE = F64).
            Dtype::F64 => unsafe {
                let (al, be) = (alpha.to_f64(), beta.to_f64());
                sys::cublasDgemv_v2(
                    h,
                    trans.cublas(),
                    mi,
                    ni,
                    &al,
                    pa as *const f64,
                    lda,
                    px as *const f64,
                    1,
                    &be,
                    py as *mut f64,
                    1,
                )
            },
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
    pub fn trsv<T: GpuScalar>(
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
        let st = match T::DTYPE {
            // SAFETY: cublasStrsv_v2 contract: A is n×n with ld lda inside its view, x has
            // n elements with stride 1 (checked); x is a &mut view so it does not alias A;
            // the handle is bound to self.stream. T is f32 (DTYPE = F32).
            Dtype::F32 => unsafe {
                sys::cublasStrsv_v2(
                    h,
                    ul,
                    trans.cublas(),
                    dg,
                    ni,
                    pa as *const f32,
                    lda,
                    px as *mut f32,
                    1,
                )
            },
            // SAFETY: as for f32 with cublasDtrsv_v2 and T = f64 (DTYPE = F64).
            Dtype::F64 => unsafe {
                sys::cublasDtrsv_v2(
                    h,
                    ul,
                    trans.cublas(),
                    dg,
                    ni,
                    pa as *const f64,
                    lda,
                    px as *mut f64,
                    1,
                )
            },
        };
        status(OP, st)
    }

    /// xᵀy (cuBLAS `xDOT`, unit strides, host pointer mode: waits for the stream).
    ///
    /// # Errors
    /// [`Error::Shape`] if the lengths differ; [`Error::InvalidParam`]; [`Error::Cublas`].
    pub fn dot<T: GpuScalar>(&self, x: &CudaView<'_, T>, y: &CudaView<'_, T>) -> Result<f64> {
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
    pub fn nrm2<T: GpuScalar>(&self, x: &CudaView<'_, T>) -> Result<f64> {
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
    pub fn axpy<T: GpuScalar>(
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
        let st = match T::DTYPE {
            Dtype::F32 => {
                let al = alpha.to_f64() as f32;
                // SAFETY: cublasSaxpy_v2: x, y hold n f32 with stride 1 (checked), y is a
                // &mut view so it does not alias x, α is a host f32. T is f32.
                unsafe { sys::cublasSaxpy_v2(h, n, &al, px as *const f32, 1, py as *mut f32, 1) }
            }
            Dtype::F64 => {
                let al = alpha.to_f64();
                // SAFETY: as for f32 with cublasDaxpy_v2 and T = f64.
                unsafe { sys::cublasDaxpy_v2(h, n, &al, px as *const f64, 1, py as *mut f64, 1) }
            }
        };
        status(OP, st)
    }

    /// x := α·x (cuBLAS `xSCAL`, unit stride).
    ///
    /// # Errors
    /// [`Error::InvalidParam`]; [`Error::Cublas`].
    pub fn scal<T: GpuScalar>(&self, alpha: T, x: &mut CudaViewMut<'_, T>) -> Result<()> {
        const OP: &str = "scal";
        if x.is_empty() {
            return Ok(());
        }
        let n = int(OP, "n", x.len())?;
        let h = *self.blas.handle();
        let (px, _gx) = x.device_ptr_mut(&self.stream);
        self.count_launch();
        let st = match T::DTYPE {
            Dtype::F32 => {
                let al = alpha.to_f64() as f32;
                // SAFETY: cublasSscal_v2: x holds n f32 with stride 1, α a host f32. T = f32.
                unsafe { sys::cublasSscal_v2(h, n, &al, px as *mut f32, 1) }
            }
            Dtype::F64 => {
                let al = alpha.to_f64();
                // SAFETY: as for f32 with cublasDscal_v2 and T = f64.
                unsafe { sys::cublasDscal_v2(h, n, &al, px as *mut f64, 1) }
            }
        };
        status(OP, st)
    }

    /// y := x (cuBLAS `xCOPY`, unit strides).
    ///
    /// # Errors
    /// [`Error::Shape`] if the lengths differ; [`Error::InvalidParam`]; [`Error::Cublas`].
    pub fn copy<T: GpuScalar>(
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
        let st = match T::DTYPE {
            // SAFETY: cublasScopy_v2: x, y hold n f32 with stride 1 (checked), y is a &mut
            // view so it does not alias x. T is f32.
            Dtype::F32 => unsafe {
                sys::cublasScopy_v2(h, n, px as *const f32, 1, py as *mut f32, 1)
            },
            // SAFETY: as for f32 with cublasDcopy_v2 and T = f64.
            Dtype::F64 => unsafe {
                sys::cublasDcopy_v2(h, n, px as *const f64, 1, py as *mut f64, 1)
            },
        };
        status(OP, st)
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
        assert_eq!(compute_type(GemmPrecision::F32), None);
        assert_eq!(
            compute_type(GemmPrecision::Bf16),
            Some(C::CUBLAS_COMPUTE_32F_FAST_16BF)
        );
        assert_eq!(
            compute_type(GemmPrecision::F16),
            Some(C::CUBLAS_COMPUTE_32F_FAST_16F)
        );
        assert_eq!(
            compute_type(GemmPrecision::Tf32),
            Some(C::CUBLAS_COMPUTE_32F_FAST_TF32)
        );
    }
}
