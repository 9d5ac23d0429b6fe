//! The GPU half of the mixed-precision QR and refined least squares (spec §4.2, seed S3;
//! issue 5), mirroring the CPU emulation in `cpu.rs`.
//!
//! * **Factorisation** ([`mixed_qr_gpu`]): an f32 copy of A, scaled by a power of two
//!   (exact) so that ‖A‖_F ∈ [2¹³, 2¹⁴), is factored by the device blocked Householder QR
//!   (`gpu::householder::blocked_qr`: panels, reflectors and T in f32) while a
//!   [`GemmPrecisionGuard`](crate::gpu::blas::GemmPrecisionGuard) makes every f32 GEMM
//!   on that [`Gpu`] a tensor-core `cublasGemmEx` with inputs rounded to bf16, f16 or
//!   tf32 and f32 accumulation (or plain SGEMM for [`GemmPrecision::F32`]). The guard
//!   is dropped when the factorisation returns, so it applies to the trailing-update
//!   GEMMs of this factorisation and to any other f32 GEMM issued on the same `Gpu`
//!   meanwhile (f64 GEMMs are never affected).
//! * **Why the scaling makes f16 safe.** cuBLAS rounds f32 operands to f16 without any
//!   scaling, so entries above 65504 would become ∞. Orthogonal transformations keep
//!   column norms, so every entry of every trailing matrix C is at most ‖A‖_F ≤ 2¹⁴, and
//!   W = VᵀC has entries ≤ ‖v‖·‖c‖ ≤ √2·2¹⁴ (‖v‖² = 2/τ ≤ 2 for LAPACK reflectors with
//!   τ ∈ [1, 2]) — inside f16's range. Entries far below ‖A‖_F fall into f16's subnormal
//!   range, where the absolute error (≤ 2⁻²⁵ in scaled units, 2⁻³⁹‖A‖_F) is far below
//!   u_f16·‖A‖_F. One global exact scaling thus replaces the per-operand scaling the CPU
//!   emulation does; bf16 and tf32 have f32's range and need none, but get the same
//!   scaling (it is exact and keeps f64 data beyond f32's range representable).
//! * **Refinement** ([`lstsq_mixed_gpu`]): exactly the CPU algorithm — iterative
//!   refinement whose correction AᵀAδ = Aᵀr is solved by conjugate gradients
//!   preconditioned with R̃ᵀR̃ (R̃ widened to f64 and unscaled), the residual r = b − Ax,
//!   Aᵀr and AᵀA·p applied in f64 by cuBLAS DGEMV, the preconditioner by two cuBLAS
//!   DTRSV, scalars by DDOT/DNRM2 (each waits for the stream: three waits per CG step).
//!   Same stopping rules, same best-iterate bookkeeping, same
//!   [`Error::NotConverged`] when the backward error misses the tolerance.
//!
//! **Measured** (H200, docs/performance.md; tests/gpu_mixed.rs): at κ = 1e2–1e6 all four
//! precisions reach η ≈ 2–4e-19 in 2 outer steps, at or below the f64 cuSOLVER solution's
//! η. Speed depends on u_low·κ: with u_low·κ ≳ 1 (bf16, f16, tf32 at κ = 1e6) the inner
//! CG needs hundreds to thousands of steps, each a pass over A in f64 (0.7–4.8 s at
//! 8192×1024 against 11 ms for cuSOLVER's f64 solve), while the f32 factor (u·κ ≈ 0.06)
//! converges as fast as at κ = 1e2. Even then this build is 0.4–0.8× the f64 cuSOLVER
//! solve (the split between the f32 factorisation and the refinement, whose CG steps
//! wait on the host three times each, was not profiled): the issue's 2× is not met.
//!
//! # Examples
//! ```no_run
//! use cuqr::gpu::{DevMat, Gpu};
//! use cuqr::mixed::{lstsq_mixed_gpu, GemmPrecision, MixedParams};
//! use cuqr::Mat;
//! let gpu = Gpu::new(0)?;
//! let (m, n) = (3000, 500);
//! let a = Mat::<f64>::from_fn(m, n, |i, j| ((i * 37 + j * 11) % 17) as f64 / 7.0 - 1.0
//!     + if i == j { 3.0 } else { 0.0 });
//! let b = Mat::<f64>::from_fn(m, 1, |i, _| (i as f64 * 0.37).sin());
//! let (da, db) = (DevMat::from_host(&gpu, a.as_ref())?, DevMat::from_host(&gpu, b.as_ref())?);
//! let params = MixedParams { precision: GemmPrecision::Bf16, ..MixedParams::default() };
//! let sol = lstsq_mixed_gpu(&gpu, &da, &db, &params)?;
//! println!("{} steps, backward error {:e}", sol.iterations, sol.backward_error);
//! let x = sol.x.to_host(&gpu)?; // n×1
//! # Ok::<(), cuqr::Error>(())
//! ```

use super::cpu::{check_a, INNER_EPS};
use super::{GemmPrecision, MixedParams, MixedSolution};
use crate::cpu::wy::resolve_block_size;
use crate::error::{Error, Result};
use crate::gpu::householder::{blocked_qr, check_rank_dev};
use crate::gpu::{DevMat, DevVec, Diag, Gpu, GpuScalar, Op, Uplo};
use crate::mat::{Mat, MatRef};

const OP_QR: &str = "mixed_qr_gpu";
const OP_LS: &str = "lstsq_mixed_gpu";
/// ‖A‖_F of the scaled f32 copy lies in [2^SCALE_EXP, 2^(SCALE_EXP+1)).
const SCALE_EXP: i32 = 13;

/// The mixed-precision QR of A on the device (spec §4.2): the factored f32 copy (R in
/// its upper n×n triangle, exact zeros below) and the exact power-of-two scaling.
#[derive(Debug)]
pub struct MixedQrGpu {
    f: DevMat<f32>,
    n: usize,
    /// The f32 copy is 2^shift·A.
    shift: i32,
    precision: GemmPrecision,
}

impl MixedQrGpu {
    /// The GEMM precision it was computed with.
    pub fn precision(&self) -> GemmPrecision {
        self.precision
    }

    /// R̃ (n×n, upper triangular) in f64 on the device, unscaled (exact: widening and
    /// a power of two).
    ///
    /// # Errors
    /// [`Error::OutOfMemory`], [`Error::Driver`].
    pub fn r_dev(&self, gpu: &Gpu) -> Result<DevMat<f64>> {
        let n = self.n;
        let mut r = DevMat::<f64>::zeros(gpu, n, n)?;
        gpu.convert_from_f32(
            &self.f.block(0, 0, n, n),
            pow2(-self.shift),
            &mut r.view_mut(),
        )?;
        Ok(r)
    }

    /// R̃ on the host (n×n, upper triangular, f64, unscaled).
    ///
    /// # Errors
    /// As [`MixedQrGpu::r_dev`].
    pub fn r(&self, gpu: &Gpu) -> Result<Mat<f64>> {
        self.r_dev(gpu)?.to_host(gpu)
    }
}

fn pow2(e: i32) -> f64 {
    2f64.powi(e)
}

/// ‖x‖_F of an m×n device matrix by downloading it, after checking it is finite
/// (the rare path: data whose f32 copy over- or underflows, or that is not finite).
fn host_norm<T: GpuScalar>(
    gpu: &Gpu,
    op: &'static str,
    what: &'static str,
    a: &DevMat<T>,
) -> Result<f64> {
    let h = a.to_host(gpu)?;
    if let Some((row, col)) = h.as_ref().first_non_finite() {
        return Err(Error::NonFinite { op, what, row, col });
    }
    Ok(h.as_ref().norm_fro())
}

/// Shape checks of A as the CPU side makes them (without the finiteness check, which
/// needs the data).
fn check_dims(op: &'static str, m: usize, n: usize) -> Result<()> {
    if m == 0 || n == 0 {
        let what = if m == 0 { "rows of A" } else { "columns of A" };
        return Err(Error::Shape {
            op,
            what,
            got: 0,
            expected: 1,
        });
    }
    if m < n {
        return Err(Error::Underdetermined { op, m, n });
    }
    Ok(())
}

/// Mixed-precision blocked Householder QR of A (m×n, m ≥ n, f32 or f64 data) on the
/// device, spec §4.2 / seed S3 (module doc): returns the factor and ‖A‖_F (computed from
/// the f32 copy, relative accuracy ~u_f32, or exactly in f64 on the rare path).
fn factor<T: GpuScalar>(
    gpu: &Gpu,
    op: &'static str,
    a: &DevMat<T>,
    params: &MixedParams,
) -> Result<(MixedQrGpu, f64)> {
    let (m, n) = (a.nrows(), a.ncols());
    check_dims(op, m, n)?;
    let nb = resolve_block_size(op, params.block_size, n)?;
    // Fresh zeros: the padding of the copy is zero, so NRM2 over the whole buffer is ‖·‖_F.
    let mut f = DevMat::<f32>::zeros(gpu, m, n)?;
    gpu.convert_to_f32(&a.view(), T::ONE, &mut f.view_mut())?;
    let fro32 = gpu.nrm2(&f.buf().slice(..))?;
    let (anorm, shift) = if fro32.is_finite() && fro32 >= pow2(-100) {
        let shift = SCALE_EXP - fro32.log2().floor() as i32;
        gpu.scal(pow2(shift) as f32, &mut f.buf_mut().slice_mut(..))?;
        (fro32, shift)
    } else {
        // Not finite, or beyond/below what f32 holds comfortably: exact norm on the host.
        let fro = host_norm(gpu, op, "A", a)?;
        let shift = if fro > 0.0 {
            SCALE_EXP - fro.log2().floor() as i32
        } else {
            0
        };
        gpu.convert_to_f32(&a.view(), T::from_f64(pow2(shift)), &mut f.view_mut())?;
        (fro, shift)
    };
    {
        let _tensor = gpu.gemm_precision_scope(params.precision);
        blocked_qr(gpu, &mut f, 0..m, 0..n, None, None, nb)?;
    }
    // A zero (or non-finite) diagonal entry of R̃: the preconditioner does not exist.
    check_rank_dev(gpu, &f, n, 0.0)?;
    Ok((
        MixedQrGpu {
            f,
            n,
            shift,
            precision: params.precision,
        },
        anorm,
    ))
}

/// Mixed-precision blocked Householder QR of A (m×n, m ≥ n; f32 or f64 data) on the
/// GPU (spec §4.2, seed S3; module doc): f32 panels, reflectors and T, trailing-update
/// GEMMs on tensor cores with inputs rounded to `params.precision`, f32 accumulation.
/// The device counterpart of [`mixed_qr_cpu`](super::mixed_qr_cpu) (R only; Q is not
/// formed).
///
/// # Errors
/// [`Error::Shape`] (empty A), [`Error::Underdetermined`] (m < n), [`Error::NonFinite`],
/// [`Error::InvalidParam`] (block size 0 or a dimension beyond cuBLAS's int),
/// [`Error::RankDeficient`] (an exactly zero R̃_jj), [`Error::OutOfMemory`],
/// [`Error::Driver`], [`Error::Cublas`].
pub fn mixed_qr_gpu<T: GpuScalar>(
    gpu: &Gpu,
    a: &DevMat<T>,
    params: &MixedParams,
) -> Result<MixedQrGpu> {
    factor(gpu, OP_QR, a, params).map(|(q, _)| q)
}

/// A refined least-squares solution on the device (spec §4.2, §3.7).
#[derive(Debug)]
pub struct MixedSolutionGpu {
    /// x (n×q, f64), minimising ‖Ax − b‖₂ column by column.
    pub x: DevMat<f64>,
    /// Refinement steps taken (the largest over the columns of b).
    pub iterations: usize,
    /// Normwise backward error η (as [`ls_backward_error`](super::ls_backward_error),
    /// with ‖A‖_F from the f32 copy) of the returned x, largest over the columns of b.
    pub backward_error: f64,
}

/// Device vectors of the refinement (f64).
struct Work {
    r: DevVec<f64>,
    ap: DevVec<f64>,
    h: DevVec<f64>,
    delta: DevVec<f64>,
    rho: DevVec<f64>,
    p: DevVec<f64>,
    z: DevVec<f64>,
    w: DevVec<f64>,
    zero: DevVec<f64>,
}

impl Work {
    fn new(gpu: &Gpu, m: usize, n: usize) -> Result<Self> {
        Ok(Self {
            r: DevVec::zeros(gpu, m)?,
            ap: DevVec::zeros(gpu, m)?,
            h: DevVec::zeros(gpu, n)?,
            delta: DevVec::zeros(gpu, n)?,
            rho: DevVec::zeros(gpu, n)?,
            p: DevVec::zeros(gpu, n)?,
            z: DevVec::zeros(gpu, n)?,
            w: DevVec::zeros(gpu, n)?,
            zero: DevVec::zeros(gpu, n)?,
        })
    }
}

/// r = b − Ax, h = Aᵀr (left in `ws.h` for the next correction), and the backward error
/// η = ‖Aᵀr‖₂ / (‖A‖_F(‖A‖_F‖x‖₂ + ‖b‖₂)), all in f64.
fn eta_at(
    gpu: &Gpu,
    a: &DevMat<f64>,
    b: &cudarc::driver::CudaView<'_, f64>,
    x: &cudarc::driver::CudaView<'_, f64>,
    anorm: f64,
    bnorm: f64,
    ws: &mut Work,
) -> Result<f64> {
    gpu.copy(b, &mut ws.r.view_mut())?;
    gpu.gemv(Op::N, -1.0, &a.view(), x, 1.0, &mut ws.r.view_mut())?;
    gpu.gemv(
        Op::T,
        1.0,
        &a.view(),
        &ws.r.view(),
        0.0,
        &mut ws.h.view_mut(),
    )?;
    let nh = gpu.nrm2(&ws.h.view())?;
    let nx = gpu.nrm2(x)?;
    let den = anorm * (anorm * nx + bnorm);
    Ok(if den == 0.0 { 0.0 } else { nh / den })
}

/// z := (R̃ᵀR̃)⁻¹ z by two DTRSV.
fn precond(gpu: &Gpu, r: &DevMat<f64>, z: &mut DevVec<f64>) -> Result<()> {
    gpu.trsv(
        Uplo::Upper,
        Op::T,
        Diag::NonUnit,
        &r.view(),
        &mut z.view_mut(),
    )?;
    gpu.trsv(
        Uplo::Upper,
        Op::N,
        Diag::NonUnit,
        &r.view(),
        &mut z.view_mut(),
    )
}

/// Inner solve on the device, the CPU's `pcg_normal` step for step: δ ≈ (AᵀA)⁻¹h for
/// h = `ws.h`, CG on AᵀA preconditioned by R̃ᵀR̃, recurring the normal residual ρ; stops
/// when ‖ρ‖ ≤ `eps`·‖h‖, on breakdown, or after `max_it` steps. Result in `ws.delta`.
fn pcg_normal(
    gpu: &Gpu,
    a: &DevMat<f64>,
    r: &DevMat<f64>,
    ws: &mut Work,
    eps: f64,
    max_it: usize,
) -> Result<()> {
    let stop = eps * gpu.nrm2(&ws.h.view())?;
    gpu.copy(&ws.zero.view(), &mut ws.delta.view_mut())?;
    gpu.copy(&ws.h.view(), &mut ws.rho.view_mut())?;
    gpu.copy(&ws.rho.view(), &mut ws.z.view_mut())?;
    precond(gpu, r, &mut ws.z)?;
    gpu.copy(&ws.z.view(), &mut ws.p.view_mut())?;
    let mut gamma = gpu.dot(&ws.rho.view(), &ws.p.view())?;
    for _ in 0..max_it {
        if gpu.nrm2(&ws.rho.view())? <= stop || gamma.is_nan() || gamma <= 0.0 {
            break;
        }
        gpu.gemv(
            Op::N,
            1.0,
            &a.view(),
            &ws.p.view(),
            0.0,
            &mut ws.ap.view_mut(),
        )?;
        gpu.gemv(
            Op::T,
            1.0,
            &a.view(),
            &ws.ap.view(),
            0.0,
            &mut ws.w.view_mut(),
        )?;
        let pw = gpu.dot(&ws.p.view(), &ws.w.view())?;
        if !pw.is_finite() || pw <= 0.0 {
            break;
        }
        let alpha = gamma / pw;
        gpu.axpy(alpha, &ws.p.view(), &mut ws.delta.view_mut())?;
        gpu.axpy(-alpha, &ws.w.view(), &mut ws.rho.view_mut())?;
        gpu.copy(&ws.rho.view(), &mut ws.z.view_mut())?;
        precond(gpu, r, &mut ws.z)?;
        let gamma_new = gpu.dot(&ws.rho.view(), &ws.z.view())?;
        let beta = gamma_new / gamma;
        gpu.scal(beta, &mut ws.p.view_mut())?;
        gpu.axpy(1.0, &ws.z.view(), &mut ws.p.view_mut())?;
        gamma = gamma_new;
    }
    Ok(())
}

/// Least squares min ‖Ax − b‖₂ for f64 A (m×n, m ≥ n, full rank) and b (m×q), device
/// resident, through the tensor-core mixed-precision QR of an f32 copy of A
/// ([`mixed_qr_gpu`]) and refinement in f64 to f64's accuracy — the GPU counterpart of
/// [`lstsq_mixed_cpu`](super::lstsq_mixed_cpu), same algorithm and stopping rules
/// (spec §4.2; module doc): x₀ = 0, then per step δ from R̃ᵀR̃-preconditioned CG on
/// AᵀAδ = Aᵀr and x += δ; it stops when η is below u/10, after two steps that do not
/// halve it, or after `params.max_iterations` steps, and returns the best iterate only
/// if its η ≤ `params.tol` (default 10·m·u, u = 2⁻⁵³). A and b are not modified.
///
/// # Errors
/// As [`mixed_qr_gpu`]; [`Error::Shape`] when b's rows differ from A's or b is empty;
/// [`Error::NonFinite`] for b; [`Error::InvalidParam`] for `max_iterations = 0` or a
/// bad `tol`; [`Error::NotConverged`] (steps taken, backward error reached) when the
/// tolerance is missed (e.g. κ(A) ≈ 1e10 with bf16 GEMMs).
pub fn lstsq_mixed_gpu(
    gpu: &Gpu,
    a: &DevMat<f64>,
    b: &DevMat<f64>,
    params: &MixedParams,
) -> Result<MixedSolutionGpu> {
    let (m, n, nrhs) = (a.nrows(), a.ncols(), b.ncols());
    check_dims(OP_LS, m, n)?;
    let tol = check_ls_params(m, b.nrows(), nrhs, params)?;
    let mut bnorms = Vec::with_capacity(nrhs);
    for c in 0..nrhs {
        let nb = gpu.nrm2(&b.col(c, 0..m))?;
        if !nb.is_finite() {
            // Locates a NaN/∞ entry; if every entry is finite the norm itself overflows.
            host_norm(gpu, OP_LS, "b", b)?;
            return Err(Error::InvalidParam {
                op: OP_LS,
                what: "b",
                why: format!("‖b‖₂ of column {c} overflows f64"),
            });
        }
        bnorms.push(nb);
    }
    let (qr, anorm) = factor(gpu, OP_LS, a, params)?;
    let r = qr.r_dev(gpu)?;
    drop(qr);
    let u = f64::EPSILON / 2.0;
    let max_inner = 10 * n + 50;
    let mut ws = Work::new(gpu, m, n)?;
    let mut x = DevMat::<f64>::zeros(gpu, n, nrhs)?;
    let mut xc = DevVec::<f64>::zeros(gpu, n)?;
    let mut best = DevVec::<f64>::zeros(gpu, n)?;
    let (mut iterations, mut worst) = (0usize, 0.0f64);
    for (col, &bnorm) in bnorms.iter().enumerate() {
        let bc = b.col(col, 0..m);
        gpu.copy(&ws.zero.view(), &mut xc.view_mut())?;
        // h = Aᵀb at x₀ = 0.
        eta_at(gpu, a, &bc, &xc.view(), anorm, bnorm, &mut ws)?;
        let mut best_eta = f64::INFINITY;
        let (mut it, mut idle) = (0, 0);
        while it < params.max_iterations {
            it += 1;
            pcg_normal(gpu, a, &r, &mut ws, INNER_EPS, max_inner)?;
            gpu.axpy(1.0, &ws.delta.view(), &mut xc.view_mut())?;
            let eta = eta_at(gpu, a, &bc, &xc.view(), anorm, bnorm, &mut ws)?;
            // Progress = at least halving the best backward error (as the CPU side).
            idle = if eta <= 0.5 * best_eta { 0 } else { idle + 1 };
            if eta < best_eta {
                gpu.copy(&xc.view(), &mut best.view_mut())?;
                best_eta = eta;
            }
            if best_eta <= 0.1 * u || idle >= 2 {
                break;
            }
        }
        if best_eta.is_nan() || best_eta > tol {
            return Err(Error::NotConverged {
                iterations: it,
                backward_error: best_eta,
            });
        }
        gpu.copy(&best.view(), &mut x.col_mut(col, 0..n))?;
        iterations = iterations.max(it);
        worst = worst.max(best_eta);
    }
    Ok(MixedSolutionGpu {
        x,
        iterations,
        backward_error: worst,
    })
}

/// Checks b's shape and the refinement options as the CPU side does; returns the
/// tolerance (default 10·m·u of f64).
fn check_ls_params(m: usize, b_rows: usize, nrhs: usize, params: &MixedParams) -> Result<f64> {
    if b_rows != m {
        return Err(Error::Shape {
            op: OP_LS,
            what: "rows of b",
            got: b_rows,
            expected: m,
        });
    }
    if nrhs == 0 {
        return Err(Error::Shape {
            op: OP_LS,
            what: "columns of b",
            got: 0,
            expected: 1,
        });
    }
    if params.max_iterations == 0 {
        return Err(Error::InvalidParam {
            op: OP_LS,
            what: "max_iterations",
            why: "must be at least 1".into(),
        });
    }
    match params.tol {
        None => Ok(10.0 * m as f64 * f64::EPSILON / 2.0),
        Some(t) if t.is_finite() && t > 0.0 => Ok(t),
        Some(t) => Err(Error::InvalidParam {
            op: OP_LS,
            what: "tol",
            why: format!("{t} is not a finite positive number"),
        }),
    }
}

/// Host convenience of [`lstsq_mixed_gpu`]: validates A and b on the host (as
/// [`lstsq_mixed_cpu`](super::lstsq_mixed_cpu) does, same errors), uploads them, solves
/// and downloads x.
///
/// # Errors
/// As [`lstsq_mixed_gpu`].
pub fn lstsq_mixed_gpu_host(
    gpu: &Gpu,
    a: MatRef<'_, f64>,
    b: MatRef<'_, f64>,
    params: &MixedParams,
) -> Result<MixedSolution<f64>> {
    check_a(OP_LS, a)?;
    check_ls_params(a.nrows(), b.nrows(), b.ncols(), params)?;
    if let Some((row, col)) = b.first_non_finite() {
        return Err(Error::NonFinite {
            op: OP_LS,
            what: "b",
            row,
            col,
        });
    }
    let da = DevMat::from_host(gpu, a)?;
    let db = DevMat::from_host(gpu, b)?;
    let sol = lstsq_mixed_gpu(gpu, &da, &db, params)?;
    Ok(MixedSolution {
        x: sol.x.to_host(gpu)?,
        iterations: sol.iterations,
        backward_error: sol.backward_error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ls_params_are_checked_like_the_cpu_side() {
        let p = MixedParams::default();
        assert!(matches!(
            check_ls_params(6, 5, 1, &p),
            Err(Error::Shape {
                what: "rows of b",
                ..
            })
        ));
        assert!(matches!(
            check_ls_params(6, 6, 0, &p),
            Err(Error::Shape {
                what: "columns of b",
                ..
            })
        ));
        let bad_it = MixedParams {
            max_iterations: 0,
            ..p
        };
        assert!(matches!(
            check_ls_params(6, 6, 1, &bad_it),
            Err(Error::InvalidParam { .. })
        ));
        for t in [-1.0, 0.0, f64::NAN, f64::INFINITY] {
            let bad = MixedParams { tol: Some(t), ..p };
            assert!(matches!(
                check_ls_params(6, 6, 1, &bad),
                Err(Error::InvalidParam { what: "tol", .. })
            ));
        }
        let tol = check_ls_params(100, 100, 2, &p).unwrap();
        assert_eq!(tol, 1000.0 * f64::EPSILON / 2.0);
        let given = MixedParams {
            tol: Some(1e-9),
            ..p
        };
        assert_eq!(check_ls_params(100, 100, 2, &given).unwrap(), 1e-9);
    }

    #[test]
    fn dims_are_checked_like_the_cpu_side() {
        assert!(matches!(
            check_dims(OP_LS, 0, 3),
            Err(Error::Shape {
                what: "rows of A",
                ..
            })
        ));
        assert!(matches!(
            check_dims(OP_LS, 3, 0),
            Err(Error::Shape {
                what: "columns of A",
                ..
            })
        ));
        assert!(matches!(
            check_dims(OP_LS, 3, 5),
            Err(Error::Underdetermined { m: 3, n: 5, .. })
        ));
        assert!(check_dims(OP_LS, 5, 5).is_ok());
    }
}
