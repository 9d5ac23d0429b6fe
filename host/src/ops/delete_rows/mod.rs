//! Delete rows k0..k0+p of A (docs/algorithms.md#row-deletion). Givens rotations on
//! the columns of Q zero Z = Q(k0:k0+p, :) right of its diagonal; pm − p(p+1)/2 rotations,
//! each on a Q column pair (m entries), d, and R rows only where they are nonzero
//! (docs/algorithms.md#live-column-range), ≈ 6pm² + 3pn² flops. Corrected as in
//! docs/algorithms.md#row-deletion-factor-transpose (GᵀR, not GR) and
//! docs/algorithms.md#row-deletion-listing (Z is rows k0..k0+p, all columns; p, not
//! `pnumadded`). Needs Q.
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
pub(crate) use gpu::thin_refusal;
pub use gpu::{run_gpu, run_gpu_given};
use plan::OP;
pub(crate) use plan::{plan, plan_given, Plan};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::QrUpdate;
    use crate::base::mat::Mat;
    use crate::ops::insert_cols::testkit::*;
    use crate::ops::test_support::{assert_refused, full_dims, qless_state};

    /// Rows of `a` outside k0..k0+p.
    fn removed<T: Scalar>(a: &Mat<T>, k0: usize, p: usize) -> Mat<T> {
        Mat::from_fn(a.nrows() - p, a.ncols(), |i, j| {
            a[(if i < k0 { i } else { i + p }, j)]
        })
    }

    fn case<T: Scalar>(seed: u64, m: usize, n: usize, p: usize, k0: usize) {
        let mut g = rng(seed);
        let a = rand_mat::<T>(&mut g, m, n);
        let b = rand_mat::<T>(&mut g, m, 2);
        let mut st = factor(&a, &b, QPolicy::Full).unwrap();

        // Before the first p rows and columns are dropped: Δ = I, Q(rows ∉ block, 0:p) = 0,
        // and the strictly lower part of (GᵀR)(p:m, :) is rounding residue only.
        let pl = plan(st.dims, k0, p).unwrap();
        let rot =
            crate::cpu::delete_rows::rotate_out(st.q.as_ref().unwrap(), &st.r, &st.d, pl.k0, pl.p);
        let tol = tol::<T>(m);
        let (mut e_delta, mut low) = (0.0f64, 0.0f64);
        for i in 0..m {
            for j in 0..p {
                let want = (i >= k0 && i - k0 == j) as u8 as f64;
                e_delta += (rot.q[(i, j)].to_f64() - want).powi(2);
            }
        }
        for j in 0..n {
            for i in j + 1..m - p {
                low += rot.r[(i + p, j)].to_f64().powi(2);
            }
        }
        assert!(
            e_delta.sqrt() <= tol,
            "‖Q(:, 0:p) − [I; 0]‖ = {:e}",
            e_delta.sqrt()
        );
        assert!(
            low.sqrt() <= tol * a.norm_fro(),
            "residue below R̃'s diagonal {:e}",
            low.sqrt()
        );

        st.delete_rows(k0, p).unwrap();
        let (at, bt) = (removed(&a, k0, p), removed(&b, k0, p));
        check_properties(&st, &at, &bt, m);
        check_against_refactor(&st, &at, &bt, m);
    }

    fn sweep<T: Scalar>() {
        for &(m, n, p) in &[
            (2, 1, 1),
            (3, 1, 2),
            (3, 2, 1),
            (33, 7, 1),
            (33, 31, 2),
            (33, 20, 9),
            (127, 33, 5),
            (257, 127, 31),
        ] {
            for k0 in [0, (m - p) / 2, m - p] {
                case::<T>((m * 1000 + n * 10 + k0) as u64, m, n, p, k0);
            }
        }
    }

    #[test]
    fn delete_rows_matches_refactorisation_f64() {
        sweep::<f64>();
    }

    #[test]
    fn delete_rows_matches_refactorisation_f32() {
        sweep::<f32>();
    }

    #[test]
    fn plan_rejects_bad_arguments() {
        let dims = full_dims(10, 4, 1);
        assert!(plan(dims, 4, 6).is_ok());
        assert!(matches!(plan(dims, 0, 0), Err(Error::EmptyBlock { .. })));
        assert!(matches!(
            plan(dims, 5, 6),
            Err(Error::OutOfRange {
                k0: 5,
                p: 6,
                n: 10,
                ..
            })
        ));
        assert!(matches!(
            plan(dims, usize::MAX, 2),
            Err(Error::OutOfRange { .. })
        ));
        assert!(matches!(
            plan(dims, 0, 7),
            Err(Error::Underdetermined { m: 3, n: 4, .. })
        ));
        let qless = Dims {
            policy: QPolicy::None,
            ..dims
        };
        // without Q the paths say what they need (NeedsData), not the plan
        assert!(plan(qless, 0, 1).is_ok());
    }

    #[test]
    fn qless_state_is_refused_and_unchanged() {
        let mut st = qless_state::<f32>(&mut rng(41), 33, 7);
        let snap = st.clone();
        assert_refused!(
            st.delete_rows(3, 2),
            Error::NeedsData { .. },
            same_state(&st, &snap)
        );
    }

    fn rank_deficient_case<T: Scalar>(seed: u64, k0: usize) {
        // Column 3 equals column 1 except in the rows that are deleted: A has full rank,
        // Ã does not.
        let (m, n, p) = (31, 6, 3);
        let mut g = rng(seed);
        let mut a = rand_mat::<T>(&mut g, m, n);
        for i in (0..m).filter(|i| !(k0..k0 + p).contains(i)) {
            a[(i, 3)] = a[(i, 1)];
        }
        let b = rand_mat::<T>(&mut g, m, 1);
        let mut st = factor(&a, &b, QPolicy::Full).unwrap();
        let snap = st.clone();
        let err = st.delete_rows(k0, p).unwrap_err();
        assert!(
            matches!(err, Error::RankDeficient { column: 3, .. }),
            "{err}"
        );
        assert!(same_state(&st, &snap));
    }

    #[test]
    fn dependent_remainder_is_rank_deficient_and_unchanged() {
        for k0 in [0, 14, 28] {
            rank_deficient_case::<f64>(50 + k0 as u64, k0);
            rank_deficient_case::<f32>(60 + k0 as u64, k0);
        }
    }
}
