//! Insert a block of p columns at k0 (docs/algorithms.md#column-insertion). Step 1 QᵀU
//! (2m²p), step 2 blocked Householder QR of the (m−n)×p block below row n (applied to d and
//! Q), step 3 Givens on the strip, n−k0 rotations per new column, skipped when k0 = n (on
//! the GPU, for large p, one blocked Householder QR of the strip's (n+p−k0)² block instead).
//! Corrected as in docs/algorithms.md#column-insertion-wording (QᵀU, column k) and
//! docs/algorithms.md#column-insertion-schedule (rotations per column = n−k0, steps n−k0+p−1,
//! early exit at k0 = n). Needs Q.
#![forbid(unsafe_code)]

use crate::base::dims::Dims;
use crate::base::error::{Error, Result};
use crate::base::mat::MatRef;
use crate::base::params::QPolicy;
use crate::base::scalar::Scalar;
use crate::cpu::wy::resolve_block_size;
use crate::state::cpu::CpuQr;

mod cpu;
mod gpu;
pub(crate) use crate::gpu::algo::insert_cols::widened_r;
mod plan;

pub use cpu::run_cpu;
pub use gpu::{run_gpu, run_gpu_device};
use plan::OP;
pub(crate) use plan::{plan, plan_shape, Plan};

/// Shared helpers for the update tests (docs/algorithms.md#accuracy-measures measures, computed in
/// f64).
#[cfg(test)]
pub(crate) mod testkit {
    use crate::base::mat::Mat;
    use crate::base::params::{FactorParams, QPolicy};
    use crate::base::scalar::Scalar;
    use crate::state::cpu::CpuQr;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    /// Seeded generator.
    pub fn rng(seed: u64) -> StdRng {
        StdRng::seed_from_u64(seed)
    }

    /// Uniform entries in [−1, 1), never exactly zero.
    pub fn rand_mat<T: Scalar>(rng: &mut StdRng, m: usize, n: usize) -> Mat<T> {
        Mat::from_fn(m, n, |_, _| loop {
            let x: f64 = rng.random_range(-1.0..1.0);
            if x != 0.0 {
                break T::from_f64(x);
            }
        })
    }

    /// A random vector, never exactly zero entries.
    pub fn rand_vec<T: Scalar>(rng: &mut StdRng, m: usize) -> Vec<T> {
        rand_mat::<T>(rng, m, 1).into_vec()
    }

    /// 10·m·u (docs/algorithms.md#accuracy-measures).
    pub fn tol<T: Scalar>(m: usize) -> f64 {
        10.0 * m as f64 * T::UNIT_ROUNDOFF
    }

    /// Factorises with the crate's factorisation, keeping Q.
    pub fn factor<T: Scalar>(a: &Mat<T>, b: &Mat<T>, policy: QPolicy) -> crate::Result<CpuQr<T>> {
        CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default())
    }

    /// Bit-for-bit equality of two states.
    pub fn same_state<T: Scalar>(x: &CpuQr<T>, y: &CpuQr<T>) -> bool {
        x.dims == y.dims
            && x.r == y.r
            && x.d == y.d
            && x.q == y.q
            && x.rank_tol == y.rank_tol
            && x.params == y.params
    }

    fn to64<T: Scalar>(a: &Mat<T>) -> Mat<f64> {
        Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[(i, j)].to_f64())
    }

    /// docs/algorithms.md#accuracy-measures properties of `st` against the matrix Ã = `a` and
    /// right-hand sides `b`:
    /// ‖Q̃R̃ − Ã‖ ≤ 10·m·u·‖Ã‖, ‖Q̃ᵀQ̃ − I‖ ≤ 10·m·u, ‖Q̃d̃ − b‖ ≤ 10·m·u·‖b‖, ‖L‖ = 0 exactly.
    /// m = `m_op`, the row count the update worked on (before a row deletion, m > m̃).
    pub fn check_properties<T: Scalar>(st: &CpuQr<T>, a: &Mat<T>, b: &Mat<T>, m_op: usize) {
        let (m, n) = (a.nrows(), a.ncols());
        assert_eq!((st.dims.m, st.dims.n), (m, n));
        assert_eq!((st.r.nrows(), st.r.ncols()), (m, n));
        for j in 0..n {
            for i in j + 1..m {
                assert_eq!(st.r[(i, j)], T::ZERO, "L not exactly zero at ({i}, {j})");
            }
        }
        let tol = tol::<T>(m_op.max(m));
        let q = to64(st.q.as_ref().expect("Q kept"));
        let qr = q.matmul(&to64(&st.r));
        let ea = Mat::from_fn(m, n, |i, j| qr[(i, j)] - a[(i, j)].to_f64()).norm_fro();
        assert!(
            ea <= tol * a.norm_fro(),
            "e_A = {ea:e} > {:e}",
            tol * a.norm_fro()
        );
        let qtq = q.transpose().matmul(&q);
        let eq = Mat::from_fn(m, m, |i, j| qtq[(i, j)] - (i == j) as u8 as f64).norm_fro();
        assert!(eq <= tol, "e_Q = {eq:e} > {tol:e}");
        let qd = q.matmul(&to64(&st.d));
        let eb = Mat::from_fn(m, b.ncols(), |i, j| qd[(i, j)] - b[(i, j)].to_f64()).norm_fro();
        assert!(eb <= tol * b.norm_fro(), "‖Qd − b‖ = {eb:e}");
    }

    /// x = R₁⁻¹ d(0:n) (f64 back substitution) and the residual norms ‖d(n:m, j)‖.
    fn ls_of<T: Scalar>(st: &CpuQr<T>) -> (Mat<f64>, Vec<f64>) {
        let (m, n, q) = (st.dims.m, st.dims.n, st.dims.q);
        let mut x = Mat::<f64>::zeros(n, q);
        let mut res = Vec::with_capacity(q);
        for k in 0..q {
            for i in (0..n).rev() {
                let mut s = st.d[(i, k)].to_f64();
                for j in i + 1..n {
                    s -= st.r[(i, j)].to_f64() * x[(j, k)];
                }
                x[(i, k)] = s / st.r[(i, i)].to_f64();
            }
            res.push(
                (n..m)
                    .map(|i| st.d[(i, k)].to_f64().powi(2))
                    .sum::<f64>()
                    .sqrt(),
            );
        }
        (x, res)
    }

    /// κ₂(R₁) by power iteration on R₁ᵀR₁ and on (R₁ᵀR₁)⁻¹ (f64).
    fn cond<T: Scalar>(r: &Mat<T>, n: usize) -> f64 {
        let r = to64(r);
        let mul = |x: &[f64], tr: bool| -> Vec<f64> {
            (0..n)
                .map(|i| {
                    if tr {
                        (0..=i).map(|j| r[(j, i)] * x[j]).sum()
                    } else {
                        (i..n).map(|j| r[(i, j)] * x[j]).sum()
                    }
                })
                .collect()
        };
        let solve = |b: &[f64], tr: bool| -> Vec<f64> {
            let mut x = vec![0.0; n];
            if tr {
                for i in 0..n {
                    let s: f64 = (0..i).map(|j| r[(j, i)] * x[j]).sum();
                    x[i] = (b[i] - s) / r[(i, i)];
                }
            } else {
                for i in (0..n).rev() {
                    let s: f64 = (i + 1..n).map(|j| r[(i, j)] * x[j]).sum();
                    x[i] = (b[i] - s) / r[(i, i)];
                }
            }
            x
        };
        let power = |f: &dyn Fn(&[f64]) -> Vec<f64>| {
            let mut x: Vec<f64> = (0..n).map(|i| 1.0 + (i as f64 * 0.37).sin()).collect();
            let mut lam = 0.0;
            for _ in 0..60 {
                let y = f(&x);
                lam = y.iter().map(|t| t * t).sum::<f64>().sqrt();
                x = y.iter().map(|t| t / lam).collect();
            }
            lam
        };
        let smax2 = power(&|x| mul(&mul(x, false), true));
        let smin2inv = power(&|x| solve(&solve(x, true), false));
        (smax2 * smin2inv).sqrt()
    }

    /// Compares `st` with a fresh factorisation of (Ã, b): R up to row signs within
    /// 10·m·u·κ₂·‖Ã‖; x within the LS perturbation bound 10·m·u·(κ₂ + κ₂²‖r‖/(‖Ã‖‖x‖));
    /// residual norms within 10·m·u·(1 + 2κ₂)·‖b‖ (Golub & Van Loan Thm 5.3.1);
    /// m = `m_op` as in [`check_properties`].
    pub fn check_against_refactor<T: Scalar>(st: &CpuQr<T>, a: &Mat<T>, b: &Mat<T>, m_op: usize) {
        let (m, n) = (a.nrows(), a.ncols());
        let fresh = factor(a, b, QPolicy::Full).expect("refactorisation");
        let tol = tol::<T>(m_op.max(m));
        let kappa = cond(&fresh.r, n);
        let anorm = a.norm_fro();
        let mut dr = 0.0f64;
        for i in 0..n {
            let s1 = st.r[(i, i)].to_f64().signum();
            let s2 = fresh.r[(i, i)].to_f64().signum();
            for j in i..n {
                dr += (s1 * st.r[(i, j)].to_f64() - s2 * fresh.r[(i, j)].to_f64()).powi(2);
            }
        }
        let dr = dr.sqrt();
        assert!(dr <= tol * kappa * anorm, "‖R − R̂‖ = {dr:e}, κ = {kappa:e}");
        let (x, res) = ls_of(st);
        let (xr, resr) = ls_of(&fresh);
        for k in 0..st.dims.q {
            let xn = (0..n).map(|i| xr[(i, k)].powi(2)).sum::<f64>().sqrt();
            let dx = (0..n)
                .map(|i| (x[(i, k)] - xr[(i, k)]).powi(2))
                .sum::<f64>()
                .sqrt();
            let bound = tol * (kappa + kappa * kappa * resr[k] / (anorm * xn));
            assert!(dx <= bound * xn, "e_x = {:e} > {bound:e}", dx / xn);
            let bn = b
                .col(k)
                .iter()
                .map(|t| t.to_f64().powi(2))
                .sum::<f64>()
                .sqrt();
            let dres = (res[k] - resr[k]).abs();
            assert!(
                dres <= tol * (1.0 + 2.0 * kappa) * bn,
                "residual {} vs {}",
                res[k],
                resr[k]
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::*;
    use super::*;
    use crate::backend::QrUpdate;
    use crate::base::mat::Mat;
    use crate::ops::test_support::{assert_refused, full_dims, qless_state};

    fn case<T: Scalar>(seed: u64, m: usize, n: usize, p: usize, k0: usize, nb: Option<usize>) {
        let mut g = rng(seed);
        let a = rand_mat::<T>(&mut g, m, n);
        let b = rand_mat::<T>(&mut g, m, 2);
        let u = rand_mat::<T>(&mut g, m, p);
        let mut st = factor(&a, &b, QPolicy::Full).unwrap();
        let mut prm = st.params();
        prm.block_size = nb;
        st.set_params(prm);
        st.insert_cols(k0, u.as_ref()).unwrap();
        let at = crate::base::splice::cols_inserted(&a, k0, &u);
        check_properties(&st, &at, &b, m);
        check_against_refactor(&st, &at, &b, m);
    }

    fn sweep<T: Scalar>() {
        for &(m, n, p) in &[
            (2, 1, 1),
            (3, 1, 2),
            (3, 2, 1),
            (31, 7, 1),
            (33, 31, 2),
            (33, 20, 9),
            (127, 33, 5),
            (257, 127, 31),
        ] {
            for k0 in [0, n / 2, n] {
                case::<T>((m * 1000 + n * 10 + k0) as u64, m, n, p, k0, None);
            }
        }
        // Several Householder panels in step 2 (n_b = 3 for p = 7), and n_b = 1.
        case::<T>(11, 61, 29, 7, 13, Some(3));
        case::<T>(12, 61, 29, 7, 29, Some(1));
    }

    #[test]
    fn insert_cols_matches_refactorisation_f64() {
        sweep::<f64>();
    }

    #[test]
    fn insert_cols_matches_refactorisation_f32() {
        sweep::<f32>();
    }

    #[test]
    fn plan_rejects_bad_arguments() {
        let dims = full_dims(10, 4, 1);
        let u = rand_mat::<f64>(&mut rng(1), 10, 3);
        assert!(plan(dims, 4, u.as_ref(), None).is_ok());
        let e = Mat::<f64>::zeros(10, 0);
        assert!(matches!(
            plan(dims, 0, e.as_ref(), None),
            Err(Error::EmptyBlock { .. })
        ));
        let short = rand_mat::<f64>(&mut rng(2), 9, 2);
        assert!(matches!(
            plan(dims, 0, short.as_ref(), None),
            Err(Error::Shape {
                got: 9,
                expected: 10,
                ..
            })
        ));
        assert!(matches!(
            plan(dims, 5, u.as_ref(), None),
            Err(Error::OutOfRange { k0: 5, .. })
        ));
        let wide = rand_mat::<f64>(&mut rng(3), 10, 7);
        assert!(matches!(
            plan(dims, 0, wide.as_ref(), None),
            Err(Error::Underdetermined { m: 10, n: 11, .. })
        ));
        let mut bad = u.clone();
        bad[(7, 2)] = f64::NAN;
        assert!(matches!(
            plan(dims, 0, bad.as_ref(), None),
            Err(Error::NonFinite { row: 7, col: 2, .. })
        ));
        assert!(matches!(
            plan(dims, 0, u.as_ref(), Some(0)),
            Err(Error::InvalidParam { .. })
        ));
        let qless = Dims {
            policy: QPolicy::None,
            ..dims
        };
        // without Q the paths say what they need (NeedsData), not the plan
        assert!(plan(qless, 0, u.as_ref(), None).is_ok());
    }

    #[test]
    fn qless_state_is_refused_and_unchanged() {
        let mut g = rng(21);
        let mut st = qless_state::<f64>(&mut g, 33, 7);
        let u = rand_mat::<f64>(&mut g, 33, 2);
        let snap = st.clone();
        assert_refused!(
            st.insert_cols(3, u.as_ref()),
            Error::NeedsData { .. },
            same_state(&st, &snap)
        );
    }

    #[test]
    fn dependent_column_is_rank_deficient_and_unchanged() {
        for (seed, k0) in [(31u64, 0usize), (32, 5), (33, 9)] {
            let mut g = rng(seed);
            let a = rand_mat::<f64>(&mut g, 31, 9);
            let b = rand_mat::<f64>(&mut g, 31, 1);
            let mut st = factor(&a, &b, QPolicy::Full).unwrap();
            let snap = st.clone();
            // Column 4 of A, inserted again: the new matrix has two equal columns.
            let dup: Vec<f64> = a.col(4).to_vec();
            let err = st.insert_col(k0, &dup).unwrap_err();
            assert!(matches!(err, Error::RankDeficient { .. }), "{err}");
            assert!(same_state(&st, &snap));
            let mut g32 = rng(seed);
            let a32 = rand_mat::<f32>(&mut g32, 31, 9);
            let b32 = rand_mat::<f32>(&mut g32, 31, 1);
            let mut st32 = factor(&a32, &b32, QPolicy::Full).unwrap();
            let snap32 = st32.clone();
            let dup32: Vec<f32> = a32.col(2).to_vec();
            assert_refused!(
                st32.insert_col(k0, &dup32),
                Error::RankDeficient { .. },
                same_state(&st32, &snap32)
            );
        }
    }
}
