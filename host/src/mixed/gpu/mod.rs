//! The GPU half of the mixed-precision QR and refined least squares
//! (docs/algorithms.md#mixed-precision), mirroring the CPU emulation in `cpu.rs`.
//!
//! * **Factorisation** ([`mixed_qr_gpu`]): an f32 copy of A, scaled by a power of two
//!   (exact) so that ‖A‖_F ∈ [2¹³, 2¹⁴), is factored by the device blocked Householder QR
//!   (`gpu::householder::blocked_qr`: panels, reflectors and T in f32) while a
//!   [`GemmPrecisionGuard`](crate::gpu::ffi::blas::GemmPrecisionGuard) makes every f32 GEMM
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
//! * **Refinement** ([`lstsq_mixed_gpu`]): the CPU algorithm — iterative refinement
//!   whose correction AᵀAδ = Aᵀr is solved by conjugate gradients preconditioned with
//!   R̃ᵀR̃ (R̃ widened to f64 and unscaled), the residual r = b − Ax, Aᵀr and AᵀA·p
//!   applied in f64 by cuBLAS DGEMV (r = b without a pass over A at x₀ = 0), the
//!   preconditioner by two cuBLAS DTRSV. The inner CG (`refine.rs`) keeps its scalars
//!   on the device (cuBLAS device pointer mode, divisions as 1×1 DTRSV) and reads three
//!   numbers back per step, once, for the CPU's stopping and breakdown rules (the
//!   earlier version waited for the stream three times per step). Same stopping rules,
//!   same best-iterate bookkeeping, same [`Error::NotConverged`] when the backward error
//!   misses the tolerance.
//! * **Preconditioner stages** ([`MixedRoute`](super::MixedRoute)): with the default
//!   route `Auto` R̃ is first the f32 Cholesky factor of the f32 Gram matrix of the
//!   copy (`gram.rs`: SSYRK + SPOTRF, good for κ(A)² · n · u_f32 ≲ 0.01); if SPOTRF
//!   fails, or the first inner CG does not converge within 12 steps, R̃ is the f64
//!   Cholesky factor of AᵀA (DSYRK + DPOTRF of A itself — an f64 factor, the
//!   preconditioner of the corrected semi-normal equations, good for
//!   κ(A)²·u_f64 ≲ 1e-3; on an H100 DSYRK runs on the FP64 tensor cores at the rate of
//!   SSYRK); if that fails in turn, the same f32 copy is factored by the mixed QR in
//!   `params.precision`; a tensor-core QR factor whose
//!   first inner CG does not converge within 30 steps (u_low·κ ≳ 1) is replaced by the
//!   f32 QR. Each switch restarts the solve from x₀ = 0;
//!   [`MixedSolutionGpu::factor`] says which R̃ was used and
//!   [`MixedSolutionGpu::inner_steps`] counts all CG steps. The route `Qr` skips the
//!   Gram stages, the route `GramF64` the f32 one.
//!
//! **Measured** (H100, `cuqr bench mixed`, docs/performance.md; host/tests/gpu_mixed.rs;
//! medians, speed-up over cuSOLVER's f64 `geqrf` + `ormqr` + `trsm` in the same run).
//! κ = 1e2: the default route refines from the f32 Gram-Cholesky factor, 2.8× at
//! 8192×1024, 4.6× at 16384×4096, 3.5× at 65536×2048. κ = 1e6: the f32 Gram factor is
//! rejected and the f64 one taken, 2.9× / 3.6× / 2.8× (the f32 QR route alone:
//! 1.0× / 1.7× / 1.3×, 80–87 % of it the factorisation's panel chain). The route
//! `GramF64` skips the rejected f32 stage and its slower CG: 4.4–7.2× at both κ. All
//! solutions have η within 10× of the f64 cuSOLVER solution's (most below it).
//!
//! # Examples
//! ```no_run
//! use cuqr::{DevMat, Gpu};
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

mod gram;
mod inner_cg;

use super::cpu::{check_a, INNER_EPS};
use super::{GemmPrecision, MixedFactor, MixedParams, MixedRoute, MixedSolution};
use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::cpu::wy::resolve_block_size;
use crate::gpu::algo::householder::blocked_qr;
use crate::gpu::algo::rank::check_rank_dev;
use crate::gpu::ffi::blas::Op;
use crate::gpu::runtime::matrix::{DevMat, DevVec};
use crate::gpu::runtime::timing::{EventTimer, PhaseClock};
use crate::gpu::runtime::{Gpu, GpuScalar};
use gram::gram_cholesky;
use inner_cg::InnerCg;

const OP_QR: &str = "mixed_qr_gpu";
const OP_LS: &str = "lstsq_mixed_gpu";
/// ‖A‖_F of the scaled f32 copy lies in [2^SCALE_EXP, 2^(SCALE_EXP+1)).
const SCALE_EXP: i32 = 13;

/// The mixed-precision QR of A on the device (docs/algorithms.md#mixed-precision): the factored f32
/// copy (R in its upper n×n triangle, exact zeros below) and the exact power-of-two scaling.
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

/// The f32 copy 2^shift·A of A (docs/algorithms.md#mixed-precision; module doc): ‖·‖_F ∈ [2¹³, 2¹⁴)
/// by an exact power-of-two scaling, and ‖A‖_F (from the copy, relative accuracy ~u_f32, or exactly
/// in f64 on the rare path).
struct F32Copy {
    f: DevMat<f32>,
    shift: i32,
    anorm: f64,
}

fn f32_copy<T: GpuScalar>(gpu: &Gpu, op: &'static str, a: &DevMat<T>) -> Result<F32Copy> {
    let (m, n) = (a.nrows(), a.ncols());
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
    Ok(F32Copy { f, shift, anorm })
}

/// The mixed-precision blocked Householder QR of an f32 copy (in place),
/// docs/algorithms.md#mixed-precision, with block size `nb` and the trailing GEMMs in `precision`.
fn qr_of_copy(gpu: &Gpu, c: F32Copy, nb: usize, precision: GemmPrecision) -> Result<MixedQrGpu> {
    let F32Copy { mut f, shift, .. } = c;
    let (m, n) = (f.nrows(), f.ncols());
    {
        let _tensor = gpu.gemm_precision_scope(precision);
        blocked_qr(gpu, &mut f, 0..m, 0..n, None, None, nb)?;
    }
    // A zero (or non-finite) diagonal entry of R̃: the preconditioner does not exist.
    check_rank_dev(gpu, &f, n, 0.0)?;
    Ok(MixedQrGpu {
        f,
        n,
        shift,
        precision,
    })
}

/// Mixed-precision blocked Householder QR of A (m×n, m ≥ n, f32 or f64 data) on the
/// device, docs/algorithms.md#mixed-precision (module doc): returns the factor and ‖A‖_F.
fn factor<T: GpuScalar>(
    gpu: &Gpu,
    op: &'static str,
    a: &DevMat<T>,
    params: &MixedParams,
) -> Result<(MixedQrGpu, f64)> {
    let (m, n) = (a.nrows(), a.ncols());
    check_dims(op, m, n)?;
    let nb = resolve_block_size(op, params.block_size, n)?;
    let c = f32_copy(gpu, op, a)?;
    let anorm = c.anorm;
    Ok((qr_of_copy(gpu, c, nb, params.precision)?, anorm))
}

/// Mixed-precision blocked Householder QR of A (m×n, m ≥ n; f32 or f64 data) on the
/// GPU (docs/algorithms.md#mixed-precision; module doc): f32 panels, reflectors and T,
/// trailing-update
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

/// A refined least-squares solution on the device (docs/algorithms.md#mixed-precision,
/// docs/algorithms.md#accuracy-measures).
#[derive(Debug)]
pub struct MixedSolutionGpu {
    /// x (n×q, f64), minimising ‖Ax − b‖₂ column by column.
    pub x: DevMat<f64>,
    /// Refinement steps taken (the largest over the columns of b).
    pub iterations: usize,
    /// Normwise backward error η (as [`ls_backward_error`](super::ls_backward_error),
    /// with ‖A‖_F from the f32 copy) of the returned x, largest over the columns of b.
    pub backward_error: f64,
    /// Inner CG steps, summed over refinement steps and columns (those of an abandoned
    /// tensor-core factor included).
    pub inner_steps: usize,
    /// The preconditioner factor the returned x was refined with (the stages are
    /// described at [`lstsq_mixed_gpu`]).
    pub factor: MixedFactor,
    /// Time split of the solve, only from [`lstsq_mixed_gpu_phases`].
    pub phases: Option<MixedPhases>,
}

/// Where the time of one [`lstsq_mixed_gpu_phases`] solve went, from CUDA events on the
/// solver's stream (milliseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MixedPhases {
    /// Factorisations: f32 copy, norm and scaling, blocked QR, rank check, R̃ in f64
    /// (both factorisations when the precision was switched).
    pub factor_ms: f64,
    /// Everything else: ‖b‖, the preconditioner set-up, inner CG, residuals and η.
    pub refine_ms: f64,
}

/// Inner CG steps a tensor-core factor gets in its first correction before the solver
/// re-factors in f32 (module doc of [`lstsq_mixed_gpu`]). With u_low·κ ≲ 0.1 CG needs
/// about 10 steps to reduce ‖ρ‖ by `INNER_EPS` = 1e-8; with u_low·κ ≫ 1 it needs
/// hundreds (H200, 8192×1024, κ = 1e6: 0.7 s with tf32 against a 25 ms solve with
/// f32), while a second factorisation costs about as much as 30 steps at n ≥ 1024.
const SWITCH_STEPS: usize = 30;

/// Inner CG steps the Gram-Cholesky factor gets in its first correction before the
/// solver moves to the QR: with c·n·u_f32·κ² ≲ 0.01 CG gains about two digits a step and
/// needs ≤ 5 steps for `INNER_EPS`; 12 steps without reaching it mean a poor factor.
const GRAM_STEPS: usize = 12;

/// r = b − Ax (skipped when x = 0: r = b), h = Aᵀr (left in `h` for the next
/// correction), and the backward error
/// η = ‖Aᵀr‖₂ / (‖A‖_F(‖A‖_F‖x‖₂ + ‖b‖₂)), all in f64 (host pointer mode: reads ‖h‖
/// and ‖x‖).
#[allow(clippy::too_many_arguments)]
fn eta_at(
    gpu: &Gpu,
    a: &DevMat<f64>,
    b: &cudarc::driver::CudaView<'_, f64>,
    x: &cudarc::driver::CudaView<'_, f64>,
    anorm: f64,
    bnorm: f64,
    r: &mut DevVec<f64>,
    h: &mut DevVec<f64>,
) -> Result<f64> {
    let nx = gpu.nrm2(x)?;
    if nx == 0.0 {
        // x = 0 (the start): r = b, no pass over A for it.
        gpu.gemv(Op::T, 1.0, &a.view(), b, 0.0, &mut h.view_mut())?;
    } else {
        gpu.copy(b, &mut r.view_mut())?;
        gpu.gemv(Op::N, -1.0, &a.view(), x, 1.0, &mut r.view_mut())?;
        gpu.gemv(Op::T, 1.0, &a.view(), &r.view(), 0.0, &mut h.view_mut())?;
    }
    let nh = gpu.nrm2(&h.view())?;
    let den = anorm * (anorm * nx + bnorm);
    Ok(if den == 0.0 { 0.0 } else { nh / den })
}

/// Timing events of [`lstsq_mixed_gpu_phases`]: the whole solve, and the phases that
/// factor A.
struct MixedClock {
    whole: EventTimer,
    factor: PhaseClock<1>,
}

impl MixedClock {
    fn new(gpu: &Gpu) -> Result<Self> {
        let whole = EventTimer::new(gpu)?;
        whole.start(gpu)?;
        Ok(Self {
            whole,
            factor: PhaseClock::new(),
        })
    }
    /// Times `f` as a factorisation phase.
    fn factor<R>(clock: &mut Option<Self>, gpu: &Gpu, f: impl FnOnce() -> Result<R>) -> Result<R> {
        PhaseClock::time(clock.as_mut().map(|c| &mut c.factor), gpu, 0, f)
    }
    fn finish(self, gpu: &Gpu) -> Result<MixedPhases> {
        let total = self.whole.stop(gpu)?;
        let [factor_ms] = self.factor.totals_ms()?;
        Ok(MixedPhases {
            factor_ms,
            refine_ms: total - factor_ms,
        })
    }
}

/// Least squares min ‖Ax − b‖₂ for f64 A (m×n, m ≥ n, full rank) and b (m×q), device
/// resident, through the tensor-core mixed-precision QR of an f32 copy of A
/// ([`mixed_qr_gpu`]) and refinement in f64 to f64's accuracy — the GPU counterpart of
/// [`lstsq_mixed_cpu`](super::lstsq_mixed_cpu), same algorithm and stopping rules
/// (docs/algorithms.md#mixed-precision; module doc): x₀ = 0, then per step δ from
/// R̃ᵀR̃-preconditioned CG on
/// AᵀAδ = Aᵀr and x += δ; it stops when η is below u/10, after two steps that do not
/// halve it, or after `params.max_iterations` steps, and returns the best iterate only
/// if its η ≤ `params.tol` (default 10·m·u, u = 2⁻⁵³). A and b are not modified.
///
/// **Preconditioner stages** (module doc). With `params.route` =
/// [`MixedRoute::Auto`] (default) R̃ is first the f32 Cholesky factor of the Gram matrix
/// of the f32 copy of A; when SPOTRF finds it not positive definite, or the first inner
/// CG has not reached its target within 12 steps (κ(A)² too large for f32), the f64
/// Cholesky factor of AᵀA ([`MixedFactor::GramCholeskyF64`], κ(A)² within f64); when
/// that fails in the same ways, the f32 copy is factored by the mixed QR with
/// `params.precision` ([`MixedRoute::GramF64`] starts at the f64 Gram stage,
/// [`MixedRoute::Qr`] at the QR). When a tensor-core QR
/// factor (bf16, f16, tf32) has not brought the first inner CG to its target within 30
/// steps (u_low·κ(A) ≳ 1: CG would need hundreds of steps, each two passes over A), A
/// is factored again with [`GemmPrecision::F32`]. Each switch restarts the solve from
/// x₀ = 0; [`MixedSolutionGpu::factor`] says which factor was used. If the next
/// factorisation fails (e.g. an exactly zero pivot), the current factor is kept with
/// the full inner budget.
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
    solve(gpu, a, b, params, None)
}

/// [`lstsq_mixed_gpu`] with its time split into the factorisation and the refinement
/// ([`MixedSolutionGpu::phases`]), measured with CUDA events on the solver's stream
/// (a few event records; the result is the same as [`lstsq_mixed_gpu`]'s).
///
/// # Errors
/// As [`lstsq_mixed_gpu`]; [`Error::Driver`] for the events.
pub fn lstsq_mixed_gpu_phases(
    gpu: &Gpu,
    a: &DevMat<f64>,
    b: &DevMat<f64>,
    params: &MixedParams,
) -> Result<MixedSolutionGpu> {
    let clock = MixedClock::new(gpu)?;
    solve(gpu, a, b, params, Some(clock))
}

/// A preconditioner stage of the solve (module doc of [`lstsq_mixed_gpu`]): f32 Gram →
/// f64 Gram → QR in `params.precision` → QR in f32.
fn next_stage(stage: MixedFactor, params: &MixedParams) -> Option<MixedFactor> {
    match stage {
        MixedFactor::GramCholesky => Some(MixedFactor::GramCholeskyF64),
        MixedFactor::GramCholeskyF64 => Some(MixedFactor::Qr(params.precision)),
        MixedFactor::Qr(p) if p != GemmPrecision::F32 => Some(MixedFactor::Qr(GemmPrecision::F32)),
        MixedFactor::Qr(_) => None,
    }
}

/// Inner CG steps the first correction of `stage` may take before the next stage is
/// tried ([`GRAM_STEPS`], [`SWITCH_STEPS`]).
fn switch_cap(stage: MixedFactor) -> usize {
    match stage {
        MixedFactor::GramCholesky | MixedFactor::GramCholeskyF64 => GRAM_STEPS,
        MixedFactor::Qr(_) => SWITCH_STEPS,
    }
}

/// ‖A‖_F range in which the f64 Gram matrix AᵀA neither overflows nor loses its small
/// entries to underflow (with κ(A) ≤ 1e7, where the f64 Gram stage can succeed at all).
const GRAM_F64_NORM_RANGE: std::ops::RangeInclusive<f64> = 1.0e-120..=1.0e120;

/// R̃ (f64, unscaled) of `stage` from A and its f32 copy (consumed by the QR), or `None`
/// when the Gram matrix is not positive definite in the stage's precision (or, for the
/// f64 Gram, ‖A‖_F is outside [`GRAM_F64_NORM_RANGE`]). The copy is handed back when
/// the stage did not consume it.
fn stage_r(
    gpu: &Gpu,
    a: &DevMat<f64>,
    c: F32Copy,
    stage: MixedFactor,
    nb: usize,
) -> Result<(Option<DevMat<f64>>, Option<F32Copy>)> {
    let n = c.f.ncols();
    match stage {
        MixedFactor::GramCholeskyF64 => {
            if !GRAM_F64_NORM_RANGE.contains(&c.anorm) {
                return Ok((None, Some(c)));
            }
            Ok((gram_cholesky::<f64>(gpu, a)?, Some(c)))
        }
        MixedFactor::GramCholesky => match gram_cholesky::<f32>(gpu, &c.f)? {
            Some(g) => {
                let mut r = DevMat::<f64>::zeros(gpu, n, n)?;
                gpu.convert_from_f32(&g.block(0, 0, n, n), pow2(-c.shift), &mut r.view_mut())?;
                Ok((Some(r), Some(c)))
            }
            None => Ok((None, Some(c))),
        },
        MixedFactor::Qr(p) => {
            let qr = qr_of_copy(gpu, c, nb, p)?;
            Ok((Some(qr.r_dev(gpu)?), None))
        }
    }
}

/// ‖b_c‖₂ of each column of the m×nrhs `b`.
///
/// # Errors
/// [`Error::NonFinite`] / [`Error::InvalidParam`] when a norm is not finite.
fn column_norms(gpu: &Gpu, b: &DevMat<f64>) -> Result<Vec<f64>> {
    let (m, nrhs) = (b.nrows(), b.ncols());
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
    Ok(bnorms)
}

/// The preconditioner of the refinement: the stage that gave R̃, the inner CG over it,
/// and what trying the later stages needs (the spare f32 copy of A, whether the next
/// first correction may still switch).
struct Preconditioner<'p> {
    gpu: &'p Gpu,
    a: &'p DevMat<f64>,
    params: &'p MixedParams,
    nb: usize,
    stage: MixedFactor,
    spare: Option<F32Copy>,
    cg: InnerCg,
    /// May the first inner solve of this stage still trigger the next stage?
    may_switch: bool,
}

impl<'p> Preconditioner<'p> {
    /// The first stage of `params.route` that gives a factor (Gram-Cholesky falling
    /// through to the QR when SPOTRF fails, or the QR), with its inner CG; returns it
    /// and ‖A‖_F.
    fn first(
        gpu: &'p Gpu,
        a: &'p DevMat<f64>,
        params: &'p MixedParams,
        nb: usize,
        clock: &mut Option<MixedClock>,
    ) -> Result<(Self, f64)> {
        let copy = MixedClock::factor(clock, gpu, || f32_copy(gpu, OP_LS, a))?;
        let anorm = copy.anorm;
        let mut stage = match params.route {
            MixedRoute::Auto => MixedFactor::GramCholesky,
            MixedRoute::GramF64 => MixedFactor::GramCholeskyF64,
            MixedRoute::Qr => MixedFactor::Qr(params.precision),
        };
        let (mut r, mut spare) =
            MixedClock::factor(clock, gpu, || stage_r(gpu, a, copy, stage, nb))?;
        // A Gram stage that fails hands its copy back; the stages end with a QR, which
        // always gives R̃ (or an error).
        while r.is_none() {
            stage = next_stage(stage, params).expect("the last stage is a QR");
            let c = spare.take().expect("a Gram stage hands its copy back");
            (r, spare) = MixedClock::factor(clock, gpu, || stage_r(gpu, a, c, stage, nb))?;
        }
        let r = r.expect("the loop above ends with R̃");
        let (m, n) = (a.nrows(), a.ncols());
        let cg = InnerCg::new(gpu, m, n, r)?;
        let may_switch = next_stage(stage, params).is_some();
        let pre = Self {
            gpu,
            a,
            params,
            nb,
            stage,
            spare,
            cg,
            may_switch,
        };
        Ok((pre, anorm))
    }

    /// Tries the later stages in order, until one gives a factor; on success the inner
    /// CG runs on it from now on. A Gram stage hands its f32 copy back; a QR stage
    /// consumes its own, so a later QR needs a fresh one. A stage that fails with an
    /// error (e.g. an exactly zero pivot of the f32 QR) ends the search: the current
    /// factor stays.
    fn switch_to_next(&mut self, clock: &mut Option<MixedClock>) -> Result<bool> {
        let (gpu, a, nb) = (self.gpu, self.a, self.nb);
        let mut next = next_stage(self.stage, self.params);
        while let Some(cand) = next {
            let spare = &mut self.spare;
            let got = MixedClock::factor(clock, gpu, || {
                let c = match spare.take() {
                    Some(c) => c,
                    None => f32_copy(gpu, OP_LS, a)?,
                };
                stage_r(gpu, a, c, cand, nb)
            });
            match got {
                Ok((Some(r2), c2)) => {
                    self.spare = c2;
                    self.cg = InnerCg::new(gpu, a.nrows(), a.ncols(), r2)?;
                    self.stage = cand;
                    self.may_switch = next_stage(cand, self.params).is_some();
                    return Ok(true);
                }
                Ok((None, c2)) => {
                    self.spare = c2;
                    next = next_stage(cand, self.params);
                }
                Err(_) => break,
            }
        }
        Ok(false)
    }
}

/// The refined least-squares solve on the device: R̃ from the stages of `params.route`
/// (falling through to the next stage when one gives no factor), then per right-hand
/// side preconditioned-CG corrections until the backward error stops improving. A
/// stalled first inner solve may switch to the next stage's factor and restart the
/// current column.
fn solve(
    gpu: &Gpu,
    a: &DevMat<f64>,
    b: &DevMat<f64>,
    params: &MixedParams,
    mut clock: Option<MixedClock>,
) -> Result<MixedSolutionGpu> {
    let (m, n, nrhs) = (a.nrows(), a.ncols(), b.ncols());
    check_dims(OP_LS, m, n)?;
    let tol = check_ls_params(m, b.nrows(), nrhs, params)?;
    let nb = resolve_block_size(OP_LS, params.block_size, n)?;
    let bnorms = column_norms(gpu, b)?;
    let (mut pre, anorm) = Preconditioner::first(gpu, a, params, nb, &mut clock)?;
    let u = f64::EPSILON / 2.0;
    let max_inner = 10 * n + 50;
    let mut rv = DevVec::<f64>::zeros(gpu, m)?;
    let mut h = DevVec::<f64>::zeros(gpu, n)?;
    let mut x = DevMat::<f64>::zeros(gpu, n, nrhs)?;
    let mut xc = DevVec::<f64>::zeros(gpu, n)?;
    let mut best = DevVec::<f64>::zeros(gpu, n)?;
    let (mut iterations, mut worst, mut inner_steps) = (0usize, 0.0f64, 0usize);
    let mut col = 0;
    while col < nrhs {
        let bnorm = bnorms[col];
        let bc = b.col(col, 0..m);
        xc.fill(gpu, 0.0)?;
        // h = Aᵀb at x₀ = 0.
        eta_at(gpu, a, &bc, &xc.view(), anorm, bnorm, &mut rv, &mut h)?;
        let mut best_eta = f64::INFINITY;
        let (mut it, mut idle) = (0, 0);
        let mut restart = false;
        while it < params.max_iterations {
            it += 1;
            let cap = if pre.may_switch {
                switch_cap(pre.stage)
            } else {
                max_inner
            };
            let out = pre.cg.solve(gpu, a, &h.view(), INNER_EPS, cap)?;
            inner_steps += out.steps;
            if pre.may_switch {
                pre.may_switch = false;
                if !out.converged && out.steps >= cap {
                    if pre.switch_to_next(&mut clock)? {
                        restart = true;
                        break;
                    }
                    // No later factorisation succeeded: redo this correction with the
                    // full budget on the current factor (the rare path).
                    let full = pre.cg.solve(gpu, a, &h.view(), INNER_EPS, max_inner)?;
                    inner_steps += full.steps;
                }
            }
            gpu.axpy(1.0, &pre.cg.delta.slice(0..n), &mut xc.view_mut())?;
            let eta = eta_at(gpu, a, &bc, &xc.view(), anorm, bnorm, &mut rv, &mut h)?;
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
        if restart {
            continue;
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
        col += 1;
    }
    let stage = pre.stage;
    drop(pre.spare.take());
    let phases = match clock {
        Some(c) => Some(c.finish(gpu)?),
        None => None,
    };
    Ok(MixedSolutionGpu {
        x,
        iterations,
        backward_error: worst,
        inner_steps,
        factor: stage,
        phases,
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
    fn stages_go_from_cheap_to_robust() {
        let p = MixedParams {
            precision: GemmPrecision::Bf16,
            ..MixedParams::default()
        };
        let mut order = vec![MixedFactor::GramCholesky];
        while let Some(next) = next_stage(*order.last().unwrap(), &p) {
            order.push(next);
        }
        assert_eq!(
            order,
            [
                MixedFactor::GramCholesky,
                MixedFactor::GramCholeskyF64,
                MixedFactor::Qr(GemmPrecision::Bf16),
                MixedFactor::Qr(GemmPrecision::F32),
            ]
        );
        // An f32 QR is the last stage, whatever came before it.
        let f32p = MixedParams::default();
        assert_eq!(
            next_stage(MixedFactor::GramCholeskyF64, &f32p),
            Some(MixedFactor::Qr(GemmPrecision::F32))
        );
        assert_eq!(next_stage(MixedFactor::Qr(GemmPrecision::F32), &f32p), None);
        assert_eq!(switch_cap(MixedFactor::GramCholeskyF64), GRAM_STEPS);
        assert_eq!(
            switch_cap(MixedFactor::Qr(GemmPrecision::Tf32)),
            SWITCH_STEPS
        );
        assert!(GRAM_F64_NORM_RANGE.contains(&1.0) && !GRAM_F64_NORM_RANGE.contains(&1e200));
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
