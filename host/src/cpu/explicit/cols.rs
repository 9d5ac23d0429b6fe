//! Column insertion and deletion on explicit factors
//! (docs/algorithms.md#explicit-factors).

use super::orth::{extend, project_out};
use super::rotation::Rotation;
use super::BLOCK;
use super::{Factors, QStore};
use crate::base::error::Result;
use crate::base::field::Field;
use crate::base::scalar::Scalar;

/// Inserts the column `u` (length m) before column `k` of A.
///
/// Full Q: w = Qᴴu becomes column k of R, and rotations (i − 1, i) from the bottom up to
/// row k + 1 zero it below the diagonal (their fill-in lands on the diagonal of the
/// shifted columns, so R stays upper trapezoidal). Economic Q: u's part outside range(Q)
/// extends Q by one column and w by its norm first; it is refused when the reciprocal
/// condition estimate of [Q, u/‖u‖] is below `rcond` (`Ok(Err)` with the estimate, the
/// factors untouched). `Err` only for a failure of Q's store.
pub(crate) fn insert_col<T: Field, Q: QStore<T>>(
    f: &mut Factors<T, Q>,
    k: usize,
    u: &[T],
    rcond: f64,
) -> Result<core::result::Result<(), f64>> {
    let w = if f.economic() {
        let p = project_out(&mut f.q, u)?;
        let un = super::dense::norm(u).to_f64();
        let (rest, coeffs) = (p.norm.to_f64(), super::dense::norm(&p.coeffs).to_f64());
        // [Q, û] has singular values 1 and √(1 ± ‖Qᴴû‖); 1 − ‖Qᴴû‖ ≈ ‖û − QQᴴû‖²/(1 + ‖Qᴴû‖)
        let rc = if un > 0.0 {
            (rest / un) / (1.0 + (coeffs / un).min(1.0))
        } else {
            0.0
        };
        if rc.is_nan() || rc < rcond || p.norm == <T::Real as Scalar>::ZERO {
            return Ok(Err(rc));
        }
        extend(f, p, true)?
    } else {
        f.q.adjoint_times(u)?
    };
    let mut w = w;
    // Rows n..t of R are zero (R was upper trapezoidal with n columns): a full Q's
    // columns n..t meet only w, so one reflector gathers w's tail into row n
    // (docs/algorithms.md#full-column-insertion-by-a-reflector) where rotations would take
    // t − n − 1 steps; rotations then do rows k..=n.
    let n0 = f.r.cols();
    let mut last = w.len().saturating_sub(1);
    if w.len() > n0 + 2 {
        if let Some((v, tau, beta)) = reflector(&w[n0..]) {
            f.q.reflect_cols(n0, &v, tau)?;
            w[n0] = beta;
            w[n0 + 1..].fill(T::zero());
        }
        last = n0;
    }
    // the rotations depend on w alone; rotation i (rows i − 1, i) meets column c > k only
    // when i ≤ c (left of that both rows are zero; its fill-in lands at (i, i))
    let mut rots = Vec::new();
    for i in (k + 1..=last).rev() {
        let (rot, rho) = Rotation::zeroing(i - 1, i, w[i - 1], w[i]);
        w[i - 1] = rho;
        w[i] = T::zero();
        f.q.rotate(rot.for_q())?;
        rots.push(rot);
    }
    f.r.insert_col(k, &w);
    let (t, n) = (f.r.rows(), f.r.cols());
    // rots run from the bottom: those with bot ≤ c are a suffix; BLOCK columns at once
    let mut c0 = k + 1;
    while c0 < n {
        let c1 = (c0 + BLOCK).min(n);
        let common = rots.partition_point(|r| r.bot > c0);
        let mut cols = f.r.columns_mut(c0, c1, |c| t.min(c + 1));
        for (i, col) in cols.iter_mut().enumerate() {
            let first = rots.partition_point(|r| r.bot > c0 + i);
            Rotation::on_columns(&rots[first..common], &mut [&mut **col]);
        }
        Rotation::on_columns(&rots[common..], &mut cols);
        f.r.trim_cols(c0, c1);
        c0 = c1;
    }
    Ok(Ok(()))
}

/// Deletes column `k` of A: the columns right of it keep one entry below the diagonal,
/// which rotations (c, c + 1) zero left to right. An economic Q then drops its decoupled
/// last column (and R its zero last row).
pub(crate) fn delete_col<T: Field, Q: QStore<T>>(f: &mut Factors<T, Q>, k: usize) -> Result<()> {
    let economic = f.economic();
    f.r.remove_col(k);
    let (t, n) = (f.r.rows(), f.r.cols());
    let lim = n.min(t.saturating_sub(1));
    // BLOCK columns at once: the rotations made left of them, then each column's own
    // rotation, applied to the block's columns right of it
    let mut rots: Vec<Rotation<T>> = Vec::new();
    let mut c0 = k;
    while c0 < n {
        let c1 = (c0 + BLOCK).min(n);
        let mut cols = f.r.columns_mut(c0, c1, |c| t.min(c + 2));
        Rotation::on_columns(&rots, &mut cols);
        for i in 0..cols.len() {
            let c = c0 + i;
            if c < lim {
                let rot = Rotation::make_subdiagonal(&mut cols, i, c);
                f.q.rotate(rot.for_q())?;
                rots.push(rot);
            }
        }
        f.r.trim_cols(c0, c1);
        c0 = c1;
    }
    if economic {
        f.q.pop_col()?;
        f.r.pop_row();
    }
    Ok(())
}

/// The Hermitian reflector P = I − τ·v·vᴴ with P·x = β·e₀, β = −(x₀/|x₀|)·‖x‖ (−‖x‖ when
/// x₀ = 0): v = x − β·e₀, τ = 2/(vᴴv). `None` when x is zero (nothing to gather).
fn reflector<T: Field>(x: &[T]) -> Option<(Vec<T>, T::Real, T)> {
    let norm = super::dense::norm(x);
    if norm == <T::Real as Scalar>::ZERO || !Scalar::is_finite(norm) {
        return None;
    }
    let x0 = x[0];
    let a0 = x0.modulus();
    let phase = if a0 == <T::Real as Scalar>::ZERO {
        T::one()
    } else {
        x0.scale(<T::Real as Scalar>::ONE / a0)
    };
    let beta = -phase.scale(norm);
    let mut v = x.to_vec();
    v[0] = x0 - beta;
    // vᴴv = 2‖x‖(‖x‖ + |x₀|), no cancellation
    let vv = (norm + norm) * (norm + a0);
    Some((
        v,
        (<T::Real as Scalar>::ONE + <T::Real as Scalar>::ONE) / vv,
        beta,
    ))
}
