//! Delete p columns at k0 (docs/algorithms.md#column-deletion). After shifting R's
//! columns, reflectors of length p+1 clear the p sub-diagonals; blocks of n_b of them
//! have V/T (W/Y) of p + n_b rows (docs/algorithms.md#column-deletion-block-height) and touch only
//! the trailing columns, d and
//! (when held) Q's columns. Cost O((n−k0−p)²·p), independent of m (plus O(m·p·(n−k0−p))
//! for Q). Fast path k0 = n−p: truncation only. Q optional. Corrected as in
//! docs/algorithms.md#column-deletion-wording and docs/algorithms.md#column-deletion-block-height.
#![forbid(unsafe_code)]

use crate::base::dims::Dims;
use crate::base::error::{Error, Result};
use crate::base::params::QPolicy;
use crate::base::scalar::Scalar;
use crate::cpu::wy::resolve_block_size;
use crate::state::cpu::CpuQr;

mod cpu;
mod gpu;
mod plan;
mod thin_chain;

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

    fn dims(n: usize) -> Dims {
        Dims {
            m: 40,
            n,
            q: 1,
            policy: QPolicy::None,
        }
    }

    #[test]
    fn plan_cases() {
        assert!(matches!(plan(dims(5), 2, 0), Err(Error::EmptyBlock { .. })));
        assert!(matches!(
            plan(dims(5), 3, 3),
            Err(Error::OutOfRange {
                k0: 3,
                p: 3,
                n: 5,
                ..
            })
        ));
        assert!(matches!(plan(dims(5), 0, 6), Err(Error::OutOfRange { .. })));
        assert!(matches!(
            plan(dims(5), usize::MAX, 2),
            Err(Error::OutOfRange { .. })
        ));
        assert!(matches!(
            plan(dims(5), 0, 5),
            Err(Error::InvalidParam { what: "p", .. })
        ));
        let pl = plan(dims(5), 3, 2).unwrap();
        assert!(pl.is_truncation() && pl.n_new == 3);
        assert!(!plan(dims(5), 0, 2).unwrap().is_truncation());
    }

    fn run_case<T: Scalar>(seed: u64, m: usize, n: usize, k0: usize, p: usize, nb: Option<usize>) {
        let mut rng = StdRng::seed_from_u64(seed);
        let a = rand_mat::<T>(&mut rng, m, n);
        let b = rand_mat::<T>(&mut rng, m, 2);
        let a_new = Mat::from_fn(
            m,
            n - p,
            |i, j| if j < k0 { a[(i, j)] } else { a[(i, j + p)] },
        );
        for policy in [QPolicy::Full, QPolicy::None] {
            let mut st =
                CpuQr::factorize(a.as_ref(), b.as_ref(), policy, FactorParams::default()).unwrap();
            st.set_params(UpdateParams {
                block_size: nb,
                ..UpdateParams::default()
            });
            st.delete_cols(k0, p).unwrap();
            assert_eq!(st.ncols(), n - p);
            check_against_refactor(&st, &a_new, &b);
        }
    }

    #[test]
    fn delete_cols_matches_refactor_f64() {
        for &(m, n, k0, p, nb) in &[
            (33usize, 31usize, 0usize, 1usize, None),
            (33, 31, 15, 1, Some(4)),
            (33, 31, 30, 1, None),
            (127, 61, 0, 7, Some(5)),
            (127, 61, 20, 13, Some(100)),
            (127, 61, 54, 7, None),
            (257, 127, 3, 33, Some(17)),
            (45, 3, 1, 2, None),
            (31, 2, 0, 1, Some(1)),
        ] {
            run_case::<f64>(m as u64 + 31 * k0 as u64 + p as u64, m, n, k0, p, nb);
        }
    }

    #[test]
    fn delete_cols_matches_refactor_f32() {
        for &(m, n, k0, p, nb) in &[
            (33usize, 31usize, 0usize, 1usize, None),
            (127, 61, 30, 5, Some(3)),
            (127, 61, 56, 5, None),
            (257, 33, 0, 31, Some(64)),
        ] {
            run_case::<f32>(7 * m as u64 + k0 as u64 + p as u64, m, n, k0, p, nb);
        }
    }

    #[test]
    fn errors_leave_state_unchanged() {
        let mut rng = StdRng::seed_from_u64(42);
        let mut st = full_state(&mut rng, 37, 11, 2);
        let snap = st.clone();
        let same = |s: &CpuQr<f64>| same_factors(s, &snap);
        assert_refused!(st.delete_cols(3, 0), Error::EmptyBlock { .. }, same(&st));
        assert_refused!(st.delete_cols(8, 4), Error::OutOfRange { .. }, same(&st));
        assert_refused!(st.delete_cols(0, 11), Error::InvalidParam { .. }, same(&st));
        st.params.block_size = Some(0);
        assert_refused!(st.delete_cols(2, 3), Error::InvalidParam { .. }, same(&st));
        st.params.block_size = None;
        // A rank test that the result cannot pass: the failure is detected after the
        // update is computed, and nothing is written.
        st.rank_tol = 0.9;
        for k0 in [2, 8] {
            assert_refused!(
                st.delete_cols(k0, 3),
                Error::RankDeficient { .. },
                same(&st)
            );
        }
    }
}

/// The one-launch band (`row_insert_band_qr`) against the CPU update and the blocked GPU
/// path, on the GPU (skips without one).
#[cfg(test)]
mod gpu_tests {
    use super::gpu::run_gpu_path;
    use super::*;
    use crate::backend::QrUpdate;
    use crate::base::params::{FactorParams, QPolicy, UpdateParams};
    use crate::gpu::runtime::GpuScalar;
    use crate::ops::factorize::tests::{lower_is_zero, rand_mat, rel_diff};
    use crate::state::gpu::GpuQr;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::sync::Arc;

    #[allow(clippy::too_many_arguments)]
    fn case<T: GpuScalar>(
        g: &Arc<crate::gpu::runtime::Gpu>,
        seed: u64,
        m: usize,
        n: usize,
        q: usize,
        k0: usize,
        p: usize,
        nb: Option<usize>,
    ) {
        let what = format!(
            "{} m={m} n={n} q={q} k0={k0} p={p} nb={nb:?}",
            core::any::type_name::<T>()
        );
        let mut rng = StdRng::seed_from_u64(seed);
        let a = rand_mat::<T>(&mut rng, m, n);
        let b = rand_mat::<T>(&mut rng, m, q);
        assert!(
            g.band_qr_plan::<T>(n - p - k0, q, p).unwrap().is_some(),
            "{what}: the one-launch path must apply"
        );
        let params = FactorParams::default();
        let up = UpdateParams {
            block_size: nb,
            ..UpdateParams::default()
        };
        let mut cs = CpuQr::factorize(a.as_ref(), b.as_ref(), QPolicy::None, params).unwrap();
        cs.set_params(up);
        cs.delete_cols(k0, p).unwrap();
        let tol = 10.0 * m as f64 * T::UNIT_ROUNDOFF;
        for one_launch in [true, false] {
            let mut gs =
                GpuQr::factorize(g, a.as_ref(), b.as_ref(), QPolicy::None, params).unwrap();
            gs.set_params(up);
            let launches = g.launch_count();
            run_gpu_path(&mut gs, k0, p, one_launch).unwrap();
            if one_launch {
                // Two column moves, d's copy, the scratch V and the band: no per-panel
                // launches (the rank check adds a fixed few).
                let used = g.launch_count() - launches;
                assert!(used <= 20, "{what}: {used} launches on the one-launch path");
            }
            assert_eq!(gs.dims.n, n - p, "{what}");
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
                    (x - y).abs() <= tol * (1.0 + y),
                    "{what} one_launch={one_launch}: residual {k}: {x} vs the CPU's {y}"
                );
            }
            let er = rel_diff(&r, &cs.r);
            assert!(
                er <= tol,
                "{what} one_launch={one_launch}: R differs from the CPU by {er:.2e} > {tol:.2e}"
            );
            let ed = rel_diff(&d, &cs.d);
            assert!(
                ed <= tol,
                "{what} one_launch={one_launch}: d differs from the CPU by {ed:.2e} > {tol:.2e}"
            );
        }
    }

    fn sweep<T: GpuScalar>(g: &Arc<crate::gpu::runtime::Gpu>) {
        // (m, n, q, k0, p, nb): one band column, p = 1, p < 32, p = 33 (two elements a
        // lane), the seeds' BS shape scaled down (1000 band columns, p = 200, n_b 1 and
        // 10), p = 256; n + q not multiples of 32; several blocks.
        for (i, &(m, n, q, k0, p, nb)) in [
            (9, 6, 1, 2, 3, None),
            (45, 31, 2, 0, 1, Some(1)),
            (130, 97, 1, 40, 20, Some(10)),
            (301, 260, 3, 17, 33, None),
            (1300, 1200, 1, 0, 200, Some(1)),
            (1250, 1203, 2, 103, 200, Some(10)),
            (700, 600, 1, 250, 256, None),
        ]
        .iter()
        .enumerate()
        {
            case::<T>(g, 90 + i as u64, m, n, q, k0, p, nb);
        }
    }

    #[test]
    fn one_launch_band_matches_cpu_and_blocked_f64() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        sweep::<f64>(&Arc::new(g));
    }

    #[test]
    fn one_launch_band_matches_cpu_and_blocked_f32() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        sweep::<f32>(&Arc::new(g));
    }

    #[test]
    fn bands_wider_than_256_take_the_blocked_path() {
        let Some(g) = crate::gpu::algo::householder::tests_gate() else {
            return;
        };
        assert_eq!(g.band_qr_plan::<f64>(100, 1, 257).unwrap(), None);
        // States with Q keep the blocked path whatever the band (checked by the update
        // tests against the CPU with Q).
        let mut rng = StdRng::seed_from_u64(5);
        let a = rand_mat::<f64>(&mut rng, 400, 300);
        let b = rand_mat::<f64>(&mut rng, 400, 1);
        let g = Arc::new(g);
        let mut gs = GpuQr::factorize(
            &g,
            a.as_ref(),
            b.as_ref(),
            QPolicy::None,
            FactorParams::default(),
        )
        .unwrap();
        let mut cs = CpuQr::factorize(
            a.as_ref(),
            b.as_ref(),
            QPolicy::None,
            FactorParams::default(),
        )
        .unwrap();
        gs.delete_cols(10, 270).unwrap();
        cs.delete_cols(10, 270).unwrap();
        assert!(lower_is_zero(&gs.r.to_host(&g).unwrap()));
        let r = crate::backend::QrUpdate::r(&gs).unwrap();
        assert!(rel_diff(&r, &cs.r) <= 10.0 * 400.0 * f64::EPSILON / 2.0);
    }
}
