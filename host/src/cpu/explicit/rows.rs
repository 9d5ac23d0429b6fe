//! Row insertion and deletion on explicit factors (docs/algorithms.md#explicit-factors).

use super::dense::Dense;
use super::orth::project_out;
use super::rotation::Rotation;
use super::Factors;
use crate::base::field::Field;
use crate::base::scalar::Scalar;

/// Inserts the row `u` (length n) before row `k` of A.
///
/// Q grows by the unit row and column of the new row, R by `u` as its last row; rotations
/// (j, last) zero u against R's diagonal, j = 0..min(rows of R, n). An economic Q then
/// drops the decoupled last column (and R its zero last row).
pub(crate) fn insert_row<T: Field>(f: &mut Factors<T>, k: usize, u: &[T]) {
    let economic = f.economic();
    let t = f.q.cols();
    f.q.insert_row(k, &vec![T::zero(); t]);
    let mut unit = vec![T::zero(); f.q.rows()];
    unit[k] = T::one();
    f.q.insert_col(t, &unit);
    f.r.insert_row(t, u);
    for j in 0..t.min(f.r.cols()) {
        let (rot, rho) = Rotation::zeroing(j, t, f.r.at(j, j), f.r.at(t, j));
        f.r.set(j, j, rho);
        f.r.set(t, j, T::zero());
        rot.rows(&mut f.r, j + 1);
        rot.cols(&mut f.q);
    }
    if economic {
        f.q.remove_col(t);
        f.r.remove_row(t);
    }
}

/// Why a row could not be deleted from an economic factorisation.
pub(crate) const NO_COMPLETION: &str =
    "no unit vector orthogonal to Q was found to complete it (Q's columns are not orthonormal)";

/// Deletes row `k` of A.
///
/// With x = conj(Q[k, :]), rotations (last, j), j from the last column down, gather x into
/// its last entry; row k of Q becomes a unit multiple of e_lastᵀ, so row k and column last
/// of Q and row last of R decouple and are dropped. R stays upper trapezoidal: the last
/// row is zero left of j + 1 when step j mixes it into row j. An economic Q is first
/// completed by a unit vector orthogonal to its columns ([`completion`]) and R by a zero
/// row.
pub(crate) fn delete_row<T: Field>(f: &mut Factors<T>, k: usize) -> Result<(), &'static str> {
    if f.economic() {
        let u = completion(&f.q, k).ok_or(NO_COMPLETION)?;
        let t = f.q.cols();
        f.q.insert_col(t, &u);
        f.r.insert_row(t, &vec![T::zero(); f.r.cols()]);
    }
    let last = f.q.cols() - 1;
    let mut x: Vec<T> = (0..=last).map(|j| f.q.at(k, j).conj()).collect();
    for j in (0..last).rev() {
        let (rot, rho) = Rotation::zeroing(last, j, x[last], x[j]);
        x[last] = rho;
        x[j] = T::zero();
        rot.rows(&mut f.r, j);
        rot.cols(&mut f.q);
    }
    f.q.remove_row(k);
    f.q.remove_col(last);
    f.r.remove_row(last);
    Ok(())
}

/// A unit vector orthogonal to range(Q) whose entry k carries the part of e_k outside
/// range(Q): e_k projected out of range(Q), or, when e_k lies in range(Q) (its Q-row has
/// norm 1), e_j for the row j of least norm (Daniel, Gragg, Kaufman and Stewart 1976, as
/// SciPy does). `None` when that fails too.
fn completion<T: Field>(q: &Dense<T>, k: usize) -> Option<Vec<T>> {
    let unit = |i: usize| {
        let mut e = vec![T::zero(); q.rows()];
        e[i] = T::one();
        e
    };
    let mut p = project_out(q, &unit(k));
    if p.in_span {
        let row_norm = |i: usize| {
            (0..q.cols()).fold(<T::Real as Scalar>::ZERO, |a, j| {
                a.hypot(q.at(i, j).modulus())
            })
        };
        let j = (0..q.rows()).min_by(|&a, &b| {
            row_norm(a)
                .partial_cmp(&row_norm(b))
                .unwrap_or(core::cmp::Ordering::Equal)
        })?;
        p = project_out(q, &unit(j));
        if p.in_span {
            return None;
        }
        // e_k ∈ range(Q), so the completion is orthogonal to e_k: its entry k is zero
        p.rest[k] = T::zero();
    }
    let inv = <T::Real as Scalar>::ONE / p.norm;
    Some(p.rest.iter().map(|&x| x.scale(inv)).collect())
}
