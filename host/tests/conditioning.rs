//! Accuracy of the updates against conditioning (f64; docs/algorithms.md#updates-without-q):
//! A = U·diag(σ)·Vᵀ with σ log-spaced over κ = 1e2, 1e6, 1e10 and b = A·x + r with r ⟂ A
//! (‖r‖ = 1e-6·‖Ax‖: a small residual), so that a backward-stable least-squares method has
//! ‖x̂ − x‖/‖x‖ ≲ c·u·(κ + κ²·‖r‖/(‖A‖‖x‖)) (the least-squares perturbation bound). Column
//! insertion and a rank-one change are made on the thin kind and on the R-only kind with kept
//! data (the corrected semi-normal equations), and x is compared with faer's least-squares
//! solution of the updated matrix. Both kinds meet the bound at every κ here; the printed
//! ratios document how far inside it each lands.

mod common;

use common::{random_mat, rng};
use cuqr::{CpuQr, FactorParams, Mat, QPolicy, QrUpdate};
use faer::linalg::solvers::SolveLstsq;

const M: usize = 157;
const N: usize = 23;

/// U·diag(σ)·Vᵀ with orthonormal U (M×N), V (N×N) from QRs of random matrices.
fn conditioned(kappa: f64, seed: u64) -> (Mat<f64>, faer::Mat<f64>) {
    let mut g = rng(seed);
    let qu = common::to_faer(&random_mat::<f64>(&mut g, M, N))
        .qr()
        .compute_thin_Q();
    let qv = common::to_faer(&random_mat::<f64>(&mut g, N, N))
        .qr()
        .compute_Q();
    let sigma: Vec<f64> = (0..N)
        .map(|i| kappa.powf(-(i as f64) / (N - 1) as f64))
        .collect();
    let a = faer::Mat::from_fn(M, N, |i, j| {
        (0..N).map(|k| qu[(i, k)] * sigma[k] * qv[(j, k)]).sum()
    });
    (Mat::from_fn(M, N, |i, j| a[(i, j)]), qu)
}

/// ‖x − x_faer‖/‖x_faer‖ for the least-squares problem of (a, b).
fn x_error(x: &Mat<f64>, a: &Mat<f64>, b: &Mat<f64>) -> f64 {
    let fa = common::to_faer(a);
    let fb = common::to_faer(b);
    let xf = fa.qr().solve_lstsq(&fb);
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for i in 0..a.ncols() {
        num += (x[(i, 0)] - xf[(i, 0)]).powi(2);
        den += xf[(i, 0)].powi(2);
    }
    (num / den).sqrt()
}

/// Runs column insertion and a rank-one change on `policy` at condition number `kappa`;
/// returns (insert error, rank-one error) relative to u·(κ + κ²·‖r‖/(‖A‖‖x‖)).
fn errors(policy: QPolicy, kappa: f64, seed: u64) -> (f64, f64) {
    let (a, qu) = conditioned(kappa, seed);
    let mut g = rng(seed ^ 0xabc);
    let xt = random_mat::<f64>(&mut g, N, 1);
    let ax = a.matmul(&xt);
    // r = (I − UUᵀ)z scaled to 1e-6·‖Ax‖
    let z = common::to_faer(&random_mat::<f64>(&mut g, M, 1));
    let rz = &z - &qu * (qu.transpose() * &z);
    let scale = 1e-6 * ax.norm_fro() / rz.norm_l2();
    let b = Mat::from_fn(M, 1, |i, _| ax[(i, 0)] + scale * rz[(i, 0)]);
    let (a_norm, x_norm) = (1.0, xt.norm_fro()); // ‖A‖₂ = σ₁ = 1
    let tan = 1e-6 * ax.norm_fro() / (a_norm * x_norm);
    let params = FactorParams {
        keep_data: true,
        ..FactorParams::default()
    };
    let u = f64::EPSILON / 2.0;

    // column insertion: factorise A without column 7, insert it back
    let keep: Vec<usize> = (0..N).filter(|&j| j != 7).collect();
    let a0 = Mat::from_fn(M, N - 1, |i, j| a[(i, keep[j])]);
    let mut st = CpuQr::factorize(a0.as_ref(), b.as_ref(), policy, params).unwrap();
    let col: Vec<f64> = (0..M).map(|i| a[(i, 7)]).collect();
    st.insert_col(7, &col).unwrap();
    let bound = u * (kappa + kappa * kappa * tan);
    let e_ins = x_error(&st.solve().unwrap().x, &a, &b) / bound;

    // rank one: A + u vᵀ with a small random change (condition kept near κ)
    let mut st = CpuQr::factorize(a.as_ref(), b.as_ref(), policy, params).unwrap();
    let uu: Vec<f64> = (0..M)
        .map(|_| 1e-3 * random_mat::<f64>(&mut g, 1, 1)[(0, 0)])
        .collect();
    let vv: Vec<f64> = (0..N).map(|j| (j as f64 * 0.37).sin()).collect();
    st.rank_one(&uu, &vv).unwrap();
    let a1 = Mat::from_fn(M, N, |i, j| a[(i, j)] + uu[i] * vv[j]);
    let e_r1 = x_error(&st.solve().unwrap().x, &a1, &b) / bound;
    (e_ins, e_r1)
}

/// c in the bound: a backward-stable least-squares solve stays within a small multiple of n.
const C: f64 = 10.0 * N as f64;

#[test]
fn thin_kind_meets_the_perturbation_bound_at_every_kappa() {
    for (i, kappa) in [1e2, 1e6, 1e10].into_iter().enumerate() {
        let (e_ins, e_r1) = errors(QPolicy::Thin, kappa, 11 + i as u64);
        eprintln!(
            "thin   κ = {kappa:.0e}: insert_col {e_ins:.2e}·bound, rank_one {e_r1:.2e}·bound"
        );
        assert!(
            e_ins <= C && e_r1 <= C,
            "thin at κ = {kappa:e}: {e_ins:e}, {e_r1:e} > {C}"
        );
    }
}

#[test]
fn r_only_kind_meets_the_perturbation_bound_at_every_kappa() {
    for (i, kappa) in [1e2, 1e6, 1e10].into_iter().enumerate() {
        let (e_ins, e_r1) = errors(QPolicy::None, kappa, 21 + i as u64);
        eprintln!(
            "R-only κ = {kappa:.0e}: insert_col {e_ins:.2e}·bound, rank_one {e_r1:.2e}·bound"
        );
        assert!(
            e_ins <= C && e_r1 <= C,
            "R-only at κ = {kappa:e}: {e_ins:e}, {e_r1:e} > {C}"
        );
    }
}
