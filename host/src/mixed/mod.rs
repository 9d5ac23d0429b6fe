//! Mixed-precision blocked Householder QR and a refined least-squares solver
//! (docs/algorithms.md#mixed-precision): a CPU emulation ([`mixed_qr_cpu`], [`lstsq_mixed_cpu`])
//! and the GPU
//! version ([`mixed_qr_gpu`], [`lstsq_mixed_gpu`]: real tensor-core GEMMs on an f32 copy
//! of f64 data, refinement in f64 on the device; for least squares by default first
//! an f32 Gram-Cholesky preconditioner, [`MixedRoute`]; its own module doc in `gpu.rs`
//! says how). The rest of this doc describes the method through the CPU emulation. Panels, T and all solves run in the working
//! precision (f32 or f64); the compact-WY trailing-update and Q-accumulation GEMMs
//! (VᵀC, op(T)·W, V·W₂) round their *inputs* to [`GemmPrecision`] (bf16, f16 or tf32)
//! and accumulate in f32, exactly as tensor cores do (products of such inputs are exact
//! in f32). Cost as blocked QR: ≈ 2mn² − 2n³/3, of which all but O(mn·n_b) is GEMM.
//!
//! The factorisation alone carries errors of order u_low·‖A‖ (u_bf16 = 2⁻⁸,
//! u_f16 = u_tf32 = 2⁻¹¹). [`lstsq_mixed_cpu`] recovers the working precision's accuracy
//! by iterative refinement whose correction equation AᵀAδ = Aᵀr (r = b − Ax) is solved
//! by a Krylov method preconditioned by the low-precision R̃ — the least-squares analogue
//! of GMRES-based iterative refinement (Carson & Higham, SIAM J. Sci. Comput. 40(2),
//! 2018; Carson, Higham & Pranesh, SIAM J. Sci. Comput. 42(6), 2020) built on the
//! semi-normal equations R̃ᵀR̃δ = Aᵀr (Higham, *Accuracy and Stability of Numerical
//! Algorithms*, 2nd ed., §20.6): conjugate gradients on AᵀA with preconditioner R̃ᵀR̃
//! (one CG step is one step of refined semi-normal equations), the operator, r and Aᵀr
//! applied in f64 (the "u_r = u²" precision of Carson–Higham's analysis when the working
//! precision is f32). The recurred CG residual is Aᵀr itself, so rounding stays
//! relative to the quantity being driven to zero (CGLS, which recurs the O(‖b‖) residual,
//! stalled near 1e-15 in f64 on κ = 1e6 in our tests).
//!
//! R̃ is the exact R factor of A + ΔA with ‖ΔA‖ ≲ γ‖A‖, γ ~ √n·u_low, so
//! κ(A·R̃⁻¹) ≤ (1 + γκ)² (the bound Carson–Higham give for LU preconditioners): for
//! γκ < 1 CG gains several digits per step; beyond it convergence slows and the inner
//! budget (10n + 50 steps per refinement) can run out. The outer loop stops when the
//! backward error is below u/10 or stops halving (two steps without progress), keeps its
//! best iterate, and returns it only if its normwise backward error
//! ([`ls_backward_error`]) meets the tolerance, otherwise
//! [`Error::NotConverged`](crate::Error::NotConverged): never a silent wrong answer.
//! Measured (host/tests/mixed_cpu.rs, m ≤ 211): κ ≤ 1e6 in f32 and f64 with all three GEMM
//! precisions reaches the backward error of faer's f64 solution (rounded to the working
//! precision) within 10× in 1 (f32) or 2–3 (f64) steps; at κ = 1e12 with bf16 the
//! default tolerance 10·m·u is still met in 4–8 steps (a normwise backward error is
//! easier to meet as ‖x‖ grows with κ), but at up to ~5e-14, far above faer's ~1e-17.
//!
//! # Examples
//! ```
//! use cuqr::Mat;
//! use cuqr::mixed::{lstsq_mixed_cpu, ls_backward_error, GemmPrecision, MixedParams};
//! let (m, n) = (61, 23);
//! let a = Mat::<f64>::from_fn(m, n, |i, j| ((i * 37 + j * 11) % 17) as f64 / 7.0 - 1.0
//!     + if i == j { 3.0 } else { 0.0 });
//! let b = Mat::<f64>::from_fn(m, 1, |i, _| (i as f64 * 0.37).sin());
//! let params = MixedParams { precision: GemmPrecision::Bf16, ..MixedParams::default() };
//! let sol = lstsq_mixed_cpu(a.as_ref(), b.as_ref(), &params).unwrap();
//! let eta = ls_backward_error(a.as_ref(), b.col(0), sol.x.col(0));
//! assert!(eta <= 1e-14 && eta == sol.backward_error);
//! ```
#![forbid(unsafe_code)]

mod cpu;
mod gpu;

pub use crate::base::precision::GemmPrecision;
pub use cpu::{ls_backward_error, lstsq_mixed_cpu, mixed_qr_cpu, MixedQr, MixedSolution};
pub use gpu::{
    lstsq_mixed_gpu, lstsq_mixed_gpu_host, lstsq_mixed_gpu_phases, mixed_qr_gpu, MixedPhases,
    MixedQrGpu, MixedSolutionGpu,
};

/// Which preconditioner factor R̃ the GPU least-squares solver starts from
/// (docs/algorithms.md#mixed-precision,
/// docs/algorithms.md#accuracy-measures). The CPU emulation ([`lstsq_mixed_cpu`]) always takes the
/// QR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MixedRoute {
    /// First R̃ from the f32 Cholesky factorisation of the f32 Gram matrix (cuBLAS
    /// SSYRK + cuSOLVER SPOTRF, far cheaper than a QR: mn² flops of SYRK against a
    /// column-by-column panel chain); when SPOTRF fails or the inner CG shows R̃ is poor
    /// (κ(A)² beyond f32), the f64 Gram-Cholesky factor (DSYRK + DPOTRF of A itself,
    /// good to κ(A) ≈ 1e6–1e7); when that fails too, the mixed QR with
    /// [`MixedParams::precision`] ([`lstsq_mixed_gpu`] describes the stages). The
    /// default.
    Auto,
    /// Only the mixed QR of docs/algorithms.md#mixed-precision (with the switch of a slow
    /// tensor-core factor to f32 described at [`lstsq_mixed_gpu`]).
    Qr,
    /// [`MixedRoute::Auto`] without its f32 Gram stage: first the f64 Gram-Cholesky
    /// factor ([`MixedFactor::GramCholeskyF64`]), then the mixed QR. Worth it where
    /// κ(A) is known to be beyond the f32 Gram matrix (κ ≳ 1e3) and f64 SYRK is fast
    /// (GPUs with FP64 tensor cores).
    GramF64,
}

/// The preconditioner factor a GPU least-squares solve used
/// ([`MixedSolutionGpu::factor`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MixedFactor {
    /// f32 Cholesky factor of the f32 Gram matrix ([`MixedRoute::Auto`]).
    GramCholesky,
    /// f64 Cholesky factor of the f64 Gram matrix AᵀA ([`MixedRoute::Auto`] when the f32
    /// one fails, [`MixedRoute::GramF64`]): not a low-precision factor, the
    /// preconditioner of the corrected semi-normal equations, good for
    /// κ(A)²·u_f64 ≲ 1e-3.
    GramCholeskyF64,
    /// The mixed QR with trailing GEMMs in this precision.
    Qr(GemmPrecision),
}

/// Options of the mixed-precision QR and least-squares solver (docs/algorithms.md#mixed-precision).
/// The precision option is off by default in the rest of cuqr: these functions are the
/// opt-in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MixedParams {
    /// Rounding of the GEMM inputs of the QR (default [`GemmPrecision::F32`]: on an H100
    /// the tf32 factorisation of 16384×4096 was only 8 % faster than the f32 one — the
    /// panel chain, not the GEMMs, sets its time — while its refinement needed twice
    /// the CG steps at κ = 1e2 and a second, f32, factorisation at κ = 1e6).
    pub precision: GemmPrecision,
    /// Where the GPU least-squares solver starts (default [`MixedRoute::Auto`]); ignored
    /// by the QR functions and the CPU emulation.
    pub route: MixedRoute,
    /// Householder block size n_b; `None` = `params::default_block_size(n)`; `Some(0)`
    /// is refused.
    pub block_size: Option<usize>,
    /// Maximum number of refinement steps (outer iterations) of the solver (default 10).
    pub max_iterations: usize,
    /// Normwise backward error the solution must reach ([`ls_backward_error`]); `None`
    /// = 10·m·u of the working precision (docs/algorithms.md#accuracy-measures).
    pub tol: Option<f64>,
}

impl Default for MixedParams {
    fn default() -> Self {
        Self {
            precision: GemmPrecision::F32,
            route: MixedRoute::Auto,
            block_size: None,
            max_iterations: 10,
            tol: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Trailing significand bits below the format's last stored bit are zero.
    fn low_bits_clear(y: f32, p: GemmPrecision) -> bool {
        let drop = 23 - p.mantissa_bits();
        y.to_bits() & ((1u32 << drop) - 1) == 0
    }

    #[test]
    fn rounding_keeps_only_the_format_bits_and_is_nearest() {
        use rand::rngs::StdRng;
        use rand::{Rng, SeedableRng};
        let mut rng = StdRng::seed_from_u64(5);
        for p in [GemmPrecision::Bf16, GemmPrecision::F16, GemmPrecision::Tf32] {
            let u = p.unit_roundoff();
            for _ in 0..2000 {
                // Normal range of every format (f16 normal from 2⁻¹⁴ to 65504).
                let sign = if rng.random_bool(0.5) { -1.0 } else { 1.0 };
                let x: f64 =
                    sign * rng.random_range(1.0..2.0) * 2f64.powi(rng.random_range(-13..=14));
                let y = p.round(x);
                assert!(low_bits_clear(y, p), "{p:?} {x} -> {y}");
                let err = (y as f64 - x).abs();
                assert!(err <= u * x.abs(), "{p:?} {x} -> {y}");
                // Nearest: neither neighbour on the format's grid is closer.
                let ulp = 2f64.powi(x.abs().log2().floor() as i32 - p.mantissa_bits() as i32);
                for nb in [y as f64 - ulp, y as f64 + ulp] {
                    assert!((nb - x).abs() >= err, "{p:?} {x} -> {y}, {nb} closer");
                }
            }
        }
    }

    #[test]
    fn rounding_from_f64_is_direct_not_double() {
        // 1 + 2⁻⁸ + 2⁻³⁰ is just above the bf16 midpoint 1 + 2⁻⁸: it must round up,
        // although via f32 with round-to-nearest it would first become the tie 1 + 2⁻⁸
        // and then round to even (1.0).
        let x = 1.0 + 2f64.powi(-8) + 2f64.powi(-30);
        assert_eq!(GemmPrecision::Bf16.round(x), 1.0 + 2f32.powi(-7));
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(GemmPrecision::Tf32.round(x), 1.0 + 2f32.powi(-10));
        assert_eq!(GemmPrecision::F16.round(x), 1.0 + 2f32.powi(-10));
        // Exact ties go to even.
        assert_eq!(GemmPrecision::Bf16.round(1.0 + 2f64.powi(-8)), 1.0);
        assert_eq!(
            GemmPrecision::Tf32.round(1.0 + 3.0 * 2f64.powi(-11)),
            1.0 + 2f32.powi(-9)
        );
        // Exactly representable values are unchanged.
        assert_eq!(GemmPrecision::F16.round(-0.75), -0.75);
    }

    #[test]
    fn f32_is_plain_round_to_nearest() {
        let x = 1.0 + 2f64.powi(-24) + 2f64.powi(-40);
        assert_eq!(GemmPrecision::F32.round(x), 1.0 + 2f32.powi(-23));
        assert_eq!(GemmPrecision::F32.round(0.1), 0.1f32);
        assert_eq!(GemmPrecision::F32.unit_roundoff(), 2f64.powi(-24));
        assert_eq!(GemmPrecision::F32.mantissa_bits(), 23);
        assert_eq!(GemmPrecision::F32.round(1e39), f32::INFINITY);
    }

    #[test]
    fn range_behaviour_is_as_documented() {
        // f16: 65504 is the largest finite value, 65520 and above round to ∞.
        assert_eq!(GemmPrecision::F16.round(65519.0), 65504.0);
        assert_eq!(GemmPrecision::F16.round(65520.0), f32::INFINITY);
        assert_eq!(GemmPrecision::F16.round(-1e6), f32::NEG_INFINITY);
        // f16 smallest subnormal 2⁻²⁴; half of it ties to 0.
        assert_eq!(GemmPrecision::F16.round(2f64.powi(-24)), 2f32.powi(-24));
        assert_eq!(GemmPrecision::F16.round(2f64.powi(-25)), 0.0);
        // bf16 and tf32 keep f32's range.
        assert_eq!(
            GemmPrecision::Bf16.round(1e30),
            half::bf16::from_f32(1e30).to_f32()
        );
        assert!(GemmPrecision::Tf32.round(1e38).is_finite());
        assert_eq!(GemmPrecision::Tf32.round(1e39), f32::INFINITY);
        assert_eq!(GemmPrecision::Bf16.round(1e39), f32::INFINITY);
        assert!(GemmPrecision::Tf32.round(f64::NAN).is_nan());
    }
}
