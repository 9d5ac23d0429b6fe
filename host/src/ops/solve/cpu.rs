//! The CPU path: validation, then the back substitution of `cpu/solve.rs`.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

/// Solves min ‖Ax − b‖₂ from R (m×n upper trapezoidal) and d = Qᵀb (m×q): x = R₁⁻¹ d(0:n)
/// by back substitution for every right-hand side, and `residual_norms[j]` = ‖d(n:m, j)‖₂
/// (docs/algorithms.md#least-squares). `n` is the number of columns of the current problem
/// (`r.ncols()`).
///
/// # Errors
/// [`Error::Shape`] if `n ≠ r.ncols()`, `n > r.nrows()` or `d.nrows() ≠ r.nrows()`;
/// [`Error::RankDeficient`] if some R_jj is exactly 0 (the state's rank check
/// normally rules this out).
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
    Ok(crate::cpu::solve::back_substitute(r, d, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn solve_cpu_example() {
        use crate::Mat;
        // R = [[2, 1], [0, 4], [0, 0]], d = [4, 8, 3]: x = [1, 2], residual 3.
        let r = Mat::<f64>::from_fn(3, 2, |i, j| [[2.0, 1.0], [0.0, 4.0], [0.0, 0.0]][i][j]);
        let d = Mat::<f64>::from_col(&[4.0, 8.0, 3.0]);
        let sol = solve_cpu(&r, &d, 2).unwrap();
        assert_eq!((sol.x[(0, 0)], sol.x[(1, 0)]), (1.0, 2.0));
        assert_eq!(sol.residual_norms, vec![3.0]);
    }
}
