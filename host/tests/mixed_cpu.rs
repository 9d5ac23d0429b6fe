//! Mixed-precision least squares (docs/algorithms.md#mixed-precision), CPU emulation, against
//! faer: on A = U·diag(σ)·Vᵀ with κ = 1e2, 1e4, 1e6 (σ geometric, U, V random
//! orthogonal), in f32 and f64 working precision and with all three GEMM precisions, the
//! refined solution's normwise backward error η = ‖Aᵀr‖/(‖A‖_F(‖A‖_F‖x‖ + ‖b‖)) must be
//! within 10× of that of faer's f64 solution rounded to the working precision (and
//! ≤ 10·m·u, docs/algorithms.md#accuracy-measures); in f64
//! its distance to faer's solution must respect the LS perturbation bound (Higham,
//! Thm 20.1). A κ ≈ 1e12 problem with bf16 must end in `Error::NotConverged` or in an
//! answer that meets the tolerance, never in a wrong answer; an unreachable tolerance
//! must give `NotConverged`. Sizes ≤ 300, none a multiple of 32.

mod common;

use common::{faer_lstsq, two_rhs, with_cond};
use cuqr::mixed::{ls_backward_error, lstsq_mixed_cpu, mixed_qr_cpu, GemmPrecision, MixedParams};
use cuqr::{Error, Scalar};
use rand::rngs::StdRng;
use rand::SeedableRng;

const PRECS: [GemmPrecision; 3] = [GemmPrecision::Bf16, GemmPrecision::F16, GemmPrecision::Tf32];

fn norm(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum::<f64>().sqrt()
}

fn check_lstsq<T: Scalar>(seed: u64, m: usize, n: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    let u = T::UNIT_ROUNDOFF;
    for kappa in [1e2, 1e4, 1e6] {
        let a = with_cond::<T>(&mut rng, m, n, kappa);
        let b = two_rhs(&mut rng, &a);
        let xf = faer_lstsq(&a, &b);
        for p in PRECS {
            let params = MixedParams {
                precision: p,
                ..MixedParams::default()
            };
            let sol = lstsq_mixed_cpu(a.as_ref(), b.as_ref(), &params)
                .unwrap_or_else(|e| panic!("{} κ={kappa:e} {p:?}: {e}", T::NAME));
            assert!(sol.iterations >= 1 && sol.iterations <= params.max_iterations);
            let mut worst = 0.0f64;
            for c in 0..2 {
                let eta = ls_backward_error(a.as_ref(), b.col(c), sol.x.col(c));
                let eta_f = ls_backward_error(a.as_ref(), b.col(c), xf.col(c));
                worst = worst.max(eta);
                // Floor u·1e-3: below it η is at the rounding level of its own f64
                // evaluation, so a 10× ratio would compare noise.
                assert!(
                    eta <= 10.0 * eta_f.max(u * 1e-3) && eta <= 10.0 * m as f64 * u,
                    "{} κ={kappa:e} {p:?} rhs {c}: η {eta:e} vs faer {eta_f:e}",
                    T::NAME
                );
                // Forward: both solutions lie within the LS perturbation bound of the
                // exact one for backward error ε = 10·m·u (Higham Thm 20.1), when it applies.
                let eps = 10.0 * m as f64 * u;
                if kappa * eps < 0.5 {
                    let x0: Vec<f64> = xf.col(c).iter().map(|v| v.to_f64()).collect();
                    let x1: Vec<f64> = sol.x.col(c).iter().map(|v| v.to_f64()).collect();
                    let mut r = b.col(c).iter().map(|v| v.to_f64()).collect::<Vec<_>>();
                    for (k, &xk) in x0.iter().enumerate() {
                        for (i, ri) in r.iter_mut().enumerate() {
                            *ri -= a[(i, k)].to_f64() * xk;
                        }
                    }
                    // ‖A‖₂ = σ₁ = 1 by construction.
                    let rel = norm(&r) / norm(&x0);
                    let bound =
                        2.0 * kappa * eps / (1.0 - kappa * eps) * (2.0 + (kappa + 1.0) * rel);
                    let diff: Vec<f64> = x0.iter().zip(&x1).map(|(p, q)| p - q).collect();
                    let fe = norm(&diff) / norm(&x0);
                    assert!(
                        fe <= bound,
                        "{} κ={kappa:e} {p:?}: forward {fe:e} > {bound:e}",
                        T::NAME
                    );
                }
            }
            assert_eq!(worst, sol.backward_error);
        }
    }
}

#[test]
fn lstsq_f64_matches_faer_backward_error() {
    check_lstsq::<f64>(21, 211, 83);
    check_lstsq::<f64>(22, 129, 97);
}

#[test]
fn lstsq_f32_matches_faer_backward_error() {
    check_lstsq::<f32>(23, 211, 83);
    check_lstsq::<f32>(24, 129, 97);
}

/// κ ≈ 1e12 with bf16 GEMMs (γκ ≫ 1: R̃ is a poor preconditioner). Whatever happens,
/// no wrong answer: either `NotConverged`, or an x whose independently recomputed η
/// meets the tolerance 10·m·u. (With geometric σ the refinement does reach it for these
/// seeds, in 4–8 steps; the normwise backward error is easier to meet as ‖x‖ grows
/// with κ.)
#[test]
fn kappa_1e12_with_bf16_never_returns_a_wrong_answer() {
    for seed in [25, 27] {
        let mut rng = StdRng::seed_from_u64(seed);
        let (m, n) = (173, 61);
        let a = with_cond::<f64>(&mut rng, m, n, 1e12);
        let b = two_rhs(&mut rng, &a);
        let params = MixedParams {
            precision: GemmPrecision::Bf16,
            ..MixedParams::default()
        };
        let tol = 10.0 * m as f64 * f64::EPSILON / 2.0;
        match lstsq_mixed_cpu(a.as_ref(), b.as_ref(), &params) {
            Err(Error::NotConverged {
                iterations,
                backward_error,
            }) => {
                assert!(iterations >= 1 && iterations <= params.max_iterations);
                assert!(backward_error > tol);
            }
            Ok(sol) => {
                for c in 0..2 {
                    let eta = ls_backward_error(a.as_ref(), b.col(c), sol.x.col(c));
                    assert!(eta <= tol && eta <= sol.backward_error, "η {eta:e}");
                }
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }
}

/// A tolerance the refinement cannot reach in its step budget gives `NotConverged` with
/// the backward error it did reach, not an answer: κ = 1e12, bf16, one refinement step,
/// tol = 10·u (one inner solve of 10n + 50 CG steps gets η ≈ 1e-13 here).
#[test]
fn unreachable_tolerance_is_not_converged() {
    let mut rng = StdRng::seed_from_u64(28);
    let (m, n) = (173, 61);
    let a = with_cond::<f64>(&mut rng, m, n, 1e12);
    let b = two_rhs(&mut rng, &a);
    let tol = 10.0 * f64::EPSILON / 2.0;
    let params = MixedParams {
        precision: GemmPrecision::Bf16,
        max_iterations: 1,
        tol: Some(tol),
        ..MixedParams::default()
    };
    match lstsq_mixed_cpu(a.as_ref(), b.as_ref(), &params) {
        Err(Error::NotConverged {
            iterations,
            backward_error,
        }) => {
            assert_eq!(iterations, 1);
            assert!(backward_error > tol && backward_error.is_finite());
        }
        other => panic!("expected NotConverged, got {other:?}"),
    }
}

#[test]
fn mixed_qr_backward_error_is_of_gemm_precision() {
    // ‖QR − A‖/‖A‖ of the emulated factorisation: at most 10·√n·u_low, at least
    // 0.01·u_low (the low-precision GEMMs really ran), in both working precisions.
    let mut rng = StdRng::seed_from_u64(26);
    let (m, n) = (181, 93);
    let a = with_cond::<f64>(&mut rng, m, n, 1e3);
    for p in PRECS {
        let params = MixedParams {
            precision: p,
            block_size: Some(24),
            ..MixedParams::default()
        };
        let f = mixed_qr_cpu(a.as_ref(), &params).unwrap();
        let q = f.explicit_q();
        let qr = q.matmul(f.r());
        let mut e = 0.0f64;
        for j in 0..n {
            for i in 0..m {
                e += (qr[(i, j)] - a[(i, j)]).powi(2);
            }
        }
        let ea = e.sqrt() / a.norm_fro();
        let ul = p.unit_roundoff();
        assert!(
            ea <= 10.0 * (n as f64).sqrt() * ul && ea >= 0.01 * ul,
            "{p:?}: {ea:e}"
        );
    }
}
