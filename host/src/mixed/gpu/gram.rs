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
//!   factor — it is the classical preconditioner of the semi-normal equations (docs/algorithms.md),
//!   used because on GPUs with
//!   FP64 tensor cores (H100: DGEMM at the rate of plain f32 FMA) DSYRK + DPOTRF cost a
//!   small fraction of any QR, and the f32 factors need κ(A)²·u_f32 ≪ 1 (Gram) or pay
//!   the QR's panel chain. The refinement and its stopping rules are the same for
//!   every factor.
//!
//! The solver tries them in that order and falls back to the QR (module doc of
//! `mixed/gpu/mod.rs`); the refinement in f64 fixes the accuracy either way.
//!
//! [`MixedFactor::GramCholesky`]: crate::mixed::MixedFactor::GramCholesky
//! [`MixedFactor::GramCholeskyF64`]: crate::mixed::MixedFactor::GramCholeskyF64

use cudarc::driver::CudaSlice;

use crate::base::error::Result;
use crate::gpu::ffi::driver::StreamAlloc;
use crate::gpu::runtime::matrix::DevMat;
use crate::gpu::runtime::{alloc_err, driver_err, Gpu, GpuScalar};

/// Largest (max|r̃_jj| / min|r̃_jj|)²·u for which the factor is used (u the unit
/// roundoff of the factor's precision). The diagonal ratio is a lower bound of κ(R̃) = κ(A) (to first order), so
/// this rejects only factors that are certainly poor: where fl(fᵀf) is numerically
/// indefinite but xPOTRF still succeeded, its smallest pivots are ~√u·‖A‖ and the
/// ratio² · u is of order one. Borderline factors that pass are caught by the inner
/// CG's step cap.
const KAPPA2_U_MAX: f64 = 1e-2;

/// max|r_jj| / min|r_jj| of the n×n factor (its diagonal read back: n values), `None`
/// when a diagonal entry is zero or not finite.
fn diag_ratio<T: GpuScalar>(gpu: &Gpu, g: &DevMat<T>) -> Result<Option<f64>> {
    let n = g.ncols();
    let st = gpu.stream().clone();
    let mut d: CudaSlice<T> = st.alloc_zeroed::<T>(n.max(1)).map_err(alloc_err(
        "diagonal of R̃",
        n.max(1) * std::mem::size_of::<T>(),
    ))?;
    gpu.copy_diagonal(&g.view(), &mut d.slice_mut(..))?;
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

/// The upper-triangular factor R̃ with R̃ᵀR̃ = fl(fᵀf) (n×n, in the upper triangle of the
/// returned matrix; its strict lower triangle is not referenced) for the m×n `f`, in
/// f's precision, or `None` when xPOTRF stops at a non-positive pivot (fᵀf not
/// positive definite in that precision: κ(f)² too large) or the factor's diagonal shows
/// κ(R̃)²·u > 1e-2 ([`KAPPA2_U_MAX`]). `f` is only read; the caller makes sure fᵀf
/// neither over- nor underflows. Waits for the stream (devInfo, diagonal).
///
/// # Errors
/// [`Error::InvalidParam`](crate::Error::InvalidParam) (dimensions beyond int),
/// [`Error::OutOfMemory`](crate::Error::OutOfMemory), [`Error::Cublas`](crate::Error::Cublas),
/// [`Error::Cusolver`](crate::Error::Cusolver) (including a negative devInfo),
/// [`Error::Driver`](crate::Error::Driver).
pub(crate) fn gram_cholesky<T: GpuScalar>(gpu: &Gpu, f: &DevMat<T>) -> Result<Option<DevMat<T>>> {
    let n = f.ncols();
    let mut g = DevMat::<T>::zeros(gpu, n, n)?;
    // The handle is in its default host pointer mode here (the only device-mode user, the
    // inner CG's solve, restores it before returning).
    gpu.syrk_upper_t(&f.view(), &mut g.view_mut())?;
    if gpu.potrf_upper(&mut g.view_mut())? > 0 {
        return Ok(None);
    }
    let u = T::UNIT_ROUNDOFF;
    if diag_ratio(gpu, &g)?.is_some_and(|q| q * q * u <= KAPPA2_U_MAX) {
        Ok(Some(g))
    } else {
        Ok(None)
    }
}
