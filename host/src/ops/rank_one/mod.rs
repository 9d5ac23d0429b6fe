//! Rank-one update A + u vᵀ (docs/algorithms.md#rank-one-update; not in the published updates,
//! the textbook construction of Golub & Van Loan). w = Qᵀu (2m²); stage A reduces w to ±‖w‖e₁ (variant A2 when m > n+1: one Householder
//! on w(n:m), then n rotations; A1 otherwise: m−1 rotations), making R upper Hessenberg;
//! R(0,:) += w(0)·vᵀ; stage B restores triangularity with min(n, m−1) rotations.
//! ≈ 2m² + 6m(m+n) + O(n²) flops. Needs Q.
#![forbid(unsafe_code)]

use crate::base::dims::Dims;
use crate::base::error::{Error, Result};
use crate::base::mat::MatRef;
use crate::base::params::QPolicy;
use crate::base::scalar::Scalar;
use crate::state::cpu::CpuQr;

mod cpu;
mod gpu;
mod plan;

pub use cpu::run_cpu;
pub use gpu::{run_gpu, run_gpu_device};
use plan::OP;
pub(crate) use plan::{plan, plan_shape, Plan};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::QrUpdate;
    use crate::base::mat::Mat;
    use crate::ops::insert_cols::testkit::*;
    use crate::ops::test_support::{assert_refused, full_dims, qless_state};

    /// A + u vᵀ.
    fn updated<T: Scalar>(a: &Mat<T>, u: &[T], v: &[T]) -> Mat<T> {
        Mat::from_fn(a.nrows(), a.ncols(), |i, j| u[i].mul_add(v[j], a[(i, j)]))
    }

    fn case<T: Scalar>(seed: u64, m: usize, n: usize) {
        let mut g = rng(seed);
        let a = rand_mat::<T>(&mut g, m, n);
        let b = rand_mat::<T>(&mut g, m, 2);
        let u = rand_vec::<T>(&mut g, m);
        let v = rand_vec::<T>(&mut g, n);
        let mut st = factor(&a, &b, QPolicy::Full).unwrap();
        st.rank_one(&u, &v).unwrap();
        let at = updated(&a, &u, &v);
        check_properties(&st, &at, &b, m);
        check_against_refactor(&st, &at, &b, m);
    }

    fn sweep<T: Scalar>() {
        // m = n (A1, no Householder), m = n + 1 (A1), m > n + 1 (A2).
        for &(m, n) in &[
            (1, 1),
            (2, 1),
            (2, 2),
            (3, 1),
            (3, 2),
            (3, 3),
            (31, 31),
            (32, 31),
            (33, 7),
            (127, 33),
            (257, 127),
        ] {
            case::<T>((m * 1000 + n) as u64, m, n);
        }
    }

    #[test]
    fn rank_one_matches_refactorisation_f64() {
        sweep::<f64>();
    }

    #[test]
    fn rank_one_matches_refactorisation_f32() {
        sweep::<f32>();
    }

    #[test]
    fn repeated_updates_stay_accurate() {
        let (m, n) = (61, 29);
        let mut g = rng(77);
        let mut a = rand_mat::<f64>(&mut g, m, n);
        let b = rand_mat::<f64>(&mut g, m, 1);
        let mut st = factor(&a, &b, QPolicy::Full).unwrap();
        for _ in 0..5 {
            let u = rand_vec::<f64>(&mut g, m);
            let v = rand_vec::<f64>(&mut g, n);
            st.rank_one(&u, &v).unwrap();
            a = updated(&a, &u, &v);
        }
        // Five updates: the error may add up, at most 5 × the per-update target.
        check_properties(&st, &a, &b, 5 * m);
    }

    #[test]
    fn plan_rejects_bad_arguments() {
        let dims = full_dims(10, 4, 1);
        let u = rand_vec::<f64>(&mut rng(5), 10);
        let v = rand_vec::<f64>(&mut rng(6), 4);
        assert_eq!(
            plan(dims, &u, &v).unwrap(),
            Plan {
                m: 10,
                n: 4,
                householder_first: true
            }
        );
        assert!(matches!(
            plan(dims, &u[..9], &v),
            Err(Error::Shape {
                got: 9,
                expected: 10,
                ..
            })
        ));
        assert!(matches!(
            plan(dims, &u, &v[..3]),
            Err(Error::Shape {
                got: 3,
                expected: 4,
                ..
            })
        ));
        let mut bad = v.clone();
        bad[2] = f64::INFINITY;
        assert!(matches!(
            plan(dims, &u, &bad),
            Err(Error::NonFinite {
                what: "v",
                row: 2,
                ..
            })
        ));
        let mut badu = u.clone();
        badu[9] = f64::NAN;
        assert!(matches!(
            plan(dims, &badu, &v),
            Err(Error::NonFinite {
                what: "u",
                row: 9,
                ..
            })
        ));
        let qless = Dims {
            policy: QPolicy::None,
            ..dims
        };
        // without Q the paths say what they need (NeedsData), not the plan
        assert!(plan(qless, &u, &v).is_ok());
        let square = Dims { m: 5, n: 4, ..dims };
        assert!(!plan(square, &u[..5], &v).unwrap().householder_first);
    }

    #[test]
    fn qless_state_is_refused_and_unchanged() {
        let mut g = rng(91);
        let mut st = qless_state::<f64>(&mut g, 33, 7);
        let (u, v) = (rand_vec::<f64>(&mut g, 33), rand_vec::<f64>(&mut g, 7));
        let snap = st.clone();
        assert_refused!(
            st.rank_one(&u, &v),
            Error::NeedsData { .. },
            same_state(&st, &snap)
        );
    }

    fn zero_column_case<T: Scalar>(seed: u64, m: usize, n: usize, j: usize) {
        // u = −A(:, j), v = e_j: A + u vᵀ has a zero column j.
        let mut g = rng(seed);
        let a = rand_mat::<T>(&mut g, m, n);
        let b = rand_mat::<T>(&mut g, m, 1);
        let u: Vec<T> = a.col(j).iter().map(|&x| -x).collect();
        let v: Vec<T> = (0..n)
            .map(|k| if k == j { T::ONE } else { T::ZERO })
            .collect();
        let mut st = factor(&a, &b, QPolicy::Full).unwrap();
        let snap = st.clone();
        let err = st.rank_one(&u, &v).unwrap_err();
        assert!(
            matches!(err, Error::RankDeficient { column, .. } if column == j),
            "{err}"
        );
        assert!(same_state(&st, &snap));
    }

    #[test]
    fn cancelled_column_is_rank_deficient_and_unchanged() {
        for (m, n, j) in [(31, 9, 0), (33, 33, 16), (32, 31, 30)] {
            zero_column_case::<f64>(m as u64 + j as u64, m, n, j);
            zero_column_case::<f32>(m as u64 + j as u64, m, n, j);
        }
    }
}
