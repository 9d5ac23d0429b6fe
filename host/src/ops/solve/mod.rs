//! Least-squares solve from a factorisation (docs/algorithms.md#least-squares):
//! x = R₁⁻¹ d(0:n) by back substitution per right-hand side, and the minimum
//! residual ‖d(n:m)‖₂ (scaled, in f64). Cost n²·q. docs/algorithms.md#least-squares-norms (norms)
//! corrected.
#![forbid(unsafe_code)]

use crate::base::dims::Dims;
use crate::base::error::{Error, Result};
use crate::base::mat::Mat;
use crate::base::scalar::Scalar;
use crate::base::solution::Solution;

mod cpu;
mod gpu;
mod plan;

pub use cpu::solve_cpu;
pub use gpu::solve_gpu;
use plan::OP;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::solve::nrm2_f64;
    use crate::ops::factorize::tests::rand_mat;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn check<T: Scalar>(seed: u64, m: usize, n: usize, q: usize) {
        let mut rng = StdRng::seed_from_u64(seed);
        // Well-conditioned upper-triangular R: random with a dominant diagonal.
        let mut r = rand_mat::<T>(&mut rng, m, n);
        for j in 0..n {
            for i in j + 1..m {
                r[(i, j)] = T::ZERO;
            }
            let shift = T::from_f64(if r[(j, j)].to_f64() >= 0.0 { 2.0 } else { -2.0 });
            r[(j, j)] += shift;
        }
        let d = rand_mat::<T>(&mut rng, m, q);
        let sol = solve_cpu(&r, &d, n).unwrap();
        assert_eq!((sol.x.nrows(), sol.x.ncols()), (n, q));
        // R₁x = d(0:n) within a backward-error bound; residual = ‖d(n:m)‖.
        let tol = 10.0 * m as f64 * T::UNIT_ROUNDOFF;
        for c in 0..q {
            for i in 0..n {
                let mut acc = 0.0f64;
                for j in i..n {
                    acc += r[(i, j)].to_f64() * sol.x[(j, c)].to_f64();
                }
                let scale: f64 = (i..n)
                    .map(|j| (r[(i, j)].to_f64() * sol.x[(j, c)].to_f64()).abs())
                    .sum::<f64>()
                    + d[(i, c)].to_f64().abs();
                assert!((acc - d[(i, c)].to_f64()).abs() <= tol * scale, "row {i}");
            }
            let res: f64 = (n..m)
                .map(|i| d[(i, c)].to_f64().powi(2))
                .sum::<f64>()
                .sqrt();
            assert!((sol.residual_norms[c] - res).abs() <= 1e-14 * res.max(1e-300));
        }
    }

    #[test]
    fn back_substitution_and_residual() {
        check::<f64>(1, 1, 1, 1);
        check::<f64>(2, 33, 31, 3);
        check::<f64>(3, 257, 127, 2);
        check::<f32>(4, 127, 33, 2);
        check::<f32>(5, 31, 31, 1);
    }

    #[test]
    fn shape_errors_and_zero_pivot() {
        let mut rng = StdRng::seed_from_u64(9);
        let r = rand_mat::<f64>(&mut rng, 5, 3);
        let d = rand_mat::<f64>(&mut rng, 4, 1);
        assert!(matches!(solve_cpu(&r, &d, 3), Err(Error::Shape { .. })));
        let d = rand_mat::<f64>(&mut rng, 5, 1);
        assert!(matches!(solve_cpu(&r, &d, 2), Err(Error::Shape { .. })));
        let mut r0 = r.clone();
        r0[(1, 1)] = 0.0;
        assert!(matches!(
            solve_cpu(&r0, &d, 3),
            Err(Error::RankDeficient { column: 1, .. })
        ));
        assert!((nrm2_f64(&[3e300f64, 4e300]) / 5e300 - 1.0).abs() < 1e-15);
        assert!(nrm2_f64(&[0.0f32, 0.0]) == 0.0);
    }
}
