//! Insert p rows U (p×n) with right-hand-side rows e (p×q) at row k0
//! (docs/algorithms.md#row-insertion). Compact-WY row addition: reflector j acts on R's row j and
//! the p rows of U only, so V = [I; 0; V_U] and T comes from V_UᵀV_U alone. Cost ≈ 2pn² + O(n²),
//! independent of m (plus O(m·p·n) to carry Q). Q optional; with Q, Q̃ = Pᵀ diag(Q, I_p)
//! H₁⋯H_n puts the new rows at k0..k0+p. Corrected as in docs/algorithms.md#block-reflector-sign
//! (τ ≥ 0) and docs/algorithms.md#row-insertion-listing (U update).
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
mod plan;

pub use cpu::run_cpu;
pub use gpu::run_gpu;
pub(crate) use plan::plan;
use plan::OP;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::QrUpdate;
    use crate::base::mat::Mat;
    use crate::base::params::{FactorParams, QPolicy, UpdateParams};
    use crate::ops::factorize::tests::{check_against_refactor, rand_mat};
    use crate::ops::test_support::{assert_refused, full_state, same_factors};
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn dims() -> Dims {
        Dims {
            m: 10,
            n: 4,
            q: 2,
            policy: QPolicy::None,
        }
    }

    #[test]
    fn plan_cases() {
        let mut rng = StdRng::seed_from_u64(3);
        let u = rand_mat::<f64>(&mut rng, 3, 4);
        let e = rand_mat::<f64>(&mut rng, 3, 2);
        let pl = plan(dims(), 10, u.as_ref(), e.as_ref()).unwrap();
        assert_eq!((pl.k0, pl.p, pl.m_new), (10, 3, 13));
        assert!(plan(dims(), 0, u.as_ref(), e.as_ref()).is_ok());
        assert!(matches!(
            plan(dims(), 11, u.as_ref(), e.as_ref()),
            Err(Error::OutOfRange { k0: 11, n: 10, .. })
        ));
        let u0 = Mat::<f64>::zeros(0, 4);
        let e0 = Mat::<f64>::zeros(0, 2);
        assert!(matches!(
            plan(dims(), 0, u0.as_ref(), e0.as_ref()),
            Err(Error::EmptyBlock { .. })
        ));
        let u5 = rand_mat::<f64>(&mut rng, 3, 5);
        assert!(matches!(
            plan(dims(), 0, u5.as_ref(), e.as_ref()),
            Err(Error::Shape {
                what: "columns of u",
                ..
            })
        ));
        let e2 = rand_mat::<f64>(&mut rng, 2, 2);
        assert!(matches!(
            plan(dims(), 0, u.as_ref(), e2.as_ref()),
            Err(Error::Shape {
                what: "rows of e",
                ..
            })
        ));
        let e3 = rand_mat::<f64>(&mut rng, 3, 1);
        assert!(matches!(
            plan(dims(), 0, u.as_ref(), e3.as_ref()),
            Err(Error::Shape {
                what: "columns of e",
                ..
            })
        ));
        let mut ub = u.clone();
        ub[(2, 1)] = f64::NEG_INFINITY;
        assert!(matches!(
            plan(dims(), 0, ub.as_ref(), e.as_ref()),
            Err(Error::NonFinite {
                what: "u",
                row: 2,
                col: 1,
                ..
            })
        ));
        let mut eb = e.clone();
        eb[(0, 1)] = f64::NAN;
        assert!(matches!(
            plan(dims(), 0, u.as_ref(), eb.as_ref()),
            Err(Error::NonFinite {
                what: "e",
                row: 0,
                col: 1,
                ..
            })
        ));
    }

    fn run_case<T: Scalar>(seed: u64, m: usize, n: usize, k0: usize, p: usize, nb: Option<usize>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let a = rand_mat::<T>(&mut rng, m, n);
        let b = rand_mat::<T>(&mut rng, m, 2);
        let u = rand_mat::<T>(&mut rng, p, n);
        let e = rand_mat::<T>(&mut rng, p, 2);
        let insert = |x: &Mat<T>, y: &Mat<T>| crate::base::splice::rows_inserted(x, k0, y);
        let (a_new, b_new) = (insert(&a, &u), insert(&b, &e));
        for policy in [QPolicy::Full, QPolicy::None] {
            let mut st =
                CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
            st.set_params(UpdateParams {
                block_size: nb,
                ..UpdateParams::default()
            });
            st.insert_rows(k0, u.as_ref(), e.as_ref()).unwrap();
            assert_eq!((st.nrows(), st.ncols()), (m + p, n));
            check_against_refactor(&st, &a_new, &b_new);
            if let Some(q) = st.q.as_ref() {
                // d̃ = Q̃ᵀ b̃ (row order of d consistent with Q̃'s columns).
                let qtb = q.transpose().matmul(&b_new);
                let tol = 10.0 * (m + p) as f64 * T::UNIT_ROUNDOFF * b_new.norm_fro();
                for c in 0..2 {
                    for i in 0..m + p {
                        assert!((qtb[(i, c)] - st.d[(i, c)]).to_f64().abs() <= tol);
                    }
                }
            }
        }
    }

    #[test]
    fn insert_rows_matches_refactor_f64() {
        for &(m, n, k0, p, nb) in &[
            (1usize, 1usize, 0usize, 1usize, None),
            (1, 1, 1, 2, Some(3)),
            (33, 31, 0, 1, None),
            (33, 31, 17, 1, Some(4)),
            (33, 31, 33, 1, None),
            (127, 61, 0, 7, Some(5)),
            (127, 61, 60, 13, Some(100)),
            (127, 61, 127, 33, None),
            (45, 45, 20, 70, Some(8)),
            (257, 127, 3, 5, Some(31)),
        ] {
            run_case::<f64>(m as u64 + 17 * k0 as u64 + p as u64, m, n, k0, p, nb);
        }
    }

    #[test]
    fn insert_rows_matches_refactor_f32() {
        for &(m, n, k0, p, nb) in &[
            (33usize, 31usize, 0usize, 1usize, None),
            (127, 61, 40, 9, Some(3)),
            (127, 61, 127, 2, None),
            (257, 33, 100, 31, Some(64)),
        ] {
            run_case::<f32>(3 * m as u64 + k0 as u64 + p as u64, m, n, k0, p, nb);
        }
    }

    #[test]
    fn errors_leave_state_unchanged() {
        let mut rng = StdRng::seed_from_u64(77);
        let mut st = full_state(&mut rng, 37, 11, 2);
        let u = rand_mat::<f64>(&mut rng, 3, 11);
        let e = rand_mat::<f64>(&mut rng, 3, 2);
        let snap = st.clone();
        let same = |s: &CpuQr<f64>| same_factors(s, &snap);
        assert_refused!(
            st.insert_rows(38, u.as_ref(), e.as_ref()),
            Error::OutOfRange { .. },
            same(&st)
        );
        assert_refused!(
            st.insert_rows(2, u.as_ref(), u.as_ref()),
            Error::Shape { .. },
            same(&st)
        );
        let mut ub = u.clone();
        ub[(1, 5)] = f64::NAN;
        assert_refused!(
            st.insert_rows(2, ub.as_ref(), e.as_ref()),
            Error::NonFinite { .. },
            same(&st)
        );
        st.params.block_size = Some(0);
        assert_refused!(
            st.insert_rows(2, u.as_ref(), e.as_ref()),
            Error::InvalidParam { .. },
            same(&st)
        );
        st.params.block_size = None;
        // A single huge row raises ‖R̃‖_F by 1e9 but adds rank one only: with a relative
        // tolerance of 1e-6 the update is rejected after it has been computed.
        st.rank_tol = 1e-6;
        let huge = Mat::from_fn(1, 11, |_, j| 1e9 * (1.0 + j as f64));
        let e1 = rand_mat::<f64>(&mut rng, 1, 2);
        assert_refused!(
            st.insert_rows(5, huge.as_ref(), e1.as_ref()),
            Error::RankDeficient { .. },
            same(&st)
        );
        // The same state accepts a sensible row.
        st.insert_rows(5, u.as_ref(), e.as_ref()).unwrap();
        assert_eq!(st.nrows(), 40);
    }
}

/// The one-launch path (`row_insert_qr`) against the CPU update and the blocked GPU
/// path, on the GPU (skips without one).
#[cfg(test)]
mod gpu_tests {
    use super::gpu::run_gpu_path;
    use super::*;
    use crate::backend::QrUpdate;
    use crate::base::params::{FactorParams, QPolicy};
    use crate::gpu::runtime::GpuScalar;
    use crate::ops::factorize::tests::{lower_is_zero, rand_mat, rel_diff};
    use crate::state::gpu::GpuQr;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::sync::Arc;

    /// Random data of magnitude `scale`: the one-launch and blocked GPU paths against the
    /// CPU update.
    #[allow(clippy::too_many_arguments)]
    fn case<T: GpuScalar>(
        g: &Arc<crate::gpu::runtime::Gpu>,
        seed: u64,
        (m, n, q, p, k0): (usize, usize, usize, usize, usize),
        scale: f64,
    ) {
        let what = format!(
            "{} m={m} n={n} q={q} p={p} k0={k0} scale={scale:e}",
            core::any::type_name::<T>()
        );
        let mut rng = StdRng::seed_from_u64(seed);
        let s = T::from_f64(scale);
        let mut data = |rows, cols| {
            let x = rand_mat::<T>(&mut rng, rows, cols);
            crate::base::mat::Mat::from_fn(rows, cols, |i, j| x[(i, j)] * s)
        };
        let (a, b, u, e) = (data(m, n), data(m, q), data(p, n), data(p, q));
        assert!(
            g.row_insert_plan::<T>(n, q, p).unwrap().is_some(),
            "{what}: the one-launch path must apply"
        );
        let params = FactorParams::default();
        let mut cs = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::None, params).unwrap();
        cs.insert_rows(k0, u.as_ref(), e.as_ref()).unwrap();
        let tol = 10.0 * (m + p) as f64 * T::UNIT_ROUNDOFF;
        for one_launch in [true, false] {
            let mut gs =
                GpuQr::factorize(g, a.as_ref(), b.as_ref(), QPolicy::None, params).unwrap();
            run_gpu_path(&mut gs, k0, u.as_ref(), e.as_ref(), one_launch).unwrap();
            assert_eq!(gs.dims.m, m + p, "{what}");
            let (r, d, rho) = (
                gs.r.to_host(g).unwrap(),
                gs.d.to_host(g).unwrap(),
                gs.rho.clone(),
            );
            assert!(
                lower_is_zero(&r),
                "{what} one_launch={one_launch}: R not upper triangular"
            );
            for (k, (x, y)) in rho.iter().zip(&cs.rho).enumerate() {
                let (x, y) = (x.to_f64(), y.to_f64());
                assert!(
                    (x - y).abs() <= tol * (scale + y),
                    "{what} one_launch={one_launch}: residual {k}: {x} vs the CPU's {y}"
                );
            }
            let er = rel_diff(&r, &cs.r);
            assert!(
                er <= tol,
                "{what} one_launch={one_launch}: R differs from the CPU by {er:.2e} > {tol:.2e}"
            );
            if q > 0 {
                let ed = rel_diff(&d, &cs.d);
                assert!(ed <= tol, "{what} one_launch={one_launch}: d differs from the CPU by {ed:.2e} > {tol:.2e}");
            }
        }
    }

    fn sweep<T: GpuScalar>(g: &Arc<crate::gpu::runtime::Gpu>) {
        // (m, n, q, p, k0): p = 1, p < 32, p = 33 (two elements a lane), p = 100;
        // n + q not multiples of 32; sizes up to ~1000 columns (several blocks).
        for (i, &(m, n, q, p, k0)) in [
            (7, 5, 1, 1, 3),
            (60, 37, 2, 20, 0),
            (130, 97, 1, 33, 130),
            (700, 501, 1, 20, 250),
            (1210, 1003, 3, 100, 5),
            (300, 250, 1, 256, 17),
        ]
        .iter()
        .enumerate()
        {
            case::<T>(g, 40 + i as u64, (m, n, q, p, k0), 1.0);
        }
    }

    /// Tails whose squares underflow or overflow (f64 1e∓200, f32 1e∓25): the reflectors
    /// take the scaled norm there, and R, d and the residuals keep their relative accuracy.
    fn tiny_and_huge<T: GpuScalar>(g: &Arc<crate::gpu::runtime::Gpu>) {
        let big = if T::UNIT_ROUNDOFF < 1e-10 {
            1e200
        } else {
            1e25
        };
        for (i, &shape) in [(60, 37, 2, 20, 0), (130, 97, 1, 40, 65)]
            .iter()
            .enumerate()
        {
            for scale in [1.0 / big, big] {
                case::<T>(g, 70 + i as u64, shape, scale);
            }
        }
    }

    /// The dense QR of [R; U] (`RowInsertion::Dense`) against the CPU update, every kind:
    /// its reflectors are the structured ones (the zeros under R's diagonal stay zeros), so
    /// R, d, Q (or Q₁) and the residual norms agree with the CPU's to rounding; a refused
    /// update leaves the state as it was.
    fn dense_sweep<T: GpuScalar>(g: &Arc<crate::gpu::runtime::Gpu>) {
        use crate::base::params::{RowInsertion, UpdateParams};
        // (m, n, q, p, k0): p = 1, p < n, p > n (U wider than tall is not needed: p rows of
        // n), the new rows first, inside and last; sizes not multiples of 32.
        for (i, &(m, n, q, p, k0)) in [
            (45, 45, 1, 1, 20),
            (60, 37, 2, 20, 0),
            (301, 97, 1, 150, 100),
            (130, 63, 3, 300, 130),
        ]
        .iter()
        .enumerate()
        {
            let mut rng = StdRng::seed_from_u64(90 + i as u64);
            let a = rand_mat::<T>(&mut rng, m, n);
            let b = rand_mat::<T>(&mut rng, m, q);
            let u = rand_mat::<T>(&mut rng, p, n);
            let e = rand_mat::<T>(&mut rng, p, q);
            let tol = 10.0 * (m + p) as f64 * T::UNIT_ROUNDOFF;
            for policy in [QPolicy::None, QPolicy::Thin, QPolicy::Full] {
                let what = format!(
                    "{} {policy:?} m={m} n={n} q={q} p={p} k0={k0}",
                    core::any::type_name::<T>()
                );
                let params = FactorParams::default();
                let mut cs = CpuQr::factorize(a.as_ref(), b.as_ref(), policy, params).unwrap();
                cs.insert_rows(k0, u.as_ref(), e.as_ref()).unwrap();
                let mut gs = GpuQr::factorize(g, a.as_ref(), b.as_ref(), policy, params).unwrap();
                gs.set_params(UpdateParams {
                    row_insertion: RowInsertion::Dense,
                    ..UpdateParams::default()
                });
                gs.insert_rows(k0, u.as_ref(), e.as_ref()).unwrap();
                assert_eq!(gs.dims.m, m + p, "{what}");
                let r = gs.r.to_host(g).unwrap();
                assert!(lower_is_zero(&r), "{what}: R not upper triangular");
                let mut pairs = vec![("R", r, &cs.r), ("d", gs.d.to_host(g).unwrap(), &cs.d)];
                if let (Some(gq), Some(cq)) = (gs.q.as_ref(), cs.q.as_ref()) {
                    pairs.push(("Q", gq.to_host(g).unwrap(), cq));
                }
                for (name, x, y) in pairs {
                    let err = rel_diff(&x, y);
                    assert!(
                        err <= tol,
                        "{what}: {name} differs from the CPU by {err:.2e} > {tol:.2e}"
                    );
                }
                for (k, (x, y)) in gs.rho.iter().zip(&cs.rho).enumerate() {
                    let (x, y) = (x.to_f64(), y.to_f64());
                    assert!(
                        (x - y).abs() <= tol * (1.0 + y),
                        "{what}: residual {k}: {x} vs the CPU's {y}"
                    );
                }
                // A huge row adds rank one but raises ‖R̃‖_F by 1e9: refused after the QR,
                // the state as it was.
                let before = (gs.r.to_host(g).unwrap(), gs.d.to_host(g).unwrap(), gs.dims);
                gs.rank_tol = 1e-6;
                let huge = crate::base::mat::Mat::from_fn(1, n, |_, j| {
                    T::from_f64(1e9 * (1.0 + j as f64))
                });
                let e1 = rand_mat::<T>(&mut rng, 1, q);
                assert!(
                    matches!(
                        gs.insert_rows(0, huge.as_ref(), e1.as_ref()),
                        Err(Error::RankDeficient { .. })
                    ),
                    "{what}: the huge row must be refused"
                );
                let after = (gs.r.to_host(g).unwrap(), gs.d.to_host(g).unwrap(), gs.dims);
                assert!(
                    rel_diff(&after.0, &before.0) == 0.0 && rel_diff(&after.1, &before.1) == 0.0,
                    "{what}: a refused insertion changed R or d"
                );
                assert_eq!(
                    after.2, before.2,
                    "{what}: a refused insertion changed the shape"
                );
            }
        }
    }

    #[test]
    fn dense_row_insertion_matches_cpu_f64() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        dense_sweep::<f64>(&Arc::new(g));
    }

    #[test]
    fn dense_row_insertion_matches_cpu_f32() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        dense_sweep::<f32>(&Arc::new(g));
    }

    #[test]
    fn one_launch_row_insertion_matches_cpu_and_blocked_f64() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        sweep::<f64>(&Arc::new(g));
    }

    #[test]
    fn one_launch_row_insertion_matches_cpu_and_blocked_f32() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        sweep::<f32>(&Arc::new(g));
    }

    #[test]
    fn one_launch_row_insertion_of_tiny_and_huge_rows() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        let g = Arc::new(g);
        tiny_and_huge::<f64>(&g);
        tiny_and_huge::<f32>(&g);
    }
}
