//! The least-squares solve on the CPU (docs/algorithms.md#least-squares): back
//! substitution per right-hand side and the residual norms. The operation (`ops/solve/`)
//! validates the shapes.
#![forbid(unsafe_code)]

use crate::base::mat::Mat;
use crate::base::scalar::Scalar;
use crate::base::solution::Solution;

/// x = R₁⁻¹ d(0:n) for every right-hand side and `residual_norms[j]` = ‖d(n:m, j)‖₂
/// (docs/algorithms.md#least-squares), from R (m×n upper trapezoidal, R_jj ≠ 0) and
/// d = Qᵀb (m×q).
pub(crate) fn back_substitute<T: Scalar>(r: &Mat<T>, d: &Mat<T>, n: usize) -> Solution<T> {
    let q = d.ncols();
    let mut x = Mat::zeros(n, q);
    let mut residual_norms = Vec::with_capacity(q);
    for c in 0..q {
        let dc = d.col(c);
        let xc = x.col_mut(c);
        xc.copy_from_slice(&dc[..n]);
        // Column-oriented back substitution: x_j = x_j / R_jj, then x(0:j) −= x_j R(0:j, j).
        for j in (0..n).rev() {
            let xj = xc[j] / r[(j, j)];
            xc[j] = xj;
            let rj = r.col(j);
            for i in 0..j {
                xc[i] = (-xj).mul_add(rj[i], xc[i]);
            }
        }
        residual_norms.push(nrm2_f64(&dc[n..]));
    }
    Solution { x, residual_norms }
}

/// Scaled 2-norm of `x` in f64 (max |xᵢ|, then Σ(xᵢ/scale)²), as LAPACK `xNRM2`.
pub(crate) fn nrm2_f64<T: Scalar>(x: &[T]) -> f64 {
    let scale = x.iter().fold(0.0f64, |s, v| s.max(v.to_f64().abs()));
    if scale == 0.0 || !scale.is_finite() {
        return scale;
    }
    let ssq: f64 = x
        .iter()
        .map(|v| {
            let t = v.to_f64() / scale;
            t * t
        })
        .sum();
    scale * ssq.sqrt()
}
