//! Thin safe wrappers over the cuBLAS calls cuqr needs: GEMM, TRSM and GEMV
//! in f32/f64 (architecture.md "Host": cuBLAS does the GEMM/TRSM-class work,
//! as in the seeds). Calls go on [`Gpu::stream`], to which the handle is bound;
//! shapes are validated first and every status maps to [`Error::Cublas`].

use cudarc::cublas::sys;
use cudarc::driver::{CudaView, CudaViewMut, DevicePtr, DevicePtrMut};

use super::matrix::{DevMatView, DevMatViewMut};
use super::{Dtype, Gpu, GpuScalar};
use crate::error::{Error, Result};

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

impl Gpu {
    /// C := α·op(A)·op(B) + β·C (cuBLAS `xGEMM`).
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
        let st = match T::DTYPE {
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
