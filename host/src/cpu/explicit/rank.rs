//! Rank-one updates A + u·vᴴ of explicit factors (docs/algorithms.md#explicit-factors).

use super::orth::{extend, project_out};
use super::rotation::Rotation;
use super::Factors;
use crate::base::field::Field;

/// A ← A + u·vᴴ (u of length m, v of length n).
///
/// w = Qᴴu is gathered into its first entry by rotations (i − 1, i) from the bottom (R
/// becomes upper Hessenberg), w₀·vᴴ is added to R's first row, and rotations (i, i + 1)
/// zero the subdiagonal again. An economic Q is first extended by u's part outside
/// range(Q) (a zero column when u lies in range(Q)) and w by its norm; the extra column
/// and R's zero last row are dropped at the end.
pub(crate) fn rank_one<T: Field>(f: &mut Factors<T>, u: &[T], v: &[T]) {
    let economic = f.economic();
    let mut w = if economic {
        let p = project_out(&f.q, u);
        let unit = !p.in_span;
        extend(f, p, unit)
    } else {
        f.q.adjoint_times(u)
    };
    let (t, n) = (f.r.rows(), f.r.cols());
    for i in (1..t).rev() {
        let (rot, rho) = Rotation::zeroing(i - 1, i, w[i - 1], w[i]);
        w[i - 1] = rho;
        w[i] = T::zero();
        rot.rows(&mut f.r, i - 1);
        rot.cols(&mut f.q);
    }
    if t > 0 {
        for (j, &vj) in v.iter().enumerate() {
            let x = f.r.at(0, j) + w[0] * vj.conj();
            f.r.set(0, j, x);
        }
    }
    for i in 0..n.min(t.saturating_sub(1)) {
        let (rot, rho) = Rotation::zeroing(i, i + 1, f.r.at(i, i), f.r.at(i + 1, i));
        f.r.set(i, i, rho);
        f.r.set(i + 1, i, T::zero());
        rot.rows(&mut f.r, i + 1);
        rot.cols(&mut f.q);
    }
    if economic {
        f.q.remove_col(t - 1);
        f.r.remove_row(t - 1);
    }
}
