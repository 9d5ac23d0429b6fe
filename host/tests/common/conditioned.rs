//! Matrices of a given condition number and their least-squares references (the
//! mixed-precision tests of both backends).

use cuqr::{Mat, Scalar};
use faer::linalg::solvers::SolveLstsq;
use rand::rngs::StdRng;
use rand::Rng;

/// A random k×k orthogonal matrix (Q of faer's QR of a uniform(−1, 1) matrix).
pub fn orthogonal(rng: &mut StdRng, k: usize) -> faer::Mat<f64> {
    let g = faer::Mat::<f64>::from_fn(k, k, |_, _| rng.random_range(-1.0..1.0));
    g.qr().compute_Q()
}

/// m×n A = U·diag(σ)·Vᵀ, σ_i = κ^(−i/(n−1)), computed in f64 and rounded to T.
pub fn with_cond<T: Scalar>(rng: &mut StdRng, m: usize, n: usize, kappa: f64) -> Mat<T> {
    let (u, v) = (orthogonal(rng, m), orthogonal(rng, n));
    let sigma: Vec<f64> = (0..n)
        .map(|i| kappa.powf(-(i as f64) / (n - 1) as f64))
        .collect();
    let us = faer::Mat::<f64>::from_fn(m, n, |i, j| u[(i, j)] * sigma[j]);
    let a = &us * v.transpose();
    Mat::from_fn(m, n, |i, j| T::from_f64(a[(i, j)]))
}

/// Two right-hand sides: a random b (large LS residual) and a consistent b = A·x_true.
pub fn two_rhs<T: Scalar>(rng: &mut StdRng, a: &Mat<T>) -> Mat<T> {
    let (m, n) = (a.nrows(), a.ncols());
    let xt: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    Mat::from_fn(m, 2, |i, j| {
        if j == 0 {
            T::from_f64(rng.random_range(-1.0..1.0))
        } else {
            T::from_f64((0..n).map(|k| a[(i, k)].to_f64() * xt[k]).sum())
        }
    })
}

/// faer's f64 LS solution, rounded to the working precision T: the best answer T can
/// hold. (faer's own f32 solver returned NaN on the κ = 1e6 f32 problems here, so it is
/// not used as the f32 reference.)
pub fn faer_lstsq<T: Scalar>(a: &Mat<T>, b: &Mat<T>) -> Mat<T> {
    let (m, n, q) = (a.nrows(), a.ncols(), b.ncols());
    let fa = faer::Mat::<f64>::from_fn(m, n, |i, j| a[(i, j)].to_f64());
    let fb = faer::Mat::<f64>::from_fn(m, q, |i, j| b[(i, j)].to_f64());
    let x = fa.qr().solve_lstsq(&fb);
    Mat::from_fn(n, q, |i, j| T::from_f64(x[(i, j)]))
}
