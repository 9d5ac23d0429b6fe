//! Validation and shapes, shared by both backends so that they fail alike.
#![forbid(unsafe_code)]

#[allow(unused_imports)]
use super::*;

pub(super) const OP: &str = "delete_rows";

/// A validated row deletion (docs/algorithms.md#row-deletion): what both backends execute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Rows before the update.
    pub m: usize,
    /// Columns n (unchanged).
    pub n: usize,
    /// Number of deleted rows.
    pub p: usize,
    /// First deleted row (0-based, ≤ m − p).
    pub k0: usize,
}

/// Validates deleting rows k0..k0+p (docs/algorithms.md#row-deletion,
/// docs/algorithms.md#conventions: k0 ∈ [0, m−p]).
///
/// # Errors
/// [`Error::EmptyBlock`] (p = 0), [`Error::OutOfRange`] (k0 + p > m),
/// [`Error::Underdetermined`] (m − p < n).
pub(crate) fn plan(dims: Dims, k0: usize, p: usize) -> Result<Plan> {
    if p == 0 {
        return Err(Error::EmptyBlock { op: OP });
    }
    if k0.checked_add(p).is_none_or(|end| end > dims.m) {
        return Err(Error::OutOfRange {
            op: OP,
            k0,
            p,
            n: dims.m,
        });
    }
    if dims.m - p < dims.n {
        return Err(Error::Underdetermined {
            op: OP,
            m: dims.m - p,
            n: dims.n,
        });
    }
    Ok(Plan {
        m: dims.m,
        n: dims.n,
        p,
        k0,
    })
}

/// Q, R and d after the rotations of docs/algorithms.md#row-deletion, before the first p
/// rows/columns are dropped:
/// Z·G = [Δ, 0] with Δ ≈ I, and GᵀR = [S; R̃] with R̃ upper trapezoidal up to rounding.
pub(crate) struct Rotated<T> {
    pub q: Mat<T>,
    pub r: Mat<T>,
    pub d: Mat<T>,
}

/// Applies the rotations of docs/algorithms.md#row-deletion to copies of Q, R and d. For each row i
/// of Z (i = 0..p) and j = m−1 down to i+1, the rotation on plane (j−1, j) zeroes Z(i, j)
/// against Z(i, j−1) of the current Q. While row i is processed R has i sub-diagonals, so
/// rows ≥ n+i are zero: planes with j−1 ≥ n+i skip R, and the others touch only
/// columns ≥ j−1−i (docs/algorithms.md#live-column-range).
pub(crate) fn rotate_out<T: Scalar>(q: &Mat<T>, r: &Mat<T>, d: &Mat<T>, plan: &Plan) -> Rotated<T> {
    let Plan { m, n, p, k0 } = *plan;
    let (mut q, mut r, mut d) = (q.clone(), r.clone(), d.clone());
    let nrhs = d.ncols();
    for i in 0..p {
        let zi = k0 + i;
        for j in (i + 1..m).rev() {
            let (c, s, rho) = givens(q[(zi, j - 1)], q[(zi, j)]);
            let (x, y) = q.two_cols_mut(j - 1, j);
            rot(c, s, x, y);
            x[zi] = rho;
            y[zi] = T::ZERO;
            if j - 1 < n + i {
                for col in (j - 1).saturating_sub(i)..n {
                    let (mut a, mut b) = (r[(j - 1, col)], r[(j, col)]);
                    rot_pair(c, s, &mut a, &mut b);
                    r[(j - 1, col)] = a;
                    r[(j, col)] = b;
                }
            }
            for k in 0..nrhs {
                let (mut a, mut b) = (d[(j - 1, k)], d[(j, k)]);
                rot_pair(c, s, &mut a, &mut b);
                d[(j - 1, k)] = a;
                d[(j, k)] = b;
            }
        }
    }
    Rotated { q, r, d }
}

/// Validates `delete_rows_with`: rows k0..k0+p (p = the rows given) as [`plan`] does, the
/// rows p×n and their right-hand sides p×q, all finite. Returns p.
///
/// # Errors
/// As [`plan`]; [`Error::Shape`] (rows or rhs of the wrong shape); [`Error::NonFinite`].
pub(crate) fn plan_given<T: Scalar>(
    dims: Dims,
    k0: usize,
    rows: MatRef<'_, T>,
    rhs: MatRef<'_, T>,
) -> Result<usize> {
    let p = rows.nrows();
    for (what, got, expected) in [
        ("columns of rows", rows.ncols(), dims.n),
        ("rows of rhs", rhs.nrows(), p),
        ("columns of rhs", rhs.ncols(), dims.q),
    ] {
        if got != expected {
            return Err(Error::Shape {
                op: OP,
                what,
                got,
                expected,
            });
        }
    }
    plan(dims, k0, p)?;
    for (what, m) in [("rows", rows), ("rhs", rhs)] {
        if let Some((row, col)) = m.first_non_finite() {
            return Err(Error::NonFinite {
                op: OP,
                what,
                row,
                col,
            });
        }
    }
    Ok(p)
}
