//! What a solve and a diagnostics run return.
#![forbid(unsafe_code)]

use super::mat::Mat;

/// Least-squares solution of the current problem (docs/algorithms.md#least-squares).
#[derive(Clone, Debug)]
pub struct Solution<T> {
    /// x = R₁⁻¹ d(0:n), n×q (one column per right-hand side).
    pub x: Mat<T>,
    /// ‖d(n:m, j)‖₂ for each right-hand side j: the minimum residual ‖Ax − b‖₂.
    pub residual_norms: Vec<f64>,
}

/// Accuracy of the current factorisation against the matrix it represents
/// (docs/algorithms.md#accuracy-measures). All norms are computed in f64.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnostics {
    /// e_Q = ‖QᵀQ − I‖ (Frobenius, an upper bound on the 2-norm); `None` without Q.
    pub e_q: Option<f64>,
    /// e_A = ‖QR − A‖/‖A‖ (Frobenius); `None` without Q.
    pub e_a: Option<f64>,
    /// ‖L‖: Frobenius norm of the strictly lower part of R (must be exactly 0).
    pub l_norm: f64,
    /// e_x = ‖x − x̂‖/‖x̂‖, x̂ from a fresh factorisation of A (max over right-hand sides).
    pub e_x: f64,
    /// ‖R̃ᵀR̃ − AᵀA‖/‖A‖² (works without Q).
    pub e_gram: f64,
    /// The residual norms from the state and from the fresh factorisation.
    pub residual: Vec<(f64, f64)>,
    /// The state's own drift estimate and refresh count.
    pub drift: DriftReport,
}

/// What a state knows of its own drift (docs/algorithms.md#drift-control).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DriftReport {
    /// The last estimate (Q kinds: a sampled ‖QᵀQ − I‖_F; R-only kind with kept data: a
    /// probed ‖(AᵀA − RᵀR)z‖/(‖R‖²_F‖z‖)), before any refresh it triggered; `None` before the
    /// first check or where nothing can be measured (an R-only state without kept data).
    pub estimate: Option<f64>,
    /// Checks run so far.
    pub checks: usize,
    /// Refreshes (reorthogonalisations or refactorisations) run so far.
    pub refreshes: usize,
    /// Updates since the last check.
    pub since_check: usize,
}
