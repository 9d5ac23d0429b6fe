//! The Gram-Cholesky preconditioners of the GPU least-squares solver
//! (docs/algorithms.md#mixed-precision, docs/algorithms.md#accuracy-measures): R̃ from the
//! Cholesky factorisation of the Gram matrix G = fᵀf, by cuBLAS xSYRK (mn² flops) and cuSOLVER
//! xPOTRF (n³/3 flops), in one of two precisions:
//!
//! * **f32, of the scaled f32 copy f of A** ([`MixedFactor::GramCholesky`]): R̃ᵀR̃ = AᵀA + E
//!   with ‖E‖ ≲ c·n·u_f32·‖A‖², so the preconditioned normal operator R̃⁻ᵀAᵀAR̃⁻¹ is
//!   within about c·n·u_f32·κ(A)² of the identity: as good as the mixed QR's for κ(A) up
//!   to ~1e2–1e3, useless (or SPOTRF fails: G not positive definite in f32) beyond.
//! * **f64, of A itself** ([`MixedFactor::GramCholeskyF64`]): the same with u_f64, so
//!   good up to κ(A) ≈ 1e6–1e7 (κ² · u_f64 ≲ 1e-3). This is *not* a low-precision
//!   factor — it is the classical preconditioner of the semi-normal equations (Björck,
//!   *Numerical Methods for Least Squares Problems*, §2.5.4), used because on GPUs with
//!   FP64 tensor cores (H100: DGEMM at the rate of plain f32 FMA) DSYRK + DPOTRF cost a
//!   small fraction of any QR, and the f32 factors need κ(A)²·u_f32 ≪ 1 (Gram) or pay
//!   the QR's panel chain. The refinement and its stopping rules are the same for
//!   every factor.
//!
//! The solver tries them in that order and falls back to the QR (module doc of
//! `gpu.rs`); the refinement in f64 fixes the accuracy either way.
//!
//! [`MixedFactor::GramCholesky`]: crate::mixed::MixedFactor::GramCholesky
//! [`MixedFactor::GramCholeskyF64`]: crate::mixed::MixedFactor::GramCholeskyF64

use cudarc::cublas::sys as blas;
use cudarc::cusolver::sys as solver;
use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::base::error::{Error, Result};
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{alloc_err, driver_err, Gpu, GpuScalar};

const OP: &str = "lstsq_mixed_gpu Gram-Cholesky";

/// Largest (max|r̃_jj| / min|r̃_jj|)²·u for which the factor is used (u the unit
/// roundoff of the factor's precision). The diagonal ratio is a lower bound of κ(R̃) = κ(A) (to first order), so
/// this rejects only factors that are certainly poor: where fl(fᵀf) is numerically
/// indefinite but xPOTRF still succeeded, its smallest pivots are ~√u·‖A‖ and the
/// ratio² · u is of order one. Borderline factors that pass are caught by the inner
/// CG's step cap.
const KAPPA2_U_MAX: f64 = 1e-2;

/// The cuBLAS / cuSOLVER entry points of the Gram-Cholesky factor in one precision.
pub(crate) trait GramScalar: GpuScalar {
    /// C = op(A)ᵀ·A (upper triangle) by xSYRK; arguments as `cublasXsyrk_v2` with
    /// uplo = upper, trans = T, α = 1, β = 0.
    ///
    /// # Safety
    /// As `cublasXsyrk_v2`: A is k×n (ld lda ≥ k) and C n×n (ld ldc ≥ n), both inside
    /// live device allocations ordered on the handle's stream, C not overlapping A;
    /// the handle in host pointer mode.
    unsafe fn syrk(
        h: blas::cublasHandle_t,
        n: i32,
        k: i32,
        a: *const Self,
        lda: i32,
        c: *mut Self,
        ldc: i32,
    ) -> blas::cublasStatus_t;
    /// xCOPY of n elements with strides.
    ///
    /// # Safety
    /// As `cublasXcopy_v2`: both vectors inside live device allocations, not overlapping.
    unsafe fn copy(
        h: blas::cublasHandle_t,
        n: i32,
        x: *const Self,
        incx: i32,
        y: *mut Self,
        incy: i32,
    ) -> blas::cublasStatus_t;
    /// xPOTRF workspace query (upper).
    ///
    /// # Safety
    /// As `cusolverDnXpotrf_bufferSize`: reads only the dimensions; `lwork` a live i32.
    unsafe fn potrf_buffer_size(
        h: solver::cusolverDnHandle_t,
        n: i32,
        a: *mut Self,
        lda: i32,
        lwork: *mut i32,
    ) -> solver::cusolverStatus_t;
    /// xPOTRF (upper) in place.
    ///
    /// # Safety
    /// As `cusolverDnXpotrf`: A n×n (ld lda), a workspace of ≥ lwork elements as
    /// queried and one device i32 devInfo, all live, distinct allocations ordered on
    /// the handle's stream.
    #[allow(clippy::too_many_arguments)]
    unsafe fn potrf(
        h: solver::cusolverDnHandle_t,
        n: i32,
        a: *mut Self,
        lda: i32,
        work: *mut Self,
        lwork: i32,
        info: *mut i32,
    ) -> solver::cusolverStatus_t;
}

const UPPER_B: blas::cublasFillMode_t = blas::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER;
const UPPER_S: solver::cublasFillMode_t = solver::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER;

/// The [`GramScalar`] impl of one precision from its cuBLAS/cuSOLVER entry points.
macro_rules! gram_scalar {
    ($t:ty, $syrk:ident, $copy:ident, $bufsize:ident, $potrf:ident) => {
        impl GramScalar for $t {
            unsafe fn syrk(
                h: blas::cublasHandle_t,
                n: i32,
                k: i32,
                a: *const $t,
                lda: i32,
                c: *mut $t,
                ldc: i32,
            ) -> blas::cublasStatus_t {
                let (one, zero): ($t, $t) = (1.0, 0.0);
                // SAFETY: the caller's contract (trait doc); α, β are live host values.
                unsafe {
                    blas::$syrk(
                        h,
                        UPPER_B,
                        blas::cublasOperation_t::CUBLAS_OP_T,
                        n,
                        k,
                        &one,
                        a,
                        lda,
                        &zero,
                        c,
                        ldc,
                    )
                }
            }
            unsafe fn copy(
                h: blas::cublasHandle_t,
                n: i32,
                x: *const $t,
                incx: i32,
                y: *mut $t,
                incy: i32,
            ) -> blas::cublasStatus_t {
                // SAFETY: the caller's contract (trait doc).
                unsafe { blas::$copy(h, n, x, incx, y, incy) }
            }
            unsafe fn potrf_buffer_size(
                h: solver::cusolverDnHandle_t,
                n: i32,
                a: *mut $t,
                lda: i32,
                lwork: *mut i32,
            ) -> solver::cusolverStatus_t {
                // SAFETY: the caller's contract (trait doc).
                unsafe { solver::$bufsize(h, UPPER_S, n, a, lda, lwork) }
            }
            unsafe fn potrf(
                h: solver::cusolverDnHandle_t,
                n: i32,
                a: *mut $t,
                lda: i32,
                work: *mut $t,
                lwork: i32,
                info: *mut i32,
            ) -> solver::cusolverStatus_t {
                // SAFETY: the caller's contract (trait doc).
                unsafe { solver::$potrf(h, UPPER_S, n, a, lda, work, lwork, info) }
            }
        }
    };
}

gram_scalar!(
    f32,
    cublasSsyrk_v2,
    cublasScopy_v2,
    cusolverDnSpotrf_bufferSize,
    cusolverDnSpotrf
);
gram_scalar!(
    f64,
    cublasDsyrk_v2,
    cublasDcopy_v2,
    cusolverDnDpotrf_bufferSize,
    cusolverDnDpotrf
);

/// max|r_jj| / min|r_jj| of the n×n factor (its diagonal read back: n values), `None`
/// when a diagonal entry is zero or not finite.
fn diag_ratio<T: GramScalar>(gpu: &Gpu, g: &DevMat<T>) -> Result<Option<f64>> {
    let n = g.ncols();
    let (ni, step) = (int("n", n)?, int("ld of G", g.ld() + 1)?);
    let st = gpu.stream().clone();
    let mut d = st.alloc_zeros::<T>(n.max(1)).map_err(alloc_err(
        "diagonal of R̃",
        n.max(1) * std::mem::size_of::<T>(),
    ))?;
    {
        let (pg, _gg) = g.buf().device_ptr(&st);
        let (pd, _gd) = d.device_ptr_mut(&st);
        gpu.count_launch();
        // SAFETY: xCOPY: the n diagonal entries of the n×n G lie at stride ld + 1 inside
        // its buffer; d holds n elements (stride 1), a different allocation; handle
        // bound to the stream.
        let s = unsafe {
            T::copy(
                *gpu.blas().handle(),
                ni,
                pg as *const T,
                step,
                pd as *mut T,
                1,
            )
        };
        s.result()
            .map_err(|e| Error::Cublas(format!("{OP}: copy of the diagonal: {e}")))?;
    }
    gpu.count_launch();
    let h = st
        .clone_dtoh(&d)
        .map_err(driver_err("reading the diagonal of R̃"))?;
    st.synchronize()
        .map_err(driver_err("reading the diagonal of R̃"))?;
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for &x in &h[..n] {
        let a = x.to_f64().abs();
        if a == 0.0 || !a.is_finite() {
            return Ok(None);
        }
        lo = lo.min(a);
        hi = hi.max(a);
    }
    Ok(Some(hi / lo))
}

fn int(what: &'static str, x: usize) -> Result<i32> {
    i32::try_from(x).map_err(|_| Error::InvalidParam {
        op: OP,
        what,
        why: format!("{x} exceeds the 32-bit int of cuBLAS/cuSOLVER"),
    })
}

/// The upper-triangular factor R̃ with R̃ᵀR̃ = fl(fᵀf) (n×n, in the upper triangle of the
/// returned matrix; its strict lower triangle is not referenced) for the m×n `f`, in
/// f's precision, or `None` when xPOTRF stops at a non-positive pivot (fᵀf not
/// positive definite in that precision: κ(f)² too large) or the factor's diagonal shows
/// κ(R̃)²·u > 1e-2 ([`KAPPA2_U_MAX`]). `f` is only read; the caller makes sure fᵀf
/// neither over- nor underflows. Waits for the stream (devInfo, diagonal).
///
/// # Errors
/// [`Error::InvalidParam`] (dimensions beyond int), [`Error::OutOfMemory`],
/// [`Error::Cublas`], [`Error::Cusolver`] (including a negative devInfo),
/// [`Error::Driver`].
pub(crate) fn gram_cholesky<T: GramScalar>(gpu: &Gpu, f: &DevMat<T>) -> Result<Option<DevMat<T>>> {
    let (m, n) = (f.nrows(), f.ncols());
    let (mi, ni) = (int("m", m)?, int("n", n)?);
    let ldf = int("ld of A", f.ld())?;
    let mut g = DevMat::<T>::zeros(gpu, n, n)?;
    let ldg = int("ld of G", g.ld())?;
    let st = gpu.stream().clone();
    {
        let (pf, _gf) = f.buf().device_ptr(&st);
        let (pg, _gg) = g.buf_mut().device_ptr_mut(&st);
        gpu.count_launch();
        // SAFETY: xSYRK with op T: A is m×n (ld ldf ≥ m) inside f's buffer, C is n×n (ld
        // ldg ≥ n) inside g's, a different allocation; the handle is in its default
        // host pointer mode (the only device-mode user, `refine::InnerCg::solve`,
        // restores it before returning) and bound to the stream.
        let s = unsafe {
            T::syrk(
                *gpu.blas().handle(),
                ni,
                mi,
                pf as *const T,
                ldf,
                pg as *mut T,
                ldg,
            )
        };
        s.result()
            .map_err(|e| Error::Cublas(format!("{OP}: syrk: {e}")))?;
    }
    let h = gpu.solver().cu();
    let mut lwork = 0i32;
    {
        let (pg, _gg) = g.buf_mut().device_ptr_mut(&st);
        // SAFETY: xPOTRF_bufferSize reads only the dimensions; G is n×n (ld ldg) inside
        // its buffer; `lwork` is a live host i32.
        let s = unsafe { T::potrf_buffer_size(h, ni, pg as *mut T, ldg, &mut lwork) };
        s.result()
            .map_err(|e| Error::Cusolver(format!("{OP}: potrf_bufferSize: {e}")))?;
    }
    let lw = usize::try_from(lwork).unwrap_or(0).max(1);
    let mut work = st
        .alloc_zeros::<T>(lw)
        .map_err(alloc_err("POTRF workspace", lw * std::mem::size_of::<T>()))?;
    let mut info = st
        .alloc_zeros::<i32>(1)
        .map_err(alloc_err("POTRF devInfo", 4))?;
    {
        let (pg, _gg) = g.buf_mut().device_ptr_mut(&st);
        let (pw, _gw) = work.device_ptr_mut(&st);
        let (pi, _gi) = info.device_ptr_mut(&st);
        gpu.count_launch();
        // SAFETY: xPOTRF contract: G n×n (ld ldg) upper triangle referenced, a workspace
        // of `lw` ≥ lwork elements as queried, devInfo one device i32, all distinct
        // allocations; the cuSOLVER handle is bound to the stream.
        let s = unsafe {
            T::potrf(
                h,
                ni,
                pg as *mut T,
                ldg,
                pw as *mut T,
                lwork.max(1),
                pi as *mut i32,
            )
        };
        s.result()
            .map_err(|e| Error::Cusolver(format!("{OP}: potrf: {e}")))?;
    }
    gpu.count_launch();
    let v = st
        .clone_dtoh(&info)
        .map_err(driver_err("reading POTRF devInfo"))?;
    st.synchronize()
        .map_err(driver_err("reading POTRF devInfo"))?;
    match v.first() {
        Some(0) => {
            let u = T::UNIT_ROUNDOFF;
            if diag_ratio(gpu, &g)?.is_some_and(|q| q * q * u <= KAPPA2_U_MAX) {
                Ok(Some(g))
            } else {
                Ok(None)
            }
        }
        Some(&i) if i > 0 => Ok(None),
        Some(&i) => Err(Error::Cusolver(format!("{OP}: potrf devInfo = {i}"))),
        None => Err(Error::Cusolver(format!("{OP}: no devInfo"))),
    }
}
