//! Least-squares solve from a factorisation (spec §1.1, §5.1 F2; S0 §2.1, eq. 5.12):
//! x = R₁⁻¹ d(0:n) by back substitution per right-hand side, and the minimum
//! residual ‖d(n:m)‖₂ (scaled, in f64). Cost n²·q. Erratum E2 (norms) corrected.
#![forbid(unsafe_code)]

use crate::backend::Solution;
use crate::cpu::Dims;
use crate::error::{Error, Result};
use crate::mat::Mat;
use crate::scalar::Scalar;

const OP: &str = "solve";

/// Scaled 2-norm of `x` in f64 (max |xᵢ|, then Σ(xᵢ/scale)²), as LAPACK `xNRM2`.
pub(crate) fn nrm2_f64<T: Scalar>(x: &[T]) -> f64 {
    let scale = x.iter().fold(0.0f64, |s, v| s.max(v.to_f64().abs()));
    if scale == 0.0 || !scale.is_finite() {
        return scale;
    }
    let ssq: f64 = x
        .iter()
        .map(|v| {
            let t = v.to_f64() / scale;
            t * t
        })
        .sum();
    scale * ssq.sqrt()
}

/// Solves min ‖Ax − b‖₂ from R (m×n upper trapezoidal) and d = Qᵀb (m×q): x = R₁⁻¹ d(0:n)
/// by back substitution for every right-hand side, and `residual_norms[j]` = ‖d(n:m, j)‖₂
/// (spec §1.1). `n` is the number of columns of the current problem (`r.ncols()`).
///
/// # Errors
/// [`Error::Shape`] if `n ≠ r.ncols()`, `n > r.nrows()` or `d.nrows() ≠ r.nrows()`;
/// [`Error::RankDeficient`] if some R_jj is exactly 0 (the state's rank check
/// normally rules this out).
///
/// # Examples
/// ```
/// use cuqr::Mat;
/// use cuqr::qr::solve::solve_cpu;
/// // R = [[2, 1], [0, 4], [0, 0]], d = [4, 8, 3]: x = [1, 2], residual 3.
/// let r = Mat::<f64>::from_fn(3, 2, |i, j| [[2.0, 1.0], [0.0, 4.0], [0.0, 0.0]][i][j]);
/// let d = Mat::<f64>::from_col(&[4.0, 8.0, 3.0]);
/// let sol = solve_cpu(&r, &d, 2).unwrap();
/// assert_eq!((sol.x[(0, 0)], sol.x[(1, 0)]), (1.0, 2.0));
/// assert_eq!(sol.residual_norms, vec![3.0]);
/// ```
pub fn solve_cpu<T: Scalar>(r: &Mat<T>, d: &Mat<T>, n: usize) -> Result<Solution<T>> {
    let m = r.nrows();
    if n != r.ncols() {
        return Err(Error::Shape {
            op: OP,
            what: "columns of R",
            got: r.ncols(),
            expected: n,
        });
    }
    if n > m {
        return Err(Error::Underdetermined { op: OP, m, n });
    }
    if d.nrows() != m {
        return Err(Error::Shape {
            op: OP,
            what: "rows of d",
            got: d.nrows(),
            expected: m,
        });
    }
    if let Some(j) = (0..n).find(|&j| r[(j, j)] == T::ZERO) {
        return Err(Error::RankDeficient {
            column: j,
            r_jj: 0.0,
            tol: 0.0,
        });
    }
    let q = d.ncols();
    let mut x = Mat::zeros(n, q);
    let mut residual_norms = Vec::with_capacity(q);
    for c in 0..q {
        let dc = d.col(c);
        let xc = x.col_mut(c);
        xc.copy_from_slice(&dc[..n]);
        // Column-oriented back substitution: x_j = x_j / R_jj, then x(0:j) −= x_j R(0:j, j).
        for j in (0..n).rev() {
            let xj = xc[j] / r[(j, j)];
            xc[j] = xj;
            let rj = r.col(j);
            for i in 0..j {
                xc[i] = (-xj).mul_add(rj[i], xc[i]);
            }
        }
        residual_norms.push(nrm2_f64(&dc[n..]));
    }
    Ok(Solution { x, residual_norms })
}

/// GPU least-squares solve (spec §1.1): x = R₁⁻¹d(0:n) by cuBLAS trsm and the
/// residual norms ‖d(n:m, j)‖ by `reduce_nrm2`, downloaded to the host.
///
/// # Errors
/// [`Error::OutOfMemory`], [`Error::Driver`], [`Error::Cublas`].
pub fn solve_gpu<T: crate::gpu::GpuScalar>(st: &crate::gpu::GpuQr<T>) -> Result<Solution<T>> {
    use crate::gpu::{DevMat, DevVec, Diag, Op, Side, Uplo};
    let gpu = &st.gpu;
    let Dims { m, n, q, .. } = st.dims;
    let mut x = DevMat::<T>::zeros(gpu, n, q)?;
    gpu.panel_copy(&st.d.block(0, 0, n, q), &mut x.view_mut())?;
    gpu.trsm(
        Side::Left,
        Uplo::Upper,
        Op::N,
        Diag::NonUnit,
        T::ONE,
        &st.r.block(0, 0, n, n),
        &mut x.view_mut(),
    )?;
    let mut norms = DevVec::<T>::zeros(gpu, q)?;
    for c in 0..q {
        gpu.reduce_nrm2(&st.d.col(c, n..m), &mut norms.slice_mut(c..c + 1))?;
    }
    let residual_norms = norms.to_vec(gpu)?.iter().map(|v| v.to_f64()).collect();
    Ok(Solution {
        x: x.to_host(gpu)?,
        residual_norms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qr::factorize::tests::rand_mat;
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
