//! Blocked Householder QR of A (m×n, m ≥ n) with d = Qᵀb, serial
//! (docs/algorithms.md#blocked-householder-qr). Panels by `house`
//! (docs/algorithms.md#householder-vectors), compact-WY blocks
//! (docs/algorithms.md#blocked-reflectors: T by
//! larft, trailing matrix and d by larfb). Explicit Q by backward accumulation from I
//! (docs/algorithms.md#blocked-householder-qr). Cost ≈ 2mn² − 2n³/3, plus ≈ 4m²n − 4mn² + (4/3)n³
//! for Q (docs/algorithms.md#operation-counts).
//! Corrected as in docs/algorithms.md#corrections-to-the-published-descriptions (β written, exact
//! zeros below the diagonal, half-open ranges) and docs/algorithms.md#block-reflector-sign.
#![forbid(unsafe_code)]

use crate::base::dims::Dims;
use crate::base::error::{Error, Result};
use crate::base::mat::{Mat, MatRef};
use crate::base::params::{FactorParams, QPolicy, UpdateParams};
use crate::base::scalar::Scalar;
use crate::cpu::wy::resolve_block_size;
use crate::state::cpu::{CpuQr, KeptData};

mod cpu;
mod gpu;
mod plan;

pub use cpu::run_cpu;
#[cfg(test)]
pub(crate) use cpu::run_cpu_with;
pub use gpu::run_gpu;
pub(crate) use gpu::run_gpu_dev;
pub(crate) use plan::{default_rank_tol, plan, plan_shapes, resolve_rank_tol, Plan};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::backend::QrUpdate;
    use crate::cpu::householder::{apply_left, house};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// A random m×n matrix with entries in [−1, 1).
    pub(crate) fn rand_mat<T: Scalar>(rng: &mut StdRng, m: usize, n: usize) -> Mat<T> {
        Mat::from_fn(m, n, |_, _| T::from_f64(rng.random_range(-1.0..1.0)))
    }

    /// Unblocked Householder QR, column by column (the simple reference).
    pub(crate) fn unblocked_r<T: Scalar>(a: &Mat<T>) -> Mat<T> {
        let (m, n) = (a.nrows(), a.ncols());
        let mut r = a.clone();
        for j in 0..n {
            let col = r.col_mut(j);
            let (head, tail) = col[j..].split_first_mut().unwrap();
            let (beta, t) = house(*head, tail);
            *head = beta;
            for c in j + 1..n {
                let (vj, cc) = r.two_cols_mut(j, c);
                apply_left(&vj[j + 1..], t, &mut cc[j..]);
            }
            for x in &mut r.col_mut(j)[j + 1..m] {
                *x = T::ZERO;
            }
        }
        r
    }

    /// max |R₁ − S R₂| / ‖A‖ where S = diag(±1) normalises the row signs.
    ///
    /// The two may differ in height (an R-only or thin state's n×n R against a full
    /// state's m×n R): rows past the shorter one must be zero.
    pub(crate) fn r_diff_up_to_signs<T: Scalar>(r1: &Mat<T>, r2: &Mat<T>) -> f64 {
        let rows = r1.nrows().max(r2.nrows());
        let pad = |r: &Mat<T>| {
            Mat::from_fn(rows, r.ncols(), |i, j| {
                if i < r.nrows() {
                    r[(i, j)]
                } else {
                    T::ZERO
                }
            })
        };
        let (r1, r2) = (&pad(r1), &pad(r2));
        let n = r1.ncols().min(r1.nrows());
        let mut worst = 0.0f64;
        for i in 0..n {
            let s = if (r1[(i, i)].to_f64() >= 0.0) == (r2[(i, i)].to_f64() >= 0.0) {
                1.0
            } else {
                -1.0
            };
            for j in 0..r1.ncols() {
                worst = worst.max((r1[(i, j)].to_f64() - s * r2[(i, j)].to_f64()).abs());
            }
        }
        for i in n..r1.nrows() {
            for j in 0..r1.ncols() {
                worst = worst.max(r1[(i, j)].to_f64().abs().max(r2[(i, j)].to_f64().abs()));
            }
        }
        worst
    }

    /// ‖QᵀQ − I‖_F and ‖QR − A‖_F/‖A‖_F in f64.
    pub(crate) fn errs<T: Scalar>(q: &Mat<T>, r: &Mat<T>, a: &Mat<T>) -> (f64, f64) {
        let q64 = Mat::from_fn(q.nrows(), q.ncols(), |i, j| q[(i, j)].to_f64());
        let r64 = Mat::from_fn(r.nrows(), r.ncols(), |i, j| r[(i, j)].to_f64());
        let a64 = Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64());
        let mut qtq = q64.transpose().matmul(&q64);
        for i in 0..qtq.nrows() {
            qtq[(i, i)] -= 1.0;
        }
        let mut qr = q64.matmul(&r64);
        for j in 0..qr.ncols() {
            for i in 0..qr.nrows() {
                qr[(i, j)] -= a64[(i, j)];
            }
        }
        (qtq.norm_fro(), qr.norm_fro() / a64.norm_fro())
    }

    /// ‖x − y‖_F / ‖y‖_F.
    pub(crate) fn rel_diff<T: Scalar>(x: &Mat<T>, y: &Mat<T>) -> f64 {
        assert_eq!((x.nrows(), x.ncols()), (y.nrows(), y.ncols()));
        let diff = Mat::from_fn(x.nrows(), x.ncols(), |i, j| x[(i, j)] - y[(i, j)]);
        diff.norm_fro() / y.norm_fro().max(f64::MIN_POSITIVE)
    }

    /// Strictly lower part of R is exactly zero.
    pub(crate) fn lower_is_zero<T: Scalar>(r: &Mat<T>) -> bool {
        (0..r.ncols()).all(|j| {
            r.col(j)[(j + 1).min(r.nrows())..]
                .iter()
                .all(|&x| x == T::ZERO)
        })
    }

    /// κ_F(R₁) = ‖R₁‖_F·‖R₁⁻¹‖_F of an f64 R (m×n).
    pub(crate) fn cond_f(r: &Mat<f64>) -> f64 {
        let (m, n) = (r.nrows(), r.ncols());
        let e = Mat::from_fn(m, n, |i, j| if i == j { 1.0 } else { 0.0 });
        let inv = crate::ops::solve::solve_cpu(r, &e, n).unwrap().x;
        let r1 = Mat::from_fn(n, n, |i, j| r[(i, j)]);
        r1.norm_fro() * inv.norm_fro()
    }

    /// Checks an updated state against refactorising its matrix `a` (with right-hand
    /// sides `b`) from scratch (docs/algorithms.md#accuracy-measures): R equal up to row signs, x
    /// and the residual
    /// equal within first-order perturbation bounds, e_Q and e_A ≤ 10·m·u, ‖L‖ = 0.
    pub(crate) fn check_against_refactor<T: Scalar>(st: &CpuQr<T>, a: &Mat<T>, b: &Mat<T>) {
        let (m, n) = (a.nrows(), a.ncols());
        assert_eq!((st.dims.m, st.dims.n, st.dims.q), (m, n, b.ncols()));
        let rows = if st.dims.policy == QPolicy::Full {
            m
        } else {
            n
        };
        assert_eq!((st.r.nrows(), st.r.ncols(), st.d.nrows()), (rows, n, rows));
        let u = T::UNIT_ROUNDOFF;
        let tol = 10.0 * m as f64 * u;
        assert!(lower_is_zero(&st.r), "R has nonzeros below the diagonal");
        let a64 = Mat::from_fn(m, n, |i, j| a[(i, j)].to_f64());
        let b64 = Mat::from_fn(m, b.ncols(), |i, j| b[(i, j)].to_f64());
        let fresh64 = run_cpu(
            a64.as_ref(),
            b64.as_ref(),
            QPolicy::None,
            FactorParams::default(),
        )
        .unwrap();
        let kappa = cond_f(&fresh64.r);
        let a_norm = a.norm_fro();
        // R: equal to a fresh factorisation up to row signs, within 10·m·u·‖A‖_F.
        let fresh = run_cpu(
            a.as_ref(),
            b.as_ref(),
            QPolicy::None,
            FactorParams::default(),
        )
        .unwrap();
        let diff = r_diff_up_to_signs(&st.r, &fresh.r);
        assert!(
            diff <= tol * a_norm,
            "R differs by {diff:e} > {:e}",
            tol * a_norm
        );
        if let Some(q) = st.q.as_ref() {
            assert_eq!((q.nrows(), q.ncols()), (m, rows));
            let (e_q, e_a) = errs(q, &st.r, a);
            assert!(e_q <= tol, "e_Q {e_q:e} > {tol:e}");
            assert!(e_a <= tol, "e_A {e_a:e} > {tol:e}");
        }
        let dg = crate::backend::diagnostics::diagnostics(st, a.as_ref(), b.as_ref()).unwrap();
        assert_eq!(dg.l_norm, 0.0);
        let sol = fresh64.solve().unwrap();
        for (c, &(r_st, r_fresh)) in dg.residual.iter().enumerate() {
            let x_norm = Mat::from_col(sol.x.col(c)).norm_fro();
            let b_norm = Mat::from_col(b64.col(c)).norm_fro();
            // ‖r‖ moves by at most ‖δA‖‖x‖ + ‖δb‖ under a backward error (δA, δb).
            let bound = tol * (a_norm * x_norm + b_norm);
            assert!(
                (r_st - r_fresh).abs() <= bound,
                "residual {r_st} vs {r_fresh}"
            );
            // LS perturbation (Higham, Thm 20.1): κ(1 + κ‖r‖/(‖A‖‖x‖)).
            let bound_x = tol * kappa * (1.0 + kappa * r_fresh / (a_norm * x_norm));
            assert!(dg.e_x <= bound_x, "e_x {:e} > {bound_x:e}", dg.e_x);
        }
    }

    fn check_factorize<T: Scalar>(seed: u64, m: usize, n: usize, q: usize, nb: Option<usize>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let a = rand_mat::<T>(&mut rng, m, n);
        let b = rand_mat::<T>(&mut rng, m, q);
        let params = FactorParams {
            block_size: nb,
            rank_tol: None,
            keep_data: false,
        };
        let st = run_cpu(a.as_ref(), b.as_ref(), QPolicy::Full, params).unwrap();
        let tol = 10.0 * m as f64 * T::UNIT_ROUNDOFF;
        let (qm, r) = (st.q.as_ref().unwrap(), &st.r);
        let (e_q, e_a) = errs(qm, r, &a);
        assert!(e_q <= tol, "e_Q {e_q:e} > {tol:e} ({m}×{n}, nb {nb:?})");
        assert!(e_a <= tol, "e_A {e_a:e} > {tol:e} ({m}×{n}, nb {nb:?})");
        assert!(lower_is_zero(r));
        // R equals unblocked Householder QR up to row signs.
        let r_ref = unblocked_r(&a);
        let diff = r_diff_up_to_signs(r, &r_ref);
        assert!(
            diff <= tol * a.norm_fro(),
            "R differs by {diff:e} ({m}×{n})"
        );
        // d = Qᵀb.
        let qtb = qm.transpose().matmul(&b);
        for j in 0..q {
            for i in 0..m {
                let e = (qtb[(i, j)] - st.d[(i, j)]).to_f64().abs();
                assert!(e <= tol * b.norm_fro(), "d({i},{j})");
            }
        }
        // The state without Q has the same R and d, bit for bit.
        // (its first n rows, and the residual norms of d's other rows)
        let st0 = run_cpu(a.as_ref(), b.as_ref(), QPolicy::None, params).unwrap();
        assert!(st0.q.is_none());
        assert!(st0.r == Mat::from_fn(n, n, |i, j| st.r[(i, j)]));
        assert!(st0.d == Mat::from_fn(n, q, |i, k| st.d[(i, k)]));
        for k in 0..q {
            assert_eq!(st0.rho[k], crate::cpu::householder::nrm2(&st.d.col(k)[n..]));
        }
    }

    #[test]
    fn factorize_properties_f64() {
        for &(m, n, q, nb) in &[
            (1usize, 1usize, 1usize, None),
            (31, 31, 2, None),
            (33, 17, 1, Some(5)),
            (127, 33, 3, Some(64)),
            (257, 127, 2, None),
            (45, 45, 1, Some(1)),
        ] {
            check_factorize::<f64>(m as u64 * 1000 + n as u64, m, n, q, nb);
        }
    }

    #[test]
    fn factorize_properties_f32() {
        for &(m, n, q, nb) in &[
            (1usize, 1usize, 1usize, None),
            (33, 31, 2, Some(7)),
            (127, 61, 1, None),
            (257, 33, 2, Some(100)),
        ] {
            check_factorize::<f32>(m as u64 * 7 + n as u64, m, n, q, nb);
        }
    }

    #[test]
    fn factorize_errors() {
        let mut rng = StdRng::seed_from_u64(5);
        let a = rand_mat::<f64>(&mut rng, 7, 3);
        let b = rand_mat::<f64>(&mut rng, 7, 1);
        let p = FactorParams::default();
        let full = QPolicy::Full;
        let wide = rand_mat::<f64>(&mut rng, 3, 7);
        let b3 = rand_mat::<f64>(&mut rng, 3, 1);
        assert!(matches!(
            run_cpu(wide.as_ref(), b3.as_ref(), full, p),
            Err(Error::Underdetermined { m: 3, n: 7, .. })
        ));
        assert!(matches!(
            run_cpu(a.as_ref(), b3.as_ref(), full, p),
            Err(Error::Shape {
                got: 3,
                expected: 7,
                ..
            })
        ));
        let empty = Mat::<f64>::zeros(7, 0);
        assert!(matches!(
            run_cpu(empty.as_ref(), b.as_ref(), full, p),
            Err(Error::Shape { .. })
        ));
        assert!(matches!(
            run_cpu(a.as_ref(), empty.as_ref(), full, p),
            Err(Error::Shape { .. })
        ));
        let mut bad = a.clone();
        bad[(4, 2)] = f64::NAN;
        assert!(matches!(
            run_cpu(bad.as_ref(), b.as_ref(), full, p),
            Err(Error::NonFinite {
                what: "A",
                row: 4,
                col: 2,
                ..
            })
        ));
        let mut badb = b.clone();
        badb[(6, 0)] = f64::INFINITY;
        assert!(matches!(
            run_cpu(a.as_ref(), badb.as_ref(), full, p),
            Err(Error::NonFinite {
                what: "b",
                row: 6,
                col: 0,
                ..
            })
        ));
        let (nb, tol) = (
            |block_size| FactorParams {
                block_size,
                ..FactorParams::default()
            },
            |rank_tol| FactorParams {
                rank_tol,
                ..FactorParams::default()
            },
        );
        for bad_p in [nb(Some(0)), tol(Some(-1.0)), tol(Some(f64::NAN))] {
            assert!(matches!(
                run_cpu(a.as_ref(), b.as_ref(), full, bad_p),
                Err(Error::InvalidParam { .. })
            ));
        }
        // Column 2 = column 0 + column 1: rank deficient at column 2.
        let mut dep = a.clone();
        for i in 0..7 {
            dep[(i, 2)] = dep[(i, 0)] + dep[(i, 1)];
        }
        assert!(matches!(
            run_cpu(dep.as_ref(), b.as_ref(), full, p),
            Err(Error::RankDeficient { column: 2, .. })
        ));
        let st = run_cpu(a.as_ref(), b.as_ref(), full, p).unwrap();
        assert_eq!((st.nrows(), st.ncols(), st.nrhs()), (7, 3, 1));
    }

    /// A full-rank matrix scaled into the subnormal range factorises, with
    /// |R_jj| the scaled |R_jj| of the unscaled matrix (to the few bits subnormals
    /// keep). The reflectors' 1/scale and 1/(α − β) used to overflow to ∞ and the
    /// factorisation failed with RankDeficient { column: 0, r_jj: ∞ }.
    fn subnormal_case<T: Scalar>(exp: i32, rel: f64) {
        let mut rng = StdRng::seed_from_u64(77);
        let (m, n) = (13, 5);
        let a = rand_mat::<T>(&mut rng, m, n);
        let b = rand_mat::<T>(&mut rng, m, 1);
        let s = 2f64.powi(exp / 2) * 2f64.powi(exp - exp / 2); // 2^exp (powi would give 0)
        let tiny = Mat::from_fn(m, n, |i, j| T::from_f64(a[(i, j)].to_f64() * s));
        let min_normal = if T::NAME == "f64" {
            f64::MIN_POSITIVE
        } else {
            f32::MIN_POSITIVE as f64
        };
        assert!((0..m).all(|i| tiny[(i, 0)].to_f64().abs() < min_normal));
        let p = FactorParams::default();
        let st = run_cpu(tiny.as_ref(), b.as_ref(), QPolicy::Full, p).unwrap();
        let st1 = run_cpu(a.as_ref(), b.as_ref(), QPolicy::Full, p).unwrap();
        for j in 0..n {
            let (got, want) = (
                st.r[(j, j)].to_f64().abs(),
                st1.r[(j, j)].to_f64().abs() * s,
            );
            assert!(
                (got - want).abs() <= rel * want,
                "{}: |r_{j}{j}| = {got:e}, expected {want:e}",
                T::NAME
            );
        }
        let (e_q, _) = errs(st.q.as_ref().unwrap(), &st.r, &tiny);
        assert!(e_q <= 10.0 * m as f64 * T::UNIT_ROUNDOFF, "e_Q {e_q:e}");
    }

    #[test]
    fn subnormal_matrices_factorise() {
        subnormal_case::<f64>(-1060, 1e-3);
        subnormal_case::<f32>(-140, 5e-2);
    }
}
