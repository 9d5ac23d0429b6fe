//! The CPU path.
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
