//! Column insertion and deletion on explicit factors
//! (docs/algorithms.md#explicit-factors).

use super::orth::{extend, project_out};
use super::rotation::Rotation;
use super::Factors;
use crate::base::field::Field;
use crate::base::scalar::Scalar;

/// Inserts the column `u` (length m) before column `k` of A.
///
/// Full Q: w = Qᴴu becomes column k of R, and rotations (i − 1, i) from the bottom up to
/// row k + 1 zero it below the diagonal (their fill-in lands on the diagonal of the
/// shifted columns, so R stays upper trapezoidal). Economic Q: u's part outside range(Q)
/// extends Q by one column and w by its norm first; it is refused when the reciprocal
/// condition estimate of [Q, u/‖u‖] is below `rcond` (`Err` with the estimate).
pub(crate) fn insert_col<T: Field>(
    f: &mut Factors<T>,
    k: usize,
    u: &[T],
    rcond: f64,
) -> Result<(), f64> {
    let w = if f.economic() {
        let p = project_out(&f.q, u);
        let un = super::dense::norm(u).to_f64();
        let (rest, coeffs) = (p.norm.to_f64(), super::dense::norm(&p.coeffs).to_f64());
        // [Q, û] has singular values 1 and √(1 ± ‖Qᴴû‖); 1 − ‖Qᴴû‖ ≈ ‖û − QQᴴû‖²/(1 + ‖Qᴴû‖)
        let rc = if un > 0.0 {
            (rest / un) / (1.0 + (coeffs / un).min(1.0))
        } else {
            0.0
        };
        if rc.is_nan() || rc < rcond || p.norm == <T::Real as Scalar>::ZERO {
            return Err(rc);
        }
        extend(f, p, true)
    } else {
        f.q.adjoint_times(u)
    };
    f.r.insert_col(k, &w);
    for i in (k + 1..f.r.rows()).rev() {
        let (rot, rho) = Rotation::zeroing(i - 1, i, f.r.at(i - 1, k), f.r.at(i, k));
        f.r.set(i - 1, k, rho);
        f.r.set(i, k, T::zero());
        rot.rows(&mut f.r, k + 1);
        rot.cols(&mut f.q);
    }
    Ok(())
}

/// Deletes column `k` of A: the columns right of it keep one entry below the diagonal,
/// which rotations (c, c + 1) zero left to right. An economic Q then drops its decoupled
/// last column (and R its zero last row).
pub(crate) fn delete_col<T: Field>(f: &mut Factors<T>, k: usize) {
    let economic = f.economic();
    f.r.remove_col(k);
    let (t, n) = (f.r.rows(), f.r.cols());
    for c in k..n.min(t.saturating_sub(1)) {
        let (rot, rho) = Rotation::zeroing(c, c + 1, f.r.at(c, c), f.r.at(c + 1, c));
        f.r.set(c, c, rho);
        f.r.set(c + 1, c, T::zero());
        rot.rows(&mut f.r, c + 1);
        rot.cols(&mut f.q);
    }
    if economic {
        f.q.remove_col(t - 1);
        f.r.remove_row(t - 1);
    }
}
