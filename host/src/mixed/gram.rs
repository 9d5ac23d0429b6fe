//! The Gram-Cholesky preconditioner of the GPU least-squares solver (spec §4.2, §3.7;
//! issue 5): R̃ from the f32 Cholesky factorisation of the f32 Gram matrix G = fᵀf of the
//! scaled f32 copy f of A, by cuBLAS SSYRK (mn² flops, plain f32) and cuSOLVER SPOTRF
//! (n³/3 flops). R̃ᵀR̃ = AᵀA + E with ‖E‖ ≲ c·n·u_f32·‖A‖², so the preconditioned normal
//! operator R̃⁻ᵀAᵀAR̃⁻¹ is within about c·n·u_f32·κ(A)² of the identity: as good as the
//! mixed QR's for κ(A) up to ~1e2–1e3, useless (or SPOTRF fails: G not positive
//! definite in f32) beyond. The solver therefore tries it first and falls back to the QR
//! (module doc of `gpu.rs`); the refinement in f64 fixes the accuracy either way.

use cudarc::cublas::sys as blas;
use cudarc::cusolver::sys as solver;
use cudarc::driver::{DevicePtr, DevicePtrMut};

use crate::error::{Error, Result};
use crate::gpu::{alloc_err, driver_err, DevMat, Gpu};

const OP: &str = "lstsq_mixed_gpu Gram-Cholesky";

/// Unit roundoff of f32.
const U_F32: f64 = 1.0 / 16_777_216.0;

/// Largest (max|r̃_jj| / min|r̃_jj|)²·u_f32 for which the factor is used. The diagonal
/// ratio is a lower bound of κ(R̃) = κ(A) (to first order), so this rejects only
/// factors that are certainly poor: where fl(fᵀf) is numerically indefinite but SPOTRF
/// still succeeded, its smallest pivots are ~√u_f32·‖A‖ and the ratio² · u_f32 is of
/// order one. Borderline factors that pass are caught by the inner CG's step cap.
const KAPPA2_U_MAX: f64 = 1e-2;

/// max|r_jj| / min|r_jj| of the n×n factor (its diagonal read back: n f32), `None` when
/// a diagonal entry is zero or not finite.
fn diag_ratio(gpu: &Gpu, g: &DevMat<f32>) -> Result<Option<f64>> {
    let n = g.ncols();
    let (ni, step) = (int("n", n)?, int("ld of G", g.ld() + 1)?);
    let st = gpu.stream().clone();
    let mut d = st
        .alloc_zeros::<f32>(n.max(1))
        .map_err(alloc_err("diagonal of R̃", n.max(1) * 4))?;
    {
        let (pg, _gg) = g.buf().device_ptr(&st);
        let (pd, _gd) = d.device_ptr_mut(&st);
        gpu.count_launch();
        // SAFETY: cublasScopy_v2: the n diagonal entries of the n×n G lie at stride
        // ld + 1 inside its buffer; d holds n f32 (stride 1), a different allocation;
        // SCOPY has no scalar arguments; handle bound to the stream.
        let s = unsafe {
            blas::cublasScopy_v2(
                *gpu.blas().handle(),
                ni,
                pg as *const f32,
                step,
                pd as *mut f32,
                1,
            )
        };
        s.result()
            .map_err(|e| Error::Cublas(format!("{OP}: scopy: {e}")))?;
    }
    gpu.count_launch();
    let h = st
        .clone_dtoh(&d)
        .map_err(driver_err("reading the diagonal of R̃"))?;
    st.synchronize()
        .map_err(driver_err("reading the diagonal of R̃"))?;
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for &x in &h[..n] {
        let a = (x as f64).abs();
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

/// The upper-triangular f32 factor R̃ with R̃ᵀR̃ = fl(fᵀf) (n×n, in the upper triangle of
/// the returned matrix; its strict lower triangle is not referenced) for the m×n f32 `f`,
/// or `None` when SPOTRF stops at a non-positive pivot (fᵀf not positive definite in
/// f32: κ(f)² too large for f32) or the factor's diagonal shows κ(R̃)²·u_f32 > 1e-2
/// ([`KAPPA2_U_MAX`]). `f` is only read. Waits for the stream (devInfo, diagonal).
///
/// # Errors
/// [`Error::InvalidParam`] (dimensions beyond int), [`Error::OutOfMemory`],
/// [`Error::Cublas`], [`Error::Cusolver`] (including a negative devInfo),
/// [`Error::Driver`].
pub(super) fn gram_cholesky(gpu: &Gpu, f: &DevMat<f32>) -> Result<Option<DevMat<f32>>> {
    let (m, n) = (f.nrows(), f.ncols());
    let (mi, ni) = (int("m", m)?, int("n", n)?);
    let ldf = int("ld of A", f.ld())?;
    let mut g = DevMat::<f32>::zeros(gpu, n, n)?;
    let ldg = int("ld of G", g.ld())?;
    let st = gpu.stream().clone();
    {
        let (pf, _gf) = f.buf().device_ptr(&st);
        let (pg, _gg) = g.buf_mut().device_ptr_mut(&st);
        let (one, zero) = (1.0f32, 0.0f32);
        gpu.count_launch();
        // SAFETY: cublasSsyrk_v2 with op T: A is m×n (ld ldf ≥ m) inside f's buffer, C is
        // n×n (ld ldg ≥ n) inside g's, a different allocation; α, β are live host f32
        // (the handle is in its default host pointer mode: the only device-mode user,
        // `refine::InnerCg::solve`, restores it before returning); handle bound to the
        // stream.
        let s = unsafe {
            blas::cublasSsyrk_v2(
                *gpu.blas().handle(),
                blas::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER,
                blas::cublasOperation_t::CUBLAS_OP_T,
                ni,
                mi,
                &one,
                pf as *const f32,
                ldf,
                &zero,
                pg as *mut f32,
                ldg,
            )
        };
        s.result()
            .map_err(|e| Error::Cublas(format!("{OP}: ssyrk: {e}")))?;
    }
    let h = gpu.solver().cu();
    let up = solver::cublasFillMode_t::CUBLAS_FILL_MODE_UPPER;
    let mut lwork = 0i32;
    {
        let (pg, _gg) = g.buf_mut().device_ptr_mut(&st);
        // SAFETY: cusolverDnSpotrf_bufferSize reads only the dimensions; G is n×n (ld
        // ldg) inside its buffer; `lwork` is a live host i32.
        let s = unsafe {
            solver::cusolverDnSpotrf_bufferSize(h, up, ni, pg as *mut f32, ldg, &mut lwork)
        };
        s.result()
            .map_err(|e| Error::Cusolver(format!("{OP}: spotrf_bufferSize: {e}")))?;
    }
    let lw = usize::try_from(lwork).unwrap_or(0).max(1);
    let mut work = st
        .alloc_zeros::<f32>(lw)
        .map_err(alloc_err("SPOTRF workspace", lw * 4))?;
    let mut info = st
        .alloc_zeros::<i32>(1)
        .map_err(alloc_err("SPOTRF devInfo", 4))?;
    {
        let (pg, _gg) = g.buf_mut().device_ptr_mut(&st);
        let (pw, _gw) = work.device_ptr_mut(&st);
        let (pi, _gi) = info.device_ptr_mut(&st);
        gpu.count_launch();
        // SAFETY: cusolverDnSpotrf contract: G n×n (ld ldg) upper triangle referenced, a
        // workspace of `lw` ≥ lwork f32 as queried, devInfo one device i32, all distinct
        // allocations; the cuSOLVER handle is bound to the stream.
        let s = unsafe {
            solver::cusolverDnSpotrf(
                h,
                up,
                ni,
                pg as *mut f32,
                ldg,
                pw as *mut f32,
                lwork.max(1),
                pi as *mut i32,
            )
        };
        s.result()
            .map_err(|e| Error::Cusolver(format!("{OP}: spotrf: {e}")))?;
    }
    gpu.count_launch();
    let v = st
        .clone_dtoh(&info)
        .map_err(driver_err("reading SPOTRF devInfo"))?;
    st.synchronize()
        .map_err(driver_err("reading SPOTRF devInfo"))?;
    match v.first() {
        Some(0) => {
            if diag_ratio(gpu, &g)?.is_some_and(|q| q * q * U_F32 <= KAPPA2_U_MAX) {
                Ok(Some(g))
            } else {
                Ok(None)
            }
        }
        Some(&i) if i > 0 => Ok(None),
        Some(&i) => Err(Error::Cusolver(format!("{OP}: spotrf devInfo = {i}"))),
        None => Err(Error::Cusolver(format!("{OP}: no devInfo"))),
    }
}
